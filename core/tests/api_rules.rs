//! API-level rules R1–R48 of core/RULES.md, plus the API side of D2
//! (R89/R90, no overflow) and D4 (force delete is visible).
//!
//! R23 (`CheckGracefulDelete` with nil options) has no test: it is
//! unreachable in Kubernetes (R2) and cannot be expressed here, where
//! options are never absent (D3).
//!
//! Each test is named after the rule it checks. Concrete cases follow the
//! Kubernetes tests cited in core/RULES.md (`TestBeforeDelete`,
//! `TestCheckGracefulDelete`, `TestMarkAsDeleting`,
//! `TestDeletionFinalizersForGarbageCollection`, the `resttest` cases).
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use grace_core::Input;
use grace_core::{
    Action, Conflict, ContainerSpec, DeleteDecision, DeleteError, DeleteOptions, DeleteOutcome,
    FINALIZER_FOREGROUND, FINALIZER_ORPHAN, FinalizerChange, Finalizers, GcPolicy, InvalidOptions,
    Lifecycle, MAX_TIMESTAMP_SECONDS, Name, Now, Phase, PodPhase, Preconditions, Propagation,
    Record, Strategy, Timestamp, UpdateError, UpdateOutcome, WallTime, decide_delete,
    decide_finalizer_update, gc_finalizers, pod_grace_period,
};

// ---- Helpers ---------------------------------------------------------------

/// Finalizer capacity used throughout.
const F: usize = 4;

/// An arbitrary "now" in whole unix seconds (2023-11-14T22:13:20Z).
const T: i64 = 1_700_000_000;

const UID: &str = "6a1c3e2f-0000-4000-8000-000000000001";

fn name(s: &str) -> Name {
    Name::try_from_str(s).unwrap()
}

/// A live, scheduled, running pod: uid, generation 1, resource version 1,
/// spec grace 30, no finalizers.
fn pod() -> Record<F> {
    Record::new(name(UID))
}

/// A pod whose deletion was accepted: timestamp `ts`, grace `dgps`,
/// generation already bumped to 2.
fn terminating(ts: i64, dgps: Option<i64>) -> Record<F> {
    let mut r = pod();
    r.generation = 2;
    r.deletion_timestamp = Some(Timestamp::from_unix_seconds(ts));
    r.deletion_grace_period_seconds = dgps;
    r
}

fn with_finalizers(mut r: Record<F>, names: &[&str]) -> Record<F> {
    r.finalizers = fins(names);
    r
}

fn fins(names: &[&str]) -> Finalizers<F> {
    Finalizers::try_from(names).unwrap()
}

fn list(f: &Finalizers<F>) -> Vec<&str> {
    f.iter().map(|n| n.as_str()).collect()
}

/// The API server's clock at whole second `s`.
fn wall(s: i64) -> WallTime {
    WallTime::from_unix_millis(s * 1000)
}

fn wall_ms(ms: i64) -> WallTime {
    WallTime::from_unix_millis(ms)
}

fn now(s: i64) -> Now {
    Now::from_unix_millis(s * 1000)
}

fn ts(s: i64) -> Option<Timestamp> {
    Some(Timestamp::from_unix_seconds(s))
}

fn grace(g: i64) -> DeleteOptions {
    DeleteOptions::with_grace(g)
}

fn policy(p: Propagation) -> DeleteOptions {
    DeleteOptions::default().with_propagation_policy(Some(p))
}

fn decide(
    stored: &Record<F>,
    strategy: &Strategy,
    options: &DeleteOptions,
    at: WallTime,
) -> DeleteDecision<F> {
    decide_delete(stored, strategy, options, at).unwrap()
}

fn decide_pod(stored: &Record<F>, options: &DeleteOptions, at: WallTime) -> DeleteDecision<F> {
    decide(stored, &Strategy::POD, options, at)
}

/// A non-graceful type (ConfigMap-like), generation 1.
fn generic() -> Record<F> {
    let mut r = pod();
    r.scheduled = false;
    r.termination_grace_period_seconds = None;
    r
}

/// One running application container without pre-stop.
const APP: ContainerSpec = ContainerSpec {
    pre_stop: false,
    sidecar: false,
    stopped: false,
};

fn lifecycle(strategy: Strategy, record: Record<F>) -> Lifecycle<F, 2> {
    Lifecycle::new(strategy, record, &[APP]).unwrap()
}

fn drain(l: &mut Lifecycle<F, 2>) -> Vec<Action> {
    std::iter::from_fn(|| l.poll_action()).collect()
}

/// Asserts the decision keeps the record and writes it.
fn assert_kept_written(d: &DeleteDecision<F>) {
    assert_eq!(d.outcome, DeleteOutcome::Graceful);
    assert!(d.write, "expected a write");
    assert!(!d.remove, "expected the record to be kept");
}

/// Asserts nothing at all is done and the stored object is returned.
fn assert_pending(d: &DeleteDecision<F>, stored: &Record<F>) {
    assert_eq!(d.outcome, DeleteOutcome::Pending);
    assert!(!d.write, "pending must not write");
    assert!(!d.remove, "pending must not remove");
    assert_eq!(&d.record, stored);
}

/// Asserts removal without a preceding write, returning the stored object.
fn assert_removed_unwritten(d: &DeleteDecision<F>, stored: &Record<F>) {
    assert_eq!(d.outcome, DeleteOutcome::Deleted);
    assert!(!d.write, "expected no write before removal");
    assert!(d.remove);
    assert_eq!(&d.record, stored);
}

/// Asserts a write followed by removal.
fn assert_written_then_removed(d: &DeleteDecision<F>) {
    assert_eq!(d.outcome, DeleteOutcome::Deleted);
    assert!(d.write, "expected the state to be written before removal");
    assert!(d.remove);
}

// ---- 2.1 Request and options -----------------------------------------------

#[test]
fn r1_no_body_means_the_type_default_grace() {
    let d = decide_pod(&pod(), &DeleteOptions::default(), wall(T));
    assert_kept_written(&d);
    assert_eq!(d.grace_period_seconds, Some(30));
    assert_eq!(d.record.deletion_timestamp, ts(T + 30));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(30));

    // The default is the pod's own spec value, not a constant.
    let mut long = pod();
    long.termination_grace_period_seconds = Some(45);
    let d = decide_pod(&long, &DeleteOptions::default(), wall(T));
    assert_eq!(d.record.deletion_timestamp, ts(T + 45));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(45));
}

#[test]
fn r2_caller_wanting_now_asks_grace_zero() {
    // D3: there is no "nil options" entry point; grace 0 is "now".
    let d = decide_pod(&pod(), &grace(0), wall(T));
    assert_written_then_removed(&d);
    assert_eq!(d.grace_period_seconds, Some(0));
    assert_eq!(d.record.deletion_timestamp, ts(T));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(0));
    assert_eq!(d.record.generation, 2);
}

#[test]
fn r3_delete_or_update_of_a_removed_record_is_not_found() {
    let mut l = lifecycle(Strategy::POD, pod());
    let r = l
        .handle(now(T), Input::Delete(grace(0)))
        .delete()
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome, DeleteOutcome::Deleted);
    assert_eq!(l.phase(), Phase::Deleted);
    assert_eq!(
        l.handle(now(T + 1), Input::Delete(DeleteOptions::default()))
            .delete()
            .unwrap(),
        Err(DeleteError::NotFound)
    );
    assert_eq!(
        l.handle(
            now(T + 1),
            Input::FinalizerUpdate(FinalizerChange::Remove(name("x")))
        )
        .update()
        .unwrap(),
        Err(UpdateError::NotFound)
    );
}

// ---- 2.2 Order of checks ---------------------------------------------------

#[test]
fn r4_invalid_beats_conflict_beats_pending() {
    let stored = terminating(T + 30, Some(30));
    let wrong_uid = Preconditions {
        uid: Some(name("someone-else")),
        resource_version: None,
    };
    let invalid_and_conflicting = DeleteOptions::default()
        .with_preconditions(wrong_uid.clone())
        .with_orphan_dependents(Some(true))
        .with_propagation_policy(Some(Propagation::Orphan));
    assert_eq!(
        decide_delete(
            &stored,
            &Strategy::POD,
            &invalid_and_conflicting,
            wall(T + 1)
        ),
        Err(DeleteError::Invalid(
            InvalidOptions::OrphanDependentsWithPropagationPolicy
        ))
    );
    let conflicting = DeleteOptions::default().with_preconditions(wrong_uid);
    assert_eq!(
        decide_delete(&stored, &Strategy::POD, &conflicting, wall(T + 1)),
        Err(DeleteError::Conflict(Conflict::Uid))
    );
    // Only without both does the "already pending" branch answer.
    let d = decide_pod(&stored, &DeleteOptions::default(), wall(T + 1));
    assert_pending(&d, &stored);
}

