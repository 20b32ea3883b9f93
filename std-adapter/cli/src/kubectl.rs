//! The store commands — `grace apply`, `delete`, `get` and `patch` — with
//! kubectl's words and habits: its flag conversions, its table, its
//! "Terminating".
//!
//! On one machine ([`Target::Agent`]) changes go to the running agent (see
//! [`crate::api`]), and `get` without an agent reads the store file
//! directly. With a shared store ([`Target::Shared`]: several agents on
//! etcd) every command works on the store itself, deciding requests as an
//! API server does ([`crate::api_server`]); the agents follow. Exit codes: 0 done; 1 the operation
//! failed (not found, conflict, no agent, store locked or unreadable); 2
//! the input is invalid (a malformed object file, bad flags or options).
//! A refused request changes nothing.

use std::io::Write;
use std::path::Path;

use grace_core::{DeleteOptions, DeleteOutcome, Name, Preconditions, Propagation};

use crate::api::{
    ApiError, Client, ClientError, DATABASE, DeleteReport, ErrorKind, Item, Reply, Request,
};
use crate::clock::Clock;
use crate::store::{Event, EventKind, RedbStore, Revision, Store, StoreError, StoredObject};

/// Where a store command goes.
#[derive(Clone, Copy)]
pub enum Target<'a> {
    /// The agent serving this data directory (one machine, the embedded
    /// store).
    Agent(&'a Path),
    /// A store shared by agents on several nodes (etcd): requests are
    /// decided here, against the store.
    Shared(&'a dyn Store),
}
use crate::runtime::KillRecord;

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

/// `--cascade`: what happens to dependents (kubectl's values).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Cascade {
    /// Delete dependents in the background (kubectl's default).
    Background,
    /// Delete dependents first (`foregroundDeletion` finalizer, R38).
    Foreground,
    /// Leave dependents (`orphan` finalizer, R37).
    Orphan,
}

/// `grace delete`'s flags as given.
#[derive(Clone, Debug, Default)]
pub struct DeleteFlags {
    /// `--grace-period`: `None` (kubectl's -1) uses the object's own.
    pub grace_period: Option<i64>,
    /// `--force`.
    pub force: bool,
    /// `--dry-run`: decide and report, write nothing.
    pub dry_run: bool,
    /// `--cascade`.
    pub cascade: Option<Cascade>,
    /// `--uid`: the object must still have this uid.
    pub uid: Option<String>,
    /// `--resource-version`: the object must still be at this version.
    pub resource_version: Option<String>,
}

/// The request kubectl sends for these flags, and the warning it prints.
///
/// kubectl's conversions: `--grace-period=0` without `--force` becomes 1
/// (a graceful delete of one second); `--force` without a grace period
/// becomes 0 (a force delete, D4, with a warning); a negative grace is
/// "unset". `--cascade` defaults to `background` and is sent explicitly.
pub fn delete_options(
    flags: &DeleteFlags,
) -> Result<(DeleteOptions, Option<String>), CommandError> {
    let mut grace = flags.grace_period.unwrap_or(-1);
    if grace == 0 && !flags.force {
        grace = 1;
    }
    if flags.force && grace < 0 {
        grace = 0;
    }
    let warning = match (flags.force, grace) {
        (true, 0) => Some(
            "warning: Immediate deletion does not wait for confirmation that the running resource has been terminated. The resource may continue to run on the cluster indefinitely.".to_owned(),
        ),
        (true, _) => Some("warning: --force is ignored because --grace-period is not 0.".to_owned()),
        _ => None,
    };
    let uid = flags
        .uid
        .as_deref()
        .map(|u| Name::try_from(u).map_err(|e| CommandError::invalid(format!("--uid: {e}"))))
        .transpose()?;
    let resource_version = flags
        .resource_version
        .as_deref()
        .map(|rv| {
            rv.parse::<u64>().map_err(|_| {
                CommandError::invalid(format!(
                    "--resource-version: `{rv}` is not a resource version (a whole number)"
                ))
            })
        })
        .transpose()?;
    let propagation = match flags.cascade.unwrap_or(Cascade::Background) {
        Cascade::Background => Propagation::Background,
        Cascade::Foreground => Propagation::Foreground,
        Cascade::Orphan => Propagation::Orphan,
    };
    let options = DeleteOptions {
        grace_period_seconds: (grace >= 0).then_some(grace),
        preconditions: Preconditions {
            uid,
            resource_version,
        },
        propagation_policy: Some(propagation),
        orphan_dependents: None,
        dry_run: flags.dry_run,
    };
    Ok((options, warning))
}

