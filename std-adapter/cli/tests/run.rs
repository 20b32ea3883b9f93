//! `grace run` with real processes: it exits with the command's status, and
//! a SIGTERM to grace stops the command the Kubernetes way.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

fn grace_run(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_grace"))
        .arg("run")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("grace starts")
}

/// Waits for `path` to appear: the command touches it once its traps are
/// installed, and grace set up its own signal handling before it started
/// the command, so a signal sent then is handled by both.
fn wait_for(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn terminate(child: &Child) {
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid")).expect("pid");
    kill_process(pid, Signal::TERM).expect("SIGTERM to grace");
}

#[test]
fn run_exits_with_the_commands_own_status() {
    let status = grace_run(&["--", "sh", "-c", "exit 7"])
        .wait()
        .expect("ends");
    assert_eq!(status.code(), Some(7));
}

#[test]
fn sigterm_to_grace_runs_the_pre_stop_hook_then_the_stop_signal() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path().display();
    let script = format!(
        "trap 'test -e {d}/hook && touch {d}/hook-before-term; exit 0' TERM; touch {d}/up; while :; do sleep 0.05; done"
    );
    let hook = format!("touch {d}/hook");
    let child = grace_run(&[
        "--grace-period",
        "10",
        "--pre-stop",
        &hook,
        "--",
        "sh",
        "-c",
        &script,
    ]);
    wait_for(&dir.path().join("up"));
    terminate(&child);
    let out = child.wait_with_output().expect("ends");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        dir.path().join("hook-before-term").exists(),
        "the hook ran before SIGTERM"
    );
}

#[test]
fn a_command_that_ignores_sigterm_is_killed_when_the_grace_is_spent() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path().display();
    let script = format!("trap '' TERM; touch {d}/up; while :; do sleep 0.05; done");
    let child = grace_run(&["--grace-period", "1", "--", "sh", "-c", &script]);
    wait_for(&dir.path().join("up"));
    let signalled = Instant::now();
    terminate(&child);
    let out = child.wait_with_output().expect("ends");
    // SIGKILL: 128 + 9; never sooner than 2 s after the stop signal (R62),
    // although the grace is 1 s.
    assert_eq!(
        out.status.code(),
        Some(137),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        signalled.elapsed() >= Duration::from_secs(2),
        "{:?}",
        signalled.elapsed()
    );
}

#[test]
fn a_configured_stop_signal_is_sent_instead_of_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path().display();
    let script = format!(
        "trap 'touch {d}/usr1; exit 0' USR1; trap '' TERM; touch {d}/up; while :; do sleep 0.05; done"
    );
    let child = grace_run(&["--stop-signal", "SIGUSR1", "--", "sh", "-c", &script]);
    wait_for(&dir.path().join("up"));
    terminate(&child);
    let out = child.wait_with_output().expect("ends");
    assert_eq!(out.status.code(), Some(0));
    assert!(dir.path().join("usr1").exists());
}

#[test]
fn an_unknown_stop_signal_is_a_usage_error_naming_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_grace"))
        .args(["run", "--stop-signal", "SIGBOGUS", "--", "true"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("SIGBOGUS") && err.contains("--stop-signal"),
        "{err}"
    );
}

#[test]
fn run_passes_stdout_through_to_the_command() {
    let out = Command::new(env!("CARGO_BIN_EXE_grace"))
        .args(["run", "--", "echo", "hi"])
        .stdin(Stdio::null())
        .output()
        .expect("grace runs");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
}

#[test]
fn run_passes_stdin_and_stderr_through_to_the_command() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_grace"))
        .args(["run", "--", "sh", "-c", "cat; echo oops >&2"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("grace starts");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("piped");
        stdin.write_all(b"x\ny\n").expect("written");
    } // closed: cat sees the end
    let out = child.wait_with_output().expect("grace exits");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "x\ny\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "oops\n");
}

fn signal(child: &Child, signal: Signal) {
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid")).expect("pid");
    kill_process(pid, signal).expect("signal to grace");
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[test]
fn other_signals_are_forwarded_to_the_command_and_grace_keeps_running() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path().display();
    let names = ["HUP", "USR1", "USR2", "ALRM", "WINCH", "QUIT", "CONT"];
    let traps: String = names
        .iter()
        .map(|n| format!("trap 'touch {d}/got-{n}' {n}; "))
        .collect();
    let script = format!("{traps}touch {d}/up; while :; do sleep 0.05; done");
    let mut child = grace_run(&["--", "sh", "-c", &script]);
    wait_for(&dir.path().join("up"));
    for (name, sig) in names.iter().zip([
        Signal::HUP,
        Signal::USR1,
        Signal::USR2,
        Signal::ALARM,
        Signal::WINCH,
        Signal::QUIT,
        Signal::CONT,
    ]) {
        signal(&child, sig);
        wait_for(&dir.path().join(format!("got-{name}")));
        assert!(
            child.try_wait().expect("status").is_none(),
            "grace ended on SIG{name}"
        );
    }
    terminate(&child);
    let out = child.wait_with_output().expect("ends");
    // The trap-less TERM ends sh: 128 + 15.
    assert_eq!(
        out.status.code(),
        Some(143),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_grace_run_killed_outright_takes_its_command_with_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path().display();
    let script =
        format!("echo $$ > {d}/pid.tmp; mv {d}/pid.tmp {d}/pid; while :; do sleep 0.05; done");
    let mut child = grace_run(&["--", "sh", "-c", &script]);
    wait_for(&dir.path().join("pid"));
    let pid: i32 = std::fs::read_to_string(dir.path().join("pid"))
        .expect("pid file")
        .trim()
        .parse()
        .expect("a pid");
    assert!(!gone(pid), "the command runs");
    signal(&child, Signal::KILL);
    let _ = child.wait().expect("grace ends");
    let start = Instant::now();
    while !gone(pid) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the command {pid} outlived grace"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_command_not_found_exits_127_and_one_not_executable_126() {
    let out = Command::new(env!("CARGO_BIN_EXE_grace"))
        .args(["run", "--", "/nonexistent/command"])
        .output()
        .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(127),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(env!("CARGO_BIN_EXE_grace"))
        .args(["run", "--", "no-such-command-on-the-path"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(127));
    let dir = tempfile::tempdir().expect("temp dir");
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "echo hi\n").expect("written");
    let out = Command::new(env!("CARGO_BIN_EXE_grace"))
        .args(["run", "--"])
        .arg(&plain)
        .output()
        .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(126),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("permission denied"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A directory is no command either.
    let out = Command::new(env!("CARGO_BIN_EXE_grace"))
        .args(["run", "--"])
        .arg(dir.path())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(126));
}
