//! One object's whole deletion: the stored record (API level) and the node
//! agent that stops its workload (agent level), driven by [`Input`]s through
//! [`Lifecycle::handle`] and read through `poll_*` outputs.

use crate::name::NAME_CAPACITY;
use core::fmt;

use crate::grace::effective_grace;
use crate::hint::likely;
use crate::input::{Input, Reply};
use crate::kill::{Container, ContainerIndex, ContainerSpec, Due, Expiry, Stage, owed};
use crate::options::DeleteOptions;
use crate::record::{PodPhase, Record, Strategy};
use crate::registry::{
    DeleteError, DeleteOutcome, DeletePlan, FinalizerChange, UpdateError, decide_finalizer_update,
    plan_delete,
};
use crate::time::{Instant, Now};

mod flags;
#[cfg(feature = "serde")]
mod persist;
mod queue;

use flags::{Flag, Flags};
use queue::{ENDPOINTS, Ends, Entry, MAX_CONTAINERS, REMOVE};

/// Where the object is in its lifecycle.
///
/// ```text
/// Live ──delete──▶ GracefulPending ──agent starts──▶ Terminating ──stopped & no finalizers──▶ Deleted
///   └──────────── delete with nothing to wait for (grace 0, unscheduled, finished) ────────────▶ Deleted
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Phase {
    /// No deletion timestamp.
    Live,
    /// Deletion accepted and the record kept; the agent has not started the kill.
    GracefulPending,
    /// The agent is stopping the workload, or it has stopped and finalizers
    /// still hold the record (or nothing runs: unscheduled, finished, a
    /// non-graceful type, a fenced node).
    Terminating,
    /// Removed from storage. Terminal for the record; a force-deleted
    /// workload may still be being stopped by its agent ([D4]).
    ///
    /// [D4]: crate::rules#d4
    Deleted,
}

impl Phase {
    /// The name used in timelines and logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            Phase::Live => "Live",
            Phase::GracefulPending => "GracefulPending",
            Phase::Terminating => "Terminating",
            Phase::Deleted => "Deleted",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Something the caller must do now.
///
/// Small on purpose (8 bytes, like `Option<Action>`): a container is named
/// by its index as one byte, as a lifecycle has at most 253 containers, and
/// a pre-stop budget is whole seconds in 32 bits. The inputs naming a
/// container take that byte as it is ([`ContainerIndex`]);
/// `usize::from(container)` indexes [`Lifecycle::containers`].
///
/// More kinds of action may be added: match with a `_` arm.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Action {
    /// Take the object out of load balancing (ready=false, [R85]–[R88]).
    ///
    /// [R85]: crate::rules#r85
    /// [R88]: crate::rules#r88
    RemoveEndpoints,
    /// Run the container's pre-stop hook; stop waiting for it after
    /// `budget_seconds` ([R59], [R60]). Report its end with
    /// [`Input::PreStopFinished`].
    ///
    /// [R59]: crate::rules#r59
    /// [R60]: crate::rules#r60
    RunPreStop {
        /// Container index.
        container: u8,
        /// The hook's budget in whole seconds, saturated at `u32::MAX`
        /// (136 years). The machine's own cut-off uses the
        /// exact budget, which [`Container::budget_seconds`] reads.
        budget_seconds: u32,
    },
    /// Send the stop signal (SIGTERM by default, [R63]).
    ///
    /// [R63]: crate::rules#r63
    SendStopSignal {
        /// Container index.
        container: u8,
    },
    /// Send SIGKILL: the budget is spent ([R63]).
    ///
    /// [R63]: crate::rules#r63
    SendKill {
        /// Container index.
        container: u8,
    },
    /// The container has stopped: release what it held.
    ContainerStopped {
        /// Container index.
        container: u8,
    },
    /// Remove the record from storage. `force` ([D4]): the workload may still
    /// be running somewhere (at-most-one no longer holds).
    ///
    /// [D4]: crate::rules#d4
    Remove {
        /// Removed before its workload was confirmed stopped.
        force: bool,
    },
}

impl fmt::Display for Action {
    /// The action in a few words, for logs: `container 0: stop signal`.
    ///
    /// ```
    /// use grace_core::Action;
    ///
    /// assert_eq!(Action::SendKill { container: 1 }.to_string(), "container 1: SIGKILL");
    /// assert_eq!(Action::Remove { force: false }.to_string(), "record removed");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::RemoveEndpoints => f.write_str("removed from endpoints"),
            Action::RunPreStop {
                container,
                budget_seconds,
            } => write!(
                f,
                "container {container}: pre-stop hook started (budget {budget_seconds} s)"
            ),
            Action::SendStopSignal { container } => {
                write!(f, "container {container}: stop signal")
            }
            Action::SendKill { container } => write!(f, "container {container}: SIGKILL"),
            Action::ContainerStopped { container } => write!(f, "container {container}: stopped"),
            Action::Remove { force: false } => f.write_str("record removed"),
            Action::Remove { force: true } => {
                f.write_str("record removed (FORCE: the workload may still run)")
            }
        }
    }
}

/// The answer to a delete request (the REST response, [R33]), without a
/// copy of the object: the object as written is [`Lifecycle::record`] (when
/// the request removed it, the last state written before removal). A dry
/// run writes nothing; the object it would write is [`decide_delete`]'s
/// `record` for the same request.
///
/// [`decide_delete`]: crate::decide_delete
///
/// [R33]: crate::rules#r33
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct DeleteResponse {
    /// Graceful, pending or deleted.
    pub outcome: DeleteOutcome,
    /// Nothing was changed ([R42]).
    ///
    /// [R42]: crate::rules#r42
    pub dry_run: bool,
    /// The record is (or would be) removed while its workload may still run ([D4]).
    ///
    /// [D4]: crate::rules#d4
    pub force: bool,
}

