//! An update of a stored object, as the Kubernetes API server updates a
//! Pod: labels, annotations and owner references may change at any time
//! (labels and annotations merged three ways, as `kubectl apply` merges
//! them, [`crate::pod_update::merge`]); finalizers may be removed (the last
//! one may complete a deletion, R45) and added only while the object is not
//! being deleted (R46: the whole update is refused otherwise); of the spec
//! only what Kubernetes lets change may change (an image, see
//! [`crate::pod_update::check_spec_update`]), anything else is refused; a
//! uid given with the object must be the stored one (409).
//!
//! The agent carries out an update as the steps it is made of (labels,
//! added finalizers, removed finalizers), after checking them all; each is
//! durable on its own.

use std::collections::BTreeMap;

use grace_core::{FinalizerChange, Input, Name};

use crate::api::{ApiError, ErrorKind, Merge, Reply};
use crate::clock::Clock;
use crate::pod_update::{
    ForbiddenUpdate, check_spec_update, last_applied_object, merge, same_but_last_applied,
    string_map, with_annotations,
};
use crate::process::ProcessActuator;
use crate::runtime::{Runtime, RuntimeError};
use crate::store::{Manifest, OwnerReference, Store, StoredObject};

/// What an update changes, once checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The new labels, if they differ.
    pub labels: Option<BTreeMap<String, String>>,
    /// Finalizers to add.
    pub add: Vec<Name>,
    /// Finalizers to remove.
    pub remove: Vec<Name>,
    /// The new owner references, if they differ.
    pub owners: Option<Vec<OwnerReference>>,
    /// The whole object as applied, if it differs (its annotations merged
    /// as kubectl merges them); an image change is one.
    pub manifest: Option<Manifest>,
}

impl Plan {
    /// Whether the update changes nothing.
    pub fn is_empty(&self) -> bool {
        self.labels.is_none()
            && self.add.is_empty()
            && self.remove.is_empty()
            && self.owners.is_none()
            && self.manifest.is_none()
    }
}

