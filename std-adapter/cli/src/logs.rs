//! `grace logs NAME [-c CONTAINER] [-f] [--tail N] [-p]`: a container's output,
//! as the agent of this machine keeps it (see [`ContainerLogs`]): the rotated
//! copies, oldest first, then the file being written. The files outlive
//! the agent (a restarted agent carries on with them) and go with the
//! object's record.

use std::io::Write;
use std::path::Path;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use crate::kubectl::{CommandError, Target, fetch};
use crate::process::logs::{ContainerLogs, LogFollower, LogLimits, last_lines};
use crate::store::StoredObject;

/// How often `-f` looks for new output.
const FOLLOW_POLL: StdDuration = StdDuration::from_millis(200);
/// How often `-f` checks that the object is still there.
const FOLLOW_CHECK: StdDuration = StdDuration::from_secs(1);

/// `grace logs`' flags.
#[derive(Clone, Debug, Default)]
pub struct LogsOptions {
    /// `-c`: the container; may be left out when there is one.
    pub container: Option<String>,
    /// `-f`: keep printing until the object is deleted.
    pub follow: bool,
    /// `--tail N`: only the last N lines.
    pub tail: Option<usize>,
    /// `-p`, `--previous`: the output of the container's run before its
    /// last restart (kubectl's message if it has none).
    pub previous: bool,
}

/// `--previous`: the output of the container's run before its last
/// restart, which the agent keeps as the kubelet keeps one previous
/// instance; kubectl's message if it was never restarted.
fn previous(
    logs: &ContainerLogs,
    name: &str,
    object: &StoredObject,
    index: usize,
    options: &LogsOptions,
    out: &mut impl Write,
) -> Result<(), CommandError> {
    let not_found = || {
        CommandError::failed(format!(
            "previous terminated container \"{}\" in pod \"{name}\" not found",
            container_name(object, index)
        ))
    };
    let restarted = object.restarts.get(index).is_some_and(|r| r.count > 0);
    let files = logs
        .previous_file(name, object, index)
        .map(|p| ContainerLogs::files(&p))
        .unwrap_or_default();
    if !restarted || files.is_empty() {
        return Err(not_found());
    }
    let mut text = Vec::new();
    for copy in &files {
        let mut bytes = std::fs::read(copy)
            .map_err(|e| CommandError::failed(format!("{}: {e}", copy.display())))?;
        text.append(&mut bytes);
    }
    let shown = match options.tail {
        Some(n) => last_lines(&text, n),
        None => &text[..],
    };
    write_all(out, shown)
}

/// Prints the output of a container of the object `name` to `out`.
/// `data_dir` is where this machine's agent keeps its logs (with a shared
/// store, the agent of the object's node on this machine).
pub fn print(
    target: Target<'_>,
    data_dir: &Path,
    name: &str,
    options: &LogsOptions,
    out: &mut impl Write,
) -> Result<(), CommandError> {
    let not_found = || CommandError::failed(crate::kubectl::not_found(name));
    let object = fetch(target, name)?.ok_or_else(not_found)?;
    let index = container(name, &object, options.container.as_deref())?;
    let shared_node = match target {
        Target::Agent(_) => None,
        Target::Shared(_) => object.node.as_deref(),
    };
    let logs = grace_agent::container_logs(data_dir, shared_node, LogLimits::default());
    if options.previous {
        return previous(&logs, name, &object, index, options, out);
    }
    let Some(current) = logs.file(name, &object, index) else {
        return Err(CommandError::failed(format!(
            "object \"{name}\" has no container {index}"
        )));
    };
    let files = ContainerLogs::files(&current);
    if files.is_empty() {
        // A file that cannot be looked at is not a file never written.
        if let Err(e) = std::fs::symlink_metadata(&current)
            && e.kind() == std::io::ErrorKind::PermissionDenied
        {
            return Err(CommandError::failed(format!(
                "permission denied reading the output of container \"{}\" of object \"{name}\" \
                 under {}: the agent keeps its containers' logs private to its own user \
                 (`--allow-group` lets a group reach the socket, not the logs); \
                 run `grace logs` as the agent's user or root",
                container_name(&object, index),
                logs.dir().display()
            )));
        }
    }
    if files.is_empty() && !options.follow {
        return Err(CommandError::failed(format!(
            "no output kept for container \"{}\" of object \"{name}\" under {}: \
             it was not started by an agent on this data directory",
            container_name(&object, index),
            logs.dir().display()
        )));
    }
    let failed = |e: std::io::Error| CommandError::failed(format!("{}: {e}", current.display()));
    // Opened once: what is read from it later is there even if the
    // record (and its logs) goes meanwhile.
    let mut follower = LogFollower::open(&current).ok();
    let mut text = Vec::new();
    for copy in files.iter().filter(|f| **f != current) {
        let mut bytes = std::fs::read(copy)
            .map_err(|e| CommandError::failed(format!("{}: {e}", copy.display())))?;
        text.append(&mut bytes);
    }
    if let Some(follower) = follower.as_mut() {
        text.append(&mut follower.read_new().map_err(failed)?);
    }
    let shown = match options.tail {
        Some(n) => last_lines(&text, n),
        None => &text[..],
    };
    write_all(out, shown)?;
    if options.follow {
        follow(target, name, object.uid(), &current, follower, out)?;
    }
    Ok(())
}