/// The answer to a finalizer update.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum UpdateOutcome {
    /// Written (or nothing to change); the record stays.
    Updated,
    /// The update completed the deletion ([R45]): the record is removed.
    ///
    /// [R45]: crate::rules#r45
    Deleted {
        /// Removed while the workload may still run (D4).
        force: bool,
    },
}

/// Whether an agent-side input applied.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Handled {
    /// The input was acted on.
    Applied,
    /// It does not apply in this state (no agent, node lost or fenced,
    /// already stopped).
    Ignored,
}

/// A container index outside the object's containers.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UnknownContainer;

impl fmt::Display for UnknownContainer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no container with that index")
    }
}

impl core::error::Error for UnknownContainer {}

/// A stored record that belongs to another object (its uid differs): the
/// name was deleted and created again.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OtherObject;

impl fmt::Display for OtherObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the stored record has another uid: it is another object")
    }
}

impl core::error::Error for OtherObject {}

/// More containers than the lifecycle's capacity.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TooManyContainers;

impl fmt::Display for TooManyContainers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("more containers than the lifecycle can hold")
    }
}

impl core::error::Error for TooManyContainers {}

/// Whether the agent can reach the record.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Link {
    /// Reporting normally.
    Connected,
    /// Not reporting ([R77]–[R80]): it neither sees nor writes the record, but
    /// goes on stopping what it was stopping.
    ///
    /// [R77]: crate::rules#r77
    /// [R80]: crate::rules#r80
    Lost,
    /// Proven gone for good ([D7], [R82]): it never acts again.
    ///
    /// [D7]: crate::rules#d7
    /// [R82]: crate::rules#r82
    Fenced,
}

/// The agent's own state for this object (the kubelet's pod worker).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AgentState {
    /// Reachability.
    pub link: Link,
    /// The kill has started.
    pub killing: bool,
    /// The agent has seen a deletion (a timestamp, or the record gone).
    pub deletion_seen: bool,
    /// An eviction was ordered (the pod ends Failed if not deleted).
    pub evicted: bool,
    /// The agent owes the API a final delete or a status write, to be sent
    /// when it can reach the record.
    pub owes_report: bool,
    /// The final report has been made: the final delete ([R75]) sent, or
    /// the record found gone. An eviction's Failed status is not final.
    ///
    /// [R75]: crate::rules#r75
    pub reported: bool,
    /// The effective grace in force, 0 before the kill ([R50]–[R55]).
    ///
    /// [R50]: crate::rules#r50
    /// [R55]: crate::rules#r55
    pub remembered_grace: i64,
}

/// One object's deletion lifecycle, with up to `F` finalizers and `C`
/// containers.
///
/// # Driving the machine
///
/// Every input is an [`Input`] fed to [`handle`](Self::handle) with the
/// current time; nothing happens between calls. After each input:
///
/// 1. take every [`Action`] from [`poll_action`](Self::poll_action) and carry
///    it out (persist the record first if it changed — see
///    [`record`](Self::record));
/// 2. ask [`poll_timeout`](Self::poll_timeout) for the next deadline and call
///    [`Input::Timeout`] once it has passed (an early or
///    repeated call is a harmless no-op);
/// 3. report what the world did: a pre-stop hook that returned
///    ([`Input::PreStopFinished`]), a
///    process that exited ([`Input::ContainerExited`]);
/// 4. forget the lifecycle only once it [is finished](Self::is_finished):
///    [`Phase::Deleted`] with a force delete still leaves a kill to run (D4).
///
/// ```
/// use grace_core::{Action, DeleteOptions, DeleteOutcome, Input, Lifecycle, Now, Phase, Record, Strategy, ContainerSpec, Name};
///
/// let record = Record::<4>::new(Name::try_from("uid-1").unwrap());
/// let app = ContainerSpec { pre_stop: false, sidecar: false, stopped: false };
/// let mut pod = Lifecycle::<4, 2>::new(Strategy::POD, record, &[app]).unwrap();
/// let at = |s: i64| Now::from_unix_millis(s * 1000);
///
/// // kubectl delete pod: the spec's 30 s.
/// let reply = pod.handle(at(1000), Input::Delete(DeleteOptions::default()));
/// let response = reply.delete().unwrap().unwrap();
/// assert_eq!(response.outcome, DeleteOutcome::Graceful);
/// assert_eq!(pod.record().deletion_timestamp.unwrap().as_unix_seconds(), 1030);
/// assert_eq!(pod.poll_action(), Some(Action::RemoveEndpoints));
///
/// // The agent sees it and sends SIGTERM; SIGKILL is due 30 s later.
/// let _ = pod.handle(at(1001), Input::AgentSync);
/// assert_eq!(pod.phase(), Phase::Terminating);
/// assert_eq!(pod.poll_action(), Some(Action::SendStopSignal { container: 0 }));
/// assert_eq!(pod.poll_timeout().map(|t| t.as_millis()), Some(1_031_000));
///
/// // The process exits on SIGTERM; the agent's final delete removes the record.
/// pod.handle(at(1004), Input::container_exited(0)).container().unwrap();
/// assert_eq!(pod.poll_action(), Some(Action::ContainerStopped { container: 0 }));
/// assert_eq!(pod.poll_action(), Some(Action::Remove { force: false }));
/// assert_eq!(pod.phase(), Phase::Deleted);
/// ```
///
/// With the `serde` feature a lifecycle can be persisted whole — record,
/// agent state, kill stages and deadlines — and restored after a restart.
/// Deadlines are [`Instant`]s of the caller's monotonic clock: restore them
/// only on a clock with the same origin. A restored value is trusted as it
/// is (the machine stays panic-free whatever it is given, but feed back only
/// what it serialized).
///
/// `C` is at most 253 (a one-byte count and one-byte links keep the state
/// small); a larger capacity fails to compile.
// `Deserialize` is in `persist.rs` (from `persist::Persisted`, and in place).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lifecycle<const F: usize, const C: usize, const L: usize = NAME_CAPACITY> {
    record: Record<F, L>,
    /// The object's containers are the first `count`; the others stay
    /// `Container::VACANT` (never changed: every change goes through
    /// `containers_mut`), so that equality sees only the real ones and
    /// scans for owed outputs or deadlines may read the whole array.
    containers: [Container; C],
    /// The effective grace in force, 0 before the kill (R50–R55).
    remembered_grace: i64,
    /// The oldest and newest entries of the queue of owed outputs
    /// (`queue.rs`).
    ends: Ends,
    /// The entry queued after `RemoveEndpoints` (each container keeps its own).
    endpoints_next: Entry,
    /// The entry queued after `Remove`.
    remove_next: Entry,
    flags: Flags,
    phase: Phase,
    count: u8,
}

