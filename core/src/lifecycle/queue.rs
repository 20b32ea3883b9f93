//! The order of owed outputs: a queue of the entries that owe something —
//! each container, `RemoveEndpoints`, `Remove` — linked through one byte per
//! entry, oldest first. `poll_action` hands out the head's outputs, so it
//! and `has_action` look at one entry, whatever the number of containers;
//! an entry that comes to owe something joins at the back in O(1).
//!
//! An entry stays in its place until it owes nothing more; outputs it comes
//! to owe meanwhile join its own (a container's come out in the order of
//! their bits). Both ends of the queue are one 16-bit word, 0 when it is
//! empty, so that the usual case — one entry comes to owe something and
//! its outputs are handed out — writes the ends once each way. Links are
//! cleared as entries leave: two lifecycles with the same outputs owed in
//! the same order are equal, and all zero bits (a vacant lifecycle) is an
//! empty queue.

use super::Lifecycle;
#[cfg(feature = "serde")]
use super::flags::Flag;
use crate::hint::likely;

/// An entry of the queue: container `i` is `i + 1`; 0 is none.
pub(super) type Entry = u8;

/// The entry for an owed `RemoveEndpoints`.
pub(super) const ENDPOINTS: Entry = 254;
/// The entry for an owed `Remove`.
pub(super) const REMOVE: Entry = 255;

/// The most containers a lifecycle can have: their entries stay between
/// none and the two entries above.
pub(super) const MAX_CONTAINERS: usize = ENDPOINTS as usize - 1;

/// Both ends of the queue: the head in the low byte, the tail in the high
/// byte; 0 when the queue is empty.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct Ends(u16);

impl Ends {
    /// No entry.
    pub(super) const EMPTY: Ends = Ends(0);

    /// The oldest entry; 0 when empty.
    #[inline]
    pub(super) fn head(self) -> Entry {
        let [head, _] = self.0.to_le_bytes();
        head
    }

    /// The newest entry; 0 when empty.
    #[inline]
    fn tail(self) -> Entry {
        let [_, tail] = self.0.to_le_bytes();
        tail
    }

    #[inline]
    fn new(head: Entry, tail: Entry) -> Self {
        Ends(u16::from_le_bytes([head, tail]))
    }
}

impl<const F: usize, const C: usize, const L: usize> Lifecycle<F, C, L> {
    /// Container `i`'s entry (`i < C <= MAX_CONTAINERS`).
    #[inline]
    pub(super) fn entry_of(i: usize) -> Entry {
        Entry::try_from(i.saturating_add(1)).unwrap_or(0)
    }

    /// Whether `entry` owes an output.
    #[cfg(feature = "serde")]
    fn owes(&self, entry: Entry) -> bool {
        match entry {
            0 => false,
            ENDPOINTS => self.flags.has(Flag::EndpointsOwed),
            REMOVE => self.flags.has(Flag::RemoveOwed),
            e => self
                .containers
                .get(usize::from(e).wrapping_sub(1))
                .is_some_and(|c| c.owed != 0),
        }
    }

    fn next_of(&self, entry: Entry) -> Entry {
        match entry {
            0 => 0,
            ENDPOINTS => self.endpoints_next,
            REMOVE => self.remove_next,
            e => self
                .containers
                .get(usize::from(e).wrapping_sub(1))
                .map_or(0, |c| c.next),
        }
    }

    fn set_next(&mut self, entry: Entry, next: Entry) {
        match entry {
            0 => {}
            ENDPOINTS => self.endpoints_next = next,
            REMOVE => self.remove_next = next,
            e => {
                if let Some(c) = self.containers.get_mut(usize::from(e).wrapping_sub(1)) {
                    c.next = next;
                }
            }
        }
    }

    /// Puts `entry`, which has just come to owe something, at the back.
    #[inline]
    pub(super) fn enqueue(&mut self, entry: Entry) {
        let ends = self.ends;
        // Usually empty: drivers take every output after each input.
        if likely(ends == Ends::EMPTY) {
            self.ends = Ends::new(entry, entry);
        } else {
            self.set_next(ends.tail(), entry);
            self.ends = Ends::new(ends.head(), entry);
        }
    }

    /// The head owes nothing more: the entry after it becomes the head.
    #[inline]
    pub(super) fn dequeue(&mut self) {
        let ends = self.ends;
        let head = ends.head();
        // Usually the only entry (see `enqueue`).
        if likely(head == ends.tail()) {
            self.ends = Ends::EMPTY;
        } else {
            self.ends = Ends::new(self.next_of(head), ends.tail());
            self.set_next(head, 0);
        }
    }

    /// The place of `entry` in the queue, 1 for the head; 0 if it is not
    /// queued. The persisted form keeps places, not links.
    #[cfg(feature = "serde")]
    pub(super) fn place_of(&self, entry: Entry) -> u16 {
        let mut at = self.ends.head();
        // Bounded by the number of entries, whatever the links say.
        for place in 1..=C.saturating_add(2) {
            if at == 0 {
                return 0;
            }
            if at == entry {
                return u16::try_from(place).unwrap_or(u16::MAX);
            }
            if at == self.ends.tail() {
                return 0;
            }
            at = self.next_of(at);
        }
        0
    }

    /// Rebuilds the queue from places (see [`place_of`](Self::place_of)),
    /// on a lifecycle whose queue is empty and unlinked: the entries that
    /// owe something join in the order of their places, any owing entry
    /// without a place last, so that every owed output is handed out.
    #[cfg(feature = "serde")]
    pub(super) fn enqueue_by_place(&mut self, places: impl Fn(Entry) -> u16) {
        let count = self.containers().len();
        let entries = move || (0..count).map(Self::entry_of).chain([ENDPOINTS, REMOVE]);
        let key = |entry: Entry| match places(entry) {
            0 => u32::MAX,
            place => u32::from(place),
        };
        let mut last = None;
        // The owing entry with the least (place, entry) after the last one
        // queued: entries are few (at most `C + 2`) and this runs only on
        // restore.
        while let Some(next) = entries()
            .filter(|&e| self.owes(e))
            .map(|e| (key(e), e))
            .filter(|&k| last.is_none_or(|last| k > last))
            .min()
        {
            self.enqueue(next.1);
            last = Some(next);
        }
    }
}
