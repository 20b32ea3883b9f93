//! What several test files share: the tests' actuators ([`actuators`]),
//! the agent's workload table seen from outside ([`workloads`]),
//! a one-container pod, and waiting on real processes and their output.
#![allow(dead_code, clippy::disallowed_methods)] // each test file uses its own part; a test may panic

pub mod actuators;
pub mod workloads;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use grace_core::{Name, Record};
use grace_std::store::{StoredContainer, StoredObject};

/// A pod with uid `uid` on node-a, with one container `app` (with a
/// pre-stop hook of `sleep 100` if `pre_stop`).
pub fn pod(uid: &str, pre_stop: bool) -> StoredObject {
    let mut object =
        StoredObject::on_node(Record::new(Name::try_from(uid).expect("short")), "node-a");
    object.containers = vec![
        StoredContainer::named("app").with_pre_stop_hook(pre_stop.then(|| "sleep 100".into())),
    ];
    object
}

/// Polls `ok` every 50 ms until it holds; fails the test naming `what`
/// after `limit`.
pub fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ok() {
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether CI runs the tests: `CI=true` (or `CI=1`), as CI services set
/// it.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// For a test that needs a tool this machine lacks (`what` says which
/// and how to install it): outside CI the test says it is skipped, and
/// its caller returns, so it passes; under `CI=true` it fails, as CI
/// (`.ci/run`) installs every tool the tests need and a test that never
/// runs there proves nothing.
pub fn missing_tool(what: &str) {
    let current = std::thread::current();
    let test = current.name().unwrap_or("this test");
    assert!(
        !in_ci(),
        "{test}: {what}; with CI=true a missing tool fails the test (.ci/run installs it)"
    );
    eprintln!("{test}: skipped: {what}");
}

/// Whether the process whose pid `pid_file` holds is running (exists and
/// is not a zombie).
pub fn alive(pid_file: &Path) -> bool {
    // A file the workload has opened (`echo $$ > file` truncates first)
    // but not written yet holds no pid: not alive yet. (Read as "", it
    // once named `/proc/` itself, which exists.)
    let Some(pid) = std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|p| p.trim().parse::<u32>().ok())
    else {
        return false;
    };
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
}

/// The lines a process prints (a `grace get -w`), read on a thread of
/// their own, so that a process that stops printing fails the test after
/// a bound instead of hanging it.
pub struct Lines(mpsc::Receiver<String>);

impl Lines {
    /// Reads `output` line by line.
    pub fn of(output: impl Read + Send + 'static) -> Lines {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(output).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Lines(rx)
    }

    /// The next line, waiting up to 20 s for it.
    pub fn next(&self) -> String {
        self.0
            .recv_timeout(Duration::from_secs(20))
            .expect("a line within 20 s")
    }

    /// The lines up to and including the first one for which `last` holds.
    pub fn until(&self, last: impl Fn(&str) -> bool) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            let line = self.next();
            let done = last(&line);
            seen.push(line);
            if done {
                return seen;
            }
        }
    }
}

/// SIGKILLs every workload and hook an agent left running in the
/// workload table `dir` (an agent that stops leaves them running): for
/// tests that are done with them. Only processes that are still the ones
/// recorded (same pid and start time) are signalled.
pub fn kill_left_workloads(dir: &Path) {
    let records = workloads::records(dir);
    for (_, record) in &records {
        workloads::kill(record);
    }
    for (file, record) in &records {
        wait_for("a left workload gone", Duration::from_secs(10), || {
            workloads::is_gone(record)
        });
        if let Some(cgroup) = &record.cgroup {
            let _ = std::fs::remove_dir(cgroup);
        }
        // The agent's cgroup directory too, once empty.
        if let Some(parent) = record.cgroup.as_deref().and_then(Path::parent) {
            let _ = std::fs::remove_dir(parent);
        }
        let _ = std::fs::remove_file(file);
    }
}
