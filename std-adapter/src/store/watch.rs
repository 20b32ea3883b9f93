//! The change feed: every write as an event, in revision order.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{Revision, StoreError, StoredObject};

/// What a write did to its object.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum EventKind {
    /// `create`: the name was free and now holds the object.
    Created,
    /// `update`: the object was replaced.
    Updated,
    /// `delete`: the name is free again.
    Deleted,
}

/// One change, as a watch delivers it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// The object's name.
    pub name: String,
    /// The write's revision (for `Deleted`, the revision of the delete).
    pub revision: Revision,
    /// The object as written; for `Deleted`, as it was last stored (its
    /// `record.resource_version` is the revision of its last write).
    pub object: StoredObject,
}

/// Where a [`Watch`] reads its events: one per backend.
///
/// Contract:
/// - `read(after, timeout)` MUST return only events with
///   `revision > after`, in increasing revision order, with no gap: the
///   first is the first change after `after`, and each next one is the
///   next change of the store.
/// - It MUST wait up to `timeout` for at least one such event, and return
///   an empty list if there is none by then; it MAY return fewer events
///   than exist (the watch asks again).
/// - It MUST return [`StoreError::Compacted`] if changes after `after` are
///   no longer kept.
pub trait WatchSource: Send {
    /// The next events after `after`, waiting up to `timeout` for one.
    fn read(&mut self, after: Revision, timeout: Duration) -> Result<Vec<Event>, StoreError>;
}

/// A change feed opened by [`Store::watch`](super::Store::watch): every
/// change with a revision above the one it was opened from, in revision
/// order, including changes made after it was opened, from any thread.
///
/// A watch holds its store's shared state: a [`RedbStore`](super::RedbStore)
/// stays open until its last watch is dropped.
///
/// As an [`Iterator`], a watch blocks until the next event; it ends after
/// yielding an error (such as a watcher that fell so far behind that the
/// changes it needs were compacted).
pub struct Watch {
    source: Box<dyn WatchSource>,
    /// The last revision read from the source.
    after: Revision,
    /// The last revision handed to the caller.
    delivered: Revision,
    ready: VecDeque<Event>,
    failed: bool,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("delivered", &self.delivered)
            .field("ready", &self.ready.len())
            .finish_non_exhaustive()
    }
}

impl Watch {
    /// A watch of the changes after `from`, read from `source`.
    pub fn new(from: Revision, source: Box<dyn WatchSource>) -> Self {
        Watch {
            source,
            after: from,
            delivered: from,
            ready: VecDeque::new(),
            failed: false,
        }
    }

    /// The next change, waiting up to `timeout` for one; `Ok(None)` if
    /// nothing changed by then.
    pub fn next_timeout(&mut self, timeout: Duration) -> Result<Option<Event>, StoreError> {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            if let Some(event) = self.ready.pop_front() {
                self.delivered = event.revision;
                return Ok(Some(event));
            }
            let left = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => timeout,
            };
            let events = self.source.read(self.after, left)?;
            if events.is_empty() && left.is_zero() {
                return Ok(None);
            }
            for event in events {
                // A source keeps its contract; this keeps a broken one from
                // repeating or reordering what the caller sees.
                if event.revision > self.after {
                    self.after = event.revision;
                    self.ready.push_back(event);
                }
            }
            if self.ready.is_empty() && deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
        }
    }

    /// The next change if one is already there; never waits.
    pub fn try_next(&mut self) -> Result<Option<Event>, StoreError> {
        self.next_timeout(Duration::ZERO)
    }

    /// The revision of the last change handed out, or the revision the
    /// watch was opened from: a new watch from here misses nothing.
    pub fn revision(&self) -> Revision {
        self.delivered
    }
}

impl Iterator for Watch {
    type Item = Result<Event, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        loop {
            match self.next_timeout(Duration::from_secs(3600)) {
                Ok(Some(event)) => return Some(Ok(event)),
                Ok(None) => continue,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}