impl<const F: usize, const C: usize, const L: usize> Lifecycle<F, C, L> {
    /// The container count is one byte, and container indices stay clear
    /// of the action queue's other entries.
    const COUNT_FITS: () = assert!(C <= MAX_CONTAINERS, "at most 253 containers");

    /// A free table slot: all zero bits (no object, no containers), so that
    /// a `static` table needs no initial image.
    pub(crate) const VACANT: Self = Lifecycle {
        record: Record::VACANT,
        containers: [Container::VACANT; C],
        remembered_grace: 0,
        ends: Ends::EMPTY,
        endpoints_next: 0,
        remove_next: 0,
        flags: Flags::VACANT,
        phase: Phase::Live,
        count: 0,
    };

    /// Tracks a stored object of the given type with the given containers.
    /// A finished pod's (or a stopped spec's) containers start stopped.
    pub fn new(
        strategy: Strategy,
        record: Record<F, L>,
        containers: &[ContainerSpec],
    ) -> Result<Self, TooManyContainers> {
        let finished = record.phase.is_terminal();
        let mut list = [Container::VACANT; C];
        if containers.len() > C {
            return Err(TooManyContainers);
        }
        for (slot, spec) in list.iter_mut().zip(containers) {
            *slot = Container::new(ContainerSpec {
                stopped: spec.stopped || finished,
                ..*spec
            });
        }
        let mut lifecycle = Lifecycle {
            record,
            containers: list,
            remembered_grace: 0,
            ends: Ends::EMPTY,
            endpoints_next: 0,
            remove_next: 0,
            flags: Flags::new(strategy),
            phase: Phase::Live,
            count: Self::count_of(containers.len()),
        };
        lifecycle.phase = lifecycle.derive_phase();
        Ok(lifecycle)
    }

    /// `len` (at most `C`) as the one-byte container count.
    fn count_of(len: usize) -> u8 {
        #[allow(clippy::let_unit_value)]
        let () = Self::COUNT_FITS;
        u8::try_from(len).unwrap_or(u8::MAX)
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The record as stored now, or, once removed, as last written.
    pub fn record(&self) -> &Record<F, L> {
        &self.record
    }

    /// Whether the record is still in storage.
    pub fn is_stored(&self) -> bool {
        self.flags.has(Flag::Stored)
    }

    /// Whether nothing more can happen to this object, so that its caller
    /// may forget it: the record is removed ([`Phase::Deleted`]), every
    /// action has been handed out, and no workload may still run (there is
    /// no agent, the node is fenced, or every container has stopped).
    ///
    /// [`Phase::Deleted`] alone is not enough: after a force delete the
    /// record is gone while the workload still runs (D4). Until the agent
    /// syncs, such a lifecycle has no action and no deadline, yet the sync
    /// starts the kill; after SIGKILL it waits for the process to exit. A
    /// lifecycle that is not finished and has neither an action nor a
    /// deadline is waiting for an input from the world (the agent's sync,
    /// an exit, the node's return or fencing), never for time.
    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Deleted && !self.has_action() && !self.agent_has_work()
    }

    /// The type's deletion strategy.
    pub fn strategy(&self) -> Strategy {
        self.flags.strategy()
    }

    /// The agent's state.
    pub fn agent(&self) -> AgentState {
        AgentState {
            link: self.flags.link(),
            killing: self.flags.has(Flag::Killing),
            deletion_seen: self.flags.has(Flag::DeletionSeen),
            evicted: self.flags.has(Flag::Evicted),
            owes_report: self.flags.has(Flag::OwesReport),
            reported: self.flags.has(Flag::Reported),
            remembered_grace: self.remembered_grace,
        }
    }

    /// The containers' kill states.
    pub fn containers(&self) -> &[Container] {
        self.containers
            .get(..usize::from(self.count))
            .unwrap_or_default()
    }

    fn containers_mut(&mut self) -> &mut [Container] {
        self.containers
            .get_mut(..usize::from(self.count))
            .unwrap_or_default()
    }

    // ---- Inputs -----------------------------------------------------------

