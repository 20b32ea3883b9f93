//! What tells one process apart from any other on this machine: its pid,
//! its start time and the boot it runs in.
//!
//! A pid alone is not enough: once a process is gone the kernel hands its
//! pid to the next process that asks. The start time (field 22 of
//! `/proc/<pid>/stat`, clock ticks since boot) does not change for the
//! life of a process (an `exec` keeps it), so the same pid with the same
//! start time on the same boot is the same process.

use std::fs;

use serde::{Deserialize, Serialize};

/// The kernel's id of this boot (`/proc/sys/kernel/random/boot_id`), or
/// `None` if it cannot be read.
pub fn boot_id() -> Option<String> {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// The start time of process `pid` (clock ticks since boot), or `None` if
/// there is no such process (or it is a zombie already reaped).
pub fn start_time(pid: u32) -> Option<u64> {
    stat_start_time(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Field 22 of a `/proc/<pid>/stat` line.
fn stat_start_time(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may hold spaces or
    // parentheses of its own: the fields after it start after the last ')'.
    let (_, after) = stat.rsplit_once(')')?;
    // `after` starts with field 3 (state): field 22 is the 20th from here.
    after.split_whitespace().nth(19)?.parse().ok()
}

/// Whether process `pid` is a zombie: it has exited and waits for its
/// parent to reap it.
pub fn is_zombie(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let (_, after) = stat.rsplit_once(')')?;
            after.split_whitespace().next().map(|s| s == "Z")
        })
        .unwrap_or(false)
}

/// One process, as recorded when it was started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessIdentity {
    /// Its pid (also its process group: it leads one of its own).
    pub pid: u32,
    /// Its start time, clock ticks since boot (`/proc/<pid>/stat` field 22).
    pub start_time: u64,
    /// The boot it was started in.
    pub boot_id: String,
}

impl ProcessIdentity {
    /// The identity of process `pid` as it runs now, or `None` if it is
    /// gone or the boot id cannot be read.
    pub fn of(pid: u32) -> Option<Self> {
        Some(ProcessIdentity {
            pid,
            start_time: start_time(pid)?,
            boot_id: boot_id()?,
        })
    }

    /// Whether this very process still exists (a zombie counts: its pid
    /// is not free yet): same boot, and its pid has the recorded start time
    /// (otherwise the pid now belongs to another process, which must never
    /// be signalled in its place).
    pub fn is_alive(&self) -> bool {
        boot_id().is_some_and(|b| b == self.boot_id)
            && start_time(self.pid) == Some(self.start_time)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_itself_and_a_reused_pid_is_not() {
        let me = ProcessIdentity::of(std::process::id()).expect("readable");
        assert!(me.is_alive());
        let other_start = ProcessIdentity {
            start_time: me.start_time.wrapping_add(1),
            ..me.clone()
        };
        assert!(!other_start.is_alive());
        let other_boot = ProcessIdentity {
            boot_id: "another boot".into(),
            ..me
        };
        assert!(!other_boot.is_alive());
    }

    #[test]
    fn a_command_name_with_parentheses_and_spaces_is_skipped() {
        let stat = "42 (a) b (c) S 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(stat_start_time(stat), Some(987_654));
        assert_eq!(stat_start_time("42 (x) S 1"), None);
    }

    #[test]
    fn a_reaped_process_has_no_start_time() {
        let mut child = std::process::Command::new("true").spawn().expect("true");
        let pid = child.id();
        let _ = child.wait();
        assert_eq!(start_time(pid), None);
    }
}
