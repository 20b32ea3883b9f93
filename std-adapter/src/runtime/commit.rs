//! The write-ahead: an object's lifecycle written before the actions it
//! owes and again after them, alone ([`Runtime::commit`]) or for a round
//! of objects with one store batch each way (group commit).

use grace_core::{Now, Phase};

use super::objects::Id;
use super::{Actuator, Change, ObjectLifecycle, ROUND, Runtime, RuntimeError, cannot_encode};
use crate::clock::Clock;
use crate::store::{BatchError, KillState, Revision, Store, StoredObject, Write};

/// Why a round's batch failed: `index` is set when one object's write was
/// refused (the rest could go through without it).
/// How an object's lifecycle goes to the store in a batch.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Written {
    /// A new object (a [`Batch`](super::Batch)'s create).
    Create,
    /// A stored object, at the revision the runtime last wrote.
    Update,
}

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
        if self.act(id, now, written)?.0 {
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
        let ids = round.iter().map(|&(id, _)| (id, Written::Update));
        let written = self.write_ahead(ids).map_err(|f| f.error)?;
        self.act_round(now, round, written)
    }

    /// Writes the lifecycles of `objects` (created or updated) with one
    /// batch and returns the kill state written for each (`None`: not
    /// written, its record is removed). Nothing is written if it fails;
    /// `index` then says whether one object was the cause.
    pub(super) fn write_ahead(
        &mut self,
        objects: impl ExactSizeIterator<Item = (Id, Written)> + Clone,
    ) -> Result<Vec<Option<KillState>>, RoundFailure> {
        let mut writes = self.take_writes(objects.len());
        let mut states = Vec::with_capacity(objects.len());
        for (id, how) in objects.clone() {
            match self.push_write(&mut writes, id, how, None) {
                Ok(state) => states.push(state),
                Err(error) => {
                    self.give_back(writes);
                    return Err(RoundFailure { index: None, error });
                }
            }
        }
        let written = objects.zip(&states).map(|((id, _), s)| (id, s.is_some()));
        self.send(&mut writes, written)?;
        Ok(states)
    }

    /// Adds the write of the object's lifecycle to `writes` (see
    /// [`record_write`](Self::record_write), which `reuse` is passed to)
    /// and returns the kill state it writes; `None` adds nothing: the
    /// record is removed.
    pub(super) fn push_write(
        &mut self,
        writes: &mut Vec<Write>,
        id: Id,
        how: Written,
        reuse: Option<StoredObject>,
    ) -> Result<Option<KillState>, RuntimeError> {
        let state = self.record_write(id, reuse, |name, object, expected| {
            let state = object.agent.clone();
            writes.push(match how {
                Written::Create => Write::Create { name, object },
                Written::Update => Write::Update {
                    name,
                    object,
                    expected,
                },
            });
            state
        })?;
        Ok(state.flatten())
    }

    /// Sends `writes` as one batch (they are the writes of the objects
    /// `written` marks, in order) and notes each object's new revision.
    pub(super) fn send(
        &mut self,
        writes: &mut Vec<Write>,
        written: impl Iterator<Item = (Id, bool)>,
    ) -> Result<(), RoundFailure> {
        let sent = self.batch(writes);
        self.give_back(std::mem::take(writes));
        let revisions = sent.map_err(|e| RoundFailure {
            index: e.index,
            error: e.error.into(),
        })?;
        let mut revisions = revisions.into_iter();
        for (id, _) in written.filter(|&(_, w)| w) {
            let Some(revision) = revisions.next() else {
                break;
            };
            self.stored(id, revision);
        }
        Ok(())
    }

    /// Writes the object's lifecycle (if its record is still stored);
    /// returns the kill state written.
    pub(super) fn persist(&mut self, id: Id) -> Result<Option<KillState>, RuntimeError> {
        let write = self.record_write(id, None, |name, object, expected| (name, object, expected));
        let Some((name, object, expected)) = write? else {
            return Ok(None);
        };
        let written = object.agent.clone();
        let revision = self.store.update(&name, object, expected)?;
        self.stored(id, revision);
        Ok(written)
    }

    /// Hands `sink` the name, object and expected revision of the write of
    /// the object's lifecycle and returns what it returns; `None` once its
    /// record is removed. `reuse` is the object as last written, to update
    /// rather than build anew. (A sink, not a return value: the object is
    /// more than a kilobyte, and a batch's writes are pushed where they are
    /// built rather than returned through each caller.)
    fn record_write<R>(
        &mut self,
        id: Id,
        reuse: Option<StoredObject>,
        sink: impl FnOnce(String, StoredObject, Revision) -> R,
    ) -> Result<Option<R>, RuntimeError> {
        let (codec, epoch) = (&mut self.codec, &self.epoch);
        let write = self.objects.read(id, |entry, lifecycle| {
            let Some(expected) = entry.revision else {
                return Ok(None);
            };
            let agent = codec
                .state(epoch, lifecycle)
                .map_err(|e| cannot_encode(&entry.name, e))?;
            let object = match reuse {
                Some(mut object) => {
                    object.record.clone_from(lifecycle.record());
                    object.agent = Some(agent);
                    object
                }
                None => entry.spec.object(lifecycle, Some(agent)),
            };
            Ok(Some(sink(entry.name.to_string(), object, expected)))
        })?;
        write.unwrap_or(Ok(None))
    }

    /// Notes that the object's lifecycle was written at `revision`.
    fn stored(&mut self, id: Id, revision: Revision) {
        if let Ok(Some(open)) = self.objects.opened(id) {
            open.lifecycle.stored_at(revision.get());
            *open.revision = Some(revision);
        }
    }

    /// How many objects one round holds: [`ROUND`], or fewer if one store
    /// batch cannot take that many writes.
    pub(super) fn round_size(&self) -> usize {
        ROUND.min(self.store.max_batch()).max(1)
    }

    /// One store batch of `writes`, which it leaves empty; an empty one is
    /// not sent.
    fn batch(&self, writes: &mut Vec<Write>) -> Result<Vec<Revision>, BatchError> {
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        let sent = self.store.batch_from(writes);
        writes.clear();
        sent
    }

    /// The vector to gather a batch of up to `n` writes in: the one kept
    /// from the last batch ([`give_back`](Self::give_back)), empty.
    pub(super) fn take_writes(&mut self, n: usize) -> Vec<Write> {
        let mut writes = std::mem::take(&mut self.writes);
        writes.clear();
        writes.reserve(n);
        writes
    }

    /// Keeps `writes`' capacity for the next batch.
    pub(super) fn give_back(&mut self, mut writes: Vec<Write>) {
        writes.clear();
        if writes.capacity() > self.writes.capacity() {
            self.writes = writes;
        }
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
