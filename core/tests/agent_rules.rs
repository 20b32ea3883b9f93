//! Agent-level rules of core/RULES.md, one test (or more) per rule, each
//! driven through [`Lifecycle`]: the effective grace (R50–R58), the
//! per-container kill sequence (R59–R66), sidecar ordering (R69–R72),
//! kubelet-initiated kills and the final delete (R73–R75), node loss and
//! shutdown (R80–R84), endpoints (R85, R86, R88), Go overflow (R89–R91), and grace's decisions D1–D8.
//!
//! Not here:
//! - R67/R68 (probe `terminationGracePeriodSeconds`, `setTerminationGracePeriod`)
//!   belong to the container-restart path (liveness/startup failure), which
//!   the core does not model: every kill the core makes is on the pod
//!   termination path, where R58 says the effective grace is used.
//! - D6 (deadlines survive restarts) belongs to the std runtime; the core
//!   has no hook to resume a lifecycle mid-kill.
//! - R76 (mirror pods) and R77–R79 (node controller timings) are outside
//!   the core.
//! - R87 (the legacy Endpoints controller) is a consumer's choice: grace
//!   says when a pod stops being ready ([`Action::RemoveEndpoints`], R85,
//!   R88); whether a consumer then drops it or keeps it as terminating
//!   (EndpointSlices, R86) is the consumer's.
//!
//! All instants are milliseconds after `T` (a whole unix second) on both
//! clocks, unless a test says otherwise.
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
    Action, ContainerSpec, DeleteOptions, DeleteOutcome, DeleteResponse, Duration, EffectiveGrace,
    FinalizerChange, Handled, Instant, Lifecycle, Link, MAX_TIMESTAMP_SECONDS, Name, Now, Phase,
    PodPhase, Record, Stage, Strategy, Timestamp, UpdateOutcome, WallTime, effective_grace,
};

// ---- helpers ------------------------------------------------------------------

type Pod = Lifecycle<4, 4>;

/// The moment of the first delete, in whole unix seconds.
const T: i64 = 1_700_000_000;
const T_MS: i64 = T * 1000;

/// A plain container: no hook, not a sidecar, running.
const APP: ContainerSpec = ContainerSpec {
    pre_stop: false,
    sidecar: false,
    stopped: false,
};
/// A container with a pre-stop hook.
const HOOKED: ContainerSpec = ContainerSpec {
    pre_stop: true,
    ..APP
};
/// A sidecar (restartable init container) without a hook.
const SIDECAR: ContainerSpec = ContainerSpec {
    sidecar: true,
    ..APP
};
/// A sidecar with a pre-stop hook.
const HOOKED_SIDECAR: ContainerSpec = ContainerSpec {
    pre_stop: true,
    sidecar: true,
    stopped: false,
};
/// A container that is not running.
const EXITED: ContainerSpec = ContainerSpec {
    stopped: true,
    ..APP
};

/// `ms` milliseconds after `T`, on both clocks.
fn at(ms: i64) -> Now {
    Now::from_unix_millis(T_MS + ms)
}

/// A monotonic instant as milliseconds after `T`.
fn rel(i: Instant) -> i64 {
    i64::try_from(i.as_millis()).expect("instant fits i64") - T_MS
}

/// `T + s` as a stored timestamp.
fn ts(s: i64) -> Option<Timestamp> {
    Some(Timestamp::from_unix_seconds(T + s))
}

fn name(s: &str) -> Name {
    Name::try_from(s).expect("short name")
}

/// A live, scheduled, running pod record with spec grace 30.
fn record() -> Record<4> {
    Record::new(name("pod-uid-1"))
}

/// The same, held by one finalizer.
fn record_with_finalizer() -> Record<4> {
    let mut r = record();
    r.finalizers
        .push(name("example.com/keep"))
        .expect("room for a finalizer");
    r
}

fn pod(containers: &[ContainerSpec]) -> Pod {
    pod_from(record(), containers)
}

fn pod_from(record: Record<4>, containers: &[ContainerSpec]) -> Pod {
    Lifecycle::new(Strategy::POD, record, containers).expect("within capacity")
}

/// Takes every owed action, in order.
fn drain(p: &mut Pod) -> Vec<Action> {
    let mut out = Vec::new();
    while let Some(a) = p.poll_action() {
        out.push(a);
    }
    out
}

/// The next deadline, in ms after `T`.
fn next(p: &Pod) -> Option<i64> {
    p.poll_timeout().map(rel)
}

/// Advances exactly to the next deadline, handles it and drains: the
/// instant (ms after `T`) and the actions it produced.
fn advance(p: &mut Pod) -> (i64, Vec<Action>) {
    let deadline = p.poll_timeout().expect("a deadline is pending");
    let wall = i64::try_from(deadline.as_millis()).unwrap_or(i64::MAX);
    let _ = p.handle(
        Now::new(WallTime::from_unix_millis(wall), deadline),
        Input::Timeout,
    );
    (rel(deadline), drain(p))
}

/// Calls `handle_timeout` at `ms` and asserts that nothing happened.
fn quiet_at(p: &mut Pod, ms: i64) {
    let _ = p.handle(at(ms), Input::Timeout);
    assert_eq!(drain(p), [], "nothing is due at {ms} ms");
}

fn delete(p: &mut Pod, ms: i64, grace: Option<i64>) -> DeleteResponse {
    let options = DeleteOptions::default().with_grace_period(grace);
    p.handle(at(ms), Input::Delete(options.clone()))
        .delete()
        .unwrap()
        .expect("delete accepted")
}

fn sync(p: &mut Pod, ms: i64) {
    assert_eq!(
        p.handle(at(ms), Input::AgentSync).handled(),
        Handled::Applied
    );
}

fn evict(p: &mut Pod, ms: i64, grace: i64) {
    assert_eq!(
        p.handle(at(ms), Input::evict(grace)).handled(),
        Handled::Applied
    );
}

fn exited(p: &mut Pod, ms: i64, container: usize) {
    assert_eq!(
        p.handle(at(ms), Input::container_exited(container))
            .container(),
        Ok(Handled::Applied)
    );
}

fn hook_done(p: &mut Pod, ms: i64, container: usize) {
    assert_eq!(
        p.handle(at(ms), Input::pre_stop_finished(container))
            .container(),
        Ok(Handled::Applied)
    );
}

/// A container's next deadline, in ms after `T`.
fn deadline_of(p: &Pod, container: usize) -> Option<i64> {
    p.containers()[container].deadline().map(rel)
}

fn pre_stop(container: u8, budget_seconds: u32) -> Action {
    Action::RunPreStop {
        container,
        budget_seconds,
    }
}
fn term(container: u8) -> Action {
    Action::SendStopSignal { container }
}
fn kill(container: u8) -> Action {
    Action::SendKill { container }
}
fn gone(container: u8) -> Action {
    Action::ContainerStopped { container }
}
const REMOVE: Action = Action::Remove { force: false };
const FORCE_REMOVE: Action = Action::Remove { force: true };
const ENDPOINTS: Action = Action::RemoveEndpoints;

/// A pod deleted at `T` with `grace` and synced by the agent at `T`:
/// endpoints removed, kill started.
fn killing(containers: &[ContainerSpec], grace: Option<i64>) -> (Pod, Vec<Action>) {
    let mut p = pod(containers);
    let _ = delete(&mut p, 0, grace);
    sync(&mut p, 0);
    let actions = drain(&mut p);
    (p, actions)
}

// ---- R50–R55: the effective grace --------------------------------------------

#[test]
fn r50_budget_never_grows_once_started() {
    let (mut p, actions) = killing(&[APP], Some(10));
    assert_eq!(actions, [ENDPOINTS, term(0)]);
    assert_eq!(next(&p), Some(10_000));

    // A longer override after the start changes nothing.
    evict(&mut p, 1_000, 60);
    assert_eq!(drain(&mut p), []);
    assert_eq!(p.agent().remembered_grace, 10);
    assert_eq!(next(&p), Some(10_000));

    // Nor does a re-sync of the same record.
    sync(&mut p, 2_000);
    assert_eq!(next(&p), Some(10_000));
    assert_eq!(advance(&mut p), (10_000, vec![kill(0)]));

    // The pure computation: whatever comes later, never above 10.
    for d in [None, Some(0), Some(11), Some(60), Some(i64::MAX)] {
        for o in [None, Some(0), Some(11), Some(i64::MAX)] {
            let g = effective_grace(10, d, o, Some(600));
            assert!(g.seconds <= 10, "{d:?} {o:?} -> {g:?}");
        }
    }
    assert_eq!(effective_grace(10, Some(60), None, Some(600)).seconds, 10);
}

#[test]
fn r51_smaller_deletion_grace_wins_over_spec() {
    let (mut p, actions) = killing(&[APP], Some(10));
    assert_eq!(actions, [ENDPOINTS, term(0)]);
    assert_eq!(p.agent().remembered_grace, 10);
    quiet_at(&mut p, 9_999);
    assert_eq!(advance(&mut p), (10_000, vec![kill(0)]));
}

#[test]
fn r51_first_deletion_grace_is_taken_even_above_spec() {
    // Nothing remembered yet (g == 0), so the record's 45 applies over the
    // spec's 30.
    let mut p = pod(&[APP]);
    let _ = delete(&mut p, 0, Some(45));
    assert_eq!(p.record().deletion_timestamp, ts(45));
    assert_eq!(p.record().deletion_grace_period_seconds, Some(45));
    sync(&mut p, 0);
    assert_eq!(p.agent().remembered_grace, 45);
    assert_eq!(next(&p), Some(45_000));
}

