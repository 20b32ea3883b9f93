//! `grace simulate`: replays a scenario on a manual clock, with a simulated
//! agent and simulated processes, and records what the machine decided and
//! did as a [`Timeline`].
//!
//! The world model (docs/scenarios.md): a pre-stop hook runs for the container's
//! `pre_stop_seconds`; a process exits `exits_after_sigterm_seconds` after
//! its stop signal, or at once when killed. At one instant, the world's
//! reports (exits, hooks returning) come first, then the machine's own
//! deadlines, then the scenario's input — so a process that exits at the
//! instant its SIGKILL is due is not killed.

use grace_core::{
    Action, BackOff, Container, DeleteError, DeleteOutcome, FinalizerChange, Handled, Input,
    Instant, Lifecycle, Now, Phase, Reply, UpdateError, UpdateOutcome, WallTime, decide_delete,
    restarts_after_exit,
};

use crate::scenario::{
    DeleteRequest, MAX_CONTAINERS, MAX_FINALIZERS, Scenario, ScenarioEvent, ScenarioEventKind,
};
use crate::timeline::{ActionKind, Entry, EntryKind, EventEntry, Outcome, RecordView, Timeline};

/// The lifecycle type the simulator drives.
pub type SimLifecycle = Lifecycle<MAX_FINALIZERS, MAX_CONTAINERS>;

/// Most steps a simulation may take before it is declared stuck: far more
/// than any scenario of a few hundred events and a few containers needs.
const MAX_STEPS: usize = 1_000_000;

/// Why a simulation could not finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimulateError {
    /// The machine was built from an object it cannot hold.
    Object(String),
    /// The run exceeded a million steps (a bug: deadlines must make progress).
    Stuck {
        /// The simulated time it stopped at, in unix milliseconds.
        at_ms: i64,
    },
}

impl std::fmt::Display for SimulateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SimulateError::Object(m) => write!(f, "object: {m}"),
            SimulateError::Stuck { at_ms } => {
                write!(f, "simulation made no progress at {at_ms} ms")
            }
        }
    }
}

impl std::error::Error for SimulateError {}

/// One process's simulated behaviour in flight.
#[derive(Clone, Copy, Debug, Default)]
struct World {
    /// When the running pre-stop hook returns.
    hook_done_at: Option<i64>,
    /// When the process exits.
    exit_at: Option<i64>,
}

/// One container's restarts (with a `restart_policy`, R92–R97, D9).
#[derive(Clone, Copy, Debug, Default)]
struct Restarts {
    back_off: BackOff,
    /// The exit code of its last `container_exit` (what `OnFailure` reads).
    exit_code: i32,
    /// When the exit being waited out happened.
    exited: Instant,
    /// When it starts again, unix ms.
    restart_at: Option<i64>,
    /// Its restarts so far (`restartCount`).
    count: u32,
}

/// Runs a scenario to its end.
pub fn simulate(scenario: &Scenario) -> Result<Timeline, SimulateError> {
    Simulator::new(scenario)?.run()
}

struct Simulator<'a> {
    scenario: &'a Scenario,
    machine: SimLifecycle,
    world: Vec<World>,
    restarts: Vec<Restarts>,
    /// The monotonic clock's epoch, in unix milliseconds.
    base_ms: i64,
    phase: Phase,
    entries: Vec<Entry>,
    steps: usize,
}

impl<'a> Simulator<'a> {
    fn new(scenario: &'a Scenario) -> Result<Self, SimulateError> {
        let specs: Vec<_> = scenario.containers.iter().map(|c| c.spec()).collect();
        let machine = Lifecycle::new(scenario.strategy, scenario.record.clone(), &specs)
            .map_err(|e| SimulateError::Object(e.to_string()))?;
        let base_ms = scenario.events.first().map_or(0, |e| e.at_ms).min(0);
        Ok(Simulator {
            phase: machine.phase(),
            scenario,
            machine,
            world: vec![World::default(); scenario.containers.len()],
            restarts: vec![Restarts::default(); scenario.containers.len()],
            base_ms,
            entries: Vec::new(),
            steps: 0,
        })
    }

