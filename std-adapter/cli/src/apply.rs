//! `grace apply -f`: create-or-update, as `kubectl apply`.
//!
//! An object not stored yet is created (`pod/web created`). One stored
//! under the same name is updated as the Kubernetes API server updates a
//! Pod: labels may change at any time; finalizers may be removed (the last
//! one may complete a deletion, R45) and added only while the object is not
//! being deleted (R46: the whole update is refused otherwise); everything
//! else of the spec is immutable and a change to it is refused; a uid given
//! in the manifest must be the stored one (409). Nothing to change prints
//! `pod/web unchanged`.
//!
//! The agent carries out an update as the steps it is made of (labels,
//! added finalizers, removed finalizers), after checking them all; each is
//! durable on its own.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use grace_core::{FinalizerChange, Name, Timestamp};

use crate::api::{ApiError, Client, ClientError, ErrorKind, Reply, Request};
use crate::clock::{Clock, SystemClock};
use crate::kubectl::{CommandError, Target};
use crate::manifest_file::Document;
use crate::process::ProcessActuator;
use crate::runtime::{Runtime, RuntimeError};
use crate::store::{Store, StoredObject};

/// What an update changes, once checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The new labels, if they differ.
    pub labels: Option<BTreeMap<String, String>>,
    /// Finalizers to add.
    pub add: Vec<Name>,
    /// Finalizers to remove.
    pub remove: Vec<Name>,
}

impl Plan {
    /// Whether the update changes nothing.
    pub fn is_empty(&self) -> bool {
        self.labels.is_none() && self.add.is_empty() && self.remove.is_empty()
    }
}

/// Checks the update of `old` (stored) into `new` (the manifest's) as the
/// API server would, and says what it changes.
pub fn plan(name: &str, old: &StoredObject, new: &StoredObject) -> Result<Plan, ApiError> {
    if !new.uid().is_empty() && new.uid() != old.uid() {
        return Err(ApiError {
            kind: ErrorKind::Conflict,
            message: format!(
                "Operation cannot be fulfilled on pods \"{name}\": Precondition failed: UID in precondition: {}, UID in object meta: {}",
                new.uid(),
                old.uid()
            ),
        });
    }
    let immutable = [
        ("kind", old.strategy != new.strategy),
        ("spec.nodeName", old.node != new.node),
        (
            "spec.terminationGracePeriodSeconds",
            old.record.termination_grace_period_seconds
                != new.record.termination_grace_period_seconds,
        ),
        ("spec.containers", old.containers != new.containers),
    ];
    if let Some((field, _)) = immutable.iter().find(|(_, changed)| *changed) {
        return Err(ApiError {
            kind: ErrorKind::Invalid,
            message: format!(
                "Pod \"{name}\" is invalid: {field}: Forbidden: pod updates may not change fields other than metadata.labels and metadata.finalizers"
            ),
        });
    }
    let add: Vec<Name> = new
        .record
        .finalizers
        .iter()
        .filter(|f| !old.record.finalizers.contains(f.as_str()))
        .cloned()
        .collect();
    let remove: Vec<Name> = old
        .record
        .finalizers
        .iter()
        .filter(|f| !new.record.finalizers.contains(f.as_str()))
        .cloned()
        .collect();
    if !add.is_empty() && old.record.deletion_timestamp.is_some() {
        let names: Vec<String> = add.iter().map(|f| format!("\"{f}\"")).collect();
        return Err(ApiError {
            kind: ErrorKind::Invalid,
            message: format!(
                "Pod \"{name}\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers [{}] (R46)",
                names.join(", ")
            ),
        });
    }
    Ok(Plan {
        labels: (old.labels != new.labels).then(|| new.labels.clone()),
        add,
        remove,
    })
}

/// The agent's side of [`Request::Put`]: creates the object (and starts
/// it if it is bound to `node`) or updates it.
pub fn put<S: Store, C: Clock>(
    rt: &mut Runtime<S, C, ProcessActuator>,
    name: &str,
    object: StoredObject,
    node: &str,
) -> Result<Reply, RuntimeError> {
    let Some(old) = rt
        .object(name)
        .filter(|_| rt.lifecycle(name).is_some_and(|l| l.is_stored()))
    else {
        let mut object = object;
        if object.uid().is_empty() {
            object.record.uid =
                Name::try_from(new_uid().as_str()).map_err(|e| RuntimeError::InvalidName {
                    field: "metadata.uid",
                    reason: e.to_string(),
                })?;
        }
        let bound_here = object.node.as_deref() == Some(node);
        rt.create(name, object)?;
        let revision = rt.object(name).map_or(0, |o| o.record.resource_version);
        if bound_here {
            crate::agent::start(rt, name);
        }
        return Ok(Reply::Applied { revision });
    };
    let plan = match plan(name, &old, &object) {
        Ok(plan) => plan,
        Err(e) => return Ok(Reply::Error(e)),
    };
    let changed = !plan.is_empty();
    if let Some(labels) = plan.labels {
        rt.update_labels(name, labels)?;
    }
    for f in plan.add {
        let _ = rt.handle_finalizer_update(name, &FinalizerChange::Add(f))?;
    }
    for f in plan.remove {
        let _ = rt.handle_finalizer_update(name, &FinalizerChange::Remove(f))?;
    }
    Ok(Reply::Configured { changed })
}

/// A fresh uid: unique per process and call (time, process id, counter).
pub fn new_uid() -> String {
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

/// What one document's apply did, in kubectl's word.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    /// `created`.
    Created,
    /// `configured`.
    Configured,
    /// `unchanged`.
    Unchanged,
}

