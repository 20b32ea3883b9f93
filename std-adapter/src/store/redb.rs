//! The embedded durable backend, on redb: one file, copy-on-write B-trees,
//! checksummed commits, one fsync per commit.
//!
//! Three tables:
//!
//! | table | key | value |
//! |---|---|---|
//! | `objects` | name | (revision, object as JSON, or nothing: see below) |
//! | `meta` | `"format"`, `"revision"`, `"compacted"` | u64 |
//! | `changes` | revision | the change: (kind, name, object as JSON) |
//!
//! Every batch (and so every single write) is one write transaction: the
//! objects, the new revision and the change log move together, and
//! `Durability::Immediate` makes the commit durable before it returns.
//!
//! An object is written once: its bytes go into the change-log
//! entry of the write, and `objects` holds its revision with no bytes,
//! meaning "the object is the one of the log entry at this revision". Only
//! when that entry leaves the log (the retention) while it still holds the
//! object's current state are the bytes moved into `objects`. Every commit
//! thus writes each object's bytes once instead of twice, which is what
//! bounds a group commit on disk.
//!
//! Formats: 3 (this one); 2 kept the change log as hand-encoded JSON
//! events in a table `log`, and 1 kept each object's bytes in `objects`
//! too. A file of format 1 or 2 is brought to format 3 when it is opened
//! for writing, in one transaction: every log entry moves to `changes`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, Instant};

use ::redb::{
    Builder, Database, DatabaseError, Durability, ReadTransaction, ReadableDatabase, ReadableTable,
    TableDefinition, TableHandle, WriteTransaction,
};

use super::{
    BatchError, DEFAULT_LOG_RETENTION, Event, EventKind, Listing, Revision, Store, StoreError,
    StoredObject, Watch, WatchSource, Write, check,
};

const OBJECTS: TableDefinition<&str, (u64, &[u8])> = TableDefinition::new("objects");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// The change log: revision → (kind, [`kind_code`]; the object's name; the
/// object as JSON, as it was written, or for a delete as it was last
/// stored).
const CHANGES: TableDefinition<u64, (u8, &str, &[u8])> = TableDefinition::new("changes");
/// The change log of formats 1 and 2, read only to move it to [`CHANGES`].
const OLD_LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("log");

/// `meta` key: the layout of the tables, [`FORMAT`].
const META_FORMAT: &str = "format";
/// The layout that kept every object's bytes in `objects` as well as in
/// the log (`objects` then reads as in format 2).
const FORMAT_BYTES_TWICE: u64 = 1;
/// The layout whose change log held JSON events (table `log`).
const FORMAT_JSON_LOG: u64 = 2;
/// `meta` key: the revision of the last write.
const META_REVISION: &str = "revision";
/// `meta` key: every change up to this revision has left the log.
const META_COMPACTED: &str = "compacted";
/// The table layout this code writes (it converts the older ones).
const FORMAT: u64 = 3;

/// At most this many events are handed to a watch per read.
const READ_CHUNK: usize = 256;