#[test]
fn r5_orphan_dependents_with_propagation_policy_is_invalid() {
    for orphan in [true, false] {
        for p in [
            Propagation::Orphan,
            Propagation::Background,
            Propagation::Foreground,
        ] {
            let options = DeleteOptions::default()
                .with_orphan_dependents(Some(orphan))
                .with_propagation_policy(Some(p));
            assert_eq!(
                options.validate(),
                Err(InvalidOptions::OrphanDependentsWithPropagationPolicy)
            );
            assert_eq!(
                decide_delete(&pod(), &Strategy::POD, &options, wall(T)),
                Err(DeleteError::Invalid(
                    InvalidOptions::OrphanDependentsWithPropagationPolicy
                ))
            );
        }
    }
    // Each alone is fine.
    let alone = DeleteOptions::default().with_orphan_dependents(Some(false));
    assert_eq!(alone.validate(), Ok(()));
    // An invalid request changes nothing in the lifecycle.
    let mut l = lifecycle(Strategy::POD, pod());
    let bad = DeleteOptions::default()
        .with_orphan_dependents(Some(true))
        .with_propagation_policy(Some(Propagation::Background));
    assert!(
        l.handle(now(T), Input::Delete(bad.clone()))
            .delete()
            .unwrap()
            .is_err()
    );
    assert_eq!(l.record(), &pod());
    assert_eq!(l.phase(), Phase::Live);
    assert_eq!(l.poll_action(), None);
}

#[test]
fn r6_unrecognized_policy_is_invalid_but_no_grace_value_is() {
    assert_eq!(
        decide_delete(
            &pod(),
            &Strategy::POD,
            &policy(Propagation::Unrecognized),
            wall(T)
        ),
        Err(DeleteError::Invalid(
            InvalidOptions::UnrecognizedPropagationPolicy
        ))
    );
    for g in [i64::MIN, -1, 0, i64::MAX] {
        assert_eq!(grace(g).validate(), Ok(()), "grace {g} must be accepted");
        assert!(decide_delete(&pod(), &Strategy::POD, &grace(g), wall(T)).is_ok());
    }
}

#[test]
fn r7_uid_precondition_must_match() {
    let stored = pod();
    let other = grace(0).with_preconditions(Preconditions {
        uid: Some(name("re-created-uid")),
        resource_version: None,
    });
    assert_eq!(
        decide_delete(&stored, &Strategy::POD, &other, wall(T)),
        Err(DeleteError::Conflict(Conflict::Uid))
    );
    let same = grace(0).with_preconditions(Preconditions {
        uid: Some(name(UID)),
        resource_version: None,
    });
    let d = decide_pod(&stored, &same, wall(T));
    assert_written_then_removed(&d);
}

#[test]
fn r7_resource_version_precondition_must_match() {
    let mut stored = pod();
    stored.resource_version = 7;
    let stale = DeleteOptions::default().with_preconditions(Preconditions {
        uid: None,
        resource_version: Some(6),
    });
    assert_eq!(
        decide_delete(&stored, &Strategy::POD, &stale, wall(T)),
        Err(DeleteError::Conflict(Conflict::ResourceVersion))
    );
    let fresh = DeleteOptions::default().with_preconditions(Preconditions {
        uid: None,
        resource_version: Some(7),
    });
    let d = decide_pod(&stored, &fresh, wall(T));
    assert_kept_written(&d);
    assert_eq!(d.record.deletion_timestamp, ts(T + 30));
}

#[test]
fn r7_preconditions_are_checked_before_a_dry_run_answers() {
    let mut l = lifecycle(Strategy::POD, pod());
    let options = DeleteOptions::default()
        .with_preconditions(Preconditions {
            uid: Some(name("re-created-uid")),
            resource_version: None,
        })
        .with_dry_run(true);
    assert_eq!(
        l.handle(now(T), Input::Delete(options.clone()))
            .delete()
            .unwrap(),
        Err(DeleteError::Conflict(Conflict::Uid))
    );
}

#[test]
fn r8_resource_version_precondition_survives_the_intermediate_write() {
    // Grace 0 writes (ts, dgps 0, generation) and then removes; the removal
    // must not fail on the resource version the write itself bumped.
    let mut l = lifecycle(Strategy::POD, pod());
    let options = grace(0).with_preconditions(Preconditions {
        uid: Some(name(UID)),
        resource_version: Some(1),
    });
    let r = l
        .handle(now(T), Input::Delete(options.clone()))
        .delete()
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome, DeleteOutcome::Deleted);
    assert_eq!(l.record().resource_version, 2);
    assert_eq!(l.record().deletion_grace_period_seconds, Some(0));
    assert_eq!(l.phase(), Phase::Deleted);
    assert!(!l.is_stored());
}

// ---- 2.3 Normalisation -----------------------------------------------------

#[test]
fn r9_negative_request_grace_means_one() {
    for g in [-1, -30, i64::MIN] {
        let d = decide_pod(&pod(), &grace(g), wall(T));
        assert_kept_written(&d);
        assert_eq!(d.grace_period_seconds, Some(1), "request {g}");
        assert_eq!(d.record.deletion_timestamp, ts(T + 1));
        assert_eq!(d.record.deletion_grace_period_seconds, Some(1));
    }
}

#[test]
fn r10_stored_negative_grace_reads_as_one_in_memory_only() {
    // TestBeforeDelete's makePod(-1): ts = now - 1 s, dgps = -1.
    let stored = terminating(T - 1, Some(-1));

    // Pending: nothing written, storage keeps -1.
    for req in [Some(1), Some(2), None] {
        let options = DeleteOptions::default().with_grace_period(req);
        let d = decide_pod(&stored, &options, wall(T));
        assert_pending(&d, &stored);
        assert_eq!(d.record.deletion_grace_period_seconds, Some(-1));
    }
    // With no grace given, R17 fills in the normalised existing value 1.
    let d = decide_pod(&stored, &DeleteOptions::default(), wall(T));
    assert_eq!(d.grace_period_seconds, Some(1));

    // A shortening persists the normalised arithmetic: (T-1) - 1 + 0 = T-2,
    // clamped to T, grace 0, written, then removed.
    let d = decide_pod(&stored, &grace(0), wall(T));
    assert_written_then_removed(&d);
    assert_eq!(d.record.deletion_timestamp, ts(T));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(0));

    // Through the lifecycle, a pending delete leaves the stored -1 in place.
    let mut l = lifecycle(Strategy::POD, stored.clone());
    let r = l
        .handle(now(T), Input::Delete(grace(5)))
        .delete()
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome, DeleteOutcome::Pending);
    assert_eq!(l.record(), &stored);
}

/// `TestBeforeDelete`'s grid: stored grace d ∈ {-1, 0, 1, 2} with
/// ts = now + d, request g ∈ {-1, 0, 1, 2}. Covers R9, R10, R13–R16, R29.
#[test]
fn r13_r14_r15_before_delete_table_from_kubernetes() {
    #[derive(Debug)]
    enum Want {
        /// Nothing written; the request's grace after normalisation / R17.
        Pending(i64),
        /// Not graceful, no finalizers: removed as stored.
        RemovedUnwritten(i64),
        /// Shortened: (ts, dgps) written; kept iff grace > 0.
        Shortened { ts: i64, dgps: i64, grace: i64 },
    }
    use Want::*;
    let cases: [(i64, i64, Want); 16] = [
        (-1, -1, Pending(1)),
        (
            -1,
            0,
            Shortened {
                ts: T,
                dgps: 0,
                grace: 0,
            },
        ),
        (-1, 1, Pending(1)),
        (-1, 2, Pending(2)),
        (0, -1, RemovedUnwritten(1)),
        (0, 0, RemovedUnwritten(0)),
        (0, 1, RemovedUnwritten(1)),
        (0, 2, RemovedUnwritten(2)),
        (1, -1, Pending(1)),
        (
            1,
            0,
            Shortened {
                ts: T,
                dgps: 0,
                grace: 0,
            },
        ),
        (1, 1, Pending(1)),
        (1, 2, Pending(2)),
        (
            2,
            -1,
            Shortened {
                ts: T + 1,
                dgps: 1,
                grace: 1,
            },
        ),
        (
            2,
            0,
            Shortened {
                ts: T,
                dgps: 0,
                grace: 0,
            },
        ),
        (
            2,
            1,
            Shortened {
                ts: T + 1,
                dgps: 1,
                grace: 1,
            },
        ),
        (2, 2, Pending(2)),
    ];
    for (dgps, req, want) in cases {
        let stored = terminating(T + dgps, Some(dgps));
        let d = decide_pod(&stored, &grace(req), wall(T));
        let case = format!("dgps={dgps} grace={req} want {want:?}");
        match want {
            Pending(g) => {
                assert_pending(&d, &stored);
                assert_eq!(d.grace_period_seconds, Some(g), "{case}");
            }
            RemovedUnwritten(g) => {
                assert_removed_unwritten(&d, &stored);
                assert_eq!(d.grace_period_seconds, Some(g), "{case}");
            }
            Shortened {
                ts: t,
                dgps: g2,
                grace: g,
            } => {
                assert!(d.write, "{case}");
                assert_eq!(d.remove, g == 0, "{case}");
                assert_eq!(d.record.deletion_timestamp, ts(t), "{case}");
                assert_eq!(d.record.deletion_grace_period_seconds, Some(g2), "{case}");
                assert_eq!(d.grace_period_seconds, Some(g), "{case}");
                assert_eq!(d.record.generation, 2, "{case}: R12");
            }
        }
    }
}

// ---- 2.4 Strategy classes --------------------------------------------------