/// `grace apply -f FILE` (`-` reads standard input): creates the object.
pub fn apply(target: Target<'_>, file: &Path, out: &mut impl Write) -> Result<(), CommandError> {
    let text = if file == Path::new("-") {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(file)
    }
    .map_err(|e| CommandError::invalid(format!("cannot read {}: {e}", file.display())))?;
    let manifest = crate::manifest::parse(&text, new_uid)
        .map_err(|e| CommandError::invalid(format!("{}: {e}", file.display())))?;
    let kind = kind(&manifest.object);
    match target {
        Target::Agent(data_dir) => {
            let mut client = Client::connect(data_dir)?;
            client.call(&Request::Apply {
                name: manifest.name.clone(),
                object: Box::new(manifest.object),
            })?;
        }
        Target::Shared(store) => {
            crate::api_server::create(store, &manifest.name, manifest.object)
                .map_err(|e| runtime_failed(&manifest.name, e))?;
        }
    }
    let _ = writeln!(out, "{kind}/{} created", manifest.name);
    Ok(())
}

/// `grace delete NAME [flags]`.
pub fn delete(
    target: Target<'_>,
    name: &str,
    flags: &DeleteFlags,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<(), CommandError> {
    let (options, warning) = delete_options(flags)?;
    if let Some(w) = warning {
        let _ = writeln!(err, "{w}");
    }
    let report = match target {
        Target::Agent(data_dir) => {
            let mut client = Client::connect(data_dir)?;
            let reply = client.call(&Request::Delete {
                name: name.to_owned(),
                options,
            })?;
            let Reply::Deleted(report) = reply else {
                return Err(CommandError::failed("the agent answered something else"));
            };
            report
        }
        Target::Shared(store) => {
            let now = crate::clock::SystemClock::new().now();
            let answer = crate::api_server::delete(store, now, name, &options)
                .map_err(|e| runtime_failed(name, e))?;
            if !answer.response.dry_run {
                // The garbage collector's step (the answer shows the
                // finalizer the delete added, as kubectl does); the
                // node's agent runs it too should this fail.
                let _ = crate::api_server::collect_garbage(store, now, name);
            }
            DeleteReport {
                outcome: answer.response.outcome,
                record: answer.record,
                dry_run: answer.response.dry_run,
                force: answer.response.force,
            }
        }
    };
    let _ = writeln!(out, "{}", deleted_line(name, &report));
    Ok(())
}

/// kubectl's line, with what grace knows besides.
fn deleted_line(name: &str, report: &DeleteReport) -> String {
    let dry = if report.dry_run {
        " (server dry run)"
    } else {
        ""
    };
    let how = match report.outcome {
        DeleteOutcome::Deleted if report.force => {
            " (removed now; the workload may still be running)".to_owned()
        }
        DeleteOutcome::Deleted => String::new(),
        DeleteOutcome::Graceful | DeleteOutcome::Pending => {
            let grace = report.record.deletion_grace_period_seconds.unwrap_or(0);
            let held = if report.record.finalizers.is_empty() {
                String::new()
            } else {
                let names: Vec<&str> = report
                    .record
                    .finalizers
                    .iter()
                    .map(|n| n.as_str())
                    .collect();
                format!(", held by finalizers {}", names.join(", "))
            };
            format!(" (terminating, grace {grace} s{held})")
        }
    };
    format!("object \"{name}\" deleted{dry}{how}")
}

/// `grace patch NAME --remove-finalizer F`: removes one finalizer, which
/// may complete a deletion (R45).
pub fn remove_finalizer(
    target: Target<'_>,
    name: &str,
    finalizer: &str,
    out: &mut impl Write,
) -> Result<(), CommandError> {
    let parsed = Name::try_from(finalizer)
        .map_err(|e| CommandError::invalid(format!("--remove-finalizer: {e}")))?;
    match target {
        Target::Agent(data_dir) => {
            let mut client = Client::connect(data_dir)?;
            client.call(&Request::RemoveFinalizer {
                name: name.to_owned(),
                finalizer: finalizer.to_owned(),
            })?;
        }
        Target::Shared(store) => {
            let now = crate::clock::SystemClock::new().now();
            let change = grace_core::FinalizerChange::Remove(parsed);
            let _ = crate::api_server::update_finalizers(store, now, name, &change)
                .map_err(|e| runtime_failed(name, e))?;
        }
    }
    let _ = writeln!(out, "object \"{name}\" patched");
    Ok(())
}

/// How `get` prints.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// kubectl's table.
    Table,
    /// JSON: one object, or `{"revision": .., "items": [..]}`; while
    /// watching, one change a line.
    Json,
}

