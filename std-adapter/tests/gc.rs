//! The garbage collector's step (R36–R45) on objects without dependents:
//! the `orphan` and `foregroundDeletion` finalizers a delete adds are
//! removed once the object is marked for deletion, and the deletion then
//! finishes on its own — in the runtime (the node agent's API server) and
//! on a shared store (`api_server`). Dependents (owner references): the
//! cases of `gc::plan`, and std-adapter/cli/tests/owners.rs with real
//! processes.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

mod common;

use std::sync::Arc;

use common::actuators::Recorder;
use common::pod;
use grace_core::{
    DeleteOptions, Duration, FINALIZER_FOREGROUND, FINALIZER_ORPHAN, GcPolicy, Input, Kind, Name,
    Propagation, Strategy,
};
use grace_std::api_server;
use grace_std::clock::{Clock, ManualClock};
use grace_std::runtime::{Recovery, Runtime};
use grace_std::store::{MemoryStore, Store, StoredObject};

type Rt = Runtime<MemoryStore, Arc<ManualClock>, Recorder>;

fn runtime() -> (Rt, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::at_unix_millis(1_000_000));
    let rt = Runtime::open(
        MemoryStore::new(),
        clock.clone(),
        Recorder::default(),
        Recovery::default(),
    )
    .expect("runtime opens");
    (rt, clock)
}

fn with(propagation: Propagation, grace: i64) -> DeleteOptions {
    DeleteOptions::with_grace(grace).with_propagation_policy(Some(propagation))
}

fn finalizers(object: &StoredObject) -> Vec<String> {
    object
        .record
        .finalizers
        .iter()
        .map(|f| f.as_str().to_owned())
        .collect()
}

/// A non-graceful object (a ConfigMap, say) with `policy` as its type's
/// default.
fn generic(uid: &str, policy: GcPolicy) -> StoredObject {
    let mut object =
        StoredObject::unscheduled(grace_core::Record::new(Name::try_from(uid).expect("short")));
    object.strategy = Strategy {
        kind: Kind::Generic,
        default_gc_policy: policy,
        gc_enabled: true,
    };
    object
}

/// Runs a pod's kill to its end: the agent sees the deletion, the
/// workload exits on the stop signal.
fn finish_kill(rt: &mut Rt, name: &str) {
    let _ = rt.handle(name, Input::AgentSync).expect("known");
    let _ = rt.handle(name, Input::container_exited(0)).expect("known");
}

#[test]
fn r37_orphan_finalizer_is_removed_by_the_gc_step_and_the_deletion_finishes() {
    let (mut rt, _) = runtime();
    rt.create("web", pod("u1", false)).expect("created");
    let answer = rt
        .handle("web", Input::Delete(with(Propagation::Orphan, 10)))
        .expect("accepted")
        .delete()
        .expect("a delete's answer");
    assert_eq!(
        answer
            .record
            .finalizers
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>(),
        [FINALIZER_ORPHAN],
        "the delete adds the finalizer (R37) and its answer shows it"
    );
    let removed = rt.collect_garbage("web").expect("collected");
    assert_eq!(removed, [Name::try_from(FINALIZER_ORPHAN).expect("short")]);
    let stored = rt.store().get("web").expect("read").expect("still stored");
    assert!(
        finalizers(&stored.0).is_empty(),
        "removed from the store too"
    );
    assert!(stored.0.record.deletion_timestamp.is_some());

    finish_kill(&mut rt, "web");
    assert!(
        rt.store().get("web").expect("read").is_none(),
        "nothing holds the record once the workload stopped"
    );
    assert_eq!(rt.names().count(), 0);
}

#[test]
fn r38_foreground_finalizer_is_removed_by_the_gc_step_and_the_deletion_finishes() {
    let (mut rt, _) = runtime();
    rt.create("web", pod("u1", false)).expect("created");
    let _ = rt
        .handle("web", Input::Delete(with(Propagation::Foreground, 10)))
        .expect("accepted");
    let stored = rt.object("web").expect("kept");
    assert_eq!(finalizers(&stored), [FINALIZER_FOREGROUND]);
    let removed = rt.collect_garbage("web").expect("collected");
    assert_eq!(
        removed,
        [Name::try_from(FINALIZER_FOREGROUND).expect("short")]
    );
    finish_kill(&mut rt, "web");
    assert!(rt.store().get("web").expect("read").is_none());
}

#[test]
fn r38_gc_after_the_workload_stopped_removes_the_object_at_once() {
    // The kill ends first, the finalizer holds the record; the GC step's
    // update is then the one that ends the deletion.
    let (mut rt, clock) = runtime();
    rt.create("web", pod("u1", false)).expect("created");
    let _ = rt
        .handle("web", Input::Delete(with(Propagation::Foreground, 1)))
        .expect("accepted");
    finish_kill(&mut rt, "web");
    clock.advance(Duration::from_millis(5_000));
    rt.handle_timeouts().expect("ok");
    assert!(
        rt.store().get("web").expect("read").is_some(),
        "held by foregroundDeletion"
    );
    let _ = rt.collect_garbage("web").expect("collected");
    assert!(rt.store().get("web").expect("read").is_none());
}

