//! The embedded durable backend, on redb: one file, copy-on-write B-trees,
//! checksummed commits, one fsync per commit.
//!
//! Three tables:
//!
//! | table | key | value |
//! |---|---|---|
//! | `objects` | name | (revision, object as JSON) |
//! | `meta` | `"format"`, `"revision"`, `"compacted"` | u64 |
//! | `log` | revision | the change as a JSON [`Event`] |
//!
//! Every batch (and so every single write) is one write transaction: the
//! objects, the new revision and the change log move together, and
//! `Durability::Immediate` makes the commit durable before it returns.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use ::redb::{
    Builder, Database, DatabaseError, Durability, ReadTransaction, ReadableDatabase, ReadableTable,
    TableDefinition, WriteTransaction,
};

use super::{
    BatchError, DEFAULT_LOG_RETENTION, Event, EventKind, Listing, Revision, Store, StoreError,
    StoredObject, Watch, WatchSource, Write, check,
};

const OBJECTS: TableDefinition<&str, (u64, &[u8])> = TableDefinition::new("objects");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("log");

/// `meta` key: the layout of the tables, [`FORMAT`].
const META_FORMAT: &str = "format";
/// `meta` key: the revision of the last write.
const META_REVISION: &str = "revision";
/// `meta` key: every change up to this revision has left the log.
const META_COMPACTED: &str = "compacted";
/// The table layout this code reads and writes.
const FORMAT: u64 = 1;

/// At most this many events are handed to a watch per read.
const READ_CHUNK: usize = 256;

/// How a [`RedbStore`] is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedbOptions {
    /// How many of the latest changes the log keeps for watches (at least
    /// 1). Older ones are removed in the same transaction that writes new
    /// ones, so the file does not grow without bound.
    pub log_retention: u64,
    /// The most memory redb may use to cache pages, in bytes.
    pub cache_bytes: usize,
    /// Verify every page's checksum when opening, so that a file damaged
    /// outside redb is reported as [`StoreError::Corrupt`] instead of being
    /// trusted. Reads the whole file; on by default (the store is small).
    /// A file left by a crash is always checked and repaired.
    pub check_integrity: bool,
}

impl Default for RedbOptions {
    fn default() -> Self {
        RedbOptions {
            log_retention: DEFAULT_LOG_RETENTION,
            cache_bytes: 64 * 1024 * 1024,
            check_integrity: true,
        }
    }
}

/// The embedded durable [`Store`], in one redb database file.
///
/// - Durable: every write (or [`batch`](Store::batch) of writes) is one
///   redb write transaction committed with `Durability::Immediate`; when it
///   returns, it survives a crash or power loss. A crash mid-commit leaves
///   the previous commit (redb's copy-on-write pages and checksummed
///   commit slots).
/// - The change log is in the file: a watch can resume from a revision
///   seen before a restart, as long as it is within the retained log.
/// - One process at a time: redb locks the file. A second open fails with
///   [`StoreError::AlreadyOpen`].
/// - Watchers in this process are woken when a commit lands.
///
/// Clones share the same open database. The file is closed when the last
/// clone and the last [`Watch`] of it are dropped.
#[derive(Clone)]
pub struct RedbStore {
    inner: Arc<Inner>,
}

struct Inner {
    db: Database,
    path: PathBuf,
    retention: u64,
    /// The revision of the last commit, for watchers to wait on.
    committed: Mutex<Revision>,
    changed: Condvar,
}

impl std::fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbStore")
            .field("path", &self.inner.path)
            .field("log_retention", &self.inner.retention)
            .finish_non_exhaustive()
    }
}

