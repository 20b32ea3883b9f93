//! Removing files and directories off the caller's thread: the workload
//! table's records, the logs of removed objects, the cgroups of exited
//! workloads. Unlinking thousands of them (ext4 with discard; a cgroup's
//! removal waits for the kernel's cgroup lock) would otherwise hold up the
//! runtime's thread, which signals and reports the workloads, and the
//! reaper's.
//!
//! One thread for the whole process, started at the first removal, takes
//! them in order from a bounded queue; when the queue is full, the caller
//! removes the path itself (it never waits for the thread). A path waiting
//! in the queue is *pending*: [`settle`] removes it at once (or waits for
//! the thread if it is removing it right then), so that a path about to be
//! written again (a new workload's record under the same name) is never
//! removed after that write. The lock is never held while the thread
//! removes, so asking for a removal never waits for one. Nothing is lost across a crash: what was still pending is found
//! by the next agent (a record of a process that is gone is reported
//! gone; logs of objects no longer stored are removed at its start).

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, mpsc};

/// How many removals may wait for the thread.
const QUEUE: usize = 16 * 1024;

/// What to remove.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A file.
    File,
    /// An empty directory (a cgroup: its interface files go with it).
    Dir,
    /// A directory and everything in it.
    Tree,
}

/// The thread's queue and the paths it still owes.
struct Remover {
    queue: mpsc::SyncSender<(PathBuf, Kind)>,
    state: Mutex<State>,
    /// Notified whenever a removal is done.
    done: Condvar,
}

/// What the thread owes.
#[derive(Default)]
struct State {
    /// Queued, not yet begun.
    pending: HashSet<PathBuf>,
    /// Being removed by the thread right now.
    busy: Option<PathBuf>,
}

fn remover() -> &'static Remover {
    static REMOVER: OnceLock<Remover> = OnceLock::new();
    REMOVER.get_or_init(|| {
        let (queue, jobs) = mpsc::sync_channel::<(PathBuf, Kind)>(QUEUE);
        // Without a thread the queue is closed, and every removal is done
        // by its caller.
        let _ = std::thread::Builder::new()
            .name("grace-removal".into())
            .spawn(move || {
                for (path, kind) in jobs {
                    // Set: a job is queued only once it was.
                    if let Some(remover) = REMOVER.get() {
                        remover.take(path, kind);
                    }
                }
            });
        Remover {
            queue,
            state: Mutex::default(),
            done: Condvar::new(),
        }
    })
}

impl Remover {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn wait<'a>(&self, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.done
            .wait(state)
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The thread's turn: removes `path` if it is still pending (not
    /// settled meanwhile), without the lock.
    fn take(&self, path: PathBuf, kind: Kind) {
        {
            let mut state = self.lock();
            if !state.pending.remove(&path) {
                return;
            }
            state.busy = Some(path.clone());
        }
        let _ = remove_now(&path, kind);
        self.lock().busy = None;
        self.done.notify_all();
    }
}

/// Removes `path` (a file or a whole directory, as `kind` says) soon, on
/// the removal thread; at once, on this thread, if its queue is full.
/// Gone already is fine.
pub fn remove(path: PathBuf, kind: Kind) {
    let remover = remover();
    if !remover.lock().pending.insert(path.clone()) {
        return; // queued already
    }
    match remover.queue.try_send((path, kind)) {
        Ok(()) => {}
        Err(
            mpsc::TrySendError::Full((path, kind)) | mpsc::TrySendError::Disconnected((path, kind)),
        ) => settle(&path, kind),
    }
}

/// If `path` is waiting to be removed, removes it now (before the caller
/// writes it again); if the thread is removing it, waits until it is
/// done; otherwise does nothing.
pub fn settle(path: &Path, kind: Kind) {
    let remover = remover();
    let mut state = remover.lock();
    while state.busy.as_deref() == Some(path) {
        state = remover.wait(state);
    }
    if state.pending.remove(path) {
        // Under the lock: the thread cannot begin it meanwhile (rare: the
        // same path written again right after its removal was asked).
        let _ = remove_now(path, kind);
        remover.done.notify_all();
    }
}

/// Waits until every removal asked for so far is done.
pub fn flush() {
    let remover = remover();
    let mut state = remover.lock();
    while !state.pending.is_empty() || state.busy.is_some() {
        state = remover.wait(state);
    }
}

/// Whether `path` is waiting to be removed (or being removed).
#[cfg(test)]
pub fn is_pending(path: &Path) -> bool {
    let state = remover().lock();
    state.pending.contains(path) || state.busy.as_deref() == Some(path)
}

fn remove_now(path: &Path, kind: Kind) -> io::Result<()> {
    let done = match kind {
        Kind::File => std::fs::remove_file(path),
        Kind::Dir => std::fs::remove_dir(path),
        Kind::Tree => std::fs::remove_dir_all(path),
    };
    match done {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removals_happen_in_the_background_and_a_settled_path_is_not_removed_after_its_rewrite() {
        let dir = tempfile::tempdir().expect("temp dir");
        let files: Vec<PathBuf> = (0..200).map(|i| dir.path().join(format!("f{i}"))).collect();
        for f in &files {
            std::fs::write(f, b"x").expect("written");
        }
        let tree = dir.path().join("tree");
        std::fs::create_dir_all(tree.join("sub")).expect("dirs");
        std::fs::write(tree.join("sub/a.log"), b"x").expect("written");
        for f in &files {
            remove(f.clone(), Kind::File);
        }
        remove(tree.clone(), Kind::Tree);
        // Rewritten while (perhaps) still queued: settled first, so the
        // new file survives whatever the thread does later.
        let again = files[199].clone();
        settle(&again, Kind::File);
        assert!(!is_pending(&again));
        std::fs::write(&again, b"new").expect("rewritten");
        flush();
        for f in &files[..199] {
            assert!(!f.exists(), "{} removed", f.display());
        }
        assert!(!tree.exists(), "the whole directory removed");
        assert_eq!(std::fs::read(&again).expect("kept"), b"new");
    }
}
