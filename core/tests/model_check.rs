//! Exhaustive bounded model check of the lifecycle (issue 7, part 3).
//!
//! A plain breadth-first search over every interleaving of
//!
//! - API requests: delete with grace none (the spec's 30 s), 0 (force), 1,
//!   5 and 30 — which covers first deletions, shortenings, pending repeats
//!   and force deletes — and removal of the finalizer;
//! - agent progress: agent sync, pre-stop hook finished, container exited
//!   (during its kill, or on its own before it), and `handle_timeout`
//!   (early, at, or after `poll_timeout`);
//! - node loss, return and fencing;
//! - time: +0.5 s, +1 s, and a jump to the next deadline;
//!
//! from a few initial objects (a scheduled, running pod with one container
//! with and without a pre-stop hook and a finalizer, and one with an app and
//! a sidecar), up to a depth bound (inputs per path) and a time horizon.
//!
//! A state is the lifecycle (compared whole, with its `Eq`) together with
//! what the world has seen: the clock, each container's stop-signal and
//! SIGKILL times, which containers the caller was told stopped, the budget
//! end the kubelet rules give, and whether (and how) the record was removed.
//! States are hashed through a key built from the lifecycle's public
//! accessors and the world; equality is exact, so a hash collision never
//! merges two states. Every `poll_action` output is drained after each step.
//!
//! Every transition is checked against the invariants of core/RULES.md (see
//! [`Check`]); from every reachable state a deterministic fair completion
//! (finalizers removed, the agent connected and syncing, deadlines handled
//! when due, pre-stop hooks that hang, processes that ignore SIGTERM and die
//! on SIGKILL) must reach Deleted, with every container stopped, within a
//! bounded number of rounds and of simulated seconds.
//!
//! The checker takes the machine-driving step function as a parameter, so
//! `model_check_catches_broken_machines` can show that deliberately broken
//! machines are caught, each by the invariant it breaks.
//!
//! `model_check_with_evictions` adds agent-side evictions; it found a real
//! liveness bug in the core, since fixed (see there).
//!
//! Run: `cargo test -p grace-core --test model_check -- --nocapture`.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use grace_core::{
    Action, ContainerSpec, DeleteError, DeleteOptions, DeleteResponse, FinalizerChange, Handled,
    Input, Instant, Lifecycle, Link, Name, Now, Phase, Record, Stage, Strategy, UnknownContainer,
    UpdateError, UpdateOutcome, WallTime,
};
use grace_testkit::checker::{self, Answer, Checker, Invariant, Step};

/// Finalizer capacity: one is all the model uses.
const F: usize = 1;
/// Container capacity: an app and a sidecar.
const C: usize = 2;
type Lc = Lifecycle<F, C>;

// Short names: a `Name` clones byte by byte, and states are cloned a lot.
const UID: &str = "u1";
const FINALIZER: &str = "x.io/f";
/// t = 0 on the wall clock: a whole unix second, so that half-second steps
/// exercise R16's strict comparison and R48's flooring.
const WALL_START_MS: i64 = 1_700_000_000_000;
/// t = 0 on the monotonic clock.
const MONO_START_MS: u64 = 7_000_000;
/// The spec's `terminationGracePeriodSeconds` (`Record::new`'s default).
const SPEC_GRACE: i64 = 30;
/// The delete requests explored.
const GRACES: [Option<i64>; 5] = [None, Some(0), Some(1), Some(5), Some(30)];
/// The eviction overrides explored when evictions are on.
const EVICTIONS: [i64; 2] = [1, 5];
/// The longest grace any request or the spec can give.
const MAX_GRACE: i64 = 30;
/// The time steps explored besides "jump to the next deadline".
const TIME_STEPS_MS: [u64; 2] = [500, 1_000];
/// More than any one step can owe: endpoints, four outputs per container,
/// removal.
const MAX_ACTIONS_PER_STEP: usize = 2 + 4 * C;
/// Rounds a fair completion may take: each round removes finalizers, syncs
/// the agent, handles due deadlines and reports SIGKILLed processes exited,
/// then moves time to the next deadline.
const LIVENESS_ROUNDS: usize = 16;
/// Simulated time a fair completion may take: the longest grace, plus R62's
/// 2 s after a pre-stop hook spent it all, plus 1 s for R61's truncation of
/// the sidecar's wait (R64, R65).
const LIVENESS_MS: u64 = (MAX_GRACE.unsigned_abs() + 3) * 1000;
const NONE: u32 = u32::MAX;

fn name(s: &str) -> Name {
    Name::try_from(s).expect("short name")
}

// ---- Inputs and what the machine answers ------------------------------------