/// `grace get [NAME] [-o json] [-w]`.
pub fn get(
    target: Target<'_>,
    name: Option<&str>,
    output: Output,
    watch: bool,
    out: &mut impl Write,
) -> Result<(), CommandError> {
    let data_dir = match target {
        Target::Agent(data_dir) => data_dir,
        Target::Shared(store) => {
            if watch {
                return get_watch_shared(store, name, output, out);
            }
            let (revision, items) = crate::agent::items(store, name).map_err(|e| match e {
                StoreError::NotFound { name } => {
                    CommandError::failed(format!("object \"{name}\" not found"))
                }
                other => CommandError::failed(format!("store: {other}")),
            })?;
            return print_items(name, revision, &items, output, out);
        }
    };
    if watch {
        return get_watch(data_dir, name, output, out);
    }
    // No agent, or one that went away while answering (it stopped): a
    // read is served from the file all the same.
    let (revision, items) = match Client::connect(data_dir) {
        Ok(mut client) => match client.call(&Request::Get {
            name: name.map(str::to_owned),
        }) {
            Ok(Reply::Objects { revision, items }) => (revision, items),
            Ok(_) => return Err(CommandError::failed("the agent answered something else")),
            Err(ClientError::Io(_)) => read_directly(data_dir, name)?,
            Err(e) => return Err(e.into()),
        },
        Err(ClientError::NoAgent(_) | ClientError::Io(_)) => read_directly(data_dir, name)?,
        Err(e) => return Err(e.into()),
    };
    print_items(name, revision, &items, output, out)
}

/// The object stored as `name` now, or `None` if there is none: through
/// the agent, or read directly without one.
pub fn fetch(target: Target<'_>, name: &str) -> Result<Option<StoredObject>, CommandError> {
    let found = match target {
        Target::Shared(store) => crate::agent::items(store, Some(name)),
        Target::Agent(data_dir) => match Client::connect(data_dir) {
            Ok(mut client) => match client.call(&Request::Get {
                name: Some(name.to_owned()),
            }) {
                Ok(Reply::Objects { revision, items }) => Ok((revision, items)),
                Ok(_) => return Err(CommandError::failed("the agent answered something else")),
                Err(ClientError::Api(ApiError {
                    kind: ErrorKind::NotFound,
                    ..
                })) => return Ok(None),
                Err(ClientError::Io(_)) => match snapshot(&data_dir.join(DATABASE))? {
                    Some(store) => crate::agent::items(&store, Some(name)),
                    None => return Ok(None),
                },
                Err(e) => return Err(e.into()),
            },
            Err(ClientError::NoAgent(_) | ClientError::Io(_)) => {
                match snapshot(&data_dir.join(DATABASE))? {
                    Some(store) => crate::agent::items(&store, Some(name)),
                    None => return Ok(None),
                }
            }
            Err(e) => return Err(e.into()),
        },
    };
    match found {
        Ok((_, items)) => Ok(items.into_iter().next().map(|i| i.object)),
        Err(StoreError::NotFound { .. }) => Ok(None),
        Err(e) => Err(CommandError::failed(format!("store: {e}"))),
    }
}

