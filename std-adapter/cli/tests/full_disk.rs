//! A full disk under a real agent (docs/agent.md, "What survives what"):
//! requests that cannot be written fail cleanly, the agent's own steps (a
//! deadline's, a process exit's) that cannot be written are retried with
//! back-off while the agent stays up, the condition is in its log and in
//! `grace describe`, and every deletion completes once there is room,
//! SIGKILL never before its time. The disk is a real 2 MiB tmpfs mounted
//! by the test (root only: skipped otherwise).
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

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use support::common::{alive, wait_for};
use support::{Agent, grace, text};

/// A 2 MiB tmpfs mounted on a temporary directory, unmounted when dropped.
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount() -> Option<SmallDisk> {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: mounting a small disk needs root");
            return None;
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=2m", "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            eprintln!("skipped: tmpfs cannot be mounted here");
        }
        mounted.then_some(SmallDisk(dir))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    /// Fills what is left of it.
    fn fill(&self) {
        let _ = std::fs::write(self.path().join("fill"), vec![0u8; 8 << 20]);
    }

    fn free(&self) {
        std::fs::remove_file(self.path().join("fill")).expect("filled");
    }

    /// Bytes still free.
    fn available(&self) -> u64 {
        let out = Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(self.path())
            .output()
            .expect("df runs");
        text(&out.stdout)
            .lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or(u64::MAX)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.path()).status();
    }
}

/// A pod bound to this node running `script` (its shell's pid written to
/// `pid` first), with `grace` seconds of grace.
fn pod(dir: &Path, name: &str, grace_seconds: u32, pid: &Path, script: &str) -> PathBuf {
    let object = serde_json::json!({
        "metadata": {"name": name},
        "spec": {"nodeName": "local", "terminationGracePeriodSeconds": grace_seconds,
                 "containers": [{"name": "app", "command": ["sh", "-c",
                     format!("echo $$ > {}; {script}", pid.display())]}]},
    });
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, object.to_string()).expect("written");
    file
}

fn apply(dir: &Path, file: &Path) -> Output {
    grace(dir, &["apply", "-f", file.to_str().expect("utf-8")])
}

/// Whether the agent's process is still running (not exited).
fn up(agent: &mut Agent) -> bool {
    agent.running()
}

/// How often `needle` appears in the agent's log.
fn lines_with(agent: &Agent, needle: &str) -> usize {
    agent.log().lines().filter(|l| l.contains(needle)).count()
}

/// What the agent's log says when its own writes start failing, and when
/// they work again (one line per change of state, not per retry).
const CANNOT_WRITE: &str = "cannot write its own steps";
const WRITES_AGAIN: &str = "writes its own steps again";