/// One input of the model. Time inputs only move the clock; the others go
/// to the machine.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Event {
    Delete(Option<i64>),
    RemoveFinalizer,
    AgentSync,
    Evict(i64),
    PreStopFinished(usize),
    ContainerExited(usize),
    HandleTimeout,
    NodeLost,
    NodeReady,
    NodeFenced,
    Advance(u64),
    ToDeadline,
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Delete(None) => f.write_str("delete (default grace)"),
            Event::Delete(Some(g)) => write!(f, "delete grace={g}"),
            Event::RemoveFinalizer => write!(f, "remove finalizer {FINALIZER}"),
            Event::AgentSync => f.write_str("agent sync"),
            Event::Evict(g) => write!(f, "evict grace={g}"),
            Event::PreStopFinished(i) => write!(f, "pre-stop finished #{i}"),
            Event::ContainerExited(i) => write!(f, "container exited #{i}"),
            Event::HandleTimeout => f.write_str("handle_timeout"),
            Event::NodeLost => f.write_str("node lost"),
            Event::NodeReady => f.write_str("node ready"),
            Event::NodeFenced => f.write_str("node fenced"),
            Event::Advance(ms) => write!(f, "time +{}s", Secs(*ms)),
            Event::ToDeadline => f.write_str("time → next deadline"),
        }
    }
}

/// Milliseconds printed as seconds.
struct Secs(u64);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_multiple_of(1000) {
            write!(f, "{}", self.0 / 1000)
        } else {
            write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
        }
    }
}

/// What a handler returned.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
enum Reply {
    Nothing,
    Delete(Result<DeleteResponse, DeleteError>),
    Update(Result<UpdateOutcome, UpdateError>),
    Handled(Handled),
    Container(Result<Handled, UnknownContainer>),
}

/// What one machine step did: the reply and every action polled after it.
struct Effects {
    reply: Reply,
    actions: Vec<Action>,
}

/// Drives the machine with one (non-time) input at `now` and drains its
/// actions. The checker is generic over it so that broken machines can be
/// checked too.
type Machine = fn(&mut Lc, Now, Event) -> Effects;

/// The lifecycle's input for `event`; `None` for the time steps, which
/// never reach the machine.
fn core_input(event: Event) -> Option<Input> {
    Some(match event {
        Event::Delete(grace) => Input::Delete(delete_options(grace)),
        Event::RemoveFinalizer => Input::FinalizerUpdate(FinalizerChange::Remove(name(FINALIZER))),
        Event::AgentSync => Input::AgentSync,
        Event::Evict(g) => Input::evict(g),
        Event::PreStopFinished(i) => Input::pre_stop_finished(i),
        Event::ContainerExited(i) => Input::container_exited(i),
        Event::HandleTimeout => Input::Timeout,
        Event::NodeLost => Input::NodeLost,
        Event::NodeReady => Input::NodeReady,
        Event::NodeFenced => Input::NodeFenced,
        Event::Advance(_) | Event::ToDeadline => return None,
    })
}

/// The real machine: the core's handler, then `poll_action` until dry.
fn real_machine(lc: &mut Lc, now: Now, event: Event) -> Effects {
    let reply = match core_input(event) {
        None => Reply::Nothing,
        Some(Input::Timeout) => {
            let _ = lc.handle(now, Input::Timeout);
            Reply::Nothing
        }
        Some(input @ (Input::PreStopFinished(_) | Input::ContainerExited(_))) => {
            Reply::Container(lc.handle(now, input).container())
        }
        Some(input) => match lc.handle(now, input) {
            grace_core::Reply::Delete(r) => Reply::Delete(r),
            grace_core::Reply::Update(r) => Reply::Update(r),
            other => Reply::Handled(other.handled()),
        },
    };
    let mut actions = Vec::new();
    while let Some(action) = lc.poll_action() {
        actions.push(action);
        if actions.len() > MAX_ACTIONS_PER_STEP {
            break; // reported by the ActionsDrain check
        }
    }
    Effects { reply, actions }
}

// ---- States ---------------------------------------------------------------------

/// What the world has seen, beside the lifecycle and the checker: the
/// clock, and what the coverage counts read. Times are milliseconds since
/// t = 0.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
struct World {
    t: u64,
    /// When each container's stop signal was emitted.
    signal_at: [Option<u64>; C],
    /// When each container's SIGKILL was emitted.
    kill_at: [Option<u64>; C],
    /// `Some(force)` once `Action::Remove` was emitted.
    removed: Option<bool>,
}

impl World {
    fn now(&self) -> Now {
        let wall = WALL_START_MS.saturating_add(i64::try_from(self.t).unwrap_or(i64::MAX));
        Now::new(
            WallTime::from_unix_millis(wall),
            Instant::from_millis(MONO_START_MS.saturating_add(self.t)),
        )
    }
}

/// Milliseconds since t = 0 of a monotonic instant.
fn since_start(i: Instant) -> u64 {
    i.as_millis().saturating_sub(MONO_START_MS)
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    lc: Lc,
    world: World,
    /// The shared checker, with what it tracks from the outside.
    checker: Checker<C>,
}

