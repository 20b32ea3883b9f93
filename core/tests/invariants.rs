//! Property tests of the invariants (core/RULES.md, "Invariants") and the
//! rules they rest on (R16, R50–R55, R62–R64, D2, D4, D5, D7).
//!
//! Each property drives one [`Lifecycle`] with a random sequence of inputs —
//! delete requests with any grace (none, negative, zero, small, huge,
//! `i64::MIN`, `i64::MAX`), dry runs, matching and failing preconditions,
//! propagation policies, finalizer updates, agent syncs, evictions, pre-stop
//! and exit reports (valid and invalid container indices), node loss, return
//! and fencing, and time moving on by milliseconds, by seconds, to the next
//! deadline, or to the end of either clock — and checks one invariant after
//! every step, so that a failure names the invariant it breaks. The
//! invariants are grace-testkit's checker (`core/testkit/src/checker.rs`),
//! which the `lifecycle` fuzz target runs too. Every action is drained after
//! every step, so an action is "emitted" at the time of the step that
//! produced it. The harness itself checks that nothing panics and that
//! `poll_action` always runs dry.
//!
//! The deterministic tests at the end pin the extreme values by name.
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
    Action, ContainerSpec, DeleteError, DeleteOptions, DeleteOutcome, FINALIZER_FOREGROUND,
    FINALIZER_ORPHAN, FinalizerChange, FinalizerListError, Finalizers, GcPolicy, Handled, Instant,
    Kind, Lifecycle, MAX_TIMESTAMP_SECONDS, Name, Now, PodPhase, Preconditions, Propagation,
    Record, Strategy as DeleteStrategy, Timestamp, TooManyContainers, UnknownContainer,
    UpdateError, WallTime,
};
use grace_testkit::checker::{self, Checker, Clock, Invariant, Reply, Step};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// Finalizer capacity: small, so that a full collection is common.
const F: usize = 3;
/// Container capacity.
const C: usize = 3;
type Lc = Lifecycle<F, C>;

const UID: &str = "uid-1";
const OTHER_UID: &str = "uid-2";
const FINALIZER_NAMES: [&str; 4] = [
    "example.com/a",
    "example.com/b",
    FINALIZER_ORPHAN,
    FINALIZER_FOREGROUND,
];

fn name(s: &str) -> Name {
    Name::try_from(s).expect("short name")
}

// ---- The world: setup, events, clocks --------------------------------------

/// The object the lifecycle starts from.
#[derive(Clone, Debug)]
struct Setup {
    strategy: DeleteStrategy,
    scheduled: bool,
    phase: PodPhase,
    tgps: Option<i64>,
    generation: i64,
    finalizers: Vec<&'static str>,
    containers: Vec<ContainerSpec>,
    /// A deletion already stored: its timestamp, in seconds from the start
    /// second, and its grace (possibly a legacy negative, R10, or nil, R13).
    seeded: Option<(i64, Option<i64>)>,
    wall_ms: i64,
    mono_ms: u64,
}

impl Setup {
    fn record(&self) -> Record<F> {
        let mut record = Record::new(name(UID));
        record.generation = self.generation;
        record.scheduled = self.scheduled;
        record.phase = self.phase;
        record.termination_grace_period_seconds = self.tgps;
        record.finalizers =
            Finalizers::try_from(self.finalizers.as_slice()).expect("at most F finalizers");
        if let Some((offset, grace)) = self.seeded {
            let start = WallTime::from_unix_millis(self.wall_ms)
                .floor_to_timestamp()
                .as_unix_seconds();
            record.deletion_timestamp =
                Some(Timestamp::from_unix_seconds(start.saturating_add(offset)));
            record.deletion_grace_period_seconds = grace;
        }
        record
    }

    fn lifecycle(&self) -> Lc {
        Lifecycle::new(self.strategy, self.record(), &self.containers).expect("at most C")
    }
}

/// A precondition of a delete request, relative to the record at that time.
#[derive(Copy, Clone, Debug)]
enum Pre {
    Absent,
    Matching,
    Mismatching,
}

#[derive(Clone, Debug)]
struct DeleteSpec {
    grace: Option<i64>,
    dry_run: bool,
    uid: Pre,
    resource_version: Pre,
    propagation: Option<Propagation>,
    orphan_dependents: Option<bool>,
}

