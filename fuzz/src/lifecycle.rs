//! The `lifecycle` target: one object, any sequence of inputs and time
//! jumps, and the invariants of core/RULES.md checked after every step.
//!
//! Every action is drained after every step, so an action is "emitted" at
//! the time of the step that produced it. The checker keeps what it needs
//! from the outside (which containers may still run, when each stop signal
//! was sent, when the budget is spent) and compares it with what the
//! lifecycle does; a violation panics with the invariant's name, the step
//! and the states before and after.

use arbitrary::Arbitrary;
use grace_core::{
    Action, DeleteError, DeleteOptions, DeleteOutcome, DeleteResponse, FinalizerChange, Handled,
    Instant, Lifecycle, MIN_STOP_SECONDS, Name, Now, Phase, Preconditions, Record, Stage,
    UnknownContainer, UpdateError, UpdateOutcome, WallTime, decide_delete,
};

use crate::differential::{to_opts, to_type};
use crate::input::{DeleteSpec, FinalizerSel, Grace, MonoMs, ObjectSpec, UID, WallMs};
use crate::reference as model;

/// Finalizer capacity: small, so that a full list is common.
pub const F: usize = 3;
/// Container capacity.
pub const C: usize = 3;
/// The lifecycle under test.
pub type Lc = Lifecycle<F, C>;
/// Steps taken from one input at most (longer inputs are cut).
pub const MAX_OPS: usize = 128;
/// More than one step can owe: the endpoints, four outputs per container,
/// the removal.
const MAX_ACTIONS_PER_STEP: usize = 2 + 4 * C;
/// R62 in milliseconds.
const MIN_STOP_MS: u64 = 2_000;

/// A fuzz input: the object, both clocks' start, and the steps.
#[derive(Arbitrary, Debug)]
pub struct Input {
    pub object: ObjectSpec,
    pub wall: WallMs,
    pub mono: MonoMs,
    pub ops: Vec<Op>,
}

/// One step.
#[derive(Arbitrary, Clone, Debug)]
pub enum Op {
    /// A delete request with structured preconditions.
    Delete(DeleteSpec),
    /// A delete request with any options at all.
    DeleteRaw(DeleteOptions),
    AddFinalizer(Name),
    RemoveFinalizer(FinalizerSel),
    AgentSync,
    Evict {
        grace: Grace,
    },
    /// Container index modulo `C + 1` (so `C` is an unknown container).
    PreStopDone {
        container: u8,
    },
    /// Container index modulo `C + 1`.
    Exit {
        container: u8,
    },
    NodeLost,
    NodeReady,
    Fence,
    /// `handle_timeout` at the current time.
    Timeout,
    /// Both clocks move on.
    Advance {
        ms: u16,
    },
    AdvanceSeconds {
        s: u16,
    },
    AdvanceRaw {
        ms: u64,
    },
    /// To the next deadline plus an offset (never backwards), then maybe
    /// `handle_timeout`.
    ToDeadline {
        offset_ms: i16,
        handle: bool,
    },
    /// Both clocks jump so that the monotonic one is `u64::MAX - back_ms`.
    NearEndOfMono {
        back_ms: u16,
    },
    /// Both clocks jump so that the wall clock is `i64::MAX - back_ms`.
    NearEndOfWall {
        back_ms: u16,
    },
    /// The wall clock alone jumps, either way (NTP); the monotonic clock
    /// never goes back.
    WallJump {
        ms: i64,
    },
}

/// Both clocks; the monotonic one never goes back.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    pub wall: i64,
    pub mono: u64,
}

impl Clock {
    pub fn now(&self) -> Now {
        Now::new(
            WallTime::from_unix_millis(self.wall),
            Instant::from_millis(self.mono),
        )
    }

    pub fn advance(&mut self, ms: u64) {
        self.mono = self.mono.saturating_add(ms);
        self.wall = self
            .wall
            .saturating_add(i64::try_from(ms).unwrap_or(i64::MAX));
    }

    fn advance_to_mono(&mut self, target: i128) {
        let delta = target - i128::from(self.mono);
        if delta > 0 {
            self.advance(u64::try_from(delta).unwrap_or(u64::MAX));
        }
    }
}