/// How a [`RedbStore`] is opened: [`RedbOptions::default`], then set the
/// fields to change (more may come).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
    /// `None` once a failed write closed it (see [`Inner::write`]), until
    /// the next operation opens it again.
    db: RwLock<Option<Database>>,
    /// How to open it again.
    options: RedbOptions,
    path: PathBuf,
    retention: u64,
    /// The revision of the last commit, for watchers to wait on.
    committed: Mutex<Revision>,
    changed: Condvar,
    /// A [`RedbStore::snapshot`]: every write is refused.
    snapshot: bool,
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
        let db = open_file(&path, &options)?;
        let revision = init(&db)?;
        Ok(RedbStore {
            inner: Arc::new(Inner {
                db: RwLock::new(Some(db)),
                retention: options.log_retention.max(1),
                options,
                path,
                committed: Mutex::new(revision),
                changed: Condvar::new(),
                snapshot: false,
            }),
        })
    }

    /// A read-only snapshot of the database at `path`, for a reader that
    /// must never get in a writer's way: the file's bytes are read as they
    /// are (no redb lock is taken, nothing is written to the file or beside
    /// it, a read-only file or mount is fine) and opened in memory —
    /// repaired there if the file was left by a crash. Every write to the
    /// snapshot is refused ([`StoreError::Unavailable`]).
    ///
    /// A writer may commit while the bytes are read; what was read is then
    /// torn, which redb's checksums tell, and the file is read again (up to
    /// 10 times). A file that is not a database of this
    /// format is [`StoreError::Corrupt`]; one that cannot be read,
    /// [`StoreError::Io`].
    pub fn snapshot(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        let mut attempt = 1;
        loop {
            let bytes = std::fs::read(&path).map_err(|e| {
                StoreError::Io(crate::store::BackendError::with_context(path.display(), e))
            })?;
            match open_in_memory(&bytes) {
                Ok((db, revision)) => {
                    return Ok(RedbStore {
                        inner: Arc::new(Inner {
                            db: RwLock::new(Some(db)),
                            options: RedbOptions::default(),
                            path,
                            retention: DEFAULT_LOG_RETENTION,
                            committed: Mutex::new(revision),
                            changed: Condvar::new(),
                            snapshot: true,
                        }),
                    });
                }
                Err(StoreError::Corrupt(_)) if attempt < SNAPSHOT_ATTEMPTS => {
                    attempt = attempt.saturating_add(1);
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }
}

/// Opens (or creates) the database file.
fn open_file(path: &Path, options: &RedbOptions) -> Result<Database, StoreError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create_file(path, options)?,
        Err(e) => return Err(io_error(path, e)),
        Ok(_) => {}
    }
    open_or_create(path, options)
}

/// redb's `create`: opens the file at `path`, or makes a database of an
/// empty or missing one.
fn open_or_create(path: &Path, options: &RedbOptions) -> Result<Database, StoreError> {
    Builder::new()
        .set_cache_size(options.cache_bytes)
        .set_check_integrity_on_open(options.check_integrity)
        .create(path)
        .map_err(|e| match e {
            DatabaseError::DatabaseAlreadyOpen | DatabaseError::LockProtocolMismatch => {
                StoreError::AlreadyOpen {
                    path: path.to_path_buf(),
                }
            }
            other => redb_error(other),
        })
}

/// Makes a new database at `path`, which does not exist: whole, or not at
/// all.
///
/// redb writes a new file's magic number last, so a process killed while
/// it makes one leaves a file no later open accepts ("not a redb
/// database") and the store could never open again. The database is made
/// beside `path` (`<name>.new`, with its tables), then linked into place:
/// a creation cut short leaves only the `.new` file, which the next one
/// replaces. Should another process have made `path` meanwhile, its file
/// is kept and used.
fn create_file(path: &Path, options: &RedbOptions) -> Result<(), StoreError> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".new");
    let new = path.with_file_name(name);
    match std::fs::remove_file(&new) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_error(&new, e)),
        _ => {}
    }
    {
        let db = open_or_create(&new, options)?;
        init(&db)?;
    }
    let placed = std::fs::hard_link(&new, path).or_else(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => Ok(()),
        // A file system without hard links: a rename, which replaces a
        // file another process made in the same instant (not guarded).
        _ => std::fs::rename(&new, path),
    });
    placed.map_err(|e| io_error(path, e))?;
    let _ = std::fs::remove_file(&new);
    // The new name is durable before anything is written through it.
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, e))?;
    Ok(())
}

fn io_error(path: &Path, e: std::io::Error) -> StoreError {
    StoreError::Io(crate::store::BackendError::with_context(path.display(), e))
}

/// How many times [`RedbStore::snapshot`] reads a file that changes under
/// it before it reports it corrupt.
const SNAPSHOT_ATTEMPTS: u32 = 10;

/// A database in memory holding `bytes` (a copy of a database file, or
/// nothing for an empty file), checked and repaired if need be; its
/// revision.
fn open_in_memory(bytes: &[u8]) -> Result<(Database, Revision), StoreError> {
    use ::redb::StorageBackend;
    let backend = ::redb::backends::InMemoryBackend::new();
    let len = u64::try_from(bytes.len())
        .map_err(|e| StoreError::Io(crate::store::BackendError::from_error(e)))?;
    backend
        .set_len(len)
        .and_then(|()| backend.write(0, bytes))
        .map_err(|e| StoreError::Io(crate::store::BackendError::from_error(e)))?;
    let db = Builder::new()
        .set_check_integrity_on_open(true)
        .create_with_backend(backend)
        .map_err(redb_error)?;
    let revision = init(&db)?;
    Ok((db, revision))
}

