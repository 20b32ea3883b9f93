//! A failed command of the CLI: what to print and the exit code (its own
//! module: the store commands and their argument parsers both use it).

use crate::api::{ApiError, ClientError, ErrorKind};

/// A failed command: what to print, and the exit code.
#[derive(Debug)]
pub struct CommandError {
    /// 1 for a failed operation, 2 for invalid input.
    pub code: u8,
    /// One line.
    pub message: String,
}

impl CommandError {
    /// Invalid input (exit code 2).
    pub fn invalid(message: impl Into<String>) -> Self {
        CommandError {
            code: 2,
            message: message.into(),
        }
    }

    /// A failed operation (exit code 1).
    pub fn failed(message: impl Into<String>) -> Self {
        CommandError {
            code: 1,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CommandError {}

impl From<ClientError> for CommandError {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::Api(ApiError {
                kind: ErrorKind::Invalid,
                message,
            }) => CommandError::invalid(message),
            other => CommandError::failed(other.to_string()),
        }
    }
}
