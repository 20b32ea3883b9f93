//! What the CLI's tests share: `grace` run as a user runs it, and a real
//! `grace agent` on a temporary data directory, with the workloads it
//! leaves behind cleaned up when a test is done with them.
#![allow(dead_code)] // each test file uses its own part

#[path = "../../../tests/common/mod.rs"]
pub mod common;
pub mod https;
pub mod kube_api;
pub mod pids;
pub mod probe;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The `grace` binary under test.
pub const GRACE: &str = env!("CARGO_BIN_EXE_grace");

/// Bytes a command printed, as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `grace ARGS --data-dir DIR`.
pub fn grace(dir: &Path, args: &[&str]) -> Output {
    Command::new(GRACE)
        // The etcd tests' variable is also `--etcd`'s: these use a data dir.
        .env_remove("GRACE_ETCD_ENDPOINTS")
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .output()
        .expect("grace runs")
}

/// Sends SIGTERM to `child`.
pub fn terminate(child: &Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
}

/// A running `grace agent`, stopped with SIGTERM when dropped, and then
/// the workloads it leaves running too (they outlive it) unless it was
/// [`stop`](Agent::stop)ped or [`crash`](Agent::crash)ed on purpose: the
/// next agent adopts them. Its standard output and error go to a file
/// (a pipe nobody reads would stall a talkative agent).
pub struct Agent {
    child: Child,
    dir: PathBuf,
    log: tempfile::NamedTempFile,
    clean_up: bool,
}

impl Agent {
    /// `grace agent --data-dir DIR EXTRA…`, not yet started.
    pub fn command(dir: &Path, extra: &[&str]) -> Command {
        let mut command = Command::new(GRACE);
        command
            .env_remove("GRACE_ETCD_ENDPOINTS")
            // The log at its default level, whatever the caller's.
            .env_remove("RUST_LOG")
            .args(["agent", "--data-dir"])
            .arg(dir)
            .args(extra);
        command
    }

    /// Starts `grace agent --data-dir DIR EXTRA…` and waits until it serves.
    pub fn start(dir: &Path, extra: &[&str]) -> Agent {
        Agent::spawn(dir, Agent::command(dir, extra))
    }

    /// Starts `command` (an agent on `dir`, perhaps wrapped) and waits
    /// until it serves; an agent that exits first fails the test with its
    /// output.
    pub fn spawn(dir: &Path, mut command: Command) -> Agent {
        let log = tempfile::NamedTempFile::new().expect("log file");
        let out = log.reopen().expect("log file");
        let err = log.reopen().expect("log file");
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("agent starts");
        let mut agent = Agent {
            child,
            dir: dir.to_path_buf(),
            log,
            clean_up: true,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !grace_agent::is_serving(dir) {
            if let Some(status) = agent.child.try_wait().expect("waitable") {
                panic!("the agent exited at start ({status}): {}", agent.log());
            }
            assert!(Instant::now() < deadline, "the agent serves within 10 s");
            std::thread::sleep(Duration::from_millis(10));
        }
        agent
    }

    /// The agent's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// What the agent has printed so far (standard output and error).
    pub fn log(&self) -> String {
        let mut log = String::new();
        let _ = self.log.reopen().map(|mut f| f.read_to_string(&mut log));
        log
    }

    /// SIGTERM; the agent must exit successfully. Its workloads are left
    /// running for the next agent. Returns what it printed.
    pub fn stop(mut self) -> String {
        terminate(&self.child);
        let status = self.child.wait().expect("agent exits");
        let log = self.log();
        assert!(status.success(), "agent exit: {status:?}\n{log}");
        self.clean_up = false;
        log
    }

    /// Whether the agent's process is still running (has not exited).
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGKILL: the agent crashes and nothing is cleaned up (the next
    /// agent adopts its workloads).
    pub fn crash(mut self) {
        self.clean_up = false;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        terminate(&self.child);
        let _ = self.child.wait();
        // The workloads outlive the agent: the test is done with them.
        if self.clean_up {
            common::kill_left_workloads(&grace_agent::workloads_dir(&self.dir));
        }
    }
}
