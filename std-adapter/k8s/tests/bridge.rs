//! The conversions, both ways: round trips over generated records and
//! options, Kubernetes' JSON as a client sends it, and typed errors.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use grace_core::{
    DeleteOptions, DeleteOutcome, MAX_TIMESTAMP_SECONDS, Name, PodPhase, Preconditions,
    Propagation, Record, Strategy as DeleteStrategy, Timestamp, WallTime, decide_delete,
};
use grace_k8s::{
    BridgeError, LATEST_TIME_SECONDS, container_specs, delete_options_from_wire,
    delete_options_to_wire, meta_from_record, phase_patch, record_from_meta, record_from_pod,
};
use k8s_openapi::api::core::v1::{Container, Lifecycle, LifecycleHandler, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use proptest::prelude::*;

const F: usize = 4;

fn name() -> impl Strategy<Value = Name> {
    "[a-z0-9][a-z0-9.-]{0,30}".prop_map(|s| Name::try_from(s.as_str()).expect("short"))
}

fn phase() -> impl Strategy<Value = PodPhase> {
    prop_oneof![
        Just(PodPhase::Pending),
        Just(PodPhase::Running),
        Just(PodPhase::Succeeded),
        Just(PodPhase::Failed),
        Just(PodPhase::Unknown),
        Just(PodPhase::Unset),
    ]
}

prop_compose! {
    fn record()(
        uid in name(),
        resource_version in any::<u64>(),
        generation in 0i64..1_000,
        // The whole range, and often its last day (past Rust's `Time`).
        ts in proptest::option::of(prop_oneof![
            0..=MAX_TIMESTAMP_SECONDS,
            LATEST_TIME_SECONDS - 2..=MAX_TIMESTAMP_SECONDS,
        ]),
        dgps in proptest::option::of(-5i64..100_000),
        finalizers in proptest::collection::btree_set("[a-z]{1,8}(/[a-z]{1,8})?", 0..=F),
        scheduled in any::<bool>(),
        phase in phase(),
        tgps in proptest::option::of(-5i64..100_000),
    ) -> Record<F> {
        let mut r: Record<F> = Record::new(uid);
        r.resource_version = resource_version;
        r.generation = generation;
        r.deletion_timestamp = ts.map(Timestamp::from_unix_seconds);
        r.deletion_grace_period_seconds = dgps;
        for f in finalizers {
            r.finalizers.push(Name::try_from(f.as_str()).expect("short")).expect("room");
        }
        r.scheduled = scheduled;
        r.phase = phase;
        r.termination_grace_period_seconds = tgps;
        r
    }
}

/// The Pod a cluster would hold for `record`.
fn pod_of(record: &Record<F>) -> Pod {
    Pod {
        metadata: meta_from_record(record),
        spec: Some(PodSpec {
            node_name: record.scheduled.then(|| "node-a".to_owned()),
            termination_grace_period_seconds: record.termination_grace_period_seconds,
            containers: vec![Container {
                name: "app".into(),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: phase_patch(record),
    }
}

fn propagation() -> impl Strategy<Value = Option<Propagation>> {
    proptest::option::of(prop_oneof![
        Just(Propagation::Background),
        Just(Propagation::Foreground),
        Just(Propagation::Orphan),
        Just(Propagation::Unrecognized),
    ])
}

prop_compose! {
    fn options()(
        grace in proptest::option::of(any::<i64>()),
        uid in proptest::option::of(name()),
        rv in proptest::option::of(any::<u64>()),
        propagation_policy in propagation(),
        orphan_dependents in proptest::option::of(any::<bool>()),
        dry_run in any::<bool>(),
    ) -> DeleteOptions {
        DeleteOptions::default().with_grace_period(grace).with_preconditions(Preconditions { uid, resource_version: rv }).with_propagation_policy(propagation_policy).with_orphan_dependents(orphan_dependents).with_dry_run(dry_run)
    }
}

/// A deletion timestamp as a Kubernetes `Time` holds it: the same, or
/// the latest second it holds.
fn as_written(ts: Option<Timestamp>) -> Option<Timestamp> {
    ts.map(|t| Timestamp::from_unix_seconds(t.as_unix_seconds().min(LATEST_TIME_SECONDS)))
}

/// D2: a deletion timestamp saturated at 9999-12-31T23:59:59Z is still
/// written (as the latest second a `Time` holds): left out, the object
/// would read as one nobody is deleting.
#[test]
fn d2_a_saturated_deletion_timestamp_is_written_not_left_out() {
    let mut r: Record<F> = Record::new(Name::try_from("u").expect("short"));
    r.termination_grace_period_seconds = Some(i64::MAX);
    let d = decide_delete(
        &r,
        &DeleteStrategy::POD,
        &DeleteOptions::default(),
        WallTime::from_unix_millis(1_000_000),
    )
    .expect("decided");
    assert_eq!(
        d.record.deletion_timestamp,
        Some(Timestamp::from_unix_seconds(MAX_TIMESTAMP_SECONDS)),
        "saturated (D2)"
    );
    let meta = meta_from_record(&d.record);
    assert_eq!(
        meta.deletion_grace_period_seconds,
        Some(i64::MAX),
        "as requested (D2)"
    );
    assert_eq!(
        serde_json::to_value(&meta).expect("json")["deletionTimestamp"],
        "9999-12-30T22:00:00Z"
    );
    let back: Record<F> = record_from_meta(&meta).expect("converts");
    assert_eq!(
        back.deletion_timestamp,
        Some(Timestamp::from_unix_seconds(LATEST_TIME_SECONDS))
    );
}

proptest! {
    #[test]
    fn a_pod_record_survives_kubernetes_metadata_and_back(r in record()) {
        let back: Record<F> = record_from_pod(&pod_of(&r)).expect("converts");
        let mut expected = r.clone();
        expected.deletion_timestamp = as_written(r.deletion_timestamp);
        prop_assert_eq!(back, expected);
    }

    #[test]
    fn any_objects_metadata_survives_too(r in record()) {
        let back: Record<F> = record_from_meta(&meta_from_record(&r)).expect("converts");
        prop_assert_eq!(back.uid, r.uid);
        prop_assert_eq!(back.resource_version, r.resource_version);
        prop_assert_eq!(back.deletion_timestamp, as_written(r.deletion_timestamp));
        prop_assert_eq!(back.deletion_grace_period_seconds, r.deletion_grace_period_seconds);
        prop_assert_eq!(back.finalizers, r.finalizers);
    }

    #[test]
    fn delete_options_survive_the_wire_and_its_json(o in options()) {
        let wire = delete_options_to_wire(&o);
        prop_assert_eq!(delete_options_from_wire(&wire).expect("converts"), o.clone());
        // And as JSON, the form a DELETE body has.
        let json = serde_json::to_string(&wire).expect("serializes");
        let parsed: meta::DeleteOptions = serde_json::from_str(&json).expect("parses");
        prop_assert_eq!(delete_options_from_wire(&parsed).expect("converts"), o);
    }
}

#[test]
fn r1_kubectl_delete_sends_nothing_and_the_spec_grace_applies() {
    // `kubectl delete pod web` sends `{"propagationPolicy":"Background"}`.
    let body: meta::DeleteOptions = serde_json::from_str(
        r#"{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background"}"#,
    )
    .expect("a DELETE body");
    let options = delete_options_from_wire(&body).expect("converts");
    assert_eq!(options.grace_period_seconds, None);
    let mut r: Record<F> = Record::new(Name::try_from("u").expect("short"));
    r.termination_grace_period_seconds = Some(45);
    let d = decide_delete(
        &r,
        &DeleteStrategy::POD,
        &options,
        WallTime::from_unix_millis(1_000_000),
    )
    .expect("decided");
    assert_eq!(d.outcome, DeleteOutcome::Graceful);
    let meta = meta_from_record(&d.record);
    assert_eq!(meta.deletion_grace_period_seconds, Some(45), "R18");
    let ts = meta.deletion_timestamp.clone().expect("set");
    assert_eq!(ts.0.as_second(), 1_000 + 45, "R24");
    assert_eq!(
        serde_json::to_value(&meta).expect("json")["deletionTimestamp"],
        "1970-01-01T00:17:25Z",
        "RFC 3339, whole seconds (R48)"
    );
}

#[test]
fn r19_an_unscheduled_pod_from_kubernetes_is_deleted_at_once() {
    let mut r: Record<F> = Record::new(Name::try_from("u").expect("short"));
    r.scheduled = false;
    let mut pod = pod_of(&r);
    pod.spec.as_mut().expect("spec").node_name = Some(String::new());
    let record: Record<F> = record_from_pod(&pod).expect("converts");
    assert!(!record.scheduled, "an empty nodeName is unscheduled");
    let d = decide_delete(
        &record,
        &DeleteStrategy::POD,
        &DeleteOptions::default(),
        WallTime::from_unix_millis(0),
    )
    .expect("decided");
    assert_eq!(d.outcome, DeleteOutcome::Deleted);
}

#[test]
fn containers_list_sidecars_first_with_their_hooks() {
    let hook = Some(Lifecycle {
        pre_stop: Some(LifecycleHandler::default()),
        ..Lifecycle::default()
    });
    let pod = Pod {
        spec: Some(PodSpec {
            init_containers: Some(vec![
                Container {
                    name: "setup".into(),
                    ..Container::default()
                },
                Container {
                    name: "log".into(),
                    restart_policy: Some("Always".into()),
                    lifecycle: hook.clone(),
                    ..Container::default()
                },
            ]),
            containers: vec![Container {
                name: "app".into(),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    };
    let specs = container_specs(&pod);
    assert_eq!(
        specs.len(),
        2,
        "the init container that completes is not running"
    );
    assert!(specs[0].sidecar && specs[0].pre_stop);
    assert!(!specs[1].sidecar && !specs[1].pre_stop);
}

#[test]
fn what_grace_cannot_hold_is_a_typed_error_naming_the_field() {
    let missing = record_from_meta::<F>(&meta::ObjectMeta::default());
    assert_eq!(
        missing,
        Err(BridgeError::Missing {
            field: "metadata.uid"
        })
    );
    let bad_rv = record_from_meta::<F>(&meta::ObjectMeta {
        uid: Some("u".into()),
        resource_version: Some("abc".into()),
        ..meta::ObjectMeta::default()
    });
    assert!(matches!(
        bad_rv,
        Err(BridgeError::ResourceVersion {
            field: "metadata.resourceVersion",
            ..
        })
    ));
    let full = record_from_meta::<1>(&meta::ObjectMeta {
        uid: Some("u".into()),
        finalizers: Some(vec!["a".into(), "b".into()]),
        ..meta::ObjectMeta::default()
    });
    assert_eq!(full, Err(BridgeError::TooManyFinalizers { capacity: 1 }));
    let dry = delete_options_from_wire(&meta::DeleteOptions {
        dry_run: Some(vec!["Some".into()]),
        ..meta::DeleteOptions::default()
    });
    assert!(matches!(
        dry,
        Err(BridgeError::Unsupported {
            field: "dryRun",
            ..
        })
    ));
    let e = delete_options_from_wire(&meta::DeleteOptions {
        preconditions: Some(meta::Preconditions {
            resource_version: Some("rv-7".into()),
            uid: None,
        }),
        ..meta::DeleteOptions::default()
    })
    .expect_err("not a number");
    assert_eq!(
        e.to_string(),
        "preconditions.resourceVersion: \"rv-7\" is not a resource version grace can hold (a whole number)"
    );
}