fn print_items(
    name: Option<&str>,
    revision: u64,
    items: &[Item],
    output: Output,
    out: &mut impl Write,
) -> Result<(), CommandError> {
    match output {
        Output::Json => {
            let text = match (name, items.first()) {
                (Some(_), Some(item)) => serde_json::to_string_pretty(&readable(item)),
                _ => serde_json::to_string_pretty(&serde_json::json!({
                    "revision": revision,
                    "items": items.iter().map(readable).collect::<Vec<_>>(),
                })),
            }
            .map_err(|e| CommandError::failed(e.to_string()))?;
            let _ = writeln!(out, "{text}");
        }
        Output::Table if items.is_empty() => {
            let _ = writeln!(out, "No resources found");
        }
        Output::Table => {
            let _ = writeln!(out, "{}", header());
            for item in items {
                let _ = writeln!(out, "{}", row(&item.name, &item.object, None));
            }
        }
    }
    Ok(())
}

/// Without an agent the store file is read directly, as a read-only
/// snapshot ([`RedbStore::snapshot`]): the file is never written, a
/// read-only mount will do, and an agent starting meanwhile is never kept
/// from its lock. A missing store is empty (and is not created by reading
/// it).
fn read_directly(data_dir: &Path, name: Option<&str>) -> Result<(u64, Vec<Item>), CommandError> {
    let path = data_dir.join(DATABASE);
    let Some(store) = snapshot(&path)? else {
        return match name {
            Some(name) => Err(CommandError::failed(format!("object \"{name}\" not found"))),
            None => Ok((0, Vec::new())),
        };
    };
    crate::agent::items(&store, name).map_err(|e| match e {
        StoreError::NotFound { name } => {
            CommandError::failed(format!("object \"{name}\" not found"))
        }
        other => store_failed(&path, other),
    })
}

/// A request refused or failed against a shared store, in kubectl's words.
fn runtime_failed(name: &str, e: crate::runtime::RuntimeError) -> CommandError {
    use crate::runtime::RuntimeError;
    use grace_core::{DeleteError, UpdateError};
    match e {
        RuntimeError::NotFound(_)
        | RuntimeError::Delete(DeleteError::NotFound)
        | RuntimeError::Update(UpdateError::NotFound) => {
            CommandError::failed(format!("object \"{name}\" not found"))
        }
        RuntimeError::AlreadyExists(_) => {
            CommandError::failed(format!("object \"{name}\" already exists"))
        }
        RuntimeError::Delete(DeleteError::Conflict(c)) => {
            CommandError::failed(format!("object \"{name}\": {c}"))
        }
        RuntimeError::Delete(d) => CommandError::invalid(format!("object \"{name}\": {d}")),
        RuntimeError::Update(u) => CommandError::invalid(format!("object \"{name}\": {u}")),
        RuntimeError::Object(m) => CommandError::invalid(m),
        RuntimeError::Store(s) => CommandError::failed(format!("store: {s}")),
    }
}

/// The store file at `path` as a read-only snapshot; `None` if there is
/// none.
fn snapshot(path: &Path) -> Result<Option<RedbStore>, CommandError> {
    match RedbStore::snapshot(path) {
        Ok(store) => Ok(Some(store)),
        Err(_) if !path.exists() => Ok(None),
        Err(e) => Err(store_failed(path, e)),
    }
}

fn store_failed(path: &Path, e: StoreError) -> CommandError {
    CommandError::failed(format!("store {}: {e}", path.display()))
}

/// `get -w` through the agent: its listing, then the changes it forwards.
fn get_watch(
    data_dir: &Path,
    name: Option<&str>,
    output: Output,
    out: &mut impl Write,
) -> Result<(), CommandError> {
    let mut client = Client::connect(data_dir)?;
    client.send(&Request::Watch)?;
    let Reply::Objects { revision, items } = client.next_reply()? else {
        return Err(CommandError::failed("the agent answered something else"));
    };
    let next = || loop {
        if let Reply::Event(event) = client.next_reply()? {
            return Ok(event);
        }
    };
    watch_from(name, revision, items, next, output, out)
}

/// `get -w` on a shared store: a listing, then the store's own change feed
/// from the listing's revision (no change missed in between).
fn get_watch_shared(
    store: &dyn Store,
    name: Option<&str>,
    output: Output,
    out: &mut impl Write,
) -> Result<(), CommandError> {
    let failed = |e: StoreError| CommandError::failed(format!("store: {e}"));
    let (revision, items) = crate::agent::items(store, None).map_err(failed)?;
    let mut watch = store.watch(Revision(revision)).map_err(failed)?;
    let next = || match watch.next() {
        Some(Ok(event)) => Ok(event),
        Some(Err(e)) => Err(failed(e)),
        None => Err(CommandError::failed("store: the watch ended")),
    };
    watch_from(name, revision, items, next, output, out)
}