impl DeleteSpec {
    fn options(&self, record: &Record<F>) -> DeleteOptions {
        let uid = match self.uid {
            Pre::Absent => None,
            Pre::Matching => Some(record.uid.clone()),
            Pre::Mismatching => Some(name(OTHER_UID)),
        };
        let resource_version = match self.resource_version {
            Pre::Absent => None,
            Pre::Matching => Some(record.resource_version),
            Pre::Mismatching => Some(record.resource_version ^ 1),
        };
        DeleteOptions::default()
            .with_grace_period(self.grace)
            .with_preconditions(Preconditions {
                uid,
                resource_version,
            })
            .with_propagation_policy(self.propagation)
            .with_orphan_dependents(self.orphan_dependents)
            .with_dry_run(self.dry_run)
    }
}

#[derive(Clone, Debug)]
enum Event {
    Delete(DeleteSpec),
    AddFinalizer(&'static str),
    RemoveFinalizer(&'static str),
    AgentSync,
    Evict(i64),
    /// Container index; `C` and above are invalid.
    PreStopFinished(usize),
    /// Container index; `C` and above are invalid.
    ContainerExited(usize),
    /// Container index started again (R92); `C` and above are invalid.
    ContainerStarted(usize),
    NodeLost,
    NodeReady,
    NodeFenced,
    HandleTimeout,
    AdvanceMillis(u64),
    AdvanceSeconds(u64),
    /// Jump to `poll_timeout() + offset_ms` (never backwards), then maybe
    /// `handle_timeout`.
    ToDeadline {
        offset_ms: i64,
        then_handle: bool,
    },
    /// Jump to `u64::MAX - n` ms on the monotonic clock.
    NearEndOfMono(u64),
    /// Jump to `i64::MAX - n` ms on the wall clock.
    NearEndOfWall(u64),
}

/// What one step fed in (`None`: only the clocks moved) and what came
/// out.
struct Applied {
    fed: Option<Input>,
    reply: Reply<F>,
}

fn apply(lc: &mut Lc, clock: &mut Clock, event: &Event) -> Applied {
    let fed = match event {
        Event::Delete(spec) => Some(Input::Delete(spec.options(lc.record()))),
        Event::AddFinalizer(f) => Some(Input::FinalizerUpdate(FinalizerChange::Add(name(f)))),
        Event::RemoveFinalizer(f) => Some(Input::FinalizerUpdate(FinalizerChange::Remove(name(f)))),
        Event::AgentSync => Some(Input::AgentSync),
        Event::Evict(grace) => Some(Input::evict(*grace)),
        Event::PreStopFinished(i) => Some(Input::pre_stop_finished(*i)),
        Event::ContainerExited(i) => Some(Input::container_exited(*i)),
        Event::ContainerStarted(i) => Some(Input::container_started(*i)),
        Event::NodeLost => Some(Input::NodeLost),
        Event::NodeReady => Some(Input::NodeReady),
        Event::NodeFenced => Some(Input::NodeFenced),
        Event::HandleTimeout => Some(Input::Timeout),
        Event::AdvanceMillis(ms) => {
            clock.advance(*ms);
            None
        }
        Event::AdvanceSeconds(s) => {
            clock.advance(s.saturating_mul(1000));
            None
        }
        Event::ToDeadline {
            offset_ms,
            then_handle,
        } => {
            if let Some(deadline) = lc.poll_timeout() {
                clock.advance_to_mono(i128::from(deadline.as_millis()) + i128::from(*offset_ms));
            }
            then_handle.then_some(Input::Timeout)
        }
        Event::NearEndOfMono(n) => {
            clock.advance_to_mono(i128::from(u64::MAX - n));
            None
        }
        Event::NearEndOfWall(n) => {
            let target = i128::from(i64::MAX) - i128::from(*n);
            let delta = target - i128::from(clock.wall);
            if delta > 0 {
                clock.advance(u64::try_from(delta).unwrap_or(u64::MAX));
            }
            None
        }
    };
    let reply = match &fed {
        Some(input) => checker::feed(lc, clock.now(), input),
        None => Reply::Nothing,
    };
    Applied { fed, reply }
}

/// Drives a lifecycle through `events` and runs the shared checker after
/// every step; fails on the first step that breaks one of `wanted` (every
/// invariant has a property below, so each fails under its own name).
/// With `wanted` empty, only the harness's own checks apply: nothing
/// panics and `poll_action` always runs dry.
fn run(setup: &Setup, events: &[Event], wanted: &[Invariant]) -> Result<(), TestCaseError> {
    let mut lc = setup.lifecycle();
    let mut clock = Clock {
        wall: setup.wall_ms,
        mono: setup.mono_ms,
    };
    prop_assert_eq!(lc.poll_action(), None, "a new lifecycle owes nothing");
    let mut checker = Checker::new(&lc);
    for (n, event) in events.iter().enumerate() {
        let before = lc.clone();
        let Applied { fed, reply } = apply(&mut lc, &mut clock, event);
        let actions = match checker::drain(&mut lc) {
            Ok(actions) => actions,
            Err(actions) => {
                return Err(TestCaseError::fail(format!(
                    "step {n}: poll_action does not run dry: {actions:?}"
                )));
            }
        };
        let step = Step {
            input: fed.as_ref(),
            now: clock.now(),
            before: &before,
            after: &lc,
            reply: &reply,
            actions: &actions,
        };
        let broken: Vec<_> = checker
            .check(&step)
            .into_iter()
            .filter(|v| wanted.contains(&v.invariant))
            .collect();
        if let Some(why) = broken.first() {
            return Err(TestCaseError::fail(format!(
                "step {n}: {event:?} at {:?}: {why}\n  actions: {actions:?}\n  reply: {reply:?}\n  before: {before:?}\n  after: {lc:?}",
                step.now
            )));
        }
    }
    Ok(())
}

// ---- Strategies ---------------------------------------------------------------

/// Grace values, biased to the edges: negative (R9, R21), zero, small, the
/// Go overflow boundary (R89, R90) and the ends of `i64` (D2).
fn grace() -> impl Strategy<Value = i64> {
    prop_oneof![
        3 => Just(0i64),
        3 => 1i64..=5,
        3 => 0i64..=60,
        1 => Just(i64::MIN),
        1 => Just(-1i64),
        1 => Just(i64::MAX),
        1 => Just(i64::MAX - 1),
        1 => Just(9_223_372_036i64),
        1 => Just(9_223_372_037i64),
        1 => Just(3_600_000_000_000i64),
        1 => any::<i64>(),
    ]
}

/// Wall clock starts: now-ish, the epoch, before it, the end of RFC 3339
/// (MAX_TIMESTAMP_SECONDS) and the ends of `i64` milliseconds.
fn wall_start() -> impl Strategy<Value = i64> {
    prop_oneof![
        2 => Just(1_700_000_000_000i64),
        2 => 0i64..=4_000_000_000_000,
        1 => Just(0i64),
        1 => -4_000_000_000_000i64..0,
        1 => Just(MAX_TIMESTAMP_SECONDS * 1000 - 5_000),
        1 => Just(MAX_TIMESTAMP_SECONDS * 1000 + 1_500),
        1 => i64::MAX - 100_000..=i64::MAX,
        1 => i64::MIN..=i64::MIN + 100_000,
    ]
}

fn mono_start() -> impl Strategy<Value = u64> {
    prop_oneof![
        2 => Just(0u64),
        2 => 0u64..=1_000_000_000_000,
        1 => u64::MAX - 100_000..=u64::MAX,
    ]
}

fn pod_phase() -> impl Strategy<Value = PodPhase> {
    prop_oneof![
        6 => Just(PodPhase::Running),
        1 => Just(PodPhase::Pending),
        1 => Just(PodPhase::Succeeded),
        1 => Just(PodPhase::Failed),
        1 => Just(PodPhase::Unknown),
        1 => Just(PodPhase::Unset),
    ]
}

fn delete_strategy() -> impl Strategy<Value = DeleteStrategy> {
    (
        prop::bool::weighted(0.8),
        prop_oneof![
            Just(GcPolicy::DeleteDependents),
            Just(GcPolicy::OrphanDependents),
            Just(GcPolicy::Unsupported),
        ],
        prop::bool::weighted(0.8),
    )
        .prop_map(|(pod, default_gc_policy, gc_enabled)| DeleteStrategy {
            kind: if pod { Kind::Pod } else { Kind::Generic },
            default_gc_policy,
            gc_enabled,
        })
}

prop_compose! {
    fn container()(
        pre_stop in any::<bool>(),
        sidecar in prop::bool::weighted(0.3),
        stopped in prop::bool::weighted(0.15),
    ) -> ContainerSpec {
        ContainerSpec { pre_stop, sidecar, stopped }
    }
}

fn finalizer_name() -> impl Strategy<Value = &'static str> {
    prop::sample::select(FINALIZER_NAMES.to_vec())
}

prop_compose! {
    fn setup()(
        strategy in delete_strategy(),
        scheduled in prop::bool::weighted(0.85),
        phase in pod_phase(),
        tgps in prop::option::weighted(0.9, prop_oneof![2 => Just(30i64), 3 => grace()]),
        generation in prop_oneof![4 => Just(1i64), 1 => Just(0i64), 1 => any::<i64>()],
        // 0..=F names: a full collection is one case in four.
        finalizers in prop::collection::vec(finalizer_name(), 0..=F),
        containers in prop::collection::vec(container(), 0..=C),
        seeded in prop::option::weighted(0.15, (
            prop_oneof![4 => -120i64..=120, 1 => Just(i64::MIN), 1 => Just(i64::MAX)],
            prop::option::weighted(0.8, prop_oneof![
                Just(i64::MIN), Just(-5i64), Just(0i64), Just(1i64), Just(30i64), Just(i64::MAX),
            ]),
        )),
        wall_ms in wall_start(),
        mono_ms in mono_start(),
    ) -> Setup {
        Setup {
            strategy, scheduled, phase, tgps, generation, finalizers, containers, seeded,
            wall_ms, mono_ms,
        }
    }
}

fn precondition() -> impl Strategy<Value = Pre> {
    prop_oneof![8 => Just(Pre::Absent), 2 => Just(Pre::Matching), 1 => Just(Pre::Mismatching)]
}

prop_compose! {
    fn delete_spec()(
        grace in prop::option::weighted(0.7, grace()),
        dry_run in prop::bool::weighted(0.15),
        uid in precondition(),
        resource_version in precondition(),
        propagation in prop::option::weighted(0.3, prop_oneof![
            Just(Propagation::Orphan),
            Just(Propagation::Background),
            Just(Propagation::Foreground),
            Just(Propagation::Unrecognized),
        ]),
        orphan_dependents in prop::option::weighted(0.15, any::<bool>()),
    ) -> DeleteSpec {
        DeleteSpec { grace, dry_run, uid, resource_version, propagation, orphan_dependents }
    }
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        8 => delete_spec().prop_map(Event::Delete),
        1 => finalizer_name().prop_map(Event::AddFinalizer),
        2 => finalizer_name().prop_map(Event::RemoveFinalizer),
        7 => Just(Event::AgentSync),
        2 => grace().prop_map(Event::Evict),
        3 => (0..=C + 1).prop_map(Event::PreStopFinished),
        3 => (0..=C + 1).prop_map(Event::ContainerExited),
        1 => (0..=C + 1).prop_map(Event::ContainerStarted),
        1 => Just(Event::NodeLost),
        1 => Just(Event::NodeReady),
        1 => Just(Event::NodeFenced),
        3 => Just(Event::HandleTimeout),
        3 => (0u64..=3_000).prop_map(Event::AdvanceMillis),
        3 => (0u64..=90).prop_map(Event::AdvanceSeconds),
        8 => (
            prop_oneof![Just(-1i64), Just(0i64), Just(1i64), -2_500i64..=2_500],
            prop::bool::weighted(0.85),
        )
            .prop_map(|(offset_ms, then_handle)| Event::ToDeadline { offset_ms, then_handle }),
        1 => (0u64..=5_000).prop_map(Event::NearEndOfMono),
        1 => (0u64..=5_000).prop_map(Event::NearEndOfWall),
    ]
}

