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
//! its workloads come to it, and they are reaped as soon as they end — in
//! a subreaper, every child of the process is, by one thread
//! (`child_exits`, which also reports the workloads'
//! exits without a pidfd each); elsewhere, the members of a group whose
//! leader the reaper has reaped
//! ([`Group::reap_exited_members`](super::group::Group::reap_exited_members)).

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::process::set_child_subreaper;

/// Whether this process became a subreaper through [`become_subreaper`].
static SUBREAPER: AtomicBool = AtomicBool::new(false);

/// Makes this process a child subreaper (`PR_SET_CHILD_SUBREAPER`), so that
/// the orphans of its workloads come to it rather than to PID 1, and lets
/// the reaper reap every child of the process as soon as it ends (one
/// thread for the process, started at the first watch of a child; a
/// watched child then needs no pidfd).
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