    fn now(&self, at_ms: i64) -> Now {
        let mono = at_ms.saturating_sub(self.base_ms).max(0) as u64;
        Now::new(
            WallTime::from_unix_millis(at_ms),
            Instant::from_millis(mono),
        )
    }

    fn to_unix_ms(&self, instant: Instant) -> i64 {
        let ms = i64::try_from(instant.as_millis()).unwrap_or(i64::MAX);
        ms.saturating_add(self.base_ms)
    }

    fn run(mut self) -> Result<Timeline, SimulateError> {
        let start_ms = self.scenario.events.first().map(|e| e.at_ms);
        for event in &self.scenario.events {
            self.advance(Some(event.at_ms))?;
            self.input(event);
        }
        let limit = self.scenario.until_ms;
        self.advance(limit)?;
        Ok(Timeline {
            name: self.scenario.name.clone(),
            node: self.scenario.node.clone(),
            containers: self
                .scenario
                .containers
                .iter()
                .map(|c| c.name.clone())
                .collect(),
            initial_phase: self.scenario_initial_phase(),
            start_ms: start_ms.unwrap_or(0),
            entries: self.entries,
        })
    }

    fn scenario_initial_phase(&self) -> Phase {
        let specs: Vec<_> = self.scenario.containers.iter().map(|c| c.spec()).collect();
        SimLifecycle::new(self.scenario.strategy, self.scenario.record.clone(), &specs)
            .map(|m| m.phase())
            .unwrap_or(Phase::Live)
    }