fn scenario() -> impl Strategy<Value = (Setup, Vec<Event>)> {
    (setup(), prop::collection::vec(event(), 0..=40))
}

// ---- The invariants (grace-testkit's checker, shared with the fuzz target) --------

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn invariant_deletion_timestamp_never_moves_later((setup, events) in scenario()) {
        run(&setup, &events, &[Invariant::TimestampNeverLater])?;
    }

    #[test]
    fn invariant_stored_grace_never_grows((setup, events) in scenario()) {
        run(&setup, &events, &[Invariant::StoredGraceNeverGrows])?;
    }

    #[test]
    fn invariant_agent_budget_never_grows((setup, events) in scenario()) {
        run(&setup, &events, &[Invariant::AgentBudget])?;
    }

    #[test]
    fn invariant_deleted_is_terminal((setup, events) in scenario()) {
        run(&setup, &events, &[Invariant::DeletedIsTerminal])?;
    }

    #[test]
    fn invariant_one_kill_sequence_per_container((setup, events) in scenario()) {
        run(&setup, &events, &[Invariant::KillSequence])?;
    }

    #[test]
    fn invariant_sigkill_never_before_its_due_time((setup, events) in scenario()) {
        run(&setup, &events, &[Invariant::SigkillNeverEarly])?;
    }

    #[test]
    fn invariant_record_with_finalizers_is_never_removed((setup, events) in scenario()) {
        run(&setup, &events, &[Invariant::FinalizersBlockRemoval])?;
    }

    #[test]
    fn invariant_removal_while_workload_may_run_is_forced((setup, events) in scenario()) {
        run(&setup, &events, &[Invariant::ForceWhenWorkloadMayRun])?;
    }

    #[test]
    fn invariant_refusals_dry_runs_and_early_timeouts_change_nothing((setup, events) in scenario()) {
        run(&setup, &events, &[Invariant::RefusalsChangeNothing])?;
    }

    #[test]
    fn invariant_handled_timeouts_leave_nothing_due((setup, events) in scenario()) {
        run(&setup, &events, &[Invariant::Timeouts])?;
    }

    #[test]
    fn d4_invariant_finished_is_final((setup, events) in scenario()) {
        run(&setup, &events, &[Invariant::FinishedIsFinal])?;
    }

    #[test]
    fn invariant_no_panic_for_any_input((setup, events) in scenario()) {
        run(&setup, &events, &[])?;
    }
}