/// Prints what the file `current` gets from where `follower` is, until
/// the object `name` with uid `uid` is gone (then what it wrote last, and
/// the end).
fn follow(
    target: Target<'_>,
    name: &str,
    uid: &str,
    current: &Path,
    mut follower: Option<LogFollower>,
    out: &mut impl Write,
) -> Result<(), CommandError> {
    let mut checked = StdInstant::now();
    loop {
        std::thread::sleep(FOLLOW_POLL);
        let gone = if checked.elapsed() >= FOLLOW_CHECK {
            checked = StdInstant::now();
            fetch(target, name)?.is_none_or(|o| o.uid() != uid)
        } else {
            false
        };
        if follower.is_none() {
            // Not started when we began: it may have been since.
            follower = LogFollower::open(current).ok();
        }
        if let Some(follower) = follower.as_mut() {
            let bytes = follower
                .read_new()
                .map_err(|e| CommandError::failed(format!("{}: {e}", current.display())))?;
            write_all(out, &bytes)?;
        }
        if gone {
            return Ok(());
        }
    }
}

fn write_all(out: &mut impl Write, bytes: &[u8]) -> Result<(), CommandError> {
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(|e| CommandError::failed(format!("writing the output: {e}")))
}

/// The index of the container `-c` names, or of the only one.
fn container(
    name: &str,
    object: &StoredObject,
    wanted: Option<&str>,
) -> Result<usize, CommandError> {
    let names: Vec<&str> = object.containers.iter().map(|c| c.name.as_str()).collect();
    match wanted {
        Some(wanted) => names.iter().position(|n| *n == wanted).ok_or_else(|| {
            CommandError::invalid(format!(
                "-c {wanted}: object \"{name}\" has no such container (containers: {})",
                names.join(", ")
            ))
        }),
        None if names.len() == 1 => Ok(0),
        None if names.is_empty() => Err(CommandError::failed(format!(
            "object \"{name}\" has no containers"
        ))),
        None => Err(CommandError::invalid(format!(
            "-c: object \"{name}\" has {} containers, name one of: {}",
            names.len(),
            names.join(", ")
        ))),
    }
}

fn container_name(object: &StoredObject, index: usize) -> String {
    object
        .containers
        .get(index)
        .map_or_else(|| index.to_string(), |c| c.name.clone())
}

#[cfg(test)]
mod tests {
    use crate::process::logs::last_lines;

    #[test]
    fn tail_takes_the_last_lines_with_or_without_a_final_newline() {
        let cases: [(&str, usize, &str); 7] = [
            ("a\nb\nc\n", 2, "b\nc\n"),
            ("a\nb\nc", 2, "b\nc"),
            ("a\nb\nc\n", 5, "a\nb\nc\n"),
            ("a\nb\nc\n", 0, ""),
            ("", 3, ""),
            ("only\n", 1, "only\n"),
            ("\n\n", 1, "\n"),
        ];
        for (text, n, want) in cases {
            let got = last_lines(text.as_bytes(), n);
            assert_eq!(got, want.as_bytes(), "{text:?} --tail {n}");
        }
    }
}