    /// Feeds one [`Input`] at `now`: the one way in. Which [`Reply`] comes
    /// back depends on the input (see [`Input`]'s variants); an input
    /// refused or not applying in this state changes nothing.
    // Always inlined: a caller's input is usually a constant variant, so
    /// the match folds away and a timeout costs what it did as its own
    // method (measured in benches/transition.rs).
    #[inline(always)]
    pub fn handle(&mut self, now: Now, input: Input) -> Reply {
        // Matched by reference: moving the options (360 bytes) out of the
        // input would copy them again.
        match &input {
            Input::Delete(options) => Reply::Delete(self.delete(now, options)),
            Input::FinalizerUpdate(change) => Reply::Update(self.finalizer_update(now, change)),
            Input::AgentSync => Reply::Handled(Ok(self.agent_sync(now))),
            Input::Evict {
                grace_period_seconds,
            } => Reply::Handled(Ok(self.evict(now, *grace_period_seconds))),
            Input::PreStopFinished(c) => Reply::Handled(self.pre_stop_finished(now, *c)),
            Input::ContainerExited(c) => Reply::Handled(self.container_exited(now, *c)),
            Input::ContainerStarted(c) => Reply::Handled(self.container_started(*c)),
            Input::StopSignalSent(c) => Reply::Handled(self.stop_signal_sent(now, *c)),
            Input::NodeLost => Reply::Handled(Ok(self.node_lost(now))),
            Input::NodeReady => Reply::Handled(Ok(self.node_ready(now))),
            Input::NodeFenced => Reply::Handled(Ok(self.node_fenced(now))),
            Input::Timeout => Reply::Handled(Ok(self.timeout(now))),
        }
    }

    // ---- API-level inputs -------------------------------------------------

    /// A delete request ([R1]–[R44]). A dry run decides and reports but changes
    /// nothing. Errors change nothing either.
    ///
    /// [R1]: crate::rules#r1
    /// [R44]: crate::rules#r44
    fn delete(&mut self, now: Now, options: &DeleteOptions) -> Result<DeleteResponse, DeleteError> {
        match self.phase {
            // R3: nothing stored, nothing to delete.
            Phase::Deleted => Err(DeleteError::NotFound),
            Phase::Live | Phase::GracefulPending | Phase::Terminating => {
                let plan = plan_delete(&self.record, &self.strategy(), options, now.wall)?;
                let force = plan.remove && self.workload_may_run();
                // R42–R44: a dry run is the same decision, not applied.
                if !options.dry_run {
                    self.apply_delete(&plan, force);
                }
                Ok(DeleteResponse {
                    outcome: plan.outcome,
                    dry_run: options.dry_run,
                    force,
                })
            }
        }
    }

    /// An update of the finalizer list ([R45], [R46]).
    ///
    /// [R45]: crate::rules#r45
    /// [R46]: crate::rules#r46
    fn finalizer_update(
        &mut self,
        now: Now,
        change: &FinalizerChange,
    ) -> Result<UpdateOutcome, UpdateError> {
        let _ = now; // updates carry no time; kept for a uniform calling shape
        match self.phase {
            Phase::Deleted => Err(UpdateError::NotFound),
            Phase::Live | Phase::GracefulPending | Phase::Terminating => {
                let decision = decide_finalizer_update(&self.record, change)?;
                if decision.write {
                    self.write(|record| *record = decision.record);
                }
                if decision.remove {
                    // R45: the last finalizer went and no grace is left.
                    let force = self.workload_may_run();
                    self.remove(force);
                    self.refresh_phase();
                    return Ok(UpdateOutcome::Deleted { force });
                }
                self.refresh_phase();
                Ok(UpdateOutcome::Updated)
            }
        }
    }

    // ---- Agent-level inputs -----------------------------------------------

    /// The agent observes the record and acts on it: starts the kill once a
    /// deletion is visible ([R57]), applies a shorter grace at once ([D5]).
    ///
    /// [R57]: crate::rules#r57
    /// [D5]: crate::rules#d5
    fn agent_sync(&mut self, now: Now) -> Handled {
        if !self.has_agent() || self.flags.link() != Link::Connected {
            return Handled::Ignored;
        }
        // The record as it is, or, once removed, as last written (D4).
        if !self.is_stored() || self.record.deletion_timestamp.is_some() {
            self.flags.set(Flag::DeletionSeen, true);
        }
        if self.flags.has(Flag::DeletionSeen) || self.flags.has(Flag::Evicted) {
            let grace = effective_grace(
                self.remembered_grace,
                self.record.deletion_grace_period_seconds,
                None,
                self.record.termination_grace_period_seconds,
            );
            self.apply_grace(now, grace.seconds, grace.shortened);
        }
        self.settle(now);
        self.refresh_phase();
        Handled::Applied
    }

    /// The stored record changed under this lifecycle: another API server
    /// sharing the store decided a request for the object (a deletion, a
    /// shorter grace, a finalizer update), or removed the record (`None`:
    /// a force delete, or a removal once the last finalizer went).
    ///
    /// The stored record is the truth for the API's fields, as the
    /// kubelet takes the pod it watches: it replaces the record here as it
    /// is; a first deletion takes a serving pod out of endpoints, as a
    /// delete decided here does. Then the agent acts on it as a sync does
    /// ([R57], [D5]). A record found gone while the workload may still run is
    /// a force delete seen from the node ([D4]): it is stopped with grace 0
    /// (so 1 s, [R53]; SIGKILL never sooner than 2 s after the stop signal)
    /// and no final delete is owed. A fenced agent ignores it ([D7]).
    ///
    /// [R57]: crate::rules#r57
    /// [D5]: crate::rules#d5
    /// [D4]: crate::rules#d4
    /// [R53]: crate::rules#r53
    /// [D7]: crate::rules#d7
    pub fn observe_record(
        &mut self,
        now: Now,
        stored: Option<&Record<F, L>>,
    ) -> Result<Handled, OtherObject> {
        if self.phase == Phase::Deleted || self.flags.link() == Link::Fenced {
            return Ok(Handled::Ignored);
        }
        let Some(stored) = stored else {
            self.observe_removal(now);
            return Ok(Handled::Applied);
        };
        if stored.uid != self.record.uid {
            return Err(OtherObject);
        }
        let was_deleting = self.record.deletion_timestamp.is_some();
        let serving = self.has_agent() && !self.record.phase.is_terminal();
        self.record = stored.clone();
        if !was_deleting && self.record.deletion_timestamp.is_some() && serving {
            self.owe_endpoints();
        }
        if self.has_agent() && self.flags.link() == Link::Connected {
            self.agent_sync(now);
        }
        self.refresh_phase();
        Ok(Handled::Applied)
    }

