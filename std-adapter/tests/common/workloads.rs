//! The agent's workload table as the tests see it from outside: its file
//! names and JSON records, and what tells one process apart from another
//! (pid, start time, boot). grace-std keeps its own types for these
//! private; the tests read and write the files as a later agent would.

use std::fs;
use std::path::{Path, PathBuf};

use rustix::io::Errno;
use rustix::process::{Pid, Signal, kill_process_group, test_kill_process_group};
use serde::{Deserialize, Serialize};

/// One process, as the table records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessIdentity {
    /// Its pid (the leader of its process group).
    pub pid: u32,
    /// Its start time, clock ticks since boot (`/proc/<pid>/stat` field 22).
    pub start_time: u64,
    /// The boot it was started in.
    pub boot_id: String,
}

impl ProcessIdentity {
    /// Process `pid` as it runs now, or `None` if it is gone.
    pub fn of(pid: u32) -> Option<Self> {
        Some(ProcessIdentity {
            pid,
            start_time: start_time(pid)?,
            boot_id: boot_id()?,
        })
    }

    /// Whether this very process still exists (a zombie counts): same
    /// boot, and its pid has the recorded start time.
    pub fn is_alive(&self) -> bool {
        boot_id().is_some_and(|b| b == self.boot_id)
            && start_time(self.pid) == Some(self.start_time)
    }
}

fn boot_id() -> Option<String> {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_owned())
}

/// The fields of `/proc/<pid>/stat` from field 3 (state) on: the command
/// name before them may hold spaces and parentheses.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after) = stat.rsplit_once(')')?;
    Some(after.split_whitespace().map(str::to_owned).collect())
}

fn start_time(pid: u32) -> Option<u64> {
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// Whether process `pid` has exited and waits to be reaped.
pub fn is_zombie(pid: u32) -> bool {
    stat_fields(pid).is_some_and(|f| f.first().is_some_and(|s| s == "Z"))
}

/// One record of the table, as the agent writes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadRecord {
    /// The object it belongs to.
    pub object: String,
    /// The container's index.
    pub container: usize,
    /// A pre-stop hook rather than the container's command.
    pub hook: bool,
    /// Its process.
    pub process: ProcessIdentity,
    /// Its cgroup, when workloads run in cgroups.
    #[serde(default)]
    pub cgroup: Option<PathBuf>,
    /// When its stop signal went out (ms on the runtime's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_signal_sent: Option<u64>,
    /// When SIGKILL is due (ms on the runtime's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigkill_at: Option<u64>,
    /// Its gate leaves a start marker before the command runs.
    #[serde(default)]
    pub marks_start: bool,
}

/// The file (and cgroup) name of a workload: the object's name in hex,
/// the container, the kind.
pub fn file_name(object: &str, container: usize, hook: bool) -> String {
    let hex: String = object.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{hex}.{container}.{}", if hook { "hook" } else { "main" })
}

/// Writes `record` into the table `dir` (made, private, if missing).
pub fn write_record(dir: &Path, record: &WorkloadRecord) {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .expect("the table's directory");
    let name = file_name(&record.object, record.container, record.hook);
    fs::write(
        dir.join(name),
        serde_json::to_vec(record).expect("a record encodes"),
    )
    .expect("the record written");
}

/// The readable records of the table `dir` (none if it is missing).
pub fn records(dir: &Path) -> Vec<(PathBuf, WorkloadRecord)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|path| {
            let record = serde_json::from_slice(&fs::read(&path).ok()?).ok()?;
            Some((path, record))
        })
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
