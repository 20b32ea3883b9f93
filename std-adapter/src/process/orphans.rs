//! Orphans: what a workload leaves behind when its processes die out of
//! order.
//!
//! A process whose parent dies is handed to the nearest *subreaper* among
//! its ancestors, or to PID 1. Until someone reaps it, a process that ended
//! stays a zombie, and a zombie still counts as a member of its process
//! group: a workload's group would never look empty. Where PID 1 reaps
//! slowly (some container and VM inits take seconds) that delays the end
//! of a deletion; where PID 1 never reaps (the agent itself as PID 1 of a
//! container, or an init that does not reap) it would hold the deletion
//! forever.
//!
//! So the agent makes itself a subreaper ([`become_subreaper`]): orphans of
//! its workloads come to it, and the reaper reaps them at once — the
//! members of a group whose leader it has reaped
//! ([`Group::reap_exited_members`](super::group::Group::reap_exited_members)),
//! and, from a subreaper, any other child that ended and that no one
//! watches (a sweep, for a process that left its workload's group).

use std::collections::HashSet;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::process::{Pid, WaitId, WaitIdOptions, set_child_subreaper, waitid};

/// Whether this process became a subreaper through [`become_subreaper`].
static SUBREAPER: AtomicBool = AtomicBool::new(false);

/// How long an ended child must go unwatched before the sweep reaps it:
/// a workload's own leader can end before its watch reaches the reaper,
/// and its exit status is the reaper's to read.
const UNWATCHED_FOR: Duration = Duration::from_secs(1);

/// Makes this process a child subreaper (`PR_SET_CHILD_SUBREAPER`), so that
/// the orphans of its workloads come to it rather than to PID 1, and lets
/// the reaper reap every child that ended and that it does not watch.
///
/// For a program that runs workloads and nothing else (the `grace` agent,
/// `grace run`, the demo): a program that also waits for children of its
/// own would see them reaped by the reaper instead. Call it before
/// starting workloads; it holds for the life of the process.
///
/// # Errors
///
/// The `prctl` failed (not on Linux, or refused by a security policy):
/// orphans then go to PID 1 as before.
pub fn become_subreaper() -> io::Result<()> {
    // Any non-zero argument sets the attribute.
    set_child_subreaper(Some(rustix::process::getpid()))?;
    SUBREAPER.store(true, Ordering::Relaxed);
    Ok(())
}

/// Whether [`become_subreaper`] succeeded in this process.
pub fn is_subreaper() -> bool {
    SUBREAPER.load(Ordering::Relaxed)
}

/// The reaper's sweep for ended children nobody watches: orphans that
/// came to a subreaper after leaving their workload's process group.
/// Does nothing unless this process is a subreaper.
#[derive(Debug)]
pub(crate) struct Sweep {
    /// Ended children seen unwatched at the last look, and when first seen.
    suspects: Vec<(u32, Instant)>,
    /// When to look next.
    next: Instant,
}

impl Sweep {
    /// A sweep that first looks after [`UNWATCHED_FOR`].
    pub(crate) fn new() -> Sweep {
        Sweep {
            suspects: Vec::new(),
            next: Instant::now() + UNWATCHED_FOR,
        }
    }

    /// Reaps the children that ended at least [`UNWATCHED_FOR`] ago and
    /// are not among the `watched` ones (the pids of the children being
    /// watched, asked for only when some child has ended); at most once
    /// per [`UNWATCHED_FOR`].
    pub(crate) fn run<W: IntoIterator<Item = u32>>(&mut self, watched: impl FnOnce() -> W) {
        let now = Instant::now();
        if !is_subreaper() || now < self.next {
            return;
        }
        self.next = now + UNWATCHED_FOR;
        if !any_ended_child() {
            self.suspects.clear();
            return;
        }
        let watched: HashSet<u32> = watched().into_iter().collect();
        let ended: Vec<u32> = children()
            .into_iter()
            .filter(|pid| !watched.contains(pid) && is_zombie(*pid))
            .collect();
        let mut suspects = Vec::with_capacity(ended.len());
        for pid in ended {
            let since = self
                .suspects
                .iter()
                .find(|(p, _)| *p == pid)
                .map_or(now, |(_, since)| *since);
            if now.saturating_duration_since(since) >= UNWATCHED_FOR {
                reap(pid);
            } else {
                suspects.push((pid, since));
            }
        }
        self.suspects = suspects;
    }
}

/// Whether some child of this process has ended and waits to be reaped
/// (it is only looked at, not reaped).
fn any_ended_child() -> bool {
    matches!(
        waitid(
            WaitId::All,
            WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
        ),
        Ok(Some(_))
    )
}

/// This process's children, from every thread's `children` list.
fn children() -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut pids = Vec::new();
    for task in tasks.flatten() {
        if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
            pids.extend(
                list.split_ascii_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    pids
}

/// Whether `pid` is a zombie (state `Z` in `/proc/PID/stat`).
fn is_zombie(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name, which is in parentheses and
    // may itself hold spaces or parentheses.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_ascii_whitespace().next())
        == Some("Z")
}

/// Reaps the child `pid` if it has ended.
fn reap(pid: u32) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
        );
    }
}
