//! The invariants of core/RULES.md, checked after every step of one
//! lifecycle.
//!
//! A harness drives a [`Lifecycle`] with any inputs, drains every action
//! after every step ([`drain`]), so that an action is "emitted" at the time
//! of the step that produced it, and hands the [`Checker`] a [`Step`]: the
//! lifecycle before and after, what was fed in, what came back and the
//! actions. The checker keeps what it needs from the outside (which
//! containers may still run, when each stop signal was sent, when the
//! budget is spent) and compares it with what the lifecycle does. Each
//! violation names the [`Invariant`] it breaks, so that a property test per
//! invariant fails under that invariant's name, and a fuzz target fails on
//! any.
//!
//! The `invariants` property tests of grace-core and the `lifecycle` fuzz
//! target both check with this one checker.

use std::fmt;

use grace_core::{
    Action, DeleteError, DeleteOptions, DeleteOutcome, DeleteResponse, FINALIZER_FOREGROUND,
    FINALIZER_ORPHAN, GcPolicy, Handled, Input, Instant, Kind, Lifecycle, MIN_STOP_SECONDS, Name,
    Now, Phase, Propagation, Record, Reply as CoreReply, Stage, Strategy, UnknownContainer,
    UpdateError, UpdateOutcome, WallTime, decide_delete,
};

use crate::convert::{to_opts, to_type};
use crate::reference as model;

/// R62 in milliseconds: SIGKILL never sooner than this after the stop
/// signal.
pub const MIN_STOP_MS: u64 = MIN_STOP_SECONDS.unsigned_abs() * 1000;

/// More actions than one step can owe with `C` containers: the endpoints,
/// four outputs per container, the removal.
pub const fn max_actions_per_step(containers: usize) -> usize {
    2 + 4 * containers
}

/// Both clocks; the monotonic one never goes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock {
    /// Wall clock, unix milliseconds.
    pub wall: i64,
    /// Monotonic clock, milliseconds.
    pub mono: u64,
}

impl Clock {
    /// The time as the core takes it.
    pub fn now(&self) -> Now {
        Now::new(
            WallTime::from_unix_millis(self.wall),
            Instant::from_millis(self.mono),
        )
    }

    /// Both clocks move on by `ms`, saturating.
    pub fn advance(&mut self, ms: u64) {
        self.mono = self.mono.saturating_add(ms);
        self.wall = self
            .wall
            .saturating_add(i64::try_from(ms).unwrap_or(i64::MAX));
    }

    /// Both clocks move on until the monotonic one reads `target` (never
    /// back).
    pub fn advance_to_mono(&mut self, target: i128) {
        let delta = target - i128::from(self.mono);
        if delta > 0 {
            self.advance(u64::try_from(delta).unwrap_or(u64::MAX));
        }
    }
}

/// Takes every action the lifecycle owes; `Err` with what was taken if it
/// does not run dry within [`max_actions_per_step`].
pub fn drain<const F: usize, const C: usize>(
    lc: &mut Lifecycle<F, C>,
) -> Result<Vec<Action>, Vec<Action>> {
    let mut actions = Vec::new();
    while let Some(action) = lc.poll_action() {
        actions.push(action);
        if actions.len() > max_actions_per_step(C) {
            return Err(actions);
        }
    }
    Ok(actions)
}

/// The REST answer to a delete: the response and the object it refers to
/// (the record as written, or for a dry run the record the same decision
/// would write).
#[derive(Debug)]
pub struct Answer<const F: usize> {
    /// The response's outcome.
    pub outcome: DeleteOutcome,
    /// The response says dry run.
    pub dry_run: bool,
    /// The response says force.
    pub force: bool,
    /// The object the response refers to.
    pub record: Record<F>,
}

impl<const F: usize> Answer<F> {
    /// The answer to `options` at `now`, from the lifecycle `before` and
    /// `after` the delete. Panics if a dry run was accepted but the same
    /// decision, made again, is refused.
    pub fn new<const C: usize>(
        response: DeleteResponse,
        before: &Lifecycle<F, C>,
        after: &Lifecycle<F, C>,
        options: &DeleteOptions,
        now: Now,
    ) -> Self {
        let record = if response.dry_run {
            match decide_delete(before.record(), &before.strategy(), options, now.wall) {
                Ok(decision) => decision.record,
                Err(e) => panic!("a dry run was accepted but its decision is {e:?}"),
            }
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

/// What a handler answered. One per step, read by pattern: not boxed.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Reply<const F: usize> {
    /// A clock step or `Input::Timeout`: no answer.
    Nothing,
    /// A delete request's answer.
    Delete(Result<Answer<F>, DeleteError>),
    /// A finalizer update's answer.
    Update(Result<UpdateOutcome, UpdateError>),
    /// An agent or node input's answer.
    Handled(Handled),
    /// A container report's answer.
    Container(Result<Handled, UnknownContainer>),
}

/// One step, as the checker sees it.
pub struct Step<'a, const F: usize, const C: usize> {
    /// What was fed in: the lifecycle's own [`Input`], or `None` when only
    /// the clocks moved.
    pub input: Option<&'a Input>,
    /// The time after the step.
    pub now: Now,
    /// The lifecycle before the step.
    pub before: &'a Lifecycle<F, C>,
    /// The lifecycle after the step (and after its actions were drained).
    pub after: &'a Lifecycle<F, C>,
    /// What the handler answered.
    pub reply: &'a Reply<F>,
    /// Everything `poll_action` returned after the step, in order.
    pub actions: &'a [Action],
}

impl<const F: usize, const C: usize> Step<'_, F, C> {
    /// The delete options sent, for a delete.
    pub fn options(&self) -> Option<&DeleteOptions> {
        match self.input {
            Some(Input::Delete(options)) => Some(options),
            _ => None,
        }
    }