    /// The record was removed by another API server (see
    /// [`observe_record`](Self::observe_record)).
    fn observe_removal(&mut self, now: Now) {
        let serving = self.has_agent()
            && !self.record.phase.is_terminal()
            && self.record.deletion_timestamp.is_none();
        self.flags.set(Flag::Stored, false);
        // Found gone: that is the final report, nothing more to send.
        self.flags.set(Flag::Reported, true);
        self.flags.set(Flag::OwesReport, false);
        if serving {
            self.owe_endpoints();
        }
        if self.has_agent() && self.flags.link() == Link::Connected {
            self.flags.set(Flag::DeletionSeen, true);
            // D4: the removal carried grace 0.
            let grace = effective_grace(
                self.remembered_grace,
                Some(0),
                None,
                self.record.termination_grace_period_seconds,
            );
            self.apply_grace(now, grace.seconds, grace.shortened);
            self.settle(now);
        }
        self.refresh_phase();
    }

    /// An agent-side kill override such as an eviction ([R52], [R73], [R74]): it
    /// only shortens, and acts at once.
    ///
    /// [R52]: crate::rules#r52
    /// [R73]: crate::rules#r73
    /// [R74]: crate::rules#r74
    fn evict(&mut self, now: Now, grace_period_seconds: i64) -> Handled {
        if !self.has_agent() || self.flags.link() == Link::Fenced || self.all_stopped() {
            return Handled::Ignored;
        }
        self.flags.set(Flag::Evicted, true);
        let grace = effective_grace(
            self.remembered_grace,
            None,
            Some(grace_period_seconds),
            self.record.termination_grace_period_seconds,
        );
        self.apply_grace(now, grace.seconds, grace.shortened);
        self.settle(now);
        self.refresh_phase();
        Handled::Applied
    }

    /// A container's pre-stop hook returned. `container` indexes
    /// [`containers`](Self::containers): an [`Action`]'s one-byte index, a
    /// `usize` or a literal ([`ContainerIndex`]); any other value is
    /// [`UnknownContainer`].
    fn pre_stop_finished(
        &mut self,
        now: Now,
        container: impl Into<ContainerIndex>,
    ) -> Result<Handled, UnknownContainer> {
        let container = container.into().get();
        let c = self.containers().get(container).ok_or(UnknownContainer)?;
        if self.flags.link() == Link::Fenced || !matches!(c.stage(), Stage::PreStop { .. }) {
            return Ok(Handled::Ignored);
        }
        self.after_hook(now.mono, container);
        Ok(Handled::Applied)
    }

    /// A container's process exited. `container` indexes
    /// [`containers`](Self::containers): an [`Action`]'s one-byte index, a
    /// `usize` or a literal ([`ContainerIndex`]); any other value is
    /// [`UnknownContainer`].
    fn container_exited(
        &mut self,
        now: Now,
        container: impl Into<ContainerIndex>,
    ) -> Result<Handled, UnknownContainer> {
        let container = container.into().get();
        // Without an agent (unscheduled, non-pod) nothing runs to exit (R19).
        let acts = self.has_agent() && self.flags.link() != Link::Fenced;
        if container >= self.containers().len() {
            return Err(UnknownContainer);
        }
        if !acts || self.update(container, Container::exited) != Some(true) {
            return Ok(Handled::Ignored);
        }
        self.release_sidecars(now.mono);
        self.settle(now);
        self.refresh_phase();
        Ok(Handled::Applied)
    }

    /// A container that had stopped was started again ([R92], [R93]). No
    /// restart once the pod is being deleted or evicted ([R94]): a stopped
    /// container stays stopped then, so a delete during a back-off signals
    /// no process. Without an agent, or fenced, nothing runs (R19, D7).
    ///
    /// [R92]: crate::rules#r92
    /// [R93]: crate::rules#r93
    /// [R94]: crate::rules#r94
    fn container_started(
        &mut self,
        container: impl Into<ContainerIndex>,
    ) -> Result<Handled, UnknownContainer> {
        let container = container.into().get();
        if container >= self.containers().len() {
            return Err(UnknownContainer);
        }
        let deleting = self.record.deletion_timestamp.is_some()
            || !self.is_stored()
            || self.flags.has(Flag::DeletionSeen)
            || self.flags.has(Flag::Evicted)
            || self.flags.has(Flag::Killing)
            || self.record.phase.is_terminal();
        let acts = self.has_agent() && self.flags.link() == Link::Connected;
        if deleting || !acts || self.update(container, Container::restarted) != Some(true) {
            return Ok(Handled::Ignored);
        }
        Ok(Handled::Applied)
    }

    /// The stop signal of a container really went out at `now` ([R62]):
    /// the agent reports when it carried out [`Action::SendStopSignal`],
    /// which may be later than when it was decided (a durable write and
    /// other actions came first). SIGKILL is then due no sooner than 2 s
    /// after `now`; a later deadline stays as it is. Ignored unless the
    /// container is stopping and `now` is after the decision.
    ///
    /// [R62]: crate::rules#r62
    ///
    /// `container` indexes [`containers`](Self::containers): an
    /// [`Action`]'s one-byte index, a `usize` or a literal
    /// ([`ContainerIndex`]); any other value is [`UnknownContainer`].
    fn stop_signal_sent(
        &mut self,
        now: Now,
        container: impl Into<ContainerIndex>,
    ) -> Result<Handled, UnknownContainer> {
        let container = container.into().get();
        let c = self
            .containers_mut()
            .get_mut(container)
            .ok_or(UnknownContainer)?;
        Ok(if c.signal_sent(now.mono) {
            Handled::Applied
        } else {
            Handled::Ignored
        })
    }

