//! Why an agent did not start, or stopped: [`AgentError`].
//!
//! Each error says what failed once: a variant that names its cause in
//! its message returns no [`source`](std::error::Error::source); one that
//! wraps another error ([`Runtime`](AgentError::Runtime),
//! [`Store`](AgentError::Store)) prints its message and hands on the
//! wrapped error's source, so a chain printed link by link never repeats
//! a message.

use std::fmt;
use std::io;
use std::path::PathBuf;

use grace_std::private::PrivateError;
use grace_std::runtime::RuntimeError;
use grace_std::store::StoreError;

/// Why an agent did not start, or why it stopped. Nothing it had not
/// written already was changed. More variants may come.
#[derive(Debug)]
#[non_exhaustive]
pub enum AgentError {
    /// The data directory is a file, not a directory.
    NotADirectory(PathBuf),
    /// The data directory cannot be read.
    DataDir {
        /// The data directory.
        path: PathBuf,
        /// Why.
        error: io::Error,
    },
    /// The socket's path, inside the data directory, cannot be a Unix
    /// socket's address (too long: a shorter data directory path helps).
    SocketPath {
        /// The socket's path.
        path: PathBuf,
        /// Why.
        error: io::Error,
    },
    /// The container log limits are out of range.
    LogLimits(grace_std::process::logs::LogLimitsError),
    /// A file or directory that must be private to this user is not, or
    /// cannot be made so.
    Private(PrivateError),
    /// An operating-system operation failed: a directory, the socket, a
    /// signal handler, the workload table.
    Io {
        /// What was being done.
        context: String,
        /// The error.
        error: io::Error,
    },
    /// The store failed, or is held by another process.
    Store(StoreError),
    /// The runtime refused to go on (its recovery, a step it could not
    /// write).
    Runtime(RuntimeError),
    /// The agent's thread panicked (a bug).
    Panicked,
    /// Fencing was refused: the node is alive (its agent holds its lease),
    /// so there is no proof that it is gone (D7).
    NodeAlive {
        /// The node.
        node: String,
    },
}

impl AgentError {
    /// An [`Io`](AgentError::Io) error while doing `context`.
    pub fn io(context: impl Into<String>, error: io::Error) -> Self {
        AgentError::Io {
            context: context.into(),
            error,
        }
    }
}

impl fmt::Display for AgentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentError::NotADirectory(path) => write!(
                f,
                "--data-dir {}: not a directory (it is a file)",
                path.display()
            ),
            AgentError::DataDir { path, error } => {
                write!(f, "--data-dir {}: {error}", path.display())
            }
            AgentError::SocketPath { path, error } => write!(
                f,
                "the socket path {} cannot be used ({error}); choose a shorter path for the data directory",
                path.display()
            ),
            AgentError::LogLimits(error) => write!(f, "{error}"),
            AgentError::Private(e) => write!(f, "refusing to start: {e}"),
            AgentError::Io { context, error } => write!(f, "{context}: {error}"),
            AgentError::Store(e) => write!(f, "store: {e}"),
            AgentError::Runtime(e) => fmt::Display::fmt(e, f),
            AgentError::Panicked => f.write_str("the agent's thread panicked"),
            AgentError::NodeAlive { node } => write!(
                f,
                "node {node} is alive (its agent holds its lease): fencing needs proof that it is gone"
            ),
        }
    }
}

impl std::error::Error for AgentError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // The wrapped error's message is in this one's.
            AgentError::Store(e) => e.source(),
            AgentError::Runtime(e) => e.source(),
            // The cause is in the message.
            AgentError::NotADirectory(_)
            | AgentError::DataDir { .. }
            | AgentError::SocketPath { .. }
            | AgentError::LogLimits(_)
            | AgentError::Private(_)
            | AgentError::Io { .. }
            | AgentError::Panicked
            | AgentError::NodeAlive { .. } => None,
        }
    }
}

impl From<RuntimeError> for AgentError {
    fn from(e: RuntimeError) -> Self {
        match e {
            RuntimeError::Store(e) => AgentError::Store(e),
            e => AgentError::Runtime(e),
        }
    }
}

impl From<StoreError> for AgentError {
    fn from(e: StoreError) -> Self {
        AgentError::Store(e)
    }
}

impl From<PrivateError> for AgentError {
    fn from(e: PrivateError) -> Self {
        AgentError::Private(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Printed link by link, a chain says each thing once.
    fn chain(e: &dyn std::error::Error) -> Vec<String> {
        let mut links = vec![e.to_string()];
        let mut next = e.source();
        while let Some(e) = next {
            links.push(e.to_string());
            next = e.source();
        }
        links
    }

    #[test]
    fn an_error_prints_its_cause_or_returns_it_never_both() {
        let io = AgentError::io("signals", io::Error::other("no handler"));
        assert_eq!(chain(&io), ["signals: no handler"]);
        let store = AgentError::from(RuntimeError::Store(StoreError::NotFound {
            name: "web".into(),
        }));
        let links = chain(&store);
        for (i, link) in links.iter().enumerate() {
            for later in &links[i + 1..] {
                assert!(!link.contains(later.as_str()), "{links:?}");
            }
        }
    }
}