// ---- Deterministic regressions for the extreme values -----------------------------

fn app() -> ContainerSpec {
    ContainerSpec {
        pre_stop: false,
        sidecar: false,
        stopped: false,
    }
}

fn pod(containers: &[ContainerSpec]) -> Lc {
    Lifecycle::new(DeleteStrategy::POD, Record::new(name(UID)), containers).expect("fits")
}

fn drain(lc: &mut Lc) -> Vec<Action> {
    core::iter::from_fn(|| lc.poll_action()).collect()
}

#[test]
fn grace_i64_max_saturates_without_panic() {
    let mut lc = pod(&[app()]);
    let now = Now::new(
        WallTime::from_unix_millis(1_700_000_000_500),
        Instant::from_millis(1_000),
    );
    let response = lc
        .handle(now, Input::Delete(DeleteOptions::with_grace(i64::MAX)))
        .delete()
        .unwrap()
        .expect("accepted");
    assert_eq!(response.outcome, DeleteOutcome::Graceful);
    // D2: the timestamp saturates at 9999-12-31T23:59:59Z; the grace is the one asked.
    assert_eq!(
        lc.record().deletion_timestamp,
        Some(Timestamp::from_unix_seconds(MAX_TIMESTAMP_SECONDS))
    );
    assert_eq!(lc.record().deletion_grace_period_seconds, Some(i64::MAX));
    assert_eq!(lc.handle(now, Input::AgentSync).handled(), Handled::Applied);
    assert_eq!(lc.agent().remembered_grace, i64::MAX);
    assert_eq!(
        drain(&mut lc),
        [
            Action::RemoveEndpoints,
            Action::SendStopSignal { container: 0 }
        ]
    );
    // The agent deadline saturates at the end of time.
    assert_eq!(lc.poll_timeout(), Some(Instant::MAX));
    // Shortening from i64::MAX lands far in the past: clamped to now, grace 1 (R15, R16).
    let later = Now::new(
        WallTime::from_unix_millis(1_700_000_010_500),
        Instant::from_millis(11_000),
    );
    let response = lc
        .handle(later, Input::Delete(DeleteOptions::with_grace(5)))
        .delete()
        .unwrap()
        .expect("accepted");
    assert_eq!(response.outcome, DeleteOutcome::Graceful);
    assert_eq!(
        lc.record().deletion_timestamp,
        Some(Timestamp::from_unix_seconds(1_700_000_010))
    );
    assert_eq!(lc.record().deletion_grace_period_seconds, Some(1));
    // D5: the agent takes it at once; the signal was sent, so SIGKILL at
    // now + max(1, 2) s (R62).
    assert_eq!(
        lc.handle(later, Input::AgentSync).handled(),
        Handled::Applied
    );
    assert_eq!(lc.agent().remembered_grace, 1);
    assert_eq!(lc.poll_timeout(), Some(Instant::from_millis(13_000)));
}