/// The REST answer to a delete: the response and the object it refers to
/// (the record as written, or for a dry run the record the same decision
/// would write).
#[derive(Debug)]
pub struct Answer {
    pub outcome: DeleteOutcome,
    pub dry_run: bool,
    pub force: bool,
    pub record: Record<F>,
}

impl Answer {
    fn new(response: DeleteResponse, lc: &Lc, options: &DeleteOptions, now: Now) -> Self {
        let record = match response.dry_run {
            // Nothing changed: the same decision, not applied.
            true => match decide_delete(lc.record(), &lc.strategy(), options, now.wall) {
                Ok(decision) => decision.record,
                Err(e) => panic!("a dry run was accepted but its decision is {e:?}"),
            },
            false => lc.record().clone(),
        };
        Answer {
            outcome: response.outcome,
            dry_run: response.dry_run,
            force: response.force,
            record,
        }
    }
}

/// What a handler answered.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Reply {
    Nothing,
    Delete(Result<Answer, DeleteError>),
    Update(Result<UpdateOutcome, UpdateError>),
    Handled(Handled),
    Container(Result<Handled, UnknownContainer>),
}

struct Applied {
    reply: Reply,
    options: Option<DeleteOptions>,
    /// For a finalizer update: the change.
    update: bool,
    /// `poll_timeout()` just before `handle_timeout`, when it was called.
    timeout_before: Option<Option<Instant>>,
}

fn container(index: u8) -> usize {
    usize::from(index) % (C + 1)
}

fn apply(lc: &mut Lc, clock: &mut Clock, op: &Op) -> Applied {
    let mut options = None;
    let mut update = false;
    let mut timeout_before = None;
    let now = clock.now();
    let reply = match op {
        Op::Delete(spec) => {
            let o = spec.options(lc.record(), clock.wall);
            let r = lc.handle_delete(now, &o);
            let r = Reply::Delete(r.map(|r| Answer::new(r, lc, &o, now)));
            options = Some(o);
            r
        }
        Op::DeleteRaw(o) => {
            let r = lc.handle_delete(now, o);
            let r = Reply::Delete(r.map(|r| Answer::new(r, lc, o, now)));
            options = Some(o.clone());
            r
        }
        Op::AddFinalizer(n) => {
            update = true;
            Reply::Update(lc.handle_finalizer_update(now, &FinalizerChange::Add(n.clone())))
        }
        Op::RemoveFinalizer(sel) => {
            update = true;
            let n = sel.resolve(lc.record());
            Reply::Update(lc.handle_finalizer_update(now, &FinalizerChange::Remove(n)))
        }
        Op::AgentSync => Reply::Handled(lc.handle_agent_sync(now)),
        Op::Evict { grace } => Reply::Handled(lc.handle_evict(now, grace.0)),
        Op::PreStopDone { container: i } => {
            Reply::Container(lc.handle_pre_stop_finished(now, container(*i)))
        }
        Op::Exit { container: i } => {
            Reply::Container(lc.handle_container_exited(now, container(*i)))
        }
        Op::NodeLost => Reply::Handled(lc.handle_node_lost(now)),
        Op::NodeReady => Reply::Handled(lc.handle_node_ready(now)),
        Op::Fence => Reply::Handled(lc.handle_node_fenced(now)),
        Op::Timeout => {
            timeout_before = Some(lc.poll_timeout());
            lc.handle_timeout(now);
            Reply::Nothing
        }
        Op::Advance { ms } => {
            clock.advance(u64::from(*ms));
            Reply::Nothing
        }
        Op::AdvanceSeconds { s } => {
            clock.advance(u64::from(*s) * 1000);
            Reply::Nothing
        }
        Op::AdvanceRaw { ms } => {
            clock.advance(*ms);
            Reply::Nothing
        }
        Op::ToDeadline { offset_ms, handle } => {
            if let Some(d) = lc.poll_timeout() {
                clock.advance_to_mono(i128::from(d.as_millis()) + i128::from(*offset_ms));
            }
            if *handle {
                timeout_before = Some(lc.poll_timeout());
                lc.handle_timeout(clock.now());
            }
            Reply::Nothing
        }
        Op::NearEndOfMono { back_ms } => {
            clock.advance_to_mono(i128::from(u64::MAX) - i128::from(*back_ms));
            Reply::Nothing
        }
        Op::NearEndOfWall { back_ms } => {
            let delta = i128::from(i64::MAX) - i128::from(*back_ms) - i128::from(clock.wall);
            if delta > 0 {
                clock.advance(u64::try_from(delta).unwrap_or(u64::MAX));
            }
            Reply::Nothing
        }
        Op::WallJump { ms } => {
            clock.wall = clock.wall.saturating_add(*ms);
            Reply::Nothing
        }
    };
    Applied {
        reply,
        options,
        update,
        timeout_before,
    }
}