    /// A timeout that came before the deadline the lifecycle gave.
    fn early_timeout(&self) -> bool {
        matches!(self.input, Some(Input::Timeout))
            && self.before.poll_timeout().is_none_or(|t| t > self.now.mono)
    }
}

/// Feeds `input` to `lc` at `now`, answered as the checker reads it.
pub fn feed<const F: usize, const C: usize>(
    lc: &mut Lifecycle<F, C>,
    now: Now,
    input: &Input,
) -> Reply<F> {
    let before = lc.clone();
    match lc.handle(now, input.clone()) {
        CoreReply::Delete(response) => {
            let options = match input {
                Input::Delete(options) => options.clone(),
                _ => DeleteOptions::default(),
            };
            Reply::Delete(response.map(|r| Answer::new(r, &before, lc, &options, now)))
        }
        CoreReply::Update(r) => Reply::Update(r),
        reply => match input {
            Input::Timeout => Reply::Nothing,
            Input::PreStopFinished(_)
            | Input::ContainerExited(_)
            | Input::ContainerStarted(_)
            | Input::StopSignalSent(_) => Reply::Container(reply.container()),
            _ => Reply::Handled(reply.handled()),
        },
    }
}

/// The invariants, each of which a violation names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Invariant {
    /// Invariant 1: Deleted is terminal — the phase agrees with storage and
    /// moves only forward, the uid never changes; once removed, the record
    /// never changes or comes back, no request finds it, nothing is removed
    /// again, and only the agent stopping a force-deleted workload (D4)
    /// still acts.
    DeletedIsTerminal,
    /// Invariant 2, R16: a deletion timestamp is never unset while stored
    /// and never moves later than `max(previous, now)`.
    TimestampNeverLater,
    /// Invariant 2: the stored grace only shrinks once set (a legacy
    /// negative reads as 1, R10).
    StoredGraceNeverGrows,
    /// R50–R55: the agent's budget never grows once set, is at least 1 s
    /// while killing, changes only when the agent looks (sync) or is
    /// overridden (evict), and is then the kubelet's budget.
    AgentBudget,
    /// R59, R60: per container, a pre-stop hook at most once, only with a
    /// hook, while killing, with the agent's budget; one stop signal, only while killing;
    /// one SIGKILL, only after the stop signal; one `ContainerStopped`;
    /// the endpoints removed once.
    KillSequence,
    /// Invariant 3, R62, R63, D5: SIGKILL (emitted or scheduled) never
    /// sooner than 2 s after its stop signal, never before the budget is
    /// spent, and emitted only once its own scheduled deadline has come; a
    /// hook's cut-off or a scheduled SIGKILL never moves later.
    SigkillNeverEarly,
    /// Invariant 4: a record with finalizers is never removed (only the
    /// garbage collector's, dropped by the very delete that removed it, R30,
    /// R40); one removal, one `Action::Remove`.
    FinalizersBlockRemoval,
    /// Invariant 5, D4, D7: a removal is flagged force exactly when the
    /// workload may still run, and the responses say the same.
    ForceWhenWorkloadMayRun,
    /// Refused requests, dry runs (R42), ignored agent, node and container
    /// inputs and early timeouts change nothing; a valid container index is
    /// never refused.
    RefusalsChangeNothing,
    /// After `Input::Timeout` at `now` no deadline is left at or before `now`
    /// (except at the very end of time, where deadlines saturate to `now`).
    Timeouts,
    /// D4: finished only when nothing may run, and then removed, owing
    /// nothing, with no deadline; once finished, no input yields an action
    /// or a deadline.
    FinishedIsFinal,
}

/// One broken invariant, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The invariant broken.
    pub invariant: Invariant,
    /// What was seen.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.invariant, self.detail)
    }
}

fn violation<T>(invariant: Invariant, detail: impl Into<String>) -> Result<T, Violation> {
    Err(Violation {
        invariant,
        detail: detail.into(),
    })
}

/// R10: a stored negative grace reads as 1.
fn read_grace(g: i64) -> i64 {
    if g < 0 { 1 } else { g }
}

/// `ms + seconds`, saturating at the end of time.
fn after_seconds(ms: u64, seconds: i64) -> u64 {
    let seconds = u64::try_from(seconds).unwrap_or(0);
    ms.saturating_add(seconds.saturating_mul(1000))
}

fn phase_rank(p: Phase) -> u8 {
    match p {
        Phase::Live => 0,
        Phase::GracefulPending => 1,
        Phase::Terminating => 2,
        Phase::Deleted => 3,
        other => panic!("a phase the checker does not know: {other:?}"),
    }
}