#[test]
fn r52_eviction_override_only_shortens() {
    let (mut p, _) = killing(&[APP], None);
    assert_eq!(next(&p), Some(30_000));
    evict(&mut p, 5_000, 60);
    assert_eq!(p.agent().remembered_grace, 30);
    assert_eq!(next(&p), Some(30_000));
    evict(&mut p, 5_000, 10);
    assert_eq!(p.agent().remembered_grace, 10);
    // D5: counted from now: 5 s + 10 s.
    assert_eq!(next(&p), Some(15_000));
    assert_eq!(drain(&mut p), []);
}

#[test]
fn r53_spec_grace_is_the_fallback_when_the_record_has_none() {
    // A (legacy) record with a deletion timestamp but no deletion grace.
    let mut r = record();
    r.deletion_timestamp = ts(20);
    r.deletion_grace_period_seconds = None;
    r.termination_grace_period_seconds = Some(20);
    let mut p = pod_from(r, &[APP]);
    assert_eq!(p.phase(), Phase::GracefulPending);
    sync(&mut p, 0);
    assert_eq!(drain(&mut p), [term(0)]);
    assert_eq!(p.agent().remembered_grace, 20);
    assert_eq!(next(&p), Some(20_000));
}

#[test]
fn r53_zero_deletion_grace_counts_as_applied_and_gives_one_second() {
    // Force delete of a pod held by a finalizer: kept with dgps 0.
    let mut p = pod_from(record_with_finalizer(), &[HOOKED]);
    let r = delete(&mut p, 0, Some(0));
    assert_eq!(r.outcome, DeleteOutcome::Graceful);
    assert!(!r.force);
    assert_eq!(p.record().deletion_timestamp, ts(0));
    assert_eq!(p.record().deletion_grace_period_seconds, Some(0));
    assert!(p.is_stored());
    assert_eq!(drain(&mut p), [ENDPOINTS]);

    // The agent kills with 1 s, not the spec's 30.
    sync(&mut p, 500);
    assert_eq!(p.agent().remembered_grace, 1);
    assert_eq!(drain(&mut p), [pre_stop(0, 1)]);
    assert_eq!(advance(&mut p), (1_500, vec![term(0)]));
    assert_eq!(advance(&mut p), (3_500, vec![kill(0)]));
    assert_eq!(
        effective_grace(0, Some(0), None, Some(30)),
        EffectiveGrace {
            seconds: 1,
            shortened: false
        }
    );
}

#[test]
fn r54_negative_deletion_grace_gives_one_second() {
    let mut r = record();
    r.deletion_timestamp = ts(1);
    r.deletion_grace_period_seconds = Some(-5);
    let mut p = pod_from(r, &[HOOKED]);
    sync(&mut p, 0);
    assert_eq!(drain(&mut p), [pre_stop(0, 1)]);
    assert_eq!(advance(&mut p), (1_000, vec![term(0)]));
    assert_eq!(advance(&mut p), (3_000, vec![kill(0)]));
}

#[test]
fn r54_zero_override_gives_one_second() {
    let mut p = pod(&[HOOKED]);
    evict(&mut p, 0, 0);
    assert_eq!(p.agent().remembered_grace, 1);
    assert_eq!(drain(&mut p), [pre_stop(0, 1)]);
    assert_eq!(advance(&mut p), (1_000, vec![term(0)]));
}

#[test]
fn r55_shortened_budget_is_detected_and_remembered() {
    let (mut p, actions) = killing(&[APP], None);
    assert_eq!(actions, [ENDPOINTS, term(0)]);
    // 30 → 5 at +2 s: ts = T+30−30+5 = T+5, not in the past.
    let r = delete(&mut p, 2_000, Some(5));
    assert_eq!(r.outcome, DeleteOutcome::Graceful);
    assert_eq!(p.record().deletion_timestamp, ts(5));
    assert_eq!(p.record().deletion_grace_period_seconds, Some(5));
    assert_eq!(
        next(&p),
        Some(30_000),
        "nothing changes until the agent sees it"
    );
    sync(&mut p, 2_000);
    assert_eq!(p.agent().remembered_grace, 5);
    // D5 instead of Kubernetes' restart: SIGTERM is not sent again.
    assert_eq!(drain(&mut p), []);
    assert_eq!(next(&p), Some(7_000));
    assert_eq!(
        effective_grace(30, Some(5), None, Some(30)),
        EffectiveGrace {
            seconds: 5,
            shortened: true
        }
    );
}

// ---- R56–R58: the budget per container ------------------------------------------

#[test]
fn r56_every_container_gets_the_full_budget_in_parallel() {
    let (mut p, actions) = killing(&[HOOKED, HOOKED, APP], Some(20));
    assert_eq!(
        actions,
        [ENDPOINTS, pre_stop(0, 20), pre_stop(1, 20), term(2)]
    );
    for c in 0..3 {
        assert_eq!(p.containers()[c].budget_seconds(), 20);
        assert_eq!(deadline_of(&p, c), Some(20_000));
    }
    assert_eq!(advance(&mut p), (20_000, vec![term(0), term(1), kill(2)]));
    assert_eq!(advance(&mut p), (22_000, vec![kill(0), kill(1)]));
}

#[test]
fn r57_budget_starts_when_the_agent_starts_the_kill() {
    let mut p = pod(&[APP]);
    let _ = delete(&mut p, 0, None);
    assert_eq!(p.record().deletion_timestamp, ts(30));
    assert_eq!(drain(&mut p), [ENDPOINTS]);
    // Nobody counts down the deletion timestamp.
    assert_eq!(p.poll_timeout(), None);
    quiet_at(&mut p, 40_000);
    assert_eq!(p.phase(), Phase::GracefulPending);
    sync(&mut p, 100_000);
    assert_eq!(p.phase(), Phase::Terminating);
    assert_eq!(drain(&mut p), [term(0)]);
    assert_eq!(next(&p), Some(130_000));
}

#[test]
fn r58_termination_path_kills_with_the_effective_grace() {
    let (p, actions) = killing(&[HOOKED], Some(7));
    assert_eq!(actions, [ENDPOINTS, pre_stop(0, 7)]);
    assert_eq!(
        p.containers()[0].stage(),
        Stage::PreStop {
            cutoff: Instant::from_millis((T_MS + 7_000) as u64)
        }
    );
}

// ---- R59–R66: the per-container kill sequence -----------------------------------

#[test]
fn r59_force_delete_still_runs_pre_stop_for_one_second() {
    let mut p = pod(&[HOOKED]);
    let r = delete(&mut p, 0, Some(0));
    assert_eq!(r.outcome, DeleteOutcome::Deleted);
    assert_eq!(p.phase(), Phase::Deleted);
    assert_eq!(drain(&mut p), [ENDPOINTS, FORCE_REMOVE]);
    sync(&mut p, 200);
    assert_eq!(drain(&mut p), [pre_stop(0, 1)]);
    assert_eq!(advance(&mut p), (1_200, vec![term(0)]));
    assert_eq!(advance(&mut p), (3_200, vec![kill(0)]));
    exited(&mut p, 3_300, 0);
    assert_eq!(drain(&mut p), [gone(0)], "removed once only");
}

#[test]
fn r60_agent_stops_waiting_for_the_hook_at_the_budget_end() {
    let (mut p, actions) = killing(&[HOOKED], Some(10));
    assert_eq!(actions, [ENDPOINTS, pre_stop(0, 10)]);
    quiet_at(&mut p, 9_999);
    assert_eq!(advance(&mut p), (10_000, vec![term(0)]));
    // The hook was not killed and may still return: too late to matter.
    assert_eq!(
        p.handle(at(11_000), Input::pre_stop_finished(0))
            .container(),
        Ok(Handled::Ignored)
    );
    assert_eq!(drain(&mut p), []);
    assert_eq!(next(&p), Some(12_000));
}

#[test]
fn r61_pre_stop_time_is_truncated_to_whole_seconds() {
    let (mut p, _) = killing(&[HOOKED], None);
    // 9.5 s of hook cost 9 s: 30 − 9 = 21 s left after SIGTERM.
    hook_done(&mut p, 9_500, 0);
    assert_eq!(drain(&mut p), [term(0)]);
    assert_eq!(p.containers()[0].budget_seconds(), 21);
    assert_eq!(
        p.containers()[0].stop_signal_sent_at().map(rel),
        Some(9_500)
    );
    assert_eq!(next(&p), Some(30_500));
    assert_eq!(advance(&mut p), (30_500, vec![kill(0)]));
}

#[test]
fn r62_at_least_two_seconds_between_stop_signal_and_kill() {
    // 29.5 s of hook: 30 − 29 = 1 s left, raised to 2.
    let (mut p, _) = killing(&[HOOKED], None);
    hook_done(&mut p, 29_500, 0);
    assert_eq!(drain(&mut p), [term(0)]);
    assert_eq!(next(&p), Some(31_500));

    // A 1 s budget without a hook: SIGKILL 2 s after SIGTERM.
    let mut p = pod(&[APP]);
    evict(&mut p, 0, 1);
    assert_eq!(drain(&mut p), [term(0)]);
    assert_eq!(next(&p), Some(2_000));
}

