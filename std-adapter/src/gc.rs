//! The garbage collector's step, for objects that have no dependents.
//!
//! A delete with `propagationPolicy: Orphan` or `Foreground` (kubectl's
//! `--cascade orphan|foreground`), or on a type whose default policy is
//! `OrphanDependents`, adds the `orphan` or `foregroundDeletion` finalizer
//! (R37–R39). In Kubernetes the garbage collector then owns it: once the
//! object is marked for deletion it orphans the dependents
//! (`orphanDependents`) or waits for the blocking ones to go
//! (`processDeletingDependentsItem`), and removes the finalizer with an
//! ordinary update (`removeFinalizer`), which may end the deletion (R45).
//! grace keeps no owner references: there is nothing to orphan and nothing
//! to wait for, so the step is removing the finalizer at once. It is run
//! where requests are decided — [`Runtime::collect_garbage`] (the node
//! agent), [`api_server::collect_garbage`] (a shared store) — right after
//! the delete that added the finalizer, and for every object when an agent
//! starts (a finalizer left by an earlier version, or a crash in between).
//!
//! [`Runtime::collect_garbage`]: crate::runtime::Runtime::collect_garbage
//! [`api_server::collect_garbage`]: crate::api_server::collect_garbage

use grace_core::{FINALIZER_FOREGROUND, FINALIZER_ORPHAN, Name, Record};

/// The finalizers the garbage collector removes from `record` now, in the
/// record's order: `orphan` and `foregroundDeletion`, once the record has
/// a deletion timestamp (before that they wait: the garbage collector acts
/// on objects being deleted only).
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
