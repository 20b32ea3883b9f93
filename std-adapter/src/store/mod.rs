//! Storage: where objects live between (and across) runs of the runtime.
//!
//! [`Store`] is the contract the runtime and the CLI use; it is shaped after
//! the part of etcd that Kubernetes relies on: a store-wide [`Revision`]
//! that every write advances, compare-and-swap on it, deletes with
//! preconditions, and a watch that replays the change log from any
//! revision still kept. Three backends:
//!
//! - [`MemoryStore`]: a map and a bounded change log behind a mutex. For
//!   tests and simulation; nothing survives the process.
//! - [`RedbStore`]: the embedded durable default, on
//!   [redb](https://docs.rs/redb). Every write is one redb write
//!   transaction committed with `Durability::Immediate`: once it returns,
//!   the change survives a crash or a power cut. The change log is stored
//!   too, so a watch can resume from a revision seen before a restart.
//! - `EtcdStore` (cargo feature `etcd`): the contract on an etcd v3
//!   server, for several machines sharing one store, with leases, node
//!   liveness keys and fencing epochs besides.
//!
//! ```
//! use grace_core::{Name, Record};
//! use grace_std::store::{MemoryStore, StorePreconditions, Revision, Store, StoredObject, EventKind};
//!
//! let store = MemoryStore::new();
//! let uid = Name::try_from("uid-1").unwrap();
//! let r1 = store.create("web-0", StoredObject::unscheduled(Record::new(uid))).unwrap();
//!
//! // Compare-and-swap: an update names the revision it read.
//! let (mut obj, rev) = store.get("web-0").unwrap().unwrap();
//! obj.node = Some("node-a".into());
//! let r2 = store.update("web-0", obj, rev).unwrap();
//! assert!(r2 > r1);
//!
//! // The agent's final delete only removes the object it knows.
//! let pre = StorePreconditions { uid: Some("uid-1".into()), revision: None };
//! store.delete("web-0", pre).unwrap();
//!
//! // Every change, in order, from the beginning.
//! let mut watch = store.watch(Revision::ZERO).unwrap();
//! let kinds: Vec<EventKind> = std::iter::from_fn(|| watch.try_next().unwrap())
//!     .map(|e| e.kind)
//!     .collect();
//! assert_eq!(kinds, [EventKind::Created, EventKind::Updated, EventKind::Deleted]);
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

mod container_run;
mod error;
#[cfg(feature = "etcd")]
mod etcd;
mod manifest;
mod memory;
mod object;
mod object_key;
mod redb;
mod restarts;
mod scoped;
mod watch;

pub use self::container_run::{
    EnvSource, EnvVar, FIELD_PATHS, SecurityContext, is_env_field_path, label_key,
};
pub use self::error::{BackendError, BatchError, StoreError};
#[cfg(feature = "etcd")]
#[cfg_attr(docsrs, doc(cfg(feature = "etcd")))]
pub use self::etcd::{
    DEFAULT_ETCD_PREFIX, DEFAULT_MAX_TXN_OPS, EpochBump, EtcdAuth, EtcdOptions, EtcdStore, EtcdTls,
    Lease,
};
pub use self::manifest::Manifest;
pub use self::memory::MemoryStore;
pub use self::object::{
    ContainerStatus, FINALIZERS, KillState, OwnerReference, StoredContainer, StoredObject,
};
pub use self::object_key::{DEFAULT_NAMESPACE, KeyError, ObjectKey, split_key};
pub use self::redb::{RedbOptions, RedbStore};
pub use self::restarts::ContainerRestarts;
pub use self::scoped::NodeScoped;
pub use self::watch::{Event, EventKind, Watch, WatchSource};

/// How many revisions of changes a store keeps for watches by default.
/// A watch from an older revision gets [`StoreError::Compacted`].
pub const DEFAULT_LOG_RETENTION: u64 = 10_000;

/// A point in the store's history: a store-wide counter that every write
/// advances by one (like etcd's revision). An object's revision is the
/// revision of its last write. [`Revision::ZERO`] is "before any write".
#[derive(
    Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Revision(pub u64);

impl Revision {
    /// Before the first write: a watch from here sees the whole history
    /// (if the log still holds it).
    pub const ZERO: Revision = Revision(0);

    /// The revision as a number.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Conditions a store delete checks atomically with the removal; `None`
/// checks nothing. This is how the agent's final delete avoids removing an
/// object that was deleted and re-created under the same name meanwhile.
/// (A delete *request*'s preconditions, checked by the core's decision,
/// are `grace_core::Preconditions`.)
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorePreconditions {
    /// The stored object's uid must be this one.
    pub uid: Option<String>,
    /// The stored object's revision must be this one.
    pub revision: Option<Revision>,
}

/// One write of a [`Store::batch`]: the same three writes as the single
/// methods, with the same checks.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Write {
    /// Store `object` under a free `name`.
    Create {
        /// The name.
        name: String,
        /// The object.
        object: StoredObject,
    },
    /// Replace the object stored under `name` if its revision is `expected`.
    Update {
        /// The name.
        name: String,
        /// The new object.
        object: StoredObject,
        /// The revision the caller read.
        expected: Revision,
    },
    /// Remove the object stored under `name` if the preconditions hold.
    Delete {
        /// The name.
        name: String,
        /// What must hold of the stored object.
        preconditions: StorePreconditions,
    },
}

