//! The write-ahead: an object's lifecycle written before the actions it
//! owes and again after them, alone ([`Runtime::commit`]) or for a round
//! of objects with one store batch each way (group commit).

use std::sync::Arc;

use grace_core::{Now, Phase};

use super::act::Shown;
use super::objects::Id;
use super::writes::Writes;
use super::{Actuator, Change, ObjectLifecycle, ROUND, Runtime, RuntimeError, cannot_encode};
use crate::clock::Clock;
use crate::store::{KillState, Revision, Store, Write};

/// How an object's lifecycle goes to the store in a batch.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Written {
    /// A new object (a [`Batch`](super::Batch)'s create).
    Create,
    /// A stored object, at the revision the runtime last wrote.
    Update,
}

/// Why a round's batch failed: `index` is set when one object's write was
/// refused (the rest could go through without it).
pub(super) struct RoundFailure {
    pub(super) index: Option<usize>,
    pub(super) error: RuntimeError,
}

impl<S: Store, C: Clock, A: Actuator> Runtime<S, C, A> {
    /// Write-ahead for one object: persist, act, persist again.
    pub(super) fn commit(
        &mut self,
        name: &str,
        now: Now,
        from: Option<Phase>,
    ) -> Result<(), RuntimeError> {
        let Some(id) = self.objects.id(name) else {
            return Ok(());
        };
        let written = self.persist(id)?;
        let to = self.phase(id);
        if self.act(id, now, Shown::Build(written))? {
            self.persist(id)?;
        }
        // Reported after the actions it follows from (the removal, say).
        if let (Some(from), Some(to)) = (from, to)
            && from != to
        {
            self.emit(now, name, Change::Phase { from, to });
        }
        self.reschedule_id(id);
        Ok(())
    }

    /// Write-ahead for many objects (`(id, phase before the input)`): one
    /// batch before any action, the actions, one batch after.
    pub(super) fn commit_round(
        &mut self,
        now: Now,
        round: Vec<(Id, Option<Phase>)>,
    ) -> Result<(), RuntimeError> {
        self.with_writes(|rt, writes| {
            let ids = round.iter().map(|&(id, _)| (id, Written::Update));
            let slots = rt.write_ahead(writes, ids).map_err(|f| f.error)?;
            rt.act_round(writes, now, round, slots)
        })
    }

    /// Runs `f` with the write slots ([`Writes`]), taken out of the
    /// runtime meanwhile: the objects shown to the actuator are borrowed
    /// from them while the runtime acts.
    pub(super) fn with_writes<R>(&mut self, f: impl FnOnce(&mut Self, &mut Writes) -> R) -> R {
        let mut writes = std::mem::take(&mut self.writes);
        writes.clear();
        let done = f(self, &mut writes);
        self.writes = writes;
        done
    }

    /// Writes the lifecycles of `objects` (created or updated) with one
    /// batch built in `writes`, and returns the slot of each one's write
    /// (`None`: not written, its record is removed). Nothing is written if
    /// it fails; `index` then says whether one object was the cause.
    pub(super) fn write_ahead(
        &mut self,
        writes: &mut Writes,
        objects: impl ExactSizeIterator<Item = (Id, Written)> + Clone,
    ) -> Result<Vec<Option<usize>>, RoundFailure> {
        writes.clear();
        let mut slots = Vec::with_capacity(objects.len());
        for (id, how) in objects.clone() {
            match self.push_write(writes, id, how) {
                Ok(slot) => slots.push(slot),
                Err(error) => return Err(RoundFailure { index: None, error }),
            }
        }
        let written = objects.zip(&slots).map(|((id, _), s)| (id, s.is_some()));
        self.send(writes, written)?;
        Ok(slots)
    }