impl State {
    /// The search key, from public state only. Equal states give equal keys;
    /// states with equal keys are told apart by `Eq`.
    fn fingerprint(&self) -> u64 {
        let mut h = FxHasher::default();
        self.world.hash(&mut h);
        self.checker.hash(&mut h);
        let lc = &self.lc;
        lc.phase().hash(&mut h);
        lc.is_stored().hash(&mut h);
        let r = lc.record();
        r.uid.hash(&mut h);
        r.resource_version.hash(&mut h);
        r.generation.hash(&mut h);
        r.deletion_timestamp.hash(&mut h);
        r.deletion_grace_period_seconds.hash(&mut h);
        r.finalizers.len().hash(&mut h);
        for f in r.finalizers.iter() {
            f.hash(&mut h);
        }
        r.scheduled.hash(&mut h);
        r.phase.hash(&mut h);
        r.termination_grace_period_seconds.hash(&mut h);
        lc.agent().hash(&mut h);
        for c in lc.containers() {
            c.hash(&mut h);
        }
        lc.poll_timeout().hash(&mut h);
        h.finish()
    }

    /// Nothing can change any more but the clock: removed, and every
    /// container stopped.
    fn quiescent(&self) -> bool {
        self.lc.phase() == Phase::Deleted
            && self
                .lc
                .containers()
                .iter()
                .all(|c| c.stage() == Stage::Stopped)
    }
}

/// A fast non-cryptographic hasher (rustc's Fx): SipHash dominates the
/// search in a debug build otherwise.
#[derive(Default)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_i64(&mut self, n: i64) {
        self.write_u64(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Fingerprints are already hashes: the index uses them as they are.
#[derive(Default)]
struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type Index = HashMap<u64, u32, BuildHasherDefault<IdentityHasher>>;

// ---- The initial objects ---------------------------------------------------------

/// A starting point: a scheduled, running pod (spec grace 30 s).
#[derive(Copy, Clone, Debug)]
struct Object {
    name: &'static str,
    containers: &'static [ContainerSpec],
    finalizer: bool,
}

const APP: ContainerSpec = ContainerSpec {
    pre_stop: false,
    sidecar: false,
    stopped: false,
};
const APP_HOOK: ContainerSpec = ContainerSpec {
    pre_stop: true,
    sidecar: false,
    stopped: false,
};
const SIDECAR: ContainerSpec = ContainerSpec {
    pre_stop: false,
    sidecar: true,
    stopped: false,
};

const OBJECTS: [Object; 5] = [
    Object {
        name: "app",
        containers: &[APP],
        finalizer: false,
    },
    Object {
        name: "app+pre-stop",
        containers: &[APP_HOOK],
        finalizer: false,
    },
    Object {
        name: "app+finalizer",
        containers: &[APP],
        finalizer: true,
    },
    Object {
        name: "app+pre-stop+finalizer",
        containers: &[APP_HOOK],
        finalizer: true,
    },
    Object {
        name: "app+pre-stop, sidecar",
        containers: &[APP_HOOK, SIDECAR],
        finalizer: false,
    },
];

impl Object {
    fn state(&self) -> State {
        let mut record = Record::<F>::new(name(UID));
        assert_eq!(record.termination_grace_period_seconds, Some(SPEC_GRACE));
        if self.finalizer {
            record
                .finalizers
                .push(name(FINALIZER))
                .expect("room for one");
        }
        let lc = Lifecycle::new(Strategy::POD, record, self.containers).expect("at most C");
        State {
            checker: Checker::new(&lc),
            lc,
            world: World {
                t: 0,
                signal_at: [None; C],
                kill_at: [None; C],
                removed: None,
            },
        }
    }
}

// ---- The invariants ----------------------------------------------------------------

/// The property a violation breaks: one of grace-testkit's invariants (the
/// checker the `invariants` property tests and the `lifecycle` fuzz target
/// run, kept in each state here), or one of the search's own.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Check {
    /// `poll_action` runs dry after every step (invariant 6).
    ActionsDrain,
    /// One of the shared checker's invariants (core/RULES.md).
    Invariant(Invariant),
    /// Liveness: the fair completion reaches Deleted, everything stopped,
    /// within the round and time bounds.
    Termination,
}

type Fail = (Check, String);

fn fail<T>(check: Check, detail: impl Into<String>) -> Result<T, Fail> {
    Err((check, detail.into()))
}

/// The options of the model's delete with `grace`.
fn delete_options(grace: Option<i64>) -> DeleteOptions {
    DeleteOptions::default().with_grace_period(grace)
}

/// Applies one input to `before`, checks the transition, and returns the
/// next state.
fn step(before: &State, event: Event, machine: Machine) -> Result<State, Fail> {
    let mut after = before.clone();
    match event {
        Event::Advance(ms) => {
            after.world.t = after.world.t.saturating_add(ms);
            return Ok(after);
        }
        Event::ToDeadline => {
            if let Some(deadline) = before.lc.poll_timeout() {
                after.world.t = after.world.t.max(since_start(deadline));
            }
            return Ok(after);
        }
        _ => {}
    }
    let now = after.world.now();
    let effects = machine(&mut after.lc, now, event);
    check(before, event, now, &effects, &mut after)?;
    Ok(after)
}