fn is_gc_finalizer(n: &Name) -> bool {
    n.as_str() == FINALIZER_ORPHAN || n.as_str() == FINALIZER_FOREGROUND
}

/// R36–R40, from the rule text: whether a delete (with these options, or
/// the agent's final delete with none) leaves no garbage-collection
/// finalizer, so that the unmodified stored object — still showing them —
/// is removed (R30, R40).
fn delete_drops_gc_finalizers(strategy: &Strategy, options: Option<&DeleteOptions>) -> bool {
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

/// Everything the invariants track from the outside of one lifecycle.
/// Small, and `Eq` and `Hash`, so that a model checker can keep one in
/// each state it explores.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Checker<const C: usize> {
    strategy: Strategy,
    ty: model::Type,
    /// A scheduled pod: something runs its containers.
    has_agent: bool,
    /// Containers that may still run (D4): from the start (unless stopped
    /// or the pod finished) until their `ContainerStopped`.
    running: [bool; C],
    /// A removal was flagged force.
    forced: bool,
    /// When each container's stop signal was emitted.
    signal_at: [Option<u64>; C],
    pre_stop_sent: [bool; C],
    killed: [bool; C],
    stopped_sent: [bool; C],
    endpoints_removed: bool,
    /// Per container, when the agent's budget is spent: the kill's start
    /// plus the budget, or earlier once a shorter budget `G` was taken at
    /// `t`: `t + G`, or `t + max(G, 2 s)` once the container was signalled
    /// (D5: Kubernetes' restarted kill, R55, R62).
    earliest_kill: [Option<u64>; C],
    deletion_seen: bool,
    evicted: bool,
}

impl<const C: usize> Checker<C> {
    /// The checker for `start`, a lifecycle no input has reached yet.
    pub fn new<const F: usize>(start: &Lifecycle<F, C>) -> Self {
        let strategy = start.strategy();
        let finished = start.record().phase.is_terminal();
        let mut running = [false; C];
        for (r, c) in running.iter_mut().zip(start.containers()) {
            *r = !c.spec().stopped && !finished;
        }
        Checker {
            strategy,
            ty: to_type(&strategy),
            has_agent: strategy.kind == Kind::Pod && start.record().scheduled,
            running,
            forced: false,
            signal_at: [None; C],
            pre_stop_sent: [false; C],
            killed: [false; C],
            stopped_sent: [false; C],
            endpoints_removed: false,
            earliest_kill: [None; C],
            deletion_seen: false,
            evicted: false,
        }
    }

    fn may_run(&self) -> bool {
        self.has_agent && self.running.iter().any(|r| *r)
    }

    /// Checks one step against every invariant; returns every violation
    /// (empty when all hold).
    pub fn check<const F: usize>(&mut self, s: &Step<'_, F, C>) -> Vec<Violation> {
        self.restarted(s);
        [
            self.deleted_is_terminal(s),
            self.timestamp_never_later(s),
            self.stored_grace_never_grows(s),
            self.agent_budget(s),
            self.kill_sequence_and_sigkill(s),
            self.finalizers_block_removal(s),
            self.force_when_workload_may_run(s),
            self.refusals_change_nothing(s),
            self.timeouts(s),
            self.finished_is_final(s),
        ]
        .into_iter()
        .filter_map(Result::err)
        .collect()
    }

    /// A container started again (R92, R93) may run again: its kill
    /// sequence starts afresh.
    fn restarted<const F: usize>(&mut self, s: &Step<'_, F, C>) {
        let Some(Input::ContainerStarted(c)) = s.input else {
            return;
        };
        let i = c.get();
        let was_stopped = s
            .before
            .containers()
            .get(i)
            .is_some_and(|c| c.stage() == Stage::Stopped);
        let runs = s
            .after
            .containers()
            .get(i)
            .is_some_and(|c| c.stage() == Stage::Running);
        if !(was_stopped && runs) {
            return;
        }
        for (flag, value) in [
            (self.running.get_mut(i), true),
            (self.pre_stop_sent.get_mut(i), false),
            (self.killed.get_mut(i), false),
            (self.stopped_sent.get_mut(i), false),
        ] {
            if let Some(flag) = flag {
                *flag = value;
            }
        }
        if let Some(at) = self.signal_at.get_mut(i) {
            *at = None;
        }
        if let Some(at) = self.earliest_kill.get_mut(i) {
            *at = None;
        }
    }