#[test]
fn grace_i64_min_reads_as_one_second() {
    let mut lc = pod(&[app()]);
    let now = Now::from_unix_millis(1_700_000_000_000);
    let _ = lc
        .handle(now, Input::Delete(DeleteOptions::with_grace(i64::MIN)))
        .delete()
        .unwrap()
        .expect("accepted");
    // R9: negative means 1.
    assert_eq!(lc.record().deletion_grace_period_seconds, Some(1));
    assert_eq!(
        lc.record().deletion_timestamp,
        Some(Timestamp::from_unix_seconds(1_700_000_001))
    );
    // R52, R54: an eviction with i64::MIN only shortens, to 1 s.
    assert_eq!(
        lc.handle(now, Input::evict(i64::MIN)).handled(),
        Handled::Applied
    );
    assert_eq!(lc.agent().remembered_grace, 1);
}

#[test]
fn instant_at_end_of_time_does_not_wrap() {
    let mut lc = pod(&[ContainerSpec {
        pre_stop: true,
        ..app()
    }]);
    let start = u64::MAX - 500;
    let at = |mono: u64| {
        Now::new(
            WallTime::from_unix_millis(1_700_000_000_000),
            Instant::from_millis(mono),
        )
    };
    let _ = lc
        .handle(at(start), Input::Delete(DeleteOptions::default()))
        .delete()
        .unwrap()
        .expect("accepted");
    assert_eq!(
        lc.handle(at(start), Input::AgentSync).handled(),
        Handled::Applied
    );
    assert_eq!(
        drain(&mut lc),
        [
            Action::RemoveEndpoints,
            Action::RunPreStop {
                container: 0,
                budget_seconds: 30
            }
        ]
    );
    // The hook's cut-off saturates at the end of time instead of wrapping.
    assert_eq!(lc.poll_timeout(), Some(Instant::MAX));
    let _ = lc.handle(at(u64::MAX - 1), Input::Timeout);
    assert_eq!(drain(&mut lc), []);
    let _ = lc.handle(at(u64::MAX), Input::Timeout);
    assert_eq!(drain(&mut lc), [Action::SendStopSignal { container: 0 }]);
    // SIGKILL saturates too, and is due no earlier than the signal.
    assert_eq!(lc.poll_timeout(), Some(Instant::MAX));
    let _ = lc.handle(at(u64::MAX), Input::Timeout);
    assert_eq!(drain(&mut lc), [Action::SendKill { container: 0 }]);
    assert_eq!(lc.poll_timeout(), None);
}