/// Checks one machine step with the shared checker (whose state `after`
/// carries on) and records what the world saw.
fn check(
    before: &State,
    event: Event,
    now: Now,
    fx: &Effects,
    after: &mut State,
) -> Result<(), Fail> {
    let (b, a) = (&before.lc, &after.lc);
    // Invariant 6: the outputs run dry.
    if fx.actions.len() > MAX_ACTIONS_PER_STEP || a.has_action() {
        return fail(
            Check::ActionsDrain,
            format!("poll_action does not run dry: {:?}", fx.actions),
        );
    }
    let input = core_input(event);
    let options = match &input {
        Some(Input::Delete(options)) => Some(options.clone()),
        _ => None,
    };
    // No dry runs here: a delete's response refers to the record itself.
    let reply = match fx.reply {
        Reply::Nothing => checker::Reply::Nothing,
        Reply::Delete(r) => checker::Reply::Delete(r.map(|r| {
            let options = options.clone().unwrap_or_default();
            Answer::new(r, b, a, &options, now)
        })),
        Reply::Update(r) => checker::Reply::Update(r),
        Reply::Handled(h) => checker::Reply::Handled(h),
        Reply::Container(r) => checker::Reply::Container(r),
    };
    let step = Step {
        input: input.as_ref(),
        now,
        before: b,
        after: a,
        reply: &reply,
        actions: &fx.actions,
    };
    if let Some(v) = after.checker.check(&step).into_iter().next() {
        return fail(Check::Invariant(v.invariant), v.detail);
    }
    // What the world saw, for the coverage counts.
    let w = &mut after.world;
    for action in &fx.actions {
        match *action {
            Action::SendStopSignal { container } => {
                if let Some(slot) = w.signal_at.get_mut(usize::from(container)) {
                    *slot = Some(w.t);
                }
            }
            Action::SendKill { container } => {
                if let Some(slot) = w.kill_at.get_mut(usize::from(container)) {
                    *slot = Some(w.t);
                }
            }
            Action::Remove { force } => w.removed = Some(force),
            _ => {}
        }
    }
    Ok(())
}

// ---- Liveness -------------------------------------------------------------------------

/// How a fair completion went.
struct Completion {
    rounds: usize,
    ms: u64,
}

/// From `start`: the node comes back if it was lost, a deletion is asked
/// for if none was, and then, round after round, the finalizer is removed,
/// the agent syncs, due deadlines are handled and SIGKILLed processes exit;
/// time moves to the next deadline when nothing else is left to do. Hooks
/// hang and processes ignore SIGTERM (the slowest fair world). Every step is
/// checked like any other. Returns the events taken on failure.
fn complete(start: &State, machine: Machine) -> Result<Completion, (Check, String, Vec<Event>)> {
    let mut s = start.clone();
    let mut taken = Vec::new();
    let go = |s: &mut State, event: Event, taken: &mut Vec<Event>| {
        taken.push(event);
        match step(s, event, machine) {
            Ok(next) => {
                *s = next;
                Ok(())
            }
            Err((check, detail)) => Err((check, detail, taken.clone())),
        }
    };
    let done = |s: &State| s.quiescent();
    if s.lc.agent().link == Link::Lost {
        go(&mut s, Event::NodeReady, &mut taken)?;
    }
    if s.lc.phase() == Phase::Live {
        go(&mut s, Event::Delete(None), &mut taken)?;
    }
    for round in 0..LIVENESS_ROUNDS {
        if done(&s) {
            let ms = s.world.t.saturating_sub(start.world.t);
            if ms > LIVENESS_MS {
                return Err((
                    Check::Termination,
                    format!(
                        "Deleted only after {}s (bound {}s)",
                        Secs(ms),
                        Secs(LIVENESS_MS)
                    ),
                    taken,
                ));
            }
            return Ok(Completion { rounds: round, ms });
        }
        if !s.lc.record().finalizers.is_empty() && s.lc.is_stored() {
            go(&mut s, Event::RemoveFinalizer, &mut taken)?;
        }
        go(&mut s, Event::AgentSync, &mut taken)?;
        if s.lc.poll_timeout().is_some_and(|d| d <= s.world.now().mono) {
            go(&mut s, Event::HandleTimeout, &mut taken)?;
        }
        let mut exited = false;
        for i in 0..s.lc.containers().len() {
            if s.lc.containers().get(i).map(|c| c.stage()) == Some(Stage::Killed) {
                go(&mut s, Event::ContainerExited(i), &mut taken)?;
                exited = true;
            }
        }
        if !exited && !done(&s) {
            let event = match s.lc.poll_timeout() {
                Some(d) if d > s.world.now().mono => Event::ToDeadline,
                _ => Event::Advance(1_000),
            };
            go(&mut s, event, &mut taken)?;
        }
    }
    Err((
        Check::Termination,
        format!(
            "not Deleted with everything stopped after {LIVENESS_ROUNDS} fair rounds: phase {}, agent {:?}, containers {:?}",
            s.lc.phase(),
            s.lc.agent(),
            s.lc.containers()
                .iter()
                .map(|c| c.stage())
                .collect::<Vec<_>>()
        ),
        taken,
    ))
}

