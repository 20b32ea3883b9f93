//! The agent's workload table as the tests see it from outside: its
//! records and file names through grace-std's own definitions
//! (`process::table_format`, hidden: for tests), so that the format is
//! read in one place; the tests read and write the files as a later agent
//! would.

use std::fs;
use std::path::{Path, PathBuf};

use rustix::io::Errno;
use rustix::process::{Pid, Signal, kill_process_group, test_kill_process_group};

use grace_std::process::table_format::WorkloadTable;
#[allow(unused_imports, reason = "each test file uses its own part")]
pub use grace_std::process::table_format::{ProcessIdentity, WorkloadRecord, is_zombie};

/// The file (and cgroup) name of a workload: the object's name in hex,
/// the container, the kind.
pub fn file_name(object: &str, container: usize, hook: bool) -> String {
    WorkloadRecord::file_name(object, container, hook)
}

/// Writes `record` into the table `dir` (made, private, if missing).
pub fn write_record(dir: &Path, record: &WorkloadRecord) {
    WorkloadTable::open(dir)
        .expect("the table's directory")
        .write(record)
        .expect("the record written");
}

/// The readable records of the table `dir` (none if it is missing).
pub fn records(dir: &Path) -> Vec<(PathBuf, WorkloadRecord)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|path| Some((path.clone(), WorkloadRecord::from_file(&path)?)))
        .collect()
}

/// SIGKILLs what is left of a record's workload: its process group (if
/// its leader is still the recorded process) and its cgroup.
pub fn kill(record: &WorkloadRecord) {
    if record.process.is_alive()
        && let Some(pid) = group_pid(record.process.pid)
    {
        let _ = kill_process_group(pid, Signal::KILL);
    }
    if let Some(cgroup) = &record.cgroup {
        let _ = fs::write(cgroup.join("cgroup.kill"), "1");
    }
}

/// Whether nothing is left of a record's workload.
pub fn is_gone(record: &WorkloadRecord) -> bool {
    match &record.cgroup {
        Some(cgroup) => match fs::read_to_string(cgroup.join("cgroup.events")) {
            Ok(events) => events.lines().any(|l| l.trim() == "populated 0"),
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        },
        None => {
            !record.process.is_alive()
                || group_pid(record.process.pid)
                    .is_none_or(|pid| test_kill_process_group(pid) == Err(Errno::SRCH))
        }
    }
}

fn group_pid(pid: u32) -> Option<Pid> {
    i32::try_from(pid)
        .ok()
        .filter(|p| *p > 1)
        .and_then(Pid::from_raw)
}
