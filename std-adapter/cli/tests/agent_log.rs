//! `grace agent`'s log: the agent's `tracing` events on standard output,
//! filtered by `RUST_LOG` (default `info`), a real agent each time.
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

use std::path::Path;
use std::time::{Duration, Instant};

use support::{Agent, text};

/// An info line: the agent's start.
const STARTED: &str = "grace agent: node local, store ";
/// A debug line: the open files limit, at start.
const FILES_LIMIT: &str = "grace agent: open files limit ";
/// A warn line: a workload record that cannot be read, at start.
const UNREADABLE: &str = "grace agent: unreadable workload record ";

/// Starts `grace agent` on `dir` with `RUST_LOG` set to `filter` (unset
/// if `None`), stops it and returns its log.
fn log_with(dir: &Path, filter: Option<&str>) -> String {
    let mut command = Agent::command(dir, &[]);
    if let Some(filter) = filter {
        command.env("RUST_LOG", filter);
    }
    Agent::spawn(dir, command).stop()
}

#[test]
fn by_default_the_log_has_info_lines_and_no_debug_lines() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = log_with(dir.path(), None);
    assert!(log.contains(STARTED), "{log}");
    assert!(log.contains(" INFO "), "the level is printed: {log}");
    assert!(log.contains("0 workload(s) left running"), "{log}");
    assert!(!log.contains(FILES_LIMIT), "{log}");
}

#[test]
fn rust_log_warn_keeps_the_warnings_and_drops_the_info_lines() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A first agent makes the workload table; a record is damaged while
    // none runs.
    let _ = log_with(dir.path(), None);
    let table = grace_agent::workloads_dir(dir.path());
    std::fs::write(table.join("junk"), b"{").expect("damaged record");

    let log = log_with(dir.path(), Some("warn"));
    assert!(log.contains(UNREADABLE), "{log}");
    assert!(log.contains(" WARN "), "{log}");
    assert!(!log.contains(STARTED), "{log}");
    assert!(!log.contains(" INFO "), "{log}");
}

#[test]
fn rust_log_grace_agent_debug_shows_the_debug_lines() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = log_with(dir.path(), Some("grace_agent=debug,info"));
    assert!(log.contains(FILES_LIMIT), "{log}");
    assert!(log.contains(" DEBUG grace_agent::startup: "), "{log}");
    assert!(log.contains(STARTED), "{log}");
}

#[test]
fn an_unparsable_rust_log_is_refused_with_exit_code_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = Agent::command(dir.path(), &[])
        .env("RUST_LOG", "grace_agent=loud")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("grace runs");
    // An agent that started anyway would serve until stopped.
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().expect("waitable").is_none() {
        if Instant::now() > deadline || grace_agent::is_serving(dir.path()) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the agent started with an unparsable RUST_LOG");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("exited");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("grace agent: RUST_LOG=\"grace_agent=loud\": "),
        "{err}"
    );
    assert!(
        !dir.path().join("grace.redb").exists(),
        "nothing was opened"
    );
}