#[test]
fn wall_clock_at_end_of_i64_does_not_overflow() {
    for wall in [i64::MAX, i64::MAX - 999, i64::MIN, i64::MIN + 1] {
        for grace in [i64::MIN, -1, 0, 1, 30, i64::MAX] {
            let mut lc = pod(&[app()]);
            let now = Now::new(WallTime::from_unix_millis(wall), Instant::ZERO);
            let response = lc
                .handle(now, Input::Delete(DeleteOptions::with_grace(grace)))
                .delete()
                .unwrap();
            let floor = WallTime::from_unix_millis(wall).floor_to_timestamp();
            let _ = response.expect("accepted");
            let ts = lc.record().deletion_timestamp.expect("set");
            assert!(ts >= floor, "{wall} {grace}: {ts} before {floor}");
            // A shortening at the same instant never moves it later.
            let _ = lc
                .handle(now, Input::Delete(DeleteOptions::with_grace(0)))
                .delete()
                .unwrap();
            assert!(lc.record().deletion_timestamp.expect("kept") <= ts.max(floor));
        }
    }
}

#[test]
fn full_finalizer_collection_is_typed_error() {
    let names = ["example.com/a", "example.com/b", "example.com/c"];
    let mut record = Record::<F>::new(name(UID));
    record.finalizers = Finalizers::try_from(names.as_slice()).expect("exactly F");
    assert_eq!(
        Finalizers::<F>::try_from(["a", "b", "c", "d"].as_slice()),
        Err(FinalizerListError::TooMany)
    );
    let mut lc = Lifecycle::<F, C>::new(DeleteStrategy::POD, record, &[app()]).expect("fits");
    let before = lc.clone();
    let now = Now::from_unix_millis(1_700_000_000_000);
    // Adding one more finalizer to a full list.
    assert_eq!(
        lc.handle(
            now,
            Input::FinalizerUpdate(FinalizerChange::Add(name("example.com/d")))
        )
        .update()
        .unwrap(),
        Err(UpdateError::TooManyFinalizers)
    );
    // Orphan propagation needs room for the `orphan` finalizer (R37, R39).
    let orphan = DeleteOptions::default().with_propagation_policy(Some(Propagation::Orphan));
    assert_eq!(
        lc.handle(now, Input::Delete(orphan.clone()))
            .delete()
            .unwrap(),
        Err(DeleteError::TooManyFinalizers)
    );
    assert_eq!(lc, before, "a refused request changes nothing");
    // Without the extra finalizer the delete goes through and the record stays (invariant 4).
    let response = lc
        .handle(now, Input::Delete(DeleteOptions::with_grace(0)))
        .delete()
        .unwrap()
        .expect("accepted");
    assert_eq!(response.outcome, DeleteOutcome::Graceful);
    assert!(lc.is_stored());
    assert!(!drain(&mut lc).contains(&Action::Remove { force: true }));
}