/// Prints the listing (`items` at `revision`), then each change `next`
/// waits for, until the reader hangs up or `next` fails.
fn watch_from(
    name: Option<&str>,
    revision: u64,
    items: Vec<Item>,
    mut next: impl FnMut() -> Result<Event, CommandError>,
    output: Output,
    out: &mut impl Write,
) -> Result<(), CommandError> {
    let wanted = |n: &str| name.is_none_or(|w| w == n);
    let items: Vec<Item> = items.into_iter().filter(|i| wanted(&i.name)).collect();
    if let Some(name) = name
        && items.is_empty()
    {
        return Err(CommandError::failed(format!("object \"{name}\" not found")));
    }
    match output {
        Output::Json => {
            for item in &items {
                let _ = writeln!(out, "{}", json_line("ADDED", item));
            }
        }
        Output::Table => print_items(None, revision, &items, Output::Table, out)?,
    }
    let _ = out.flush();
    // The agent writes its kill state too; a row that looks the same as
    // the last one shown for its object is not shown again.
    let mut shown: std::collections::HashMap<String, String> = items
        .iter()
        .map(|i| (i.name.clone(), row(&i.name, &i.object, None)))
        .collect();
    loop {
        let event = next()?;
        if !wanted(&event.name) {
            continue;
        }
        let line = match output {
            Output::Json => {
                let kind = match event.kind {
                    EventKind::Created => "ADDED",
                    EventKind::Updated => "MODIFIED",
                    EventKind::Deleted => "DELETED",
                };
                let item = Item {
                    name: event.name,
                    revision: event.revision.get(),
                    object: event.object,
                };
                json_line(kind, &item)
            }
            Output::Table => {
                let gone = (event.kind == EventKind::Deleted).then_some("Deleted");
                let line = row(&event.name, &event.object, gone);
                if shown.get(&event.name) == Some(&line) {
                    continue;
                }
                shown.insert(event.name, line.clone());
                line
            }
        };
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            return Ok(()); // the reader hung up
        }
    }
}

fn json_line(kind: &str, item: &Item) -> String {
    serde_json::json!({ "type": kind, "object": readable(item) }).to_string()
}

/// `item` as JSON with its kill state decoded (`{"epoch": …, "lifecycle":
/// {…}}`); one that does not decode stays as stored (a base64 string).
fn readable(item: &Item) -> serde_json::Value {
    let mut json = serde_json::to_value(item).unwrap_or(serde_json::Value::Null);
    let decoded = item
        .object
        .agent
        .as_ref()
        .and_then(|state| KillRecord::decode(state).ok())
        .and_then(|record| serde_json::to_value(record).ok());
    if let (Some(decoded), Some(agent)) = (decoded, json.pointer_mut("/object/agent")) {
        *agent = decoded;
    }
    json
}

fn header() -> String {
    format!(
        "{:<24} {:<12} {:<12} {:>6} {:>10}",
        "NAME", "STATUS", "NODE", "GRACE", "FINALIZERS"
    )
}

/// One row. STATUS is `Terminating` once the deletion timestamp is set,
/// as kubectl shows it; GRACE is the deletion's grace then, the spec's
/// before.
fn row(name: &str, object: &StoredObject, status: Option<&str>) -> String {
    let meta = &object.meta;
    let status = status.map(str::to_owned).unwrap_or_else(|| {
        if meta.deletion_timestamp.is_some() {
            "Terminating".to_owned()
        } else if object.strategy.kind == grace_core::Kind::Generic {
            "Active".to_owned()
        } else {
            containers_status(object).unwrap_or_else(|| format!("{:?}", meta.phase))
        }
    });
    let grace = meta
        .deletion_grace_period_seconds
        .or(meta.termination_grace_period_seconds)
        .map_or("-".to_owned(), |g| g.to_string());
    format!(
        "{:<24} {:<12} {:<12} {:>6} {:>10}",
        name,
        status,
        object.node.as_deref().unwrap_or("<none>"),
        grace,
        meta.finalizers.len()
    )
}