/// `grace apply -f FILE…`: every document of every file, created or
/// updated. The manifests are read and checked whole first (a refused one
/// applies nothing, exit 2); then each object is applied, and one that
/// fails does not stop the others (exit 1 at the end, as kubectl).
pub fn apply(
    target: Target<'_>,
    files: &[PathBuf],
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<(), CommandError> {
    let documents = crate::manifest_file::read(files)
        .map_err(|e| CommandError::invalid(format!("error validating {e}")))?;
    warn_ignored(&documents, err);
    let created = Timestamp::from_unix_seconds(
        SystemClock::new()
            .now()
            .wall
            .as_unix_millis()
            .div_euclid(1000),
    );
    let mut failed = None;
    for doc in documents {
        for w in &doc.warnings {
            let _ = writeln!(err, "Warning: {}: {w}", doc.source);
        }
        let kind = crate::kubectl::kind_word(&doc.object);
        let mut object = doc.object;
        object.created.get_or_insert(created);
        match apply_one(target, &doc.name, object) {
            Err(Failed::Unknown(why)) => {
                let _ = writeln!(
                    err,
                    "error: applying \"{}\": the outcome is unknown ({why}): the pod may have been created or changed all the same; check with `grace get {}` once an agent serves again, and apply again if it is not as you want",
                    doc.source, doc.name
                );
                failed.get_or_insert(1);
            }
            Err(Failed::Refused(e)) => {
                let _ = writeln!(
                    err,
                    "Error from server: error when applying \"{}\": {}",
                    doc.source, e.message
                );
                failed.get_or_insert(e.code);
            }
            Ok(done) => {
                let word = match done {
                    Applied::Created => "created",
                    Applied::Configured => "configured",
                    Applied::Unchanged => "unchanged",
                };
                let _ = writeln!(out, "{kind}/{} {word}", doc.name);
            }
        }
    }
    match failed {
        None => Ok(()),
        Some(code) => Err(CommandError {
            code,
            message: "some objects were not applied".into(),
        }),
    }
}

/// The fields grace accepted and does not act on, once for all documents.
fn warn_ignored(documents: &[Document], err: &mut impl Write) {
    let mut ignored: Vec<&str> = documents
        .iter()
        .flat_map(|d| d.ignored.iter().map(String::as_str))
        .collect();
    ignored.sort_unstable();
    ignored.dedup();
    if !ignored.is_empty() {
        let _ = writeln!(
            err,
            "Warning: grace does not act on these Pod fields (accepted, ignored): {}",
            ignored.join(", ")
        );
    }
}

/// Why one document was not applied.
enum Failed {
    /// Refused, or not sent: nothing changed.
    Refused(CommandError),
    /// Sent, but the answer was lost (the agent stopped or crashed
    /// meanwhile): it may have been applied.
    Unknown(String),
}

impl From<CommandError> for Failed {
    fn from(e: CommandError) -> Self {
        Failed::Refused(e)
    }
}

fn apply_one(target: Target<'_>, name: &str, object: StoredObject) -> Result<Applied, Failed> {
    match target {
        Target::Agent(data_dir) => {
            let mut client = Client::connect(data_dir).map_err(CommandError::from)?;
            let reply = client.call(&Request::Put {
                name: name.to_owned(),
                object: Box::new(object),
            });
            match reply {
                Ok(Reply::Applied { .. }) => Ok(Applied::Created),
                Ok(Reply::Configured { changed: true }) => Ok(Applied::Configured),
                Ok(Reply::Configured { changed: false }) => Ok(Applied::Unchanged),
                Ok(_) => Err(CommandError::failed("the agent answered something else").into()),
                Err(e @ ClientError::Io(_)) => Err(Failed::Unknown(e.to_string())),
                Err(e) => Err(CommandError::from(e).into()),
            }
        }
        Target::Shared(store) => Ok(apply_shared(store, name, object)?),
    }
}

/// Create-or-update on a shared store, decided here as an API server.
/// Label changes are refused: each node's agent keeps its objects' spec
/// and would write the old labels back.
fn apply_shared(
    store: &dyn Store,
    name: &str,
    object: StoredObject,
) -> Result<Applied, CommandError> {
    let failed = |e: crate::store::StoreError| CommandError::failed(format!("store: {e}"));
    let Some((old, _)) = store.get(name).map_err(failed)? else {
        let mut object = object;
        if object.uid().is_empty() {
            object.record.uid = Name::try_from(new_uid().as_str())
                .map_err(|e| CommandError::failed(e.to_string()))?;
        }
        crate::api_server::create(store, name, object)
            .map_err(|e| crate::kubectl::runtime_failed(name, e))?;
        return Ok(Applied::Created);
    };
    let plan = plan(name, &old, &object).map_err(|e| match e.kind {
        ErrorKind::Invalid => CommandError::invalid(e.message),
        _ => CommandError::failed(e.message),
    })?;
    if plan.labels.is_some() {
        return Err(CommandError::failed(format!(
            "pod \"{name}\": label changes are not supported on a shared store (--etcd)"
        )));
    }
    if plan.is_empty() {
        return Ok(Applied::Unchanged);
    }
    let now = SystemClock::new().now();
    let changes = plan
        .add
        .into_iter()
        .map(FinalizerChange::Add)
        .chain(plan.remove.into_iter().map(FinalizerChange::Remove));
    for change in changes {
        let _ = crate::api_server::update_finalizers(store, now, name, &change)
            .map_err(|e| crate::kubectl::runtime_failed(name, e))?;
    }
    Ok(Applied::Configured)
}
