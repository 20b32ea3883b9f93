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
use crate::custom_columns;
use crate::field_selector::FieldSelector;
use crate::output::{self, Format};
use crate::selector::Selector;
use crate::sort_by::SortKey;
use crate::store::{Event, EventKind, RedbStore, Revision, Store, StoreError, StoredObject};
use crate::wait_for::WaitFor;

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

pub use crate::command_error::CommandError;

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
    if flags.force && grace > 0 {
        // kubectl's refusal, with its exit code.
        return Err(CommandError::failed(
            "--force and --grace-period greater than 0 cannot be specified together",
        ));
    }
    let warning = (flags.force && grace == 0).then(|| {
        "Warning: Immediate deletion does not wait for confirmation that the running resource has been terminated. The resource may continue to run on the cluster indefinitely.".to_owned()
    });
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
    let options = DeleteOptions::default()
        .with_grace_period((grace >= 0).then_some(grace))
        .with_preconditions(Preconditions {
            uid,
            resource_version,
        })
        .with_propagation_policy(Some(propagation))
        .with_orphan_dependents(None)
        .with_dry_run(flags.dry_run);
    Ok((options, warning))
}

/// The objects a store command works on, as the command line names them.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// `TYPE NAME…`, `TYPE/NAME…` or `NAME…`.
    pub args: crate::resource::Args,
    /// `-l`.
    pub selector: Option<Selector>,
    /// `--all`.
    pub all: bool,
    /// `--field-selector`.
    pub fields: Option<FieldSelector>,
    /// The namespace the names are in (`-n`, `-A`).
    pub namespace: crate::namespace::Namespace,
}

impl Selection {
    /// kubectl's answer when the first word, taken for a name, is missing
    /// and is another Kubernetes resource type (`grace get svc`).
    pub fn missing_type(&self, missing: &[String]) -> Option<CommandError> {
        let first = self.args.names.first()?;
        if self.args.kind.is_some() || !missing.contains(first) {
            return None;
        }
        crate::resource::not_a_type_grace_has(first)
    }

    /// The objects of `items` selected, in the order named (else in name
    /// order), and the names not found.
    pub fn pick(&self, items: Vec<Item>) -> (Vec<Item>, Vec<String>) {
        let kind = self.args.kind;
        let items: Vec<Item> = items
            .into_iter()
            .filter(|i| self.namespace.holds(&i.name))
            .filter(|i| kind.is_none_or(|k| k.holds(&i.object)))
            .filter(|i| {
                self.selector
                    .as_ref()
                    .is_none_or(|s| s.matches(&i.object.labels))
            })
            .filter(|i| {
                self.fields.as_ref().is_none_or(|f| {
                    f.matches(&output::kubernetes(&[(i.name.as_str(), &i.object)], true))
                })
            })
            .collect();
        if self.args.names.is_empty() {
            return (items, Vec::new());
        }
        let mut found = Vec::new();
        let mut missing = Vec::new();
        for name in &self.args.names {
            match items.iter().find(|i| i.name == self.namespace.key(name)) {
                Some(item) => found.push(item.clone()),
                None => missing.push(name.clone()),
            }
        }
        (found, missing)
    }
}

/// Every stored object and the store revision: from the agent, or from
/// the store file when no agent runs, or from the shared store.
pub fn fetch_all(target: Target<'_>) -> Result<(u64, Vec<Item>), CommandError> {
    match target {
        Target::Agent(data_dir) => match Client::connect(data_dir) {
            // An agent that went away while answering (it stopped): a read
            // is served from the file all the same.
            Ok(mut client) => match client.call(&Request::Get { name: None }) {
                Ok(Reply::Objects { revision, items }) => Ok((revision, items)),
                Ok(_) => Err(CommandError::failed("the agent answered something else")),
                Err(ClientError::Io(_) | ClientError::Json(_)) => read_directly(data_dir, None),
                Err(e) => Err(e.into()),
            },
            Err(ClientError::NoAgent(_) | ClientError::Io(_) | ClientError::Json(_)) => {
                read_directly(data_dir, None)
            }
            Err(e) => Err(e.into()),
        },
        Target::Shared(store) => grace_agent::api::items(store, None)
            .map_err(|e| CommandError::failed(format!("store: {e}"))),
    }
}

use crate::namespace::name_of;

/// kubectl's not-found line (`name` may be a store key: kubectl names no
/// namespace there).
pub(crate) fn not_found(name: &str) -> String {
    format!(
        "Error from server (NotFound): pods \"{}\" not found",
        crate::escape::escape(name_of(name), false)
    )
}