impl RedbStore {
    /// Opens the database at `path`, creating it if there is no file, with
    /// the default [`RedbOptions`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        RedbStore::open_with(path, RedbOptions::default())
    }

    /// Opens the database at `path`, creating it if there is no file.
    ///
    /// Fails with [`StoreError::AlreadyOpen`] if another process (or
    /// another open handle in this one) has it, [`StoreError::Corrupt`] if
    /// the file is not a database of this format, [`StoreError::Io`] if it
    /// cannot be read or created.
    pub fn open_with(path: impl AsRef<Path>, options: RedbOptions) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        let db = Builder::new()
            .set_cache_size(options.cache_bytes)
            .set_check_integrity_on_open(options.check_integrity)
            .create(&path)
            .map_err(|e| match e {
                DatabaseError::DatabaseAlreadyOpen | DatabaseError::LockProtocolMismatch => {
                    StoreError::AlreadyOpen { path: path.clone() }
                }
                other => redb_error(other),
            })?;
        let revision = init(&db)?;
        Ok(RedbStore {
            inner: Arc::new(Inner {
                db,
                path,
                retention: options.log_retention.max(1),
                committed: Mutex::new(revision),
                changed: Condvar::new(),
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }
}

/// Creates the tables of a new file and checks the format of an old one;
/// the current revision.
fn init(db: &Database) -> Result<Revision, StoreError> {
    let txn = db.begin_write().map_err(redb_error)?;
    let revision = {
        let mut meta = txn.open_table(META).map_err(redb_error)?;
        txn.open_table(OBJECTS).map_err(redb_error)?;
        txn.open_table(LOG).map_err(redb_error)?;
        let format = meta
            .get(META_FORMAT)
            .map_err(redb_error)?
            .map(|g| g.value());
        match format {
            Some(FORMAT) => {}
            None => {
                meta.insert(META_FORMAT, FORMAT).map_err(redb_error)?;
            }
            Some(other) => {
                return Err(StoreError::Corrupt(format!(
                    "store format {other}; this version reads format {FORMAT}"
                )));
            }
        }
        meta_get(&meta, META_REVISION)?
    };
    txn.commit().map_err(redb_error)?;
    Ok(Revision(revision))
}

impl Inner {
    fn committed(&self) -> MutexGuard<'_, Revision> {
        // Holds a plain number: nothing can be left half-written.
        self.committed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn read(&self) -> Result<ReadTransaction, StoreError> {
        self.db.begin_read().map_err(redb_error)
    }

    /// The whole batch in one write transaction; nothing is committed if
    /// any write is refused or anything fails.
    fn write(&self, writes: Vec<Write>) -> Result<Vec<Revision>, BatchError> {
        let mut txn = self.db.begin_write().map_err(backend)?;
        txn.set_durability(Durability::Immediate).map_err(backend)?;
        let revisions = self.apply(&txn, writes)?;
        // On an error above, dropping `txn` aborts it.
        txn.commit().map_err(backend)?;
        if let Some(&last) = revisions.last() {
            let mut committed = self.committed();
            // Commits are serialized by redb, but two committers may reach
            // this lock in either order.
            *committed = (*committed).max(last);
            drop(committed);
            self.changed.notify_all();
        }
        Ok(revisions)
    }

    fn apply(
        &self,
        txn: &WriteTransaction,
        writes: Vec<Write>,
    ) -> Result<Vec<Revision>, BatchError> {
        let mut objects = txn.open_table(OBJECTS).map_err(backend)?;
        let mut meta = txn.open_table(META).map_err(backend)?;
        let mut log = txn.open_table(LOG).map_err(backend)?;
        let mut revision = meta_get(&meta, META_REVISION).map_err(BatchError::backend)?;
        let mut revisions = Vec::with_capacity(writes.len());
        for (index, write) in writes.into_iter().enumerate() {
            let at = |error| BatchError {
                index: Some(index),
                error,
            };
            let name = write.name().to_owned();
            // Only a delete needs the stored object (its uid, its event):
            // an update may overwrite an object that no longer decodes.
            let current = match objects.get(name.as_str()).map_err(backend)? {
                Some(guard) => {
                    let (rev, bytes) = guard.value();
                    let object = match write {
                        Write::Delete { .. } => Some(decode_object(&name, bytes).map_err(at)?),
                        Write::Create { .. } | Write::Update { .. } => None,
                    };
                    Some((object, Revision(rev)))
                }
                None => None,
            };
            let uid_and_rev = current
                .as_ref()
                .map(|(o, r)| (o.as_ref().map_or("", StoredObject::uid), *r));
            check(&write, uid_and_rev).map_err(at)?;
            revision = revision
                .checked_add(1)
                .ok_or_else(|| at(StoreError::Unavailable("revision counter exhausted".into())))?;
            let rev = Revision(revision);
            let event = match (write, current) {
                (Write::Create { object, .. }, _) => {
                    put(&mut objects, EventKind::Created, name, object, rev)
                }
                (Write::Update { object, .. }, _) => {
                    put(&mut objects, EventKind::Updated, name, object, rev)
                }
                (Write::Delete { .. }, Some((Some(object), _))) => {
                    objects.remove(name.as_str()).map_err(backend)?;
                    Ok(Event {
                        kind: EventKind::Deleted,
                        name,
                        revision: rev,
                        object,
                    })
                }
                // `check` refused a delete of a missing name.
                (Write::Delete { .. }, _) => Err(StoreError::NotFound { name }),
            }
            .map_err(at)?;
            let bytes = encode(&event).map_err(at)?;
            log.insert(revision, bytes.as_slice()).map_err(backend)?;
            revisions.push(rev);
        }
        meta.insert(META_REVISION, revision).map_err(backend)?;
        // Keep the last `retention` changes.
        let compacted = meta_get(&meta, META_COMPACTED).map_err(BatchError::backend)?;
        let cutoff = revision.saturating_sub(self.retention);
        if cutoff > compacted {
            log.retain_in(compacted + 1..=cutoff, |_, _| false)
                .map_err(backend)?;
            meta.insert(META_COMPACTED, cutoff).map_err(backend)?;
        }
        Ok(revisions)
    }
}

/// Writes `object` under `name` at `rev`; the event that says so.
fn put(
    objects: &mut ::redb::Table<'_, &str, (u64, &[u8])>,
    kind: EventKind,
    name: String,
    mut object: StoredObject,
    rev: Revision,
) -> Result<Event, StoreError> {
    object.meta.resource_version = rev.0;
    let bytes = encode(&object)?;
    objects
        .insert(name.as_str(), (rev.0, bytes.as_slice()))
        .map_err(redb_error)?;
    Ok(Event {
        kind,
        name,
        revision: rev,
        object,
    })
}

impl Store for RedbStore {
    fn get(&self, name: &str) -> Result<Option<(StoredObject, Revision)>, StoreError> {
        let txn = self.inner.read()?;
        let objects = txn.open_table(OBJECTS).map_err(redb_error)?;
        let found = objects.get(name).map_err(redb_error)?;
        match found {
            Some(guard) => {
                let (rev, bytes) = guard.value();
                Ok(Some((decode_object(name, bytes)?, Revision(rev))))
            }
            None => Ok(None),
        }
    }

    fn list(&self) -> Result<Listing, StoreError> {
        let txn = self.inner.read()?;
        let meta = txn.open_table(META).map_err(redb_error)?;
        let objects = txn.open_table(OBJECTS).map_err(redb_error)?;
        let mut listing = Listing {
            revision: Revision(meta_get(&meta, META_REVISION)?),
            objects: Vec::new(),
        };
        for entry in objects.iter().map_err(redb_error)? {
            let (name, value) = entry.map_err(redb_error)?;
            let name = name.value().to_owned();
            let (rev, bytes) = value.value();
            let object = decode_object(&name, bytes)?;
            listing.objects.push((name, object, Revision(rev)));
        }
        Ok(listing)
    }

    fn revision(&self) -> Result<Revision, StoreError> {
        let txn = self.inner.read()?;
        let meta = txn.open_table(META).map_err(redb_error)?;
        Ok(Revision(meta_get(&meta, META_REVISION)?))
    }

    fn batch(&self, writes: Vec<Write>) -> Result<Vec<Revision>, BatchError> {
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        self.inner.write(writes)
    }

    fn watch(&self, from: Revision) -> Result<Watch, StoreError> {
        let txn = self.inner.read()?;
        let meta = txn.open_table(META).map_err(redb_error)?;
        let compacted = Revision(meta_get(&meta, META_COMPACTED)?);
        if from < compacted {
            return Err(StoreError::Compacted {
                requested: from,
                compacted,
            });
        }
        Ok(Watch::new(
            from,
            Box::new(RedbFeed {
                inner: Arc::clone(&self.inner),
            }),
        ))
    }
}

/// A watch's view of a [`RedbStore`]: waits on the commit condition
/// variable, then reads the change log.
struct RedbFeed {
    inner: Arc<Inner>,
}

impl WatchSource for RedbFeed {
    fn read(&mut self, after: Revision, timeout: Duration) -> Result<Vec<Event>, StoreError> {
        let deadline = Instant::now().checked_add(timeout);
        let mut committed = self.inner.committed();
        while *committed <= after {
            let left = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => timeout,
            };
            if left.is_zero() {
                return Ok(Vec::new());
            }
            committed = self
                .inner
                .changed
                .wait_timeout(committed, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        drop(committed);

        let txn = self.inner.read()?;
        let meta = txn.open_table(META).map_err(redb_error)?;
        let compacted = Revision(meta_get(&meta, META_COMPACTED)?);
        if after < compacted {
            return Err(StoreError::Compacted {
                requested: after,
                compacted,
            });
        }
        let log = txn.open_table(LOG).map_err(redb_error)?;
        let mut events = Vec::new();
        let start = after.0.saturating_add(1);
        for entry in log.range(start..).map_err(redb_error)?.take(READ_CHUNK) {
            let (rev, bytes) = entry.map_err(redb_error)?;
            let event: Event = serde_json::from_slice(bytes.value()).map_err(|e| {
                StoreError::Corrupt(format!("change log entry {}: {e}", rev.value()))
            })?;
            events.push(event);
        }
        Ok(events)
    }
}

/// A `meta` value, 0 when absent.
fn meta_get(meta: &impl ReadableTable<&'static str, u64>, key: &str) -> Result<u64, StoreError> {
    Ok(meta.get(key).map_err(redb_error)?.map_or(0, |g| g.value()))
}

fn encode<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(|e| StoreError::Corrupt(format!("cannot encode: {e}")))
}

fn decode_object(name: &str, bytes: &[u8]) -> Result<StoredObject, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt(format!("object {name:?}: {e}")))
}

/// A redb failure as a [`StoreError`]: corruption and I/O keep their kind,
/// everything else makes the store unavailable.
fn redb_error(e: impl Into<::redb::Error>) -> StoreError {
    match e.into() {
        ::redb::Error::Corrupted(msg) => StoreError::Corrupt(msg),
        ::redb::Error::Io(io) => StoreError::Io(io.to_string()),
        other => StoreError::Unavailable(other.to_string()),
    }
}

/// A redb failure that belongs to no write in particular.
fn backend(e: impl Into<::redb::Error>) -> BatchError {
    BatchError::backend(redb_error(e))
}