    /// [`Invariant::DeletedIsTerminal`].
    fn deleted_is_terminal<const F: usize>(&mut self, s: &Step<'_, F, C>) -> Result<(), Violation> {
        use Invariant::DeletedIsTerminal as I;
        if (s.after.phase() == Phase::Deleted) == s.after.is_stored() {
            return violation(
                I,
                format!(
                    "phase {} but is_stored {}",
                    s.after.phase(),
                    s.after.is_stored()
                ),
            );
        }
        if phase_rank(s.after.phase()) < phase_rank(s.before.phase()) {
            return violation(
                I,
                format!(
                    "phase went back: {} -> {}",
                    s.before.phase(),
                    s.after.phase()
                ),
            );
        }
        // Never changes from one step to the next, so never at all.
        if s.after.record().uid != s.before.record().uid {
            return violation(I, "the uid changed");
        }
        if s.before.phase() == Phase::Deleted {
            if s.after.phase() != Phase::Deleted || s.after.is_stored() {
                return violation(I, format!("came back as {}", s.after.phase()));
            }
            if s.after.record() != s.before.record() {
                return violation(I, "the record changed after removal");
            }
            for action in s.actions {
                match action {
                    Action::Remove { .. } | Action::RemoveEndpoints => {
                        return violation(I, format!("{action:?} after removal"));
                    }
                    Action::RunPreStop { .. }
                    | Action::SendStopSignal { .. }
                    | Action::SendKill { .. }
                    | Action::ContainerStopped { .. } => {
                        if !self.forced {
                            return violation(
                                I,
                                format!(
                                    "{action:?} after a removal that was not forced (nothing could run)"
                                ),
                            );
                        }
                    }
                    other => {
                        return violation(
                            I,
                            format!("an action the checker does not know: {other:?}"),
                        );
                    }
                }
            }
            match s.reply {
                Reply::Delete(Err(DeleteError::NotFound))
                | Reply::Update(Err(UpdateError::NotFound))
                | Reply::Nothing
                | Reply::Handled(_)
                | Reply::Container(_) => {}
                Reply::Delete(other) => {
                    return violation(I, format!("delete after removal: {other:?}"));
                }
                Reply::Update(other) => {
                    return violation(I, format!("update after removal: {other:?}"));
                }
            }
        }
        for action in s.actions {
            if let Action::Remove { force } = action {
                self.forced |= force;
            }
        }
        Ok(())
    }

    /// [`Invariant::TimestampNeverLater`].
    fn timestamp_never_later<const F: usize>(
        &mut self,
        s: &Step<'_, F, C>,
    ) -> Result<(), Violation> {
        if !s.before.is_stored() {
            return Ok(()); // frozen; see DeletedIsTerminal
        }
        let Some(previous) = s.before.record().deletion_timestamp else {
            return Ok(());
        };
        let bound = previous.max(s.now.wall.floor_to_timestamp());
        let check = |what: &str, r: &Record<F>| match r.deletion_timestamp {
            None => violation(
                Invariant::TimestampNeverLater,
                format!("{what}: deletion timestamp {previous} was unset"),
            ),
            Some(ts) if ts > bound => violation(
                Invariant::TimestampNeverLater,
                format!(
                    "{what}: deletion timestamp moved later: {previous} -> {ts} (bound max(previous, now) = {bound})"
                ),
            ),
            Some(_) => Ok(()),
        };
        check("record", s.after.record())?;
        if let Reply::Delete(Ok(r)) = s.reply {
            check("response", &r.record)?;
        }
        Ok(())
    }

    /// [`Invariant::StoredGraceNeverGrows`].
    fn stored_grace_never_grows<const F: usize>(
        &mut self,
        s: &Step<'_, F, C>,
    ) -> Result<(), Violation> {
        if !s.before.is_stored() {
            return Ok(());
        }
        let Some(previous) = s.before.record().deletion_grace_period_seconds else {
            return Ok(());
        };
        let check = |what: &str, r: &Record<F>| match r.deletion_grace_period_seconds {
            None => violation(
                Invariant::StoredGraceNeverGrows,
                format!("{what}: grace {previous} was unset"),
            ),
            Some(g) if read_grace(g) > read_grace(previous) => violation(
                Invariant::StoredGraceNeverGrows,
                format!("{what}: stored grace grew: {previous} -> {g}"),
            ),
            Some(_) => Ok(()),
        };
        check("record", s.after.record())?;
        if let Reply::Delete(Ok(r)) = s.reply {
            check("response", &r.record)?;
        }
        Ok(())
    }

    /// [`Invariant::AgentBudget`]: the expected budget is the reference
    /// model's `calculateEffectiveGracePeriod`.
    fn agent_budget<const F: usize>(&mut self, s: &Step<'_, F, C>) -> Result<(), Violation> {
        use Invariant::AgentBudget as I;
        let previous = s.before.agent().remembered_grace;
        let next = s.after.agent().remembered_grace;
        if previous > 0 && next > previous {
            return violation(
                I,
                format!("R50: the agent's budget grew: {previous} -> {next}"),
            );
        }
        if s.after.agent().killing && next < 1 {
            return violation(I, format!("R54: budget {next} below 1 s while killing"));
        }
        let record = s.before.record();
        let expected = match (s.input, s.reply) {
            (Some(Input::AgentSync), Reply::Handled(Handled::Applied)) => {
                if !s.before.is_stored() || record.deletion_timestamp.is_some() {
                    self.deletion_seen = true;
                }
                (self.deletion_seen || self.evicted).then(|| {
                    model::effective_grace(
                        previous,
                        record.deletion_grace_period_seconds,
                        None,
                        record.termination_grace_period_seconds,
                    )
                    .0
                })
            }
            (
                Some(&Input::Evict {
                    grace_period_seconds: grace,
                }),
                Reply::Handled(Handled::Applied),
            ) => {
                self.evicted = true;
                Some(
                    model::effective_grace(
                        previous,
                        None,
                        Some(grace),
                        record.termination_grace_period_seconds,
                    )
                    .0,
                )
            }
            _ => None,
        };
        match expected {
            Some(e) if next != e => violation(
                I,
                format!("R51–R54: agent budget {next}, the kubelet's budget gives {e}"),
            ),
            None if next != previous => violation(
                I,
                format!(
                    "the agent's budget changed without a sync or an override: {previous} -> {next}"
                ),
            ),
            Some(_) | None => Ok(()),
        }
    }