#[test]
fn r62_the_floor_counts_from_when_the_stop_signal_really_went_out() {
    // Decided at 0 with a 1 s budget (SIGKILL due at 2 000), sent at 700:
    // SIGKILL no sooner than 2 700.
    let mut p = pod(&[APP]);
    evict(&mut p, 0, 1);
    assert_eq!(drain(&mut p), [term(0)]);
    assert_eq!(
        p.handle(at(700), Input::stop_signal_sent(0)).container(),
        Ok(Handled::Applied)
    );
    assert_eq!(p.containers()[0].stop_signal_sent_at().map(rel), Some(700));
    assert_eq!(next(&p), Some(2_700));
    // Reported again later (a repeat after a restart): later still.
    assert_eq!(
        p.handle(at(900), Input::stop_signal_sent(0)).container(),
        Ok(Handled::Applied)
    );
    assert_eq!(next(&p), Some(2_900));
    // Earlier than what is known, or no such container: nothing moves.
    assert_eq!(
        p.handle(at(800), Input::stop_signal_sent(0)).container(),
        Ok(Handled::Ignored)
    );
    assert_eq!(
        p.handle(at(800), Input::stop_signal_sent(1)).container(),
        Err(grace_core::UnknownContainer)
    );
    assert_eq!(advance(&mut p), (2_900, vec![kill(0)]));

    // A budget that ends after the floor keeps its deadline (D6: never
    // extended beyond what the floor needs).
    let (mut p, actions) = killing(&[APP], None);
    assert_eq!(actions, [ENDPOINTS, term(0)]);
    assert_eq!(
        p.handle(at(500), Input::stop_signal_sent(0)).container(),
        Ok(Handled::Applied)
    );
    assert_eq!(next(&p), Some(30_000));

    // Before the stop signal was decided, it cannot have been sent.
    let (mut p, _) = killing(&[HOOKED], None);
    assert_eq!(
        p.handle(at(500), Input::stop_signal_sent(0)).container(),
        Ok(Handled::Ignored)
    );
    assert_eq!(next(&p), Some(30_000));
}

#[test]
fn r62_stop_signal_sent_takes_the_actions_container_index_as_every_input_does() {
    // The index straight from the action (a `u8`), as for the other
    // container inputs; on a table too, whose deadline queue follows.
    let mut p = pod(&[APP]);
    evict(&mut p, 0, 1);
    let Some(Action::SendStopSignal { container }) = p.poll_action() else {
        panic!("a stop signal first");
    };
    assert_eq!(
        p.handle(at(700), Input::stop_signal_sent(container))
            .container(),
        Ok(Handled::Applied)
    );
    assert_eq!(next(&p), Some(2_700));
    assert_eq!(
        p.handle(at(800), Input::stop_signal_sent(1u8)).container(),
        Err(grace_core::UnknownContainer)
    );

    let mut table: grace_core::Table<2, 4, 4> = grace_core::Table::new();
    let mut p = pod(&[APP]);
    evict(&mut p, 0, 1);
    let id = table.insert(p).expect("room");
    let (_, action) = table.poll_action().expect("owed");
    let Action::SendStopSignal { container } = action else {
        panic!("a stop signal first, not {action:?}");
    };
    assert_eq!(
        table.handle(at(700), id, Input::stop_signal_sent(container)),
        Ok(grace_core::Reply::Handled(Ok(Handled::Applied)))
    );
    assert_eq!(
        table.poll_timeout(),
        table.get(id).and_then(|l| l.poll_timeout())
    );
    assert_eq!(table.poll_timeout().map(rel), Some(2_700));
}

#[test]
fn r63_no_kill_when_the_process_exits_first() {
    let (mut p, actions) = killing(&[APP], None);
    assert_eq!(actions, [ENDPOINTS, term(0)]);
    exited(&mut p, 4_000, 0);
    assert_eq!(drain(&mut p), [gone(0), REMOVE]);
    assert_eq!(p.poll_timeout(), None);
    let _ = p.handle(at(30_000), Input::Timeout);
    assert_eq!(drain(&mut p), []);
}

#[test]
fn r63_kill_at_stop_signal_plus_timeout() {
    let (mut p, _) = killing(&[APP], None);
    quiet_at(&mut p, 29_999);
    assert_eq!(advance(&mut p), (30_000, vec![kill(0)]));
    assert_eq!(p.containers()[0].stage(), Stage::Killed);
    assert_eq!(p.poll_timeout(), None);
    assert!(p.is_stored(), "a kill is not an exit");
    exited(&mut p, 30_100, 0);
    assert_eq!(drain(&mut p), [gone(0), REMOVE]);
}

#[test]
fn r64_hung_pre_stop_kills_at_grace_plus_two() {
    let (mut p, actions) = killing(&[HOOKED], None);
    assert_eq!(actions, [ENDPOINTS, pre_stop(0, 30)]);
    assert_eq!(advance(&mut p), (30_000, vec![term(0)]));
    assert_eq!(advance(&mut p), (32_000, vec![kill(0)]));

    // A hook that returns just before the budget end: still ≤ grace + 2.
    let (mut p, _) = killing(&[HOOKED], None);
    hook_done(&mut p, 29_999, 0);
    assert_eq!(drain(&mut p), [term(0)]);
    assert_eq!(next(&p), Some(31_999));
}

#[test]
fn r65_sidecar_ordering_can_push_kill_just_under_grace_plus_three() {
    let (mut p, actions) = killing(&[HOOKED, HOOKED_SIDECAR], None);
    assert_eq!(actions, [ENDPOINTS, pre_stop(0, 30), pre_stop(1, 30)]);
    // The sidecar's hook returns at 0.9 s (charged 0 s) and it waits for the
    // main container, at most its whole 30 s.
    hook_done(&mut p, 900, 1);
    assert_eq!(drain(&mut p), []);
    assert_eq!(
        p.containers()[1].stage(),
        Stage::AwaitingTurn {
            cutoff: Instant::from_millis((T_MS + 30_900) as u64)
        }
    );
    // The main hook hangs: SIGTERM at 30, SIGKILL at 32.
    assert_eq!(advance(&mut p), (30_000, vec![term(0)]));
    // The wait (30 s) is charged in full: 0 left, raised to 2.
    assert_eq!(advance(&mut p), (30_900, vec![term(1)]));
    assert_eq!(advance(&mut p), (32_000, vec![kill(0)]));
    assert_eq!(advance(&mut p), (32_900, vec![kill(1)]));
}

#[test]
fn r66_pod_kill_time_is_the_latest_container() {
    let (mut p, actions) = killing(&[HOOKED, APP], None);
    assert_eq!(actions, [ENDPOINTS, pre_stop(0, 30), term(1)]);
    assert_eq!(advance(&mut p), (30_000, vec![term(0), kill(1)]));
    exited(&mut p, 30_100, 1);
    assert_eq!(drain(&mut p), [gone(1)]);
    assert!(p.is_stored(), "container 0 still runs");
    assert_eq!(p.phase(), Phase::Terminating);
    assert_eq!(advance(&mut p), (32_000, vec![kill(0)]));
    exited(&mut p, 32_050, 0);
    assert_eq!(drain(&mut p), [gone(0), REMOVE]);
    assert_eq!(p.record().deletion_timestamp, ts(32));
}

// ---- R69–R72: sidecar ordering ---------------------------------------------------

#[test]
fn r69_sidecars_stop_after_main_containers_in_reverse_order() {
    let (mut p, actions) = killing(&[SIDECAR, SIDECAR, APP], None);
    assert_eq!(actions, [ENDPOINTS, term(2)]);
    exited(&mut p, 3_000, 2);
    assert_eq!(drain(&mut p), [gone(2), term(1)]);
    // 3 s of waiting charged: 27 s left.
    assert_eq!(deadline_of(&p, 1), Some(30_000));
    exited(&mut p, 4_000, 1);
    assert_eq!(drain(&mut p), [gone(1), term(0)]);
    assert_eq!(deadline_of(&p, 0), Some(30_000));
    exited(&mut p, 5_000, 0);
    assert_eq!(drain(&mut p), [gone(0), REMOVE]);
}

#[test]
fn r69_containers_not_running_count_as_terminated() {
    let (p, actions) = killing(&[SIDECAR, EXITED], None);
    assert_eq!(actions, [ENDPOINTS, term(0)]);
    assert_eq!(deadline_of(&p, 0), Some(30_000));
}

#[test]
fn r70_sidecar_wait_is_charged_in_whole_seconds() {
    let (mut p, actions) = killing(&[APP, SIDECAR], None);
    assert_eq!(actions, [ENDPOINTS, term(0)]);
    exited(&mut p, 10_700, 0);
    assert_eq!(drain(&mut p), [gone(0), term(1)]);
    // 10.7 s of wait cost 10 s: 20 s left.
    assert_eq!(p.containers()[1].budget_seconds(), 20);
    assert_eq!(deadline_of(&p, 1), Some(30_700));
}

#[test]
fn r70_sidecar_wait_is_bounded_by_the_budget() {
    let (mut p, _) = killing(&[APP, SIDECAR], None);
    assert_eq!(deadline_of(&p, 1), Some(30_000));
    assert_eq!(advance(&mut p), (30_000, vec![kill(0), term(1)]));
    assert_eq!(deadline_of(&p, 1), Some(32_000));
}

#[test]
fn r71_sidecar_pre_stop_starts_with_the_main_containers() {
    let (p, actions) = killing(&[APP, HOOKED_SIDECAR], None);
    assert_eq!(actions, [ENDPOINTS, term(0), pre_stop(1, 30)]);
    assert_eq!(deadline_of(&p, 1), Some(30_000));
}

#[test]
fn r72_sidecar_stopped_early_when_its_pre_stop_ate_the_budget() {
    let (mut p, _) = killing(&[HOOKED, HOOKED_SIDECAR], None);
    hook_done(&mut p, 29_500, 0);
    assert_eq!(drain(&mut p), [term(0)]);
    assert_eq!(deadline_of(&p, 0), Some(31_500));
    // The sidecar's hook hangs: at 30 s nothing is left, so no wait — it is
    // stopped while the main container still runs.
    assert_eq!(advance(&mut p), (30_000, vec![term(1)]));
    assert!(matches!(p.containers()[0].stage(), Stage::Stopping { .. }));
    assert_eq!(deadline_of(&p, 1), Some(32_000));
}

