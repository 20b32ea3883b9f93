//! After a write whose outcome is unknown: reading the object back and
//! taking what the store holds, or leaving it to be read back later.

use std::sync::Arc;

use super::stored::Spec;
use super::{Actuator, Change, RETRY, Recovery, Runtime, RuntimeError, store_down};
use crate::clock::Clock;
use crate::store::Store;

impl<S: Store, C: Clock, A: Actuator> Runtime<S, C, A> {
    /// Reads `name` back first if its stored state is unknown (before an
    /// input on it).
    pub(super) fn settle(&mut self, name: &str) -> Result<(), RuntimeError> {
        if self.unsure.contains(name) {
            self.resync(name)?;
        }
        Ok(())
    }

    /// Reads `name` back from the store after a write whose outcome is
    /// unknown, and takes what is stored as the object's state (as a
    /// restart does, but keeping every deadline), then carries out what
    /// that state owes. If this fails too, the name is read back before its
    /// next use, or by `handle_timeouts` after [`RETRY`].
    pub(super) fn resync(&mut self, name: &str) -> Result<(), RuntimeError> {
        let result = self.read_back(name);
        if result.is_err() {
            self.mark_unsure(name);
        }
        result
    }

    /// [`resync`](Self::resync) for each of `names`, until the store does
    /// not answer: it would not answer for the rest either (and on etcd
    /// each request waits out a timeout), so they are left to the next
    /// retry unasked.
    pub(super) fn resync_each(&mut self, names: &[Arc<str>]) {
        let mut names = names.iter();
        for name in names.by_ref() {
            if self.resync(name).is_err_and(|e| store_down(&e)) {
                break;
            }
        }
        for name in names {
            self.mark_unsure(name);
        }
    }

    /// Leaves `name` to be read back before its next use, or by
    /// `handle_timeouts` after [`RETRY`].
    fn mark_unsure(&mut self, name: &str) {
        self.unsure.insert(name.to_owned());
        self.unschedule(name);
        let retry = self.clock.now().mono.saturating_add(RETRY);
        self.retry_at = Some(self.retry_at.map_or(retry, |t| t.min(retry)));
    }

    fn read_back(&mut self, name: &str) -> Result<(), RuntimeError> {
        let now = self.clock.now();
        let stored = self.store.get(name)?;
        self.unsure.remove(name);
        let Some((object, revision)) = stored else {
            // Not stored: the create was not applied, or the removal was.
            if let Some(entry) = self.objects.named_mut(name) {
                entry.revision = None;
            }
            self.reschedule(name);
            return Ok(());
        };
        let (lifecycle, _) =
            self.restore(&object, revision, now, Recovery::HonourOriginalDeadline)?;
        self.unschedule(name);
        self.objects
            .insert(name, lifecycle, Spec::of(object), Some(revision));
        self.emit(now, name, Change::Recovered { reset: false });
        self.commit(name, now, None)
    }
}