    /// The agent stops reporting ([R77]–[R80]): the record stays as it is.
    ///
    /// [R77]: crate::rules#r77
    /// [R80]: crate::rules#r80
    fn node_lost(&mut self, now: Now) -> Handled {
        let _ = now;
        if !self.has_agent() || self.flags.link() != Link::Connected {
            return Handled::Ignored;
        }
        self.flags.set_link(Link::Lost);
        Handled::Applied
    }

    /// The agent reconnects; a report it owes is sent at once.
    fn node_ready(&mut self, now: Now) -> Handled {
        if !self.has_agent() || self.flags.link() != Link::Lost {
            return Handled::Ignored;
        }
        self.flags.set_link(Link::Connected);
        self.settle(now);
        self.refresh_phase();
        Handled::Applied
    }

    /// Proof that the node is gone for good ([D7], like PodGC on a deleted
    /// node, [R82]): running containers count as stopped (no signals), and the
    /// final delete is issued on the agent's behalf — for a live record too.
    ///
    /// [D7]: crate::rules#d7
    /// [R82]: crate::rules#r82
    fn node_fenced(&mut self, now: Now) -> Handled {
        if !self.has_agent() || self.flags.link() == Link::Fenced {
            return Handled::Ignored;
        }
        self.flags.set_link(Link::Fenced);
        for i in 0..self.containers().len() {
            self.update(i, |c| {
                let _ = c.exited();
            });
        }
        if self.is_stored() && !self.flags.has(Flag::Reported) {
            // R82: PodGC marks the pod Failed, then deletes with grace 0.
            if !self.record.phase.is_terminal() {
                self.write(|record| record.phase = PodPhase::Failed);
            }
            self.final_delete(now);
        }
        self.flags.set(Flag::Reported, true);
        self.refresh_phase();
        Handled::Applied
    }

    /// Deadlines that have passed: pre-stop cut-offs (then the stop signal),
    /// sidecar waits, SIGKILL. Early or repeated calls do nothing.
    // Always inlined: a SIGKILL due is the common case and short, and with
    // a mere hint LLVM keeps the call (measured in benches/transition.rs);
    // the rarer stages are calls.
    #[inline(always)]
    fn timeout(&mut self, now: Now) -> Handled {
        if self.flags.link() == Link::Fenced {
            return Handled::Ignored;
        }
        let now = now.mono;
        // Vacant container entries have no deadline: the whole array is
        // read, with no count to check.
        for i in 0..C {
            let Some(c) = self.containers.get_mut(i) else {
                continue;
            };
            // R63: the budget is spent. The common case, kept straight
            // (not through `update`, whose count check it does not need:
            // vacant entries are never due).
            let owed_before = c.owed;
            if c.kill_if_due(now) {
                self.joined(i, owed_before);
            } else if c.due(now) {
                self.expire_stage(now, i);
            }
        }
        Handled::Applied
    }

    /// A pre-stop cut-off or a sidecar's wait has passed for container `i`.
    /// Out of line: `timeout` is inlined into its callers, and these
    /// are not its common case.
    #[cold]
    #[inline(never)]
    fn expire_stage(&mut self, now: Instant, i: usize) {
        match self.containers.get(i).and_then(|c| c.expired(now)) {
            // R60: the agent stops waiting for the hook; then the signal.
            Some(Expiry::HookCutOff) => self.after_hook(now, i),
            // R70: a sidecar's wait is bounded by its budget.
            Some(Expiry::TurnOver) => self.signal(now, i),
            // `kill_if_due` handled it.
            Some(Expiry::KillDue) | None => {}
        }
    }

    // ---- Outputs ------------------------------------------------------------

    /// The next thing to do, in the order things happened; `None` when done.
    #[inline]
    pub fn poll_action(&mut self) -> Option<Action> {
        // The head of the queue of owed outputs (`queue.rs`): a container
        // in the common case; the other entries are out of line.
        let head = self.ends.head();
        if head == 0 {
            return None;
        }
        let Some(c) = self.containers.get_mut(usize::from(head).wrapping_sub(1)) else {
            return self.poll_other(head);
        };
        // Within a container, outputs arise in the order of their bits:
        // the lowest owed bit goes first.
        let first = c.owed & c.owed.wrapping_neg();
        // `head - 1 < C <= 253`.
        let container = head.wrapping_sub(1);
        let action = if first == owed::PRE_STOP {
            Action::RunPreStop {
                container,
                budget_seconds: u32::try_from(c.budget.max(0)).unwrap_or(u32::MAX),
            }
        } else {
            // The three signals' kinds are consecutive bits, matched in
            // their order so that no jump is needed to pick one.
            match first.trailing_zeros() {
                1 => Action::SendStopSignal { container },
                2 => Action::SendKill { container },
                3 => Action::ContainerStopped { container },
                // A queued container owes something.
                _ => return None,
            }
        };
        c.owed ^= first;
        // Usually its only output (see `queue.rs`).
        if likely(c.owed == 0) {
            self.dequeue();
        }
        Some(action)
    }

