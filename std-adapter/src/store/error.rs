//! What a store operation can fail with.

use std::error::Error;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use super::Revision;

/// Why a store operation failed.
///
/// The first six are answers about the data or the writer (the caller
/// decides what to do next); the last four are failures of the backend,
/// with its message and, where there is one, the underlying error
/// ([`BackendError::cause`]). The message says the cause, so
/// [`source`](std::error::Error::source) is `None`.
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
    Unavailable(BackendError),
    /// Stored data does not decode, or the database reports corruption.
    Corrupt(BackendError),
    /// An I/O error from the backend.
    Io(BackendError),
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

// The message includes the backend's, which includes its underlying
// error: no `source()`, or a chain printed link by link would say it twice.
impl Error for StoreError {}

impl StoreError {
    /// The backend's failure, for the last four variants.
    pub fn backend(&self) -> Option<&BackendError> {
        match self {
            StoreError::Unavailable(e) | StoreError::Corrupt(e) | StoreError::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// What a backend reported when it failed: a message and, where there is
/// one, the underlying error (redb's, etcd's, an I/O error, a decoding
/// error), kept as [`cause`](BackendError::cause); the message includes it,
/// so it is not [`source`](Error::source) too. Shared, so that a
/// [`StoreError`] stays `Clone`; two are equal when their messages are.
#[derive(Clone)]
pub struct BackendError {
    message: String,
    source: Option<Arc<dyn Error + Send + Sync>>,
}

impl BackendError {
    /// A failure with a message and no underlying error.
    pub fn new(message: impl Into<String>) -> Self {
        BackendError {
            message: message.into(),
            source: None,
        }
    }

    /// The underlying error `source`, its message as the message.
    pub fn from_error(source: impl Error + Send + Sync + 'static) -> Self {
        BackendError {
            message: source.to_string(),
            source: Some(Arc::new(source)),
        }
    }

    /// The underlying error `source` met while doing `context`: the
    /// message is `context: source`.
    pub fn with_context(
        context: impl fmt::Display,
        source: impl Error + Send + Sync + 'static,
    ) -> Self {
        BackendError {
            message: format!("{context}: {source}"),
            source: Some(Arc::new(source)),
        }
    }

    /// The same failure with `note` added to its message, in parentheses
    /// (a hint for the reader); the underlying error is kept.
    pub fn with_note(mut self, note: &str) -> Self {
        self.message = format!("{} ({note})", self.message);
        self
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The underlying error, to inspect or downcast; `None` for a bare
    /// message.
    pub fn cause(&self) -> Option<&(dyn Error + Send + Sync + 'static)> {
        self.source.as_deref()
    }
}

impl From<String> for BackendError {
    fn from(message: String) -> Self {
        BackendError::new(message)
    }
}

impl From<&str> for BackendError {
    fn from(message: &str) -> Self {
        BackendError::new(message)
    }
}

impl PartialEq for BackendError {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message
    }
}

impl Eq for BackendError {}

impl fmt::Debug for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Some(source) => write!(f, "{:?} (source: {source:?})", self.message),
            None => fmt::Debug::fmt(&self.message, f),
        }
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

// The message includes the underlying error: no `source()` (see `cause`).
impl Error for BackendError {}

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

// The message includes `error`: no `source()`, or a chain printed link by
// link would say it twice.
impl std::error::Error for BatchError {}

impl From<BatchError> for StoreError {
    fn from(e: BatchError) -> Self {
        e.error
    }
}