/// Creates the tables of a new file and checks the format of an old one;
/// the current revision.
fn init(db: &Database) -> Result<Revision, StoreError> {
    let txn = db.begin_write().map_err(redb_error)?;
    let revision = {
        let mut meta = txn.open_table(META).map_err(redb_error)?;
        txn.open_table(OBJECTS).map_err(redb_error)?;
        txn.open_table(CHANGES).map_err(redb_error)?;
        let format = meta
            .get(META_FORMAT)
            .map_err(redb_error)?
            .map(|g| g.value());
        match format {
            Some(FORMAT) => {}
            // A new file, or one of format 1 or 2: its log (if any) moves
            // to `changes`; from now on its objects may be in the log only.
            None | Some(FORMAT_BYTES_TWICE | FORMAT_JSON_LOG) => {
                move_json_log(&txn)?;
                meta.insert(META_FORMAT, FORMAT).map_err(redb_error)?;
            }
            Some(other) => {
                return Err(StoreError::Corrupt(crate::store::BackendError::from(
                    format!(
                        "store format {other}; this version reads formats \
                     {FORMAT_BYTES_TWICE} to {FORMAT}"
                    ),
                )));
            }
        }
        meta_get(&meta, META_REVISION)?
    };
    txn.commit().map_err(redb_error)?;
    Ok(Revision(revision))
}

/// Moves the JSON change log of formats 1 and 2 (table `log`, if there is
/// one) into [`CHANGES`], and drops it.
fn move_json_log(txn: &WriteTransaction) -> Result<(), StoreError> {
    let exists = txn
        .list_tables()
        .map_err(redb_error)?
        .any(|t| t.name() == OLD_LOG.name());
    if !exists {
        return Ok(());
    }
    {
        let old = txn.open_table(OLD_LOG).map_err(redb_error)?;
        let mut changes = txn.open_table(CHANGES).map_err(redb_error)?;
        for entry in old.iter().map_err(redb_error)? {
            let (rev, bytes) = entry.map_err(redb_error)?;
            let (rev, bytes) = (rev.value(), bytes.value());
            let (kind, name, object) = json_event_parts(bytes).ok_or_else(|| bad_entry(rev))?;
            let object = bytes.get(object).ok_or_else(|| bad_entry(rev))?;
            changes
                .insert(rev, (kind_code(kind), name.as_str(), object))
                .map_err(redb_error)?;
        }
    }
    txn.delete_table(OLD_LOG).map_err(redb_error)?;
    Ok(())
}

/// How a change's kind is stored in [`CHANGES`]; [`kind_of`] reads it.
fn kind_code(kind: EventKind) -> u8 {
    match kind {
        EventKind::Created => 0,
        EventKind::Updated => 1,
        EventKind::Deleted => 2,
    }
}

/// The kind [`kind_code`] stored as `code`; `None` for no kind this
/// version knows.
fn kind_of(code: u8) -> Option<EventKind> {
    match code {
        0 => Some(EventKind::Created),
        1 => Some(EventKind::Updated),
        2 => Some(EventKind::Deleted),
        _ => None,
    }
}

impl Inner {
    fn committed(&self) -> MutexGuard<'_, Revision> {
        // Holds a plain number: nothing can be left half-written.
        self.committed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn read(&self) -> Result<ReadTransaction, StoreError> {
        self.with_db(|db| db.begin_read().map_err(redb_error))
    }