#[test]
fn r11_non_graceful_type_ignores_grace_and_deletion_state() {
    // A grace of 30 on a ConfigMap-like type: removed at once, nothing written.
    let stored = generic();
    let d = decide(&stored, &Strategy::GENERIC, &grace(30), wall(T));
    assert_removed_unwritten(&d, &stored);

    // Never "pending", whatever the stored deletion fields say.
    let mut odd = generic();
    odd.deletion_timestamp = ts(T + 30);
    odd.deletion_grace_period_seconds = Some(30);
    let d = decide(&odd, &Strategy::GENERIC, &DeleteOptions::default(), wall(T));
    assert_removed_unwritten(&d, &odd);

    // Even a pod-shaped record is not graceful under the generic strategy.
    let d = decide(&pod(), &Strategy::GENERIC, &grace(30), wall(T));
    assert_removed_unwritten(&d, &pod());
}

// ---- 2.5 Already terminating ------------------------------------------------

#[test]
fn r12_re_deletes_never_bump_generation() {
    let stored = terminating(T + 30, Some(30));
    for (req, remove) in [(10, false), (0, true)] {
        let d = decide_pod(&stored, &grace(req), wall(T + 5));
        assert!(d.write);
        assert_eq!(d.remove, remove);
        assert_eq!(d.record.generation, 2, "request {req}");
    }
}

#[test]
fn r13_existing_grace_zero_or_unset_deletes_at_once_even_for_longer_request() {
    // store_test.go TestGracefulStoreCanDeleteIfExistingGracePeriodZero.
    for dgps in [Some(0), None] {
        let stored = terminating(T - 10, dgps);
        for options in [grace(60), grace(0), DeleteOptions::default()] {
            let d = decide_pod(&stored, &options, wall(T));
            assert_removed_unwritten(&d, &stored);
        }
    }
    // With a finalizer it is not removed but marked (R30, R31): dgps 0,
    // past timestamp kept, generation not bumped again.
    let stored = with_finalizers(terminating(T - 10, None), &["example.com/x"]);
    let d = decide_pod(&stored, &grace(60), wall(T));
    assert_kept_written(&d);
    assert_eq!(d.record.deletion_timestamp, ts(T - 10));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(0));
    assert_eq!(d.record.generation, 2);
}

#[test]
fn r14_longer_or_equal_grace_is_ignored() {
    // resttest testDeleteGracefulExtend.
    let stored = terminating(T + 30, Some(30));
    for req in [30, 31, 3600, i64::MAX] {
        let d = decide_pod(&stored, &grace(req), wall(T + 5));
        assert_pending(&d, &stored);
        assert_eq!(d.grace_period_seconds, Some(req));
    }
}

#[test]
fn r15_shorter_grace_counts_from_the_original_request() {
    // Deleted at T with 30 s; at T+5 someone asks for 10 s: T - 0 + 10.
    let stored = terminating(T + 30, Some(30));
    let d = decide_pod(&stored, &grace(10), wall(T + 5));
    assert_kept_written(&d);
    assert_eq!(d.record.deletion_timestamp, ts(T + 10));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(10));
    assert_eq!(d.grace_period_seconds, Some(10));

    // A second shortening counts from the same origin: (T+10) - 10 + 7.
    let again = decide_pod(&d.record, &grace(7), wall(T + 6));
    assert_eq!(again.record.deletion_timestamp, ts(T + 7));
    assert_eq!(again.record.deletion_grace_period_seconds, Some(7));
}

#[test]
fn r16_shortening_into_the_past_clamps_to_now() {
    // TestBeforeDelete "when a shorter non-zero grace period would move into
    // the past": ts = now - 60 s, dgps 60, request 50 → ts now, dgps 1.
    let stored = terminating(T - 60, Some(60));
    let d = decide_pod(&stored, &grace(50), wall(T));
    assert_kept_written(&d);
    assert_eq!(d.record.deletion_timestamp, ts(T));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(1));
    assert_eq!(d.grace_period_seconds, Some(50));

    // "when a zero grace period would move into the past": ts now, dgps 0,
    // and the object goes.
    let d = decide_pod(&stored, &grace(0), wall(T));
    assert_written_then_removed(&d);
    assert_eq!(d.record.deletion_timestamp, ts(T));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(0));

    // Worked timeline 5: 30 → 5 at T+10 after a request at T.
    let stored = terminating(T + 30, Some(30));
    let d = decide_pod(&stored, &grace(5), wall(T + 10));
    assert_kept_written(&d);
    assert_eq!(d.record.deletion_timestamp, ts(T + 10));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(1));
}

#[test]
fn r16_landing_exactly_on_now_is_not_clamped() {
    let stored = terminating(T + 30, Some(30));
    // T - 0 + 10 == now exactly: keeps the requested 10.
    let d = decide_pod(&stored, &grace(10), wall(T + 10));
    assert_eq!(d.record.deletion_timestamp, ts(T + 10));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(10));

    // One millisecond later the same timestamp is in the past: grace 1, and
    // the clamped timestamp floors to the same second (R48).
    let d = decide_pod(&stored, &grace(10), wall_ms((T + 10) * 1000 + 1));
    assert_eq!(d.record.deletion_timestamp, ts(T + 10));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(1));
    assert!(!d.remove, "R29: kept because the request was 10 > 0");
}

#[test]
fn r17_no_grace_on_a_terminating_pod_is_pending_with_the_existing_grace() {
    let stored = terminating(T + 30, Some(30));
    let d = decide_pod(&stored, &DeleteOptions::default(), wall(T + 29));
    assert_pending(&d, &stored);
    assert_eq!(d.grace_period_seconds, Some(30));
}

// ---- 2.6 First deletion: pod grace computation ------------------------------

#[test]
fn r18_grace_from_request_then_spec_then_zero() {
    assert_eq!(pod_grace_period(&pod(), Some(10)), 10);
    assert_eq!(pod_grace_period(&pod(), None), 30);
    let mut no_spec = pod();
    no_spec.termination_grace_period_seconds = None;
    assert_eq!(pod_grace_period(&no_spec, None), 0);
    assert_eq!(pod_grace_period(&no_spec, Some(12)), 12);

    let d = decide_pod(&pod(), &grace(10), wall(T));
    assert_eq!(d.record.deletion_timestamp, ts(T + 10));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(10));

    // No request and no spec value: grace 0, written, then removed.
    let d = decide_pod(&no_spec, &DeleteOptions::default(), wall(T));
    assert_written_then_removed(&d);
    assert_eq!(d.record.deletion_timestamp, ts(T));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(0));
}

#[test]
fn r19_unscheduled_pod_gets_grace_zero() {
    let mut unscheduled = pod();
    unscheduled.scheduled = false;
    assert_eq!(pod_grace_period(&unscheduled, Some(30)), 0);
    assert_eq!(pod_grace_period(&unscheduled, None), 0);

    let d = decide_pod(&unscheduled, &grace(30), wall(T));
    assert_written_then_removed(&d);
    assert_eq!(d.grace_period_seconds, Some(0));
    assert_eq!(d.record.deletion_timestamp, ts(T));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(0));
    assert_eq!(d.record.generation, 2);
}

#[test]
fn r20_finished_pod_gets_grace_zero_other_phases_keep_it() {
    // TestCheckGracefulDelete: node + Pending → 30, node + Failed → 0,
    // no node + Pending / Succeeded / no phase → 0.
    let cases = [
        (true, PodPhase::Pending, 30),
        (true, PodPhase::Running, 30),
        (true, PodPhase::Unknown, 30),
        (true, PodPhase::Unset, 30),
        (true, PodPhase::Failed, 0),
        (true, PodPhase::Succeeded, 0),
        (false, PodPhase::Pending, 0),
        (false, PodPhase::Succeeded, 0),
        (false, PodPhase::Unset, 0),
    ];
    for (scheduled, phase, want) in cases {
        let mut r = pod();
        r.scheduled = scheduled;
        r.phase = phase;
        assert_eq!(
            pod_grace_period(&r, Some(30)),
            want,
            "scheduled={scheduled} phase={phase:?}"
        );
        let d = decide_pod(&r, &grace(30), wall(T));
        assert_eq!(d.record.deletion_grace_period_seconds, Some(want));
        assert_eq!(d.record.deletion_timestamp, ts(T + want));
        assert_eq!(d.remove, want == 0);
    }
}

#[test]
fn r21_negative_spec_grace_means_one() {
    // strategy_test.go "has negative grace period".
    let mut r = pod();
    r.termination_grace_period_seconds = Some(-5);
    assert_eq!(pod_grace_period(&r, None), 1);
    let d = decide_pod(&r, &DeleteOptions::default(), wall(T));
    assert_kept_written(&d);
    assert_eq!(d.record.deletion_timestamp, ts(T + 1));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(1));
    // A request still wins over the spec value.
    let d = decide_pod(&r, &grace(0), wall(T));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(0));
    assert!(d.remove);
}

#[test]
fn r22_request_is_rewritten_to_the_computed_period() {
    let d = decide_pod(&pod(), &DeleteOptions::default(), wall(T));
    assert_eq!(d.grace_period_seconds, Some(30));
    // A finished pod asked for 30 gets 0, and that rewritten 0 decides the
    // removal (R29).
    let mut done = pod();
    done.phase = PodPhase::Succeeded;
    let d = decide_pod(&done, &grace(30), wall(T));
    assert_eq!(d.grace_period_seconds, Some(0));
    assert_written_then_removed(&d);
}