/// One step, as the checker sees it.
pub struct Step<'a> {
    pub op: &'a Op,
    pub options: Option<&'a DeleteOptions>,
    pub update: bool,
    pub now: Now,
    pub before: &'a Lc,
    pub after: &'a Lc,
    pub reply: &'a Reply,
    pub actions: &'a [Action],
    pub timeout_before: Option<Option<Instant>>,
}

/// Everything the invariants track from the outside.
pub struct Checker {
    ty: model::Type,
    has_agent: bool,
    /// Containers that may still run (D4): from the start until their
    /// `ContainerStopped`.
    running: Vec<bool>,
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

/// R10: a stored negative grace reads as 1.
fn read_grace(g: i64) -> i64 {
    if g < 0 { 1 } else { g }
}

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
        other => panic!("unknown to the checker: {other:?}"),
    }
}

impl Checker {
    pub fn new(object: &ObjectSpec, lc: &Lc) -> Self {
        let finished = lc.record().phase.is_terminal();
        Checker {
            ty: to_type(&object.strategy),
            has_agent: object.has_agent(),
            running: lc
                .containers()
                .iter()
                .map(|c| !c.spec().stopped && !finished)
                .collect(),
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

    /// Every invariant, in order; the first violation is returned.
    pub fn check(&mut self, s: &Step<'_>) -> Result<(), String> {
        self.shape(s)?;
        self.timestamp_never_later(s)?;
        self.grace_never_grows(s)?;
        self.agent_budget(s)?;
        self.deleted_absorbs(s)?;
        self.sigkill_never_early(s)?;
        self.finalizers_block_removal(s)?;
        self.removal_while_running_is_forced(s)?;
        self.finished_is_final(s)?;
        self.refusals_change_nothing(s)?;
        self.timeouts_make_progress(s)?;
        Ok(())
    }

    /// The phase agrees with storage, moves only forward along the diagram,
    /// and the uid never changes.
    fn shape(&mut self, s: &Step<'_>) -> Result<(), String> {
        if (s.after.phase() == Phase::Deleted) == s.after.is_stored() {
            return Err(format!(
                "phase {} but is_stored {}",
                s.after.phase(),
                s.after.is_stored()
            ));
        }
        if phase_rank(s.after.phase()) < phase_rank(s.before.phase()) {
            return Err(format!(
                "phase went back: {} -> {}",
                s.before.phase(),
                s.after.phase()
            ));
        }
        if s.after.record().uid.as_str() != UID {
            return Err("the uid changed".into());
        }
        Ok(())
    }

    /// Invariant 2 / R16: once set, a deletion timestamp is never unset
    /// and never moves later than max(previous, now).
    fn timestamp_never_later(&mut self, s: &Step<'_>) -> Result<(), String> {
        if !s.before.is_stored() {
            return Ok(()); // frozen; see deleted_absorbs
        }
        let Some(previous) = s.before.record().deletion_timestamp else {
            return Ok(());
        };
        let bound = previous.max(s.now.wall.floor_to_timestamp());
        let check = |what: &str, r: &Record<F>| match r.deletion_timestamp {
            None => Err(format!(
                "R16/invariant 2: {what}: deletion timestamp {previous} was unset"
            )),
            Some(ts) if ts > bound => Err(format!(
                "R16/invariant 2: {what}: deletion timestamp moved later: {previous} -> {ts} (bound max(previous, now) = {bound})"
            )),
            Some(_) => Ok(()),
        };
        check("record", s.after.record())?;
        if let Reply::Delete(Ok(r)) = s.reply {
            check("response", &r.record)?;
        }
        Ok(())
    }

    /// Invariant 2: the stored grace never grows once set.
    fn grace_never_grows(&mut self, s: &Step<'_>) -> Result<(), String> {
        if !s.before.is_stored() {
            return Ok(());
        }
        let Some(previous) = s.before.record().deletion_grace_period_seconds else {
            return Ok(());
        };
        let check = |what: &str, r: &Record<F>| match r.deletion_grace_period_seconds {
            None => Err(format!("invariant 2: {what}: grace {previous} was unset")),
            Some(g) if read_grace(g) > read_grace(previous) => Err(format!(
                "invariant 2: {what}: stored grace grew: {previous} -> {g}"
            )),
            Some(_) => Ok(()),
        };
        check("record", s.after.record())?;
        if let Reply::Delete(Ok(r)) = s.reply {
            check("response", &r.record)?;
        }
        Ok(())
    }

    /// R50–R55: the agent's budget never grows once the kill started, is at
    /// least 1 s while killing, changes only when the agent looks (sync) or
    /// is overridden (evict), and is then the kubelet's budget (R50–R55).
    fn agent_budget(&mut self, s: &Step<'_>) -> Result<(), String> {
        let previous = s.before.agent().remembered_grace;
        let next = s.after.agent().remembered_grace;
        if previous > 0 && next > previous {
            return Err(format!(
                "R50: the agent's budget grew: {previous} -> {next}"
            ));
        }
        if s.after.agent().killing && next < 1 {
            return Err(format!("R54: budget {next} below 1 s while killing"));
        }
        let record = s.before.record();
        let expected = match (s.op, s.reply) {
            (Op::AgentSync, Reply::Handled(Handled::Applied)) => {
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
            (Op::Evict { grace }, Reply::Handled(Handled::Applied)) => {
                self.evicted = true;
                Some(
                    model::effective_grace(
                        previous,
                        None,
                        Some(grace.0),
                        record.termination_grace_period_seconds,
                    )
                    .0,
                )
            }
            _ => None,
        };
        match expected {
            Some(e) if next != e => Err(format!(
                "R51–R54: agent budget {next}, the kubelet's budget gives {e}"
            )),
            None if next != previous => Err(format!(
                "the agent's budget changed without a sync or an override: {previous} -> {next}"
            )),
            Some(_) | None => Ok(()),
        }
    }

    /// Invariant 1: Deleted absorbs everything. The record never changes or
    /// comes back, requests find nothing, nothing is removed again, and only
    /// the agent stopping a force-deleted workload (D4) still acts.
    fn deleted_absorbs(&mut self, s: &Step<'_>) -> Result<(), String> {
        if s.before.phase() == Phase::Deleted {
            if s.after.phase() != Phase::Deleted || s.after.is_stored() {
                return Err(format!("invariant 1: came back as {}", s.after.phase()));
            }
            if s.after.record() != s.before.record() {
                return Err("invariant 1: the record changed after removal".into());
            }
            for action in s.actions {
                match action {
                    Action::Remove { .. } | Action::RemoveEndpoints => {
                        return Err(format!("invariant 1: {action:?} after removal"));
                    }
                    Action::RunPreStop { .. }
                    | Action::SendStopSignal { .. }
                    | Action::SendKill { .. }
                    | Action::ContainerStopped { .. } => {
                        if !self.forced {
                            return Err(format!(
                                "invariant 1: {action:?} after a removal that was not forced"
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
                Reply::Delete(other) => {
                    return Err(format!("invariant 1: delete after removal: {other:?}"));
                }
                Reply::Update(other) => {
                    return Err(format!("invariant 1: update after removal: {other:?}"));
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

    /// Invariant 3, R59, R62, R63, D5: per container, a pre-stop hook at
    /// most once and with the agent's budget, one stop signal, SIGKILL only
    /// after it, never sooner than 2 s after it and never before the budget
    /// is spent (the kill's start plus the budget, or, once a shorter budget
    /// `G` was accepted at `t`, `t + G`, and `t + max(G, 2 s)` for a
    /// container already signalled); a hook's cut-off or a scheduled SIGKILL
    /// never moves later.
    fn sigkill_never_early(&mut self, s: &Step<'_>) -> Result<(), String> {
        let now = s.now.mono.as_millis();
        let (before, after) = (s.before.agent(), s.after.agent());
        let grace = after.remembered_grace;
        if !before.killing && after.killing {
            self.earliest_kill = [Some(after_seconds(now, grace)); C];
        } else if before.killing && grace < before.remembered_grace {
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
            return Err("killing without a start".into());
        }
        let pairs = s.before.containers().iter().zip(s.after.containers());
        for (i, (b, a)) in pairs.enumerate() {
            let moved_later = match (b.stage(), a.stage()) {
                (Stage::PreStop { cutoff: was }, Stage::PreStop { cutoff: is })
                | (Stage::Stopping { kill_at: was }, Stage::Stopping { kill_at: is }) => is > was,
                _ => false,
            };
            if moved_later {
                return Err(format!(
                    "D5: container {i}'s deadline moved later: {:?} -> {:?}",
                    b.stage(),
                    a.stage()
                ));
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
                    let sent = self
                        .pre_stop_sent
                        .get_mut(container)
                        .ok_or("pre-stop for an unknown container")?;
                    if *sent || !has_hook {
                        return Err(format!(
                            "R59: pre-stop for {container} twice or without a hook"
                        ));
                    }
                    *sent = true;
                    // The action's budget saturates at 32 bits.
                    let grace = u32::try_from(after.remembered_grace).unwrap_or(u32::MAX);
                    if budget_seconds < 1 || budget_seconds != grace {
                        return Err(format!(
                            "R59/R60: pre-stop budget {budget_seconds}, agent's budget {}",
                            after.remembered_grace
                        ));
                    }
                }
                Action::SendStopSignal { container } => {
                    let container = usize::from(container);
                    let slot = self
                        .signal_at
                        .get_mut(container)
                        .ok_or("stop signal for an unknown container")?;
                    if slot.is_some() {
                        return Err(format!("second stop signal for {container}"));
                    }
                    if !after.killing {
                        return Err("stop signal before the kill started".into());
                    }
                    *slot = Some(now);
                }
                Action::SendKill { container } => {
                    let container = usize::from(container);
                    let Some(Some(signal)) = self.signal_at.get(container).copied() else {
                        return Err(format!("SIGKILL for {container} without a stop signal"));
                    };
                    let killed = self
                        .killed
                        .get_mut(container)
                        .ok_or("SIGKILL for an unknown container")?;
                    if *killed {
                        return Err(format!("second SIGKILL for {container}"));
                    }
                    *killed = true;
                    let floor = signal.saturating_add(MIN_STOP_MS);
                    if now < floor {
                        return Err(format!(
                            "R62: SIGKILL for {container} at {now} ms, stop signal at {signal} ms"
                        ));
                    }
                    let earliest = self
                        .earliest_kill
                        .get(container)
                        .copied()
                        .flatten()
                        .ok_or("SIGKILL before the kill started")?;
                    if now < earliest {
                        return Err(format!(
                            "invariant 3/D5: SIGKILL for {container} at {now} ms, budget spent at {earliest} ms"
                        ));
                    }
                }
                Action::ContainerStopped { container } => {
                    let container = usize::from(container);
                    let sent = self
                        .stopped_sent
                        .get_mut(container)
                        .ok_or("unknown container stopped")?;
                    if *sent {
                        return Err(format!("container {container} stopped twice"));
                    }
                    *sent = true;
                }
                Action::RemoveEndpoints => {
                    if self.endpoints_removed {
                        return Err("endpoints removed twice".into());
                    }
                    self.endpoints_removed = true;
                }
                Action::Remove { .. } => {}
                other => return Err(format!("an action the checker does not know: {other:?}")),
            }
        }
        for (i, c) in s.after.containers().iter().enumerate() {
            if let Stage::Stopping { kill_at } = c.stage() {
                let Some(signal) = self.signal_at.get(i).copied().flatten() else {
                    return Err(format!("container {i} stopping without a stop signal"));
                };
                if c.stop_signal_sent_at() != Some(Instant::from_millis(signal)) {
                    return Err(format!(
                        "container {i}: stop signal reported at {:?}, emitted at {signal}",
                        c.stop_signal_sent_at()
                    ));
                }
                let kill_at = kill_at.as_millis();
                let floor = signal.saturating_add(MIN_STOP_MS);
                let earliest = self.earliest_kill.get(i).copied().flatten();
                let earliest = earliest.unwrap_or(u64::MAX);
                if kill_at < floor || kill_at < earliest {
                    return Err(format!(
                        "invariant 3: container {i}: SIGKILL due at {kill_at} ms, stop signal at {signal} ms, budget spent at {earliest} ms"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Invariant 4: a record with finalizers is never removed. The only
    /// finalizers a removed record may still show are the garbage
    /// collector's, dropped by the very delete that removed the unmodified
    /// stored record (R30, R40) — checked with the reference model's GC
    /// rules. One removal, one `Action::Remove`.
    fn finalizers_block_removal(&mut self, s: &Step<'_>) -> Result<(), String> {
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
            self.removable(s.after.record(), s)?;
        }
        if let Reply::Delete(Ok(r)) = s.reply
            && r.dry_run
            && r.outcome == DeleteOutcome::Deleted
        {
            self.removable(&r.record, s)
                .map_err(|e| format!("dry run: {e}"))?;
        }
        Ok(())
    }

    fn removable(&self, record: &Record<F>, s: &Step<'_>) -> Result<(), String> {
        if record.finalizers.is_empty() {
            return Ok(());
        }
        let names: Vec<String> = record
            .finalizers
            .iter()
            .map(|n| n.as_str().to_string())
            .collect();
        if s.update {
            return Err(format!(
                "invariant 4: removed by an update while held by {names:?}"
            ));
        }
        // The request that removed it: this step's delete, or the agent's
        // (or fencing's) final delete (R75, R82).
        let options = match s.options {
            Some(o) => o.clone(),
            None => DeleteOptions {
                grace_period_seconds: Some(0),
                preconditions: Preconditions {
                    uid: Some(record.uid.clone()),
                    resource_version: None,
                },
                ..DeleteOptions::default()
            },
        };
        match model::gc_finalizers(&names, &self.ty, &to_opts(&options)) {
            Some(left) if left.is_empty() => Ok(()),
            other => Err(format!(
                "invariant 4: removed while held by {names:?} (the request leaves {other:?})"
            )),
        }
    }

    /// Invariant 5, D4, D7: a removal while the workload may still run is
    /// flagged force, and only then; the responses say the same.
    fn removal_while_running_is_forced(&mut self, s: &Step<'_>) -> Result<(), String> {
        let may_run_before = self.may_run();
        let mut removal = None;
        for action in s.actions {
            match *action {
                Action::ContainerStopped { container } => {
                    let container = usize::from(container);
                    *self
                        .running
                        .get_mut(container)
                        .ok_or("unknown container stopped")? = false;
                }
                Action::Remove { force } => {
                    if force != self.may_run() {
                        return Err(format!(
                            "D4/invariant 5: Remove {{ force: {force} }} while the workload may run: {}",
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
                    return Err(format!(
                        "D4: dry run force {}, expected {expected}",
                        r.force
                    ));
                }
            }
            Reply::Delete(Ok(r)) => {
                if r.force != removal.unwrap_or(false)
                    || (r.outcome == DeleteOutcome::Deleted) != removal.is_some()
                {
                    return Err(format!(
                        "D4: response {:?} force {} but removal {removal:?}",
                        r.outcome, r.force
                    ));
                }
            }
            Reply::Update(Ok(UpdateOutcome::Deleted { force })) => {
                if removal != Some(*force) {
                    return Err(format!("D4: update force {force} but removal {removal:?}"));
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

    /// Refused requests, dry runs (R42) and early timeouts change nothing.
    fn refusals_change_nothing(&mut self, s: &Step<'_>) -> Result<(), String> {
        let why = match s.reply {
            Reply::Delete(Err(e)) => Some(format!("refused delete ({e:?})")),
            Reply::Delete(Ok(r)) if r.dry_run => Some("dry run".into()),
            Reply::Update(Err(e)) => Some(format!("refused update ({e:?})")),
            Reply::Container(Err(UnknownContainer)) => {
                let index = match s.op {
                    Op::PreStopDone { container: i } | Op::Exit { container: i } => container(*i),
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

    /// After `handle_timeout(now)` no deadline is left at or before `now`
    /// (except at the very end of time, where deadlines saturate to `now`).
    /// D4: a lifecycle is finished only when nothing of it may run (by
    /// the `ContainerStopped` outputs seen), and once finished no input
    /// yields an action or a deadline: forgetting it drops nothing.
    fn finished_is_final(&mut self, s: &Step<'_>) -> Result<(), String> {
        if s.before.is_finished() && (!s.actions.is_empty() || !s.after.is_finished()) {
            return Err(format!(
                "D4: a finished lifecycle moved on: actions {:?}, finished {}",
                s.actions,
                s.after.is_finished()
            ));
        }
        if s.after.is_finished() {
            if self.may_run() {
                return Err("D4: finished while a container may still run".into());
            }
            if let Some(t) = s.after.poll_timeout() {
                return Err(format!(
                    "D4: finished with a deadline at {} ms",
                    t.as_millis()
                ));
            }
        }
        Ok(())
    }

    fn timeouts_make_progress(&mut self, s: &Step<'_>) -> Result<(), String> {
        if s.timeout_before.is_none() {
            return Ok(());
        }
        if let Some(t) = s.after.poll_timeout()
            && t <= s.now.mono
            && t != Instant::MAX
        {
            return Err(format!(
                "handle_timeout({}) left a deadline at {} ms",
                s.now.mono.as_millis(),
                t.as_millis()
            ));
        }
        Ok(())
    }
}

/// Runs one input, checking every invariant after every step.
pub fn run(input: &Input) {
    let mut clock = Clock {
        wall: input.wall.0,
        mono: input.mono.0,
    };
    let mut lc: Lc = input.object.lifecycle(clock.wall);
    if let Some(a) = lc.poll_action() {
        panic!("a new lifecycle owes {a:?}");
    }
    let mut checker = Checker::new(&input.object, &lc);
    for (n, op) in input.ops.iter().take(MAX_OPS).enumerate() {
        let before = lc.clone();
        let Applied {
            reply,
            options,
            update,
            timeout_before,
        } = apply(&mut lc, &mut clock, op);
        let mut actions = Vec::new();
        while let Some(action) = lc.poll_action() {
            actions.push(action);
            if actions.len() > MAX_ACTIONS_PER_STEP {
                panic!("step {n}: {op:?}: poll_action does not run dry: {actions:?}");
            }
        }
        let step = Step {
            op,
            options: options.as_ref(),
            update,
            now: clock.now(),
            before: &before,
            after: &lc,
            reply: &reply,
            actions: &actions,
            timeout_before,
        };
        if let Err(why) = checker.check(&step) {
            panic!(
                "invariant violated at step {n}: {op:?} at {:?}\n  {why}\n  actions: {actions:?}\n  reply: {reply:?}\n  before: {before:?}\n  after: {lc:?}",
                step.now
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::Grace;
    use grace_core::{ContainerSpec, PodPhase, Strategy};

    /// The pod: grace 30, one container without a hook, which
    /// ignores SIGTERM.
    fn pod() -> ObjectSpec {
        ObjectSpec {
            strategy: Strategy::POD,
            scheduled: true,
            phase: PodPhase::Running,
            tgps: Some(Grace(30)),
            generation: 1,
            resource_version: 1,
            finalizers: Vec::new(),
            containers: vec![ContainerSpec::default()],
            seeded: None,
        }
    }

    /// D5, R62: deleted and signalled at T, then at T+10 a second delete
    /// clamped to grace 1 (R16) or an eviction with grace 1: the checker
    /// wants SIGKILL no sooner than T+12 (T+10 + max(1, 2) s), which the
    /// older reading, max(T+10 + 1, T + 2) = T+11, broke.
    #[test]
    fn d5_r62_shortening_after_the_stop_signal_passes_the_checker() {
        let shortenings = [
            vec![Op::DeleteRaw(DeleteOptions::with_grace(5)), Op::AgentSync],
            vec![Op::Evict { grace: Grace(1) }],
        ];
        for shortening in shortenings {
            let mut ops = vec![
                Op::DeleteRaw(DeleteOptions::default()),
                Op::AgentSync,
                Op::AdvanceSeconds { s: 10 },
            ];
            ops.extend(shortening);
            ops.extend([
                Op::Advance { ms: 1_999 },
                Op::Timeout,
                Op::ToDeadline {
                    offset_ms: 0,
                    handle: true,
                },
                Op::Exit { container: 0 },
                Op::AgentSync,
            ]);
            run(&Input {
                object: pod(),
                wall: WallMs(1_700_000_000_000),
                mono: MonoMs(0),
                ops,
            });
        }
    }
}
