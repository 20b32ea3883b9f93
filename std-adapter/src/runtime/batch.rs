//! Group commit for inputs: the changes of many requests made durable
//! together, as [`Runtime::handle_timeouts`] does for deadlines.
//!
//! An API server that answers each request after its own write waits for
//! one or two fsyncs per request, however many clients wait with it. A
//! [`Batch`] decides each input at once, in memory and in order (a later
//! input sees what an earlier one did), and [`Batch::commit`] writes every
//! changed object with one store batch before any action is carried out,
//! then the state after the actions with a second one — the write-ahead
//! order of a single input, for the whole batch. The caller answers each
//! request only after `commit` returns.

use std::collections::BTreeSet;

use grace_core::{Input, Now, Phase};

use super::commit::{RoundFailure, Written};
use super::inputs;
use super::objects::{Before, Id};
use super::stored::Spec;
use super::writes::Writes;
use super::{
    Actuator, Answer, Change, ObjectLifecycle, Runtime, RuntimeError, WorldEvent, store_down,
};
use crate::clock::Clock;
use crate::store::{ContainerStatus, Revision, Store, StorePreconditions, StoredObject, Write};

/// Inputs decided in memory and made durable together by
/// [`commit`](Batch::commit) (see the module docs).
///
/// [`handle`](Batch::handle) answers as [`Runtime::handle`] would (and
/// each other method as the [`Runtime`] method of the same name would),
/// against the state the batch has reached: a refused input changes
/// nothing, and the inputs that follow see what each accepted one did. The
/// answers hold only once `commit` has returned `Ok`; if it fails, no input
/// of the batch is in effect in memory (the store's state is read back, as
/// after any failed write) and each is answered with its error. A batch
/// dropped without `commit` is undone: nothing of it is written.
///
/// A batch holds at most one store batch's worth of objects
/// ([`is_full`](Batch::is_full)): commit it and open another. A second
/// input on the same object is accepted, but the record it sees carries
/// the revision from before the batch (the new one is known only once
/// written), so a caller that checks `resourceVersion` preconditions
/// commits before a second request on an object it
/// [`touches`](Batch::touches).
#[must_use = "a batch dropped without `commit` undoes every input it took"]
pub struct Batch<'a, S: Store, C: Clock, A: Actuator> {
    rt: &'a mut Runtime<S, C, A>,
    /// The objects the batch changed, in the order first changed.
    touched: Vec<Touched>,
    /// Their ids, to find them.
    ids: BTreeSet<Id>,
    /// The world events taken as inputs without error: the actuator hears
    /// of each once the batch is durable.
    taken: Vec<WorldEvent>,
    /// The world events whose input failed because the store did not
    /// answer: not taken, to be offered again (see
    /// [`commit_keeping_events`](Batch::commit_keeping_events)).
    untaken: Vec<WorldEvent>,
}

/// An object a batch changed.
struct Touched {
    id: Id,
    /// Its phase before the batch, then after each input that changed it:
    /// reported after the actions, one change per input, as inputs
    /// handled alone report them.
    phases: Vec<Phase>,
    /// Its packed lifecycle before the batch, to go back to; `None` for an
    /// object it created (going back forgets it).
    before: Option<Before>,
    /// Its container statuses and start time before the batch, if an
    /// input of it set a status.
    status_before: Option<inputs::StatusBefore>,
}

impl<S: Store, C: Clock, A: Actuator> Runtime<S, C, A> {
    /// Opens a [`Batch`]: inputs decided now, made durable together.
    pub fn open_batch(&mut self) -> Batch<'_, S, C, A> {
        Batch {
            rt: self,
            touched: Vec::new(),
            ids: BTreeSet::new(),
            taken: Vec::new(),
            untaken: Vec::new(),
        }
    }

    /// While a batch's actions run: keeps the removal of `name` for the
    /// batch after the actions and returns `None`; otherwise hands the
    /// preconditions back, for the caller to delete at once.
    pub(super) fn defer_removal(
        &mut self,
        name: &str,
        preconditions: StorePreconditions,
    ) -> Option<StorePreconditions> {
        match &mut self.removals {
            Some(removals) => {
                removals.push(Write::Delete {
                    name: name.to_owned(),
                    preconditions,
                });
                None
            }
            None => Some(preconditions),
        }
    }

    /// Moves the deferred removals to the end of `writes` and stops
    /// deferring.
    pub(super) fn take_removals(&mut self, writes: &mut Writes) {
        for removal in self.removals.take().into_iter().flatten() {
            writes.push(removal);
        }
    }
}

