//! Carrying out what objects owe, after their write-ahead: the actuator's
//! actions and the runtime's own (the record's removal).

use std::sync::Arc;

use grace_core::Input;
use grace_core::{Action, Duration, Now, Phase, Stage};

use super::commit::Written;
use super::objects::Id;
use super::writes::Writes;
use super::{ActionError, Actuator, Change, OwedKill, Recovery, Runtime, RuntimeError};
use crate::clock::Clock;
use crate::store::{KillState, Revision, Store, StoreError, StorePreconditions, StoredObject};

/// The object an actuator is shown: the stored object as written before
/// the actions.
pub(super) enum Shown<'a> {
    /// As written in a batch: its slot.
    Written(&'a StoredObject),
    /// Built when first needed, with the kill state written (`None`: none
    /// was, the record is removed).
    Build(Option<KillState>),
}

impl<S: Store, C: Clock, A: Actuator> Runtime<S, C, A> {
    /// Carries out what each object of a round owes (after
    /// [`write_ahead`](Self::write_ahead) put its write in `slots`), writes
    /// the lifecycles that acted with one batch, in the same slots, then
    /// reports phase changes and reschedules.
    pub(super) fn act_round(
        &mut self,
        writes: &mut Writes,
        now: Now,
        round: Vec<(Id, Option<Phase>)>,
        slots: Vec<Option<usize>>,
    ) -> Result<(), RuntimeError> {
        let mut acted = Vec::with_capacity(round.len());
        // The first object whose actions failed (a removal the store
        // refused), and every such object.
        let mut refused = None;
        let mut refused_ids = Vec::new();
        // The batch after the actions, built as each object acts, in the
        // slots of the batch before them: an object's write goes into a
        // slot no later than its own, which held the write of an object
        // that has acted already (or its own). `(id, whether it has a write
        // in the batch)` of each object that acted; `late`, any that had no
        // slot (none: a record removed stays removed), written once all
        // have acted.
        writes.clear();
        let mut written = Vec::with_capacity(round.len());
        let mut late = Vec::new();
        // The first write that could not be built: nothing is sent.
        let mut unwritable = None;
        for (&(id, _), slot) in round.iter().zip(slots) {
            let shown = match slot.and_then(|i| writes.object(i)) {
                Some(object) => Shown::Written(object),
                None => Shown::Build(None),
            };
            match self.act(id, now, shown) {
                Ok(true) => {
                    acted.push(id);
                    if unwritable.is_some() {
                        // Nothing is sent: the rest only act.
                    } else if slot.is_none() {
                        late.push(id);
                    } else {
                        match self.push_write(writes, id, Written::Update) {
                            Ok(slot) => {
                                written.push((id, slot.is_some()));
                                self.close_written(id, slot);
                            }
                            Err(e) => unwritable = Some(e),
                        }
                    }
                }
                Ok(false) => {}
                // Its stored state still owes what failed: not written,
                // and read back after the batch, so that what the lifecycle
                // in memory took as done is owed again.
                Err(e) => {
                    refused.get_or_insert(e);
                    refused_ids.push(id);
                }
            }
        }
        for id in late {
            if unwritable.is_some() {
                break;
            }
            match self.push_write(writes, id, Written::Update) {
                Ok(slot) => written.push((id, slot.is_some())),
                Err(e) => unwritable = Some(e),
            }
        }
        // Deferred removals go last, after the writes `send` counts
        // revisions for; from here on removals are the store's at once.
        self.take_removals(writes);
        let after = match unwritable {
            Some(e) => Err(e),
            None => self
                .send(writes, written.iter().copied())
                .map_err(|f| f.error),
        }
        .and(refused.map_or(Ok(()), Err));
        // Named before rescheduling, which forgets finished objects.
        let unsure: Vec<Arc<str>> = match after {
            Ok(()) => Vec::new(),
            Err(_) => acted
                .iter()
                .copied()
                .chain(refused_ids)
                .filter_map(|id| self.name(id))
                .collect(),
        };
        for (id, from) in round {
            let to = self.phase(id);
            if let (Some(from), Some(to)) = (from, to)
                && from != to
                && let Some(name) = self.name(id)
            {
                self.emit(now, &name, Change::Phase { from, to });
            }
            self.reschedule_id(id);
        }
        // The batch may have been applied with its answer lost: take the
        // store's state, as `input` does after a failed write.
        self.resync_each(&unsure);
        after
    }