/// Checks the update of `old` (stored) into `new` (the manifest's) as the
/// API server would, and says what it changes.
pub fn plan(
    name: &str,
    old: &StoredObject,
    new: &StoredObject,
    mode: Merge,
) -> Result<Plan, ApiError> {
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
    if old.strategy != new.strategy {
        return Err(ApiError {
            kind: ErrorKind::Invalid,
            message: format!(
                "Pod \"{name}\" is invalid: kind: Forbidden: pod updates may not change the kind"
            ),
        });
    }
    let kept = |o: &StoredObject| o.manifest.as_ref().and_then(|m| m.to_json().ok());
    let (old_kept, new_kept) = (kept(old), kept(new));
    if let (Some(was), Some(is)) = (&old_kept, &new_kept) {
        check_spec_update(was, is).map_err(|e| forbidden(name, &e))?;
    }
    // What grace holds beside the manifest, and the containers of objects
    // stored without one.
    let changed: Vec<String> = [
        // A manifest without it keeps the node the pod was bound to.
        ("spec.nodeName", new.node.is_some() && old.node != new.node),
        (
            "spec.terminationGracePeriodSeconds",
            old.record.termination_grace_period_seconds
                != new.record.termination_grace_period_seconds,
        ),
        ("spec.containers", old.containers != new.containers),
    ]
    .into_iter()
    .filter(|(_, changed)| *changed)
    .map(|(field, _)| field.to_owned())
    .collect();
    if !changed.is_empty() {
        return Err(forbidden(name, &ForbiddenUpdate::spec_change(&changed)));
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
    // kubectl's three-way merge of labels and annotations: what the last
    // apply set and this one leaves out goes; what others added stays. A
    // replace takes the object's own.
    let (labels, manifest) = match mode {
        Merge::Replace => (new.labels.clone(), new.manifest.clone()),
        Merge::ThreeWay => {
            let original = old_kept.as_ref().and_then(last_applied_object);
            let labels = merge(
                original
                    .as_ref()
                    .map(|o| string_map(o, "/metadata/labels"))
                    .as_ref(),
                &new.labels,
                &old.labels,
            );
            let manifest = new_kept.as_ref().map(|is| {
                let current = old_kept
                    .as_ref()
                    .map(|o| string_map(o, "/metadata/annotations"))
                    .unwrap_or_default();
                let annotations = merge(
                    original
                        .as_ref()
                        .map(|o| string_map(o, "/metadata/annotations"))
                        .as_ref(),
                    &string_map(is, "/metadata/annotations"),
                    &current,
                );
                with_annotations(is, &annotations)
            });
            (labels, manifest)
        }
    };
    let mut plan = Plan {
        labels: (old.labels != labels).then_some(labels),
        add,
        remove,
        owners: (old.owners != new.owners).then(|| new.owners.clone()),
        // A manifest in grace's older format, with none, keeps the one
        // stored.
        manifest: manifest.filter(|m| old.manifest.as_ref() != Some(m)),
    };
    // Only the last apply's annotation would change: nothing changes (so
    // `get -o yaml` applied again is unchanged; kubectl would rewrite the
    // annotation and answer configured).
    let only_annotation = |m: &Manifest| {
        old_kept
            .as_ref()
            .zip(m.to_json().ok())
            .is_some_and(|(was, is)| same_but_last_applied(was, &is))
    };
    let nothing_else = plan.labels.is_none()
        && plan.add.is_empty()
        && plan.remove.is_empty()
        && plan.owners.is_none();
    if nothing_else && plan.manifest.as_ref().is_some_and(only_annotation) {
        plan.manifest = None;
    }
    Ok(plan)
}

/// The API server's answer to an update it refuses.
fn forbidden(name: &str, e: &ForbiddenUpdate) -> ApiError {
    ApiError {
        kind: ErrorKind::Invalid,
        message: format!("Pod \"{name}\" is invalid: {e}"),
    }
}

/// The agent's side of [`Request::Put`](crate::api::Request::Put): creates the object (and starts
/// it if it is bound to `node`) or updates it.
pub fn put<S: Store, C: Clock>(
    rt: &mut Runtime<S, C, ProcessActuator>,
    name: &str,
    object: StoredObject,
    mode: Merge,
    node: &str,
) -> Result<Reply, RuntimeError> {
    let Some(old) = rt
        .object(name)
        .filter(|_| rt.lifecycle(name).is_some_and(|l| l.is_stored()))
    else {
        let mut object = object;
        if object.uid().is_empty() {
            let uid = new_uid();
            object.record.uid =
                Name::try_from(uid.as_str()).map_err(|_| RuntimeError::InvalidName {
                    field: "metadata.uid",
                    reason: grace_std::api_server::NameError::Length {
                        len: uid.len(),
                        max: grace_core::NAME_CAPACITY,
                    },
                })?;
        }
        crate::containers::bind_unbound(&mut object, node);
        let bound_here = object.node.as_deref() == Some(node);
        rt.create(name, object)?;
        let revision = rt.object(name).map_or(0, |o| o.record.resource_version);
        if bound_here {
            crate::containers::start(rt, name);
        }
        return Ok(Reply::Applied { revision });
    };
    let plan = match plan(name, &old, &object, mode) {
        Ok(plan) => plan,
        Err(e) => return Ok(Reply::Error(e)),
    };
    let changed = !plan.is_empty();
    if let Some(labels) = plan.labels {
        rt.update_labels(name, labels)?;
    }
    if let Some(owners) = plan.owners {
        rt.update_owners(name, owners)?;
    }
    // Kept, not acted on: grace pulls no images, so a new image restarts
    // nothing (the kubelet would restart the container).
    if let Some(manifest) = plan.manifest {
        rt.update_manifest(name, Some(manifest))?;
    }
    for f in plan.add {
        let _ = rt.handle(name, Input::FinalizerUpdate(FinalizerChange::Add(f)))?;
    }
    for f in plan.remove {
        let _ = rt.handle(name, Input::FinalizerUpdate(FinalizerChange::Remove(f)))?;
    }
    Ok(Reply::Configured { changed })
}

/// A fresh uid: a random (version 4) UUID, as the Kubernetes API server
/// gives every object it creates (`8a1c…-…`, 36 characters).
pub fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

#[cfg(test)]
mod uid_tests {
    use super::new_uid;

    #[test]
    fn a_new_uid_is_a_random_uuid_and_never_repeats() {
        let a = new_uid();
        let parsed = uuid::Uuid::parse_str(&a).expect("a UUID");
        assert_eq!(parsed.get_version_num(), 4);
        assert_eq!(a.len(), 36);
        let many: std::collections::HashSet<String> = (0..1000).map(|_| new_uid()).collect();
        assert_eq!(many.len(), 1000);
    }
}
