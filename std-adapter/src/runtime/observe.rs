//! Taking what another process wrote in a shared store
//! ([`Runtime::observe`]).

use grace_core::OtherObject;

use super::stored::Spec;
use super::{Actuator, Change, Recovery, Runtime, RuntimeError};
use crate::clock::Clock;
use crate::store::Store;

/// What [`Runtime::observe`] found in the store.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Observed {
    /// Nothing newer than the runtime's own last write.
    Unchanged,
    /// A tracked object was changed or removed by another process; its
    /// lifecycle took the change.
    Changed,
    /// An object the runtime did not track: it tracks it now (its
    /// containers, if any, are for the caller to start).
    New,
    /// The name now holds another object (a new uid): the old one was
    /// handled as removed and is still being stopped; observe the name
    /// again once the runtime no longer tracks it to take the new one.
    Replaced,
}

impl<S: Store, C: Clock, A: Actuator> Runtime<S, C, A> {
    /// Takes what another process wrote for `name` in a shared store: a
    /// request decided by another API server, a removal, a new object.
    /// Reads the object; if it is newer than the runtime's own last write,
    /// the object's lifecycle takes it
    /// ([`Lifecycle::observe_record`](grace_core::Lifecycle::observe_record))
    /// or a new object is tracked, and what that owes is carried out,
    /// written ahead as always. Callers follow the store's watch and call
    /// this for every name a change event names.
    pub fn observe(&mut self, name: &str) -> Result<Observed, RuntimeError> {
        let done = self.observe_open(name);
        self.objects.close();
        done
    }

    fn observe_open(&mut self, name: &str) -> Result<Observed, RuntimeError> {
        if self.unsure.contains(name) {
            self.resync(name)?;
            return Ok(Observed::Changed);
        }
        let now = self.clock.now();
        let stored = self.store.get(name)?;
        let Some(id) = self.objects.id(name) else {
            let Some((object, revision)) = stored else {
                return Ok(Observed::Unchanged);
            };
            let (lifecycle, _) =
                self.restore(&object, revision, now, Recovery::HonourOriginalDeadline)?;
            self.objects
                .insert(name, lifecycle, Spec::of(object), Some(revision));
            self.emit(now, name, Change::Observed);
            self.commit(name, now, None)?;
            return Ok(Observed::New);
        };
        let Some(entry) = self.objects.opened(id)? else {
            return Ok(Observed::Unchanged);
        };
        let from = entry.lifecycle.phase();
        let observed = match &stored {
            None if entry.revision.is_none() => return Ok(Observed::Unchanged),
            Some((_, revision)) if entry.revision.is_some_and(|r| r >= *revision) => {
                return Ok(Observed::Unchanged);
            }
            None => {
                *entry.revision = None;
                let _ = entry.lifecycle.observe_record(now, None);
                Observed::Changed
            }
            Some((object, revision)) => {
                match entry.lifecycle.observe_record(now, Some(&object.record)) {
                    Ok(_) => {
                        entry.lifecycle.set_resource_version(revision.get());
                        *entry.revision = Some(*revision);
                        Observed::Changed
                    }
                    Err(OtherObject) => {
                        // The old object is gone from the store; its
                        // workload is stopped before the new one is taken.
                        *entry.revision = None;
                        let _ = entry.lifecycle.observe_record(now, None);
                        Observed::Replaced
                    }
                }
            }
        };
        // Owner references may change under the agent (the garbage
        // collector drops those of an orphaning owner): taken, so that
        // its next write of the object does not put them back.
        if observed == Observed::Changed
            && let Some((object, _)) = &stored
            && let Some(entry) = self.objects.named_mut(name)
            && entry.spec.owners != object.owners
        {
            entry.spec.owners.clone_from(&object.owners);
            if !object.owners.is_empty() {
                self.objects.saw_owners();
            }
        }
        self.emit(now, name, Change::Observed);
        self.commit(name, now, Some(from))?;
        Ok(observed)
    }
}
