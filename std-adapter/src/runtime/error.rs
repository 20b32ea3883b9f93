//! Why an input was refused: [`RuntimeError`].

use std::fmt;

use grace_core::{DeleteError, UpdateError};

use super::{CONTAINERS, KillStateError};
use crate::store::StoreError;

/// Why an input was refused. Nothing was changed.
///
/// Each variant carries what went wrong as data, the underlying error
/// included where there is one; the message says it too, so
/// [`source`](std::error::Error::source) is `None`. More variants may come.
#[derive(Debug)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The store failed.
    Store(StoreError),
    /// No object of that name is tracked.
    NotFound(String),
    /// An object of that name exists.
    AlreadyExists(String),
    /// The delete was refused (invalid options, a failed precondition).
    Delete(DeleteError),
    /// The update was refused.
    Update(UpdateError),
    /// An input named a container the object does not have.
    UnknownContainer {
        /// The object's name.
        object: String,
        /// The index given.
        container: usize,
    },
    /// The object has more containers than the runtime tracks
    /// ([`CONTAINERS`]).
    TooManyContainers {
        /// The object's uid.
        uid: String,
        /// How many it has.
        containers: usize,
    },
    /// A name is not valid where it is used (a DNS-1123 label for an
    /// object's name, see [`check_name`](crate::api_server::check_name)).
    InvalidName {
        /// The field, e.g. `metadata.name`.
        field: &'static str,
        /// What is wrong with it.
        reason: crate::api_server::NameError,
    },
    /// A kill state could not be encoded, or the runtime's own packed
    /// lifecycle did not decode (a bug).
    KillState {
        /// The object's name (or uid, where the name is not known).
        object: String,
        /// Why.
        error: KillStateError,
    },
    /// A [`Batch`](crate::runtime::Batch) holds as many objects as it
    /// can: commit it before it takes an input on another.
    BatchFull {
        /// How many objects it holds.
        objects: usize,
    },
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::Store(e) => write!(f, "store: {e}"),
            RuntimeError::NotFound(name) => write!(f, "{name}: not found"),
            RuntimeError::AlreadyExists(name) => write!(f, "{name}: already exists"),
            RuntimeError::Delete(e) => write!(f, "delete refused: {e}"),
            RuntimeError::Update(e) => write!(f, "update refused: {e}"),
            RuntimeError::UnknownContainer { object, container } => {
                write!(f, "{object}: no container {container}")
            }
            RuntimeError::TooManyContainers { uid, containers } => {
                write!(f, "{uid}: {containers} containers, more than {CONTAINERS}")
            }
            RuntimeError::InvalidName { field, reason } => write!(f, "{field}: {reason}"),
            RuntimeError::BatchFull { objects } => {
                write!(f, "the batch is full ({objects} objects): commit it first")
            }
            RuntimeError::KillState { object, error } => write!(f, "{object}: {error}"),
        }
    }
}

// Each message includes its cause (`store: ...`, `delete refused: ...`),
// so there is no `source()`: a chain printed link by link would say it
// twice. The cause is the variant's field.
impl std::error::Error for RuntimeError {}

impl From<StoreError> for RuntimeError {
    fn from(e: StoreError) -> Self {
        RuntimeError::Store(e)
    }
}

impl From<DeleteError> for RuntimeError {
    fn from(e: DeleteError) -> Self {
        RuntimeError::Delete(e)
    }
}

impl From<UpdateError> for RuntimeError {
    fn from(e: UpdateError) -> Self {
        RuntimeError::Update(e)
    }
}

/// Whether `e` says the store did not answer (rather than answering no).
pub(super) fn store_down(e: &RuntimeError) -> bool {
    matches!(
        e,
        RuntimeError::Store(StoreError::Unavailable(_) | StoreError::Io(_))
    )
}

pub(super) fn cannot_encode(object: &str, e: KillStateError) -> RuntimeError {
    RuntimeError::KillState {
        object: object.to_owned(),
        error: e,
    }
}
