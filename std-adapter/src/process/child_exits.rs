//! Exits of this process's own children without a descriptor each, for a
//! subreaper ([`orphans::become_subreaper`](super::orphans::become_subreaper)).
//!
//! A pidfd per watched child costs a file descriptor per workload, beside
//! the workload's log pipe: 10 000 workloads would need 20 000, over many
//! machines' hard limit. A subreaper may reap every child of its own (the
//! promise of `become_subreaper`), so one thread for the whole process
//! waits for any child (`waitpid(-1)`, blocking: it sleeps until a child
//! ends) and hands each exit to the reaper that watches that pid. Adopted
//! processes (a previous agent's, not children) keep their pidfd.
//!
//! An exit no reaper watches yet is kept [`UNCLAIMED_FOR`]: a child can end
//! before its watch is registered, and its exit status is its reaper's.
//! Every other child that ends (an orphan that came to the subreaper, a
//! member of a group) is reaped at once, so no zombie of ours holds a
//! group or a cgroup from counting as empty.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use rustix::io::Errno;
use rustix::process::{Pid, WaitOptions, test_kill_process, wait};

/// How long the exit of a child nobody watches is kept for a watch that
/// may still come; also how long the thread waits, with no child left,
/// before it looks again (a child spawned and not watched).
pub(crate) const UNCLAIMED_FOR: Duration = Duration::from_secs(1);

/// A child's exit: its pid and its status as a shell reports it (the exit
/// code, or 128 + the signal that ended it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Exit {
    /// The child.
    pub(crate) pid: u32,
    /// Its status.
    pub(crate) code: Option<i32>,
}

/// Whom to tell of a watched child's exit (called with the registry's lock
/// held: it must not block).
pub(crate) type Notify = Arc<dyn Fn(Exit) + Send + Sync>;

/// The watched children and the exits nobody claimed yet.
#[derive(Default)]
struct Registry {
    watched: HashMap<u32, Notify>,
    unclaimed: HashMap<u32, (Option<i32>, Instant)>,
    /// Counts watches, so that the thread, out of children, wakes for one.
    watches: u64,
    /// When the unclaimed exits are next looked at for expiry.
    prune_at: Option<Instant>,
}

/// The registry, and the condition the thread waits on with no child left.
fn registry() -> &'static (Mutex<Registry>, Condvar) {
    static REGISTRY: OnceLock<(Mutex<Registry>, Condvar)> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        // The thread is started with the registry, once per process.
        let _ = std::thread::Builder::new()
            .name("grace-child-exits".to_owned())
            .spawn(run);
        (Mutex::new(Registry::default()), Condvar::new())
    })
}

fn lock() -> MutexGuard<'static, Registry> {
    registry()
        .0
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Watches the child `pid`: its exit goes to `to`. `announce` runs first,
/// under the lock, so that whatever it sends reaches the reaper before the
/// exit can. An exit already seen is handed over at once; a child that is
/// gone with no exit seen (reaped by someone else) is reported without a
/// status.
pub(crate) fn watch(pid: u32, to: &Notify, announce: impl FnOnce()) {
    {
        let (_, woken) = registry();
        let mut registry = lock();
        announce();
        if let Some(code) = registry.take_unclaimed(pid) {
            to(Exit { pid, code });
            return;
        }
        registry.watched.insert(pid, Arc::clone(to));
        registry.watches = registry.watches.wrapping_add(1);
        woken.notify_all();
    }
    let gone = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .is_none_or(|p| test_kill_process(p) == Err(Errno::SRCH));
    if gone && let Some(to) = lock().watched.remove(&pid) {
        to(Exit { pid, code: None });
    }
}

/// Takes the exit of `pid` if it was seen and nobody claimed it (a child
/// watched through a pidfd before the process became a subreaper).
pub(crate) fn claim(pid: u32) -> Option<i32> {
    lock().take_unclaimed(pid).flatten()
}

impl Registry {
    /// The exit of `pid` seen less than [`UNCLAIMED_FOR`] ago, taken: an
    /// older one may be of another process that had the pid before.
    fn take_unclaimed(&mut self, pid: u32) -> Option<Option<i32>> {
        let (code, seen) = self.unclaimed.remove(&pid)?;
        (seen.elapsed() < UNCLAIMED_FOR).then_some(code)
    }
}

/// The thread: reaps every child as it ends.
fn run() {
    loop {
        match wait(WaitOptions::empty()) {
            Ok(Some((pid, status))) => {
                let code = status
                    .exit_status()
                    .or_else(|| status.terminating_signal().map(|s| s.saturating_add(128)));
                handed(Exit {
                    pid: pid.as_raw_pid().unsigned_abs(),
                    code,
                });
            }
            Ok(None) | Err(Errno::INTR) => {}
            // No child: until one is watched (or a while, for one that
            // is not).
            Err(Errno::CHILD) => {
                let (_, woken) = registry();
                let registry = lock();
                let seen = registry.watches;
                let _ = woken.wait_timeout_while(registry, UNCLAIMED_FOR, |r| r.watches == seen);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Hands `exit` to its watcher, or keeps it for one to come.
fn handed(exit: Exit) {
    let mut registry = lock();
    if let Some(to) = registry.watched.remove(&exit.pid) {
        to(exit);
        return;
    }
    let now = Instant::now();
    if registry.prune_at.is_none_or(|at| now >= at) {
        registry
            .unclaimed
            .retain(|_, (_, seen)| now.saturating_duration_since(*seen) < UNCLAIMED_FOR);
        // (No instant that far: prune at every exit, as before the first.)
        registry.prune_at = now.checked_add(UNCLAIMED_FOR);
    }
    registry.unclaimed.insert(exit.pid, (exit.code, now));
}