    /// [`poll_action`](Self::poll_action) for a head that is not a container:
    /// out of line, to keep the containers' path short.
    #[inline(never)]
    fn poll_other(&mut self, head: Entry) -> Option<Action> {
        let action = match head {
            ENDPOINTS if self.flags.has(Flag::EndpointsOwed) => {
                self.flags.set(Flag::EndpointsOwed, false);
                Action::RemoveEndpoints
            }
            REMOVE if self.flags.has(Flag::RemoveOwed) => {
                let force = self.flags.has(Flag::Force);
                self.flags.set(Flag::Force, false);
                self.flags.set(Flag::RemoveOwed, false);
                Action::Remove { force }
            }
            _ => return None,
        };
        self.dequeue();
        Some(action)
    }

    /// The store assigned `resource_version` to the record as last written
    /// (stores that version records themselves, like etcd's revisions, do
    /// this); later preconditions are checked against it ([R7]).
    ///
    /// [R7]: crate::rules#r7
    pub fn set_resource_version(&mut self, resource_version: u64) {
        self.record.resource_version = resource_version;
    }

    /// Whether [`poll_action`](Self::poll_action) has something to hand out.
    pub fn has_action(&self) -> bool {
        self.ends != Ends::EMPTY
    }

    /// The next deadline on the monotonic clock, if any: when
    /// [`Input::Timeout`] has something to do. What
    /// comes due then is one container's stage ending: a pre-stop hook's
    /// budget spent (then its stop signal, [R60]), a sidecar's wait over
    /// (its stop signal, [R70]) or the grace spent (SIGKILL, [R63]);
    /// [`poll_due`](Self::poll_due) says which. `None` once nothing waits
    /// on a clock (no kill under way, or the node fenced).
    ///
    /// [R60]: crate::rules#r60
    /// [R63]: crate::rules#r63
    /// [R70]: crate::rules#r70
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.flags.link() == Link::Fenced {
            return None;
        }
        // Vacant container entries have no deadline: no count to check.
        self.containers.iter().filter_map(Container::deadline).min()
    }

    /// The next deadline ([`poll_timeout`](Self::poll_timeout)) and what
    /// comes due at it: which container, and whether its pre-stop hook is
    /// cut off, its turn as a sidecar comes, or SIGKILL is due. Of two
    /// containers due at the same instant, the first.
    ///
    /// ```
    /// use grace_core::{ContainerSpec, DeleteOptions, DueKind, Input, Lifecycle, Name, Now, Record, Strategy};
    ///
    /// let record = Record::<4>::new(Name::try_from("uid-1").unwrap());
    /// let mut pod = Lifecycle::<4, 2>::new(Strategy::POD, record, &[ContainerSpec::default()]).unwrap();
    /// let _ = pod.handle(Now::from_unix_millis(0), Input::Delete(DeleteOptions::with_grace(5)));
    /// let _ = pod.handle(Now::from_unix_millis(0), Input::AgentSync);
    /// let due = pod.poll_due().unwrap();
    /// assert_eq!((due.at.as_millis(), due.container, due.kind), (5_000, 0, DueKind::Kill));
    /// ```
    pub fn poll_due(&self) -> Option<Due> {
        if self.flags.link() == Link::Fenced {
            return None;
        }
        let mut first: Option<Due> = None;
        for (i, c) in self.containers.iter().enumerate() {
            let Some((at, kind)) = c.due_kind() else {
                continue;
            };
            if first.is_some_and(|f| f.at <= at) {
                continue;
            }
            // `C <= 253`: the index fits a byte.
            let Ok(container) = u8::try_from(i) else {
                break;
            };
            first = Some(Due {
                at,
                container,
                kind,
            });
        }
        first
    }

    // ---- Internals ----------------------------------------------------------

    /// Changes container `i` (if there is one); if it comes to owe
    /// something, it joins the queue of owed outputs. Every change of a
    /// container goes through here, one at a time, so that outputs arising
    /// in one call keep their causal order.
    #[inline]
    fn update<R>(&mut self, i: usize, change: impl FnOnce(&mut Container) -> R) -> Option<R> {
        let c = self.containers_mut().get_mut(i)?;
        let owed_before = c.owed;
        let result = change(c);
        self.joined(i, owed_before);
        Some(result)
    }

    /// Container `i`, which owed `owed_before` before a change, joins the
    /// queue of owed outputs if it has just come to owe something.
    #[inline]
    fn joined(&mut self, i: usize, owed_before: u8) {
        let owes = self.containers.get(i).is_some_and(|c| c.owed != 0);
        if owed_before == 0 && owes {
            self.enqueue(Self::entry_of(i));
        }
    }

    /// A serving pod leaves its endpoints (R85), once.
    fn owe_endpoints(&mut self) {
        if !self.flags.has(Flag::EndpointsOwed) {
            self.flags.set(Flag::EndpointsOwed, true);
            self.enqueue(ENDPOINTS);
        }
    }

    /// Only scheduled pods have an agent.
    fn has_agent(&self) -> bool {
        self.flags.is_pod() && self.record.scheduled
    }

    fn all_stopped(&self) -> bool {
        self.containers().iter().all(Container::is_stopped)
    }

    /// Could the agent still have something to stop? Unlike
    /// [`workload_may_run`](Self::workload_may_run), a pod the API sees as
    /// finished still counts while its agent has containers not stopped:
    /// the agent would still signal them.
    fn agent_has_work(&self) -> bool {
        self.has_agent() && self.flags.link() != Link::Fenced && !self.all_stopped()
    }

    /// D4: could something of this object still be running?
    fn workload_may_run(&self) -> bool {
        self.has_agent()
            && !self.record.phase.is_terminal()
            && self.flags.link() != Link::Fenced
            && !self.all_stopped()
    }

    /// Carries out a delete decision on the stored record, in place.
    fn apply_delete(&mut self, plan: &DeletePlan, force: bool) {
        if let Some(patch) = plan.write {
            self.write(|record| patch.apply(record));
        }
        if plan.remove {
            self.remove(force);
        }
        self.refresh_phase();
    }

    /// Writes the record through `change` (the store bumps the resource
    /// version); a first deletion timestamp takes a scheduled, running pod
    /// out of endpoints.
    fn write(&mut self, change: impl FnOnce(&mut Record<F, L>)) {
        let was_deleting = self.record.deletion_timestamp.is_some();
        let serving = self.has_agent() && !self.record.phase.is_terminal();
        let version = self.record.resource_version;
        change(&mut self.record);
        self.record.resource_version = version.saturating_add(1);
        if !was_deleting && self.record.deletion_timestamp.is_some() && serving {
            self.owe_endpoints();
        }
    }

    fn remove(&mut self, force: bool) {
        self.flags.set(Flag::Stored, false);
        if !self.flags.has(Flag::RemoveOwed) {
            self.flags.set(Flag::RemoveOwed, true);
            self.enqueue(REMOVE);
        }
        if force {
            self.flags.set(Flag::Force, true);
        }
    }

    /// Starts the kill with `grace`, or shortens one in progress (D5).
    fn apply_grace(&mut self, now: Now, grace: i64, shortened: bool) {
        let mono = now.mono;
        if !self.flags.has(Flag::Killing) {
            self.flags.set(Flag::Killing, true);
            for i in 0..self.containers().len() {
                let proceed = self.update(i, |c| c.start(mono, grace));
                if proceed == Some(true) {
                    self.after_hook(mono, i);
                }
            }
        } else if shortened {
            for c in self.containers_mut().iter_mut() {
                c.shorten(mono, grace);
            }
        }
        self.remembered_grace = grace;
    }

    /// The hook of container `i` is over (or there was none): signal it, or
    /// let a sidecar wait its turn (R69–R72).
    fn after_hook(&mut self, now: Instant, i: usize) {
        let ordered = self.containers().iter().any(|c| c.spec.sidecar);
        let ready = self.turn_ready(i);
        self.update(i, |c| {
            if c.finish_hook(now, ready, ordered) {
                c.signal(now);
            }
        });
    }

    /// Sends container `i` the stop signal (R62, R63). Out of line:
    /// `timeout` is inlined into its callers, and a sidecar's turn
    /// is not its common case.
    #[inline(never)]
    fn signal(&mut self, now: Instant, i: usize) {
        self.update(i, |c| c.signal(now));
    }

    /// R69: a sidecar's turn comes when every main container and the next
    /// sidecar declared after it have stopped.
    fn turn_ready(&self, i: usize) -> bool {
        let mains_done = self
            .containers()
            .iter()
            .all(|c| c.spec.sidecar || c.is_stopped());
        let next_sidecar_done = self
            .containers()
            .iter()
            .skip(i.saturating_add(1))
            .find(|c| c.spec.sidecar)
            .is_none_or(Container::is_stopped);
        mains_done && next_sidecar_done
    }

    fn release_sidecars(&mut self, now: Instant) {
        for i in 0..self.containers().len() {
            let waiting = self
                .containers()
                .get(i)
                .is_some_and(|c| matches!(c.stage(), Stage::AwaitingTurn { .. }));
            if waiting && self.turn_ready(i) {
                self.signal(now, i);
            }
        }
    }

    /// Once everything has stopped, the agent reports: the final delete if a
    /// deletion was asked for (R75), the Failed phase after an eviction.
    fn settle(&mut self, now: Now) {
        if !self.has_agent() || self.flags.has(Flag::Reported) || !self.all_stopped() {
            return;
        }
        if !(self.flags.has(Flag::DeletionSeen) || self.flags.has(Flag::Evicted)) {
            return;
        }
        if self.flags.link() != Link::Connected {
            self.flags.set(Flag::OwesReport, true);
            return;
        }
        self.flags.set(Flag::OwesReport, false);
        if self.flags.has(Flag::DeletionSeen) || !self.is_stored() {
            // The final report: nothing follows it.
            self.flags.set(Flag::Reported, true);
            if self.is_stored() {
                self.final_delete(now);
            }
        } else if !self.record.phase.is_terminal() {
            // After an eviction alone the record stays, Failed; a deletion
            // seen later still gets its final delete (R75).
            self.write(|record| record.phase = PodPhase::Failed);
        }
    }

    /// R75: delete with grace 0 and the uid as precondition.
    ///
    /// The precondition is this record's own uid, checked against this
    /// record: here it always holds, so the request leaves it out (a store
    /// that can hold another object under the name checks the uid when it
    /// removes, as grace-std's runtime does). Building it would copy the uid
    /// into a full-capacity [`Name`](crate::Name) on every final delete:
    /// about 190 bytes of `.text` on a Cortex-M4 for a check that cannot
    /// fail.
    fn final_delete(&mut self, now: Now) {
        let options = DeleteOptions {
            grace_period_seconds: Some(0),
            ..DeleteOptions::default()
        };
        // The record is stored (so the phase is not Deleted).
        let _ = self.delete(now, &options);
    }

    fn derive_phase(&self) -> Phase {
        if !self.is_stored() {
            return Phase::Deleted;
        }
        if self.record.deletion_timestamp.is_none() {
            return Phase::Live;
        }
        let nothing_to_wait_for = !self.has_agent() || self.record.phase.is_terminal();
        if nothing_to_wait_for || self.flags.has(Flag::Killing) || self.flags.link() == Link::Fenced
        {
            Phase::Terminating
        } else {
            Phase::GracefulPending
        }
    }

    /// The one place the phase changes. Deleted absorbs everything.
    fn refresh_phase(&mut self) {
        if self.phase != Phase::Deleted {
            self.phase = self.derive_phase();
        }
    }
}