// ---- The search -------------------------------------------------------------------------

/// How far the search goes.
#[derive(Copy, Clone, Debug)]
struct Bounds {
    /// Inputs (time steps included) on a path from a one-container object.
    depth: u16,
    /// The same for the two-container object (its branching is wider).
    depth_two_containers: u16,
    /// No time step goes past this, in milliseconds from t = 0.
    horizon_ms: u64,
    /// Also explore agent-side evictions with grace 1 (R73) and 5 (R52).
    evictions: bool,
    /// Also let a running process exit on its own before its kill began.
    exits_while_running: bool,
}

/// The bounds of the main check: 10 inputs (time steps included) on a
/// path, 9 with two containers; no time step past t = 40 s, which is past
/// the longest grace (30 s), R62's 2 s and R65's truncation, with room to
/// act after them. About 1.5 million states, some 20 s in a debug build.
const BOUNDS: Bounds = Bounds {
    depth: 10,
    depth_two_containers: 9,
    horizon_ms: 40_000,
    evictions: false,
    exits_while_running: true,
};

/// The main check's bounds plus evictions, two inputs shallower.
const BOUNDS_WITH_EVICTIONS: Bounds = Bounds {
    depth: 8,
    depth_two_containers: 8,
    evictions: true,
    ..BOUNDS
};

impl Bounds {
    fn depth_for(&self, object: &Object) -> u16 {
        if object.containers.len() > 1 {
            self.depth_two_containers
        } else {
            self.depth
        }
    }
}

/// A broken invariant, the minimal path to it (BFS), and where.
#[derive(Debug)]
struct Violation {
    check: Check,
    detail: String,
    object: &'static str,
    trace: Vec<String>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:?} violated on {}: {}",
            self.check, self.object, self.detail
        )?;
        for (n, line) in self.trace.iter().enumerate() {
            writeln!(f, "  {n:>2}. {line}")?;
        }
        Ok(())
    }
}

/// What the search covered.
#[derive(Copy, Clone, Debug, Default)]
struct Stats {
    states: usize,
    transitions: usize,
    max_depth: u16,
    deleted_states: usize,
    /// States from which the fair completion was run (all of them).
    liveness_checked: usize,
    longest_completion_rounds: usize,
    longest_completion_ms: u64,
    /// Coverage: transitions that emitted a stop signal, a SIGKILL, a
    /// removal (forced or not), or shortened a kill in progress (D5);
    /// states with the node lost or fenced.
    stop_signals: usize,
    sigkills: usize,
    removals: usize,
    forced_removals: usize,
    shortenings: usize,
    lost_states: usize,
    fenced_states: usize,
}

impl Stats {
    fn add(&mut self, o: &Stats) {
        self.states += o.states;
        self.transitions += o.transitions;
        self.max_depth = self.max_depth.max(o.max_depth);
        self.deleted_states += o.deleted_states;
        self.liveness_checked += o.liveness_checked;
        self.longest_completion_rounds = self
            .longest_completion_rounds
            .max(o.longest_completion_rounds);
        self.longest_completion_ms = self.longest_completion_ms.max(o.longest_completion_ms);
        self.stop_signals += o.stop_signals;
        self.sigkills += o.sigkills;
        self.removals += o.removals;
        self.forced_removals += o.forced_removals;
        self.shortenings += o.shortenings;
        self.lost_states += o.lost_states;
        self.fenced_states += o.fenced_states;
    }

    /// Counts what one explored transition did.
    fn cover(&mut self, before: &State, after: &State) {
        let count = |w: &World, f: fn(&World) -> &[Option<u64>; C]| {
            f(w).iter().filter(|x| x.is_some()).count()
        };
        if count(&after.world, |w| &w.signal_at) > count(&before.world, |w| &w.signal_at) {
            self.stop_signals += 1;
        }
        if count(&after.world, |w| &w.kill_at) > count(&before.world, |w| &w.kill_at) {
            self.sigkills += 1;
        }
        if before.world.removed.is_none() {
            match after.world.removed {
                Some(true) => self.forced_removals += 1,
                Some(false) => self.removals += 1,
                None => {}
            }
        }
        let (b, a) = (before.lc.agent(), after.lc.agent());
        if b.killing && a.remembered_grace < b.remembered_grace {
            self.shortenings += 1;
        }
    }
}

struct Node {
    state: State,
    parent: u32,
    event: Option<Event>,
    depth: u16,
    /// The next node with the same fingerprint.
    next: u32,
}

