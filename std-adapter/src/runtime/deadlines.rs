//! The deadline queue: when the runtime is next due
//! ([`Runtime::poll_timeout`]), and the objects whose deadline has passed,
//! handled in group-committed rounds ([`Runtime::handle_timeouts`]).

use std::sync::Arc;

use grace_core::{Action, Input, Instant, Now};

use super::commit::{RoundFailure, Written};
use super::objects::Id;
use super::{Actuator, Change, Runtime, RuntimeError, store_down};
use crate::clock::Clock;
use crate::store::Store;

impl<S: Store, C: Clock, A: Actuator> Runtime<S, C, A> {
    /// When [`handle_timeouts`](Self::handle_timeouts) next has something
    /// to do, on the clock's monotonic time; `None` while nothing waits on
    /// a clock. What comes due then is the earliest of: a container's
    /// stage ending (a pre-stop hook's budget spent, then its stop signal,
    /// R60; a sidecar's wait over, then its stop signal, R70; the grace
    /// spent, then SIGKILL, R63), each as the core's
    /// [`Lifecycle::poll_due`](grace_core::Lifecycle::poll_due) says; or the
    /// next attempt to read back objects whose write had an unknown outcome
    /// while the store did not answer.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let next = self.deadlines.first().map(|&(t, _)| t);
        match (next, self.retry_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Handles every object whose deadline has passed, earliest first.
    ///
    /// Group commit: the objects due together are handled in rounds of up
    /// to [`ROUND`](super::ROUND). A round's write-ahead records are written with one
    /// [`Store::batch`] (one fsync on [`RedbStore`](crate::store::RedbStore))
    /// before any of its actions is carried out; the records after the
    /// actions are written with a second batch. If the first batch is
    /// refused because of one object (a conflict, say), the round is undone
    /// and handled one object at a time, so that object holds back no other.
    ///
    /// Objects whose stored state is unknown are read back first when their
    /// retry ([`RETRY`](super::RETRY)) is due; if the store does not answer one of them,
    /// this call stops there and asks it nothing more. A failed round stops
    /// this call (its objects stay due, or are read back later) and its
    /// first error is returned.
    pub fn handle_timeouts(&mut self) -> Result<(), RuntimeError> {
        let now = self.clock.now();
        let mut failed = None;
        if self.retry_at.is_some_and(|t| t <= now.mono) {
            self.retry_at = None;
            let names: Vec<String> = self.unsure.iter().cloned().collect();
            for name in names {
                match self.resync(&name) {
                    // A store that does not answer would not answer for
                    // the others or take a round's batch either (and on
                    // etcd each request waits out a timeout): the rest
                    // waits for the next retry.
                    Err(e) if store_down(&e) => {
                        self.objects.close();
                        let mut ids: Vec<Id> = self
                            .unsure
                            .iter()
                            .filter_map(|n| self.objects.id(n))
                            .collect();
                        ids.extend(self.deadlines.iter().map(|&(_, id)| id));
                        self.kill_unwritten(now, &ids);
                        return Err(e);
                    }
                    Err(e) => {
                        failed.get_or_insert(e);
                    }
                    Ok(()) => {}
                }
            }
            self.objects.close();
        }
        loop {
            let Some(first) = self.deadlines.first().copied() else {
                return failed.map_or(Ok(()), Err);
            };
            if first.0 > now.mono {
                return failed.map_or(Ok(()), Err);
            }
            // Taken out of the queue (cheaper than finding each one again
            // to reschedule it); every one is queued again as it is handled,
            // or put back if the round fails.
            let size = self.round_size();
            let mut due = Vec::with_capacity(size.min(self.deadlines.len()));
            while due.len() < size {
                match self.deadlines.first() {
                    Some(&(t, id)) if t <= now.mono => {
                        self.deadlines.pop_first();
                        if let Some(entry) = self.objects.get_mut(id) {
                            entry.deadline = None;
                        }
                        due.push(id);
                    }
                    _ => break,
                }
            }
            let done = self.timeout_round(now, due);
            self.objects.close();
            if let Err(e) = done {
                return Err(failed.unwrap_or(e));
            }
            // A lifecycle always moves a handled deadline past now; if one
            // did not, stop rather than spin.
            if self.deadlines.first() == Some(&first) {
                return failed.map_or(Ok(()), Err);
            }
        }
    }

    /// One round of [`handle_timeouts`](Self::handle_timeouts).
    fn timeout_round(&mut self, now: Now, due: Vec<Id>) -> Result<(), RuntimeError> {
        // What the lifecycles were before the round: to go back to.
        let mut befores = Vec::with_capacity(due.len());
        let mut round = Vec::with_capacity(due.len());
        let failed = |error| RoundFailure { index: None, error };
        let ahead = self.with_writes(|rt, writes| -> Result<_, RoundFailure> {
            let mut slots = Vec::with_capacity(due.len());
            for &id in &due {
                let Some((lifecycle, before)) = rt.objects.open_keeping(id).map_err(failed)? else {
                    continue;
                };
                // Only a deadline that has passed changes a lifecycle (an
                // early call is a no-op), and handling one always moves it
                // on: the deadline says whether anything changed, without a
                // copy of the whole lifecycle to compare with.
                if lifecycle.poll_timeout().is_none_or(|t| t > now.mono) {
                    rt.objects.revert(id, before);
                    rt.reschedule_id(id);
                    continue;
                }
                let from = lifecycle.phase();
                let _ = lifecycle.handle(now, Input::Timeout);
                round.push((id, Some(from)));
                befores.push(before);
                slots.push(rt.push_write(writes, id, Written::Update).map_err(failed)?);
            }
            let written = round
                .iter()
                .zip(&slots)
                .map(|(&(id, _), s)| (id, s.is_some()));
            rt.send(writes, written)?;
            // Written: nothing goes back to them. Freed now, their memory
            // serves the lifecycles packed as the round acts.
            befores.clear();
            Ok(rt.act_round(writes, now, std::mem::take(&mut round), slots))
        });
        match ahead {
            Ok(done) => done,
            Err(failure) => {
                // Refused, or applied with its answer lost: take the
                // store's state (the last one known while it cannot be read).
                let one_object = failure.index.is_some();
                let mut names = Vec::with_capacity(round.len());
                for (&(id, _), before) in round.iter().zip(befores) {
                    let name = self.objects.get(id).map(|e| Arc::clone(&e.name));
                    self.objects.revert(id, before);
                    names.extend(name);
                }
                // Every object taken out of the queue goes back as it was
                // (the ones read back below are queued as the store says).
                for &id in &due {
                    self.reschedule_id(id);
                }
                if store_down(&failure.error) {
                    self.kill_unwritten(now, &due);
                }
                self.resync_each(&names);
                if !one_object || round.len() < 2 {
                    return Err(failure.error);
                }
                let mut first_error = None;
                for name in names {
                    let handled = self.input(&name, |l, now| {
                        let _ = l.handle(now, Input::Timeout);
                        Ok(())
                    });
                    if let Err(e) = handled {
                        first_error.get_or_insert(e);
                    }
                }
                first_error.map_or(Ok(()), Err)
            }
        }
    }

    /// While the store takes no write: the SIGKILLs due among `ids` go out
    /// all the same, each once, though their write-ahead could not be
    /// written (R63: the grace is spent, whatever the store). It is safe
    /// without the record: the deadline comes from the state the store
    /// holds, or from the stop signal's real time where that is later, so
    /// it is never early; a container whose stop signal has not gone out
    /// is not killed; and the write that records it later sends it again,
    /// which changes nothing (actions are idempotent). Without this a
    /// workload that keeps the disk full (its own output) would keep its
    /// SIGKILL from ever being written, and so from ever being sent.
    fn kill_unwritten(&mut self, now: Now, ids: &[Id]) {
        for &id in ids {
            let due = self
                .objects
                .summary(id)
                .and_then(|s| s.next)
                .is_some_and(|t| t <= now.mono);
            if !due {
                continue;
            }
            let sent = self.objects.signals_sent(id);
            let Ok(Some(open)) = self.objects.opened(id) else {
                continue;
            };
            // What the stored state does at `now`, on a copy: nothing of it
            // is kept but the kills.
            let mut next = open.lifecycle.clone();
            for &(c, at) in &sent {
                let _ = next
                    .handle(
                        Now::new(now.wall, at),
                        Input::stop_signal_sent(usize::from(c)),
                    )
                    .container();
            }
            let _ = next.handle(now, Input::Timeout);
            let mut not_signalled = Vec::new();
            let mut kills = Vec::new();
            while let Some(action) = next.poll_action() {
                match action {
                    Action::SendStopSignal { container }
                        if !sent.iter().any(|&(c, _)| c == container) =>
                    {
                        not_signalled.push(container);
                    }
                    Action::SendKill { container } if !not_signalled.contains(&container) => {
                        kills.push(container);
                    }
                    _ => {}
                }
            }
            if kills.is_empty() {
                continue;
            }
            let stored = open.spec.object(open.lifecycle, None);
            let name = Arc::clone(open.name);
            let uid = open.lifecycle.record().uid.as_str().to_owned();
            for container in kills {
                if !self.objects.killed_unwritten(id, &uid, container) {
                    continue;
                }
                let action = Action::SendKill { container };
                let change = match self.actuator.perform(&name, &stored, &action) {
                    Ok(()) => Change::Action(action),
                    Err(e) => Change::ActionFailed(e),
                };
                self.emit_id(now, id, change);
            }
        }
        self.objects.close();
    }

    /// Takes the object's deadline out of the queue.
    pub(super) fn unschedule(&mut self, name: &str) {
        if let Some(id) = self.objects.id(name) {
            self.unschedule_id(id);
        }
    }

    pub(super) fn unschedule_id(&mut self, id: Id) {
        if let Some(old) = self.objects.get_mut(id).and_then(|e| e.deadline.take()) {
            self.deadlines.remove(&(old, id));
        }
    }

    /// Forgets `name` once its record is removed, if nothing more is owed
    /// for it (no deadline, no action, its stored state known) — for an
    /// object whose containers never ran under this runtime (not
    /// scheduled, or bound to another node): the runtime would otherwise
    /// track it, its name taken for [`create`](Self::create), until its
    /// containers were reported stopped, which nobody here will report.
    /// The caller knows that none of its processes runs here. Returns
    /// whether it was forgotten.
    pub fn forget_removed(&mut self, name: &str) -> bool {
        let Some(id) = self.objects.id(name) else {
            return false;
        };
        let removed = self.objects.get(id).is_some_and(|e| e.revision.is_none());
        let idle = self
            .objects
            .summary(id)
            .is_some_and(|s| s.next.is_none() && !s.acts);
        if !removed || !idle || self.unsure.contains(name) {
            return false;
        }
        self.unschedule_id(id);
        self.objects.remove(id);
        true
    }

    /// Brings the deadline queue up to date; forgets a finished object.
    pub(super) fn reschedule(&mut self, name: &str) {
        if let Some(id) = self.objects.id(name) {
            self.reschedule_id(id);
        }
    }

    pub(super) fn reschedule_id(&mut self, id: Id) {
        self.unschedule_id(id);
        let (Some(summary), Some(entry)) = (self.objects.summary(id), self.objects.get(id)) else {
            return;
        };
        let next = summary.next;
        let finished = entry.revision.is_none() && next.is_none() && summary.stopped;
        if finished {
            self.objects.remove(id);
            return;
        }
        if let Some(entry) = self.objects.get_mut(id) {
            entry.deadline = next;
        }
        if let Some(t) = next {
            self.deadlines.insert((t, id));
        }
    }
}