    /// Runs `op` on the database, opened again first if a failed write
    /// closed it.
    fn with_db<T>(
        &self,
        op: impl FnOnce(&Database) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let db = self.db.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(db) = db.as_ref() {
            return op(db);
        }
        drop(db);
        let mut slot = self.db.write().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            // Another thread may have opened it meanwhile. Opening checks the
            // file and repairs what the failed commit left, as after a crash.
            let db = open_file(&self.path, &self.options)?;
            let revision = init(&db)?;
            *slot = Some(db);
            let mut committed = self.committed();
            *committed = (*committed).max(revision);
        }
        match slot.as_ref() {
            Some(db) => op(db),
            None => Err(StoreError::Unavailable(
                format!("{}: not open", self.path.display()).into(),
            )),
        }
    }

    /// Closes the database after a write failed on I/O (a full disk, a
    /// device error): redb then refuses every later transaction until the
    /// file is opened again, which the next operation does
    /// ([`Inner::with_db`]) — so the store works again once the cause is
    /// gone, instead of failing for the life of the process.
    fn close_after_io_error(&self) {
        let mut slot = self.db.write().unwrap_or_else(PoisonError::into_inner);
        *slot = None;
    }

    /// The whole batch in one write transaction; nothing is committed if
    /// any write is refused or anything fails.
    fn write(&self, writes: Vec<Write>) -> Result<Vec<Revision>, BatchError> {
        if self.snapshot {
            return Err(BatchError::backend(StoreError::Unavailable(
                format!("{}: a read-only snapshot", self.path.display()).into(),
            )));
        }
        let mut txn = self
            .with_db(|db| db.begin_write().map_err(redb_error))
            .map_err(BatchError::backend)?;
        let committed = txn
            .set_durability(Durability::Immediate)
            .map_err(backend)
            .and_then(|()| self.apply(&txn, writes))
            // On an error, dropping `txn` aborts it.
            .and_then(|revisions| txn.commit().map(|()| revisions).map_err(backend));
        let revisions = match committed {
            Err(e) if matches!(e.error, StoreError::Io(_)) => {
                self.close_after_io_error();
                return Err(e);
            }
            other => other?,
        };
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
        let mut log = txn.open_table(CHANGES).map_err(backend)?;
        let mut revision = meta_get(&meta, META_REVISION).map_err(BatchError::backend)?;
        let mut revisions = Vec::with_capacity(writes.len());
        // Each object is encoded once, into `object`, which serves the
        // whole batch (for a delete: the bytes stored).
        let mut object = Vec::new();
        for (index, write) in writes.into_iter().enumerate() {
            let at = |error| BatchError {
                index: Some(index),
                error,
            };
            let name = write.name();
            // Only a delete needs the stored object (its uid, its event):
            // an update may overwrite an object that no longer decodes.
            let current = match objects.get(name).map_err(backend)? {
                Some(guard) => {
                    let (rev, inline) = guard.value();
                    let uid = match write {
                        Write::Delete { .. } => {
                            with_object(&log, name, rev, inline, |bytes| {
                                object.clear();
                                object.extend_from_slice(bytes);
                                Ok(())
                            })
                            .map_err(at)?;
                            Some(decode_object(name, &object).map_err(at)?.record.uid)
                        }
                        Write::Create { .. } | Write::Update { .. } => None,
                    };
                    Some((uid, Revision(rev)))
                }
                None => None,
            };
            let uid_and_rev = current
                .as_ref()
                .map(|(uid, rev)| (uid.as_ref().map_or("", |u| u.as_str()), *rev));
            check(&write, uid_and_rev).map_err(at)?;
            revision = revision
                .checked_add(1)
                .ok_or_else(|| at(StoreError::Unavailable("revision counter exhausted".into())))?;
            let rev = Revision(revision);
            let (kind, name) = match write {
                Write::Create {
                    name,
                    object: written,
                } => {
                    put(&mut objects, &name, written, rev, &mut object).map_err(at)?;
                    (EventKind::Created, name)
                }
                Write::Update {
                    name,
                    object: written,
                    ..
                } => {
                    put(&mut objects, &name, written, rev, &mut object).map_err(at)?;
                    (EventKind::Updated, name)
                }
                // `check` passed: the object is stored, its bytes in `object`.
                Write::Delete { name, .. } => {
                    objects.remove(name.as_str()).map_err(backend)?;
                    (EventKind::Deleted, name)
                }
            };
            log.insert(
                revision,
                (kind_code(kind), name.as_str(), object.as_slice()),
            )
            .map_err(backend)?;
            revisions.push(rev);
        }
        meta.insert(META_REVISION, revision).map_err(backend)?;
        // Keep the last `retention` changes.
        let compacted = meta_get(&meta, META_COMPACTED).map_err(BatchError::backend)?;
        let cutoff = revision.saturating_sub(self.retention);
        if cutoff > compacted {
            // cutoff > compacted: compacted + 1 does not overflow.
            let trimmed = compacted.saturating_add(1)..=cutoff;
            keep_objects_of(&mut objects, &log, trimmed.clone()).map_err(BatchError::backend)?;
            log.retain_in(trimmed, |_, _| false).map_err(backend)?;
            meta.insert(META_COMPACTED, cutoff).map_err(backend)?;
        }
        Ok(revisions)
    }
}

