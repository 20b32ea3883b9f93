//! `grace agent`'s log: the agent library emits `tracing` events, and the
//! binary prints them on standard output, one line each (time, level,
//! target, message, fields), filtered by `RUST_LOG`.
//!
//! `RUST_LOG` is read as [`Targets`] (`info`, `warn`,
//! `grace_agent=debug,info`, ...): a default level and levels per target,
//! without the regular expressions of tracing-subscriber's `env-filter`.
//! Unset or empty, it is `info`.

use std::ffi::OsString;
use std::fmt;

use tracing_subscriber::filter::{ParseError, Targets};
use tracing_subscriber::prelude::*;

/// The variable that filters the agent's log.
pub const RUST_LOG: &str = "RUST_LOG";

/// The filter when `RUST_LOG` is unset or empty.
pub const DEFAULT_FILTER: &str = "info";

/// Why `RUST_LOG` cannot be used: `grace agent` refuses to start (exit
/// code 2).
#[derive(Debug)]
#[non_exhaustive]
pub enum FilterError {
    /// Its value is not UTF-8.
    NotUnicode,
    /// Its value is not a list of `target=level` directives.
    Invalid {
        /// The value as given.
        value: String,
        /// What the parser found wrong.
        error: ParseError,
    },
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FilterError::NotUnicode => write!(f, "{RUST_LOG}: not valid UTF-8"),
            FilterError::Invalid { value, error } => write!(
                f,
                "{RUST_LOG}={value:?}: {error} (e.g. `warn`, `grace_agent=debug,info`)"
            ),
        }
    }
}

// The parser's message is part of this one's: no source, or a chain would
// print it twice.
impl std::error::Error for FilterError {}

/// The filter `value` (the variable's, if set) stands for: `info` when
/// unset or blank.
pub fn filter(value: Option<OsString>) -> Result<Targets, FilterError> {
    let value = match value {
        None => String::new(),
        Some(v) => v.into_string().map_err(|_| FilterError::NotUnicode)?,
    };
    let directives = match value.trim() {
        "" => DEFAULT_FILTER,
        v => v,
    };
    directives
        .parse()
        .map_err(|error| FilterError::Invalid { value, error })
}

/// Installs the log of this process: `tracing` events filtered by
/// `RUST_LOG` ([`filter`]), printed on standard output. Call once, before
/// the agent starts.
pub fn init() -> Result<(), FilterError> {
    let targets = filter(std::env::var_os(RUST_LOG))?;
    // Fails only if a subscriber is installed already: none is, this is
    // the binary's only one.
    let _ = tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stdout))
        .with(targets)
        .try_init();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::filter::LevelFilter;

    #[test]
    fn unset_or_blank_is_info() {
        for value in [None, Some(OsString::new()), Some(OsString::from("  "))] {
            let t = filter(value).expect("valid");
            assert!(t.would_enable("grace_agent::run_loop", &tracing::Level::INFO));
            assert!(!t.would_enable("grace_agent::run_loop", &tracing::Level::DEBUG));
        }
    }

    #[test]
    fn a_level_per_target() {
        let t = filter(Some("grace_agent=debug,warn".into())).expect("valid");
        assert!(t.would_enable("grace_agent::startup", &tracing::Level::DEBUG));
        assert!(!t.would_enable("other", &tracing::Level::INFO));
        assert_eq!(t.default_level(), Some(LevelFilter::WARN));
    }

    #[test]
    fn an_unknown_level_is_refused_naming_the_variable() {
        let e = filter(Some("grace_agent=loud".into())).expect_err("invalid");
        assert!(
            e.to_string().starts_with("RUST_LOG=\"grace_agent=loud\": "),
            "{e}"
        );
    }
}
