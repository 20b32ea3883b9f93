//! The one error of every conversion: which field, and why.

use core::fmt;

/// A Kubernetes value grace cannot take. Nothing was converted.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BridgeError {
    /// A field grace needs is absent (`metadata.uid`).
    Missing {
        /// The field, in kubectl's notation.
        field: &'static str,
    },
    /// A name longer than grace's names hold (`grace_core::NAME_CAPACITY`).
    TooLong {
        /// The field.
        field: String,
    },
    /// More finalizers than the record's capacity `F`.
    TooManyFinalizers {
        /// The capacity.
        capacity: usize,
    },
    /// A resource version that is not a whole number: grace's stores use
    /// their revision, a number, as the resource version.
    ResourceVersion {
        /// The field (`metadata.resourceVersion`, `preconditions.resourceVersion`).
        field: &'static str,
        /// The value given.
        value: String,
    },
    /// A time before 1970 or beyond what grace's timestamps hold.
    Time {
        /// The field.
        field: &'static str,
    },
    /// A value Kubernetes' validation refuses (`dryRun` other than `All`).
    Unsupported {
        /// The field.
        field: &'static str,
        /// The value given.
        value: String,
    },
}

impl fmt::Display for BridgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BridgeError::Missing { field } => write!(f, "{field}: Required value"),
            BridgeError::TooLong { field } => write!(
                f,
                "{field}: longer than grace's names hold ({} bytes)",
                grace_core::NAME_CAPACITY
            ),
            BridgeError::TooManyFinalizers { capacity } => {
                write!(f, "metadata.finalizers: more than {capacity}")
            }
            BridgeError::ResourceVersion { field, value } => write!(
                f,
                "{field}: \"{value}\" is not a resource version grace can hold (a whole number)"
            ),
            BridgeError::Time { field } => write!(f, "{field}: out of range"),
            BridgeError::Unsupported { field, value } => {
                write!(f, "{field}: Unsupported value: \"{value}\"")
            }
        }
    }
}

impl std::error::Error for BridgeError {}
