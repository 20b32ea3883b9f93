//! The in-memory backend: a sorted map and a bounded change log behind one
//! mutex, with a condition variable to wake watchers.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::{
    BatchError, DEFAULT_LOG_RETENTION, Event, EventKind, Listing, Revision, Store, StoreError,
    StoredObject, Watch, WatchSource, Write, check,
};

/// At most this many events are handed to a watch per read.
const READ_CHUNK: usize = 256;

/// A [`Store`] in memory: for tests, simulation and single-process tools.
/// Nothing survives the process.
///
/// The change log keeps the last `log_retention` changes (by default
/// [`DEFAULT_LOG_RETENTION`](super::DEFAULT_LOG_RETENTION)); watching from
/// an older revision is [`StoreError::Compacted`]. Memory is bounded by the
/// objects stored plus that many events.
///
/// Clones share the same store.
#[derive(Clone, Debug)]
pub struct MemoryStore {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Notified after every write.
    changed: Condvar,
}

#[derive(Debug)]
struct State {
    objects: BTreeMap<String, (StoredObject, Revision)>,
    revision: Revision,
    /// The changes after `compacted`, one per revision, oldest first.
    log: VecDeque<Event>,
    /// Every change up to this revision has left the log.
    compacted: Revision,
    retention: usize,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl MemoryStore {
    /// An empty store keeping the last
    /// [`DEFAULT_LOG_RETENTION`](super::DEFAULT_LOG_RETENTION) changes.
    pub fn new() -> Self {
        MemoryStore::with_log_retention(DEFAULT_LOG_RETENTION)
    }

    /// An empty store keeping the last `retention` changes for watches
    /// (at least 1).
    pub fn with_log_retention(retention: u64) -> Self {
        let retention = usize::try_from(retention.max(1)).unwrap_or(usize::MAX);
        MemoryStore {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    objects: BTreeMap::new(),
                    revision: Revision::ZERO,
                    log: VecDeque::new(),
                    compacted: Revision::ZERO,
                    retention,
                }),
                changed: Condvar::new(),
            }),
        }
    }
}

impl Shared {
    /// The state. A panic elsewhere while the lock was held cannot have
    /// left it half-written (writes are checked first, then applied), so a
    /// poisoned lock is taken as it is.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    /// Checks every write against the store as the earlier writes of the
    /// batch leave it, without changing anything.
    fn check_all(&self, writes: &[Write]) -> Result<(), BatchError> {
        // What the batch has written so far: name -> (uid, revision), or
        // None once deleted.
        let mut staged: HashMap<&str, Option<(&str, Revision)>> = HashMap::new();
        let mut next = self.revision.0;
        for (index, write) in writes.iter().enumerate() {
            let name = write.name();
            let current = match staged.get(name) {
                Some(seen) => *seen,
                None => self.objects.get(name).map(|(obj, rev)| (obj.uid(), *rev)),
            };
            check(write, current).map_err(|error| BatchError {
                index: Some(index),
                error,
            })?;
            next = next.checked_add(1).ok_or_else(|| BatchError {
                index: Some(index),
                error: StoreError::Unavailable("revision counter exhausted".into()),
            })?;
            let after = match write {
                Write::Create { object, .. } | Write::Update { object, .. } => {
                    Some((object.uid(), Revision(next)))
                }
                Write::Delete { .. } => None,
            };
            staged.insert(name, after);
        }
        Ok(())
    }

