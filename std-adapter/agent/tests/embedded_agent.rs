//! The example `embedded_agent` run for real, inside this test's process:
//! an agent started from library code runs a real `sleep`, deletes it the
//! graceful way (R1: the stop signal first) and stops; then its store is
//! free for the next agent.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::disallowed_methods,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

#[allow(dead_code, reason = "the example's `main` is not called here")]
#[path = "../examples/embedded_agent.rs"]
mod example;

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

/// The pids of the processes whose command line is exactly `args`.
fn processes(args: &[&str]) -> Vec<u32> {
    let wanted: Vec<u8> = args
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted))
        .collect()
}

/// Whether `pid` is gone (or a zombie not reaped yet by anyone but us).
fn gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z "))
}

#[test]
fn r1_an_agent_run_from_library_code_runs_and_deletes_a_real_sleep() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let data_dir = dir.path().join("data");
    // A command line no other process has.
    let seconds = format!("600.{}", std::process::id());
    let command = ["sleep", seconds.as_str()];
    let (tx, rx) = mpsc::channel();
    let run = {
        let data_dir = data_dir.clone();
        let seconds = seconds.clone();
        std::thread::spawn(move || {
            let mut running = Vec::new();
            let result = example::run(&data_dir, &["sleep", seconds.as_str()], |_| {
                // Running: its waiter started; the `sleep` itself is
                // exec'd a moment later (later still on a loaded machine).
                let since = std::time::Instant::now();
                loop {
                    running = processes(&["sleep", seconds.as_str()]);
                    if !running.is_empty() || since.elapsed() > Duration::from_secs(20) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
            .map_err(|e| e.to_string());
            let _ = tx.send((result, running));
        })
    };
    let (result, running) = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the example finished within a minute");
    run.join().expect("the example's thread");
    assert_eq!(result, Ok(()));
    assert_eq!(running.len(), 1, "one real `sleep` ran: {running:?}");
    assert!(gone(running[0]), "the `sleep` is gone once its pod is");
    assert!(processes(&command).iter().all(|&p| gone(p)));
    assert!(
        !Path::new(&data_dir).join("grace.sock").exists(),
        "the socket is removed"
    );

    // The store was closed with the agent: the next one opens it at once.
    let next = grace_agent::Agent::start(grace_agent::AgentOptions::new(&data_dir))
        .expect("a second agent on the same data directory");
    next.shutdown();
    next.join().expect("stopped");
}

/// An agent run from library code leaves the program's own children to the
/// program: by default it does not make the process a subreaper, whose
/// reaper would take their exits first (`Command::output` would fail with
/// "No child processes").
#[test]
fn the_host_program_still_waits_for_its_own_children_while_an_agent_runs() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let data_dir = dir.path().join("data");
    let seconds = format!("601.{}", std::process::id());
    let (tx, rx) = mpsc::channel();
    let run = std::thread::spawn(move || {
        let mut codes = Vec::new();
        let result = example::run(&data_dir, &["sleep", seconds.as_str()], |_| {
            // The agent runs a workload now: its reaper is busy.
            for _ in 0..20 {
                let status = std::process::Command::new("sh")
                    .args(["-c", "exit 3"])
                    .output()
                    .map(|o| o.status.code());
                codes.push(status.map_err(|e| e.to_string()));
            }
        })
        .map_err(|e| e.to_string());
        let _ = tx.send((result, codes));
    });
    let (result, codes) = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the example finished within a minute");
    run.join().expect("the example's thread");
    assert_eq!(result, Ok(()));
    assert_eq!(codes.len(), 20);
    assert!(
        codes.iter().all(|c| c == &Ok(Some(3))),
        "every child's exit came to the program: {codes:?}"
    );
}
