//! Shell completion as kubectl's: `source <(grace completion bash)`
//! registers a function that asks `grace` itself what fits, so that
//! `grace get <TAB>` and `grace delete <TAB>` offer the resource types and
//! the names of the objects stored now (from the agent, or the store file
//! without one), as kubectl's dynamic completion offers them.
//!
//! The names come from the data directory in `GRACE_DATA_DIR`, or
//! `./grace-data`: a `--data-dir` typed on the same line is not seen by the
//! completer.

use std::ffi::OsStr;
use std::io::Write;
use std::path::PathBuf;

use clap_complete::engine::CompletionCandidate;
use clap_complete::env::EnvCompleter;

use crate::api::{Client, Reply, Request};

/// The variable that makes `grace` answer a completion request instead of
/// running a command (set by the registered shell function).
pub const VARIABLE: &str = "GRACE_COMPLETE";

/// The shells `grace completion` registers for.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    /// GNU bash 4.4 or later.
    Bash,
    /// zsh.
    Zsh,
    /// fish.
    Fish,
}

/// Writes the script that registers `grace`'s completion in `shell`.
pub fn write_registration(shell: Shell, out: &mut dyn Write) -> std::io::Result<()> {
    let completer: &dyn EnvCompleter = match shell {
        Shell::Bash => &clap_complete::env::Bash,
        Shell::Zsh => &clap_complete::env::Zsh,
        Shell::Fish => &clap_complete::env::Fish,
    };
    completer.write_registration(VARIABLE, "grace", "grace", "grace", out)
}

/// Candidates for a command's object arguments: `pod`, `pods`, and the
/// names stored now (also as `pod/NAME` once `pod/` is typed).
pub fn objects(current: &OsStr) -> Vec<CompletionCandidate> {
    let Some(current) = current.to_str() else {
        return Vec::new();
    };
    let names = stored_names();
    if let Some(rest) = current.strip_prefix("pod/") {
        return names
            .into_iter()
            .filter(|n| n.starts_with(rest))
            .map(|n| CompletionCandidate::new(format!("pod/{n}")))
            .collect();
    }
    ["pod", "pods"]
        .into_iter()
        .map(str::to_owned)
        .chain(names)
        .filter(|n| n.starts_with(current))
        .map(CompletionCandidate::new)
        .collect()
}

/// The names of the objects in the data directory's store, in name order;
/// none if neither an agent nor a store answers.
fn stored_names() -> Vec<String> {
    let data_dir = std::env::var_os("GRACE_DATA_DIR")
        .map_or_else(|| PathBuf::from("grace-data"), PathBuf::from);
    let served = Client::connect(&data_dir)
        .ok()
        .and_then(|mut client| client.call(&Request::Get { name: None }).ok());
    match served {
        Some(Reply::Objects { items, .. }) => items.into_iter().map(|i| i.name).collect(),
        _ => crate::kubectl::fetch_all(crate::kubectl::Target::Agent(&data_dir))
            .map(|(_, items)| items.into_iter().map(|i| i.name).collect())
            .unwrap_or_default(),
    }
}