#[test]
fn r24_first_deletion_sets_timestamp_now_plus_grace() {
    let d = decide_pod(&pod(), &grace(30), wall(T));
    assert_eq!(d.record.deletion_timestamp, ts(T + 30));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(30));
    let d = decide_pod(&pod(), &grace(0), wall(T));
    assert_eq!(d.record.deletion_timestamp, ts(T));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(0));
    let d = decide_pod(&pod(), &grace(1), wall_ms(T * 1000 + 700));
    assert_eq!(d.record.deletion_timestamp, ts(T + 1));
}

#[test]
fn r25_first_deletion_bumps_positive_generation_only() {
    for (before, after) in [(1, 2), (7, 8), (0, 0), (-3, -3)] {
        let mut r = pod();
        r.generation = before;
        let d = decide_pod(&r, &DeleteOptions::default(), wall(T));
        assert_eq!(d.record.generation, after, "generation {before}");
    }
    // Saturates instead of wrapping.
    let mut r = pod();
    r.generation = i64::MAX;
    let d = decide_pod(&r, &DeleteOptions::default(), wall(T));
    assert_eq!(d.record.generation, i64::MAX);
}

// ---- 2.7 Store.Delete orchestration ----------------------------------------

#[test]
fn r26_pending_writes_nothing_and_keeps_finalizers() {
    let stored = with_finalizers(terminating(T + 30, Some(30)), &["example.com/x"]);
    let options = DeleteOptions::default().with_propagation_policy(Some(Propagation::Orphan));
    let d = decide_pod(&stored, &options, wall(T + 1));
    assert_pending(&d, &stored);
    assert_eq!(list(&d.record.finalizers), ["example.com/x"]);

    // Through the lifecycle: no write (resource version unchanged), no action.
    let mut l = lifecycle(Strategy::POD, stored.clone());
    let r = l
        .handle(now(T + 1), Input::Delete(options.clone()))
        .delete()
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome, DeleteOutcome::Pending);
    assert!(!r.force);
    assert_eq!(l.record(), &stored);
    assert_eq!(l.poll_action(), None);
}

#[test]
fn r27_finalizers_are_looked_at_again_after_the_gc_adjustment() {
    // Outer check sees [orphan]; after Background drops it nothing holds the
    // object, so it is removed (as stored).
    let stored = with_finalizers(generic(), &[FINALIZER_ORPHAN]);
    let d = decide(
        &stored,
        &Strategy::GENERIC,
        &policy(Propagation::Background),
        wall(T),
    );
    assert_removed_unwritten(&d, &stored);

    // With another finalizer left after the adjustment, it is kept.
    let stored = with_finalizers(generic(), &["example.com/x", FINALIZER_ORPHAN]);
    let d = decide(
        &stored,
        &Strategy::GENERIC,
        &policy(Propagation::Background),
        wall(T),
    );
    assert_kept_written(&d);
    assert_eq!(list(&d.record.finalizers), ["example.com/x"]);
    assert_eq!(d.record.deletion_timestamp, ts(T));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(0));
}

#[test]
fn r28_a_gc_finalizer_change_alone_forces_an_update() {
    // Not graceful, no finalizers, but Orphan adds one: update, keep.
    let d = decide(
        &generic(),
        &Strategy::GENERIC,
        &policy(Propagation::Orphan),
        wall(T),
    );
    assert_kept_written(&d);
    assert_eq!(list(&d.record.finalizers), [FINALIZER_ORPHAN]);
    assert_eq!(d.record.deletion_timestamp, ts(T));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(0));
    assert_eq!(d.record.generation, 2);
}

#[test]
fn r29_keep_or_remove_by_the_requested_grace_not_the_stored_one() {
    // R16 stores 1 for a request of 50; 50 > 0 keeps it.
    let stored = terminating(T - 60, Some(60));
    let d = decide_pod(&stored, &grace(50), wall(T));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(1));
    assert_eq!(d.grace_period_seconds, Some(50));
    assert_kept_written(&d);
}

#[test]
fn r29_grace_zero_writes_the_state_then_removes() {
    // resttest testDeleteGracefulImmediate: the returned object has dgps 0
    // and a bumped generation.
    let d = decide_pod(&pod(), &grace(0), wall(T));
    assert_written_then_removed(&d);
    let mut want = pod();
    want.deletion_timestamp = ts(T);
    want.deletion_grace_period_seconds = Some(0);
    want.generation = 2;
    assert_eq!(d.record, want);
}

#[test]
fn r29_grace_zero_with_finalizers_is_kept_at_zero() {
    // TestGracefulStoreHandleFinalizers.
    let stored = with_finalizers(pod(), &["example.com/x"]);
    let d = decide_pod(&stored, &grace(0), wall(T));
    assert_kept_written(&d);
    assert_eq!(d.record.deletion_timestamp, ts(T));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(0));
    assert_eq!(list(&d.record.finalizers), ["example.com/x"]);

    // The kubelet's final delete on a held pod shortens to 0 and keeps it.
    let held = with_finalizers(terminating(T + 30, Some(30)), &["example.com/x"]);
    let d = decide_pod(&held, &grace(0), wall(T + 4));
    assert_kept_written(&d);
    assert_eq!(d.record.deletion_timestamp, ts(T + 4));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(0));
}

#[test]
fn r30_non_graceful_without_finalizers_removes_the_unmodified_object() {
    // orphan_dependents=false removes the orphan finalizer; nothing is left,
    // so the stored object (still listing orphan) is what is removed.
    let stored = with_finalizers(generic(), &[FINALIZER_ORPHAN]);
    let options = DeleteOptions::default().with_orphan_dependents(Some(false));
    let d = decide(&stored, &Strategy::GENERIC, &options, wall(T));
    assert_removed_unwritten(&d, &stored);
    assert_eq!(list(&d.record.finalizers), [FINALIZER_ORPHAN]);
    assert_eq!(d.record.deletion_timestamp, None);
}

#[test]
fn r30_non_graceful_with_finalizers_is_marked_and_kept() {
    // TestNonGracefulStoreHandleFinalizers.
    let stored = with_finalizers(generic(), &["example.com/x"]);
    let d = decide(&stored, &Strategy::GENERIC, &grace(30), wall(T));
    assert_kept_written(&d);
    let mut want = stored.clone();
    want.deletion_timestamp = ts(T);
    want.deletion_grace_period_seconds = Some(0);
    want.generation = 2;
    assert_eq!(d.record, want);
}

#[test]
fn r31_mark_as_deleting_unset_future_past() {
    // TestMarkAsDeleting: unset → now; future → now; past → unchanged;
    // dgps always 0; generation bumped only when unset.
    let base = with_finalizers(generic(), &["example.com/x"]);
    let at = wall(T);

    let d = decide(&base, &Strategy::GENERIC, &DeleteOptions::default(), at);
    assert_eq!(d.record.deletion_timestamp, ts(T));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(0));
    assert_eq!(d.record.generation, 2);

    let mut future = base.clone();
    future.deletion_timestamp = ts(T + 5);
    future.deletion_grace_period_seconds = Some(5);
    let d = decide(&future, &Strategy::GENERIC, &DeleteOptions::default(), at);
    assert_eq!(d.record.deletion_timestamp, ts(T));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(0));
    assert_eq!(d.record.generation, 1);
    assert!(d.write);

    let mut past = base.clone();
    past.deletion_timestamp = ts(T - 5);
    past.deletion_grace_period_seconds = Some(5);
    let d = decide(&past, &Strategy::GENERIC, &DeleteOptions::default(), at);
    assert_eq!(d.record.deletion_timestamp, ts(T - 5));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(0));
    assert_eq!(d.record.generation, 1);
    assert!(d.write);

    // "After now" is on the real instant: ts T is not after T.5, T+1 is.
    let mut same_second = base.clone();
    same_second.deletion_timestamp = ts(T);
    same_second.deletion_grace_period_seconds = Some(0);
    let d = decide(
        &same_second,
        &Strategy::GENERIC,
        &DeleteOptions::default(),
        wall_ms(T * 1000 + 500),
    );
    assert_eq!(d.record.deletion_timestamp, ts(T));
    assert!(!d.write, "already marked: nothing to write");
    assert!(!d.remove);
    let mut next_second = same_second.clone();
    next_second.deletion_timestamp = ts(T + 1);
    let d = decide(
        &next_second,
        &Strategy::GENERIC,
        &DeleteOptions::default(),
        wall_ms(T * 1000 + 500),
    );
    assert_eq!(d.record.deletion_timestamp, ts(T));

    // Generation 0 is not bumped.
    let mut zero = base;
    zero.generation = 0;
    let d = decide(&zero, &Strategy::GENERIC, &DeleteOptions::default(), at);
    assert_eq!(d.record.generation, 0);
}