/// Every input enabled in `s`.
fn events(s: &State, bounds: &Bounds, out: &mut Vec<Event>) {
    out.clear();
    let lc = &s.lc;
    if lc.is_stored() {
        out.extend(GRACES.iter().map(|g| Event::Delete(*g)));
    } else {
        out.push(Event::Delete(None)); // must be NotFound
    }
    if !lc.record().finalizers.is_empty() || !lc.is_stored() {
        out.push(Event::RemoveFinalizer);
    }
    out.push(Event::AgentSync);
    for (i, c) in lc.containers().iter().enumerate() {
        match c.stage() {
            Stage::PreStop { .. } => {
                out.push(Event::PreStopFinished(i));
                out.push(Event::ContainerExited(i));
            }
            Stage::AwaitingTurn { .. } | Stage::Stopping { .. } | Stage::Killed => {
                out.push(Event::ContainerExited(i));
            }
            // A process may end on its own (it finished, or crashed and is
            // not restarted) before its kill began.
            Stage::Running if bounds.exits_while_running => {
                out.push(Event::ContainerExited(i));
            }
            Stage::Running | Stage::Stopped => {}
            _ => {}
        }
    }
    out.push(Event::HandleTimeout);
    if bounds.evictions {
        out.extend(EVICTIONS.iter().map(|g| Event::Evict(*g)));
    }
    match lc.agent().link {
        Link::Connected => out.extend([Event::NodeLost, Event::NodeFenced]),
        Link::Lost => out.extend([Event::NodeReady, Event::NodeFenced]),
        Link::Fenced => {}
        other => panic!("the model check does not know {other:?} yet"),
    }
    if !s.quiescent() {
        for ms in TIME_STEPS_MS {
            if s.world.t.saturating_add(ms) <= bounds.horizon_ms {
                out.push(Event::Advance(ms));
            }
        }
        if let Some(d) = lc.poll_timeout().map(since_start)
            && d > s.world.t
            && d <= bounds.horizon_ms
        {
            out.push(Event::ToDeadline);
        }
    }
}

/// Breadth-first search from `object`, checking every transition and the
/// fair completion from every state reached.
fn model_check(object: &Object, bounds: &Bounds, machine: Machine) -> Result<Stats, Violation> {
    let mut nodes: Vec<Node> = Vec::new();
    let mut index = Index::default();
    let mut stats = Stats::default();

    let trace = |nodes: &[Node], mut at: u32, tail: &[Event], tail_from: &State| {
        let mut lines = Vec::new();
        while at != NONE {
            let node = &nodes[at as usize];
            if let Some(e) = node.event {
                let t = nodes[node.parent as usize].state.world.t;
                lines.push(format!("t={}s  {e}", Secs(t)));
            }
            at = node.parent;
        }
        lines.push(format!("t=0s  start: {}", object.name));
        lines.reverse();
        let mut s = tail_from.clone();
        let mut tail_lines = Vec::new();
        for e in tail {
            tail_lines.push(format!("t={}s  {e}", Secs(s.world.t)));
            if let Ok(next) = step(&s, *e, machine) {
                s = next;
            }
        }
        // A long fair completion repeats itself: keep its start and end.
        if tail_lines.len() > 12 {
            let skipped = tail_lines.len() - 10;
            tail_lines.splice(8..tail_lines.len() - 2, [format!("… {skipped} more")]);
        }
        (lines, tail_lines)
    };

    let root = object.state();
    index.insert(root.fingerprint(), 0);
    nodes.push(Node {
        state: root,
        parent: NONE,
        event: None,
        depth: 0,
        next: NONE,
    });
    let mut enabled = Vec::new();
    let mut head = 0usize;
    while head < nodes.len() {
        let at = u32::try_from(head).expect("fewer than 2^32 states");
        let (state, depth) = (nodes[head].state.clone(), nodes[head].depth);
        head += 1;
        stats.max_depth = stats.max_depth.max(depth);
        if state.lc.phase() == Phase::Deleted {
            stats.deleted_states += 1;
        }
        match state.lc.agent().link {
            Link::Connected => {}
            Link::Lost => stats.lost_states += 1,
            Link::Fenced => stats.fenced_states += 1,
            other => panic!("the model check does not know {other:?} yet"),
        }

        // Liveness from here.
        match complete(&state, machine) {
            Ok(c) => {
                stats.liveness_checked += 1;
                stats.longest_completion_rounds = stats.longest_completion_rounds.max(c.rounds);
                stats.longest_completion_ms = stats.longest_completion_ms.max(c.ms);
            }
            Err((check, detail, taken)) => {
                let (mut lines, tail) = trace(&nodes, at, &taken, &state);
                lines.push("-- fair completion from here --".to_string());
                lines.extend(tail);
                return Err(Violation {
                    check,
                    detail,
                    object: object.name,
                    trace: lines,
                });
            }
        }

        if depth >= bounds.depth_for(object) {
            continue;
        }
        events(&state, bounds, &mut enabled);
        for &event in &enabled {
            stats.transitions += 1;
            let next = match step(&state, event, machine) {
                Ok(next) => next,
                Err((check, detail)) => {
                    return Err(Violation {
                        check,
                        detail,
                        object: object.name,
                        trace: {
                            let (mut lines, tail) = trace(&nodes, at, &[event], &state);
                            lines.extend(tail);
                            lines
                        },
                    });
                }
            };
            stats.cover(&state, &next);
            let key = next.fingerprint();
            let first = index.get(&key).copied().unwrap_or(NONE);
            let mut probe = first;
            let mut seen = false;
            while probe != NONE {
                let node = &nodes[probe as usize];
                if node.state == next {
                    seen = true;
                    break;
                }
                probe = node.next;
            }
            if seen {
                continue;
            }
            let id = u32::try_from(nodes.len()).expect("fewer than 2^32 states");
            index.insert(key, id);
            nodes.push(Node {
                state: next,
                parent: at,
                event: Some(event),
                depth: depth + 1,
                next: first,
            });
        }
    }
    stats.states = nodes.len();
    Ok(stats)
}