#[test]
fn too_many_containers_is_typed_error() {
    let specs = [app(); C + 1];
    assert_eq!(
        Lifecycle::<F, C>::new(DeleteStrategy::POD, Record::new(name(UID)), &specs),
        Err(TooManyContainers)
    );
}

#[test]
fn invalid_container_index_is_typed_error() {
    let mut lc = pod(&[app()]);
    let now = Now::from_unix_millis(0);
    for i in [1, C, usize::MAX] {
        assert_eq!(
            lc.handle(now, Input::container_exited(i)).container(),
            Err(UnknownContainer)
        );
        assert_eq!(
            lc.handle(now, Input::pre_stop_finished(i)).container(),
            Err(UnknownContainer)
        );
    }
}

/// Found by `invariant_deleted_is_terminal`: an object without an agent (a
/// non-pod, or an unscheduled pod, R19) was removed without force, and a
/// later "container exited" report still emitted `ContainerStopped` — an
/// action after a removal that claimed nothing could run. Agent inputs do
/// not apply without an agent (`Handled::Ignored`).
#[test]
fn container_exit_without_an_agent_is_ignored_after_removal() {
    let spec = app();
    let minimal = Setup {
        strategy: DeleteStrategy::GENERIC,
        scheduled: false,
        phase: PodPhase::Unknown,
        tgps: None,
        generation: 1,
        finalizers: vec![],
        containers: vec![spec, spec],
        seeded: None,
        wall_ms: 1_700_000_000_000,
        mono_ms: 0,
    };
    let events = [
        Event::Delete(DeleteSpec {
            grace: None,
            dry_run: false,
            uid: Pre::Absent,
            resource_version: Pre::Absent,
            propagation: None,
            orphan_dependents: None,
        }),
        Event::ContainerExited(0),
    ];
    run(&minimal, &events, &[Invariant::DeletedIsTerminal]).expect("Deleted is terminal");

    // The same for an unscheduled pod, checked directly.
    let mut record = Record::<F>::new(name(UID));
    record.scheduled = false;
    let mut lc = Lifecycle::<F, C>::new(DeleteStrategy::POD, record, &[spec]).expect("fits");
    let now = Now::from_unix_millis(1_700_000_000_000);
    let response = lc
        .handle(now, Input::Delete(DeleteOptions::default()))
        .delete()
        .unwrap()
        .expect("accepted");
    assert_eq!(response.outcome, DeleteOutcome::Deleted);
    assert!(!response.force, "nothing of an unscheduled pod runs (R19)");
    assert_eq!(drain(&mut lc), [Action::Remove { force: false }]);
    let before = lc.clone();
    assert_eq!(
        lc.handle(now, Input::container_exited(0)).container(),
        Ok(Handled::Ignored)
    );
    assert_eq!(drain(&mut lc), []);
    assert_eq!(lc, before);
}