/// Before the log entries of `trimmed` go: the objects whose current state
/// is only in one of them get their bytes in `objects`.
fn keep_objects_of(
    objects: &mut ::redb::Table<'_, &str, (u64, &[u8])>,
    log: &::redb::Table<'_, u64, (u8, &str, &[u8])>,
    trimmed: std::ops::RangeInclusive<u64>,
) -> Result<(), StoreError> {
    let mut kept = Vec::new();
    for entry in log.range(trimmed).map_err(redb_error)? {
        let (rev, bytes) = entry.map_err(redb_error)?;
        let (rev, (kind, name, object)) = (rev.value(), bytes.value());
        if kind_of(kind).is_none_or(|k| k == EventKind::Deleted) {
            continue;
        }
        let current = objects
            .get(name)
            .map_err(redb_error)?
            .is_some_and(|g| g.value() == (rev, &[][..]));
        if current {
            kept.push((name.to_owned(), rev, object.to_vec()));
        }
    }
    for (name, rev, bytes) in kept {
        objects
            .insert(name.as_str(), (rev, bytes.as_slice()))
            .map_err(redb_error)?;
    }
    Ok(())
}

/// Calls `f` with the bytes of the object stored under `name` at `rev`:
/// `inline` (its bytes in `objects`), or if that is empty, the object of
/// the log entry of `rev`.
fn with_object<T>(
    log: &impl ReadableTable<u64, (u8, &'static str, &'static [u8])>,
    name: &str,
    rev: u64,
    inline: &[u8],
    f: impl FnOnce(&[u8]) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    if !inline.is_empty() {
        return f(inline);
    }
    let entry = log.get(rev).map_err(redb_error)?.ok_or_else(|| {
        StoreError::Corrupt(crate::store::BackendError::from(format!(
            "object {name:?}: its bytes are not in the change log at revision {rev}"
        )))
    })?;
    let (_, _, object) = entry.value();
    f(object)
}

/// The kind, the name and where the object is in a change-log entry of
/// formats 1 and 2: `{"kind":K,"name":N,"revision":R,"object":O}`.
fn json_event_parts(entry: &[u8]) -> Option<(EventKind, String, std::ops::Range<usize>)> {
    /// One JSON value at the start of `bytes`, and how many bytes it took.
    fn value<'de, T: serde::Deserialize<'de>>(bytes: &'de [u8]) -> Option<(T, usize)> {
        let mut values = serde_json::Deserializer::from_slice(bytes).into_iter::<T>();
        let value = values.next()?.ok()?;
        Some((value, values.byte_offset()))
    }
    /// `literal` at `at`, which moves past it.
    fn expect(entry: &[u8], at: &mut usize, literal: &[u8]) -> Option<()> {
        let found = entry.get(*at..)?.starts_with(literal);
        *at = at.checked_add(literal.len())?;
        found.then_some(())
    }
    let mut at = 0;
    expect(entry, &mut at, b"{\"kind\":")?;
    let (kind, used) = value::<EventKind>(entry.get(at..)?)?;
    at = at.checked_add(used)?;
    expect(entry, &mut at, b",\"name\":")?;
    let (name, used) = value::<String>(entry.get(at..)?)?;
    at = at.checked_add(used)?;
    expect(entry, &mut at, b",\"revision\":")?;
    let (_, used) = value::<u64>(entry.get(at..)?)?;
    at = at.checked_add(used)?;
    expect(entry, &mut at, b",\"object\":")?;
    let end = entry.len().checked_sub(1)?;
    (entry.last() == Some(&b'}') && at < end).then_some((kind, name, at..end))
}