// What the batch holds; the runtime it borrows is `runtime()`'s to print
// (and needs its parts to be `Debug`).
impl<S: Store, C: Clock, A: Actuator> std::fmt::Debug for Batch<'_, S, C, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("objects", &self.touched.len())
            .field("taken", &self.taken)
            .field("untaken", &self.untaken)
            .finish_non_exhaustive()
    }
}

impl<S: Store, C: Clock, A: Actuator> Batch<'_, S, C, A> {
    /// The runtime, for reads (what it tracks is the batch's state so far).
    pub fn runtime(&self) -> &Runtime<S, C, A> {
        self.rt
    }

    /// How many objects the batch has changed.
    pub fn len(&self) -> usize {
        self.touched.len()
    }

    /// Whether the batch has changed nothing yet.
    pub fn is_empty(&self) -> bool {
        self.touched.is_empty()
    }

    /// Whether the batch holds as many objects as one store batch takes:
    /// an input on another object is refused until it is committed.
    pub fn is_full(&self) -> bool {
        self.touched.len() >= self.rt.round_size()
    }

    /// Whether an input on `name` fits: the batch is not full, or it
    /// changed `name` already.
    pub fn has_room_for(&self, name: &str) -> bool {
        !self.is_full() || self.touches(name)
    }

    /// Whether an input of this batch changed (or created) `name`.
    pub fn touches(&self, name: &str) -> bool {
        self.rt
            .objects
            .id(name)
            .is_some_and(|id| self.ids.contains(&id))
    }

    /// [`Runtime::create`], in the batch.
    pub fn create(&mut self, name: &str, object: StoredObject) -> Result<(), RuntimeError> {
        // Refused now whatever `create` would refuse, its kill state too.
        let (lifecycle, _) = self.rt.new_lifecycle(name, &object)?;
        self.room()?;
        // A placeholder revision, so that the write-ahead writes it; the
        // store's is noted once it is created.
        let phase = lifecycle.phase();
        let id = self
            .rt
            .objects
            .insert(name, lifecycle, Spec::of(object), Some(Revision::ZERO));
        self.ids.insert(id);
        self.touched.push(Touched {
            id,
            phases: vec![phase],
            before: None,
            status_before: None,
        });
        Ok(())
    }

    /// [`Runtime::handle`], in the batch: the same answer, against the
    /// state the batch has reached, once [`commit`](Self::commit) returns
    /// `Ok`.
    pub fn handle(&mut self, name: &str, input: Input) -> Result<Answer, RuntimeError> {
        self.input(name, inputs::apply(name, input))
    }

    /// [`Runtime::set_container_status`], in the batch: an agent that
    /// starts (or reaps) many workloads at once reports them with one
    /// commit.
    pub fn set_container_status(
        &mut self,
        name: &str,
        container: usize,
        status: ContainerStatus,
    ) -> Result<(), RuntimeError> {
        let Some(id) = self.rt.objects.id(name) else {
            return Ok(());
        };
        let Some(entry) = self.rt.objects.get(id) else {
            return Ok(());
        };
        let now = self.rt.clock.now().wall.floor_to_timestamp();
        let status = status.stamped(entry.spec.status.get(container), now);
        if !inputs::status_changes(entry, name, container, &status)? {
            return Ok(());
        }
        if !self.ids.contains(&id) {
            self.room()?;
            let not_found = || RuntimeError::NotFound(name.to_owned());
            let (lifecycle, packed) = self.rt.objects.open_keeping(id)?.ok_or_else(not_found)?;
            let phase = lifecycle.phase();
            self.ids.insert(id);
            self.touched.push(Touched {
                id,
                phases: vec![phase],
                before: Some(packed),
                status_before: None,
            });
        }
        let Some(entry) = self.rt.objects.get_mut(id) else {
            return Ok(());
        };
        let before = inputs::set_status(entry, container, status, now);
        if let Some(t) = self.touched.iter_mut().rev().find(|t| t.id == id) {
            t.status_before.get_or_insert(before);
        }
        Ok(())
    }

    /// [`Runtime::handle_world_event`], in the batch: the actuator hears
    /// the event first ([`Actuator::world_event`], which may hold it
    /// back); what it takes becomes the batch's inputs, and
    /// [`Actuator::world_event_taken`] follows a successful
    /// [`commit`](Self::commit). An event about an object the runtime no
    /// longer tracks is no error. Refused, without the actuator hearing
    /// of it, if the batch has no room for its object
    /// ([`has_room_for`](Self::has_room_for)).
    pub fn handle_world_event(&mut self, event: WorldEvent) -> Result<(), RuntimeError> {
        if !self.has_room_for(event.object()) {
            self.room()?;
        }
        let mut first_error = None;
        for taken in self.rt.actuator.world_event(event) {
            match take_world_event(self, &taken) {
                Ok(()) => self.taken.push(taken),
                Err(e) => {
                    if store_down(&e) {
                        self.untaken.push(taken);
                    }
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Makes every input of the batch durable and carries out what they
    /// owe: one store batch before the actions (the write-ahead), the
    /// actions, one store batch after (which also holds the removals the
    /// actions owe); then the actuator hears of the world events taken.
    /// On `Err`, see the type's docs.
    pub fn commit(self) -> Result<(), RuntimeError> {
        self.commit_keeping_events().0
    }

    /// [`commit`](Self::commit), handing back the world events that are
    /// not durable: every one taken if the commit failed, and any whose
    /// input failed because the store did not answer (a full disk, a store
    /// that is down). The actuator has not heard them taken, and the
    /// runtime has not recorded them: a program that cannot afford to
    /// lose them (the exit of a container being deleted would never be
    /// known otherwise) offers them again with
    /// [`handle_world_event`](Self::handle_world_event) once the store
    /// takes writes (an exit offered again after all was recorded is
    /// ignored: its container is stopped already).
    pub fn commit_keeping_events(mut self) -> (Result<(), RuntimeError>, Vec<WorldEvent>) {
        let taken = std::mem::take(&mut self.taken);
        let mut kept = std::mem::take(&mut self.untaken);
        let done = self.commit_inputs();
        if done.is_ok() {
            for event in &taken {
                self.rt.actuator.world_event_taken(event);
            }
        } else {
            kept.extend(taken);
        }
        (done, kept)
    }

    fn commit_inputs(&mut self) -> Result<(), RuntimeError> {
        let touched = std::mem::take(&mut self.touched);
        self.ids.clear();
        let rt = &mut *self.rt;
        if touched.is_empty() {
            rt.objects.close();
            return Ok(());
        }
        let now = rt.clock.now();
        let ids = touched.iter().map(|t| {
            let how = match t.before {
                Some(_) => Written::Update,
                None => Written::Create,
            };
            (t.id, how)
        });
        let done = match rt.with_writes(|rt, writes| -> Result<_, RoundFailure> {
            let slots = rt.write_ahead(writes, ids)?;
            // Named now: a finished object is forgotten by `act_round`.
            let names: Vec<_> = touched.iter().map(|t| rt.name(t.id)).collect();
            // No phase change reported by the round: each input's is.
            let round = touched.iter().map(|t| (t.id, None)).collect();
            rt.removals = Some(Vec::new());
            let done = rt.act_round(writes, now, round, slots);
            rt.removals = None;
            Ok((names, done))
        }) {
            Ok((names, done)) => {
                for (t, name) in touched.into_iter().zip(names) {
                    report_phases(rt, now, t, name.as_deref());
                }
                done
            }
            Err(failure) => {
                // Refused, or applied with its answer lost: take the
                // store's state (the last one known while it cannot be read).
                let names: Vec<_> = touched.iter().filter_map(|t| rt.name(t.id)).collect();
                undo(rt, touched);
                rt.resync_each(&names);
                Err(failure.error)
            }
        };
        rt.objects.close();
        done
    }

    /// One input on a tracked object, decided now (as `Runtime::input`
    /// decides it, without writing).
    fn input<R>(
        &mut self,
        name: &str,
        f: impl FnOnce(&mut ObjectLifecycle, Now) -> Result<R, RuntimeError>,
    ) -> Result<R, RuntimeError> {
        self.rt.settle(name)?;
        let not_found = || RuntimeError::NotFound(name.to_owned());
        let id = self.rt.objects.id(name).ok_or_else(not_found)?;
        let first = !self.ids.contains(&id);
        if first {
            self.room()?;
        }
        let now = self.rt.clock.now();
        let (lifecycle, packed) = if first {
            let (lifecycle, packed) = self.rt.objects.open_keeping(id)?.ok_or_else(not_found)?;
            (lifecycle, Some(packed))
        } else {
            (self.rt.objects.open(id)?.ok_or_else(not_found)?, None)
        };
        let (answer, before) = inputs::decide(lifecycle, now, f)?;
        let Some(before) = before else {
            return Ok(answer);
        };
        let (from, to) = (before.phase(), lifecycle.phase());
        if first {
            self.ids.insert(id);
            self.touched.push(Touched {
                id,
                phases: vec![from],
                before: packed,
                status_before: None,
            });
        }
        if from != to
            && let Some(t) = self.touched.iter_mut().rev().find(|t| t.id == id)
        {
            t.phases.push(to);
        }
        Ok(answer)
    }

    /// Refuses an input on one more object if the batch is full.
    fn room(&self) -> Result<(), RuntimeError> {
        if self.is_full() {
            return Err(RuntimeError::BatchFull {
                objects: self.touched.len(),
            });
        }
        Ok(())
    }
}

impl<S: Store, C: Clock, A: Actuator> Drop for Batch<'_, S, C, A> {
    /// A batch not committed is undone.
    fn drop(&mut self) {
        let touched = std::mem::take(&mut self.touched);
        undo(self.rt, touched);
        self.rt.objects.close();
    }
}

/// One world event as an input of `batch`; an object no longer tracked is
/// no error (see [`Runtime::handle_world_event`]).
fn take_world_event<S: Store, C: Clock, A: Actuator>(
    batch: &mut Batch<'_, S, C, A>,
    event: &WorldEvent,
) -> Result<(), RuntimeError> {
    let object = &event.object;
    if let Some((container, code)) = event.exit() {
        let status = ContainerStatus::exited(code).finished_at(event.finished_at);
        batch.set_container_status(object, container, status)?;
    }
    match batch.handle(object, event.input.clone()) {
        Ok(_) | Err(RuntimeError::NotFound(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Reports each phase change of `t` (its inputs', then its actions'), after
/// the actions, as a round does.
fn report_phases<S: Store, C: Clock, A: Actuator>(
    rt: &mut Runtime<S, C, A>,
    now: Now,
    t: Touched,
    name: Option<&str>,
) {
    let Some(name) = name else {
        return;
    };
    let mut phases = t.phases;
    // (A forgotten object's id may be free: its entry, not the id, says.)
    if let Some(now_phase) = rt.objects.id(name).and_then(|id| rt.phase(id))
        && phases.last() != Some(&now_phase)
    {
        phases.push(now_phase);
    }
    for pair in phases.windows(2) {
        if let [from, to] = *pair {
            rt.emit(now, name, Change::Phase { from, to });
        }
    }
}

/// Puts every object `touched` back as it was before the batch.
fn undo<S: Store, C: Clock, A: Actuator>(rt: &mut Runtime<S, C, A>, touched: Vec<Touched>) {
    for t in touched {
        if let Some((status, started)) = t.status_before
            && let Some(entry) = rt.objects.get_mut(t.id)
        {
            entry.spec.status = status;
            entry.spec.started = started;
        }
        match t.before {
            Some(packed) => rt.objects.revert(t.id, packed),
            None => {
                rt.unschedule_id(t.id);
                rt.objects.remove(t.id);
            }
        }
    }
}