    /// Carries out every action the object owes, showing the actuator
    /// `shown`. Returns whether anything was done. A removal the store
    /// refuses is an error, returned before anything records it as done.
    pub(super) fn act(&mut self, id: Id, now: Now, shown: Shown<'_>) -> Result<bool, RuntimeError> {
        // Nothing owed (a packed lifecycle says so without being opened).
        if self.objects.summary(id).is_some_and(|s| !s.acts) {
            return Ok(false);
        }
        let mut acted = false;
        // Built once, when first needed (taking actions changes nothing it
        // shows).
        let mut built: Option<StoredObject> = None;
        // Stop signals that went out under this runtime, which the stored
        // state read back after a failed write may still owe.
        let sent_before = self.objects.signals_sent(id);
        while let Some(open) = self.objects.opened(id)? {
            let Some(action) = open.lifecycle.poll_action() else {
                break;
            };
            acted = true;
            let outcome = match action {
                Action::Remove { .. } => {
                    let name = Arc::clone(open.name);
                    let uid = open.lifecycle.record().uid.as_str().to_owned();
                    // A workload still stopping (a force delete) owes its
                    // SIGKILL after the record is gone: the actuator keeps
                    // it, before the record goes, for a later process.
                    for (c, container) in open.lifecycle.containers().iter().enumerate() {
                        if let Stage::Stopping { kill_at } = container.stage() {
                            let owed = OwedKill {
                                stop_signal_sent: None,
                                sigkill_at: Some(kill_at),
                            };
                            self.actuator.kill_owed(&name, c, owed);
                        }
                    }
                    if let Err(e) = self.remove_record(id, &name, uid) {
                        // Not recorded as done: the stored state still
                        // owes the removal (and what came before it).
                        self.emit(
                            now,
                            &name,
                            Change::ActionFailed(ActionError::new(&action, e.clone())),
                        );
                        return Err(e.into());
                    }
                    Ok(())
                }
                // Sent under this runtime, its record's write failed (the
                // state read back still owes it): not sent again, and R62
                // counts from when it went out.
                Action::SendStopSignal { container }
                    if let Some(&(_, sent)) = sent_before.iter().find(|(c, _)| *c == container) =>
                {
                    let wall = self.clock.now().wall;
                    let _ = open
                        .lifecycle
                        .handle(
                            Now::new(wall, sent),
                            Input::stop_signal_sent(usize::from(container)),
                        )
                        .container();
                    continue;
                }
                // Sent by an earlier process that crashed before the store
                // said so: not sent again, and its time is the one R62
                // counts from (D6: a restart never moves SIGKILL later).
                Action::SendStopSignal { container }
                    if self.recovery == Recovery::HonourOriginalDeadline
                        && let Some(sent) = self
                            .actuator
                            .stop_signal_sent_before(open.name, usize::from(container)) =>
                {
                    let wall = self.clock.now().wall;
                    let _ = open
                        .lifecycle
                        .handle(
                            Now::new(wall, sent),
                            Input::stop_signal_sent(usize::from(container)),
                        )
                        .container();
                    let uid = open.lifecycle.record().uid.as_str().to_owned();
                    self.objects.signal_sent(id, &uid, container, sent);
                    self.emit_id(now, id, Change::Action(action));
                    continue;
                }
                _ => {
                    let stored = match (&shown, &mut built) {
                        (Shown::Written(object), _) => *object,
                        (Shown::Build(_), Some(object)) => &*object,
                        (Shown::Build(state), built) => {
                            &*built.insert(open.spec.object(open.lifecycle, state.clone()))
                        }
                    };
                    self.actuator.perform(open.name, stored, &action)
                }
            };
            if let (Ok(()), Action::SendStopSignal { container }) = (&outcome, action) {
                self.stop_signal_sent(id, container)?;
            }
            let change = match outcome {
                Ok(()) => Change::Action(action),
                Err(e) => Change::ActionFailed(e),
            };
            self.emit_id(now, id, change);
        }
        Ok(acted)
    }

    /// The runtime's own action: removes the record of `uid` from the store
    /// (while a batch commits, with the batch after the actions). A record
    /// already gone counts as removed: removed before a crash, or by
    /// someone else (the name may even hold another object now).
    fn remove_record(&mut self, id: Id, name: &str, uid: String) -> Result<(), StoreError> {
        let preconditions = StorePreconditions {
            uid: Some(uid),
            revision: None,
        };
        let removed = match self.defer_removal(name, preconditions) {
            Some(preconditions) => self.store.delete(name, preconditions),
            None => Ok(Revision::ZERO),
        };
        match removed {
            Ok(_) | Err(StoreError::NotFound { .. } | StoreError::UidMismatch { .. }) => {
                if let Some(entry) = self.objects.get_mut(id) {
                    entry.revision = None;
                }
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Tells the object's lifecycle when its stop signal really went out.
    /// R62 counts from then, which may be well after the input (the
    /// write-ahead, a round's other actions): SIGKILL keeps its 2 s.
    fn stop_signal_sent(&mut self, id: Id, container: u8) -> Result<(), RuntimeError> {
        // The clock counts whole milliseconds, rounded down: one more is
        // never before the signal.
        let read = self.clock.now();
        let sent = Now::new(
            read.wall,
            read.mono.saturating_add(Duration::from_millis(1)),
        );
        if let Some(open) = self.objects.opened(id)? {
            let c = usize::from(container);
            let _ = open
                .lifecycle
                .handle(sent, Input::stop_signal_sent(c))
                .container();
            // Kept by the actuator too, at once: a crash before the next
            // write must not send it again, nor count R62 from a second one.
            let sigkill_at = match open.lifecycle.containers().get(c).map(|c| c.stage()) {
                Some(Stage::Stopping { kill_at }) => Some(kill_at),
                _ => None,
            };
            let owed = OwedKill {
                stop_signal_sent: Some(sent.mono),
                sigkill_at,
            };
            self.actuator.kill_owed(open.name, c, owed);
            let uid = open.lifecycle.record().uid.as_str().to_owned();
            self.objects.signal_sent(id, &uid, container, sent.mono);
        }
        Ok(())
    }
}