fn bad_entry(rev: u64) -> StoreError {
    StoreError::Corrupt(crate::store::BackendError::from(format!(
        "change log entry {rev} is not an event"
    )))
}

/// Writes `object` under `name` at `rev`, encoded into `bytes` for its
/// change-log entry, which holds it (`objects` holds only `rev`).
fn put(
    objects: &mut ::redb::Table<'_, &str, (u64, &[u8])>,
    name: &str,
    mut object: StoredObject,
    rev: Revision,
    bytes: &mut Vec<u8>,
) -> Result<(), StoreError> {
    object.record.resource_version = rev.0;
    bytes.clear();
    serde_json::to_writer(&mut *bytes, &object).map_err(encode_error)?;
    objects.insert(name, (rev.0, &[][..])).map_err(redb_error)?;
    Ok(())
}

impl RedbStore {
    // The reads, once each (see `reread`).

    fn get_once(&self, name: &str) -> Result<Option<(StoredObject, Revision)>, StoreError> {
        let txn = self.inner.read()?;
        let objects = txn.open_table(OBJECTS).map_err(redb_error)?;
        let log = txn.open_table(CHANGES).map_err(redb_error)?;
        let found = objects.get(name).map_err(redb_error)?;
        match found {
            Some(guard) => {
                let (rev, inline) = guard.value();
                let object = with_object(&log, name, rev, inline, |b| decode_object(name, b))?;
                Ok(Some((object, Revision(rev))))
            }
            None => Ok(None),
        }
    }

    fn list_once(&self) -> Result<Listing, StoreError> {
        let txn = self.inner.read()?;
        let meta = txn.open_table(META).map_err(redb_error)?;
        let objects = txn.open_table(OBJECTS).map_err(redb_error)?;
        let log = txn.open_table(CHANGES).map_err(redb_error)?;
        let mut listing = Listing {
            revision: Revision(meta_get(&meta, META_REVISION)?),
            objects: Vec::new(),
        };
        for entry in objects.iter().map_err(redb_error)? {
            let (name, value) = entry.map_err(redb_error)?;
            let name = name.value().to_owned();
            let (rev, inline) = value.value();
            let object = with_object(&log, &name, rev, inline, |b| decode_object(&name, b))?;
            listing.objects.push((name, object, Revision(rev)));
        }
        Ok(listing)
    }

    fn revision_once(&self) -> Result<Revision, StoreError> {
        let txn = self.inner.read()?;
        let meta = txn.open_table(META).map_err(redb_error)?;
        Ok(Revision(meta_get(&meta, META_REVISION)?))
    }
}

/// Runs a read again if the database was closed under it: a write that
/// failed on I/O (a full disk) closes it while other threads read, and the
/// next read opens it again ([`Inner::with_db`]). A few times at most.
fn reread<T>(read: impl Fn() -> Result<T, StoreError>) -> Result<T, StoreError> {
    let mut tries = 0_u8;
    loop {
        match read() {
            Err(e) if tries < 3 && closed_under(&e) => tries = tries.saturating_add(1),
            done => return done,
        }
    }
}