    /// [`Invariant::KillSequence`] and [`Invariant::SigkillNeverEarly`],
    /// which read the same actions and track the same times.
    fn kill_sequence_and_sigkill<const F: usize>(
        &mut self,
        s: &Step<'_, F, C>,
    ) -> Result<(), Violation> {
        use Invariant::{KillSequence as Seq, SigkillNeverEarly as Early};
        let now = s.now.mono.as_millis();
        let (before, after) = (s.before.agent(), s.after.agent());
        let grace = after.remembered_grace;
        if !before.killing && after.killing {
            self.earliest_kill = [Some(after_seconds(now, grace)); C];
        } else if before.killing && grace < before.remembered_grace {
            // D5: a shorter budget applies at once, counted from now.
            for (earliest, signal) in self.earliest_kill.iter_mut().zip(self.signal_at) {
                let seconds = if signal.is_some() {
                    grace.max(MIN_STOP_SECONDS)
                } else {
                    grace
                };
                let until = after_seconds(now, seconds);
                *earliest = Some(earliest.map_or(until, |e| e.min(until)));
            }
        }
        if after.killing && self.earliest_kill.iter().any(Option::is_none) {
            return violation(Seq, "killing without a start");
        }
        let pairs = s.before.containers().iter().zip(s.after.containers());
        for (i, (b, a)) in pairs.enumerate() {
            let moved_later = match (b.stage(), a.stage()) {
                (Stage::PreStop { cutoff: was }, Stage::PreStop { cutoff: is })
                | (Stage::Stopping { kill_at: was }, Stage::Stopping { kill_at: is }) => is > was,
                _ => false,
            };
            if moved_later {
                return violation(
                    Early,
                    format!(
                        "D5: container {i}'s deadline moved later: {:?} -> {:?}",
                        b.stage(),
                        a.stage()
                    ),
                );
            }
        }
        for action in s.actions {
            match *action {
                Action::RunPreStop {
                    container,
                    budget_seconds,
                } => {
                    let container = usize::from(container);
                    let has_hook = s
                        .after
                        .containers()
                        .get(container)
                        .is_some_and(|c| c.spec().pre_stop);
                    let Some(sent) = self.pre_stop_sent.get_mut(container) else {
                        return violation(Seq, "pre-stop for an unknown container");
                    };
                    if *sent || !has_hook || !after.killing {
                        return violation(
                            Seq,
                            format!(
                                "R59: pre-stop for {container} twice, without a hook or before the kill started"
                            ),
                        );
                    }
                    *sent = true;
                    // The action's budget saturates at 32 bits.
                    let grace = u32::try_from(after.remembered_grace).unwrap_or(u32::MAX);
                    if budget_seconds < 1 || budget_seconds != grace {
                        return violation(
                            Seq,
                            format!(
                                "R59/R60: pre-stop budget {budget_seconds}, agent's budget {}",
                                after.remembered_grace
                            ),
                        );
                    }
                }
                Action::SendStopSignal { container } => {
                    let container = usize::from(container);
                    let Some(slot) = self.signal_at.get_mut(container) else {
                        return violation(Seq, "stop signal for an unknown container");
                    };
                    if slot.is_some() {
                        return violation(Seq, format!("second stop signal for {container}"));
                    }
                    if !after.killing {
                        return violation(Seq, "stop signal before the kill started");
                    }
                    *slot = Some(now);
                }
                Action::SendKill { container } => {
                    let container = usize::from(container);
                    let Some(Some(signal)) = self.signal_at.get(container).copied() else {
                        return violation(
                            Seq,
                            format!("SIGKILL for {container} without a stop signal"),
                        );
                    };
                    let Some(killed) = self.killed.get_mut(container) else {
                        return violation(Seq, "SIGKILL for an unknown container");
                    };
                    if *killed {
                        return violation(Seq, format!("second SIGKILL for {container}"));
                    }
                    *killed = true;
                    match s.before.containers().get(container).map(|c| c.stage()) {
                        Some(Stage::Stopping { kill_at }) if now >= kill_at.as_millis() => {}
                        other => {
                            return violation(
                                Early,
                                format!(
                                    "SIGKILL for {container} at {now} ms, its own deadline was {other:?}"
                                ),
                            );
                        }
                    }
                    let floor = signal.saturating_add(MIN_STOP_MS);
                    if now < floor {
                        return violation(
                            Early,
                            format!(
                                "R62: SIGKILL for {container} at {now} ms, stop signal at {signal} ms"
                            ),
                        );
                    }
                    let Some(earliest) = self.earliest_kill.get(container).copied().flatten()
                    else {
                        return violation(Seq, "SIGKILL before the kill started");
                    };
                    if now < earliest {
                        return violation(
                            Early,
                            format!(
                                "invariant 3/D5: SIGKILL for {container} at {now} ms, budget spent at {earliest} ms"
                            ),
                        );
                    }
                }
                Action::ContainerStopped { container } => {
                    let container = usize::from(container);
                    let Some(sent) = self.stopped_sent.get_mut(container) else {
                        return violation(Seq, "unknown container stopped");
                    };
                    if *sent {
                        return violation(Seq, format!("container {container} stopped twice"));
                    }
                    *sent = true;
                }
                Action::RemoveEndpoints => {
                    if self.endpoints_removed {
                        return violation(Seq, "endpoints removed twice");
                    }
                    self.endpoints_removed = true;
                }
                Action::Remove { .. } => {}
                other => {
                    return violation(
                        Seq,
                        format!("an action the checker does not know: {other:?}"),
                    );
                }
            }
        }
        // The deadline as scheduled already respects both floors.
        for (i, c) in s.after.containers().iter().enumerate() {
            if let Stage::Stopping { kill_at } = c.stage() {
                let Some(signal) = self.signal_at.get(i).copied().flatten() else {
                    return violation(Seq, format!("container {i} stopping without a stop signal"));
                };
                if c.stop_signal_sent_at() != Some(Instant::from_millis(signal)) {
                    return violation(
                        Seq,
                        format!(
                            "container {i}: stop signal reported at {:?}, emitted at {signal}",
                            c.stop_signal_sent_at()
                        ),
                    );
                }
                let kill_at = kill_at.as_millis();
                let floor = signal.saturating_add(MIN_STOP_MS);
                let earliest = self.earliest_kill.get(i).copied().flatten();
                let earliest = earliest.unwrap_or(u64::MAX);
                if kill_at < floor || kill_at < earliest {
                    return violation(
                        Early,
                        format!(
                            "invariant 3: container {i}: SIGKILL due at {kill_at} ms, stop signal at {signal} ms, budget spent at {earliest} ms"
                        ),
                    );
                }
            }
        }
        Ok(())
    }

