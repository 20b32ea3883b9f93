//! What a store operation can fail with.

use std::fmt;
use std::path::PathBuf;

use super::Revision;

/// Why a store operation failed.
///
/// The first six are answers about the data or the writer (the caller
/// decides what to do next); the last four are failures of the backend,
/// with its message.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreError {
    /// No object is stored under this name.
    NotFound {
        /// The name asked for.
        name: String,
    },
    /// `create` of a name that is already stored.
    AlreadyExists {
        /// The name asked for.
        name: String,
        /// The stored object's revision.
        current: Revision,
    },
    /// The object's revision is not the one the write expected (a
    /// compare-and-swap `update`, or a delete with a revision
    /// precondition): someone else wrote it first. Read it again and retry.
    Conflict {
        /// The name asked for.
        name: String,
        /// The stored object's revision.
        current: Revision,
    },
    /// A delete's uid precondition failed: the name now holds another
    /// object (deleted and re-created), which was left alone.
    UidMismatch {
        /// The name asked for.
        name: String,
        /// The uid the precondition named.
        expected: String,
        /// The uid of the stored object.
        found: String,
    },
    /// A watch asked for changes that are no longer in the change log.
    /// List again and watch from the listing's revision.
    Compacted {
        /// The watch wanted the changes after this revision.
        requested: Revision,
        /// Changes up to and including this revision are gone; a watch
        /// from here or later works.
        compacted: Revision,
    },
    /// The writer's node was fenced: its fencing epoch moved past the one
    /// the writer holds (an etcd store guarded by an epoch,
    /// `EtcdStore::with_fencing`). Nothing was written; the node's objects
    /// are not the writer's any more.
    Fenced {
        /// The node.
        node: String,
        /// Its fencing epoch now.
        epoch: u64,
    },
    /// The database is held by another process (or another handle in
    /// this one): redb's exclusive lock.
    AlreadyOpen {
        /// The database file.
        path: PathBuf,
    },
    /// The backend cannot serve the request now (a transaction error, a
    /// closed database, a lost server).
    Unavailable(String),
    /// Stored data does not decode, or the database reports corruption.
    Corrupt(String),
    /// An I/O error from the backend.
    Io(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::NotFound { name } => write!(f, "{name:?} not found"),
            StoreError::AlreadyExists { name, current } => {
                write!(f, "{name:?} already exists (revision {current})")
            }
            StoreError::Conflict { name, current } => {
                write!(f, "conflict on {name:?}: its revision is now {current}")
            }
            StoreError::UidMismatch {
                name,
                expected,
                found,
            } => write!(
                f,
                "precondition failed on {name:?}: uid is {found:?}, not {expected:?}"
            ),
            StoreError::Compacted {
                requested,
                compacted,
            } => write!(
                f,
                "changes after revision {requested} are compacted (the log starts after {compacted})"
            ),
            StoreError::Fenced { node, epoch } => write!(
                f,
                "node {node:?} was fenced (its epoch is now {epoch}): its objects are not ours any more"
            ),
            StoreError::AlreadyOpen { path } => write!(
                f,
                "{} is already open in another process (or handle); only one may use it at a time",
                path.display()
            ),
            StoreError::Unavailable(msg) => write!(f, "store unavailable: {msg}"),
            StoreError::Corrupt(msg) => write!(f, "store corrupt: {msg}"),
            StoreError::Io(msg) => write!(f, "store I/O error: {msg}"),
        }
    }
}

impl std::error::Error for StoreError {}

/// Why a [`Store::batch`](super::Store::batch) wrote nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchError {
    /// The write that was refused (its position in the batch), or `None`
    /// when the commit itself failed.
    pub index: Option<usize>,
    /// Why.
    pub error: StoreError,
}

impl BatchError {
    /// A failure that is nobody's write in particular (the commit, the
    /// backend).
    pub fn backend(error: StoreError) -> Self {
        BatchError { index: None, error }
    }
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(i) => write!(f, "batch write {i}: {}", self.error),
            None => write!(f, "batch: {}", self.error),
        }
    }
}

impl std::error::Error for BatchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<BatchError> for StoreError {
    fn from(e: BatchError) -> Self {
        e.error
    }
}