/// Whether `e` says the database was closed under the read.
fn closed_under(e: &StoreError) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = e
        .backend()
        .and_then(crate::store::BackendError::cause)
        .map(|cause| cause as &(dyn std::error::Error + 'static));
    while let Some(s) = source {
        if matches!(
            s.downcast_ref::<::redb::Error>(),
            Some(::redb::Error::DatabaseClosed)
        ) {
            return true;
        }
        source = s.source();
    }
    false
}

impl Store for RedbStore {
    fn get(&self, name: &str) -> Result<Option<(StoredObject, Revision)>, StoreError> {
        reread(|| self.get_once(name))
    }

    fn list(&self) -> Result<Listing, StoreError> {
        reread(|| self.list_once())
    }

    fn revision(&self) -> Result<Revision, StoreError> {
        reread(|| self.revision_once())
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
        let log = txn.open_table(CHANGES).map_err(redb_error)?;
        let mut events = Vec::new();
        let start = after.0.saturating_add(1);
        for entry in log.range(start..).map_err(redb_error)?.take(READ_CHUNK) {
            let (rev, value) = entry.map_err(redb_error)?;
            let (rev, (kind, name, object)) = (rev.value(), value.value());
            // A change of a kind this version does not know: not shown.
            let Some(kind) = kind_of(kind) else {
                continue;
            };
            events.push(Event {
                kind,
                name: name.to_owned(),
                revision: Revision(rev),
                object: decode_object(name, object)?,
            });
        }
        Ok(events)
    }
}

/// A `meta` value, 0 when absent.
fn meta_get(meta: &impl ReadableTable<&'static str, u64>, key: &str) -> Result<u64, StoreError> {
    Ok(meta.get(key).map_err(redb_error)?.map_or(0, |g| g.value()))
}

fn encode_error(e: serde_json::Error) -> StoreError {
    StoreError::Corrupt(crate::store::BackendError::with_context("cannot encode", e))
}

fn decode_object(name: &str, bytes: &[u8]) -> Result<StoredObject, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| {
        StoreError::Corrupt(crate::store::BackendError::with_context(
            format!("object {name:?}"),
            e,
        ))
    })
}

/// A redb failure as a [`StoreError`]: corruption and I/O keep their kind,
/// everything else makes the store unavailable.
fn redb_error(e: impl Into<::redb::Error>) -> StoreError {
    match e.into() {
        ::redb::Error::Corrupted(msg) => StoreError::Corrupt(msg.into()),
        ::redb::Error::Io(io) => StoreError::Io(crate::store::BackendError::from_error(io)),
        // An earlier write failed on I/O and redb refuses to go on: still
        // an I/O error (closing and opening the file again clears it).
        e @ ::redb::Error::PreviousIo => StoreError::Io(crate::store::BackendError::from_error(e)),
        other => StoreError::Unavailable(crate::store::BackendError::from_error(other)),
    }
}

/// A redb failure that belongs to no write in particular.
fn backend(e: impl Into<::redb::Error>) -> BatchError {
    BatchError::backend(redb_error(e))
}

#[cfg(test)]
mod tests {
    use grace_core::{Name, Record};

    use super::*;