    /// [`Invariant::FinalizersBlockRemoval`].
    fn finalizers_block_removal<const F: usize>(
        &mut self,
        s: &Step<'_, F, C>,
    ) -> Result<(), Violation> {
        let removes = s
            .actions
            .iter()
            .filter(|a| matches!(a, Action::Remove { .. }))
            .count();
        let removed = s.before.is_stored() && !s.after.is_stored();
        if removes != usize::from(removed) {
            return violation(
                Invariant::FinalizersBlockRemoval,
                format!("{removes} Remove actions, removed: {removed}"),
            );
        }
        if removed {
            // What the record held going in, unless this very input removed
            // it (R45): the removed record may show less than it held.
            if !matches!(s.input, Some(Input::FinalizerUpdate(_)))
                && let Some(n) = s
                    .before
                    .record()
                    .finalizers
                    .iter()
                    .find(|n| !is_gc_finalizer(n))
            {
                return violation(
                    Invariant::FinalizersBlockRemoval,
                    format!("invariant 4: removed while the record held finalizer {n}"),
                );
            }
            self.removable(s.after.record(), s)?;
        }
        if let Reply::Delete(Ok(r)) = s.reply
            && r.dry_run
            && r.outcome == DeleteOutcome::Deleted
        {
            self.removable(&r.record, s).map_err(|v| Violation {
                detail: format!("dry run: {}", v.detail),
                ..v
            })?;
        }
        Ok(())
    }

    /// Whether `record` may go, by this step's request: the rule text
    /// (R36–R40) and the reference model's garbage-collection rules must
    /// both say no finalizer is left.
    fn removable<const F: usize>(
        &self,
        record: &Record<F>,
        s: &Step<'_, F, C>,
    ) -> Result<(), Violation> {
        use Invariant::FinalizersBlockRemoval as I;
        if record.finalizers.is_empty() {
            return Ok(());
        }
        if let Some(n) = record.finalizers.iter().find(|n| !is_gc_finalizer(n)) {
            return violation(
                I,
                format!("invariant 4: removed while held by finalizer {n}"),
            );
        }
        let names: Vec<String> = record
            .finalizers
            .iter()
            .map(|n| n.as_str().to_string())
            .collect();
        if matches!(s.input, Some(Input::FinalizerUpdate(_))) {
            return violation(
                I,
                format!("invariant 4: removed by an update while held by {names:?}"),
            );
        }
        if !delete_drops_gc_finalizers(&self.strategy, s.options()) {
            return violation(
                I,
                format!("invariant 4: removed while held by {names:?}, which this request keeps"),
            );
        }
        // The request that removed it: this step's delete, or the agent's
        // (or fencing's) final delete (R75, R82), grace 0.
        let options = match s.options() {
            Some(o) => o.clone(),
            None => DeleteOptions::with_grace(0),
        };
        match model::gc_finalizers(&names, &self.ty, &to_opts(&options)) {
            Some(left) if left.is_empty() => Ok(()),
            other => violation(
                I,
                format!(
                    "invariant 4: removed while held by {names:?} (the reference model's request leaves {other:?})"
                ),
            ),
        }
    }