/// Runs the check on every object, one thread each.
fn check_all(bounds: &Bounds, machine: Machine) -> Vec<(&'static str, Result<Stats, Violation>)> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = OBJECTS
            .iter()
            .map(|object| scope.spawn(move || (object.name, model_check(object, bounds, machine))))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .collect()
    })
}

/// Runs the real machine within `bounds` and prints what was covered.
fn run_and_report(title: &str, bounds: &Bounds) -> Vec<Violation> {
    let started = std::time::Instant::now();
    let results = check_all(bounds, real_machine);
    let mut total = Stats::default();
    let mut violations = Vec::new();
    println!(
        "{title}: depth ≤ {} ({} with two containers), horizon {}s, graces {GRACES:?}, evictions {:?}, time steps {TIME_STEPS_MS:?} ms + next deadline",
        bounds.depth,
        bounds.depth_two_containers,
        Secs(bounds.horizon_ms),
        if bounds.evictions {
            &EVICTIONS[..]
        } else {
            &[]
        },
    );
    for (name, result) in results {
        match result {
            Ok(stats) => {
                println!(
                    "  {name:<24} {:>9} states {:>10} transitions {:>8} deleted; fair completion ≤ {} rounds, ≤ {}s",
                    stats.states,
                    stats.transitions,
                    stats.deleted_states,
                    stats.longest_completion_rounds,
                    Secs(stats.longest_completion_ms)
                );
                assert_eq!(stats.liveness_checked, stats.states);
                total.add(&stats);
            }
            Err(v) => {
                println!("  {name:<24} VIOLATION {:?}", v.check);
                violations.push(v);
            }
        }
    }
    println!(
        "  total: {} states, {} transitions, liveness checked from every state, in {:.1?}",
        total.states,
        total.transitions,
        started.elapsed()
    );
    println!(
        "  covered: {} stop signals, {} SIGKILLs, {} removals + {} forced, {} shortenings in flight; {} states with the node lost, {} fenced",
        total.stop_signals,
        total.sigkills,
        total.removals,
        total.forced_removals,
        total.shortenings,
        total.lost_states,
        total.fenced_states
    );
    for v in &violations {
        println!("{v}");
    }
    violations
}

#[test]
fn model_check_lifecycle_exhaustively() {
    let violations = run_and_report("model check", &BOUNDS);
    assert!(violations.is_empty(), "{} violation(s)", violations.len());
}

/// The same search with agent-side evictions (R52, R73) added.
///
/// It finds a liveness violation in the core: a delete is accepted, an
/// eviction reaches the agent before its first sync, the workload stops, and
/// the agent reports the eviction (phase Failed) and marks its report made;
/// when it then syncs and sees the deletion it never sends R75's final
/// delete, so the record stays Terminating (grace 30) for ever:
///
/// ```text
/// t=0  delete (default grace)   → GracefulPending, ts = +30 s
/// t=0  evict grace=1            → SIGTERM (no pre-stop: straight to the signal)
/// t=0  container exited #0      → status Failed written, agent "reported"
///      agent sync, time passes  → nothing: never Deleted
/// ```
///
/// It was found by this check (R75: once the pod is terminal
/// and its deletion timestamp is set, the agent deletes it) and is fixed;
/// `r75_eviction_before_the_first_sync_still_ends_in_the_final_delete` in
/// `agent_rules.rs` keeps it fixed.
#[test]
fn model_check_with_evictions() {
    let violations = run_and_report("model check with evictions", &BOUNDS_WITH_EVICTIONS);
    assert!(violations.is_empty(), "{} violation(s)", violations.len());
}

// ---- Broken machines: the check can fail -----------------------------------------------

/// Sends SIGKILL 1 s after SIGTERM: on a `handle_timeout`, reports a kill
/// for any container signalled at least 1 s ago whose real deadline has not
/// come (an action the real machine did not emit).
fn kills_one_second_after_sigterm(lc: &mut Lc, now: Now, event: Event) -> Effects {
    let mut fx = real_machine(lc, now, event);
    if event == Event::HandleTimeout {
        for (i, c) in (0..=u8::MAX).zip(lc.containers()) {
            if let (Stage::Stopping { kill_at }, Some(sent)) = (c.stage(), c.stop_signal_sent_at())
                && now.mono.as_millis() >= sent.as_millis() + 1_000
                && now.mono < kill_at
            {
                fx.actions.push(Action::SendKill { container: i });
            }
        }
    }
    fx
}