    /// A process killed while redb made its file left one no open
    /// accepted (redb writes the magic number last): now only the
    /// `.new` file beside it is left, and the next open makes the
    /// database anew.
    #[test]
    fn a_creation_cut_short_never_leaves_a_store_that_cannot_open() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("grace.redb");
        let cut_short = dir.path().join("grace.redb.new");
        // A header written, its magic number not yet.
        std::fs::write(&cut_short, vec![0_u8; 8192]).expect("written");
        let store = RedbStore::open(&path).expect("made anew");
        let object =
            StoredObject::unscheduled(Record::new(Name::try_from("uid-1").expect("short")));
        store.create("web", object).expect("created");
        drop(store);
        assert!(!cut_short.exists(), "the leftover is gone");
        let store = RedbStore::open(&path).expect("opens again");
        assert!(store.get("web").expect("readable").is_some());
    }

    /// The old formats' JSON events are read by hand: the kind, the name
    /// and the object's bytes, as serde wrote them.
    #[test]
    fn a_json_event_of_the_old_formats_is_read() {
        let mut object =
            StoredObject::unscheduled(Record::new(Name::try_from("uid-1").expect("short")));
        object.record.resource_version = 42;
        object.node = Some("node-\"a\"".into());
        object.agent = Some(crate::store::KillState::from_bytes(
            b"\x01\x03\xc3\xa9\n\x00\"\\",
        ));
        let bytes = serde_json::to_vec(&object).expect("encodes");
        for kind in [EventKind::Created, EventKind::Updated, EventKind::Deleted] {
            for name in ["web-0", "pods/\"odd\" \\ näme\t"] {
                let event = Event {
                    kind,
                    name: name.into(),
                    revision: Revision(u64::MAX),
                    object: object.clone(),
                };
                let built = serde_json::to_vec(&event).expect("encodes");
                let (k, n, at) = json_event_parts(&built).expect("an event");
                assert_eq!((k, n.as_str(), &built[at]), (kind, name, &bytes[..]));
            }
        }
        assert_eq!(
            json_event_parts(b"{\"kind\":\"Created\",\"name\":\"a\"}"),
            None
        );
        assert_eq!(json_event_parts(b"not json"), None);
    }

    /// A file of format 1 (every object's bytes in `objects` and in the
    /// JSON log) or 2 (a JSON log) is converted to format 3 when opened:
    /// its objects and its change log read as before, and it is written on.
    #[test]
    fn a_file_of_format_1_or_2_is_converted_and_written_on() {
        for old in [FORMAT_BYTES_TWICE, FORMAT_JSON_LOG] {
            file_of_an_old_format_is_converted(old);
        }
    }

    fn file_of_an_old_format_is_converted(old: u64) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("old.redb");
        let object = |uid: &str, rev: u64| {
            let mut o = StoredObject::unscheduled(Record::new(Name::try_from(uid).expect("short")));
            o.record.resource_version = rev;
            o
        };
        {
            let db = Database::create(&path).expect("creates");
            let txn = db.begin_write().expect("writes");
            {
                let mut meta = txn.open_table(META).expect("table");
                let mut objects = txn.open_table(OBJECTS).expect("table");
                let mut log = txn.open_table(OLD_LOG).expect("table");
                meta.insert(META_FORMAT, old).expect("insert");
                meta.insert(META_REVISION, 2).expect("insert");
                for (rev, name, uid) in [(1, "a", "ua"), (2, "b", "ub")] {
                    let o = object(uid, rev);
                    let bytes = serde_json::to_vec(&o).expect("encodes");
                    // Format 2 keeps the bytes in the log alone.
                    let inline = if old == FORMAT_BYTES_TWICE {
                        &bytes[..]
                    } else {
                        &[]
                    };
                    objects.insert(name, (rev, inline)).expect("insert");
                    let event = Event {
                        kind: EventKind::Created,
                        name: name.into(),
                        revision: Revision(rev),
                        object: o,
                    };
                    let bytes = serde_json::to_vec(&event).expect("encodes");
                    log.insert(rev, bytes.as_slice()).expect("insert");
                }
            }
            txn.commit().expect("commits");
        }
        let options = RedbOptions {
            log_retention: 2,
            ..RedbOptions::default()
        };
        let store = RedbStore::open_with(&path, options).expect("opens");
        let format = {
            let txn = store.inner.read().expect("reads");
            let meta = txn.open_table(META).expect("table");
            meta_get(&meta, META_FORMAT).expect("reads")
        };
        assert_eq!(format, FORMAT);
        assert_eq!(
            store.get("a").unwrap(),
            Some((object("ua", 1), Revision(1)))
        );
        // The old log, whole, from the change log's start.
        let mut watch = store.watch(Revision(0)).expect("watches");
        for (rev, name, uid) in [(1, "a", "ua"), (2, "b", "ub")] {
            let event = watch.try_next().expect("reads").expect("an event");
            let expected = Event {
                kind: EventKind::Created,
                name: name.into(),
                revision: Revision(rev),
                object: object(uid, rev),
            };
            assert_eq!(event, expected);
        }
        assert_eq!(watch.try_next().expect("reads"), None);
        // Both old log entries leave the log; the objects stay whole.
        let r3 = store.update("b", object("ub", 0), Revision(2)).unwrap();
        store.create("c", object("uc", 0)).unwrap();
        store.update("b", object("ub", 0), r3).unwrap();
        let listed: Vec<(String, StoredObject, Revision)> = store.list().unwrap().objects;
        assert_eq!(listed[0], ("a".into(), object("ua", 1), Revision(1)));
        assert_eq!(listed.len(), 3);
        let pre = crate::store::StorePreconditions {
            uid: Some("ua".into()),
            revision: None,
        };
        store.delete("a", pre).unwrap();
        assert_eq!(store.get("a").unwrap(), None);
    }
}