    /// Applies one write that [`State::check_all`] accepted.
    // check_all refused a batch whose revision would overflow, and any
    // delete of an object that is not there: neither can happen here.
    #[allow(clippy::arithmetic_side_effects, clippy::expect_used)]
    fn apply(&mut self, write: Write) -> Revision {
        let revision = Revision(self.revision.0 + 1);
        self.revision = revision;
        let event = match write {
            Write::Create { name, object } => self.put(EventKind::Created, name, object, revision),
            Write::Update { name, object, .. } => {
                self.put(EventKind::Updated, name, object, revision)
            }
            Write::Delete { name, .. } => {
                let (object, _) = self
                    .objects
                    .remove(&name)
                    .expect("check_all found the object this delete removes");
                Event {
                    kind: EventKind::Deleted,
                    name,
                    revision,
                    object,
                }
            }
        };
        self.log.push_back(event);
        while self.log.len() > self.retention {
            if let Some(old) = self.log.pop_front() {
                self.compacted = old.revision;
            }
        }
        revision
    }

    /// Stores `object` under `name` at `revision`; the event that says so.
    fn put(
        &mut self,
        kind: EventKind,
        name: String,
        mut object: StoredObject,
        revision: Revision,
    ) -> Event {
        object.record.resource_version = revision.0;
        self.objects
            .insert(name.clone(), (object.clone(), revision));
        Event {
            kind,
            name,
            revision,
            object,
        }
    }

    /// The changes after `after`, at most `max` of them.
    fn events_after(&self, after: Revision, max: usize) -> Result<Vec<Event>, StoreError> {
        if after < self.compacted {
            return Err(StoreError::Compacted {
                requested: after,
                compacted: self.compacted,
            });
        }
        // The log holds compacted+1 ..= revision, one event per revision.
        let skip = usize::try_from(after.0.saturating_sub(self.compacted.0)).unwrap_or(usize::MAX);
        Ok(self.log.iter().skip(skip).take(max).cloned().collect())
    }
}

impl Store for MemoryStore {
    fn get(&self, name: &str) -> Result<Option<(StoredObject, Revision)>, StoreError> {
        Ok(self.shared.lock().objects.get(name).cloned())
    }

    fn list(&self) -> Result<Listing, StoreError> {
        let state = self.shared.lock();
        Ok(Listing {
            revision: state.revision,
            objects: state
                .objects
                .iter()
                .map(|(name, (obj, rev))| (name.clone(), obj.clone(), *rev))
                .collect(),
        })
    }

    fn revision(&self) -> Result<Revision, StoreError> {
        Ok(self.shared.lock().revision)
    }

    fn batch(&self, writes: Vec<Write>) -> Result<Vec<Revision>, BatchError> {
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        let mut state = self.shared.lock();
        state.check_all(&writes)?;
        let revisions = writes.into_iter().map(|w| state.apply(w)).collect();
        drop(state);
        self.shared.changed.notify_all();
        Ok(revisions)
    }

    fn batch_ref(&self, writes: &[Write]) -> Result<Vec<Revision>, BatchError> {
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        let mut state = self.shared.lock();
        state.check_all(writes)?;
        // Each write copied as it is applied: no vector of copies.
        let revisions = writes.iter().map(|w| state.apply(w.clone())).collect();
        drop(state);
        self.shared.changed.notify_all();
        Ok(revisions)
    }

    fn watch(&self, from: Revision) -> Result<Watch, StoreError> {
        let state = self.shared.lock();
        if from < state.compacted {
            return Err(StoreError::Compacted {
                requested: from,
                compacted: state.compacted,
            });
        }
        drop(state);
        Ok(Watch::new(
            from,
            Box::new(MemoryFeed {
                shared: Arc::clone(&self.shared),
            }),
        ))
    }
}

/// A watch's view of a [`MemoryStore`].
struct MemoryFeed {
    shared: Arc<Shared>,
}

impl WatchSource for MemoryFeed {
    fn read(&mut self, after: Revision, timeout: Duration) -> Result<Vec<Event>, StoreError> {
        let deadline = Instant::now().checked_add(timeout);
        let mut state = self.shared.lock();
        while state.revision <= after {
            let left = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => timeout,
            };
            if left.is_zero() {
                return Ok(Vec::new());
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        state.events_after(after, READ_CHUNK)
    }
}