// ---- R73–R75: kubelet-initiated kills and the final delete ----------------------

#[test]
fn r73_hard_eviction_kills_with_one_second_and_keeps_the_record() {
    let mut p = pod(&[HOOKED]);
    evict(&mut p, 0, 1);
    assert_eq!(drain(&mut p), [pre_stop(0, 1)]);
    assert_eq!(p.record().deletion_timestamp, None);
    assert_eq!(advance(&mut p), (1_000, vec![term(0)]));
    assert_eq!(advance(&mut p), (3_000, vec![kill(0)]));
    exited(&mut p, 3_200, 0);
    assert_eq!(drain(&mut p), [gone(0)]);
    // Evicted, not deleted: the pod ends Failed and stays.
    assert!(p.is_stored());
    assert_eq!(p.record().phase, PodPhase::Failed);
    assert_eq!(p.record().deletion_timestamp, None);
    assert_eq!(p.record().generation, 1);
    assert_eq!(p.record().resource_version, 2);
}

#[test]
fn r74_soft_eviction_uses_the_shorter_of_max_pod_grace_and_spec() {
    // The eviction manager computes min(evictionMaxPodGracePeriod, TGPS)
    // and hands it over as the override.
    for (max_pod_grace, kill_ms) in [(10, 10_000), (60, 30_000)] {
        let mut p = pod(&[APP]);
        let spec = p.record().termination_grace_period_seconds.expect("spec");
        evict(&mut p, 0, i64::min(max_pod_grace, spec));
        assert_eq!(drain(&mut p), [term(0)]);
        assert_eq!(next(&p), Some(kill_ms));
        assert_eq!(advance(&mut p), (kill_ms, vec![kill(0)]));
        exited(&mut p, kill_ms + 100, 0);
        assert_eq!(drain(&mut p), [gone(0)]);
        assert_eq!(p.record().phase, PodPhase::Failed);
        assert!(p.is_stored());
    }
}

#[test]
fn r75_final_delete_is_grace_zero_and_clamps_the_timestamp_to_now() {
    let (mut p, _) = killing(&[APP], None);
    assert_eq!(p.record().deletion_timestamp, ts(30));
    exited(&mut p, 4_500, 0);
    assert_eq!(drain(&mut p), [gone(0), REMOVE]);
    assert_eq!(p.phase(), Phase::Deleted);
    // R15: T+30 − 30 + 0 = T, before now ⇒ R16: now (floored), dgps 0.
    let r = p.record();
    assert_eq!(r.deletion_timestamp, ts(4));
    assert_eq!(r.deletion_grace_period_seconds, Some(0));
    assert_eq!(r.generation, 2);
    assert_eq!(r.resource_version, 3);
}

#[test]
fn r75_final_delete_waits_for_finalizers_then_removes() {
    let mut p = pod_from(record_with_finalizer(), &[APP]);
    let _ = delete(&mut p, 0, None);
    sync(&mut p, 0);
    let _ = drain(&mut p);
    exited(&mut p, 4_500, 0);
    assert_eq!(drain(&mut p), [gone(0)]);
    assert!(p.is_stored());
    assert_eq!(p.phase(), Phase::Terminating);
    assert_eq!(p.record().deletion_timestamp, ts(4));
    assert_eq!(p.record().deletion_grace_period_seconds, Some(0));
    // R45: removing the last finalizer with dgps 0 completes the deletion.
    let outcome = p
        .handle(
            at(6_000),
            Input::FinalizerUpdate(FinalizerChange::Remove(name("example.com/keep"))),
        )
        .update()
        .unwrap()
        .expect("update accepted");
    assert_eq!(outcome, UpdateOutcome::Deleted { force: false });
    assert_eq!(drain(&mut p), [REMOVE]);
    assert_eq!(p.phase(), Phase::Deleted);
}

// ---- R80–R82: node loss ------------------------------------------------------------

#[test]
fn r80_lost_node_keeps_the_record_indefinitely() {
    let mut p = pod(&[APP]);
    let _ = delete(&mut p, 0, None);
    assert_eq!(drain(&mut p), [ENDPOINTS]);
    assert_eq!(
        p.handle(at(1_000), Input::NodeLost).handled(),
        Handled::Applied
    );
    assert_eq!(
        p.handle(at(2_000), Input::AgentSync).handled(),
        Handled::Ignored
    );
    assert_eq!(p.poll_timeout(), None);
    // Ten years later: still there, exactly as written.
    quiet_at(&mut p, 10 * 365 * 86_400_000);
    assert_eq!(p.phase(), Phase::GracefulPending);
    assert!(p.is_stored());
    assert_eq!(p.record().deletion_timestamp, ts(30));
    assert_eq!(p.record().deletion_grace_period_seconds, Some(30));
    assert_eq!(p.record().resource_version, 2);
    // The agent's return lets it proceed normally.
    assert_eq!(
        p.handle(at(50_000), Input::NodeReady).handled(),
        Handled::Applied
    );
    assert_eq!(drain(&mut p), []);
    sync(&mut p, 50_000);
    assert_eq!(drain(&mut p), [term(0)]);
    assert_eq!(next(&p), Some(80_000));
}

#[test]
fn r80_lost_agent_keeps_stopping_and_reports_when_back() {
    let (mut p, _) = killing(&[APP], None);
    assert_eq!(
        p.handle(at(1_000), Input::NodeLost).handled(),
        Handled::Applied
    );
    assert_eq!(advance(&mut p), (30_000, vec![kill(0)]));
    exited(&mut p, 30_500, 0);
    assert_eq!(drain(&mut p), [gone(0)]);
    assert!(p.is_stored());
    assert!(p.agent().owes_report);
    assert_eq!(p.phase(), Phase::Terminating);
    assert_eq!(
        p.handle(at(100_000), Input::NodeReady).handled(),
        Handled::Applied
    );
    assert_eq!(drain(&mut p), [REMOVE]);
    assert_eq!(p.record().deletion_timestamp, ts(100));
    assert_eq!(p.record().deletion_grace_period_seconds, Some(0));
}

#[test]
fn r81_force_delete_on_a_lost_node_removes_at_once_flagged() {
    let (mut p, _) = killing(&[APP], None);
    assert_eq!(
        p.handle(at(1_000), Input::NodeLost).handled(),
        Handled::Applied
    );
    let r = delete(&mut p, 5_000, Some(0));
    assert_eq!(r.outcome, DeleteOutcome::Deleted);
    assert!(r.force);
    assert_eq!(p.record().deletion_timestamp, ts(5));
    assert_eq!(p.record().deletion_grace_period_seconds, Some(0));
    assert_eq!(drain(&mut p), [FORCE_REMOVE]);
    assert_eq!(p.phase(), Phase::Deleted);
    // The partitioned agent, unaware, still kills on its own schedule.
    assert_eq!(advance(&mut p), (30_000, vec![kill(0)]));
    exited(&mut p, 30_100, 0);
    assert_eq!(drain(&mut p), [gone(0)]);
    assert_eq!(
        p.handle(at(60_000), Input::NodeReady).handled(),
        Handled::Applied
    );
    assert_eq!(drain(&mut p), [], "no second removal");
}

#[test]
fn r82_fencing_removes_like_pod_gc_with_phase_failed() {
    let mut p = pod(&[APP]);
    let _ = delete(&mut p, 0, None);
    assert_eq!(drain(&mut p), [ENDPOINTS]);
    assert_eq!(
        p.handle(at(1_000), Input::NodeLost).handled(),
        Handled::Applied
    );
    assert_eq!(
        p.handle(at(400_000), Input::NodeFenced).handled(),
        Handled::Applied
    );
    assert_eq!(drain(&mut p), [gone(0), REMOVE]);
    assert_eq!(p.phase(), Phase::Deleted);
    let r = p.record();
    assert_eq!(r.phase, PodPhase::Failed);
    assert_eq!(r.deletion_timestamp, ts(400));
    assert_eq!(r.deletion_grace_period_seconds, Some(0));
    assert_eq!(r.generation, 2);
    // Written twice after the delete: phase Failed, then the grace-0 delete.
    assert_eq!(r.resource_version, 4);
}

#[test]
fn r82_fencing_mid_kill_sends_no_signal() {
    let (mut p, _) = killing(&[APP], None);
    assert_eq!(
        p.handle(at(1_000), Input::NodeLost).handled(),
        Handled::Applied
    );
    assert_eq!(
        p.handle(at(10_000), Input::NodeFenced).handled(),
        Handled::Applied
    );
    assert_eq!(drain(&mut p), [gone(0), REMOVE]);
    assert_eq!(p.poll_timeout(), None);
    quiet_at(&mut p, 30_000);
}

#[test]
fn r82_fencing_a_live_record_removes_it() {
    let mut p = pod(&[APP]);
    assert_eq!(
        p.handle(at(0), Input::NodeFenced).handled(),
        Handled::Applied
    );
    assert_eq!(drain(&mut p), [gone(0), REMOVE]);
    let r = p.record();
    assert_eq!(r.phase, PodPhase::Failed);
    assert_eq!(r.deletion_timestamp, ts(0));
    assert_eq!(r.deletion_grace_period_seconds, Some(0));
    assert_eq!(r.generation, 2);
    assert_eq!(p.phase(), Phase::Deleted);
}

