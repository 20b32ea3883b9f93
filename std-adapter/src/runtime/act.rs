//! Carrying out what objects owe, after their write-ahead: the actuator's
//! actions and the runtime's own (the record's removal).

use std::sync::Arc;

use grace_core::{Action, Duration, Now, Phase};

use super::commit::Written;
use super::objects::Id;
use super::{Actuator, Change, Runtime, RuntimeError};
use crate::clock::Clock;
use crate::store::{KillState, Revision, Store, StoreError, StorePreconditions, StoredObject};

impl<S: Store, C: Clock, A: Actuator> Runtime<S, C, A> {
    /// Carries out what each object of a round owes (after
    /// [`write_ahead`](Self::write_ahead)), writes the lifecycles that
    /// acted with one batch, then reports phase changes and reschedules.
    pub(super) fn act_round(
        &mut self,
        now: Now,
        round: Vec<(Id, Option<Phase>)>,
        written: Vec<Option<KillState>>,
    ) -> Result<(), RuntimeError> {
        // `(id, whether it has a write in the batch)`.
        let mut acted = Vec::with_capacity(round.len());
        // The batch after the actions, gathered as each object acts (the
        // object shown to the actuator is updated into its write), so that
        // no round's worth of shown objects is kept meanwhile.
        let mut writes = self.take_writes(round.len());
        let mut unwritable = None;
        let mut refused = None;
        let mut refused_ids = Vec::new();
        for (&(id, _), written) in round.iter().zip(written) {
            match self.act(id, now, written) {
                Ok((true, shown)) => {
                    let state = match unwritable {
                        // Nothing is sent: the rest only act.
                        Some(_) => None,
                        None => match self.push_write(&mut writes, id, Written::Update, shown) {
                            Ok(state) => state,
                            Err(e) => {
                                unwritable = Some(e);
                                None
                            }
                        },
                    };
                    acted.push((id, state.is_some()));
                }
                Ok((false, _)) => {}
                // Its stored state still owes what failed: not written,
                // and read back below, so that what the lifecycle in memory
                // took as done is owed again.
                Err(e) => {
                    refused.get_or_insert(e);
                    refused_ids.push(id);
                }
            }
        }
        // Deferred removals go last, after the writes `send` counts
        // revisions for; from here on removals are the store's at once.
        self.take_removals(&mut writes);
        let after = match unwritable {
            Some(e) => {
                self.give_back(writes);
                Err(e)
            }
            None => self
                .send(&mut writes, acted.iter().copied())
                .map_err(|f| f.error),
        }
        .and(refused.map_or(Ok(()), Err));
        // Named before rescheduling, which forgets finished objects.
        let unsure: Vec<Arc<str>> = match after {
            Ok(()) => Vec::new(),
            Err(_) => acted
                .iter()
                .map(|&(id, _)| id)
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

    /// Carries out every action the object owes; `written` is the kill
    /// state just persisted, for the object shown to the actuator. Returns
    /// whether anything was done, and the object shown (if one was). A
    /// removal the store refuses is an error, returned before anything
    /// records it as done.
    pub(super) fn act(
        &mut self,
        id: Id,
        now: Now,
        written: Option<KillState>,
    ) -> Result<(bool, Option<StoredObject>), RuntimeError> {
        let mut acted = false;
        // The object as written, for the actuator; built once, when first
        // needed (taking actions changes nothing it shows).
        let mut shown: Option<StoredObject> = None;
        while let Some(open) = self.objects.opened(id)? {
            let Some(action) = open.lifecycle.poll_action() else {
                break;
            };
            acted = true;
            let name = Arc::clone(open.name);
            let outcome = match action {
                Action::Remove { .. } => {
                    let preconditions = StorePreconditions {
                        uid: Some(open.lifecycle.record().uid.as_str().to_owned()),
                        revision: None,
                    };
                    let removed = match self.defer_removal(&name, preconditions) {
                        Some(preconditions) => self.store.delete(&name, preconditions),
                        None => Ok(Revision::ZERO),
                    };
                    match removed {
                        // Done before a crash, or by someone else (the name
                        // may even hold another object now): the same end.
                        Ok(_)
                        | Err(StoreError::NotFound { .. } | StoreError::UidMismatch { .. }) => {
                            if let Some(entry) = self.objects.get_mut(id) {
                                entry.revision = None;
                            }
                            Ok(())
                        }
                        Err(e) => {
                            // Not recorded as done: the stored state still
                            // owes the removal (and what came before it).
                            self.emit(now, &name, Change::ActionFailed(action, e.to_string()));
                            return Err(e.into());
                        }
                    }
                }
                _ => {
                    let stored = match &mut shown {
                        Some(object) => object,
                        None => shown.insert(open.spec.object(open.lifecycle, written.clone())),
                    };
                    self.actuator.perform(&name, stored, &action)
                }
            };
            // R62 counts from when the stop signal really went out, which
            // may be well after `now` (the write-ahead, a round's other
            // actions): the core hears when, and SIGKILL keeps its 2 s.
            if let (Ok(()), Action::SendStopSignal { container }) = (&outcome, action) {
                // The clock counts whole milliseconds, rounded down: one
                // more is never before the signal.
                let read = self.clock.now();
                let sent = Now::new(
                    read.wall,
                    read.mono.saturating_add(Duration::from_millis(1)),
                );
                if let Some(open) = self.objects.opened(id)? {
                    let _ = open
                        .lifecycle
                        .handle_stop_signal_sent(sent, usize::from(container));
                }
            }
            match outcome {
                Ok(()) => self.emit(now, &name, Change::Action(action)),
                Err(e) => self.emit(now, &name, Change::ActionFailed(action, e.reason())),
            }
        }
        Ok((acted, shown))
    }
}
