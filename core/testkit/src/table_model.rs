//! A `Table` restated as plainly as possible: a list of lifecycles in
//! insertion order and a list of the ids that owe actions, in the order
//! they came to owe them. Every query is a linear scan; nothing is cached.
//! The `table` property test and the `table` fuzz target drive a real
//! `Table` and this model with the same inputs and compare every answer.

use grace_core::Input;
use grace_core::{Action, Id, Instant, Lifecycle, Now};

/// How many due objects one [`TableModel::handle_timeouts`] handles before
/// it gives up: far more than any test puts in a table, so reaching it
/// means a handled deadline did not move past `now`.
const MAX_HANDLED_PER_TIMEOUT: usize = 10_000;

/// The obviously correct restatement of a `Table<N, F, C>` (its capacity
/// `N` is the caller's to enforce: the model never refuses an insert).
#[derive(Debug)]
pub struct TableModel<const F: usize, const C: usize> {
    /// Objects by the id the table gave them, in insertion order.
    pub objects: Vec<(Id, Lifecycle<F, C>)>,
    /// Ids owing actions, in the order they came to owe them.
    pub ready: Vec<Id>,
}

impl<const F: usize, const C: usize> Default for TableModel<F, C> {
    fn default() -> Self {
        TableModel {
            objects: Vec::new(),
            ready: Vec::new(),
        }
    }
}

impl<const F: usize, const C: usize> TableModel<F, C> {
    /// The lifecycle the table gave `id`, if it is still there.
    pub fn get_mut(&mut self, id: Id) -> Option<&mut Lifecycle<F, C>> {
        self.objects
            .iter_mut()
            .find(|(i, _)| *i == id)
            .map(|(_, l)| l)
    }

    /// After an input to `id`: it joins the end of the ready list if it
    /// now owes an action and is not on it yet.
    pub fn touched(&mut self, id: Id) {
        let owes = self.objects.iter().any(|(i, l)| *i == id && l.has_action());
        if owes && !self.ready.contains(&id) {
            self.ready.push(id);
        }
    }

    /// The earliest deadline of all objects.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.objects
            .iter()
            .filter_map(|(_, l)| l.poll_timeout())
            .min()
    }

    /// "Handles every object whose deadline is at or before `now`, earliest
    /// first (ties by slot)": until no deadline at or before `now` is left.
    /// Panics if a handled deadline does not move past `now` (except at the
    /// end of time, where deadlines saturate to `now` and each round moves
    /// the kill one stage on), or if the loop does not end.
    pub fn handle_timeouts(&mut self, now: Now) {
        for _ in 0..MAX_HANDLED_PER_TIMEOUT {
            let due = self
                .objects
                .iter()
                .filter_map(|(id, l)| Some((l.poll_timeout()?, id.index(), *id)))
                .filter(|(t, _, _)| *t <= now.mono)
                .min();
            let Some((_, _, id)) = due else { return };
            if let Some(l) = self.get_mut(id) {
                let _ = l.handle(now, Input::Timeout);
                // At the end of time deadlines saturate to `now`: the next
                // round handles the object again, one stage further.
                let left = l.poll_timeout();
                assert!(
                    left.is_none_or(|t| t > now.mono) || now.mono == Instant::MAX,
                    "model: a handled deadline did not move past now ({now:?}): {left:?}"
                );
            }
            self.touched(id);
        }
        panic!("model: deadlines at or before {now:?} never go away");
    }

    /// The next action: from the object that came to owe one first.
    pub fn poll_action(&mut self) -> Option<(Id, Action)> {
        while let Some(&id) = self.ready.first() {
            if let Some(action) = self.get_mut(id).and_then(Lifecycle::poll_action) {
                return Some((id, action));
            }
            self.ready.remove(0);
        }
        None
    }
}
