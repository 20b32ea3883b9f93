//! `grace logs [pod/]NAME|-l SELECTOR [-c CONTAINER|--all-containers]
//! [--prefix] [-f] [--tail N] [-p]`: containers' output, as the agent of
//! this machine keeps it (see [`ContainerLogs`]): the rotated copies,
//! oldest first, then the file being written. The files outlive the agent
//! (a restarted agent carries on with them) and go with the object's
//! record.
//!
//! Which containers, as kubectl picks them: `-c`; every one with
//! `--all-containers` (one after another); else the one the annotation
//! `kubectl.kubernetes.io/default-container` names, or the first, with
//! kubectl's `Defaulted container "a" out of: a, b` on standard error
//! when there are several.

use std::io::Write;
use std::path::Path;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use crate::kubectl::{CommandError, Target, fetch};
use crate::process::logs::cri::{LogLine, LogTime};
use crate::process::logs::{ContainerLogs, LogFollower, LogLimits};
use crate::store::StoredObject;

/// How often `-f` looks for new output.
const FOLLOW_POLL: StdDuration = StdDuration::from_millis(200);
/// How often `-f` checks that the object is still there.
const FOLLOW_CHECK: StdDuration = StdDuration::from_secs(1);

/// The annotation that names a pod's default container (kubectl's).
pub const DEFAULT_CONTAINER: &str = "kubectl.kubernetes.io/default-container";

/// `grace logs`' flags.
#[derive(Clone, Debug, Default)]
pub struct LogsOptions {
    /// `-c`: the container; the default one when left out.
    pub container: Option<String>,
    /// `--all-containers`: every container, one after another.
    pub all_containers: bool,
    /// `--prefix`: each line begins with `[pod/NAME/CONTAINER] `.
    pub prefix: bool,
    /// `-f`: keep printing until the object is deleted.
    pub follow: bool,
    /// `--tail N`: only the last N lines.
    pub tail: Option<usize>,
    /// `-p`, `--previous`: the output of the container's run before its
    /// last restart (kubectl's message if it has none).
    pub previous: bool,
    /// `--since`, `--since-time`: only lines read at this time or later
    /// (lines of files written before records had times are left out).
    pub since: Option<LogTime>,
    /// `--timestamps`: each line begins with the time the agent read it.
    pub timestamps: bool,
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
    let mut printer = Printer::new(name, object, index, options);
    let mut lines = Vec::new();
    for copy in &files {
        let bytes = std::fs::read(copy)
            .map_err(|e| CommandError::failed(format!("{}: {e}", copy.display())))?;
        lines.append(&mut printer.decoder.feed(&bytes));
    }
    lines.append(&mut printer.decoder.finish());
    printer.print(out, select(lines, options))
}

/// The lines `--since` and `--tail` keep.
fn select(mut lines: Vec<LogLine>, options: &LogsOptions) -> Vec<LogLine> {
    if let Some(since) = options.since {
        lines.retain(|l| l.time.is_some_and(|t| t >= since));
    }
    if let Some(n) = options.tail {
        let _ = lines.drain(..lines.len().saturating_sub(n));
    }
    lines
}