/// Three pods on a full 2 MiB disk: two being deleted (their SIGKILL
/// deadlines fall in the outage), one whose delete comes during it. The
/// agent stays up through many retries, says so in its log and in
/// `describe`; once there is room every deletion completes, each SIGKILL
/// no sooner than its grace (R62) and no later than the outage made it.
#[test]
fn r62_a_full_disk_keeps_the_agent_up_and_every_deletion_completes_once_there_is_room() {
    let Some(disk) = SmallDisk::mount() else {
        return;
    };
    let data = disk.path().join("data");
    let files = tempfile::tempdir().expect("temp dir");
    let mut agent = Agent::start(&data, &[]);
    // They ignore SIGTERM: only SIGKILL ends them.
    let stubborn = "trap '' TERM; while :; do sleep 0.05; done";
    let names = ["a", "b", "c"];
    let pids: Vec<PathBuf> = names
        .iter()
        .map(|n| files.path().join(format!("{n}.pid")))
        .collect();
    for (name, pid) in names.iter().zip(&pids) {
        let file = pod(files.path(), name, 3, pid, stubborn);
        let out = apply(&data, &file);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    wait_for("the workloads start", Duration::from_secs(10), || {
        pids.iter().all(|p| alive(p))
    });

    let deleted_at = Instant::now();
    for name in ["a", "b"] {
        let out = grace(&data, &["delete", name, "--wait=false"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    disk.fill();
    assert_eq!(disk.available(), 0, "the disk is full");

    // Requests fail cleanly, with the reason.
    let d = pod(files.path(), "d", 3, &files.path().join("d.pid"), stubborn);
    let out = apply(&data, &d);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("No space left on device"),
        "{}",
        text(&out.stderr)
    );
    let out = grace(&data, &["delete", "c", "--wait=false"]);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "done or failed, never a crash: {}",
        text(&out.stderr)
    );

    // The SIGKILL deadlines pass: their steps cannot be written, the
    // agent says so once and retries.
    wait_for(
        "the agent reports that it cannot write",
        Duration::from_secs(20),
        || !up(&mut agent) || lines_with(&agent, CANNOT_WRITE) > 0,
    );
    assert!(up(&mut agent), "the agent stays up: {}", agent.log());
    // Several retry rounds (100 ms doubling: 0.1 + 0.2 + 0.4 + 0.8 + 1.6
    // s), the agent up and serving all along, the condition in describe.
    let outage = Instant::now();
    let mut described = false;
    while outage.elapsed() < Duration::from_secs(4) {
        assert!(up(&mut agent), "the agent stays up: {}", agent.log());
        let out = grace(&data, &["describe", "a"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let shown = text(&out.stdout);
        described |=
            shown.contains("store not writable") && shown.contains("No space left on device");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(described, "describe shows the condition");
    assert_eq!(
        lines_with(&agent, CANNOT_WRITE),
        1,
        "one line for the change, not one per retry: {}",
        agent.log()
    );

    disk.free();
    let freed = Instant::now();
    // c's delete may have failed on the full disk: it goes through now.
    let out = grace(
        &data,
        &["delete", "c", "--wait=false", "--ignore-not-found"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut killed = vec![None; names.len()];
    wait_for("every workload is killed", Duration::from_secs(30), || {
        for (i, pid) in pids.iter().enumerate() {
            if killed[i].is_none() && !alive(pid) {
                killed[i] = Some(Instant::now());
            }
        }
        killed.iter().all(Option::is_some)
    });
    for (i, at) in killed.iter().enumerate().take(2) {
        let at = at.expect("killed");
        // R62: never before the grace (3 s from the delete) is spent.
        assert!(
            at.duration_since(deleted_at) >= Duration::from_secs(3),
            "{}: SIGKILL after {:?}",
            names[i],
            at.duration_since(deleted_at)
        );
        // Late by the outage only: within the longest back-off (5 s)
        // of the room coming back, with a margin for a loaded machine.
        assert!(
            at.duration_since(freed) < Duration::from_secs(10),
            "{}: killed {:?} after there was room",
            names[i],
            at.duration_since(freed)
        );
    }
    wait_for("every object is removed", Duration::from_secs(20), || {
        names
            .iter()
            .all(|n| grace(&data, &["get", n]).status.code() == Some(1))
    });
    assert!(up(&mut agent), "{}", agent.log());
    assert_eq!(lines_with(&agent, WRITES_AGAIN), 1, "{}", agent.log());
    // The agent takes requests as before, and the condition is gone.
    let out = apply(&data, &d);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = grace(&data, &["describe", "d"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !text(&out.stdout).contains("store not writable"),
        "{}",
        text(&out.stdout)
    );
    let out = grace(&data, &["delete", "d", "--grace-period=1", "--timeout=20s"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// A workload that fills the disk with its own output (it floods its
/// standard output once told to stop) does not stop the agent, nor its own
/// SIGKILL: that goes out when the grace is spent, written or not (how far
/// the store's free pages go varies). The steps that cannot be written
/// (its exit, its removal) wait, and once room is made (its log truncated
/// by hand) it is removed.
#[test]
fn r62_a_workload_that_fills_the_disk_with_its_output_does_not_stop_the_agent() {
    let Some(disk) = SmallDisk::mount() else {
        return;
    };
    let data = disk.path().join("data");
    let files = tempfile::tempdir().expect("temp dir");
    let mut agent = Agent::start(&data, &[]);
    let pid = files.path().join("w.pid");
    let flood = "trap 'cat /dev/zero; while :; do sleep 0.05; done' TERM; \
                 while :; do sleep 0.05; done";
    let file = pod(files.path(), "w", 2, &pid, flood);
    let out = apply(&data, &file);
    assert!(out.status.success(), "{}", text(&out.stderr));
    wait_for("the workload starts", Duration::from_secs(10), || {
        alive(&pid)
    });

    let out = grace(&data, &["delete", "w", "--wait=false"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    wait_for("its output fills the disk", Duration::from_secs(10), || {
        disk.available() == 0
    });
    wait_for(
        "the agent reports that it cannot write",
        Duration::from_secs(20),
        || !up(&mut agent) || lines_with(&agent, CANNOT_WRITE) > 0,
    );
    let outage = Instant::now();
    while outage.elapsed() < Duration::from_secs(3) {
        assert!(up(&mut agent), "the agent stays up: {}", agent.log());
        std::thread::sleep(Duration::from_millis(100));
    }

    // R63: SIGKILL goes out when the grace is spent, though the disk is
    // still full and its write-ahead cannot be written.
    wait_for(
        "it is killed while the disk is full",
        Duration::from_secs(10),
        || !alive(&pid),
    );
    assert_eq!(disk.available(), 0, "the disk is still full");

    // Room, as an operator makes it: the log truncated.
    let logs = data.join("logs");
    let log = std::fs::read_dir(&logs)
        .expect("logs")
        .flatten()
        .map(|d| d.path().join("app.log"))
        .find(|p| p.exists())
        .expect("its log");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .and_then(|f| f.set_len(0))
        .expect("truncated");
    wait_for("it is removed", Duration::from_secs(15), || {
        grace(&data, &["get", "w"]).status.code() == Some(1)
    });
    assert!(up(&mut agent), "{}", agent.log());
    assert_eq!(lines_with(&agent, WRITES_AGAIN), 1, "{}", agent.log());
}