    /// [`Invariant::ForceWhenWorkloadMayRun`].
    fn force_when_workload_may_run<const F: usize>(
        &mut self,
        s: &Step<'_, F, C>,
    ) -> Result<(), Violation> {
        use Invariant::ForceWhenWorkloadMayRun as I;
        let may_run_before = self.may_run();
        let mut removal = None;
        for action in s.actions {
            match *action {
                Action::ContainerStopped { container } => {
                    let Some(running) = self.running.get_mut(usize::from(container)) else {
                        return violation(I, "unknown container stopped");
                    };
                    *running = false;
                }
                Action::Remove { force } => {
                    if force != self.may_run() {
                        return violation(
                            I,
                            format!(
                                "D4/invariant 5: Remove {{ force: {force} }} while the workload may run: {}",
                                self.may_run()
                            ),
                        );
                    }
                    removal = Some(force);
                }
                Action::RemoveEndpoints
                | Action::RunPreStop { .. }
                | Action::SendStopSignal { .. }
                | Action::SendKill { .. } => {}
                other => {
                    return violation(I, format!("an action the checker does not know: {other:?}"));
                }
            }
        }
        match s.reply {
            Reply::Delete(Ok(r)) if r.dry_run => {
                let expected = r.outcome == DeleteOutcome::Deleted && may_run_before;
                if r.force != expected {
                    return violation(
                        I,
                        format!("D4: dry run force {}, expected {expected}", r.force),
                    );
                }
            }
            Reply::Delete(Ok(r)) => {
                if r.force != removal.unwrap_or(false)
                    || (r.outcome == DeleteOutcome::Deleted) != removal.is_some()
                {
                    return violation(
                        I,
                        format!(
                            "D4: response {:?} force {} but removal {removal:?}",
                            r.outcome, r.force
                        ),
                    );
                }
            }
            Reply::Update(Ok(UpdateOutcome::Deleted { force })) => {
                if removal != Some(*force) {
                    return violation(
                        I,
                        format!("D4: update force {force} but removal {removal:?}"),
                    );
                }
            }
            Reply::Update(Ok(UpdateOutcome::Updated)) if removal.is_some() => {
                return violation(I, "update says Updated but the record was removed");
            }
            Reply::Nothing
            | Reply::Delete(Err(_))
            | Reply::Update(_)
            | Reply::Handled(_)
            | Reply::Container(_) => {}
        }
        Ok(())
    }

    /// [`Invariant::RefusalsChangeNothing`].
    fn refusals_change_nothing<const F: usize>(
        &mut self,
        s: &Step<'_, F, C>,
    ) -> Result<(), Violation> {
        use Invariant::RefusalsChangeNothing as I;
        let why = match s.reply {
            Reply::Delete(Err(e)) => Some(format!("refused delete ({e:?})")),
            Reply::Delete(Ok(r)) if r.dry_run => Some("dry run".into()),
            Reply::Update(Err(e)) => Some(format!("refused update ({e:?})")),
            Reply::Container(Err(UnknownContainer)) => {
                let index = match s.input {
                    Some(
                        Input::PreStopFinished(i)
                        | Input::ContainerExited(i)
                        | Input::ContainerStarted(i)
                        | Input::StopSignalSent(i),
                    ) => i.get(),
                    _ => 0,
                };
                if index < s.before.containers().len() {
                    return violation(I, format!("container {index} exists but was refused"));
                }
                Some("unknown container".into())
            }
            Reply::Nothing
            | Reply::Delete(Ok(_))
            | Reply::Update(Ok(_))
            | Reply::Handled(_)
            | Reply::Container(Ok(_)) => None,
        };
        // An agent or container input the lifecycle ignored.
        let why = why.or_else(|| {
            matches!(
                s.reply,
                Reply::Handled(Handled::Ignored) | Reply::Container(Ok(Handled::Ignored))
            )
            .then(|| "ignored input".into())
        });
        let why = why.or_else(|| s.early_timeout().then(|| "early timeout".into()));
        if let Some(why) = why
            && (s.after != s.before || !s.actions.is_empty())
        {
            return violation(I, format!("{why} changed the lifecycle"));
        }
        Ok(())
    }

    /// [`Invariant::Timeouts`].
    fn timeouts<const F: usize>(&mut self, s: &Step<'_, F, C>) -> Result<(), Violation> {
        if !matches!(s.input, Some(Input::Timeout)) {
            return Ok(());
        }
        if let Some(t) = s.after.poll_timeout()
            && t <= s.now.mono
            && t != Instant::MAX
        {
            return violation(
                Invariant::Timeouts,
                format!(
                    "handle_timeout({}) left a deadline at {} ms",
                    s.now.mono.as_millis(),
                    t.as_millis()
                ),
            );
        }
        Ok(())
    }