    /// The next time anything happens on its own: a world report or a deadline.
    fn next_internal(&self) -> Option<i64> {
        let world = self
            .world
            .iter()
            .flat_map(|w| [w.hook_done_at, w.exit_at])
            .chain(self.restarts.iter().map(|r| r.restart_at))
            .flatten()
            .min();
        let deadline = self.machine.poll_timeout().map(|t| self.to_unix_ms(t));
        match (world, deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs everything due up to and including `limit` (all of it when `None`).
    fn advance(&mut self, limit: Option<i64>) -> Result<(), SimulateError> {
        while let Some(at) = self.next_internal() {
            if limit.is_some_and(|l| at > l) {
                break;
            }
            // A deadline that saturated at the end of time (D2) never comes.
            if at == i64::MAX {
                break;
            }
            self.steps = self.steps.saturating_add(1);
            if self.steps > MAX_STEPS {
                return Err(SimulateError::Stuck { at_ms: at });
            }
            self.step_world(at);
        }
        Ok(())
    }

    /// One instant of the world: exits, then hooks returning, then deadlines.
    fn step_world(&mut self, at: i64) {
        let before = (self.view(), self.machine.is_stored());
        let mark = self.entries.len();
        self.step_world_reports(at);
        let after = (self.view(), self.machine.is_stored());
        if after != before {
            // Written by the agent itself (final delete, status): say so,
            // before the removal it may have caused.
            let position = self
                .entries
                .iter()
                .skip(mark)
                .position(|e| {
                    matches!(
                        e.kind,
                        EntryKind::Action {
                            kind: ActionKind::Remove { .. },
                            ..
                        }
                    )
                })
                .map_or(self.entries.len(), |p| mark.saturating_add(p));
            self.entries.insert(
                position,
                Entry {
                    at_ms: at,
                    kind: EntryKind::RecordWritten {
                        record: after.0,
                        stored: after.1,
                    },
                },
            );
        }
    }

    fn step_world_reports(&mut self, at: i64) {
        let now = self.now(at);
        for i in 0..self.world.len() {
            if let Some(w) = self.world.get_mut(i)
                && w.exit_at == Some(at)
            {
                *w = World::default();
                let _ = self
                    .machine
                    .handle(now, Input::container_exited(i))
                    .container();
                self.drain(at);
            }
        }
        for i in 0..self.world.len() {
            if let Some(w) = self.world.get_mut(i)
                && w.hook_done_at == Some(at)
            {
                w.hook_done_at = None;
                let _ = self
                    .machine
                    .handle(now, Input::pre_stop_finished(i))
                    .container();
                self.drain(at);
            }
        }
        for i in 0..self.restarts.len() {
            self.restart_if_due(i, at);
        }
        if self
            .machine
            .poll_timeout()
            .is_some_and(|t| self.to_unix_ms(t) <= at)
        {
            let _ = self.machine.handle(now, Input::Timeout);
            self.drain(at);
        }
    }

    /// Container `i`'s back-off ends at `at`: it is started again, unless
    /// the pod is being deleted by now (the core refuses, R94).
    fn restart_if_due(&mut self, i: usize, at: i64) {
        let now = self.now(at);
        let Some(r) = self
            .restarts
            .get_mut(i)
            .filter(|r| r.restart_at == Some(at))
        else {
            return;
        };
        r.restart_at = None;
        let started = self.machine.handle(now, Input::container_started(i));
        if started.container() == Ok(Handled::Applied) {
            r.back_off.restarted(r.exited, now.mono);
            r.count = r.count.saturating_add(1);
            let restart_count = r.count;
            self.entries.push(Entry {
                at_ms: at,
                kind: EntryKind::Action {
                    kind: ActionKind::Restart { restart_count },
                    container: Some(i),
                },
            });
        }
        self.drain(at);
    }

    /// Container `i` stopped at `at`: with a `restart_policy` that starts
    /// it again (R92–R94), it waits out its back-off (R95, D9).
    fn after_stop(&mut self, i: usize, at: i64) {
        let Some(policy) = self.scenario.restart_policy else {
            return;
        };
        let agent = self.machine.agent();
        let deleting = self.machine.record().deletion_timestamp.is_some()
            || !self.machine.is_stored()
            || self.machine.record().phase.is_terminal()
            || agent.killing
            || agent.deletion_seen
            || agent.evicted;
        let sidecar = self.scenario.containers.get(i).is_some_and(|c| c.sidecar);
        let now = self.now(at);
        let base_ms = self.base_ms;
        let Some(r) = self.restarts.get_mut(i) else {
            return;
        };
        if !restarts_after_exit(policy, sidecar, r.exit_code, deleting) {
            return;
        }
        let seconds = r.back_off.delay(now.mono).whole_seconds();
        let restart_at = r.back_off.restart_at(now.mono);
        r.exited = now.mono;
        let ms = i64::try_from(restart_at.as_millis()).unwrap_or(i64::MAX);
        r.restart_at = Some(ms.saturating_add(base_ms));
        self.entries.push(Entry {
            at_ms: at,
            kind: EntryKind::Action {
                kind: ActionKind::BackOff {
                    seconds: i64::try_from(seconds).unwrap_or(i64::MAX),
                },
                container: Some(i),
            },
        });
    }

    /// Takes the machine's actions, records them, and lets the world react.
    fn drain(&mut self, at: i64) {
        let mut stopped = Vec::new();
        while let Some(action) = self.machine.poll_action() {
            let (kind, container) = match action {
                Action::RemoveEndpoints => (ActionKind::RemoveEndpoints, None),
                Action::RunPreStop {
                    container,
                    budget_seconds,
                } => {
                    let container = usize::from(container);
                    // The exact budget (the action's saturates at 32 bits).
                    let budget_seconds = self
                        .machine
                        .containers()
                        .get(container)
                        .map_or(i64::from(budget_seconds), Container::budget_seconds);
                    if let Some(w) = self.world.get_mut(container) {
                        let run = self
                            .scenario
                            .containers
                            .get(container)
                            .and_then(|c| c.pre_stop_ms)
                            .unwrap_or(0);
                        w.hook_done_at = Some(at.saturating_add(run));
                    }
                    (ActionKind::PreStop { budget_seconds }, Some(container))
                }
                Action::SendStopSignal { container } => {
                    let container = usize::from(container);
                    if let Some(w) = self.world.get_mut(container) {
                        w.hook_done_at = None; // the hook is cut or over
                        w.exit_at = self
                            .scenario
                            .containers
                            .get(container)
                            .and_then(|c| c.exits_after_sigterm_ms)
                            .map(|d| at.saturating_add(d));
                    }
                    (ActionKind::Sigterm, Some(container))
                }
                Action::SendKill { container } => {
                    let container = usize::from(container);
                    if let Some(w) = self.world.get_mut(container) {
                        w.exit_at = Some(at);
                    }
                    (ActionKind::Sigkill, Some(container))
                }
                Action::ContainerStopped { container } => {
                    let container = usize::from(container);
                    if let Some(w) = self.world.get_mut(container) {
                        *w = World::default();
                    }
                    stopped.push(container);
                    (ActionKind::ContainerStopped, Some(container))
                }
                Action::Remove { force } => (ActionKind::Remove { force }, None),
                // An action this simulator does not model yet.
                _ => continue,
            };
            self.entries.push(Entry {
                at_ms: at,
                kind: EntryKind::Action { kind, container },
            });
        }
        for container in stopped {
            self.after_stop(container, at);
        }
        self.note_phase(at);
    }

    fn note_phase(&mut self, at: i64) {
        let phase = self.machine.phase();
        if phase != self.phase {
            self.phase = phase;
            self.entries.push(Entry {
                at_ms: at,
                kind: EntryKind::State(phase),
            });
        }
    }

    fn view(&self) -> RecordView {
        RecordView::of(self.machine.record())
    }

    /// Applies one scenario input and records its line, then its effects.
    fn input(&mut self, event: &ScenarioEvent) {
        let at = event.at_ms;
        let now = self.now(at);
        let was_stored = self.machine.is_stored();
        let mut entry = EventEntry {
            event: event.kind.name(),
            detail: describe(&event.kind, self.scenario),
            container: None,
            outcome: Outcome::Ok,
            error: None,
            dry_run: false,
            force: false,
            record: self.view(),
            stored: was_stored,
            state: self.machine.phase(),
        };
        match &event.kind {
            ScenarioEventKind::Delete(request) => self.delete(now, request, &mut entry),
            ScenarioEventKind::Input(input) => {
                if let Input::ContainerExited(c) = input
                    && let Some(r) = self.restarts.get_mut(c.get())
                {
                    r.exit_code = event.exit_code;
                }
                self.feed(now, input.clone(), &mut entry);
            }
            ScenarioEventKind::Get => {
                entry.outcome = if was_stored {
                    Outcome::Ok
                } else {
                    Outcome::NotFound
                };
            }
        }
        if !entry.dry_run && !matches!(entry.outcome, Outcome::Conflict | Outcome::Invalid) {
            entry.record = self.view();
        }
        entry.stored = self.machine.is_stored();
        entry.state = self.machine.phase();
        self.entries.push(Entry {
            at_ms: at,
            kind: EntryKind::Event(entry),
        });
        self.drain(at);
    }

    fn delete(&mut self, now: Now, request: &DeleteRequest, entry: &mut EventEntry) {
        if request.unmatchable_resource_version.is_some() {
            // Validation and the uid precondition still come first (R4).
            let probe = request.options.clone().with_dry_run(true);
            let verdict = match self
                .machine
                .clone()
                .handle(now, Input::Delete(probe.clone()))
                .delete()
                .unwrap_or(Err(DeleteError::NotFound))
            {
                Err(e) => Err(e),
                Ok(_) => Err(DeleteError::Conflict(grace_core::Conflict::ResourceVersion)),
            };
            return report_delete_error(verdict, entry);
        }
        self.feed(now, Input::Delete(request.options.clone()), entry);
    }

    /// Feeds one input to the machine and reports its reply in `entry`:
    /// one report per kind of reply, whatever the input.
    fn feed(&mut self, now: Now, input: Input, entry: &mut EventEntry) {
        let was_stored = self.machine.is_stored();
        // What the reply does not say again: a dry run's options (its
        // record is the decision not applied, R42), the container named.
        let dry_run = match &input {
            Input::Delete(options) if options.dry_run => Some(options.clone()),
            _ => None,
        };
        let fenced = matches!(input, Input::NodeFenced);
        if let Input::ContainerExited(c) = &input {
            let container = c.get();
            entry.container = Some(container);
            if let Some(w) = self.world.get_mut(container) {
                *w = World::default();
            }
        }
        match self.machine.handle(now, input) {
            Reply::Delete(Ok(response)) => {
                entry.outcome = match response.outcome {
                    DeleteOutcome::Graceful => Outcome::Graceful,
                    DeleteOutcome::Deleted => Outcome::Deleted,
                    // Pending (or an outcome added later): nothing changed.
                    _ => Outcome::Pending,
                };
                entry.force = response.force;
                entry.dry_run = response.dry_run;
                // The object the response refers to: the record as written,
                // or for a dry run (nothing changed) what the same decision
                // would write.
                let would = dry_run.map(|options| {
                    let machine = &self.machine;
                    decide_delete(machine.record(), &machine.strategy(), &options, now.wall)
                });
                entry.record = match would {
                    Some(Ok(decision)) => RecordView::of(&decision.record),
                    Some(Err(_)) | None => self.view(),
                };
            }
            Reply::Delete(Err(e)) => report_delete_error(Err(e), entry),
            Reply::Update(Ok(UpdateOutcome::Deleted { force })) => {
                entry.outcome = Outcome::Deleted;
                entry.force = force;
            }
            Reply::Update(Ok(_)) => entry.outcome = Outcome::Ok,
            Reply::Update(Err(UpdateError::NotFound)) => entry.outcome = Outcome::NotFound,
            Reply::Update(Err(e)) => {
                entry.outcome = Outcome::Invalid;
                entry.error = Some(e.to_string());
            }
            // A container the object does not have.
            Reply::Handled(Err(_)) => entry.outcome = Outcome::Ignored,
            other => {
                entry.outcome = handled(other.handled());
                // The fence issues the final delete on the agent's behalf
                // (D7): reported as the delete it is.
                if fenced && was_stored && !self.machine.is_stored() {
                    entry.outcome = Outcome::Deleted;
                }
            }
        }
    }
}

fn report_delete_error(verdict: Result<(), DeleteError>, entry: &mut EventEntry) {
    let Err(e) = verdict else { return };
    entry.outcome = match e {
        DeleteError::NotFound => Outcome::NotFound,
        DeleteError::Conflict(_) => Outcome::Conflict,
        DeleteError::Invalid(_) | DeleteError::TooManyFinalizers => Outcome::Invalid,
        _ => Outcome::Invalid,
    };
    if !matches!(entry.outcome, Outcome::NotFound) {
        entry.error = Some(e.to_string());
    }
}

fn handled(h: Handled) -> Outcome {
    match h {
        Handled::Applied => Outcome::Ok,
        Handled::Ignored => Outcome::Ignored,
        _ => Outcome::Ok,
    }
}

/// The input's payload in words, for the text timeline.
fn describe(kind: &ScenarioEventKind, scenario: &Scenario) -> String {
    match kind {
        ScenarioEventKind::Delete(request) => {
            let o = &request.options;
            let mut parts = Vec::new();
            match o.grace_period_seconds {
                Some(g) => parts.push(format!("grace {g}")),
                None => parts.push("default grace".to_string()),
            }
            if let Some(uid) = &o.preconditions.uid {
                parts.push(format!("uid {uid}"));
            }
            if let Some(rv) = o.preconditions.resource_version {
                parts.push(format!("resource_version {rv}"));
            }
            if let Some(rv) = &request.unmatchable_resource_version {
                parts.push(format!("resource_version {rv}"));
            }
            if let Some(p) = o.propagation_policy {
                parts.push(format!("propagation {p:?}"));
            }
            if let Some(orphan) = o.orphan_dependents {
                parts.push(format!("orphan_dependents {orphan}"));
            }
            if o.dry_run {
                parts.push("dry run".to_string());
            }
            format!("({})", parts.join(", "))
        }
        ScenarioEventKind::Input(Input::Evict {
            grace_period_seconds,
        }) => format!("(grace {grace_period_seconds})"),
        ScenarioEventKind::Input(Input::FinalizerUpdate(
            FinalizerChange::Add(n) | FinalizerChange::Remove(n),
        )) => n.to_string(),
        ScenarioEventKind::Input(Input::ContainerExited(c)) => scenario
            .containers
            .get(c.get())
            .map(|c| c.name.clone())
            .unwrap_or_default(),
        ScenarioEventKind::Input(_) | ScenarioEventKind::Get => String::new(),
    }
}