/// `grace get`'s options.
#[derive(Clone, Debug)]
pub struct GetOptions {
    /// What to show.
    pub selection: Selection,
    /// `-o`.
    pub format: Format,
    /// `--no-headers`.
    pub no_headers: bool,
    /// `-w`: after listing, watch for changes (needs a running agent).
    pub watch: bool,
    /// `--sort-by`: the order of the objects listed.
    pub sort_by: Option<SortKey>,
    /// `-L` and `--show-labels`: label columns after the table's own.
    pub labels: output::LabelColumns,
}

/// `grace get [TYPE] [NAME…] [-l SELECTOR] [-o FORMAT] [-w]`.
pub fn get(
    target: Target<'_>,
    options: &GetOptions,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<(), CommandError> {
    if options.watch {
        return watch(target, options, out);
    }
    let (revision, items) = fetch_all(target)?;
    let (mut items, missing) = options.selection.pick(items);
    if let Some(key) = &options.sort_by {
        key.sort(&mut items, |i| {
            output::kubernetes(&[(i.name.as_str(), &i.object)], true)
        })
        .map_err(CommandError::invalid)?;
    }
    if let Some(e) = options.selection.missing_type(&missing) {
        return Err(e);
    }
    for name in &missing {
        let _ = writeln!(err, "{}", not_found(name));
    }
    let now = now_seconds();
    let single = options.selection.args.names.len() == 1 && options.selection.selector.is_none();
    let pairs: Vec<(&str, &StoredObject)> =
        items.iter().map(|i| (i.name.as_str(), &i.object)).collect();
    match &options.format {
        Format::Table | Format::Wide if items.is_empty() => {
            if missing.is_empty() {
                let _ = writeln!(err, "No resources found");
            }
        }
        Format::Table | Format::Wide => {
            let wide = options.format == Format::Wide;
            // `-A`: kubectl's NAMESPACE column first.
            let all = options.selection.namespace.all;
            let mut rows = Vec::new();
            if !options.no_headers {
                let mut header: Vec<String> = all
                    .then(|| "NAMESPACE".to_owned())
                    .into_iter()
                    .chain(output::header(wide).into_iter().map(str::to_owned))
                    .collect();
                header.extend(options.labels.headers());
                rows.push(header);
            }
            for (key, object) in &pairs {
                let (namespace, name) = crate::store::split_key(key);
                let mut row: Vec<String> = all
                    .then(|| namespace.to_owned())
                    .into_iter()
                    .chain(output::row(name, object, wide, now, None))
                    .collect();
                row.extend(options.labels.cells(object));
                rows.push(row);
            }
            let _ = write!(out, "{}", output::aligned(&rows));
        }
        Format::Name => {
            for (key, object) in &pairs {
                let name = crate::namespace::name_of(key);
                let _ = writeln!(out, "{}/{name}", kind_word(object));
            }
        }
        Format::Json | Format::Yaml if single && items.is_empty() => {}
        Format::Json => {
            let value = output::kubernetes(&pairs, single);
            let text = serde_json::to_string_pretty(&value)
                .map_err(|e| CommandError::failed(e.to_string()))?;
            let _ = writeln!(out, "{text}");
        }
        Format::Yaml => {
            let _ = write!(out, "{}", output::yaml(&output::kubernetes(&pairs, single)));
        }
        Format::JsonPath(_) | Format::CustomColumns(_) if single && items.is_empty() => {}
        Format::JsonPath(template) => {
            let text = template
                .render(&output::kubernetes(&pairs, single))
                .map_err(|e| CommandError::failed(e.to_string()))?;
            let _ = write!(out, "{text}");
        }
        Format::CustomColumns(columns) => {
            let mut rows = Vec::new();
            if !options.no_headers {
                rows.push(custom_columns::headers(columns));
            }
            for pair in &pairs {
                let pod = output::kubernetes(std::slice::from_ref(pair), true);
                rows.push(custom_columns::row(columns, &pod).map_err(CommandError::failed)?);
            }
            let _ = write!(out, "{}", output::aligned(&rows));
        }
        Format::Stored => {
            let text = match (single, items.first()) {
                (true, Some(item)) => serde_json::to_string_pretty(&readable(item)),
                (true, None) => Ok(String::new()),
                _ => serde_json::to_string_pretty(&serde_json::json!({
                    "revision": revision,
                    "items": items.iter().map(readable).collect::<Vec<_>>(),
                })),
            }
            .map_err(|e| CommandError::failed(e.to_string()))?;
            if !text.is_empty() {
                let _ = writeln!(out, "{text}");
            }
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(CommandError::failed(""))
    }
}

/// Now, in whole seconds of wall time.
fn now_seconds() -> grace_core::Timestamp {
    crate::clock::SystemClock::new()
        .now()
        .wall
        .floor_to_timestamp()
}

/// `grace delete`'s options besides the request's flags.
#[derive(Clone, Debug)]
pub struct DeleteCommand {
    /// What to delete (names, `-l`, `--all`).
    pub selection: Selection,
    /// `-f`: the objects of these manifests.
    pub files: Vec<std::path::PathBuf>,
    /// `--ignore-not-found` (implied by `-l` and `--all`, as kubectl).
    pub ignore_not_found: bool,
    /// `--now`: a grace of 1 s.
    pub now: bool,
    /// `--wait`: return once the objects are gone (default, as kubectl).
    pub wait: bool,
    /// `--timeout`: how long to wait; `None` waits as long as it takes.
    pub timeout: Option<std::time::Duration>,
    /// `-o name`.
    pub output_name: bool,
    /// The request's flags.
    pub flags: DeleteFlags,
    /// `-v`: what became of each object (terminating with its grace,
    /// held by finalizers, removed) on standard error.
    pub verbose: bool,
}

/// `grace delete (TYPE NAME… | TYPE/NAME… | -f FILE | -l SELECTOR | --all)`:
/// each object is deleted with the same options (R47: each its own
/// copy); with `--wait` the command returns once all are gone. A name
/// not found is reported and the others go on (exit 1 at the end).
pub fn delete(
    target: Target<'_>,
    command: &DeleteCommand,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<(), CommandError> {
    let sel = &command.selection;
    let by_name = !sel.args.names.is_empty();
    let modes = [
        by_name,
        !command.files.is_empty(),
        sel.selector.is_some() || sel.fields.is_some(),
        sel.all,
    ];
    match modes.iter().filter(|m| **m).count() {
        0 => {
            return Err(CommandError::invalid(
                "You must provide one or more resources by argument or filename (NAME, -f, -l or --all).",
            ));
        }
        1 => {}
        _ => {
            return Err(CommandError::invalid(
                "names, -f, -l and --all cannot be used together",
            ));
        }
    }
    let mut flags = command.flags.clone();
    if command.now {
        if flags.grace_period.is_some() {
            return Err(CommandError::invalid(
                "--now and --grace-period cannot be specified together",
            ));
        }
        flags.grace_period = Some(1);
    }
    let (options, warning) = delete_options(&flags)?;
    // Store keys: the names in their namespace.
    let mut names: Vec<String> = sel
        .args
        .names
        .iter()
        .map(|n| sel.namespace.key(n))
        .collect();
    let mut ignore = command.ignore_not_found;
    if !command.files.is_empty() {
        let documents = crate::manifest_file::read(&command.files)
            .map_err(|e| CommandError::invalid(format!("error validating {e}")))?;
        names = documents
            .iter()
            .map(|d| {
                sel.namespace
                    .key_of_manifest(d.namespace.as_deref(), &d.name)
            })
            .collect::<Result<_, _>>()?;
    } else if sel.selector.is_some() || sel.fields.is_some() || sel.all {
        ignore = true;
        let (_, items) = fetch_all(target)?;
        names = sel.pick(items).0.into_iter().map(|i| i.name).collect();
        if names.is_empty() {
            let _ = writeln!(err, "No resources found");
            return Ok(());
        }
    }
    if let Some(w) = warning {
        let _ = writeln!(err, "{w}");
    }
    let mut failed = None;
    let mut deleted = Vec::new();
    for key in &names {
        let name = crate::namespace::name_of(key);
        match delete_one(target, key, &options) {
            Ok(Some(report)) => {
                if command.output_name {
                    let _ = writeln!(out, "pod/{name}");
                } else {
                    let force = options.grace_period_seconds == Some(0);
                    let _ = writeln!(out, "{}", deleted_line(name, &report, force));
                }
                if command.verbose {
                    let _ = writeln!(err, "{}", deletion_detail(name, &report));
                }
                if !report.dry_run {
                    deleted.push((key.clone(), report.record.uid.to_string()));
                }
            }
            Ok(None) if ignore => {}
            Ok(None) => {
                if let Some(e) = sel.missing_type(&[name.to_owned()]) {
                    return Err(e);
                }
                let _ = writeln!(err, "{}", not_found(name));
                failed.get_or_insert(CommandError::failed(""));
            }
            Err(e) => {
                let _ = writeln!(err, "error: {}", e.message);
                failed.get_or_insert(CommandError {
                    code: e.code,
                    message: String::new(),
                });
            }
        }
    }
    if command.wait && !deleted.is_empty() {
        let _ = out.flush();
        wait_gone(target, deleted, command.timeout, None)?;
    }
    failed.map_or(Ok(()), Err)
}

/// One delete request; `None` if there is no such object.
fn delete_one(
    target: Target<'_>,
    name: &str,
    options: &DeleteOptions,
) -> Result<Option<DeleteReport>, CommandError> {
    match target {
        Target::Agent(data_dir) => {
            let mut client = Client::connect(data_dir)?;
            let reply = client.call(&Request::Delete {
                name: name.to_owned(),
                options: options.clone(),
            });
            match reply {
                Ok(Reply::Deleted(report)) => Ok(Some(report)),
                Ok(_) => Err(CommandError::failed("the agent answered something else")),
                Err(ClientError::Api(ApiError {
                    kind: ErrorKind::NotFound,
                    ..
                })) => Ok(None),
                Err(e) => Err(e.into()),
            }
        }
        Target::Shared(store) => {
            use crate::runtime::RuntimeError;
            let now = crate::clock::SystemClock::new().now();
            match crate::api_server::delete(store, now, name, options) {
                Ok(answer) => {
                    if !answer.response.dry_run {
                        // The garbage collector's step (the answer shows
                        // the finalizer the delete added, as kubectl
                        // does); the node's agent runs it too should this
                        // fail.
                        let _ = crate::api_server::collect_garbage(store, now, name);
                    }
                    Ok(Some(DeleteReport {
                        outcome: answer.response.outcome,
                        record: answer.record,
                        dry_run: answer.response.dry_run,
                        force: answer.response.force,
                    }))
                }
                Err(
                    RuntimeError::NotFound(_)
                    | RuntimeError::Delete(grace_core::DeleteError::NotFound),
                ) => Ok(None),
                Err(e) => Err(runtime_failed(name, e)),
            }
        }
    }
}

/// Waits until each `(name, uid)` is gone from the store (or holds
/// another object); `met` prints kubectl's `pod/NAME condition met` as
/// each goes. Fails after `timeout`, as kubectl:
/// `timed out waiting for the condition on pods/NAME`.
///
/// It follows the changes as kubectl's watch does: the agent's watch on
/// one machine, the store's change feed on a shared store, from the
/// listing's revision (no deletion missed between the two). Without a
/// running agent nothing is deleted, and the store file is read again now
/// and then until the timeout.
pub fn wait_gone(
    target: Target<'_>,
    mut pending: Vec<(String, String)>,
    timeout: Option<std::time::Duration>,
    mut met: Option<&mut dyn Write>,
) -> Result<(), CommandError> {
    // A timeout beyond what the clock holds is none.
    let deadline = timeout.and_then(|t| std::time::Instant::now().checked_add(t));
    // The time left before the deadline; `None` without one. An error once
    // it has passed, naming the first object still there.
    let left = |pending: &[(String, String)]| -> Result<Option<std::time::Duration>, CommandError> {
        let Some(deadline) = deadline else {
            return Ok(None);
        };
        match deadline.checked_duration_since(std::time::Instant::now()) {
            Some(left) if !left.is_zero() => Ok(Some(left)),
            _ => Err(CommandError::failed(format!(
                "timed out waiting for the condition on pods/{}",
                pending
                    .first()
                    .map_or("", |(key, _)| crate::namespace::name_of(key))
            ))),
        }
    };
    let mut settle = |pending: &mut Vec<(String, String)>, there: &dyn Fn(&str, &str) -> bool| {
        pending.retain(|(name, uid)| {
            let stays = there(name, uid);
            if !stays && let Some(out) = met.as_mut() {
                let name = crate::namespace::name_of(name);
                let _ = writeln!(out, "pod/{name} condition met");
            }
            stays
        });
    };
    // An event ends the wait for its object when the object is removed, or
    // when the name holds another object now.
    let ends = |event: &Event, name: &str, uid: &str| {
        event.name == name && (event.kind == EventKind::Deleted || event.object.uid() != uid)
    };
    let mut changes = match changes(target)? {
        Some(changes) => changes,
        None => {
            // No agent: read the file until the timeout.
            loop {
                let (_, items) = fetch_all(target)?;
                settle(&mut pending, &|name, uid| {
                    items
                        .iter()
                        .any(|i| i.name == name && i.object.uid() == uid)
                });
                if pending.is_empty() {
                    return Ok(());
                }
                let pause = std::time::Duration::from_millis(100);
                std::thread::sleep(left(&pending)?.map_or(pause, |l| l.min(pause)));
            }
        }
    };
    let items = std::mem::take(&mut changes.items);
    settle(&mut pending, &|name, uid| {
        items
            .iter()
            .any(|i| i.name == name && i.object.uid() == uid)
    });
    while !pending.is_empty() {
        let wait = left(&pending)?;
        // Nothing within the time left: the next turn says so.
        if let Some(event) = changes.next(wait)? {
            settle(&mut pending, &|name, uid| !ends(&event, name, uid));
        }
    }
    Ok(())
}

/// The next change, waiting at most the time given (`None`: as long as it
/// takes); `None` if none came in that time.
type NextChange = dyn FnMut(Option<std::time::Duration>) -> Result<Option<Event>, CommandError>;

/// The listing and then every change after it, from the agent's watch or
/// the shared store's change feed.
struct Changes {
    /// The objects when the watch began.
    items: Vec<Item>,
    next: Box<NextChange>,
}

impl Changes {
    /// The next change, waiting at most `wait` (`None`: as long as it
    /// takes); `None` if none came in that time.
    fn next(&mut self, wait: Option<std::time::Duration>) -> Result<Option<Event>, CommandError> {
        (self.next)(wait)
    }
}

/// Opens the watch `wait_gone` follows; `None` when no agent serves the
/// data directory.
fn changes(target: Target<'_>) -> Result<Option<Changes>, CommandError> {
    match target {
        Target::Agent(data_dir) => {
            let mut client = match Client::connect(data_dir) {
                Ok(client) => client,
                Err(ClientError::NoAgent(_)) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
            client.send(&Request::Watch)?;
            let Reply::Objects { items, .. } = client.next_reply()? else {
                return Err(CommandError::failed("the agent answered something else"));
            };
            // The agent's socket is read by a thread of its own, so that
            // the wait can end at its deadline while no change comes; it
            // ends with the process.
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::Builder::new()
                .spawn(move || {
                    loop {
                        let reply = client.next_reply();
                        let last = reply.is_err();
                        if tx.send(reply).is_err() || last {
                            return;
                        }
                    }
                })
                .map_err(|e| CommandError::failed(format!("cannot start a thread: {e}")))?;
            let next = move |wait: Option<std::time::Duration>| loop {
                let reply = match wait {
                    Some(wait) => match rx.recv_timeout(wait) {
                        Ok(reply) => reply,
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => return Ok(None),
                        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                            return Err(CommandError::failed("the agent's watch ended"));
                        }
                    },
                    None => rx
                        .recv()
                        .map_err(|_| CommandError::failed("the agent's watch ended"))?,
                };
                if let Reply::Event(event) = reply? {
                    return Ok(Some(event));
                }
            };
            Ok(Some(Changes {
                items,
                next: Box::new(next),
            }))
        }
        Target::Shared(store) => {
            let failed = |e: StoreError| CommandError::failed(format!("store: {e}"));
            let (revision, items) = grace_agent::api::items(store, None).map_err(failed)?;
            let mut watch = store.watch(Revision(revision)).map_err(failed)?;
            let next = move |wait: Option<std::time::Duration>| match wait {
                Some(wait) => watch.next_timeout(wait).map_err(failed),
                None => match watch.next() {
                    Some(event) => event.map(Some).map_err(failed),
                    None => Err(CommandError::failed("store: the watch ended")),
                },
            };
            Ok(Some(Changes {
                items,
                next: Box::new(next),
            }))
        }
    }
}

/// `grace wait --for=delete (NAME… | -l SELECTOR | --all) [--timeout]`:
/// returns once every object named is gone. One already gone counts as
/// deleted.
pub fn wait_for_delete(
    target: Target<'_>,
    selection: &Selection,
    timeout: Option<std::time::Duration>,
    out: &mut impl Write,
) -> Result<(), CommandError> {
    if selection.args.names.is_empty() && selection.selector.is_none() && !selection.all {
        return Err(CommandError::invalid(
            "resource(s) were provided, but no name was specified (NAME, -l or --all)",
        ));
    }
    let (_, items) = fetch_all(target)?;
    let (found, missing) = selection.pick(items);
    for name in missing {
        let _ = writeln!(out, "pod/{name} condition met");
    }
    let pending = found
        .into_iter()
        .map(|i| (i.name.clone(), i.object.uid().to_owned()))
        .collect();
    wait_gone(target, pending, timeout, Some(out))
}

/// `grace wait --for=…`: returns once every object selected meets the
/// condition (printing kubectl's `pod/NAME condition met` for each), or
/// fails at the timeout naming one that does not.
pub fn wait(
    target: Target<'_>,
    selection: &Selection,
    condition: &WaitFor,
    timeout: Option<std::time::Duration>,
    out: &mut impl Write,
) -> Result<(), CommandError> {
    if *condition == WaitFor::Delete {
        return wait_for_delete(target, selection, timeout, out);
    }
    if selection.args.names.is_empty() && selection.selector.is_none() && !selection.all {
        return Err(CommandError::invalid(
            "resource(s) were provided, but no name was specified (NAME, -l or --all)",
        ));
    }
    if *condition == WaitFor::Create && selection.args.names.is_empty() {
        return Err(CommandError::invalid(
            "--for=create needs the objects' names",
        ));
    }
    let deadline = timeout.and_then(|t| std::time::Instant::now().checked_add(t));
    let mut done: Vec<String> = Vec::new();
    loop {
        let (_, items) = fetch_all(target)?;
        let (found, missing) = selection.pick(items);
        if *condition != WaitFor::Create
            && let Some(name) = missing.first()
        {
            return Err(CommandError::failed(not_found(name)));
        }
        if found.is_empty() && missing.is_empty() {
            return Err(CommandError::failed("no matching resources found"));
        }
        let mut waiting = missing;
        for item in &found {
            if done.contains(&item.name) {
                continue;
            }
            let meets = *condition == WaitFor::Create
                || condition
                    .met(&output::kubernetes(
                        &[(item.name.as_str(), &item.object)],
                        true,
                    ))
                    .map_err(CommandError::failed)?;
            if meets {
                let _ = writeln!(
                    out,
                    "{}/{} condition met",
                    kind_word(&item.object),
                    name_of(&item.name)
                );
                done.push(item.name.clone());
            } else {
                waiting.push(name_of(&item.name).to_owned());
            }
        }
        if waiting.is_empty() {
            return Ok(());
        }
        let _ = out.flush();
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            return Err(CommandError::failed(format!(
                "timed out waiting for the condition on pods/{}",
                waiting.first().map_or("", String::as_str)
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// kubectl's line: `pod "x" deleted`, `pod "x" force deleted` when the
/// request's grace was 0, with ` (server dry run)` for a dry run.
fn deleted_line(name: &str, report: &DeleteReport, force: bool) -> String {
    let how = if force { "force deleted" } else { "deleted" };
    let dry = if report.dry_run {
        " (server dry run)"
    } else {
        ""
    };
    format!("pod \"{name}\" {how}{dry}")
}

/// What grace knows besides (`-v`): removed now, or terminating with its
/// grace and the finalizers that hold it.
fn deletion_detail(name: &str, report: &DeleteReport) -> String {
    let how = match report.outcome {
        DeleteOutcome::Deleted if report.force => {
            "removed now; the workload may still be running".to_owned()
        }
        DeleteOutcome::Deleted => "removed now".to_owned(),
        // Graceful or Pending: the record is kept.
        _ => {
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
            format!("terminating, grace {grace} s{held}")
        }
    };
    format!("pod \"{name}\": {how}")
}

/// A duration as kubectl takes one (Go's syntax): `30s`, `1m30s`,
/// `500ms`, `2h`; `0` alone.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    if text == "0" {
        return Ok(std::time::Duration::ZERO);
    }
    let bad = || format!("invalid duration \"{text}\" (such as 30s, 1m30s, 500ms, 2h)");
    let mut total = 0f64;
    let mut rest = text;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let number: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return Err(bad()),
        };
        total += number * scale;
        rest = &rest[unit_end..];
    }
    Ok(std::time::Duration::from_secs_f64(total))
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
    let current = fetch(target, name)?.ok_or_else(|| CommandError::failed(not_found(name)))?;
    let kind = kind_word(&current);
    // kubectl's answer when its patch would change nothing.
    if !current.record.finalizers.iter().any(|f| *f == parsed) {
        let _ = writeln!(out, "{kind}/{} patched (no change)", name_of(name));
        return Ok(());
    }
    match target {
        Target::Agent(data_dir) => {
            let mut client = Client::connect(data_dir)?;
            client
                .call(&Request::RemoveFinalizer {
                    name: name.to_owned(),
                    finalizer: finalizer.to_owned(),
                })
                .map_err(|e| match e {
                    ClientError::Api(ApiError {
                        kind: ErrorKind::NotFound,
                        ..
                    }) => CommandError::failed(not_found(name)),
                    other => other.into(),
                })?;
        }
        Target::Shared(store) => {
            let now = crate::clock::SystemClock::new().now();
            let change = grace_core::FinalizerChange::Remove(parsed);
            let _ = crate::api_server::update_finalizers(store, now, name, &change)
                .map_err(|e| runtime_failed(name, e))?;
        }
    }
    let _ = writeln!(out, "{kind}/{} patched", name_of(name));
    Ok(())
}

/// The object stored as `name` now, or `None` if there is none: through
/// the agent, or read directly without one.
pub fn fetch(target: Target<'_>, name: &str) -> Result<Option<StoredObject>, CommandError> {
    let found = match target {
        Target::Shared(store) => grace_agent::api::items(store, Some(name)),
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
                Err(ClientError::Io(_) | ClientError::Json(_)) => {
                    match snapshot(&data_dir.join(DATABASE))? {
                        Some(store) => grace_agent::api::items(&store, Some(name)),
                        None => return Err(no_store(data_dir)),
                    }
                }
                Err(e) => return Err(e.into()),
            },
            Err(ClientError::NoAgent(_) | ClientError::Io(_) | ClientError::Json(_)) => {
                match snapshot(&data_dir.join(DATABASE))? {
                    Some(store) => grace_agent::api::items(&store, Some(name)),
                    None => return Err(no_store(data_dir)),
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

/// Without an agent the store file is read directly, as a read-only
/// snapshot ([`RedbStore::snapshot`]): the file is never written, a
/// read-only mount will do, and an agent starting meanwhile is never kept
/// from its lock. A missing store is empty (and is not created by reading
/// it).
fn read_directly(data_dir: &Path, name: Option<&str>) -> Result<(u64, Vec<Item>), CommandError> {
    let path = data_dir.join(DATABASE);
    let Some(store) = snapshot(&path)? else {
        return Err(no_store(data_dir));
    };
    grace_agent::api::items(&store, name).map_err(|e| match e {
        StoreError::NotFound { name } => CommandError::failed(not_found(&name)),
        other => store_failed(&path, other),
    })
}

/// Neither an agent nor a store in `data_dir`: most likely the wrong
/// directory, so the error names it and says how to start an agent.
fn no_store(data_dir: &Path) -> CommandError {
    CommandError::failed(format!(
        "no agent is serving {dir} and it holds no store: start one with `grace agent --data-dir {dir}`, or name the data dir of a running agent (--data-dir, GRACE_DATA_DIR)",
        dir = data_dir.display()
    ))
}

/// A request refused or failed against a shared store, in kubectl's words.
pub(crate) fn runtime_failed(name: &str, e: crate::runtime::RuntimeError) -> CommandError {
    use crate::runtime::RuntimeError;
    use grace_core::{DeleteError, UpdateError};
    match e {
        RuntimeError::NotFound(_)
        | RuntimeError::Delete(DeleteError::NotFound)
        | RuntimeError::Update(UpdateError::NotFound) => CommandError::failed(not_found(name)),
        RuntimeError::AlreadyExists(_) => CommandError::failed(format!(
            "Error from server (AlreadyExists): pods \"{}\" already exists",
            crate::escape::escape(name, false)
        )),
        RuntimeError::Delete(DeleteError::Conflict(c)) => {
            CommandError::failed(format!("object \"{name}\": {c}"))
        }
        RuntimeError::Delete(d) => CommandError::invalid(format!("object \"{name}\": {d}")),
        RuntimeError::Update(u) => CommandError::invalid(format!("object \"{name}\": {u}")),
        RuntimeError::Store(s) => CommandError::failed(format!("store: {s}")),
        RuntimeError::UnknownContainer { .. }
        | RuntimeError::TooManyContainers { .. }
        | RuntimeError::InvalidName { .. }
        | RuntimeError::BatchFull { .. } => CommandError::invalid(e.to_string()),
        _ => CommandError::failed(e.to_string()),
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

/// `get -w`: the listing, then every change, until the reader hangs up.
/// Through the agent on one machine, from the store's own change feed on
/// a shared store (from the listing's revision: no change missed).
fn watch(
    target: Target<'_>,
    options: &GetOptions,
    out: &mut impl Write,
) -> Result<(), CommandError> {
    match target {
        Target::Agent(data_dir) => {
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
            watch_from(options, revision, items, next, out)
        }
        Target::Shared(store) => {
            let failed = |e: StoreError| CommandError::failed(format!("store: {e}"));
            let (revision, items) = grace_agent::api::items(store, None).map_err(failed)?;
            let mut watch = store.watch(Revision(revision)).map_err(failed)?;
            let next = || match watch.next() {
                Some(Ok(event)) => Ok(event),
                Some(Err(e)) => Err(failed(e)),
                None => Err(CommandError::failed("store: the watch ended")),
            };
            watch_from(options, revision, items, next, out)
        }
    }
}

/// Prints the listing (`items` at `revision`), then each change `next`
/// waits for, until the reader hangs up or `next` fails. Table rows are
/// aligned to the header's columns (each row is printed as it comes).
fn watch_from(
    options: &GetOptions,
    revision: u64,
    items: Vec<Item>,
    mut next: impl FnMut() -> Result<Event, CommandError>,
    out: &mut impl Write,
) -> Result<(), CommandError> {
    let _ = revision;
    let (mut items, missing) = options.selection.pick(items);
    if let Some(key) = &options.sort_by {
        key.sort(&mut items, |i| {
            output::kubernetes(&[(i.name.as_str(), &i.object)], true)
        })
        .map_err(CommandError::invalid)?;
    }
    if let Some(name) = missing.first() {
        return Err(CommandError::failed(not_found(name)));
    }
    let sel = &options.selection;
    let wanted = |key: &str, object: &StoredObject| {
        sel.namespace.holds(key)
            && (sel.args.names.is_empty()
                || sel.args.names.iter().any(|n| sel.namespace.key(n) == key))
            && sel.args.kind.is_none_or(|k| k.holds(object))
            && sel
                .selector
                .as_ref()
                .is_none_or(|s| s.matches(&object.labels))
            && sel
                .fields
                .as_ref()
                .is_none_or(|f| f.matches(&output::kubernetes(&[(key, object)], true)))
    };
    let wide = options.format == Format::Wide;
    let pod = |item: &Item| output::kubernetes(&[(item.name.as_str(), &item.object)], true);
    // A table's cells (kubectl's or custom columns); `None` for the other
    // formats.
    let cells = |item: &Item, status: Option<&str>| -> Result<Option<Vec<String>>, CommandError> {
        match &options.format {
            Format::Table | Format::Wide => {
                let mut row = output::row(
                    name_of(&item.name),
                    &item.object,
                    wide,
                    now_seconds(),
                    status,
                );
                row.extend(options.labels.cells(&item.object));
                Ok(Some(row))
            }
            Format::CustomColumns(columns) => custom_columns::row(columns, &pod(item))
                .map(Some)
                .map_err(CommandError::failed),
            _ => Ok(None),
        }
    };
    let header: Option<Vec<String>> = match &options.format {
        Format::Table | Format::Wide => {
            let mut header: Vec<String> = output::header(wide)
                .into_iter()
                .map(str::to_owned)
                .collect();
            header.extend(options.labels.headers());
            Some(header)
        }
        Format::CustomColumns(columns) => Some(custom_columns::headers(columns)),
        _ => None,
    };
    let table = header.is_some();
    let widths: Vec<usize> = {
        let mut rows: Vec<Vec<String>> = header.iter().cloned().collect();
        for item in &items {
            rows.extend(cells(item, None)?);
        }
        (0..rows.first().map_or(0, Vec::len))
            .map(|c| {
                rows.iter()
                    .map(|r| r.get(c).map_or(0, String::len))
                    .max()
                    .unwrap_or(0)
                    .saturating_add(3)
            })
            .collect()
    };
    let line_of = |cells: &[String]| {
        let mut line = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i.saturating_add(1) == cells.len() {
                line.push_str(cell);
            } else {
                // A cell wider than its column (a status longer than any
                // in the listing) still has the tab-writer's padding
                // after it: the columns shift, they never run together.
                let w = widths
                    .get(i)
                    .copied()
                    .unwrap_or(0)
                    .max(cell.len().saturating_add(3));
                line.push_str(&format!("{cell:<w$}"));
            }
        }
        line.push('\n');
        line
    };
    // The text for one event, its line break included (a jsonpath
    // template prints only what it says, as kubectl's does).
    let render = |kind: &str, item: &Item, status: Option<&str>| -> Result<String, CommandError> {
        if let Some(cells) = cells(item, status)? {
            return Ok(line_of(&cells));
        }
        Ok(match &options.format {
            Format::Name => format!("{}/{}\n", kind_word(&item.object), name_of(&item.name)),
            Format::Json | Format::Yaml => format!(
                "{}\n",
                serde_json::json!({ "type": kind, "object": pod(item) })
            ),
            Format::JsonPath(template) => template
                .render(&pod(item))
                .map_err(|e| CommandError::failed(e.to_string()))?,
            _ => format!("{}\n", json_line(kind, item)),
        })
    };
    if let Some(header) = header.as_ref().filter(|_| !options.no_headers) {
        let _ = write!(out, "{}", line_of(header));
    }
    // The agent writes its kill state too; a line that looks the same as
    // the last one shown for its object is not shown again.
    let mut shown: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    for item in &items {
        let line = render("ADDED", item, None)?;
        let _ = write!(out, "{line}");
        shown.insert(item.name.clone(), line);
    }
    let _ = out.flush();
    loop {
        let event = next()?;
        if !wanted(&event.name, &event.object) {
            continue;
        }
        let kind = match event.kind {
            EventKind::Created => "ADDED",
            EventKind::Updated => "MODIFIED",
            EventKind::Deleted => "DELETED",
            // A kind of change this version does not know: not shown.
            _ => continue,
        };
        let gone = (event.kind == EventKind::Deleted).then_some("Deleted");
        let item = Item {
            name: event.name,
            revision: event.revision.get(),
            object: event.object,
        };
        let line = render(kind, &item, gone)?;
        if table && shown.get(&item.name) == Some(&line) {
            continue;
        }
        shown.insert(item.name.clone(), line.clone());
        if write!(out, "{line}").and_then(|()| out.flush()).is_err() {
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

/// kubectl's word for the object's type: `pod`, or `object` for grace's
/// objects without a graceful strategy.
pub fn kind_word(object: &StoredObject) -> &'static str {
    match object.strategy.kind {
        grace_core::Kind::Pod => "pod",
        _ => "object",
    }
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
    fn kubectl_force_with_a_positive_grace_is_refused_with_kubectls_error() {
        let refused = delete_options(&DeleteFlags {
            force: true,
            grace_period: Some(5),
            ..DeleteFlags::default()
        });
        let e = refused.expect_err("refused");
        assert_eq!(e.code, 1);
        assert_eq!(
            e.message,
            "--force and --grace-period greater than 0 cannot be specified together"
        );
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
