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
//! every step, so that a failure names the invariant it breaks. Every action
//! is drained after every step, so an action is "emitted" at the time of the
//! step that produced it. The harness itself checks that nothing panics and
//! that `poll_action` always runs dry.
//!
//! The deterministic tests at the end pin the extreme values by name.

use grace_core::{
    Action, ContainerSpec, DeleteError, DeleteOptions, DeleteOutcome, DeleteResponse,
    FINALIZER_FOREGROUND, FINALIZER_ORPHAN, FinalizerChange, FinalizerListError, Finalizers,
    GcPolicy, Handled, Instant, Kind, Lifecycle, MAX_TIMESTAMP_SECONDS, MIN_STOP_SECONDS, Name,
    Now, Phase, PodPhase, Preconditions, Propagation, Record, Stage, Strategy as DeleteStrategy,
    Timestamp, TooManyContainers, UnknownContainer, UpdateError, UpdateOutcome, WallTime,
    decide_delete,
};
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
/// More than any step can owe: one endpoints removal, four outputs per
/// container, one removal.
const MAX_ACTIONS_PER_STEP: usize = 2 + 4 * C;
/// R62 in milliseconds.
const MIN_STOP_MILLIS: u64 = MIN_STOP_SECONDS.unsigned_abs() * 1000;

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

    fn has_agent(&self) -> bool {
        self.strategy.kind == Kind::Pod && self.scheduled
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
        DeleteOptions {
            grace_period_seconds: self.grace,
            preconditions: Preconditions {
                uid,
                resource_version,
            },
            propagation_policy: self.propagation,
            orphan_dependents: self.orphan_dependents,
            dry_run: self.dry_run,
        }
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

/// Wall and monotonic time move on together, by the same amount, each
/// saturating at its own end; neither ever goes back.
#[derive(Copy, Clone, Debug)]
struct Clock {
    wall: i64,
    mono: u64,
}

impl Clock {
    fn now(&self) -> Now {
        Now::new(
            WallTime::from_unix_millis(self.wall),
            Instant::from_millis(self.mono),
        )
    }

    fn advance(&mut self, ms: u64) {
        self.mono = self.mono.saturating_add(ms);
        self.wall = self
            .wall
            .saturating_add(i64::try_from(ms).unwrap_or(i64::MAX));
    }
}

/// The REST answer to a delete: the response and the object it refers to
/// (the record as written, or for a dry run the record the same decision
/// would write).
#[derive(Debug)]
struct Answer {
    outcome: DeleteOutcome,
    dry_run: bool,
    force: bool,
    record: Record<F>,
}

impl Answer {
    fn new(
        response: DeleteResponse,
        before: &Lc,
        after: &Lc,
        options: &DeleteOptions,
        now: Now,
    ) -> Self {
        let record = if response.dry_run {
            decide_delete(before.record(), &before.strategy(), options, now.wall)
                .expect("a dry run that was accepted is the same decision")
                .record
        } else {
            after.record().clone()
        };
        Answer {
            outcome: response.outcome,
            dry_run: response.dry_run,
            force: response.force,
            record,
        }
    }
}

/// What the handler returned. One per step, read by pattern: not boxed.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
enum Reply {
    Nothing,
    Delete(Result<Answer, DeleteError>),
    Update(Result<UpdateOutcome, UpdateError>),
    Handled(Handled),
    Container(Result<Handled, UnknownContainer>),
}

/// What one step fed in and what came out.
struct Applied {
    reply: Reply,
    options: Option<DeleteOptions>,
    /// `poll_timeout()` just before `handle_timeout` was called, if it was.
    timeout_before: Option<Option<Instant>>,
}

fn apply(lc: &mut Lc, clock: &mut Clock, event: &Event) -> Applied {
    let mut options = None;
    let mut timeout_before = None;
    let reply = match event {
        Event::Delete(spec) => {
            let opts = spec.options(lc.record());
            let before = lc.clone();
            let now = clock.now();
            let response = lc.handle_delete(now, &opts);
            let reply = Reply::Delete(response.map(|r| Answer::new(r, &before, lc, &opts, now)));
            options = Some(opts);
            reply
        }
        Event::AddFinalizer(f) => {
            Reply::Update(lc.handle_finalizer_update(clock.now(), &FinalizerChange::Add(name(f))))
        }
        Event::RemoveFinalizer(f) => Reply::Update(
            lc.handle_finalizer_update(clock.now(), &FinalizerChange::Remove(name(f))),
        ),
        Event::AgentSync => Reply::Handled(lc.handle_agent_sync(clock.now())),
        Event::Evict(grace) => Reply::Handled(lc.handle_evict(clock.now(), *grace)),
        Event::PreStopFinished(i) => Reply::Container(lc.handle_pre_stop_finished(clock.now(), *i)),
        Event::ContainerExited(i) => Reply::Container(lc.handle_container_exited(clock.now(), *i)),
        Event::NodeLost => Reply::Handled(lc.handle_node_lost(clock.now())),
        Event::NodeReady => Reply::Handled(lc.handle_node_ready(clock.now())),
        Event::NodeFenced => Reply::Handled(lc.handle_node_fenced(clock.now())),
        Event::HandleTimeout => {
            timeout_before = Some(lc.poll_timeout());
            lc.handle_timeout(clock.now());
            Reply::Nothing
        }
        Event::AdvanceMillis(ms) => {
            clock.advance(*ms);
            Reply::Nothing
        }
        Event::AdvanceSeconds(s) => {
            clock.advance(s.saturating_mul(1000));
            Reply::Nothing
        }
        Event::ToDeadline {
            offset_ms,
            then_handle,
        } => {
            if let Some(deadline) = lc.poll_timeout() {
                let target = i128::from(deadline.as_millis()) + i128::from(*offset_ms);
                let delta = target - i128::from(clock.mono);
                if delta > 0 {
                    clock.advance(u64::try_from(delta).unwrap_or(u64::MAX));
                }
            }
            if *then_handle {
                timeout_before = Some(lc.poll_timeout());
                lc.handle_timeout(clock.now());
            }
            Reply::Nothing
        }
        Event::NearEndOfMono(n) => {
            let target = u64::MAX - n;
            if target > clock.mono {
                clock.advance(target - clock.mono);
            }
            Reply::Nothing
        }
        Event::NearEndOfWall(n) => {
            let target = i128::from(i64::MAX) - i128::from(*n);
            let delta = target - i128::from(clock.wall);
            if delta > 0 {
                clock.advance(u64::try_from(delta).unwrap_or(u64::MAX));
            }
            Reply::Nothing
        }
    };
    Applied {
        reply,
        options,
        timeout_before,
    }
}

/// One step, as the invariants see it.
struct Step<'a> {
    event: &'a Event,
    /// The delete options sent, for a delete.
    options: Option<&'a DeleteOptions>,
    now: Now,
    before: &'a Lc,
    after: &'a Lc,
    reply: &'a Reply,
    /// Everything `poll_action` returned after the step, in order.
    actions: &'a [Action],
    timeout_before: Option<Option<Instant>>,
}

