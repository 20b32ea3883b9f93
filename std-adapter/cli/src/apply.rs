//! `grace apply -f`: create-or-update, as `kubectl apply`.
//!
//! An object not stored yet is created (`pod/web created`), kept whole
//! with the `kubectl.kubernetes.io/last-applied-configuration` annotation
//! `kubectl apply` writes. One stored under the same name is updated as
//! the Kubernetes API server updates a Pod: labels and annotations may
//! change at any time (merged three ways with the last apply's, as kubectl
//! does); finalizers may be removed (the last one may complete a deletion,
//! R45) and added only while the object is not being deleted (R46: the
//! whole update is refused otherwise); of the spec only an image may
//! change (kept, not acted on: nothing restarts), as may
//! `activeDeadlineSeconds` (lowered) and `tolerations` (added); anything
//! else is refused; a uid given in the manifest must be the stored one
//! (409). Nothing to change prints `pod/web unchanged`.
//!
//! Each object goes to its manifest's `metadata.namespace`, else to the
//! command's namespace; a manifest in a namespace other than `-n`'s is
//! refused (kubectl's error). A manifest with `metadata.generateName` and
//! no name is created under a generated name, as `kubectl create` does
//! (kubectl's apply refuses it): `pod/web-x7k2p created`.
//!
//! The agent decides an update ([`grace_agent::update`]); on a shared
//! store (`--etcd`) the same plan is carried out here.

use std::io::Write;
use std::path::PathBuf;

use grace_core::{FinalizerChange, Name, Timestamp};

use grace_agent::update::{new_uid, plan};

use crate::api::{Client, ClientError, ErrorKind, Merge, Reply, Request};
use crate::clock::{Clock, SystemClock};
use crate::kubectl::{CommandError, Target};
use crate::manifest_file::Document;
use crate::store::{Store, StoredObject};

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
    namespace: &crate::namespace::Namespace,
    files: &[PathBuf],
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<(), CommandError> {
    let documents = crate::manifest_file::read(files)
        .map_err(|e| CommandError::invalid(format!("error validating {e}")))?;
    // The namespaces are checked whole first too (kubectl's mismatch
    // error applies nothing).
    let keys = documents
        .iter()
        .map(|d| namespace.key_of_manifest(d.namespace.as_deref(), &d.name))
        .collect::<Result<Vec<String>, CommandError>>()?;
    warn_ignored(&documents, err);
    let created = Timestamp::from_unix_seconds(
        SystemClock::new()
            .now()
            .wall
            .as_unix_millis()
            .div_euclid(1000),
    );
    let mut failed = None;
    for (doc, key) in documents.into_iter().zip(keys) {
        for w in &doc.warnings {
            let _ = writeln!(err, "Warning: {}: {w}", doc.source);
        }
        let kind = crate::kubectl::kind_word(&doc.object);
        let mut doc = doc;
        doc.annotate(crate::namespace::namespace_of(&key));
        let mut object = doc.object;
        object.created.get_or_insert(created);
        match apply_one(target, &key, object, Merge::ThreeWay) {
            Err(Failed::Unknown(why)) => {
                let _ = writeln!(
                    err,
                    "error: applying \"{}\": the outcome is unknown ({why}): the pod may have been created or changed all the same; check with `grace get {}{}` once an agent serves again, and apply again if it is not as you want",
                    doc.source,
                    match crate::namespace::namespace_of(&key) {
                        crate::store::DEFAULT_NAMESPACE => String::new(),
                        ns => format!("-n {ns} "),
                    },
                    doc.name
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
            "Warning: grace does not act on these Pod fields (accepted and kept, not acted on): {}",
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

/// Create-or-update of one object, as `grace apply` does it (`grace
/// patch` stores its result so); an answer lost on the way is a failure
/// that says so.
/// Stores `object` whole, as the result of a patch: its labels and
/// annotations replace the stored ones ([`Merge::Replace`]).
pub(crate) fn store_update(
    target: Target<'_>,
    name: &str,
    object: StoredObject,
) -> Result<Applied, CommandError> {
    apply_one(target, name, object, Merge::Replace).map_err(|e| match e {
        Failed::Refused(e) => e,
        Failed::Unknown(why) => CommandError::failed(format!(
            "the outcome is unknown ({why}): the pod may have been changed all the same"
        )),
    })
}

fn apply_one(
    target: Target<'_>,
    name: &str,
    object: StoredObject,
    merge: Merge,
) -> Result<Applied, Failed> {
    match target {
        Target::Agent(data_dir) => {
            let mut client = Client::connect(data_dir).map_err(CommandError::from)?;
            let reply = client.call(&Request::Put {
                name: name.to_owned(),
                object: Box::new(object),
                merge,
            });
            match reply {
                Ok(Reply::Applied { .. }) => Ok(Applied::Created),
                Ok(Reply::Configured { changed: true }) => Ok(Applied::Configured),
                Ok(Reply::Configured { changed: false }) => Ok(Applied::Unchanged),
                Ok(_) => Err(CommandError::failed("the agent answered something else").into()),
                Err(e @ (ClientError::Io(_) | ClientError::Json(_))) => {
                    Err(Failed::Unknown(e.to_string()))
                }
                Err(e) => Err(CommandError::from(e).into()),
            }
        }
        Target::Shared(store) => Ok(apply_shared(store, name, object, merge)?),
    }
}

/// Create-or-update on a shared store, decided here as an API server.
/// Label, annotation and image changes are refused: each node's agent
/// keeps its objects' spec and would write the old ones back.
fn apply_shared(
    store: &dyn Store,
    name: &str,
    object: StoredObject,
    merge: Merge,
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
    let plan = plan(name, &old, &object, merge).map_err(|e| match e.kind {
        ErrorKind::Invalid => CommandError::invalid(e.message),
        _ => CommandError::failed(e.message),
    })?;
    if plan.labels.is_some() || (plan.manifest.is_some() && old.manifest.is_some()) {
        return Err(CommandError::failed(format!(
            "pod \"{name}\": changes of labels, annotations and images are not supported on a shared store (--etcd)"
        )));
    }
    // An object stored before manifests were kept keeps none there.
    let plan = grace_agent::update::Plan {
        manifest: None,
        ..plan
    };
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