#[test]
fn r83_deletion_is_visible_at_once_and_the_record_stays_until_removed() {
    // A ReplicaSet replaces the pod as soon as the timestamp is written; a
    // StatefulSet waits for the record to go. Both read it from here.
    let mut p = pod(&[APP]);
    let r = delete(&mut p, 0, None);
    assert_eq!(r.outcome, DeleteOutcome::Graceful);
    assert_eq!(p.record().deletion_timestamp, ts(30));
    assert!(p.is_stored());
    assert_eq!(p.phase(), Phase::GracefulPending);
    sync(&mut p, 0);
    assert_eq!(drain(&mut p), [ENDPOINTS, term(0)]);
    exited(&mut p, 4_000, 0);
    assert_eq!(drain(&mut p), [gone(0), REMOVE]);
    assert!(!p.is_stored());
    assert_eq!(p.phase(), Phase::Deleted);
}

#[test]
fn r84_node_shutdown_override_only_shortens() {
    // The shutdown manager hands over min(shutdownGracePeriod, spec) as an
    // agent-side override, the eviction path: R52 lets it only shorten.
    let shutdown = |p: &Pod, shutdown_grace: i64| {
        let spec = p.record().termination_grace_period_seconds.expect("spec");
        i64::min(shutdown_grace, spec)
    };
    // A live pod: killed with the override.
    let mut p = pod(&[APP]);
    let g = shutdown(&p, 20);
    evict(&mut p, 0, g);
    assert_eq!(drain(&mut p), [term(0)]);
    assert_eq!(next(&p), Some(20_000));
    exited(&mut p, 1_000, 0);
    assert_eq!(drain(&mut p), [gone(0)]);
    assert_eq!(p.record().phase, PodPhase::Failed);

    // A pod already stopping with 30 s: a longer shutdown period changes
    // nothing; a shorter one moves SIGKILL earlier at once (D5).
    let (mut p, _) = killing(&[APP], None);
    let g = shutdown(&p, 60);
    evict(&mut p, 5_000, g);
    assert_eq!(drain(&mut p), []);
    assert_eq!(next(&p), Some(30_000));
    let g = shutdown(&p, 10);
    evict(&mut p, 5_000, g);
    assert_eq!(drain(&mut p), []);
    assert_eq!(next(&p), Some(15_000));
    assert_eq!(advance(&mut p), (15_000, vec![kill(0)]));
}

// ---- R85–R88: endpoints of terminating pods -------------------------------------

#[test]
fn r85_a_serving_pod_leaves_endpoints_when_the_timestamp_is_written() {
    let mut p = pod(&[APP]);
    let _ = delete(&mut p, 0, None);
    // Before any agent has seen the deletion: terminating ⇒ not ready.
    assert_eq!(drain(&mut p), [ENDPOINTS]);
    assert_eq!(p.record().deletion_timestamp, ts(30));
    // Once: a shorter grace later, the agent's sync and the final delete
    // write the record again but do not repeat it.
    let _ = delete(&mut p, 2_000, Some(10));
    sync(&mut p, 2_000);
    exited(&mut p, 3_000, 0);
    assert_eq!(drain(&mut p), [term(0), gone(0), REMOVE]);
}

#[test]
fn r86_finished_pods_and_pods_without_a_node_are_not_in_endpoints() {
    // A terminal phase is out of the endpoints already.
    for phase in [PodPhase::Succeeded, PodPhase::Failed] {
        let mut r = record();
        r.phase = phase;
        let mut p = pod_from(r, &[EXITED]);
        let _ = delete(&mut p, 0, None);
        let actions = drain(&mut p);
        assert!(!actions.contains(&ENDPOINTS), "{phase:?}: {actions:?}");
    }
    // Not scheduled: no node, no address, nothing to take out.
    let mut r = record();
    r.scheduled = false;
    let mut p = pod_from(r, &[APP]);
    let _ = delete(&mut p, 0, None);
    assert_eq!(drain(&mut p), [REMOVE]);
    // Evicted (Failed) and then deleted: it left serving when it ended.
    let mut p = pod(&[APP]);
    evict(&mut p, 0, 1);
    exited(&mut p, 500, 0);
    assert_eq!(drain(&mut p), [term(0), gone(0)]);
    assert_eq!(p.record().phase, PodPhase::Failed);
    let _ = delete(&mut p, 1_000, None);
    assert!(!drain(&mut p).contains(&ENDPOINTS));
}

#[test]
fn r88_endpoints_go_before_the_stop_signal() {
    // Even when the agent syncs at the very instant of the delete, the
    // pod is out of load balancing before its pre-stop hook or SIGTERM.
    let mut p = pod(&[HOOKED, APP]);
    let _ = delete(&mut p, 0, None);
    sync(&mut p, 0);
    assert_eq!(drain(&mut p), [ENDPOINTS, pre_stop(0, 30), term(1)]);
}

// ---- R89–R91: Go overflow, which grace does not reproduce (D2) -------------------

#[test]
fn r89_grace_past_go_overflow_gives_exact_milliseconds() {
    // 9 223 372 037 s wraps in Go; here it is 9 223 372 037 000 ms.
    assert_eq!(
        Duration::from_grace_seconds(9_223_372_037).as_millis(),
        9_223_372_037_000
    );
    let (p, actions) = killing(&[APP], Some(9_223_372_037));
    assert_eq!(actions, [ENDPOINTS, term(0)]);
    assert_eq!(next(&p), Some(9_223_372_037_000));
}

#[test]
fn r90_huge_grace_timestamps_are_in_the_future_or_saturated() {
    for (grace, expected) in [
        (9_223_372_036, T + 9_223_372_036),
        // Go: 292 years in the past.
        (9_223_372_037, T + 9_223_372_037),
        // Go: wrapped to now + 2 884 905 626 s; here past 9999-12-31.
        (3_600_000_000_000, MAX_TIMESTAMP_SECONDS),
        // Go: now − 1 s.
        (i64::MAX, MAX_TIMESTAMP_SECONDS),
    ] {
        let mut p = pod(&[APP]);
        let _ = delete(&mut p, 0, Some(grace));
        assert_eq!(
            p.record().deletion_timestamp,
            Some(Timestamp::from_unix_seconds(expected)),
            "grace {grace}"
        );
        assert_eq!(p.record().deletion_grace_period_seconds, Some(grace));
        assert!(p.is_stored());
    }
}

#[test]
fn r91_huge_grace_does_not_fire_timers_immediately() {
    let (mut p, actions) = killing(&[HOOKED], Some(9_223_372_037));
    // The hook is waited for, not skipped. Its budget, past 32 bits,
    // saturates in the action; the container keeps it exact.
    assert_eq!(actions, [ENDPOINTS, pre_stop(0, u32::MAX)]);
    assert_eq!(p.containers()[0].budget_seconds(), 9_223_372_037);
    quiet_at(&mut p, 3_600_000);
    assert!(matches!(p.containers()[0].stage(), Stage::PreStop { .. }));
    assert_eq!(next(&p), Some(9_223_372_037_000));
    hook_done(&mut p, 60_000, 0);
    assert_eq!(drain(&mut p), [term(0)]);
    // 60 s charged: the SIGKILL deadline stays at the budget's end.
    assert_eq!(next(&p), Some(9_223_372_037_000));
}

// ---- Decisions --------------------------------------------------------------------

#[test]
fn d1_clamp_keep_truncation_and_floors_as_kubernetes() {
    let mut p = pod(&[HOOKED]);
    let _ = delete(&mut p, 0, Some(100));
    // R16 + R29: 100 → 50 at +60 lands at T+50 < now: now, dgps 1, kept.
    let r = delete(&mut p, 60_000, Some(50));
    assert_eq!(r.outcome, DeleteOutcome::Graceful);
    assert_eq!(p.record().deletion_timestamp, ts(60));
    assert_eq!(p.record().deletion_grace_period_seconds, Some(1));
    assert!(p.is_stored());
    assert_eq!(p.phase(), Phase::GracefulPending);
    // R54/R59: a 1 s budget still runs the hook.
    sync(&mut p, 60_000);
    assert_eq!(drain(&mut p), [ENDPOINTS, pre_stop(0, 1)]);
    // R61: 0.999 s charged as 0; R62: 1 s left, raised to 2.
    hook_done(&mut p, 60_999, 0);
    assert_eq!(drain(&mut p), [term(0)]);
    assert_eq!(p.containers()[0].budget_seconds(), 1);
    assert_eq!(next(&p), Some(62_999));
}

#[test]
fn d2_kill_deadline_saturates_at_the_end_of_time() {
    let mut p = pod(&[APP]);
    let _ = delete(&mut p, 0, None);
    let wall = WallTime::from_unix_millis(T_MS);
    let late = Now::new(wall, Instant::from_millis(u64::MAX - 5_000));
    assert_eq!(p.handle(late, Input::AgentSync).handled(), Handled::Applied);
    assert_eq!(drain(&mut p), [ENDPOINTS, term(0)]);
    assert_eq!(p.poll_timeout(), Some(Instant::MAX));
    let _ = p.handle(
        Now::new(wall, Instant::from_millis(u64::MAX - 1)),
        Input::Timeout,
    );
    assert_eq!(drain(&mut p), []);
    let _ = p.handle(Now::new(wall, Instant::MAX), Input::Timeout);
    assert_eq!(drain(&mut p), [kill(0)]);
}