#[test]
fn r32_nothing_to_wait_for_removes_without_a_write() {
    // TestStoreDelete; resttest testDeleteNoGraceful with grace 10.
    let stored = generic();
    let d = decide(&stored, &Strategy::GENERIC, &grace(10), wall(T));
    assert_removed_unwritten(&d, &stored);

    let mut l = lifecycle(Strategy::GENERIC, stored.clone());
    let r = l
        .handle(now(T), Input::Delete(grace(10)))
        .delete()
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome, DeleteOutcome::Deleted);
    assert_eq!(l.record(), &stored, "removed as stored, resource version 1");
    assert_eq!(l.phase(), Phase::Deleted);
    assert_eq!(drain(&mut l), [Action::Remove { force: false }]);
}

#[test]
fn r33_response_carries_the_last_written_state() {
    // Pods return the object (the lifecycle's record, not a copy in the
    // response); after a grace-0 delete it is the state that was written
    // before removal (resource version bumped by the write).
    let mut l = lifecycle(Strategy::POD, pod());
    let r = l
        .handle(now(T), Input::Delete(grace(0)))
        .delete()
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome, DeleteOutcome::Deleted);
    let mut want = pod();
    want.deletion_timestamp = ts(T);
    want.deletion_grace_period_seconds = Some(0);
    want.generation = 2;
    want.resource_version = 2;
    assert_eq!(l.record(), &want);

    // A kept record: the object is what was stored.
    let mut l = lifecycle(Strategy::POD, pod());
    let r = l
        .handle(now(T), Input::Delete(DeleteOptions::default()))
        .delete()
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome, DeleteOutcome::Graceful);
    assert_eq!(l.record().resource_version, 2);
    assert_eq!(l.record().deletion_timestamp, ts(T + 30));
}

#[test]
fn r34_accepted_only_when_kept_and_orphan_dependents_is_false() {
    let cascade = DeleteOptions::default().with_orphan_dependents(Some(false));
    let keep_dependents = DeleteOptions::default().with_orphan_dependents(Some(true));
    let cascade_now = cascade.clone().with_grace_period(Some(0));
    let status = |stored: &Record<F>, options: &DeleteOptions| {
        decide_pod(stored, options, wall(T))
            .outcome
            .http_status(options)
    };
    // Kept (graceful, or already pending) with orphanDependents=false: 202.
    assert_eq!(status(&pod(), &cascade), 202);
    assert_eq!(status(&terminating(T + 30, Some(30)), &cascade), 202);
    // Removed at once, even so: 200.
    assert_eq!(status(&pod(), &cascade_now), 200);
    // Kept, but not that request: 200 (graceful pod deletes stay 200).
    assert_eq!(status(&pod(), &DeleteOptions::default()), 200);
    assert_eq!(status(&pod(), &keep_dependents), 200);
    assert_eq!(status(&pod(), &policy(Propagation::Foreground)), 200);
    // A dry run answers as the real request would.
    let dry = cascade.clone().with_dry_run(true);
    let mut l = lifecycle(Strategy::POD, pod());
    let r = l
        .handle(now(T), Input::Delete(dry.clone()))
        .delete()
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome.http_status(&dry), 202);
    assert_eq!(l.record(), &pod());

    // Failures: 422 invalid, 409 conflict, 404 missing; the fixed
    // finalizer capacity (grace's own limit) is 413.
    let invalid = DeleteOptions::default()
        .with_orphan_dependents(Some(false))
        .with_propagation_policy(Some(Propagation::Background));
    let conflict = DeleteOptions::default().with_preconditions(Preconditions {
        uid: Some(name("someone-else")),
        resource_version: None,
    });
    let error = |stored: &Record<F>, options: &DeleteOptions| {
        decide_delete(stored, &Strategy::POD, options, wall(T))
            .expect_err("refused")
            .http_status()
    };
    assert_eq!(error(&pod(), &invalid), 422);
    assert_eq!(error(&pod(), &conflict), 409);
    let full = with_finalizers(pod(), &["a.io/1", "a.io/2", "a.io/3", "a.io/4"]);
    assert_eq!(error(&full, &policy(Propagation::Foreground)), 413);
    let mut l = lifecycle(Strategy::POD, pod());
    let _ = l
        .handle(now(T), Input::Delete(grace(0)))
        .delete()
        .unwrap()
        .unwrap();
    let missing = l
        .handle(now(T), Input::Delete(cascade.clone()))
        .delete()
        .unwrap()
        .expect_err("gone");
    assert_eq!(missing.http_status(), 404);
    // Updates answer the same way.
    let add = FinalizerChange::Add(name("a.io/5"));
    assert_eq!(
        decide_finalizer_update(&full, &add)
            .expect_err("full")
            .http_status(),
        413
    );
    let gone = l
        .handle(now(T), Input::FinalizerUpdate(add.clone()))
        .update()
        .unwrap()
        .expect_err("gone");
    assert_eq!(gone.http_status(), 404);
}

#[test]
fn r35_removal_is_announced_only_when_the_record_is_removed() {
    // The AfterDelete equivalent: Action::Remove.
    let mut l = lifecycle(Strategy::POD, with_finalizers(pod(), &["example.com/x"]));
    let _ = l
        .handle(now(T), Input::Delete(DeleteOptions::default()))
        .delete()
        .unwrap()
        .unwrap();
    assert_eq!(drain(&mut l), [Action::RemoveEndpoints]);
    // Pending re-delete: nothing.
    let r = l
        .handle(now(T + 1), Input::Delete(grace(60)))
        .delete()
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome, DeleteOutcome::Pending);
    assert_eq!(drain(&mut l), []);
    // Grace 0 with a finalizer: kept, no removal.
    let r = l
        .handle(now(T + 2), Input::Delete(grace(0)))
        .delete()
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome, DeleteOutcome::Graceful);
    assert!(l.is_stored());
    assert_eq!(drain(&mut l), []);
    // The last finalizer goes: now the removal is announced.
    let out = l
        .handle(
            now(T + 3),
            Input::FinalizerUpdate(FinalizerChange::Remove(name("example.com/x"))),
        )
        .update()
        .unwrap()
        .unwrap();
    assert!(matches!(out, UpdateOutcome::Deleted { .. }));
    let actions = drain(&mut l);
    assert_eq!(
        actions
            .iter()
            .filter(|a| matches!(a, Action::Remove { .. }))
            .count(),
        1
    );
}

// ---- 2.8 Garbage-collection finalizers -------------------------------------

#[test]
fn r36_gc_disabled_touches_no_finalizers() {
    let strategy = Strategy {
        gc_enabled: false,
        ..Strategy::GENERIC
    };
    for p in [
        Propagation::Orphan,
        Propagation::Foreground,
        Propagation::Background,
    ] {
        assert_eq!(
            gc_finalizers(&fins(&[FINALIZER_ORPHAN]), &strategy, &policy(p)),
            Ok(None)
        );
        assert_eq!(gc_finalizers(&fins(&[]), &strategy, &policy(p)), Ok(None));
    }
    // So Orphan on a finalizer-less generic object removes it at once.
    let d = decide(&generic(), &strategy, &policy(Propagation::Orphan), wall(T));
    assert_removed_unwritten(&d, &generic());
}

#[test]
fn r37_orphan_wanted_first_match_wins() {
    let gc = |existing: &[&str], strategy: &Strategy, options: &DeleteOptions| {
        gc_finalizers(&fins(existing), strategy, options)
            .unwrap()
            .map(|f| list(&f).iter().map(|s| s.to_string()).collect::<Vec<_>>())
    };
    let s = Strategy::GENERIC;
    let orphan_default = Strategy {
        default_gc_policy: GcPolicy::OrphanDependents,
        ..Strategy::GENERIC
    };
    let unsupported = Strategy {
        default_gc_policy: GcPolicy::Unsupported,
        ..Strategy::GENERIC
    };
    let orphan_opt = |b: bool| DeleteOptions::default().with_orphan_dependents(Some(b));

    // Unsupported: never orphan, even when asked (and an existing one goes).
    assert_eq!(gc(&[], &unsupported, &orphan_opt(true)), None);
    assert_eq!(
        gc(&[FINALIZER_ORPHAN], &unsupported, &DeleteOptions::default()),
        Some(vec![])
    );
    // orphanDependents decides before anything else.
    assert_eq!(
        gc(&[], &s, &orphan_opt(true)),
        Some(vec![FINALIZER_ORPHAN.into()])
    );
    assert_eq!(
        gc(&[FINALIZER_ORPHAN], &s, &orphan_opt(false)),
        Some(vec![])
    );
    assert_eq!(
        gc(&[FINALIZER_ORPHAN], &orphan_default, &orphan_opt(false)),
        Some(vec![])
    );
    // Then the propagation policy.
    assert_eq!(
        gc(&[], &s, &policy(Propagation::Orphan)),
        Some(vec![FINALIZER_ORPHAN.into()])
    );
    assert_eq!(
        gc(
            &[FINALIZER_ORPHAN],
            &orphan_default,
            &policy(Propagation::Background)
        ),
        Some(vec![])
    );
    // Then existing finalizers, first of the two wins.
    assert_eq!(
        gc(
            &[FINALIZER_ORPHAN, FINALIZER_FOREGROUND],
            &s,
            &DeleteOptions::default()
        ),
        Some(vec![FINALIZER_ORPHAN.into()])
    );
    assert_eq!(
        gc(
            &[FINALIZER_FOREGROUND, FINALIZER_ORPHAN],
            &orphan_default,
            &DeleteOptions::default()
        ),
        Some(vec![FINALIZER_FOREGROUND.into()])
    );
    // Finally the type's default (TestDeletionFinalizersForGarbageCollection:
    // extensions/v1beta1 and apps/v1beta1/2 orphan by default → [orphan];
    // apps/v1 deletes dependents → no change).
    assert_eq!(
        gc(&[], &orphan_default, &DeleteOptions::default()),
        Some(vec![FINALIZER_ORPHAN.into()])
    );
    assert_eq!(gc(&[], &s, &DeleteOptions::default()), None);
}

