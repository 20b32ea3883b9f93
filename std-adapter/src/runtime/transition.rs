//! What the runtime reports to its subscribers: a [`Transition`] per
//! change of an object.

use std::fmt;

use grace_core::{Action, Now, Phase};

use super::ActionError;

/// Something that happened to an object, as the runtime reports it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Transition {
    /// When.
    pub at: Now,
    /// Which object.
    pub object: String,
    /// What.
    pub change: Change,
}

/// The kinds of [`Transition`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Change {
    /// The phase changed.
    Phase {
        /// Before.
        from: Phase,
        /// After.
        to: Phase,
    },
    /// An action was carried out (for `Remove`: the record was deleted).
    Action(Action),
    /// An action failed: the actuator's error, or the store's for the
    /// runtime's own `Remove`.
    ActionFailed(ActionError),
    /// The object was loaded from the store: at start, or after a write
    /// whose outcome was unknown.
    Recovered {
        /// Whether its kill was restarted in full (`ResetFullGrace`) or the
        /// workload was found gone (another boot).
        reset: bool,
    },
    /// Another process wrote the object in the store (a request decided
    /// by another API server, a removal, a new object): the runtime took
    /// it (see [`Runtime::observe`](super::Runtime::observe)).
    Observed,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Phase { from, to } => write!(f, "{} → {}", from.as_str(), to.as_str()),
            Change::Action(action) => action.fmt(f),
            Change::ActionFailed(e) => write!(f, "{} FAILED: {}", e.action(), e.error()),
            Change::Recovered { reset: false } => f.write_str("recovered from the store"),
            Change::Recovered { reset: true } => {
                f.write_str("recovered from the store (kill restarted, or workload gone)")
            }
            Change::Observed => f.write_str("written by another process: taken from the store"),
        }
    }
}