#[test]
fn d2_grace_i64_max_never_wraps() {
    let mut p = pod(&[HOOKED]);
    let r = delete(&mut p, 0, Some(i64::MAX));
    assert_eq!(r.outcome, DeleteOutcome::Graceful);
    assert_eq!(
        p.record().deletion_timestamp,
        Some(Timestamp::from_unix_seconds(MAX_TIMESTAMP_SECONDS))
    );
    assert_eq!(p.record().deletion_grace_period_seconds, Some(i64::MAX));
    sync(&mut p, 0);
    // The action's budget saturates; the container keeps the exact one.
    assert_eq!(drain(&mut p), [ENDPOINTS, pre_stop(0, u32::MAX)]);
    assert_eq!(p.containers()[0].budget_seconds(), i64::MAX);
    assert_eq!(p.poll_timeout(), Some(Instant::MAX));
    hook_done(&mut p, 5_000, 0);
    assert_eq!(drain(&mut p), [term(0)]);
    assert_eq!(p.containers()[0].budget_seconds(), i64::MAX - 5);
    assert_eq!(p.poll_timeout(), Some(Instant::MAX));
    let _ = p.handle(
        Now::new(
            WallTime::from_unix_millis(i64::MAX),
            Instant::from_millis(u64::MAX - 1),
        ),
        Input::Timeout,
    );
    assert_eq!(drain(&mut p), []);

    // Shortening: R15 exactly (MAX_TS − i64::MAX + 30 is far in the past),
    // then R16: now, dgps 1. The agent applies 1 s at once (D5): SIGTERM
    // was sent, so SIGKILL at now + max(1, 2) s (R62).
    let _ = delete(&mut p, 100_000, Some(30));
    assert_eq!(p.record().deletion_timestamp, ts(100));
    assert_eq!(p.record().deletion_grace_period_seconds, Some(1));
    sync(&mut p, 100_000);
    assert_eq!(p.agent().remembered_grace, 1);
    assert_eq!(next(&p), Some(102_000));
}

#[test]
fn d3_request_without_body_uses_the_spec_default() {
    let mut p = pod(&[APP]);
    let r = p
        .handle(at(0), Input::Delete(DeleteOptions::default()))
        .delete()
        .unwrap()
        .expect("delete accepted");
    assert_eq!(r.outcome, DeleteOutcome::Graceful);
    assert_eq!(p.record().deletion_grace_period_seconds, Some(30));
    assert_eq!(p.record().deletion_timestamp, ts(30));
    assert!(p.is_stored());
}

#[test]
fn d4_force_delete_is_flagged_and_the_workload_still_stopped() {
    let mut p = pod(&[APP]);
    let r = delete(&mut p, 0, Some(0));
    assert_eq!(r.outcome, DeleteOutcome::Deleted);
    assert!(r.force);
    assert_eq!(p.record().deletion_timestamp, ts(0));
    assert_eq!(p.record().deletion_grace_period_seconds, Some(0));
    assert_eq!(p.record().generation, 2);
    assert_eq!(drain(&mut p), [ENDPOINTS, FORCE_REMOVE]);
    assert_eq!(p.phase(), Phase::Deleted);
    // G = 1: SIGTERM now, SIGKILL 2 s later.
    sync(&mut p, 300);
    assert_eq!(drain(&mut p), [term(0)]);
    assert_eq!(advance(&mut p), (2_300, vec![kill(0)]));
    exited(&mut p, 2_400, 0);
    assert_eq!(drain(&mut p), [gone(0)]);
    assert_eq!(p.phase(), Phase::Deleted);
}

#[test]
fn d4_force_deleted_pod_is_not_finished_until_its_kill_ends() {
    let mut p = pod(&[APP]);
    assert!(delete(&mut p, 0, Some(0)).force);
    assert_eq!(drain(&mut p), [ENDPOINTS, FORCE_REMOVE]);
    // The case that looked finished: removed, nothing owed, no deadline,
    // yet the agent has not seen the removal and the process runs.
    assert_eq!(p.phase(), Phase::Deleted);
    assert!(!p.has_action());
    assert_eq!(next(&p), None);
    assert!(!p.is_finished(), "the kill has not even started");
    // The agent's sync starts it (G = 1: SIGTERM now, SIGKILL 2 s later).
    sync(&mut p, 300);
    assert!(!p.is_finished());
    assert_eq!(drain(&mut p), [term(0)]);
    assert!(!p.is_finished(), "SIGKILL is still due");
    assert_eq!(advance(&mut p), (2_300, vec![kill(0)]));
    assert!(!p.is_finished(), "the process has not exited yet");
    exited(&mut p, 2_400, 0);
    assert!(!p.is_finished(), "ContainerStopped is still owed");
    assert_eq!(drain(&mut p), [gone(0)]);
    assert!(p.is_finished());
    assert_eq!(next(&p), None);
    // Nothing more comes of it.
    assert_eq!(
        p.handle(at(5_000), Input::AgentSync).handled(),
        Handled::Applied
    );
    assert_eq!(drain(&mut p), []);
    assert!(p.is_finished());
}

#[test]
fn d4_graceful_delete_is_finished_once_the_removal_is_handed_out() {
    let (mut p, _) = killing(&[APP], Some(5));
    exited(&mut p, 1_000, 0);
    assert_eq!(p.phase(), Phase::Deleted);
    assert!(!p.is_finished(), "Remove is still owed");
    assert_eq!(drain(&mut p), [gone(0), REMOVE]);
    assert!(p.is_finished());
}

#[test]
fn d4_nothing_to_stop_is_finished_with_the_removal() {
    // Unscheduled (R19): no agent, nothing runs.
    let mut r = record();
    r.scheduled = false;
    let mut p = pod_from(r, &[APP]);
    let _ = delete(&mut p, 0, Some(0));
    assert_eq!(drain(&mut p), [REMOVE]);
    assert!(p.is_finished());
    // A record held by a finalizer is never finished, whatever runs.
    let mut p = pod_from(record_with_finalizer(), &[EXITED]);
    let _ = delete(&mut p, 0, Some(0));
    let _ = drain(&mut p);
    assert!(p.is_stored());
    assert!(!p.is_finished());
}

#[test]
fn d4_lost_agent_keeps_a_force_deleted_pod_unfinished_until_fenced() {
    let (mut p, _) = killing(&[APP], None);
    assert_eq!(
        p.handle(at(1_000), Input::NodeLost).handled(),
        Handled::Applied
    );
    assert!(delete(&mut p, 2_000, Some(0)).force);
    assert_eq!(drain(&mut p), [FORCE_REMOVE]);
    assert!(!p.is_finished(), "the lost agent may still be stopping it");
    // D7: proof that the node is gone; nothing runs any more.
    assert_eq!(
        p.handle(at(3_000), Input::NodeFenced).handled(),
        Handled::Applied
    );
    let _ = drain(&mut p);
    assert!(p.is_finished());
}

#[test]
fn d4_force_delete_mid_kill_cuts_the_budget_to_one_second() {
    let (mut p, actions) = killing(&[APP], None);
    assert_eq!(actions, [ENDPOINTS, term(0)]);
    let r = delete(&mut p, 10_000, Some(0));
    assert_eq!(r.outcome, DeleteOutcome::Deleted);
    assert!(r.force);
    // R15: T+30 − 30 + 0 = T < now ⇒ now.
    assert_eq!(p.record().deletion_timestamp, ts(10));
    assert_eq!(drain(&mut p), [FORCE_REMOVE]);
    // The agent sees the removal: dgps 0 ⇒ G = 1, applied at once (D5);
    // SIGTERM was sent at 0, so SIGKILL at now + max(1, 2) s (R62).
    sync(&mut p, 10_000);
    assert_eq!(p.agent().remembered_grace, 1);
    assert_eq!(drain(&mut p), [], "no second SIGTERM");
    assert_eq!(advance(&mut p), (12_000, vec![kill(0)]));
    exited(&mut p, 12_100, 0);
    assert_eq!(drain(&mut p), [gone(0)], "removed once only");
}

#[test]
fn d4_no_force_flag_when_nothing_can_run() {
    // A finished pod (R20): grace 0, nothing to stop.
    let mut r = record();
    r.phase = PodPhase::Succeeded;
    let mut p = pod_from(r, &[APP]);
    let resp = delete(&mut p, 0, None);
    assert_eq!(resp.outcome, DeleteOutcome::Deleted);
    assert!(!resp.force);
    assert_eq!(drain(&mut p), [REMOVE]);

    // An unscheduled pod (R19).
    let mut r = record();
    r.scheduled = false;
    let mut p = pod_from(r, &[APP]);
    let resp = delete(&mut p, 0, Some(0));
    assert!(!resp.force);
    assert_eq!(drain(&mut p), [REMOVE]);

    // Every container already stopped.
    let mut p = pod(&[EXITED]);
    let resp = delete(&mut p, 0, Some(0));
    assert_eq!(resp.outcome, DeleteOutcome::Deleted);
    assert!(!resp.force);
    assert_eq!(drain(&mut p), [ENDPOINTS, REMOVE]);
}

#[test]
fn d5_shortening_moves_kill_deadline_earlier_at_once() {
    let (mut p, _) = killing(&[APP], None);
    assert_eq!(next(&p), Some(30_000));
    evict(&mut p, 10_000, 5);
    assert_eq!(drain(&mut p), [], "no second SIGTERM");
    assert_eq!(next(&p), Some(15_000));
    assert_eq!(advance(&mut p), (15_000, vec![kill(0)]));
}

#[test]
fn d5_shortening_cuts_a_running_pre_stop_without_restarting_it() {
    let (mut p, actions) = killing(&[HOOKED], None);
    assert_eq!(actions, [ENDPOINTS, pre_stop(0, 30)]);
    // 30 → 15 at +10: ts = T+15 (not in the past), dgps 15.
    let _ = delete(&mut p, 10_000, Some(15));
    assert_eq!(p.record().deletion_timestamp, ts(15));
    assert_eq!(p.record().deletion_grace_period_seconds, Some(15));
    sync(&mut p, 10_000);
    assert_eq!(drain(&mut p), [], "the hook is not started again");
    // Cut-off: min(30, 10 + 15) = 25.
    assert_eq!(next(&p), Some(25_000));
    assert_eq!(advance(&mut p), (25_000, vec![term(0)]));
    assert_eq!(advance(&mut p), (27_000, vec![kill(0)]));
}

