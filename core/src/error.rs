//! One error type for callers that want a single `?` target: every error of
//! the core converts into [`Error`].

use core::fmt;

use crate::lifecycle::{OtherObject, TooManyContainers, UnknownContainer};
use crate::name::NameTooLong;
use crate::options::InvalidOptions;
use crate::record::{FinalizerListError, TooManyFinalizers};
use crate::registry::{Conflict, DeleteError, UpdateError};
use crate::shared::Busy;
use crate::table::{TableFull, UnknownId};

/// Any error of grace-core. Each operation returns its own small error
/// type (so a caller can match exactly what that operation can fail
/// with); each converts into this one with `?`.
///
/// ```
/// use grace_core::{DeleteOptions, Error, Input, Lifecycle, Now, Record, Strategy, Table};
///
/// fn run() -> Result<(), Error> {
///     let mut table: Table<8> = Table::new();
///     let record = Record::builder("uid-1").grace_period_seconds(5).build()?;
///     let id = table.insert(Lifecycle::new(Strategy::POD, record, &[Default::default()])?)?;
///     let now = Now::from_unix_millis(0);
///     let _ = table.handle(now, id, Input::Delete(DeleteOptions::default()))?.result()?;
///     let _ = table.handle(now, id, Input::container_exited(0))?.result()?;
///     Ok(())
/// }
/// run().unwrap();
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Error {
    /// A delete request was refused.
    Delete(DeleteError),
    /// A finalizer update was refused.
    Update(UpdateError),
    /// The id names no object in the table.
    UnknownId,
    /// No container with that index.
    UnknownContainer,
    /// The table is full (the lifecycle that did not fit was dropped; use
    /// [`Table::insert`](crate::Table::insert)'s own error to get it back).
    TableFull,
    /// A uid or finalizer name is too long.
    NameTooLong,
    /// More finalizers than the record can hold.
    TooManyFinalizers,
    /// More containers than the lifecycle can hold.
    TooManyContainers,
    /// A stored record belongs to another object.
    OtherObject,
    /// A shared table was already in use by an enclosing call.
    Busy,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Delete(e) => write!(f, "delete refused: {e}"),
            Error::Update(e) => write!(f, "update refused: {e}"),
            Error::UnknownId => UnknownId.fmt(f),
            Error::UnknownContainer => UnknownContainer.fmt(f),
            Error::TableFull => f.write_str("table full"),
            Error::NameTooLong => NameTooLong.fmt(f),
            Error::TooManyFinalizers => TooManyFinalizers.fmt(f),
            Error::TooManyContainers => TooManyContainers.fmt(f),
            Error::OtherObject => OtherObject.fmt(f),
            Error::Busy => Busy.fmt(f),
        }
    }
}

// The message includes the cause (`delete refused: ...`), so there is no
// `source()`: a chain printed link by link would say it twice. The cause is
// the variant's field.
impl core::error::Error for Error {}

impl From<DeleteError> for Error {
    fn from(e: DeleteError) -> Self {
        Error::Delete(e)
    }
}

impl From<UpdateError> for Error {
    fn from(e: UpdateError) -> Self {
        Error::Update(e)
    }
}

impl From<InvalidOptions> for Error {
    fn from(e: InvalidOptions) -> Self {
        Error::Delete(DeleteError::Invalid(e))
    }
}

impl From<Conflict> for Error {
    fn from(e: Conflict) -> Self {
        Error::Delete(DeleteError::Conflict(e))
    }
}

impl From<UnknownId> for Error {
    fn from(_: UnknownId) -> Self {
        Error::UnknownId
    }
}

impl From<UnknownContainer> for Error {
    fn from(_: UnknownContainer) -> Self {
        Error::UnknownContainer
    }
}

impl<T> From<TableFull<T>> for Error {
    fn from(_: TableFull<T>) -> Self {
        Error::TableFull
    }
}

impl From<NameTooLong> for Error {
    fn from(_: NameTooLong) -> Self {
        Error::NameTooLong
    }
}

impl From<TooManyFinalizers> for Error {
    fn from(_: TooManyFinalizers) -> Self {
        Error::TooManyFinalizers
    }
}

impl From<FinalizerListError> for Error {
    fn from(e: FinalizerListError) -> Self {
        match e {
            FinalizerListError::NameTooLong => Error::NameTooLong,
            FinalizerListError::TooMany => Error::TooManyFinalizers,
        }
    }
}

impl From<TooManyContainers> for Error {
    fn from(_: TooManyContainers) -> Self {
        Error::TooManyContainers
    }
}

impl From<OtherObject> for Error {
    fn from(_: OtherObject) -> Self {
        Error::OtherObject
    }
}

impl From<Busy> for Error {
    fn from(_: Busy) -> Self {
        Error::Busy
    }
}

impl From<core::convert::Infallible> for Error {
    fn from(e: core::convert::Infallible) -> Self {
        match e {}
    }
}