/// A pod's STATUS from its containers, as kubectl sums it up: the reason a
/// container could not run; `Running` while one runs; `Completed` once
/// all exited 0, `Error` once all exited and one did not; `Pending`
/// before any started. `None` without containers.
fn containers_status(object: &StoredObject) -> Option<String> {
    use grace_std::store::ContainerStatus as S;
    if object.containers.is_empty() {
        return None;
    }
    let status = |i: usize| object.status.get(i);
    let all = 0..object.containers.len();
    let terminated = |reason: &str| {
        all.clone().find_map(|i| match status(i) {
            Some(S::Terminated { reason: r, .. }) if r == reason => Some(r.clone()),
            _ => None,
        })
    };
    if let Some(reason) = terminated("ContainerCannotRun") {
        return Some(reason);
    }
    if all.clone().any(|i| status(i) == Some(&S::Running)) {
        return Some("Running".to_owned());
    }
    if all
        .clone()
        .all(|i| matches!(status(i), Some(S::Terminated { .. })))
    {
        let ok = all.clone().all(
            |i| matches!(status(i), Some(S::Terminated { reason, .. }) if reason == "Completed"),
        );
        return Some(if ok { "Completed" } else { "Error" }.to_owned());
    }
    Some("Pending".to_owned())
}

fn kind(object: &StoredObject) -> &'static str {
    match object.strategy.kind {
        grace_core::Kind::Pod => "pod",
        grace_core::Kind::Generic => "object",
    }
}

/// A fresh uid: unique per process and call (time, process id, counter).
fn new_uid() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{:016x}-{:08x}-{:04x}",
        nanos as u64,
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed) & 0xffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(flags: DeleteFlags) -> (DeleteOptions, Option<String>) {
        delete_options(&flags).expect("valid flags")
    }

    #[test]
    fn kubectl_grace_period_zero_without_force_becomes_one() {
        let (o, warning) = options(DeleteFlags {
            grace_period: Some(0),
            ..DeleteFlags::default()
        });
        assert_eq!(o.grace_period_seconds, Some(1));
        assert!(warning.is_none());
    }

    #[test]
    fn kubectl_force_without_grace_becomes_zero_with_a_warning() {
        let (o, warning) = options(DeleteFlags {
            force: true,
            ..DeleteFlags::default()
        });
        assert_eq!(o.grace_period_seconds, Some(0));
        assert!(warning.is_some_and(|w| w.contains("Immediate deletion")));
    }

    #[test]
    fn kubectl_force_with_a_positive_grace_is_ignored_with_a_warning() {
        let (o, warning) = options(DeleteFlags {
            force: true,
            grace_period: Some(5),
            ..DeleteFlags::default()
        });
        assert_eq!(o.grace_period_seconds, Some(5));
        assert!(warning.is_some_and(|w| w.contains("--force is ignored")));
    }

    #[test]
    fn kubectl_negative_grace_means_unset_and_cascade_defaults_to_background() {
        let (o, _) = options(DeleteFlags {
            grace_period: Some(-1),
            ..DeleteFlags::default()
        });
        assert_eq!(o.grace_period_seconds, None);
        assert_eq!(o.propagation_policy, Some(Propagation::Background));
    }

    #[test]
    fn preconditions_come_from_uid_and_resource_version() {
        let (o, _) = options(DeleteFlags {
            uid: Some("u-1".into()),
            resource_version: Some("7".into()),
            dry_run: true,
            cascade: Some(Cascade::Orphan),
            ..DeleteFlags::default()
        });
        assert_eq!(o.preconditions.uid.as_deref(), Some("u-1"));
        assert_eq!(o.preconditions.resource_version, Some(7));
        assert!(o.dry_run);
        assert_eq!(o.propagation_policy, Some(Propagation::Orphan));
    }

    #[test]
    fn a_resource_version_that_is_not_a_number_is_invalid_input() {
        let e = delete_options(&DeleteFlags {
            resource_version: Some("abc".into()),
            ..DeleteFlags::default()
        })
        .expect_err("not a number");
        assert_eq!(e.code, 2);
        assert!(e.message.contains("--resource-version"), "{}", e.message);
    }
}