#[test]
fn r38_foreground_wanted_and_the_default_is_background() {
    let gc = |existing: &[&str], strategy: &Strategy, options: &DeleteOptions| {
        gc_finalizers(&fins(existing), strategy, options)
            .unwrap()
            .map(|f| list(&f).iter().map(|s| s.to_string()).collect::<Vec<_>>())
    };
    let s = Strategy::GENERIC;
    let unsupported = Strategy {
        default_gc_policy: GcPolicy::Unsupported,
        ..Strategy::GENERIC
    };
    assert_eq!(
        gc(&[], &s, &policy(Propagation::Foreground)),
        Some(vec![FINALIZER_FOREGROUND.into()])
    );
    assert_eq!(
        gc(&[], &unsupported, &policy(Propagation::Foreground)),
        None
    );
    // orphanDependents set (any value) → no foreground.
    let orphan_false = DeleteOptions::default().with_orphan_dependents(Some(false));
    assert_eq!(gc(&[FINALIZER_FOREGROUND], &s, &orphan_false), Some(vec![]));
    // Other policies drop an existing foregroundDeletion.
    assert_eq!(
        gc(
            &[FINALIZER_FOREGROUND],
            &s,
            &policy(Propagation::Background)
        ),
        Some(vec![])
    );
    // Existing foregroundDeletion is kept by a request without a policy.
    assert_eq!(
        gc(&[FINALIZER_FOREGROUND], &s, &DeleteOptions::default()),
        None
    );
    // DeleteDependents (the default) means background: nothing added.
    assert_eq!(s.default_gc_policy, GcPolicy::DeleteDependents);
    assert_eq!(gc(&[], &s, &DeleteOptions::default()), None);

    // Through a delete: a pod deleted in the foreground is held by it.
    let d = decide_pod(&pod(), &policy(Propagation::Foreground), wall(T));
    assert_kept_written(&d);
    assert_eq!(list(&d.record.finalizers), [FINALIZER_FOREGROUND]);
}

#[test]
fn r39_gc_finalizer_set_unchanged_keeps_old_order() {
    let s = Strategy::GENERIC;
    let existing = fins(&["x", FINALIZER_ORPHAN, "y"]);
    assert_eq!(
        gc_finalizers(&existing, &s, &policy(Propagation::Orphan)),
        Ok(None)
    );
    // And a delete that changes nothing else keeps that order in storage.
    let stored = with_finalizers(generic(), &["x", FINALIZER_ORPHAN, "y"]);
    let d = decide(&stored, &s, &policy(Propagation::Orphan), wall(T));
    assert_eq!(list(&d.record.finalizers), ["x", FINALIZER_ORPHAN, "y"]);
}

#[test]
fn r39_gc_finalizers_are_appended_orphan_then_foreground() {
    let s = Strategy::GENERIC;
    let added = gc_finalizers(&fins(&["x", "y"]), &s, &policy(Propagation::Orphan))
        .unwrap()
        .unwrap();
    assert_eq!(list(&added), ["x", "y", FINALIZER_ORPHAN]);

    // Switching policy drops the old one (order of the rest kept) and
    // appends the new one.
    let switched = gc_finalizers(
        &fins(&[FINALIZER_ORPHAN, "x"]),
        &s,
        &policy(Propagation::Foreground),
    )
    .unwrap()
    .unwrap();
    assert_eq!(list(&switched), ["x", FINALIZER_FOREGROUND]);
}

/// R37–R39 as `deletionFinalizersForGarbageCollection` writes them: one
/// scan of the list per rule, first match wins; the new list is the others
/// in their order, then `orphan`, then `foregroundDeletion`.
fn gc_finalizers_by_scans(
    existing: &[&str],
    strategy: &Strategy,
    options: &DeleteOptions,
) -> Result<Option<Vec<String>>, DeleteError> {
    if !strategy.gc_enabled {
        return Ok(None);
    }
    let supported = strategy.default_gc_policy != GcPolicy::Unsupported;
    let first_of = |wanted: &str, other: &str| {
        existing
            .iter()
            .find(|n| **n == wanted || **n == other)
            .map(|n| *n == wanted)
    };
    let orphan = supported
        && match (options.orphan_dependents, options.propagation_policy) {
            (Some(o), _) => o,
            (None, Some(Propagation::Orphan)) => true,
            (None, Some(Propagation::Background | Propagation::Foreground)) => false,
            (None, Some(Propagation::Unrecognized) | None) => {
                first_of(FINALIZER_ORPHAN, FINALIZER_FOREGROUND)
                    .unwrap_or(strategy.default_gc_policy == GcPolicy::OrphanDependents)
            }
            (None, Some(other)) => panic!("no rule here for the policy {other:?} yet"),
        };
    let foreground = supported
        && options.orphan_dependents.is_none()
        && match options.propagation_policy {
            Some(p) => p == Propagation::Foreground,
            None => first_of(FINALIZER_FOREGROUND, FINALIZER_ORPHAN).unwrap_or(false),
        };
    let present = (
        existing.contains(&FINALIZER_ORPHAN),
        existing.contains(&FINALIZER_FOREGROUND),
    );
    if (orphan, foreground) == present {
        return Ok(None);
    }
    let mut next: Vec<String> = existing
        .iter()
        .filter(|n| **n != FINALIZER_ORPHAN && **n != FINALIZER_FOREGROUND)
        .map(|n| n.to_string())
        .collect();
    if orphan {
        next.push(FINALIZER_ORPHAN.to_string());
    }
    if foreground {
        next.push(FINALIZER_FOREGROUND.to_string());
    }
    if next.len() > F {
        return Err(DeleteError::TooManyFinalizers);
    }
    Ok(Some(next))
}

#[test]
fn r37_r38_r39_gc_finalizers_match_the_rule_scans_for_every_small_case() {
    let names = [FINALIZER_ORPHAN, FINALIZER_FOREGROUND, "x"];
    // Every list of up to F names drawn from the three, repeats included.
    let mut lists: Vec<Vec<&str>> = vec![vec![]];
    for len in 1..=F {
        let mut longer = Vec::new();
        for l in lists.iter().filter(|l| l.len() == len - 1) {
            for n in names {
                let mut l = l.clone();
                l.push(n);
                longer.push(l);
            }
        }
        lists.extend(longer);
    }
    let propagations = [
        None,
        Some(Propagation::Orphan),
        Some(Propagation::Background),
        Some(Propagation::Foreground),
        Some(Propagation::Unrecognized),
    ];
    let mut cases = 0;
    for list_names in &lists {
        let existing = fins(list_names);
        for default_gc_policy in [
            GcPolicy::DeleteDependents,
            GcPolicy::OrphanDependents,
            GcPolicy::Unsupported,
        ] {
            for gc_enabled in [false, true] {
                let strategy = Strategy {
                    default_gc_policy,
                    gc_enabled,
                    ..Strategy::GENERIC
                };
                for orphan_dependents in [None, Some(false), Some(true)] {
                    for propagation_policy in propagations {
                        let options = DeleteOptions::default()
                            .with_orphan_dependents(orphan_dependents)
                            .with_propagation_policy(propagation_policy);
                        let got = gc_finalizers(&existing, &strategy, &options)
                            .map(|f| f.map(|f| list(&f).iter().map(|s| s.to_string()).collect()));
                        assert_eq!(
                            got,
                            gc_finalizers_by_scans(list_names, &strategy, &options),
                            "{list_names:?} {strategy:?} {options:?}"
                        );
                        cases += 1;
                    }
                }
            }
        }
    }
    assert_eq!(cases, lists.len() * 3 * 2 * 3 * 5);
}

#[test]
fn r40_background_on_the_only_orphan_finalizer_deletes_at_once() {
    let stored = with_finalizers(generic(), &[FINALIZER_ORPHAN]);
    let mut l = lifecycle(Strategy::GENERIC, stored.clone());
    let r = l
        .handle(now(T), Input::Delete(policy(Propagation::Background)))
        .delete()
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome, DeleteOutcome::Deleted);
    assert_eq!(l.record(), &stored);
    assert_eq!(l.phase(), Phase::Deleted);

    // A pod: the graceful path writes the list without orphan. With grace 0
    // that written state is removed; with the default grace it is kept.
    let stored = with_finalizers(pod(), &[FINALIZER_ORPHAN]);
    let options = grace(0).with_propagation_policy(Some(Propagation::Background));
    let d = decide_pod(&stored, &options, wall(T));
    assert_written_then_removed(&d);
    assert!(d.record.finalizers.is_empty());
    assert_eq!(d.record.deletion_grace_period_seconds, Some(0));
    let d = decide_pod(&stored, &policy(Propagation::Background), wall(T));
    assert_kept_written(&d);
    assert!(d.record.finalizers.is_empty());
    assert_eq!(d.record.deletion_timestamp, ts(T + 30));
}