/// Prints the output of the containers `options` picks (see the module
/// docs) of each object stored as one of `names`, one after another;
/// kubectl's `Defaulted container` line goes to `err`.
pub fn print_all(
    target: Target<'_>,
    data_dir: &Path,
    names: &[String],
    options: &LogsOptions,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<(), CommandError> {
    for name in names {
        let object = fetch(target, name)?
            .ok_or_else(|| CommandError::failed(crate::kubectl::not_found(name)))?;
        let indices = containers(name, &object, options, err)?;
        if options.follow && indices.len() > 1 {
            return Err(CommandError::invalid(
                "-f follows one container: name it with -c",
            ));
        }
        for index in indices {
            print(target, data_dir, name, &object, index, options, out)?;
        }
    }
    Ok(())
}

/// The indices of the containers to show, as kubectl picks them.
fn containers(
    name: &str,
    object: &StoredObject,
    options: &LogsOptions,
    err: &mut impl Write,
) -> Result<Vec<usize>, CommandError> {
    let names: Vec<&str> = object.containers.iter().map(|c| c.name.as_str()).collect();
    if options.all_containers {
        return Ok((0..names.len()).collect());
    }
    if let Some(wanted) = options.container.as_deref() {
        return names
            .iter()
            .position(|n| *n == wanted)
            .map(|i| vec![i])
            .ok_or_else(|| {
                CommandError::failed(format!(
                    "container {wanted} is not valid for pod {}",
                    crate::namespace::name_of(name)
                ))
            });
    }
    let annotated = object
        .manifest
        .as_ref()
        .and_then(|m| m.to_json().ok())
        .and_then(|m| {
            m.pointer("/metadata/annotations")
                .and_then(|a| a.get(DEFAULT_CONTAINER))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        })
        .and_then(|wanted| names.iter().position(|n| *n == wanted));
    let Some(first) = names.first() else {
        return Err(CommandError::failed(format!(
            "object \"{}\" has no containers",
            crate::namespace::name_of(name)
        )));
    };
    match annotated {
        Some(i) => Ok(vec![i]),
        None => {
            if names.len() > 1 {
                let _ = writeln!(
                    err,
                    "Defaulted container \"{first}\" out of: {}",
                    names.join(", ")
                );
            }
            Ok(vec![0])
        }
    }
}

/// Prints the output of container `index` of the object `name` to `out`.
/// `data_dir` is where this machine's agent keeps its logs (with a shared
/// store, the agent of the object's node on this machine).
fn print(
    target: Target<'_>,
    data_dir: &Path,
    name: &str,
    object: &StoredObject,
    index: usize,
    options: &LogsOptions,
    out: &mut impl Write,
) -> Result<(), CommandError> {
    let object = object.clone();
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
    let mut printer = Printer::new(name, &object, index, options);
    let mut lines = Vec::new();
    for copy in files.iter().filter(|f| **f != current) {
        let bytes = std::fs::read(copy)
            .map_err(|e| CommandError::failed(format!("{}: {e}", copy.display())))?;
        lines.append(&mut printer.decoder.feed(&bytes));
    }
    if let Some(follower) = follower.as_mut() {
        lines.append(&mut printer.decoder.feed(&follower.read_new().map_err(failed)?));
    }
    if !options.follow {
        // A line whose end is not written yet is shown as it is; `-f`
        // waits for its end.
        lines.append(&mut printer.decoder.finish());
    }
    printer.print(out, select(lines, options))?;
    if options.follow {
        follow(
            target,
            name,
            object.uid(),
            &current,
            follower,
            &mut printer,
            out,
        )?;
    }
    Ok(())
}

/// Lines read back from records and printed as the flags ask:
/// `--prefix`'s `[pod/NAME/CONTAINER] `, then `--timestamps`' time.
struct Printer {
    prefix: Option<String>,
    timestamps: bool,
    decoder: crate::process::logs::cri::Decoder,
}

impl Printer {
    fn new(name: &str, object: &StoredObject, index: usize, options: &LogsOptions) -> Self {
        let prefix = options.prefix.then(|| {
            format!(
                "[{}/{}/{}] ",
                crate::kubectl::kind_word(object),
                crate::namespace::name_of(name),
                container_name(object, index)
            )
        });
        Printer {
            prefix,
            timestamps: options.timestamps,
            decoder: crate::process::logs::cri::Decoder::new(),
        }
    }

    fn print(&self, out: &mut impl Write, lines: Vec<LogLine>) -> Result<(), CommandError> {
        let mut text = Vec::new();
        for line in lines {
            if let Some(prefix) = &self.prefix {
                text.extend_from_slice(prefix.as_bytes());
            }
            if self.timestamps
                && let Some(time) = line.time
            {
                text.extend_from_slice(time.rfc3339_nanos().as_bytes());
                text.push(b' ');
            }
            text.extend_from_slice(&line.text);
        }
        write_all(out, &text)
    }
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
    printer: &mut Printer,
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
            let lines = printer.decoder.feed(&bytes);
            printer.print(out, lines)?;
        }
        if gone {
            let rest = printer.decoder.finish();
            return printer.print(out, rest);
        }
    }
}

fn write_all(out: &mut impl Write, bytes: &[u8]) -> Result<(), CommandError> {
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(|e| CommandError::failed(format!("writing the output: {e}")))
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
