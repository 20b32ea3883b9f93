//! The garbage collector's step: owner references and the `orphan` and
//! `foregroundDeletion` finalizers.
//!
//! A delete with `propagationPolicy: Orphan` or `Foreground` (kubectl's
//! `--cascade orphan|foreground`), or on a type whose default policy is
//! `OrphanDependents`, adds the `orphan` or `foregroundDeletion` finalizer
//! (R37–R39). The garbage collector then acts on the objects whose
//! `metadata.ownerReferences` name the owner's uid (its dependents), as
//! Kubernetes' does (`garbagecollector.go`):
//!
//! - `orphan`: once the owner is marked for deletion, the references to it
//!   are removed from its dependents (`orphanDependents`), then the
//!   finalizer; the dependents live on.
//! - `foregroundDeletion`: once the owner is marked for deletion, its
//!   dependents are deleted; the finalizer is removed, and the owner goes
//!   (R45), when no dependent with `blockOwnerDeletion: true` is left
//!   (`processDeletingDependentsItem`).
//! - A dependent none of whose owners is left (absent, or being deleted in
//!   the foreground) is deleted — a background deletion of its owner ends
//!   so, after the owner is gone (`attemptToDeleteItem`). One with an owner
//!   still there loses only its references to the others: a dependent of
//!   several owners goes with the last one.
//!
//! [`plan`] decides the steps from what is stored, and is run where
//! requests are decided — [`Runtime::collect_garbage`] (the node agent),
//! [`api_server::collect_garbage`] (a shared store) — after a delete and
//! after a removal, and for every object when an agent starts (a
//! finalizer left by an earlier version, or a crash in between). Each step
//! is an ordinary, idempotent write: one that fails is planned again the
//! next time.
//!
//! [`Runtime::collect_garbage`]: crate::runtime::Runtime::collect_garbage
//! [`api_server::collect_garbage`]: crate::api_server::collect_garbage

use std::collections::{BTreeMap, BTreeSet};

use grace_core::{
    DeleteOptions, FINALIZER_FOREGROUND, FINALIZER_ORPHAN, Name, Preconditions, Propagation, Record,
};

use crate::store::OwnerReference;

/// The finalizers the garbage collector removes from `record` now, in the
/// record's order, when nothing depends on it: `orphan` and
/// `foregroundDeletion`, once the record has a deletion timestamp (before
/// that they wait: the garbage collector acts on objects being deleted
/// only).
pub fn finalizers_to_remove<const F: usize>(record: &Record<F>) -> Vec<Name> {
    if record.deletion_timestamp.is_none() {
        return Vec::new();
    }
    record
        .finalizers
        .iter()
        .filter(|f| f.as_str() == FINALIZER_ORPHAN || f.as_str() == FINALIZER_FOREGROUND)
        .cloned()
        .collect()
}

/// What the garbage collector reads of one stored object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GcObject {
    /// The object's name.
    pub name: String,
    /// Its uid, which owner references name.
    pub uid: String,
    /// Whether it is marked for deletion (has a deletion timestamp).
    pub deleting: bool,
    /// Whether it holds the `orphan` finalizer.
    pub orphan: bool,
    /// Whether it holds the `foregroundDeletion` finalizer.
    pub foreground: bool,
    /// Its `metadata.ownerReferences`.
    pub owners: Vec<OwnerReference>,
}

impl GcObject {
    /// The view of an object named `name` with `record` and `owners`.
    pub fn of<const F: usize>(name: &str, record: &Record<F>, owners: &[OwnerReference]) -> Self {
        let has = |f: &str| record.finalizers.iter().any(|x| x.as_str() == f);
        GcObject {
            name: name.to_owned(),
            uid: record.uid.as_str().to_owned(),
            deleting: record.deletion_timestamp.is_some(),
            orphan: has(FINALIZER_ORPHAN),
            foreground: has(FINALIZER_FOREGROUND),
            owners: owners.to_vec(),
        }
    }
}

