//! Container output kept by a real `grace agent`: one log file per
//! container in the data directory, read with `grace logs` (also after the
//! agent was killed and started again), bounded by rotation at any write
//! rate, and removed with the object's record.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::common::{alive, wait_for};
use support::{Agent, GRACE, grace, text};

/// Applies a pod bound to the agent's node with these containers
/// (`(name, shell command)`), grace 1 s.
fn apply(dir: &Path, name: &str, containers: &[(&str, &str)]) {
    let containers: Vec<serde_json::Value> = containers
        .iter()
        .map(|(c, cmd)| serde_json::json!({"name": c, "command": ["sh", "-c", cmd]}))
        .collect();
    let object = serde_json::json!({
        "metadata": {"name": name},
        "spec": {"nodeName": "local", "terminationGracePeriodSeconds": 1, "containers": containers},
    });
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, object.to_string()).expect("written");
    let out = grace(dir, &["apply", "-f", path.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

fn logs(dir: &Path, args: &[&str]) -> String {
    let out = grace(dir, &[&["logs"], args].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// The log files of every container under `dir`, with their sizes.
fn log_files(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut files = Vec::new();
    let Ok(objects) = std::fs::read_dir(dir.join("logs")) else {
        return files;
    };
    for object in objects.flatten() {
        for file in std::fs::read_dir(object.path())
            .expect("readable")
            .flatten()
        {
            // The container's pipe (a FIFO) is no log file.
            if !file.file_type().is_ok_and(|t| t.is_file()) {
                continue;
            }
            let len = file.metadata().map_or(0, |m| m.len());
            files.push((file.path(), len));
        }
    }
    files.sort();
    files
}

#[test]
fn logs_keep_stdout_and_stderr_per_container_across_an_agent_crash() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pid = dir.path().join("app.pid");
    let side_pid = dir.path().join("side.pid");
    let agent = Agent::start(dir.path(), &[]);
    apply(
        dir.path(),
        "web",
        &[
            (
                "app",
                &format!(
                    "echo $$ > {}; echo hello from app; echo oops >&2; exec sleep 1000",
                    pid.display()
                ),
            ),
            (
                "side",
                &format!(
                    "echo $$ > {}; echo hello from side; exec sleep 1000",
                    side_pid.display()
                ),
            ),
        ],
    );
    wait_for("both containers wrote", Duration::from_secs(10), || {
        log_files(dir.path()).iter().all(|(_, len)| *len > 0) && log_files(dir.path()).len() == 2
    });
    assert_eq!(
        logs(dir.path(), &["web", "-c", "app"]),
        "hello from app\noops\n"
    );
    assert_eq!(
        logs(dir.path(), &["web", "-c", "side"]),
        "hello from side\n"
    );

    // Private: 0600 files in 0700 directories.
    for (file, _) in log_files(dir.path()) {
        let mode = std::fs::metadata(&file).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", file.display());
        let parent = std::fs::metadata(file.parent().expect("dir")).expect("stat");
        assert_eq!(parent.permissions().mode() & 0o777, 0o700);
    }
    let logs_dir = std::fs::metadata(dir.path().join("logs")).expect("stat");
    assert_eq!(logs_dir.permissions().mode() & 0o777, 0o700);

    // The agent crashes and comes back: the files and what they hold stay.
    agent.crash();
    let agent = Agent::start(dir.path(), &[]);
    assert_eq!(
        logs(dir.path(), &["web", "-c", "app"]),
        "hello from app\noops\n"
    );
    assert_eq!(
        logs(dir.path(), &["web", "-c", "app", "--tail", "1"]),
        "oops\n"
    );

    // Without an agent the files are read all the same.
    drop(agent);
    assert_eq!(
        logs(dir.path(), &["web", "-c", "side"]),
        "hello from side\n"
    );

    // The restarted agent adopted the crashed one's workloads; its drop
    // above stopped it and then them.
    for pid in [&pid, &side_pid] {
        assert!(!alive(pid), "{} left running", pid.display());
    }
}

#[test]
fn logs_follow_prints_new_output_until_the_object_is_deleted_and_go_with_its_record() {
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(dir.path(), &[]);
    apply(
        dir.path(),
        "ticker",
        &[(
            "app",
            "trap 'echo bye; exit 0' TERM; i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.1; done",
        )],
    );
    wait_for("output", Duration::from_secs(10), || {
        log_files(dir.path()).iter().any(|(_, len)| *len > 0)
    });
    // What -f prints goes to a file, read while it follows.
    let printed = dir.path().join("followed.txt");
    let follow = Command::new(GRACE)
        .args(["logs", "ticker", "-f", "--tail", "1", "--data-dir"])
        .arg(dir.path())
        .stdout(std::fs::File::create(&printed).expect("output file"))
        .stderr(Stdio::piped())
        .spawn()
        .expect("follows");
    let ticks = |text: &str| -> Vec<u64> {
        text.lines()
            .filter_map(|l| l.strip_prefix("tick ")?.parse().ok())
            .collect()
    };
    wait_for("-f prints new lines", Duration::from_secs(20), || {
        ticks(&std::fs::read_to_string(&printed).unwrap_or_default()).len() >= 5
    });
    let out = grace(dir.path(), &["delete", "ticker"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let started = Instant::now();
    let out = follow.wait_with_output().expect("ends");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "-f ends once the object is deleted"
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = std::fs::read_to_string(&printed).expect("followed");
    let ticks = ticks(&printed);
    assert!(ticks.len() >= 5, "new lines were followed: {printed}");
    assert!(
        ticks.windows(2).all(|w| w[1] == w[0] + 1),
        "in order, none lost: {printed}"
    );
    assert!(printed.ends_with("bye\n"), "up to the last line: {printed}");

    wait_for(
        "the logs go with the record",
        Duration::from_secs(5),
        || log_files(dir.path()).is_empty(),
    );
    let out = grace(dir.path(), &["logs", "ticker"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("not found"));
}

#[test]
fn rotation_bounds_each_containers_log() {
    const MAX: u64 = 4096;
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(
        dir.path(),
        &["--log-max-size", "4Ki", "--log-max-files", "2"],
    );
    // About 6 KB a second: past the bound every second or so. It also
    // keeps the number of its last line in `count`.
    let count = dir.path().join("count");
    apply(
        dir.path(),
        "chatty",
        &[(
            "app",
            &format!(
                "i=0; while :; do i=$((i+1)); printf 'line %06d %050d\\n' $i 0; echo $i > {}; sleep 0.01; done",
                count.display()
            ),
        )],
    );
    let written = || {
        std::fs::read_to_string(&count)
            .ok()
            .and_then(|c| c.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    // Watched until the log was rotated and 300 lines were written: about
    // 5 s, longer on a loaded machine (each line forks a `sleep`).
    let started = Instant::now();
    let mut rotated = false;
    while !(rotated && written() > 300) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "rotated ({rotated}) and 300 lines written ({}) within 60 s",
            written()
        );
        let files = log_files(dir.path());
        let total: u64 = files.iter().map(|(_, len)| len).sum();
        // Two files of MAX, and what ~6 KB/s adds between two checks
        // (every 500 ms) with room for a loaded machine.
        assert!(total <= 2 * MAX + 8192, "{total} bytes: {files:?}");
        assert!(files.len() <= 2, "{files:?}");
        rotated |= files
            .iter()
            .any(|(p, _)| p.to_string_lossy().ends_with(".log.1"));
        std::thread::sleep(Duration::from_millis(50));
    }
    // The newest output is kept and reads in order across the files.
    let numbers = |all: &str| -> Vec<u64> {
        all.lines()
            .filter_map(|l| l.split(' ').nth(1)?.parse().ok())
            .collect()
    };
    let mut all = String::new();
    wait_for(
        "the newest lines in the log",
        Duration::from_secs(20),
        || {
            all = logs(dir.path(), &["chatty"]);
            numbers(&all).last().is_some_and(|last| *last > 300)
        },
    );
    let numbers = numbers(&all);
    assert!(numbers.len() > 20, "{all}");
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "oldest first");
    let last = numbers.last().copied().unwrap_or(0);
    assert!(last > 300, "the newest lines are there: {last}");
}

#[test]
fn logs_default_to_the_first_container_and_refuse_unknown_ones() {
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(dir.path(), &[]);
    apply(
        dir.path(),
        "two",
        &[("a", "exec sleep 1000"), ("b", "exec sleep 1000")],
    );
    // kubectl's default: the first container, said on standard error.
    let out = grace(dir.path(), &["logs", "two"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        "Defaulted container \"a\" out of: a, b\n"
    );
    let out = grace(dir.path(), &["logs", "two", "-c", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("container nope is not valid for pod two"),
        "{}",
        text(&out.stderr)
    );
    let out = grace(dir.path(), &["logs", "absent"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("Error from server (NotFound): pods \"absent\" not found"));
    // No container was restarted: none has a previous instance (kubectl's
    // words and exit code).
    let out = grace(dir.path(), &["logs", "two", "-c", "b", "--previous"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("previous terminated container \"b\" in pod \"two\" not found"),
        "{}",
        text(&out.stderr)
    );
    let out = grace(dir.path(), &["delete", "two", "--grace-period", "1"]);
    assert!(out.status.success());
}

/// The sizes of `app.log`, `app.log.1` and `app.log.2` of the one object
/// under the agent's log directory (0 for a file not there).
fn app_sizes(dir: &Path) -> [u64; 3] {
    let Some(object) = std::fs::read_dir(dir.join("logs"))
        .ok()
        .and_then(|mut d| d.next())
        .and_then(Result::ok)
    else {
        return [0; 3];
    };
    ["app.log", "app.log.1", "app.log.2"]
        .map(|name| std::fs::metadata(object.path().join(name)).map_or(0, |m| m.len()))
}

#[test]
fn a_full_speed_writer_keeps_no_more_than_size_times_files() {
    const MAX: u64 = 1024 * 1024;
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(
        dir.path(),
        &["--log-max-size", "1Mi", "--log-max-files", "2"],
    );
    // `yes` writes as fast as it can: the issue saw 1.5 GB in 2 s.
    apply(dir.path(), "fast", &[("app", "exec yes")]);
    wait_for("rotated", Duration::from_secs(10), || {
        app_sizes(dir.path())[1] > 0
    });
    let first_copy = |dir: &Path| {
        use std::os::unix::fs::MetadataExt;
        let object = std::fs::read_dir(dir.join("logs"))
            .ok()?
            .next()?
            .ok()?
            .path();
        std::fs::metadata(object.join("app.log.1"))
            .ok()
            .map(|m| m.ino())
    };
    let mut copies = std::collections::HashSet::new();
    let started = Instant::now();
    // Four seconds at least, and until the file was rotated a few times
    // more (slower on a loaded machine).
    while started.elapsed() < Duration::from_secs(4) || copies.len() < 4 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "it kept writing: {} rotations",
            copies.len()
        );
        let sizes = app_sizes(dir.path());
        // The bound, exactly: no slack.
        assert!(sizes[0] <= MAX && sizes[1] <= MAX, "{sizes:?}");
        assert_eq!(sizes[2], 0, "2 files at most: {sizes:?}");
        copies.extend(first_copy(dir.path()));
        std::thread::sleep(Duration::from_millis(10));
    }
    // What is kept is the writer's output, whole lines read in order: a
    // file's worth of records at least (each `y` line is a record of 42
    // bytes, its time and tag included).
    let all = logs(dir.path(), &["fast"]);
    assert!(
        all.lines().count() as u64 >= MAX / 42,
        "{} bytes",
        all.len()
    );
    assert!(
        all.lines().skip(1).all(|l| l == "y"),
        "only `y` lines (the first may be cut)"
    );
    let out = grace(dir.path(), &["delete", "fast"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn dropped_bytes_are_counted_and_marked_in_the_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(
        dir.path(),
        &["--log-max-size", "8Ki", "--log-max-files", "2"],
    );
    apply(
        dir.path(),
        "chatty",
        &[(
            "app",
            "i=0; while :; do i=$((i+1)); printf 'line %06d %050d\\n' $i 0; sleep 0.01; done",
        )],
    );
    wait_for("rotated", Duration::from_secs(10), || {
        app_sizes(dir.path())[1] > 0
    });
    let object = std::fs::read_dir(dir.path().join("logs"))
        .expect("logs")
        .flatten()
        .next()
        .expect("an object")
        .path();
    let copy = object.join("app.log.1");
    // A directory where the rotation renames the full file: it cannot, and
    // what the container writes meanwhile is dropped.
    wait_for("the rotation blocked", Duration::from_secs(10), || {
        let _ = std::fs::remove_file(&copy);
        std::fs::create_dir(&copy).is_ok()
    });
    std::fs::write(copy.join("in-the-way"), "").expect("written");
    // The file being written fills up, then output is dropped for a while.
    // Full: no room for another record of 103 bytes (a line of 63 and
    // its time and tag), which would not be cut between two files.
    wait_for("full", Duration::from_secs(10), || {
        app_sizes(dir.path())[0] > 8 * 1024 - 103
    });
    std::thread::sleep(Duration::from_millis(500));
    std::fs::remove_dir_all(&copy).expect("removed");
    // The marker, and the container writing on after it, on lines of
    // their own (read at once: the files turn over every second or so).
    let mut marker = String::new();
    wait_for("marked and written on", Duration::from_secs(10), || {
        let all = logs(dir.path(), &["chatty"]);
        let Some((before, from)) = all.split_once("[grace: ") else {
            return false;
        };
        assert!(
            before.is_empty() || before.ends_with('\n'),
            "the marker starts a line"
        );
        let (line, after) = from.split_once('\n').unwrap_or((from, ""));
        marker = format!("[grace: {line}");
        after.lines().filter(|l| l.starts_with("line ")).count() >= 3
    });
    let dropped: u64 = marker
        .strip_prefix("[grace: ")
        .and_then(|m| m.strip_suffix(" bytes dropped]"))
        .and_then(|n| n.parse().ok())
        .expect("a count");
    // Lines of 63 bytes every 10 ms or so, for 500 ms at least (the first
    // may have been cut: its start filled the file).
    assert!(dropped > 0, "{marker}");
    let out = grace(dir.path(), &["delete", "chatty"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn output_written_while_no_agent_runs_is_kept_and_the_workload_lives_on() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pid = dir.path().join("app.pid");
    let agent = Agent::start(dir.path(), &[]);
    apply(
        dir.path(),
        "ticker",
        &[(
            "app",
            &format!(
                "echo $$ > {}; i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.02; done",
                pid.display()
            ),
        )],
    );
    let ticks = |dir: &Path| -> Vec<u64> {
        let out = grace(dir, &["logs", "ticker"]);
        text(&out.stdout)
            .lines()
            .filter_map(|l| l.strip_prefix("tick ")?.parse().ok())
            .collect()
    };
    wait_for("ticking", Duration::from_secs(10), || {
        ticks(dir.path()).len() >= 5
    });
    agent.crash();
    let before = ticks(dir.path());
    let at_crash = before.len();
    let last_logged = before.last().copied().unwrap_or(0);
    // No agent reads the pipe: the workload writes on into it (no SIGPIPE).
    std::thread::sleep(Duration::from_millis(500));
    assert!(alive(&pid), "the workload lives without an agent");
    let _agent = Agent::start(dir.path(), &[]);
    wait_for("ticking on", Duration::from_secs(10), || {
        ticks(dir.path()).len() > at_crash + 25
    });
    let all = ticks(dir.path());
    assert!(
        all.windows(2).all(|w| w[1] > w[0]),
        "none repeated, in order: {all:?}"
    );
    assert_eq!(all.first(), Some(&1));
    // What docs/logs.md promises across the crash: nothing lost but what
    // the killed agent had read and not yet written, at the crash (one
    // read: the lines written at that instant), and nothing written while
    // no agent ran. The ticks missing are one run right after the last
    // one logged before the crash.
    let missing: Vec<u64> = (1..=*all.last().expect("ticks"))
        .filter(|t| !all.contains(t))
        .collect();
    assert!(
        missing
            .iter()
            .enumerate()
            .all(|(i, t)| *t == last_logged + 1 + i as u64),
        "only the lines the crash cut are lost (last logged before it: \
         {last_logged}): missing {missing:?} of {all:?}"
    );
    assert!(missing.len() <= 5, "a read's worth at most: {missing:?}");
    let out = grace(dir.path(), &["delete", "ticker"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}
