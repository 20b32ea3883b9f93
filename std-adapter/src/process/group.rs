//! What one workload's processes are, for signalling and for knowing when
//! they are all gone: its process group, and its cgroup where workloads
//! are contained in cgroups.

use std::path::PathBuf;

use rustix::io::Errno;
use rustix::process::{
    Pid, Signal, WaitOptions, kill_process_group, test_kill_process_group, waitpgid,
};

use super::cgroup;

/// One workload's (or hook's) processes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// The process group (its leader's pid).
    pub pgid: u32,
    /// Its cgroup, if contained in one.
    pub cgroup: Option<PathBuf>,
}

impl Group {
    /// Signals the process group (the stop signal, SIGCONT).
    pub fn signal(&self, signal: Signal) {
        if let Some(pid) = group_pid(self.pgid) {
            let _ = kill_process_group(pid, signal);
        }
    }

    /// SIGKILLs everything: the process group, and the whole cgroup (which
    /// also holds what left the group).
    pub fn kill(&self) {
        self.signal(Signal::KILL);
        if let Some(cgroup) = &self.cgroup {
            let _ = cgroup::kill(cgroup);
        }
    }

    /// Whether no process of it is left: its cgroup is empty, or without
    /// one, its process group has no member.
    pub fn is_empty(&self) -> bool {
        match &self.cgroup {
            Some(cgroup) => !cgroup::is_populated(cgroup),
            None => group_pid(self.pgid)
                .is_none_or(|pid| test_kill_process_group(pid) == Err(Errno::SRCH)),
        }
    }

    /// Reaps the members of the group that ended and wait on this process:
    /// orphans of the workload that came to it (as a subreaper or PID 1,
    /// see [`orphans`](super::orphans)). A zombie still counts as a member
    /// of its group, so one nobody reaps would keep the group from ever
    /// being empty.
    ///
    /// Returns whether a child of this process is still in the group:
    /// running, or ending and not yet a zombie. The workload does not count
    /// as stopped while one is: a process leaves its cgroup as it starts to
    /// exit, before it can be reaped, so an empty cgroup alone would end a
    /// deletion with an orphan still to reap.
    ///
    /// Only once the group's leader has been reaped: it would be reaped
    /// here too, and its exit status lost.
    pub fn reap_exited_members(&self) -> bool {
        let Some(pid) = group_pid(self.pgid) else {
            return false;
        };
        loop {
            match waitpgid(pid, WaitOptions::NOHANG) {
                // One reaped: look for the next.
                Ok(Some(_)) => {}
                // Children of ours in the group, none ended yet.
                Ok(None) => return true,
                // None of the group is our child (ECHILD).
                Err(_) => return false,
            }
        }
    }

    /// Removes its cgroup, once empty, off this thread ([`super::removal`]):
    /// removing a cgroup waits for the kernel's cgroup lock. One left by a
    /// crash is removed by the next agent (no record owns it).
    pub fn release_soon(&self) {
        if let Some(cgroup) = &self.cgroup {
            super::removal::remove(cgroup.clone(), super::removal::Kind::Dir);
        }
    }
}

/// The pid of a process group, never group 0 or 1 ("our own group",
/// "everyone").
fn group_pid(group: u32) -> Option<Pid> {
    i32::try_from(group)
        .ok()
        .filter(|g| *g > 1)
        .and_then(Pid::from_raw)
}