/// One step of the garbage collector, on the object it names.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GcStep {
    /// Remove the references to these owner uids from the dependent.
    DropOwners {
        /// The dependent.
        name: String,
        /// Its uid (the step is for this object only).
        uid: String,
        /// The owner uids no longer referenced.
        owners: Vec<String>,
    },
    /// Delete the dependent, with the `Foreground` propagation policy when
    /// `foreground` (it has dependents of its own and an owner deleted in
    /// the foreground), else `Background`.
    Delete {
        /// The dependent.
        name: String,
        /// Its uid (a precondition of the delete).
        uid: String,
        /// The propagation policy is `Foreground`.
        foreground: bool,
    },
    /// Remove this GC finalizer from an owner marked for deletion.
    RemoveFinalizer {
        /// The owner.
        name: String,
        /// `orphan` or `foregroundDeletion`.
        finalizer: &'static str,
    },
}

/// The delete a [`GcStep::Delete`] sends: preconditioned on the dependent's
/// uid (a new object of the same name is not touched), with the
/// `Foreground` propagation policy when `foreground`, else `Background`.
pub(crate) fn dependent_delete_options(uid: &str, foreground: bool) -> DeleteOptions {
    let policy = if foreground {
        Propagation::Foreground
    } else {
        Propagation::Background
    };
    DeleteOptions::default()
        .with_propagation_policy(Some(policy))
        .with_preconditions(Preconditions {
            uid: Name::try_from(uid).ok(),
            resource_version: None,
        })
}

/// Whether two objects are in the same namespace (of their store keys).
fn same_namespace(a: &GcObject, b: &GcObject) -> bool {
    crate::store::split_key(&a.name).0 == crate::store::split_key(&b.name).0
}

