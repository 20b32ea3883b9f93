//! Carrying out what objects owe, after their write-ahead: the actuator's
//! actions and the runtime's own (the record's removal).

use std::sync::Arc;

use grace_core::{Action, Duration, Now, Phase};

use super::commit::Written;
use super::objects::Id;
use super::{Actuator, Change, Runtime, RuntimeError};
use crate::clock::Clock;
use crate::store::{
    KillState, Revision, Store, StoreError, StorePreconditions, StoredObject, Write,
};

/// What the objects of a round did, for the batch after the actions.
struct Acted {
    /// `(id, whether it has a write in the batch)` of each object that acted.
    acted: Vec<(Id, bool)>,
    /// The batch after the actions, gathered as each object acts (the
    /// object shown to the actuator is updated into its write), so that no
    /// round's worth of shown objects is kept meanwhile.
    writes: Vec<Write>,
    /// The first write that could not be built: nothing is sent.
    unwritable: Option<RuntimeError>,
    /// The first object whose actions failed (a removal the store refused),
    /// and every such object.
    refused: Option<RuntimeError>,
    refused_ids: Vec<Id>,
}

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
        let Acted {
            acted,
            mut writes,
            unwritable,
            refused,
            refused_ids,
        } = self.act_each(now, &round, written);
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

    /// Each object of the round acts; the writes after its actions are
    /// gathered.
    fn act_each(
        &mut self,
        now: Now,
        round: &[(Id, Option<Phase>)],
        written: Vec<Option<KillState>>,
    ) -> Acted {
        let mut round_acted = Acted {
            acted: Vec::with_capacity(round.len()),
            writes: self.take_writes(round.len()),
            unwritable: None,
            refused: None,
            refused_ids: Vec::new(),
        };
        let Acted {
            acted,
            writes,
            unwritable,
            refused,
            refused_ids,
        } = &mut round_acted;
        for (&(id, _), written) in round.iter().zip(written) {
            match self.act(id, now, written) {
                Ok((true, shown)) => {
                    let state = match unwritable {
                        // Nothing is sent: the rest only act.
                        Some(_) => None,
                        None => match self.push_write(writes, id, Written::Update, shown) {
                            Ok(state) => state,
                            Err(e) => {
                                *unwritable = Some(e);
                                None
                            }
                        },
                    };
                    acted.push((id, state.is_some()));
                }
                Ok((false, _)) => {}
                // Its stored state still owes what failed: not written,
                // and read back after the batch, so that what the lifecycle
                // in memory took as done is owed again.
                Err(e) => {
                    refused.get_or_insert(e);
                    refused_ids.push(id);
                }
            }
        }
        round_acted
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
                    let uid = open.lifecycle.record().uid.as_str().to_owned();
                    if let Err(e) = self.remove_record(id, &name, uid) {
                        // Not recorded as done: the stored state still
                        // owes the removal (and what came before it).
                        self.emit(now, &name, Change::ActionFailed(action, e.to_string()));
                        return Err(e.into());
                    }
                    Ok(())
                }
                _ => {
                    let stored = match &mut shown {
                        Some(object) => object,
                        None => shown.insert(open.spec.object(open.lifecycle, written.clone())),
                    };
                    self.actuator.perform(&name, stored, &action)
                }
            };
            if let (Ok(()), Action::SendStopSignal { container }) = (&outcome, action) {
                self.stop_signal_sent(id, container)?;
            }
            match outcome {
                Ok(()) => self.emit(now, &name, Change::Action(action)),
                Err(e) => self.emit(now, &name, Change::ActionFailed(action, e.reason())),
            }
        }
        Ok((acted, shown))
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
            let _ = open
                .lifecycle
                .handle_stop_signal_sent(sent, usize::from(container));
        }
        Ok(())
    }
}