    /// Adds the write of the object's lifecycle to `writes`, filled in
    /// place in the next slot, and returns that slot; `None` adds nothing:
    /// the record is removed.
    pub(super) fn push_write(
        &mut self,
        writes: &mut Writes,
        id: Id,
        how: Written,
    ) -> Result<Option<usize>, RuntimeError> {
        let (codec, epoch) = (&mut self.codec, &self.epoch);
        let pushed = self.objects.read(id, |entry, lifecycle| {
            let Some(expected) = entry.revision else {
                return Ok(None);
            };
            let slot = writes.len();
            let failed = |e| cannot_encode(&entry.name, e);
            if let Some(object) = writes.next(&entry.name, how, expected) {
                entry.spec.fill(lifecycle, object);
                codec
                    .state_into(epoch, lifecycle, &mut object.agent)
                    .map_err(failed)?;
            } else {
                let agent = codec.state(epoch, lifecycle).map_err(failed)?;
                let (name, object) = (
                    entry.name.to_string(),
                    entry.spec.object(lifecycle, Some(agent)),
                );
                writes.push(match how {
                    Written::Create => Write::Create { name, object },
                    Written::Update => Write::Update {
                        name,
                        object,
                        expected,
                    },
                });
            }
            Ok(Some(slot))
        })?;
        pushed.unwrap_or(Ok(None))
    }

    /// Packs the object's lifecycle once [`push_write`](Self::push_write)
    /// has built its write (in `slot`, if it was written): as the kill state
    /// just encoded says, without encoding it again.
    pub(super) fn close_written(&mut self, id: Id, slot: Option<usize>) {
        let packed = slot.map(|_| self.codec.last_packed());
        self.objects.close_one(id, packed);
    }

    /// Sends the batch in `writes` (the writes of the objects `written`
    /// marks, in order, then any removals) and notes each object's new
    /// revision, in its lifecycle and in its slot.
    pub(super) fn send(
        &mut self,
        writes: &mut Writes,
        written: impl Iterator<Item = (Id, bool)>,
    ) -> Result<(), RoundFailure> {
        let sent = match writes.batch() {
            [] => Ok(Vec::new()),
            batch => self.store.batch_ref(batch),
        };
        let revisions = sent.map_err(|e| RoundFailure {
            index: e.index,
            error: e.error.into(),
        })?;
        let mut revisions = revisions.into_iter().enumerate();
        for (id, _) in written.filter(|&(_, w)| w) {
            let Some((slot, revision)) = revisions.next() else {
                break;
            };
            self.stored(id, revision);
            writes.stored(slot, revision);
        }
        Ok(())
    }

    /// Writes the object's lifecycle (if its record is still stored);
    /// returns the kill state written.
    pub(super) fn persist(&mut self, id: Id) -> Result<Option<KillState>, RuntimeError> {
        let (codec, epoch) = (&mut self.codec, &self.epoch);
        let write = self
            .objects
            .read(id, |entry, lifecycle| -> Result<_, RuntimeError> {
                let Some(expected) = entry.revision else {
                    return Ok(None);
                };
                let agent = codec
                    .state(epoch, lifecycle)
                    .map_err(|e| cannot_encode(&entry.name, e))?;
                let object = entry.spec.object(lifecycle, Some(agent));
                Ok(Some((Arc::clone(&entry.name), object, expected)))
            })?;
        let Some((name, object, expected)) = write.unwrap_or(Ok(None))? else {
            return Ok(None);
        };
        let written = object.agent.clone();
        let revision = self.store.update(&name, object, expected)?;
        self.stored(id, revision);
        Ok(written)
    }

    /// Notes that the object's lifecycle was written at `revision`.
    fn stored(&mut self, id: Id, revision: Revision) {
        self.objects.stored(id, revision);
    }

    /// How many objects one round holds: [`ROUND`], or fewer if one store
    /// batch cannot take that many writes.
    pub(super) fn round_size(&self) -> usize {
        ROUND.min(self.store.max_batch()).max(1)
    }

    pub(super) fn agent_record(
        &mut self,
        lifecycle: &ObjectLifecycle,
    ) -> Result<KillState, RuntimeError> {
        self.codec
            .state(&self.epoch, lifecycle)
            .map_err(|e| cannot_encode(lifecycle.record().uid.as_str(), e))
    }
}