impl Write {
    /// The name the write is about.
    pub fn name(&self) -> &str {
        match self {
            Write::Create { name, .. }
            | Write::Update { name, .. }
            | Write::Delete { name, .. } => name,
        }
    }
}

/// Every stored object, in name order, as of one revision.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Listing {
    /// The store's revision when the list was taken: watch from it to see
    /// every later change.
    pub revision: Revision,
    /// `(name, object, revision)` for each object, in name order (bytewise).
    pub objects: Vec<(String, StoredObject, Revision)>,
}

/// The storage contract of the runtime and the CLI.
///
/// Every implementation MUST keep these, and the shared test suite
/// (`std-adapter/tests/store_suite.rs`) checks them against each backend:
///
/// - **Revisions.** The store has one revision counter. Every successful
///   write (create, update, delete) MUST take the next revision (`current
///   + 1`), and a failed write MUST take none and change nothing. The
///   revision returned by a write, the revision `get` and `list` report for
///   the object, the revision of its watch event and the stored
///   `record.resource_version` MUST all be that number.
/// - **Atomicity.** Each write MUST check its condition (name free for
///   `create`, revision for `update`, preconditions for `delete`) and apply
///   its change as one atomic step: no other write can come between the
///   check and the change. A [`batch`](Store::batch) MUST apply all of its
///   writes or none.
/// - **Reads.** `get` and `list` MUST see every write that returned before
///   they were called; `list` MUST be one consistent snapshot, at the
///   revision it reports.
/// - **Watch.** A watch from revision `r` MUST yield every change with a
///   revision above `r`, exactly once each, in revision order, including
///   changes made after it was opened, by any thread. A change MUST NOT be
///   visible to a watch (or to `get`/`list`) before it is committed (for a
///   durable backend: before it is durable). If the changes after `r` are
///   no longer kept, `watch` (or a later `next_timeout`) MUST fail with
///   [`StoreError::Compacted`] rather than skip any.
/// - **Durability.** A backend that claims durability (as [`RedbStore`]
///   does) MUST have made a write durable before the write returns; after a
///   crash, the store MUST hold exactly the writes that returned
///   successfully (and possibly the last one in flight), with their
///   revisions and change log.
/// - **Sharing.** A store MUST be `Send + Sync`; every method takes `&self`
///   and may be called from any number of threads.
pub trait Store: Send + Sync {
    /// The object stored under `name` and its revision, or `None`.
    fn get(&self, name: &str) -> Result<Option<(StoredObject, Revision)>, StoreError>;

    /// Every object, in name order, with the revision of the snapshot.
    fn list(&self) -> Result<Listing, StoreError>;

    /// The revision of the last write (`Revision::ZERO` for a new store).
    fn revision(&self) -> Result<Revision, StoreError>;

    /// Applies `writes` in order as one atomic step: each write sees the
    /// ones before it, takes the next revision, and the batch is committed
    /// once (for [`RedbStore`], one fsync for the lot: group commit). If
    /// any write's check fails, nothing is written and the error names
    /// that write. Returns each write's revision, in order. An empty batch
    /// writes nothing and returns an empty list.
    fn batch(&self, writes: Vec<Write>) -> Result<Vec<Revision>, BatchError>;

    /// [`batch`](Store::batch) of writes the caller keeps: the store reads
    /// them and takes nothing. The runtime's group commit builds each
    /// round's writes in place in slots it keeps from round to round (the
    /// names, nodes and containers' strings, the 5 KB records), shows the
    /// actuator the objects as written, and updates the same slots for the
    /// batch after the actions, so a write costs it no allocation and no
    /// copy of a whole object. The default hands clones of the writes to
    /// `batch`; a backend that only reads its writes (encodes them, or
    /// copies what it keeps) overrides it.
    fn batch_ref(&self, writes: &[Write]) -> Result<Vec<Revision>, BatchError> {
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        self.batch(writes.to_vec())
    }

    /// A change feed of every change after `from` (see the contract above).
    /// Fails with [`StoreError::Compacted`] if those changes are no longer
    /// kept. `from` may be the current revision (only new changes) or
    /// later.
    fn watch(&self, from: Revision) -> Result<Watch, StoreError>;