#[test]
fn r41_a_pending_pod_delete_cannot_change_gc_finalizers() {
    let stored = with_finalizers(terminating(T + 30, Some(30)), &[FINALIZER_ORPHAN]);
    for options in [
        policy(Propagation::Background),
        policy(Propagation::Foreground),
        grace(60).with_orphan_dependents(Some(false)),
    ] {
        let d = decide_pod(&stored, &options, wall(T + 1));
        assert_pending(&d, &stored);
        assert_eq!(list(&d.record.finalizers), [FINALIZER_ORPHAN]);
    }
}

#[test]
fn r41_a_delete_can_change_gc_finalizers_when_not_pending() {
    // Shortening a pod's grace: the finalizer change rides along, even though
    // the object is terminating (R46 does not apply to deletes).
    let stored = terminating(T + 30, Some(30));
    let options = grace(10).with_propagation_policy(Some(Propagation::Orphan));
    let d = decide_pod(&stored, &options, wall(T + 1));
    assert_kept_written(&d);
    assert_eq!(list(&d.record.finalizers), [FINALIZER_ORPHAN]);
    assert_eq!(d.record.deletion_timestamp, ts(T + 10));

    // A pod whose dgps is 0: the added finalizer now holds it.
    let stored = terminating(T, Some(0));
    let d = decide_pod(&stored, &policy(Propagation::Orphan), wall(T + 1));
    assert_kept_written(&d);
    assert_eq!(list(&d.record.finalizers), [FINALIZER_ORPHAN]);
    assert_eq!(d.record.deletion_timestamp, ts(T));

    // A terminating non-graceful object.
    let mut stored = with_finalizers(generic(), &["example.com/x"]);
    stored.deletion_timestamp = ts(T - 5);
    stored.deletion_grace_period_seconds = Some(0);
    let d = decide(
        &stored,
        &Strategy::GENERIC,
        &policy(Propagation::Foreground),
        wall(T),
    );
    assert_kept_written(&d);
    assert_eq!(
        list(&d.record.finalizers),
        ["example.com/x", FINALIZER_FOREGROUND]
    );
}

// ---- 2.9 Dry run -----------------------------------------------------------

#[test]
fn r42_dry_run_checks_everything_and_changes_nothing() {
    let dry = |options: DeleteOptions| options.with_dry_run(true);
    let mut l = lifecycle(Strategy::POD, pod());
    // Validation still applies.
    let invalid = dry(policy(Propagation::Unrecognized));
    assert_eq!(
        l.handle(now(T), Input::Delete(invalid.clone()))
            .delete()
            .unwrap(),
        Err(DeleteError::Invalid(
            InvalidOptions::UnrecognizedPropagationPolicy
        ))
    );
    // The answer equals the real decision; nothing is applied.
    let r = l
        .handle(now(T), Input::Delete(dry(grace(10))))
        .delete()
        .unwrap()
        .unwrap();
    assert!(r.dry_run);
    let real = decide_pod(&pod(), &grace(10), wall(T));
    assert_eq!(r.outcome, real.outcome);
    // The object a dry run would write: the same decision's.
    assert_eq!(decide_pod(&pod(), &dry(grace(10)), wall(T)), real);
    assert_eq!(l.record(), &pod());
    assert_eq!(l.phase(), Phase::Live);
    assert_eq!(l.poll_action(), None);
}

#[test]
fn r43_dry_run_that_would_keep_shows_the_would_be_state() {
    // resttest testDeleteDryRunGracefulHasdefault.
    let mut l = lifecycle(Strategy::POD, pod());
    let options = DeleteOptions::default()
        .with_dry_run(true)
        .with_propagation_policy(Some(Propagation::Orphan));
    let r = l
        .handle(now(T), Input::Delete(options.clone()))
        .delete()
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome, DeleteOutcome::Graceful);
    assert!(r.dry_run);
    let would = decide_pod(l.record(), &options, wall(T)).record;
    assert_eq!(would.deletion_timestamp, ts(T + 30));
    assert_eq!(would.deletion_grace_period_seconds, Some(30));
    assert_eq!(would.generation, 2);
    assert_eq!(list(&would.finalizers), [FINALIZER_ORPHAN]);
    assert_eq!(l.record(), &pod());
    assert_eq!(l.phase(), Phase::Live);
}

#[test]
fn r44_dry_run_that_would_remove_reports_deleted_but_keeps_the_record() {
    // resttest testDeleteNoGraceful with dryRun.
    let mut l = lifecycle(Strategy::GENERIC, generic());
    let options = grace(10).with_dry_run(true);
    let r = l
        .handle(now(T), Input::Delete(options.clone()))
        .delete()
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome, DeleteOutcome::Deleted);
    assert!(r.dry_run);
    assert!(l.is_stored());
    assert_eq!(l.phase(), Phase::Live);
    assert_eq!(l.poll_action(), None);
    // The real delete afterwards still finds it.
    let r = l
        .handle(now(T), Input::Delete(grace(10)))
        .delete()
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome, DeleteOutcome::Deleted);
    assert_eq!(l.phase(), Phase::Deleted);
}

// ---- 2.10 Update path ------------------------------------------------------

#[test]
fn r45_removing_the_last_finalizer_deletes_only_when_no_grace_is_left() {
    let x = FinalizerChange::Remove(name("example.com/x"));
    for dgps in [Some(0), None] {
        let stored = with_finalizers(terminating(T, dgps), &["example.com/x"]);
        let u = decide_finalizer_update(&stored, &x).unwrap();
        assert!(u.remove, "dgps {dgps:?}");
        assert!(u.write);
        assert!(u.record.finalizers.is_empty());
    }
    // dgps > 0: the update does not delete; the agent's grace-0 delete will.
    let stored = with_finalizers(terminating(T + 30, Some(30)), &["example.com/x"]);
    let u = decide_finalizer_update(&stored, &x).unwrap();
    assert!(!u.remove);
    assert!(u.write);
    assert!(u.record.finalizers.is_empty());
    // No deletion timestamp: never deletes.
    let stored = with_finalizers(pod(), &["example.com/x"]);
    let u = decide_finalizer_update(&stored, &x).unwrap();
    assert!(!u.remove);
    // Another finalizer left: not yet.
    let stored = with_finalizers(terminating(T, Some(0)), &["example.com/x", "y"]);
    let u = decide_finalizer_update(&stored, &x).unwrap();
    assert!(!u.remove);
    assert_eq!(list(&u.record.finalizers), ["y"]);

    // TestNonGracefulStoreHandleFinalizers through the lifecycle.
    let mut l = lifecycle(
        Strategy::GENERIC,
        with_finalizers(generic(), &["example.com/x"]),
    );
    let r = l
        .handle(now(T), Input::Delete(DeleteOptions::default()))
        .delete()
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome, DeleteOutcome::Graceful);
    assert!(l.is_stored());
    let out = l
        .handle(now(T + 1), Input::FinalizerUpdate(x.clone()))
        .update()
        .unwrap()
        .unwrap();
    assert_eq!(out, UpdateOutcome::Deleted { force: false });
    assert_eq!(l.phase(), Phase::Deleted);
}

#[test]
fn r46_no_new_finalizers_once_deleting() {
    let add = FinalizerChange::Add(name("example.com/late"));
    let live = pod();
    let u = decide_finalizer_update(&live, &add).unwrap();
    assert!(u.write);
    assert_eq!(list(&u.record.finalizers), ["example.com/late"]);

    let deleting = with_finalizers(terminating(T + 30, Some(30)), &["example.com/x"]);
    assert_eq!(
        decide_finalizer_update(&deleting, &add),
        Err(UpdateError::NoNewFinalizersWhileDeleting)
    );
    // A validation error: 422, as the API server answers it.
    let refused = decide_finalizer_update(&deleting, &add).expect_err("refused");
    assert_eq!(refused.http_status(), 422);
    // Re-stating an existing one is not a new finalizer: a no-op.
    let u =
        decide_finalizer_update(&deleting, &FinalizerChange::Add(name("example.com/x"))).unwrap();
    assert!(!u.write);
    assert!(!u.remove);
    assert_eq!(u.record, deleting);
    // The timestamp and grace are untouched by finalizer updates.
    let u = decide_finalizer_update(&deleting, &FinalizerChange::Remove(name("example.com/x")))
        .unwrap();
    assert_eq!(u.record.deletion_timestamp, ts(T + 30));
    assert_eq!(u.record.deletion_grace_period_seconds, Some(30));
}

#[test]
fn r47_one_options_value_gives_each_pod_its_own_grace() {
    // DeleteCollection's equivalent: one options value, several objects; the
    // grace computed for one does not leak into the next.
    let options = DeleteOptions::default();
    let mut short = pod();
    short.termination_grace_period_seconds = Some(10);
    let mut done = pod();
    done.phase = PodPhase::Failed;
    let a = decide_pod(&pod(), &options, wall(T));
    let b = decide_pod(&done, &options, wall(T));
    let c = decide_pod(&short, &options, wall(T));
    assert_eq!(a.grace_period_seconds, Some(30));
    assert_eq!(b.grace_period_seconds, Some(0));
    assert_eq!(c.grace_period_seconds, Some(10));
    assert_eq!(c.record.deletion_timestamp, ts(T + 10));
    assert_eq!(options, DeleteOptions::default());
}