/// The garbage collector's steps over `objects` (everything stored), in
/// the order they are to be taken: a dependent's references are dropped
/// before its owner's `orphan` finalizer goes.
pub fn plan(objects: &[GcObject]) -> Vec<GcStep> {
    fn dependents<'a>(
        objects: &'a [GcObject],
        owner: &'a GcObject,
    ) -> impl Iterator<Item = &'a GcObject> + 'a {
        objects
            .iter()
            .filter(move |d| d.owners.iter().any(|r| r.uid == owner.uid))
            .filter(move |d| same_namespace(d, owner))
    }
    let by_uid: BTreeMap<&str, &GcObject> = objects.iter().map(|o| (o.uid.as_str(), o)).collect();
    // An owner is in its dependent's namespace, as in Kubernetes: one
    // elsewhere counts as absent.
    let owner_of = |d: &GcObject, r: &OwnerReference| {
        by_uid
            .get(r.uid.as_str())
            .copied()
            .filter(|o| same_namespace(d, o))
    };
    let owning: BTreeSet<&str> = objects
        .iter()
        .flat_map(|o| o.owners.iter().map(|r| r.uid.as_str()))
        .collect();
    let mut steps = Vec::new();
    // Dependents: deleted when no owner holds them, else cleared of the
    // references that no longer do.
    for d in objects.iter().filter(|d| !d.owners.is_empty()) {
        let solid =
            |r: &OwnerReference| owner_of(d, r).is_some_and(|o| !(o.deleting && o.foreground));
        let gone: Vec<String> = d
            .owners
            .iter()
            .filter(|r| !solid(r))
            .map(|r| r.uid.clone())
            .collect();
        if gone.is_empty() {
            continue;
        }
        if gone.len() < d.owners.len() {
            steps.push(GcStep::DropOwners {
                name: d.name.clone(),
                uid: d.uid.clone(),
                owners: gone,
            });
        } else if !d.deleting {
            let waited_for = d
                .owners
                .iter()
                .any(|r| owner_of(d, r).is_some_and(|o| o.foreground));
            steps.push(GcStep::Delete {
                name: d.name.clone(),
                uid: d.uid.clone(),
                foreground: waited_for && owning.contains(d.uid.as_str()),
            });
        }
    }
    // Owners marked for deletion: their finalizers.
    for o in objects.iter().filter(|o| o.deleting) {
        if o.orphan {
            for d in dependents(objects, o) {
                steps.push(GcStep::DropOwners {
                    name: d.name.clone(),
                    uid: d.uid.clone(),
                    owners: vec![o.uid.clone()],
                });
            }
            steps.push(GcStep::RemoveFinalizer {
                name: o.name.clone(),
                finalizer: FINALIZER_ORPHAN,
            });
        } else if o.foreground {
            let blocked = dependents(objects, o)
                .any(|d| d.owners.iter().any(|r| r.uid == o.uid && r.blocks()));
            if !blocked {
                steps.push(GcStep::RemoveFinalizer {
                    name: o.name.clone(),
                    finalizer: FINALIZER_FOREGROUND,
                });
            }
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::{GcObject, GcStep, plan};
    use crate::store::OwnerReference;

    fn object(name: &str, owners: &[(&str, bool)]) -> GcObject {
        GcObject {
            name: name.to_owned(),
            uid: format!("uid-{name}"),
            deleting: false,
            orphan: false,
            foreground: false,
            owners: owners
                .iter()
                .map(|(o, block)| {
                    OwnerReference::new("v1", "Pod", *o, format!("uid-{o}"))
                        .with_block_owner_deletion(Some(*block))
                })
                .collect(),
        }
    }

    fn deleting(mut o: GcObject, orphan: bool, foreground: bool) -> GcObject {
        o.deleting = true;
        o.orphan = orphan;
        o.foreground = foreground;
        o
    }

    fn delete(name: &str, foreground: bool) -> GcStep {
        GcStep::Delete {
            name: name.to_owned(),
            uid: format!("uid-{name}"),
            foreground,
        }
    }

    fn drop_owner(name: &str, owner: &str) -> GcStep {
        GcStep::DropOwners {
            name: name.to_owned(),
            uid: format!("uid-{name}"),
            owners: vec![format!("uid-{owner}")],
        }
    }

    fn remove(name: &str, finalizer: &'static str) -> GcStep {
        GcStep::RemoveFinalizer {
            name: name.to_owned(),
            finalizer,
        }
    }

    #[test]
    fn the_garbage_collector_s_steps_as_kubernetes_takes_them() {
        let cases: Vec<(&str, Vec<GcObject>, Vec<GcStep>)> = vec![
            (
                "an owner there holds its dependent",
                vec![object("o", &[]), object("d", &[("o", true)])],
                vec![],
            ),
            (
                "background: the owner gone, the dependent is deleted",
                vec![object("d", &[("o", false)])],
                vec![delete("d", false)],
            ),
            (
                "an owner in another namespace counts as absent",
                vec![
                    object("team-a/o", &[]),
                    object("team-b/d", &[("team-a/o", false)]),
                    object("team-a/d", &[("team-a/o", false)]),
                ],
                vec![delete("team-b/d", false)],
            ),
            (
                "a dependent already being deleted is left to finish",
                vec![deleting(object("d", &[("o", false)]), false, false)],
                vec![],
            ),
            (
                "two owners, one gone: only the reference goes",
                vec![object("b", &[]), object("d", &[("a", false), ("b", false)])],
                vec![drop_owner("d", "a")],
            ),
            (
                "foreground: dependents deleted, the owner held by the blocking one",
                vec![
                    deleting(object("o", &[]), false, true),
                    object("d1", &[("o", true)]),
                    object("d2", &[("o", false)]),
                ],
                vec![delete("d1", false), delete("d2", false)],
            ),
            (
                "foreground: no blocking dependent left, the finalizer goes (R45)",
                vec![
                    deleting(object("o", &[]), false, true),
                    deleting(object("d2", &[("o", false)]), false, false),
                ],
                vec![remove("o", "foregroundDeletion")],
            ),
            (
                "foreground: a dependent with dependents is deleted in the foreground",
                vec![
                    deleting(object("o", &[]), false, true),
                    object("d", &[("o", true)]),
                    object("e", &[("d", true)]),
                ],
                vec![delete("d", true)],
            ),
            (
                "orphan: references dropped, then the finalizer",
                vec![
                    deleting(object("o", &[]), true, false),
                    object("d", &[("o", true)]),
                ],
                vec![drop_owner("d", "o"), remove("o", "orphan")],
            ),
            (
                "no dependents: the GC finalizers go at once (R37, R38)",
                vec![
                    deleting(object("a", &[]), true, false),
                    deleting(object("b", &[]), false, true),
                ],
                vec![remove("a", "orphan"), remove("b", "foregroundDeletion")],
            ),
            (
                "not being deleted: a GC finalizer waits",
                vec![GcObject {
                    orphan: true,
                    ..object("a", &[])
                }],
                vec![],
            ),
        ];
        for (case, objects, want) in cases {
            assert_eq!(plan(&objects), want, "{case}");
        }
    }
}