#[test]
fn d5_r62_shortening_after_the_stop_signal_gives_two_seconds_from_now() {
    let (mut p, _) = killing(&[HOOKED], None);
    hook_done(&mut p, 20_000, 0);
    assert_eq!(drain(&mut p), [term(0)]);
    assert_eq!(next(&p), Some(30_000));
    // Kubernetes' restarted kill: StopContainer with max(1, 2) s at 20.5 s.
    evict(&mut p, 20_500, 1);
    assert_eq!(drain(&mut p), [], "no second SIGTERM");
    assert_eq!(next(&p), Some(22_500));
    assert_eq!(advance(&mut p), (22_500, vec![kill(0)]));
}

/// Issue scenario 1: grace 30, no hook, SIGTERM ignored. Deleted and
/// signalled at T; at T+10 a second delete with grace 5 lands before now
/// (R15: T+5) and is clamped to grace 1 (R16). The agent restarts nothing:
/// no second SIGTERM, SIGKILL at T+10 + max(1, 2) s = T+12 (R55, R62), not
/// T+11; the container stops and the record goes at T+12.
#[test]
fn d5_r62_second_delete_clamped_to_grace_one_after_the_stop_signal_kills_at_t_plus_12() {
    let (mut p, actions) = killing(&[APP], None);
    assert_eq!(actions, [ENDPOINTS, term(0)]);
    assert_eq!(next(&p), Some(30_000));
    let r = delete(&mut p, 10_000, Some(5));
    assert_eq!(r.outcome, DeleteOutcome::Graceful);
    assert_eq!(p.record().deletion_timestamp, ts(10));
    assert_eq!(p.record().deletion_grace_period_seconds, Some(1));
    sync(&mut p, 10_000);
    assert_eq!(p.agent().remembered_grace, 1);
    assert_eq!(drain(&mut p), [], "no second SIGTERM");
    assert_eq!(next(&p), Some(12_000));
    quiet_at(&mut p, 11_999);
    assert_eq!(advance(&mut p), (12_000, vec![kill(0)]));
    exited(&mut p, 12_000, 0);
    assert_eq!(drain(&mut p), [gone(0), REMOVE]);
    assert_eq!(p.phase(), Phase::Deleted);
}

/// Issue scenario 2: the same pod, signalled at T; a hard eviction with
/// grace 1 reaches the agent at T+10: SIGKILL at T+12, not T+11.
#[test]
fn d5_r62_eviction_with_grace_one_after_the_stop_signal_kills_at_t_plus_12() {
    let (mut p, actions) = killing(&[APP], None);
    assert_eq!(actions, [ENDPOINTS, term(0)]);
    evict(&mut p, 10_000, 1);
    assert_eq!(p.agent().remembered_grace, 1);
    assert_eq!(drain(&mut p), [], "no second SIGTERM");
    assert_eq!(next(&p), Some(12_000));
    quiet_at(&mut p, 11_999);
    assert_eq!(advance(&mut p), (12_000, vec![kill(0)]));
    exited(&mut p, 12_000, 0);
    assert_eq!(drain(&mut p), [gone(0), REMOVE]);
}

/// A shortening to 1 s while a hook runs: the cut-off becomes
/// min(current, now + 1 s), the hook is not run again, and the stop
/// signal at the cut-off leaves max(0, 2) = 2 s before SIGKILL (R62).
#[test]
fn d5_r62_shortening_to_one_while_a_hook_runs_cuts_it_at_now_plus_one() {
    let (mut p, actions) = killing(&[HOOKED], None);
    assert_eq!(actions, [ENDPOINTS, pre_stop(0, 30)]);
    evict(&mut p, 10_000, 1);
    assert_eq!(drain(&mut p), [], "the hook is not started again");
    assert_eq!(next(&p), Some(11_000));
    quiet_at(&mut p, 10_999);
    assert_eq!(advance(&mut p), (11_000, vec![term(0)]));
    assert_eq!(next(&p), Some(13_000));
    assert_eq!(advance(&mut p), (13_000, vec![kill(0)]));
}

#[test]
fn d5_shortening_never_moves_a_deadline_later() {
    let (mut p, _) = killing(&[APP], None);
    // Kubernetes' restart (R55) would kill at 25 + 10 = 35 s.
    evict(&mut p, 25_000, 10);
    assert_eq!(p.agent().remembered_grace, 10);
    assert_eq!(next(&p), Some(30_000));
    assert_eq!(advance(&mut p), (30_000, vec![kill(0)]));

    // The same for a running hook: 10 + 25 = 35 > 30 keeps the cut-off.
    let (mut p, _) = killing(&[HOOKED], None);
    evict(&mut p, 10_000, 25);
    assert_eq!(p.agent().remembered_grace, 25);
    assert_eq!(next(&p), Some(30_000));
    assert_eq!(advance(&mut p), (30_000, vec![term(0)]));
    assert_eq!(advance(&mut p), (32_000, vec![kill(0)]));
}

#[test]
fn d5_shortening_bounds_a_sidecar_wait() {
    let (mut p, actions) = killing(&[APP, SIDECAR], None);
    assert_eq!(actions, [ENDPOINTS, term(0)]);
    assert_eq!(deadline_of(&p, 1), Some(30_000));
    evict(&mut p, 10_000, 5);
    assert_eq!(deadline_of(&p, 0), Some(15_000));
    assert_eq!(deadline_of(&p, 1), Some(15_000));
    assert_eq!(advance(&mut p), (15_000, vec![kill(0), term(1)]));
    assert_eq!(deadline_of(&p, 1), Some(17_000));
}

#[test]
fn d7_fenced_agent_never_acts_again() {
    let (mut p, actions) = killing(&[HOOKED], None);
    assert_eq!(actions, [ENDPOINTS, pre_stop(0, 30)]);
    assert_eq!(
        p.handle(at(5_000), Input::NodeFenced).handled(),
        Handled::Applied
    );
    assert_eq!(drain(&mut p), [gone(0), REMOVE]);
    assert_eq!(p.agent().link, Link::Fenced);
    assert_eq!(p.poll_timeout(), None);
    assert_eq!(
        p.handle(at(6_000), Input::pre_stop_finished(0)).container(),
        Ok(Handled::Ignored)
    );
    assert_eq!(
        p.handle(at(6_000), Input::container_exited(0)).container(),
        Ok(Handled::Ignored)
    );
    assert_eq!(
        p.handle(at(6_000), Input::AgentSync).handled(),
        Handled::Ignored
    );
    assert_eq!(
        p.handle(at(6_000), Input::evict(1)).handled(),
        Handled::Ignored
    );
    assert_eq!(
        p.handle(at(6_000), Input::NodeReady).handled(),
        Handled::Ignored
    );
    assert_eq!(
        p.handle(at(6_000), Input::NodeLost).handled(),
        Handled::Ignored
    );
    assert_eq!(
        p.handle(at(6_000), Input::NodeFenced).handled(),
        Handled::Ignored
    );
    quiet_at(&mut p, 40_000);
    assert_eq!(p.phase(), Phase::Deleted);
}

#[test]
fn d8_timestamps_are_whole_seconds_and_deadlines_milliseconds() {
    let mut p = pod(&[APP]);
    // Deleted at T+0.7 s: ts = floor(T+30.7) = T+30.
    let _ = delete(&mut p, 700, None);
    assert_eq!(p.record().deletion_timestamp, ts(30));
    // The agent starts at T+1.3 s: SIGKILL due at exactly T+31.3 s.
    sync(&mut p, 1_300);
    assert_eq!(
        p.poll_timeout(),
        Some(Instant::from_millis((T_MS + 31_300) as u64))
    );
    exited(&mut p, 5_900, 0);
    assert_eq!(drain(&mut p), [ENDPOINTS, term(0), gone(0), REMOVE]);
    // Final delete at T+5.9 s: stored as T+5.
    assert_eq!(p.record().deletion_timestamp, ts(5));
}

/// Found by the model check: an eviction that reached the agent before it
/// saw the deletion made it write the Failed status and consider its report
/// made, so the final delete was never sent and the record stayed
/// Terminating for ever. R75: a terminal pod with a deletion timestamp is
/// deleted by its agent.
#[test]
fn r75_eviction_before_the_first_sync_still_ends_in_the_final_delete() {
    let mut p = pod(&[APP]);
    let _ = delete(&mut p, 0, None);
    evict(&mut p, 0, 1);
    exited(&mut p, 0, 0);
    let _ = drain(&mut p);
    assert_eq!(p.record().phase, PodPhase::Failed, "the eviction's status");
    assert!(p.is_stored(), "the agent has not seen the deletion yet");
    sync(&mut p, 1_000);
    assert_eq!(drain(&mut p), [Action::Remove { force: false }]);
    assert_eq!(p.phase(), Phase::Deleted);
}

// ---- Records written by another API server ----------------------------------------
//
// With a shared store (several agents on etcd) a request may be decided by
// another process. The agent takes the stored record as it is and acts on
// it like a sync; these are the kubelet's reactions to what it watches.

/// Another API server's view of the same object: it decides `options` at
/// `ms` on the record `p` has stored, and returns what it writes (or `None`
/// if it removes the record).
fn decided_elsewhere(p: &Pod, ms: i64, options: &DeleteOptions) -> Option<Record<4>> {
    let mut api = pod_from(p.record().clone(), &[APP]);
    let _ = api
        .handle(at(ms), Input::Delete(options.clone()))
        .delete()
        .unwrap()
        .expect("delete accepted");
    api.is_stored().then(|| api.record().clone())
}