#[test]
fn r48_timestamps_are_whole_seconds_floored() {
    let d = decide_pod(&pod(), &grace(30), wall_ms(T * 1000 + 999));
    assert_eq!(d.record.deletion_timestamp, ts(T + 30));
    let d = decide_pod(&pod(), &grace(0), wall_ms(T * 1000 + 999));
    assert_eq!(d.record.deletion_timestamp, ts(T));
    // Floor, not truncation toward zero, before the epoch.
    let d = decide_pod(&pod(), &grace(0), wall_ms(-500));
    assert_eq!(d.record.deletion_timestamp, ts(-1));
    // markAsDeleting floors too.
    let d = decide(
        &with_finalizers(generic(), &["x"]),
        &Strategy::GENERIC,
        &DeleteOptions::default(),
        wall_ms(T * 1000 + 250),
    );
    assert_eq!(d.record.deletion_timestamp, ts(T));
}

// ---- D2: no overflow (R89, R90) --------------------------------------------

#[test]
fn r89_grace_beyond_go_duration_range_is_exact_not_wrapped() {
    // Go wraps 9 223 372 037 s to ~292 years in the past; grace adds exactly.
    let d = decide_pod(&pod(), &grace(9_223_372_037), wall(T));
    assert_kept_written(&d);
    assert_eq!(d.record.deletion_timestamp, ts(T + 9_223_372_037));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(9_223_372_037));
    // The last value Go handles agrees with Go.
    let d = decide_pod(&pod(), &grace(9_223_372_036), wall(T));
    assert_eq!(d.record.deletion_timestamp, ts(T + 9_223_372_036));
}

#[test]
fn r90_huge_grace_saturates_the_timestamp_and_records_the_request() {
    // int64(time.Hour) from resttest, and MaxInt64 (Go: now - 1 s).
    for g in [3_600_000_000_000, i64::MAX, MAX_TIMESTAMP_SECONDS] {
        let d = decide_pod(&pod(), &grace(g), wall(T));
        assert_kept_written(&d);
        assert_eq!(
            d.record.deletion_timestamp,
            ts(253_402_300_799),
            "grace {g}"
        );
        assert_eq!(d.record.deletion_grace_period_seconds, Some(g));
        assert_eq!(d.grace_period_seconds, Some(g));
    }
    // Just below the ceiling is not saturated.
    let below = MAX_TIMESTAMP_SECONDS - T;
    let d = decide_pod(&pod(), &grace(below), wall(T));
    assert_eq!(d.record.deletion_timestamp, ts(MAX_TIMESTAMP_SECONDS));
    let d = decide_pod(&pod(), &grace(below - 1), wall(T));
    assert_eq!(d.record.deletion_timestamp, ts(MAX_TIMESTAMP_SECONDS - 1));
}

#[test]
fn r90_shortening_after_a_huge_grace_is_exact_then_clamped() {
    // Go would lose a second here (now+29 instead of now+30); grace is exact:
    // ts = (T + 9 223 372 037) - 9 223 372 037 + 30 = T + 30.
    let first = decide_pod(&pod(), &grace(9_223_372_037), wall(T));
    let d = decide_pod(&first.record, &grace(30), wall(T + 10));
    assert_kept_written(&d);
    assert_eq!(d.record.deletion_timestamp, ts(T + 30));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(30));

    // From a saturated timestamp the exact origin lies far in the past, so
    // R16 clamps: ts = now, grace 1 (kept), or grace 0 (removed).
    let saturated = decide_pod(&pod(), &grace(i64::MAX), wall(T)).record;
    let d = decide_pod(&saturated, &grace(30), wall(T + 10));
    assert_kept_written(&d);
    assert_eq!(d.record.deletion_timestamp, ts(T + 10));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(1));
    let d = decide_pod(&saturated, &grace(0), wall(T + 10));
    assert_written_then_removed(&d);
    assert_eq!(d.record.deletion_timestamp, ts(T + 10));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(0));

    // Extreme stored values do not wrap either.
    let extreme = terminating(i64::MAX, Some(i64::MAX));
    let d = decide_pod(&extreme, &grace(i64::MAX - 1), wall(T));
    assert_eq!(d.record.deletion_timestamp, ts(MAX_TIMESTAMP_SECONDS));
    assert_eq!(d.record.deletion_grace_period_seconds, Some(i64::MAX - 1));
    let low = terminating(i64::MIN, Some(1));
    let d = decide_pod(&low, &grace(0), wall(T));
    assert_eq!(d.record.deletion_timestamp, ts(T));
    assert!(d.remove);
}

// ---- D4: force delete is visible -------------------------------------------

#[test]
fn d4_grace_zero_on_a_scheduled_running_pod_is_flagged_force() {
    let mut l = lifecycle(Strategy::POD, pod());
    let r = l
        .handle(now(T), Input::Delete(grace(0)))
        .delete()
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome, DeleteOutcome::Deleted);
    assert!(r.force);
    assert!(!r.dry_run);
    assert_eq!(l.phase(), Phase::Deleted);
    assert_eq!(
        drain(&mut l),
        [Action::RemoveEndpoints, Action::Remove { force: true }]
    );

    // A dry run reports the same flag.
    let mut l = lifecycle(Strategy::POD, pod());
    let dry = grace(0).with_dry_run(true);
    let r = l
        .handle(now(T), Input::Delete(dry.clone()))
        .delete()
        .unwrap()
        .unwrap();
    assert!(r.force);
    assert_eq!(l.phase(), Phase::Live);

    // Shortening a graceful delete to 0 before the agent confirmed: force.
    let mut l = lifecycle(Strategy::POD, pod());
    let _ = l
        .handle(now(T), Input::Delete(DeleteOptions::default()))
        .delete()
        .unwrap()
        .unwrap();
    let r = l
        .handle(now(T + 5), Input::Delete(grace(0)))
        .delete()
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome, DeleteOutcome::Deleted);
    assert!(r.force);
    assert_eq!(l.record().deletion_timestamp, ts(T + 5));
    assert_eq!(l.record().deletion_grace_period_seconds, Some(0));
}

#[test]
fn d4_grace_zero_with_nothing_running_is_not_force() {
    // Unscheduled: nothing runs anywhere.
    let mut unscheduled = pod();
    unscheduled.scheduled = false;
    let mut l = lifecycle(Strategy::POD, unscheduled);
    let r = l
        .handle(now(T), Input::Delete(grace(0)))
        .delete()
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome, DeleteOutcome::Deleted);
    assert!(!r.force);
    assert_eq!(drain(&mut l), [Action::Remove { force: false }]);

    // Finished pod.
    let mut done = pod();
    done.phase = PodPhase::Succeeded;
    let mut l = lifecycle(Strategy::POD, done);
    let r = l
        .handle(now(T), Input::Delete(grace(0)))
        .delete()
        .unwrap()
        .unwrap();
    assert!(!r.force);

    // A non-graceful type has no workload.
    let mut l = lifecycle(Strategy::GENERIC, generic());
    let r = l
        .handle(now(T), Input::Delete(grace(0)))
        .delete()
        .unwrap()
        .unwrap();
    assert!(!r.force);

    // Kept records are never force.
    let mut l = lifecycle(Strategy::POD, with_finalizers(pod(), &["x"]));
    let r = l
        .handle(now(T), Input::Delete(grace(0)))
        .delete()
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome, DeleteOutcome::Graceful);
    assert!(!r.force);
    assert_eq!(l.record().deletion_grace_period_seconds, Some(0));
}

#[test]
fn duration_displays_in_seconds_or_milliseconds() {
    use grace_core::Duration;
    let shown = |ms: u64| Duration::from_millis(ms).to_string();
    assert_eq!(shown(0), "0s");
    assert_eq!(shown(1), "1ms");
    assert_eq!(shown(250), "250ms");
    assert_eq!(shown(1_000), "1s");
    assert_eq!(shown(1_500), "1.5s");
    assert_eq!(shown(2_025), "2.025s");
    assert_eq!(shown(2_250), "2.25s");
    assert_eq!(shown(30_000), "30s");
    assert_eq!(shown(u64::MAX), "18446744073709551.615s");
}

#[test]
fn pod_phase_as_str_and_from_str_round_trip() {
    use grace_core::{PodPhase, UnknownPodPhase};
    for phase in [
        PodPhase::Pending,
        PodPhase::Running,
        PodPhase::Succeeded,
        PodPhase::Failed,
        PodPhase::Unknown,
        PodPhase::Unset,
    ] {
        assert_eq!(phase.as_str().parse::<PodPhase>(), Ok(phase));
        assert_eq!(phase.to_string(), phase.as_str());
    }
    assert_eq!(PodPhase::Unset.as_str(), "");
    assert_eq!("running".parse::<PodPhase>(), Err(UnknownPodPhase));
    assert_eq!("Bogus".parse::<PodPhase>(), Err(UnknownPodPhase));
}