    /// [`Invariant::FinishedIsFinal`].
    fn finished_is_final<const F: usize>(&mut self, s: &Step<'_, F, C>) -> Result<(), Violation> {
        use Invariant::FinishedIsFinal as I;
        if s.before.is_finished() && (!s.actions.is_empty() || !s.after.is_finished()) {
            return violation(
                I,
                format!(
                    "D4: a finished lifecycle moved on: actions {:?}, finished {}",
                    s.actions,
                    s.after.is_finished()
                ),
            );
        }
        if s.after.is_finished() {
            if self.may_run() {
                return violation(I, "D4: finished while a container may still run");
            }
            if let Some(t) = s.after.poll_timeout() {
                return violation(
                    I,
                    format!("D4: finished with a deadline at {} ms", t.as_millis()),
                );
            }
            if s.after.phase() != Phase::Deleted || s.after.has_action() {
                return violation(I, "D4: finished, yet stored or owing an action");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use grace_core::{ContainerSpec, Record};

    use super::*;

    type Lc = Lifecycle<2, 1>;

    fn pod() -> Lc {
        let uid = Name::try_from("uid-1").expect("short");
        Lifecycle::new(Strategy::POD, Record::new(uid), &[ContainerSpec::default()]).expect("fits")
    }

    fn at(ms: u64) -> Now {
        Clock {
            wall: 1_700_000_000_000 + i64::try_from(ms).expect("small"),
            mono: ms,
        }
        .now()
    }

    /// Feeds `input` (already applied: `before` -> `after`) with `actions`.
    fn check(
        checker: &mut Checker<1>,
        input: Option<&Input>,
        now: Now,
        before: &Lc,
        after: &Lc,
        reply: &Reply<2>,
        actions: &[Action],
    ) -> Vec<Invariant> {
        let step = Step {
            input,
            now,
            before,
            after,
            reply,
            actions,
        };
        checker
            .check(&step)
            .into_iter()
            .map(|v| v.invariant)
            .collect()
    }

    /// A delete, then the agent's sync at 1 s: the stop signal goes out.
    /// Returns the checker and the lifecycle after both, all checked.
    fn signalled() -> (Checker<1>, Lc) {
        let mut lc = pod();
        let mut checker = Checker::new(&lc);
        let before = lc.clone();
        let delete = Input::Delete(DeleteOptions::default());
        let reply = feed(&mut lc, at(0), &delete);
        let actions = drain(&mut lc).expect("runs dry");
        let step = Step {
            input: Some(&delete),
            now: at(0),
            before: &before,
            after: &lc,
            reply: &reply,
            actions: &actions,
        };
        assert_eq!(checker.check(&step), []);
        let before = lc.clone();
        let reply = feed(&mut lc, at(1_000), &Input::AgentSync);
        let actions = drain(&mut lc).expect("runs dry");
        assert!(actions.contains(&Action::SendStopSignal { container: 0 }));
        let broken = check(
            &mut checker,
            Some(&Input::AgentSync),
            at(1_000),
            &before,
            &lc,
            &reply,
            &actions,
        );
        assert_eq!(broken, []);
        (checker, lc)
    }

    #[test]
    fn r62_a_sigkill_one_second_after_the_stop_signal_is_caught() {
        let (mut checker, lc) = signalled();
        let broken = check(
            &mut checker,
            None,
            at(2_000),
            &lc,
            &lc,
            &Reply::Nothing,
            &[Action::SendKill { container: 0 }],
        );
        assert_eq!(broken, [Invariant::SigkillNeverEarly]);
    }

    #[test]
    fn r59_a_second_stop_signal_is_caught() {
        let (mut checker, lc) = signalled();
        let broken = check(
            &mut checker,
            None,
            at(1_500),
            &lc,
            &lc,
            &Reply::Nothing,
            &[Action::SendStopSignal { container: 0 }],
        );
        assert_eq!(broken, [Invariant::KillSequence]);
    }

    #[test]
    fn d4_a_removal_not_flagged_force_while_the_workload_runs_is_caught() {
        let (mut checker, lc) = signalled();
        let broken = check(
            &mut checker,
            None,
            at(1_500),
            &lc,
            &lc,
            &Reply::Nothing,
            &[Action::Remove { force: false }],
        );
        // Also one Remove without a removal.
        assert_eq!(
            broken,
            [
                Invariant::FinalizersBlockRemoval,
                Invariant::ForceWhenWorkloadMayRun
            ]
        );
    }

    #[test]
    fn an_early_timeout_that_changes_the_lifecycle_is_caught() {
        let (mut checker, lc) = signalled();
        let mut after = lc.clone();
        after
            .handle(at(1_200), Input::container_exited(0))
            .container()
            .expect("container 0 exists");
        let broken = check(
            &mut checker,
            Some(&Input::Timeout),
            at(1_200),
            &lc,
            &after,
            &Reply::Nothing,
            &[],
        );
        assert!(
            broken.contains(&Invariant::RefusalsChangeNothing),
            "{broken:?}"
        );
    }

    #[test]
    fn a_phase_going_back_is_caught() {
        let (mut checker, lc) = signalled();
        let broken = check(
            &mut checker,
            None,
            at(1_500),
            &lc,
            &pod(),
            &Reply::Nothing,
            &[],
        );
        assert!(broken.contains(&Invariant::DeletedIsTerminal), "{broken:?}");
    }
}