    /// The most writes one [`batch`](Store::batch) can hold: a larger batch
    /// fails whole (with [`StoreError::Unavailable`]) and writes nothing.
    /// Whoever groups writes (the runtime's group commit) MUST split its
    /// groups to fit. Unbounded ([`usize::MAX`]) unless the backend says
    /// otherwise; `EtcdStore` is bounded by etcd's `--max-txn-ops`.
    fn max_batch(&self) -> usize {
        usize::MAX
    }

    /// Whether [`get`](Store::get) and [`list`](Store::list) show every
    /// stored object. A view that shows some only (one node's,
    /// [`NodeScoped`]) cannot tell that an owner is gone: the runtime's
    /// garbage collector follows no owner reference on it. `true` unless
    /// the backend says otherwise.
    fn shows_every_object(&self) -> bool {
        true
    }

    /// Stores `object` under `name`, which MUST be free; else
    /// [`StoreError::AlreadyExists`]. Returns the new revision.
    fn create(&self, name: &str, object: StoredObject) -> Result<Revision, StoreError> {
        single(self.batch(vec![Write::Create {
            name: name.to_owned(),
            object,
        }]))
    }

    /// Compare-and-swap: replaces the object stored under `name` only if
    /// its revision is `expected`; else [`StoreError::Conflict`] with the
    /// current revision, or [`StoreError::NotFound`]. Returns the new
    /// revision.
    fn update(
        &self,
        name: &str,
        object: StoredObject,
        expected: Revision,
    ) -> Result<Revision, StoreError> {
        single(self.batch(vec![Write::Update {
            name: name.to_owned(),
            object,
            expected,
        }]))
    }

    /// Removes the object stored under `name` if `preconditions` hold,
    /// checked atomically with the removal: [`StoreError::UidMismatch`] or
    /// [`StoreError::Conflict`] if not, [`StoreError::NotFound`] if there
    /// is nothing to remove. Returns the revision of the delete.
    fn delete(
        &self,
        name: &str,
        preconditions: StorePreconditions,
    ) -> Result<Revision, StoreError> {
        single(self.batch(vec![Write::Delete {
            name: name.to_owned(),
            preconditions,
        }]))
    }
}

/// A shared store is a store: the runtime and its readers (a CLI, an
/// actuator) can hold the same one.
impl<T: Store + ?Sized> Store for std::sync::Arc<T> {
    fn get(&self, name: &str) -> Result<Option<(StoredObject, Revision)>, StoreError> {
        (**self).get(name)
    }
    fn list(&self) -> Result<Listing, StoreError> {
        (**self).list()
    }
    fn revision(&self) -> Result<Revision, StoreError> {
        (**self).revision()
    }
    fn batch(&self, writes: Vec<Write>) -> Result<Vec<Revision>, BatchError> {
        (**self).batch(writes)
    }
    fn batch_ref(&self, writes: &[Write]) -> Result<Vec<Revision>, BatchError> {
        (**self).batch_ref(writes)
    }
    fn watch(&self, from: Revision) -> Result<Watch, StoreError> {
        (**self).watch(from)
    }
    fn max_batch(&self) -> usize {
        (**self).max_batch()
    }
    fn shows_every_object(&self) -> bool {
        (**self).shows_every_object()
    }
}

/// The one revision of a one-write batch.
fn single(result: Result<Vec<Revision>, BatchError>) -> Result<Revision, StoreError> {
    let revisions = result?;
    revisions
        .first()
        .copied()
        .ok_or_else(|| StoreError::Unavailable("the store wrote nothing for one write".into()))
}

/// The check every backend makes before a write: `current` is what is
/// stored under the name (its uid and revision), as seen inside the write's
/// transaction; the uid is read only for a delete. One function, so that
/// the backends cannot disagree.
pub(crate) fn check(write: &Write, current: Option<(&str, Revision)>) -> Result<(), StoreError> {
    let name = || write.name().to_owned();
    match (write, current) {
        (Write::Create { .. }, None) => Ok(()),
        (Write::Create { .. }, Some((_, rev))) => Err(StoreError::AlreadyExists {
            name: name(),
            current: rev,
        }),
        (Write::Update { .. } | Write::Delete { .. }, None) => {
            Err(StoreError::NotFound { name: name() })
        }
        (Write::Update { expected, .. }, Some((_, rev))) => {
            if *expected == rev {
                Ok(())
            } else {
                Err(StoreError::Conflict {
                    name: name(),
                    current: rev,
                })
            }
        }
        (Write::Delete { preconditions, .. }, Some((uid, rev))) => {
            if let Some(expected) = &preconditions.uid
                && expected != uid
            {
                return Err(StoreError::UidMismatch {
                    name: name(),
                    expected: expected.clone(),
                    found: uid.to_owned(),
                });
            }
            match preconditions.revision {
                Some(expected) if expected != rev => Err(StoreError::Conflict {
                    name: name(),
                    current: rev,
                }),
                _ => Ok(()),
            }
        }
    }
}
