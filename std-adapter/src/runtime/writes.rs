//! A batch's writes, built in place in slots kept from batch to batch and
//! lent to the store ([`Store::batch_ref`](crate::store::Store::batch_ref)).
//!
//! A stored object is about 5 KB (its record has room for 16 finalizer
//! names of up to 316 bytes), with a few strings besides. Built anew for
//! every write, moved into a batch and dropped by the store, it cost the
//! runtime more than the rest of a transition; filled in place, a write
//! copies only what its object holds (see [`Spec::fill`](super::Spec::fill))
//! and allocates nothing. The objects shown to the actuator are the slots
//! as written; the batch after the actions is built in the same slots once
//! every object of the round has acted.

use grace_core::{Name, Record};

use super::commit::Written;
use crate::store::{Revision, StorePreconditions, StoredObject, Write};

/// The slots (see the module docs). Between batches their contents are
/// stale: only what [`next`](Writes::next) hands out is filled.
#[derive(Default)]
pub(super) struct Writes {
    slots: Vec<Write>,
    /// How many slots, from the first, the batch being built holds.
    len: usize,
}

impl Writes {
    /// Starts a new batch (the slots keep what they hold, to be reused).
    pub(super) fn clear(&mut self) {
        self.len = 0;
    }

    /// How many writes the batch holds.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The batch built so far.
    pub(super) fn batch(&self) -> &[Write] {
        self.slots.get(..self.len).unwrap_or_default()
    }

    /// The object in slot `i` (a create or update), as last filled.
    pub(super) fn object(&self, i: usize) -> Option<&StoredObject> {
        match self.slots.get(i)? {
            Write::Create { object, .. } | Write::Update { object, .. } => Some(object),
            Write::Delete { .. } => None,
        }
    }

    /// Notes that the write in slot `i` was stored at `revision`, as the
    /// store noted it in what it keeps.
    pub(super) fn stored(&mut self, i: usize, revision: Revision) {
        if let Some(Write::Create { object, .. } | Write::Update { object, .. }) =
            self.slots.get_mut(i)
        {
            object.record.resource_version = revision.get();
        }
    }

    /// Adds a write of `name` (created, or updated from `expected`) to the
    /// batch and returns its object to fill: a slot's, holding what was
    /// last written from it. (`None` only if the slot could not be shaped,
    /// which does not happen: the caller then [`push`](Self::push)es a
    /// write it built.)
    pub(super) fn next(
        &mut self,
        name: &str,
        how: Written,
        expected: Revision,
    ) -> Option<&mut StoredObject> {
        if self.len == self.slots.len() {
            self.slots.push(Write::Update {
                name: String::new(),
                object: StoredObject::unscheduled(Record::new(Name::new())),
                expected,
            });
        }
        let slot = self.slots.get_mut(self.len)?;
        shape(slot, how);
        let (n, object) = match slot {
            Write::Create { name, object } => (name, object),
            Write::Update {
                name,
                object,
                expected: e,
            } => {
                *e = expected;
                (name, object)
            }
            Write::Delete { .. } => return None,
        };
        n.clear();
        n.push_str(name);
        // At most the slots' length: no overflow.
        self.len = self.len.saturating_add(1);
        Some(object)
    }

    /// Adds `write` to the batch as it is.
    pub(super) fn push(&mut self, write: Write) {
        match self.slots.get_mut(self.len) {
            Some(slot) => *slot = write,
            None => self.slots.push(write),
        }
        // At most the slots' length: no overflow.
        self.len = self.len.saturating_add(1);
    }
}

/// Makes `slot` a create or an update as `how` says, keeping its object.
fn shape(slot: &mut Write, how: Written) {
    let fits = matches!(
        (how, &*slot),
        (Written::Create, Write::Create { .. }) | (Written::Update, Write::Update { .. })
    );
    if fits {
        return;
    }
    let empty = Write::Delete {
        name: String::new(),
        preconditions: StorePreconditions::default(),
    };
    let (name, object, expected) = match std::mem::replace(slot, empty) {
        Write::Create { name, object } => (name, object, Revision::ZERO),
        Write::Update {
            name,
            object,
            expected,
        } => (name, object, expected),
        Write::Delete { name, .. } => (
            name,
            StoredObject::unscheduled(Record::new(Name::new())),
            Revision::ZERO,
        ),
    };
    *slot = match how {
        Written::Create => Write::Create { name, object },
        Written::Update => Write::Update {
            name,
            object,
            expected,
        },
    };
}