/// Rebuilds the lifecycle around `record`, keeping the container specs.
/// Only faithful before the agent has done anything (the broken machines
/// below use it only then).
fn rebuilt(lc: &Lc, record: Record<F>) -> Lc {
    let specs: Vec<ContainerSpec> = lc.containers().iter().map(|c| c.spec()).collect();
    Lifecycle::new(lc.strategy(), record, &specs).expect("same containers")
}

fn agent_untouched(lc: &Lc) -> bool {
    let agent = lc.agent();
    agent.link == Link::Connected && !agent.killing && !agent.deletion_seen
}

/// Lets a repeated delete with a longer grace lengthen the stored grace.
fn lengthens_the_grace(lc: &mut Lc, now: Now, event: Event) -> Effects {
    let fx = real_machine(lc, now, event);
    if let Event::Delete(Some(g)) = event
        && lc.phase() == Phase::GracefulPending
        && agent_untouched(lc)
        && lc
            .record()
            .deletion_grace_period_seconds
            .is_some_and(|d| g > d)
    {
        let mut record = lc.record().clone();
        record.deletion_grace_period_seconds = Some(g);
        record.resource_version += 1;
        *lc = rebuilt(lc, record);
    }
    fx
}

/// Lets a repeated delete with a longer grace move the timestamp later.
fn moves_the_timestamp_later(lc: &mut Lc, now: Now, event: Event) -> Effects {
    let fx = real_machine(lc, now, event);
    if let Event::Delete(Some(g)) = event
        && lc.phase() == Phase::GracefulPending
        && agent_untouched(lc)
        && let Some(ts) = lc.record().deletion_timestamp
    {
        let later = now.wall.floor_to_timestamp().as_unix_seconds() + g + 1;
        if later > ts.as_unix_seconds() {
            let mut record = lc.record().clone();
            record.deletion_timestamp = Some(grace_core::Timestamp::from_unix_seconds(later));
            record.resource_version += 1;
            *lc = rebuilt(lc, record);
        }
    }
    fx
}

/// A force delete that ignores finalizers on a live object.
fn force_ignores_finalizers(lc: &mut Lc, now: Now, event: Event) -> Effects {
    if event == Event::Delete(Some(0))
        && lc.phase() == Phase::Live
        && agent_untouched(lc)
        && !lc.record().finalizers.is_empty()
    {
        let mut record = lc.record().clone();
        record.finalizers = Default::default();
        *lc = rebuilt(lc, record);
    }
    real_machine(lc, now, event)
}

/// Reports every removal as confirmed (never force).
fn hides_force(lc: &mut Lc, now: Now, event: Event) -> Effects {
    let mut fx = real_machine(lc, now, event);
    for a in &mut fx.actions {
        if let Action::Remove { force } = a {
            *force = false;
        }
    }
    fx
}

/// An agent that never looks at the record.
fn agent_never_syncs(lc: &mut Lc, now: Now, event: Event) -> Effects {
    if event == Event::AgentSync {
        return Effects {
            reply: Reply::Handled(Handled::Ignored),
            actions: Vec::new(),
        };
    }
    real_machine(lc, now, event)
}

#[test]
fn model_check_catches_broken_machines() {
    // (what, machine, object index in OBJECTS, the check that must fail)
    let cases: [(&str, Machine, usize, Check); 6] = [
        (
            "SIGKILL 1 s after SIGTERM",
            kills_one_second_after_sigterm,
            0,
            Check::Invariant(Invariant::SigkillNeverEarly),
        ),
        (
            "a longer re-delete lengthens the stored grace",
            lengthens_the_grace,
            0,
            Check::Invariant(Invariant::StoredGraceNeverGrows),
        ),
        (
            "a re-delete moves the deletion timestamp later",
            moves_the_timestamp_later,
            0,
            Check::Invariant(Invariant::TimestampNeverLater),
        ),
        (
            "force delete ignores finalizers",
            force_ignores_finalizers,
            2,
            Check::Invariant(Invariant::FinalizersBlockRemoval),
        ),
        (
            "removals never flagged force",
            hides_force,
            0,
            Check::Invariant(Invariant::ForceWhenWorkloadMayRun),
        ),
        (
            "the agent never syncs",
            agent_never_syncs,
            0,
            Check::Termination,
        ),
    ];
    for (what, machine, object, expected) in cases {
        let object = &OBJECTS[object];
        let v = match model_check(object, &BOUNDS, machine) {
            Ok(stats) => panic!(
                "broken machine not caught: {what} ({} states)",
                stats.states
            ),
            Err(v) => v,
        };
        println!("broken machine — {what}:\n{v}");
        assert_eq!(v.check, expected, "{what}: {v}");
    }
}