#[test]
fn r37_default_gc_policy_orphan_on_a_non_graceful_type_finishes_through_r45() {
    let (mut rt, _) = runtime();
    rt.create("cm", generic("u2", GcPolicy::OrphanDependents))
        .expect("created");
    // No propagation asked: the type's default adds `orphan`, which keeps
    // the object (R30) instead of removing it at once.
    let _ = rt
        .handle("cm", Input::Delete(DeleteOptions::default()))
        .expect("accepted");
    let stored = rt.object("cm").expect("kept by the finalizer");
    assert_eq!(finalizers(&stored), [FINALIZER_ORPHAN]);
    let _ = rt.collect_garbage("cm").expect("collected");
    // The last finalizer went with no grace left: removed (R45).
    assert!(rt.store().get("cm").expect("read").is_none());
    assert_eq!(rt.names().count(), 0);
}

#[test]
fn r39_gc_removes_only_its_own_finalizers_and_others_still_hold_the_object() {
    let (mut rt, _) = runtime();
    let mut object = generic("u3", GcPolicy::DeleteDependents);
    object
        .record
        .finalizers
        .push(Name::try_from("example.com/keep").expect("short"))
        .expect("room");
    rt.create("cm", object).expect("created");
    let _ = rt
        .handle("cm", Input::Delete(with(Propagation::Orphan, 0)))
        .expect("accepted");
    assert_eq!(
        finalizers(&rt.object("cm").expect("kept")),
        ["example.com/keep", FINALIZER_ORPHAN]
    );
    let _ = rt.collect_garbage("cm").expect("collected");
    assert_eq!(
        finalizers(&rt.object("cm").expect("still held")),
        ["example.com/keep"]
    );
    let _ = rt
        .handle(
            "cm",
            Input::FinalizerUpdate(grace_core::FinalizerChange::Remove(
                Name::try_from("example.com/keep").expect("short"),
            )),
        )
        .expect("updated");
    assert!(rt.store().get("cm").expect("read").is_none());
}

#[test]
fn r36_gc_waits_for_the_deletion_and_leaves_a_live_object_alone() {
    let (mut rt, _) = runtime();
    let mut object = pod("u4", false);
    object
        .record
        .finalizers
        .push(Name::try_from(FINALIZER_ORPHAN).expect("short"))
        .expect("room");
    rt.create("web", object).expect("created");
    let before = rt.store().get("web").expect("read").expect("stored").1;
    assert!(rt.collect_garbage("web").expect("nothing").is_empty());
    assert!(rt.collect_garbage("absent").expect("nothing").is_empty());
    let after = rt.store().get("web").expect("read").expect("stored").1;
    assert_eq!(before, after, "nothing written");
}

#[test]
fn r42_a_dry_run_cascade_leaves_nothing_for_the_gc() {
    let (mut rt, _) = runtime();
    rt.create("web", pod("u5", false)).expect("created");
    let options = with(Propagation::Orphan, 10).with_dry_run(true);
    let _ = rt
        .handle("web", Input::Delete(options.clone()))
        .expect("accepted");
    assert!(rt.collect_garbage("web").expect("nothing").is_empty());
    let stored = rt.store().get("web").expect("read").expect("stored").0;
    assert!(stored.record.deletion_timestamp.is_none());
}

#[test]
fn r37_r38_api_server_gc_step_on_a_shared_store() {
    let store = MemoryStore::new();
    let clock = ManualClock::at_unix_millis(1_000_000);
    api_server::create(&store, "cm", generic("u6", GcPolicy::DeleteDependents)).expect("created");
    let answer = api_server::delete(&store, clock.now(), "cm", &with(Propagation::Orphan, 0))
        .expect("accepted");
    assert_eq!(
        answer
            .record
            .finalizers
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>(),
        [FINALIZER_ORPHAN]
    );
    assert!(store.get("cm").expect("read").is_some(), "held");
    let removed = api_server::collect_garbage(&store, clock.now(), "cm").expect("collected");
    assert_eq!(removed, [Name::try_from(FINALIZER_ORPHAN).expect("short")]);
    assert!(store.get("cm").expect("read").is_none(), "R45: removed");

    // A pod: the finalizer goes, the record waits for its agent (R80).
    let mut p = pod("u7", false);
    p.node = Some("node-a".into());
    api_server::create(&store, "web", p).expect("created");
    let _ = api_server::delete(
        &store,
        clock.now(),
        "web",
        &with(Propagation::Foreground, 30),
    )
    .expect("accepted");
    let removed = api_server::collect_garbage(&store, clock.now(), "web").expect("collected");
    assert_eq!(
        removed,
        [Name::try_from(FINALIZER_FOREGROUND).expect("short")]
    );
    let (object, _) = store.get("web").expect("read").expect("kept for its agent");
    assert!(finalizers(&object).is_empty());
    assert!(object.record.deletion_timestamp.is_some());
    assert!(
        api_server::collect_garbage(&store, clock.now(), "web")
            .expect("nothing")
            .is_empty()
    );
}