fn observe(p: &mut Pod, ms: i64, stored: Option<&Record<4>>) {
    assert_eq!(p.observe_record(at(ms), stored), Ok(Handled::Applied));
}

#[test]
fn r57_deletion_decided_elsewhere_is_taken_as_stored_and_starts_the_kill() {
    let mut p = pod(&[APP]);
    let stored = decided_elsewhere(&p, 0, &DeleteOptions::with_grace(10)).expect("kept");
    // The agent sees it 700 ms later: the record is the stored one to the
    // millisecond (T + 10), the kill budget counts from the sync (R57).
    observe(&mut p, 700, Some(&stored));
    assert_eq!(p.record(), &stored);
    assert_eq!(p.record().deletion_timestamp, ts(10));
    assert_eq!(drain(&mut p), [ENDPOINTS, term(0)]);
    assert_eq!(p.phase(), Phase::Terminating);
    assert_eq!(next(&p), Some(10_700));
}

#[test]
fn d5_shorter_grace_decided_elsewhere_shortens_the_kill_at_once() {
    let (mut p, _) = killing(&[APP], Some(30));
    assert_eq!(next(&p), Some(30_000));
    // R15: a second delete with grace 5 at T + 2 s counts from the first
    // request: T + 5. The agent shortens its budget when it sees it (D5),
    // counting from then.
    let stored = decided_elsewhere(&p, 2_000, &DeleteOptions::with_grace(5)).expect("kept");
    assert_eq!(stored.deletion_timestamp, ts(5));
    observe(&mut p, 2_000, Some(&stored));
    assert_eq!(p.record().deletion_timestamp, ts(5));
    assert_eq!(p.agent().remembered_grace, 5);
    assert_eq!(next(&p), Some(7_000));
    assert_eq!(advance(&mut p), (7_000, vec![kill(0)]));
}

#[test]
fn d4_record_removed_elsewhere_stops_the_workload_with_the_two_second_floor() {
    let mut p = pod(&[APP]);
    assert_eq!(
        decided_elsewhere(&p, 0, &DeleteOptions::with_grace(0)),
        None,
        "a force delete removes the record at once"
    );
    observe(&mut p, 400, None);
    assert_eq!(p.phase(), Phase::Deleted);
    // Out of endpoints, the stop signal now, SIGKILL 2 s after it; no final
    // delete is owed for a record already gone.
    assert_eq!(drain(&mut p), [ENDPOINTS, term(0)]);
    assert_eq!(advance(&mut p), (2_400, vec![kill(0)]));
    exited(&mut p, 2_500, 0);
    assert_eq!(drain(&mut p), [gone(0)]);
    assert!(p.agent().reported);
}

#[test]
fn r45_last_finalizer_removed_elsewhere_ends_the_object_without_another_delete() {
    let mut p = pod_from(record_with_finalizer(), &[APP]);
    let _ = delete(&mut p, 0, None);
    sync(&mut p, 0);
    exited(&mut p, 4_500, 0);
    let _ = drain(&mut p);
    assert!(
        p.agent().reported,
        "the final delete was made; the finalizer holds the record"
    );
    // Another API server removes the finalizer: R45 removes the record.
    observe(&mut p, 6_000, None);
    assert_eq!(drain(&mut p), []);
    assert_eq!(p.phase(), Phase::Deleted);
    assert_eq!(next(&p), None);
}

#[test]
fn r45_finalizer_removed_elsewhere_before_the_kill_ends_lets_the_final_delete_remove() {
    let mut p = pod_from(record_with_finalizer(), &[APP]);
    let _ = delete(&mut p, 0, Some(10));
    sync(&mut p, 0);
    let _ = drain(&mut p);
    // The finalizer goes while the grace runs: the record stays (R45 needs
    // grace 0), and now holds nothing back.
    let mut stored = p.record().clone();
    assert!(stored.finalizers.remove("example.com/keep"));
    stored.resource_version += 1;
    observe(&mut p, 1_000, Some(&stored));
    assert!(p.record().finalizers.is_empty());
    assert_eq!(drain(&mut p), []);
    // R75: once stopped, the final delete removes the record.
    exited(&mut p, 3_000, 0);
    assert_eq!(drain(&mut p), [gone(0), REMOVE]);
    assert_eq!(p.phase(), Phase::Deleted);
}

#[test]
fn record_of_another_object_under_the_same_name_is_refused() {
    let mut p = pod(&[APP]);
    let other = Record::<4>::new(name("pod-uid-2"));
    assert_eq!(
        p.observe_record(at(0), Some(&other)),
        Err(grace_core::OtherObject)
    );
    assert_eq!(p.record(), &record(), "nothing changed");
    assert_eq!(drain(&mut p), []);
}

#[test]
fn d7_fenced_agent_ignores_what_it_observes() {
    let mut p = pod(&[APP]);
    let _ = p.handle(at(0), Input::NodeFenced).handled();
    let _ = drain(&mut p);
    let stored = record();
    assert_eq!(
        p.observe_record(at(100), Some(&stored)),
        Ok(Handled::Ignored)
    );
    assert_eq!(p.observe_record(at(100), None), Ok(Handled::Ignored));
    assert_eq!(drain(&mut p), []);
}

// ---- The order of owed actions ----------------------------------------------------
//
// `poll_action` hands out what is owed in the order it arose, across
// containers, endpoints and removal; a container's own outputs come out
// together, in its place, in kill order. Drivers that take every action
// after each input never have two entries owed at once; these tests feed
// several inputs first.

#[test]
fn owed_actions_come_out_in_the_order_they_arose_across_containers() {
    let mut p = pod(&[HOOKED, APP, APP]);
    let _ = delete(&mut p, 0, Some(10));
    sync(&mut p, 0);
    // Container 2 exits before anything is taken; then container 1.
    exited(&mut p, 100, 2);
    exited(&mut p, 200, 1);
    assert!(p.has_action());
    assert_eq!(
        drain(&mut p),
        [
            Action::RemoveEndpoints,
            pre_stop(0, 10),
            // Each container keeps its place; what it owes later joins it.
            term(1),
            gone(1),
            term(2),
            gone(2),
        ]
    );
    assert!(!p.has_action());
}

#[test]
fn an_entry_owing_again_after_it_was_drained_goes_to_the_back() {
    let mut p = pod(&[APP, APP]);
    let _ = delete(&mut p, 0, Some(10));
    sync(&mut p, 0);
    assert_eq!(p.poll_action(), Some(Action::RemoveEndpoints));
    assert_eq!(p.poll_action(), Some(term(0)));
    // Container 0 owes nothing now: its exit comes after container 1's
    // stop signal, which was owed before it.
    exited(&mut p, 100, 0);
    exited(&mut p, 200, 1);
    assert_eq!(
        drain(&mut p),
        [term(1), gone(1), gone(0), Action::Remove { force: false }]
    );
}

#[test]
fn d4_removal_comes_before_the_kill_that_follows_it() {
    let mut p = pod(&[APP]);
    let _ = delete(&mut p, 0, Some(0));
    // Removed first; then the agent sees the removal and stops the workload.
    sync(&mut p, 10);
    assert_eq!(
        drain(&mut p),
        [
            Action::RemoveEndpoints,
            Action::Remove { force: true },
            term(0)
        ]
    );
}

#[test]
fn the_largest_lifecycle_orders_all_its_containers() {
    // 253 containers is the most a lifecycle holds.
    const C: usize = 253;
    let mut p: Lifecycle<4, C> =
        Lifecycle::new(Strategy::POD, record(), &[APP; C]).expect("within capacity");
    let _ = p
        .handle(at(0), Input::Delete(DeleteOptions::with_grace(10)))
        .delete()
        .unwrap();
    let _ = p.handle(at(0), Input::AgentSync).handled();
    // The last container exits first: it keeps its place behind the others.
    let _ = p
        .handle(at(100), Input::container_exited(C - 1))
        .container();
    let out: Vec<Action> = core::iter::from_fn(|| p.poll_action()).collect();
    let mut expected = vec![Action::RemoveEndpoints];
    expected.extend((0..=252).map(term));
    expected.push(gone(252));
    assert_eq!(out, expected);
    assert!(!p.has_action());
}

#[test]
fn r60_r63_poll_due_says_which_container_and_what_comes_due() {
    use grace_core::{Due, DueKind};
    let due = |p: &Pod| p.poll_due().map(|d: Due| (rel(d.at), d.container, d.kind));
    // A hooked main container and a sidecar, grace 30 s: the hook's
    // cut-off comes first (R60).
    let (mut p, _) = killing(&[HOOKED, SIDECAR], None);
    assert_eq!(due(&p), Some((30_000, 0, DueKind::HookCutOff)));
    // The hook returns at 1 s: SIGTERM, SIGKILL at the end of the budget.
    assert_eq!(
        p.handle(at(1_000), Input::pre_stop_finished(0)).container(),
        Ok(Handled::Applied)
    );
    assert_eq!(due(&p), Some((30_000, 0, DueKind::Kill)));
    // Everything stopped: nothing is due.
    for c in 0..2 {
        let _ = p.handle(at(2_000), Input::container_exited(c)).container();
    }
    assert_eq!(p.poll_due(), None);
    assert_eq!(p.poll_timeout(), None);

    // A plain container: SIGKILL at the end of its budget.
    let mut p = pod(&[APP]);
    evict(&mut p, 0, 5);
    assert_eq!(due(&p), Some((5_000, 0, DueKind::Kill)));
}