/// One invariant, with whatever it tracks from the outside.
trait Invariant {
    fn start(setup: &Setup) -> Self;
    fn check(&mut self, step: &Step<'_>) -> Result<(), String>;
}

/// Drives a lifecycle through `events` and checks `I` after every step.
fn run<I: Invariant>(setup: &Setup, events: &[Event]) -> Result<(), TestCaseError> {
    let mut lc = setup.lifecycle();
    let mut clock = Clock {
        wall: setup.wall_ms,
        mono: setup.mono_ms,
    };
    let mut invariant = I::start(setup);
    prop_assert_eq!(lc.poll_action(), None, "a new lifecycle owes nothing");
    for (n, event) in events.iter().enumerate() {
        let before = lc.clone();
        let Applied {
            reply,
            options,
            timeout_before,
        } = apply(&mut lc, &mut clock, event);
        let mut actions = Vec::new();
        while let Some(action) = lc.poll_action() {
            actions.push(action);
            prop_assert!(
                actions.len() <= MAX_ACTIONS_PER_STEP,
                "step {}: poll_action does not run dry: {:?}",
                n,
                actions
            );
        }
        let step = Step {
            event,
            options: options.as_ref(),
            now: clock.now(),
            before: &before,
            after: &lc,
            reply: &reply,
            actions: &actions,
            timeout_before,
        };
        if let Err(why) = invariant.check(&step) {
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

// ---- Helpers shared by the invariants -------------------------------------------

/// R10: a stored negative grace reads as 1.
fn read_grace(g: i64) -> i64 {
    if g < 0 { 1 } else { g }
}

/// `instant + seconds`, saturating at the end of time.
fn after_seconds(ms: u64, seconds: i64) -> u64 {
    let seconds = u64::try_from(seconds).unwrap_or(0);
    ms.saturating_add(seconds.saturating_mul(1000))
}

/// The kubelet's budget of core/RULES.md (`calculateEffectiveGracePeriod`, R50–R54), written out
/// from the rule text: the budget the agent must hold after one more look.
fn kubelet_grace(
    remembered: i64,
    deletion_grace: Option<i64>,
    override_seconds: Option<i64>,
    spec_grace: Option<i64>,
) -> i64 {
    let mut g = remembered;
    let mut overridden = false;
    if let Some(d) = deletion_grace
        && (g == 0 || d < g)
    {
        g = d; // R51
        overridden = true;
    }
    if let Some(o) = override_seconds
        && (g == 0 || o < g)
    {
        g = o; // R52
        overridden = true;
    }
    if !overridden
        && g == 0
        && let Some(s) = spec_grace
    {
        g = s; // R53
    }
    g = g.max(1); // R54
    if remembered > 0 {
        g = g.min(remembered); // R50
    }
    g
}

/// R36–R40: whether a delete (with these options, or the agent's final
/// delete with none) leaves no garbage-collection finalizer, so that the
/// unmodified stored object — still showing them — is removed (R30, R40).
fn delete_drops_gc_finalizers(strategy: &DeleteStrategy, options: Option<&DeleteOptions>) -> bool {
    if !strategy.gc_enabled {
        return false; // R36
    }
    if strategy.default_gc_policy == GcPolicy::Unsupported {
        return true; // R37, R38: neither is ever wanted
    }
    options.is_some_and(|o| {
        o.orphan_dependents == Some(false) || o.propagation_policy == Some(Propagation::Background)
    })
}

fn is_gc_finalizer(n: &Name) -> bool {
    n.as_str() == FINALIZER_ORPHAN || n.as_str() == FINALIZER_FOREGROUND
}

// ---- The invariants -----------------------------------------------------------------

/// Invariant 2 / R16: once set, a deletion timestamp is never unset while
/// stored and never moves later than `max(previous, now)`.
struct DeletionTimestampNeverMovesLater;

impl Invariant for DeletionTimestampNeverMovesLater {
    fn start(_: &Setup) -> Self {
        DeletionTimestampNeverMovesLater
    }

    fn check(&mut self, s: &Step<'_>) -> Result<(), String> {
        if !s.before.is_stored() {
            return Ok(()); // frozen; see DeletedIsTerminal
        }
        let Some(previous) = s.before.record().deletion_timestamp else {
            return Ok(());
        };
        let bound = previous.max(s.now.wall.floor_to_timestamp());
        let check = |what: &str, r: &Record<F>| match r.deletion_timestamp {
            None => Err(format!("{what}: deletion timestamp {previous} was unset")),
            Some(ts) if ts > bound => Err(format!(
                "{what}: deletion timestamp moved later: {previous} -> {ts} (bound {bound})"
            )),
            Some(_) => Ok(()),
        };
        check("record", s.after.record())?;
        if let Reply::Delete(Ok(response)) = s.reply {
            check("response", &response.record)?;
        }
        Ok(())
    }
}

/// Invariant 2: the stored grace only shrinks once set (a legacy negative
/// reads as 1, R10).
struct StoredGraceNeverGrows;

impl Invariant for StoredGraceNeverGrows {
    fn start(_: &Setup) -> Self {
        StoredGraceNeverGrows
    }

    fn check(&mut self, s: &Step<'_>) -> Result<(), String> {
        if !s.before.is_stored() {
            return Ok(());
        }
        let Some(previous) = s.before.record().deletion_grace_period_seconds else {
            return Ok(());
        };
        let check = |what: &str, r: &Record<F>| match r.deletion_grace_period_seconds {
            None => Err(format!("{what}: grace {previous} was unset")),
            Some(g) if read_grace(g) > read_grace(previous) => {
                Err(format!("{what}: grace grew: {previous} -> {g}"))
            }
            Some(_) => Ok(()),
        };
        check("record", s.after.record())?;
        if let Reply::Delete(Ok(response)) = s.reply {
            check("response", &response.record)?;
        }
        Ok(())
    }
}

/// R50–R54: the agent's budget never grows once the kill started, is at
/// least 1 s, changes only when the agent looks (sync) or is overridden
/// (evict), and is then the value the kubelet's budget (R50–R54) gives.
#[derive(Default)]
struct AgentBudgetNeverGrows {
    evicted: bool,
    deletion_seen: bool,
}

impl Invariant for AgentBudgetNeverGrows {
    fn start(_: &Setup) -> Self {
        AgentBudgetNeverGrows::default()
    }

    fn check(&mut self, s: &Step<'_>) -> Result<(), String> {
        let previous = s.before.agent().remembered_grace;
        let next = s.after.agent().remembered_grace;
        if previous > 0 && next > previous {
            return Err(format!("R50: the budget grew: {previous} -> {next}"));
        }
        if s.after.agent().killing && next < 1 {
            return Err(format!("R54: budget {next} below 1 s while killing"));
        }
        let record = s.before.record();
        let expected = match (s.event, s.reply) {
            (Event::AgentSync, Reply::Handled(Handled::Applied)) => {
                if !s.before.is_stored() || record.deletion_timestamp.is_some() {
                    self.deletion_seen = true;
                }
                (self.deletion_seen || self.evicted).then(|| {
                    kubelet_grace(
                        previous,
                        record.deletion_grace_period_seconds,
                        None,
                        record.termination_grace_period_seconds,
                    )
                })
            }
            (Event::Evict(o), Reply::Handled(Handled::Applied)) => {
                self.evicted = true;
                Some(kubelet_grace(
                    previous,
                    None,
                    Some(*o),
                    record.termination_grace_period_seconds,
                ))
            }
            _ => None,
        };
        match expected {
            Some(e) if next != e => Err(format!("R51–R54: budget {next}, expected {e}")),
            None if next != previous => Err(format!(
                "the budget changed without a sync or an override: {previous} -> {next}"
            )),
            Some(_) | None => Ok(()),
        }
    }
}

/// Invariant 1: Deleted is terminal. Once removed, the record never changes
/// or comes back, no request finds it, nothing asks to remove it again, and
/// only the agent stopping a force-deleted workload (D4) still acts.
struct DeletedIsTerminal {
    forced: bool,
}

impl Invariant for DeletedIsTerminal {
    fn start(_: &Setup) -> Self {
        DeletedIsTerminal { forced: false }
    }

    fn check(&mut self, s: &Step<'_>) -> Result<(), String> {
        if (s.after.phase() == Phase::Deleted) == s.after.is_stored() {
            return Err(format!(
                "phase {} but is_stored {}",
                s.after.phase(),
                s.after.is_stored()
            ));
        }
        if s.after.record().uid.as_str() != UID {
            return Err("the uid changed".into());
        }
        if s.before.phase() == Phase::Deleted {
            if s.after.phase() != Phase::Deleted {
                return Err(format!("came back as {}", s.after.phase()));
            }
            if s.after.record() != s.before.record() {
                return Err("the record changed after removal".into());
            }
            for action in s.actions {
                match action {
                    Action::Remove { .. } | Action::RemoveEndpoints => {
                        return Err(format!("{action:?} after removal"));
                    }
                    Action::RunPreStop { .. }
                    | Action::SendStopSignal { .. }
                    | Action::SendKill { .. }
                    | Action::ContainerStopped { .. } => {
                        if !self.forced {
                            return Err(format!(
                                "{action:?} after a removal that was not forced (nothing could run)"
                            ));
                        }
                    }
                    other => return Err(format!("an action the checker does not know: {other:?}")),
                }
            }
            match s.reply {
                Reply::Delete(Err(DeleteError::NotFound))
                | Reply::Update(Err(UpdateError::NotFound))
                | Reply::Nothing
                | Reply::Handled(_)
                | Reply::Container(_) => {}
                Reply::Delete(other) => return Err(format!("delete after removal: {other:?}")),
                Reply::Update(other) => return Err(format!("update after removal: {other:?}")),
            }
        }
        for action in s.actions {
            if let Action::Remove { force } = action {
                self.forced |= force;
            }
        }
        Ok(())
    }
}

/// Invariant 3, R62–R64, D5: SIGKILL for a container comes only after its
/// stop signal, never sooner than 2 s after it, and never before its budget
/// is spent — the kill's start plus the agent's budget, or, once a shorter
/// budget `G` was taken at `t`, `t + G`, and `t + max(G, 2 s)` for a
/// container already signalled (Kubernetes' restarted kill, R55, R62). A
/// hook's cut-off or a scheduled SIGKILL never moves later (D5).
struct SigkillNeverEarly {
    signal_at: [Option<u64>; C],
    earliest: [Option<u64>; C],
}

impl Invariant for SigkillNeverEarly {
    fn start(_: &Setup) -> Self {
        SigkillNeverEarly {
            signal_at: [None; C],
            earliest: [None; C],
        }
    }

    fn check(&mut self, s: &Step<'_>) -> Result<(), String> {
        let now = s.now.mono.as_millis();
        let (before, after) = (s.before.agent(), s.after.agent());
        let grace = after.remembered_grace;
        if !before.killing && after.killing {
            self.earliest = [Some(after_seconds(now, grace)); C];
        } else if before.killing && grace < before.remembered_grace {
            // D5: a shorter budget applies at once, counted from now.
            for (earliest, signal) in self.earliest.iter_mut().zip(self.signal_at) {
                let seconds = if signal.is_some() {
                    grace.max(MIN_STOP_SECONDS)
                } else {
                    grace
                };
                let until = after_seconds(now, seconds);
                *earliest = Some(earliest.map_or(until, |e| e.min(until)));
            }
        }
        for (i, (b, a)) in s
            .before
            .containers()
            .iter()
            .zip(s.after.containers())
            .enumerate()
        {
            let moved_later = match (b.stage(), a.stage()) {
                (Stage::PreStop { cutoff: was }, Stage::PreStop { cutoff: is })
                | (Stage::Stopping { kill_at: was }, Stage::Stopping { kill_at: is }) => is > was,
                _ => false,
            };
            if moved_later {
                return Err(format!(
                    "D5: container {i}'s deadline moved later: {:?} → {:?}",
                    b.stage(),
                    a.stage()
                ));
            }
        }
        for action in s.actions {
            match *action {
                Action::SendStopSignal { container } => {
                    let slot = self
                        .signal_at
                        .get_mut(usize::from(container))
                        .ok_or("signal for an unknown container")?;
                    if slot.is_some() {
                        return Err(format!("second stop signal for {container}"));
                    }
                    if !after.killing {
                        return Err("stop signal before the kill started".into());
                    }
                    *slot = Some(now);
                }
                Action::SendKill { container } => {
                    let Some(Some(signal)) = self.signal_at.get(usize::from(container)).copied()
                    else {
                        return Err(format!("SIGKILL for {container} without a stop signal"));
                    };
                    let floor = signal.saturating_add(MIN_STOP_MILLIS);
                    if now < floor {
                        return Err(format!(
                            "R62: SIGKILL for {container} at {now}, stop signal at {signal}"
                        ));
                    }
                    let earliest = self
                        .earliest
                        .get(usize::from(container))
                        .copied()
                        .flatten()
                        .ok_or("SIGKILL before the kill started")?;
                    if now < earliest {
                        return Err(format!(
                            "SIGKILL for {container} at {now}, budget spent at {earliest}"
                        ));
                    }
                }
                Action::RemoveEndpoints
                | Action::RunPreStop { .. }
                | Action::ContainerStopped { .. }
                | Action::Remove { .. } => {}
                other => return Err(format!("an action the checker does not know: {other:?}")),
            }
        }
        // The deadline as scheduled already respects both floors.
        for (i, c) in s.after.containers().iter().enumerate() {
            if let Stage::Stopping { kill_at } = c.stage() {
                let signal = self.signal_at.get(i).copied().flatten();
                let Some(signal) = signal else {
                    return Err(format!("container {i} stopping without a stop signal"));
                };
                if c.stop_signal_sent_at() != Some(Instant::from_millis(signal)) {
                    return Err(format!(
                        "container {i}: signal reported at {:?}, emitted at {signal}",
                        c.stop_signal_sent_at()
                    ));
                }
                let kill_at = kill_at.as_millis();
                let floor = signal.saturating_add(MIN_STOP_MILLIS);
                let earliest = self.earliest.get(i).copied().flatten().unwrap_or(u64::MAX);
                if kill_at < floor || kill_at < earliest {
                    return Err(format!(
                        "container {i}: SIGKILL due at {kill_at}, signal at {signal}, budget spent at {earliest}"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Invariant 4: a record that holds finalizers is never removed. The only
/// finalizers a removed record may still show are the garbage collector's,
/// dropped by the very delete that removed the unmodified record (R30, R40).
/// Removal happens once, with exactly one `Action::Remove`.
struct FinalizersBlockRemoval {
    strategy: DeleteStrategy,
}

impl FinalizersBlockRemoval {
    fn removable(&self, record: &Record<F>, options: Option<&DeleteOptions>) -> Result<(), String> {
        let mut held = record.finalizers.iter().filter(|n| !is_gc_finalizer(n));
        if let Some(n) = held.next() {
            return Err(format!("removed while held by finalizer {n}"));
        }
        if !record.finalizers.is_empty() && !delete_drops_gc_finalizers(&self.strategy, options) {
            return Err(format!(
                "removed while held by {:?}, which this request keeps",
                record.finalizers
            ));
        }
        Ok(())
    }
}

impl Invariant for FinalizersBlockRemoval {
    fn start(setup: &Setup) -> Self {
        FinalizersBlockRemoval {
            strategy: setup.strategy,
        }
    }

    fn check(&mut self, s: &Step<'_>) -> Result<(), String> {
        let removes = s
            .actions
            .iter()
            .filter(|a| matches!(a, Action::Remove { .. }))
            .count();
        let removed = s.before.is_stored() && !s.after.is_stored();
        if removes != usize::from(removed) {
            return Err(format!("{removes} Remove actions, removed: {removed}"));
        }
        if removed {
            self.removable(s.after.record(), s.options)?;
        }
        if let Reply::Delete(Ok(response)) = s.reply
            && response.dry_run
            && response.outcome == DeleteOutcome::Deleted
        {
            self.removable(&response.record, s.options)
                .map_err(|e| format!("dry run: {e}"))?;
        }
        Ok(())
    }
}

/// Invariant 5, D4, D7: a removal while the workload may still run is
/// flagged force, and only then. Tracked from the outside: a container runs
/// from the start (unless stopped or the pod finished) until its
/// `ContainerStopped`; only a scheduled pod runs anything.
struct RemovalWhileRunningIsForced {
    has_agent: bool,
    running: Vec<bool>,
}

impl RemovalWhileRunningIsForced {
    fn may_run(&self) -> bool {
        self.has_agent && self.running.iter().any(|r| *r)
    }
}

impl Invariant for RemovalWhileRunningIsForced {
    fn start(setup: &Setup) -> Self {
        RemovalWhileRunningIsForced {
            has_agent: setup.has_agent(),
            running: setup
                .containers
                .iter()
                .map(|c| !c.stopped && !setup.phase.is_terminal())
                .collect(),
        }
    }

    fn check(&mut self, s: &Step<'_>) -> Result<(), String> {
        let may_run_before = self.may_run();
        let mut removal = None;
        for action in s.actions {
            match *action {
                Action::ContainerStopped { container } => {
                    *self
                        .running
                        .get_mut(usize::from(container))
                        .ok_or("unknown container stopped")? = false;
                }
                Action::Remove { force } => {
                    if force != self.may_run() {
                        return Err(format!(
                            "Remove {{ force: {force} }} while the workload may run: {}",
                            self.may_run()
                        ));
                    }
                    removal = Some(force);
                }
                Action::RemoveEndpoints
                | Action::RunPreStop { .. }
                | Action::SendStopSignal { .. }
                | Action::SendKill { .. } => {}
                other => return Err(format!("an action the checker does not know: {other:?}")),
            }
        }
        match s.reply {
            Reply::Delete(Ok(r)) if r.dry_run => {
                let expected = r.outcome == DeleteOutcome::Deleted && may_run_before;
                if r.force != expected {
                    return Err(format!("dry run force {}, expected {expected}", r.force));
                }
            }
            Reply::Delete(Ok(r)) => {
                if r.force != removal.unwrap_or(false)
                    || (r.outcome == DeleteOutcome::Deleted) != removal.is_some()
                {
                    return Err(format!(
                        "response {:?} force {} but removal {removal:?}",
                        r.outcome, r.force
                    ));
                }
            }
            Reply::Update(Ok(UpdateOutcome::Deleted { force })) => {
                if removal != Some(*force) {
                    return Err(format!("update force {force} but removal {removal:?}"));
                }
            }
            Reply::Update(Ok(UpdateOutcome::Updated)) if removal.is_some() => {
                return Err("update says Updated but the record was removed".into());
            }
            Reply::Nothing
            | Reply::Delete(Err(_))
            | Reply::Update(_)
            | Reply::Handled(_)
            | Reply::Container(_) => {}
        }
        Ok(())
    }
}

/// Refused requests (invalid, conflict, not found, full, unknown container),
/// dry runs (R42) and early timeouts change nothing at all.
struct RefusalsChangeNothing;

impl Invariant for RefusalsChangeNothing {
    fn start(_: &Setup) -> Self {
        RefusalsChangeNothing
    }

    fn check(&mut self, s: &Step<'_>) -> Result<(), String> {
        let why = match s.reply {
            Reply::Delete(Err(e)) => Some(format!("refused delete ({e:?})")),
            Reply::Delete(Ok(r)) if r.dry_run => Some("dry run".into()),
            Reply::Update(Err(e)) => Some(format!("refused update ({e:?})")),
            Reply::Container(Err(UnknownContainer)) => {
                let index = match s.event {
                    Event::PreStopFinished(i) | Event::ContainerExited(i) => *i,
                    _ => 0,
                };
                if index < s.before.containers().len() {
                    return Err(format!("container {index} exists but was refused"));
                }
                Some("unknown container".into())
            }
            Reply::Nothing
            | Reply::Delete(Ok(_))
            | Reply::Update(Ok(_))
            | Reply::Handled(_)
            | Reply::Container(Ok(_)) => None,
        };
        let early = s
            .timeout_before
            .is_some_and(|t| t.is_none_or(|t| t > s.now.mono));
        let why = why.or_else(|| early.then(|| "early timeout".into()));
        if let Some(why) = why
            && (s.after != s.before || !s.actions.is_empty())
        {
            return Err(format!("{why} changed the lifecycle"));
        }
        Ok(())
    }
}

/// A finished lifecycle (D4: removed, nothing owed, nothing left running)
/// stays finished: no later input yields an action or a deadline, so a
/// caller that forgets it at that point drops nothing.
struct FinishedIsFinal {
    finished: bool,
}

impl Invariant for FinishedIsFinal {
    fn start(_: &Setup) -> Self {
        FinishedIsFinal { finished: false }
    }

    fn check(&mut self, s: &Step<'_>) -> Result<(), String> {
        if self.finished {
            if !s.actions.is_empty() {
                return Err("a finished lifecycle handed out actions".into());
            }
            if !s.after.is_finished() {
                return Err("a finished lifecycle is no longer finished".into());
            }
        }
        if s.after.is_finished() {
            if let Some(deadline) = s.after.poll_timeout() {
                return Err(format!("finished, yet a deadline at {deadline:?}"));
            }
            if s.after.phase() != Phase::Deleted || s.after.has_action() {
                return Err("finished, yet stored or owing an action".into());
            }
        }
        self.finished = s.after.is_finished();
        Ok(())
    }
}

/// Invariant 6: only the harness's own checks (no panic, `poll_action` runs dry).
struct NoPanic;

impl Invariant for NoPanic {
    fn start(_: &Setup) -> Self {
        NoPanic
    }

    fn check(&mut self, _: &Step<'_>) -> Result<(), String> {
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn invariant_deletion_timestamp_never_moves_later((setup, events) in scenario()) {
        run::<DeletionTimestampNeverMovesLater>(&setup, &events)?;
    }

    #[test]
    fn invariant_stored_grace_never_grows((setup, events) in scenario()) {
        run::<StoredGraceNeverGrows>(&setup, &events)?;
    }

    #[test]
    fn invariant_agent_budget_never_grows((setup, events) in scenario()) {
        run::<AgentBudgetNeverGrows>(&setup, &events)?;
    }

    #[test]
    fn invariant_deleted_is_terminal((setup, events) in scenario()) {
        run::<DeletedIsTerminal>(&setup, &events)?;
    }

    #[test]
    fn invariant_sigkill_never_before_its_due_time((setup, events) in scenario()) {
        run::<SigkillNeverEarly>(&setup, &events)?;
    }

    #[test]
    fn invariant_record_with_finalizers_is_never_removed((setup, events) in scenario()) {
        run::<FinalizersBlockRemoval>(&setup, &events)?;
    }

    #[test]
    fn invariant_removal_while_workload_may_run_is_forced((setup, events) in scenario()) {
        run::<RemovalWhileRunningIsForced>(&setup, &events)?;
    }

    #[test]
    fn invariant_refusals_dry_runs_and_early_timeouts_change_nothing((setup, events) in scenario()) {
        run::<RefusalsChangeNothing>(&setup, &events)?;
    }

    #[test]
    fn d4_invariant_finished_is_final((setup, events) in scenario()) {
        run::<FinishedIsFinal>(&setup, &events)?;
    }

    #[test]
    fn invariant_no_panic_for_any_input((setup, events) in scenario()) {
        run::<NoPanic>(&setup, &events)?;
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
        .handle_delete(now, &DeleteOptions::with_grace(i64::MAX))
        .expect("accepted");
    assert_eq!(response.outcome, DeleteOutcome::Graceful);
    // D2: the timestamp saturates at 9999-12-31T23:59:59Z; the grace is the one asked.
    assert_eq!(
        lc.record().deletion_timestamp,
        Some(Timestamp::from_unix_seconds(MAX_TIMESTAMP_SECONDS))
    );
    assert_eq!(lc.record().deletion_grace_period_seconds, Some(i64::MAX));
    assert_eq!(lc.handle_agent_sync(now), Handled::Applied);
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
        .handle_delete(later, &DeleteOptions::with_grace(5))
        .expect("accepted");
    assert_eq!(response.outcome, DeleteOutcome::Graceful);
    assert_eq!(
        lc.record().deletion_timestamp,
        Some(Timestamp::from_unix_seconds(1_700_000_010))
    );
    assert_eq!(lc.record().deletion_grace_period_seconds, Some(1));
    // D5: the agent takes it at once; the signal was sent, so SIGKILL at
    // now + max(1, 2) s (R62).
    assert_eq!(lc.handle_agent_sync(later), Handled::Applied);
    assert_eq!(lc.agent().remembered_grace, 1);
    assert_eq!(lc.poll_timeout(), Some(Instant::from_millis(13_000)));
}

#[test]
fn grace_i64_min_reads_as_one_second() {
    let mut lc = pod(&[app()]);
    let now = Now::from_unix_millis(1_700_000_000_000);
    let _ = lc
        .handle_delete(now, &DeleteOptions::with_grace(i64::MIN))
        .expect("accepted");
    // R9: negative means 1.
    assert_eq!(lc.record().deletion_grace_period_seconds, Some(1));
    assert_eq!(
        lc.record().deletion_timestamp,
        Some(Timestamp::from_unix_seconds(1_700_000_001))
    );
    // R52, R54: an eviction with i64::MIN only shortens, to 1 s.
    assert_eq!(lc.handle_evict(now, i64::MIN), Handled::Applied);
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
        .handle_delete(at(start), &DeleteOptions::default())
        .expect("accepted");
    assert_eq!(lc.handle_agent_sync(at(start)), Handled::Applied);
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
    lc.handle_timeout(at(u64::MAX - 1));
    assert_eq!(drain(&mut lc), []);
    lc.handle_timeout(at(u64::MAX));
    assert_eq!(drain(&mut lc), [Action::SendStopSignal { container: 0 }]);
    // SIGKILL saturates too, and is due no earlier than the signal.
    assert_eq!(lc.poll_timeout(), Some(Instant::MAX));
    lc.handle_timeout(at(u64::MAX));
    assert_eq!(drain(&mut lc), [Action::SendKill { container: 0 }]);
    assert_eq!(lc.poll_timeout(), None);
}

#[test]
fn wall_clock_at_end_of_i64_does_not_overflow() {
    for wall in [i64::MAX, i64::MAX - 999, i64::MIN, i64::MIN + 1] {
        for grace in [i64::MIN, -1, 0, 1, 30, i64::MAX] {
            let mut lc = pod(&[app()]);
            let now = Now::new(WallTime::from_unix_millis(wall), Instant::ZERO);
            let response = lc.handle_delete(now, &DeleteOptions::with_grace(grace));
            let floor = WallTime::from_unix_millis(wall).floor_to_timestamp();
            let _ = response.expect("accepted");
            let ts = lc.record().deletion_timestamp.expect("set");
            assert!(ts >= floor, "{wall} {grace}: {ts} before {floor}");
            // A shortening at the same instant never moves it later.
            let _ = lc.handle_delete(now, &DeleteOptions::with_grace(0));
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
        lc.handle_finalizer_update(now, &FinalizerChange::Add(name("example.com/d"))),
        Err(UpdateError::TooManyFinalizers)
    );
    // Orphan propagation needs room for the `orphan` finalizer (R37, R39).
    let orphan = DeleteOptions {
        propagation_policy: Some(Propagation::Orphan),
        ..DeleteOptions::default()
    };
    assert_eq!(
        lc.handle_delete(now, &orphan),
        Err(DeleteError::TooManyFinalizers)
    );
    assert_eq!(lc, before, "a refused request changes nothing");
    // Without the extra finalizer the delete goes through and the record stays (invariant 4).
    let response = lc
        .handle_delete(now, &DeleteOptions::with_grace(0))
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
        assert_eq!(lc.handle_container_exited(now, i), Err(UnknownContainer));
        assert_eq!(lc.handle_pre_stop_finished(now, i), Err(UnknownContainer));
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
    run::<DeletedIsTerminal>(&minimal, &events).expect("Deleted is terminal");

    // The same for an unscheduled pod, checked directly.
    let mut record = Record::<F>::new(name(UID));
    record.scheduled = false;
    let mut lc = Lifecycle::<F, C>::new(DeleteStrategy::POD, record, &[spec]).expect("fits");
    let now = Now::from_unix_millis(1_700_000_000_000);
    let response = lc
        .handle_delete(now, &DeleteOptions::default())
        .expect("accepted");
    assert_eq!(response.outcome, DeleteOutcome::Deleted);
    assert!(!response.force, "nothing of an unscheduled pod runs (R19)");
    assert_eq!(drain(&mut lc), [Action::Remove { force: false }]);
    let before = lc.clone();
    assert_eq!(lc.handle_container_exited(now, 0), Ok(Handled::Ignored));
    assert_eq!(drain(&mut lc), []);
    assert_eq!(lc, before);
}
