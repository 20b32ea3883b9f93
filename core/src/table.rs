//! Many lifecycles in one fixed-capacity table, with a deadline queue.
//!
//! The table keeps every object's next deadline in an indexed binary heap,
//! so the earliest deadline is known in O(1) and an expiry, an insertion or
//! a change of deadline costs O(log n). Objects that owe actions wait in a
//! FIFO, so `poll_action` never scans. Everything is inline and bounded by
//! the capacity `N`; `Table::new` is `const`, so a table can live in a
//! `static` (see [`crate::SharedTable`]).

use crate::name::NAME_CAPACITY;
use core::fmt;

use crate::input::{Input, Reply};
use crate::kill::Due;
use crate::lifecycle::{Action, Lifecycle};
use crate::time::{Instant, Now};

/// A compact handle on one object in a [`Table`]: its slot and the slot's
/// generation. A slot is reused only after its object was removed, and then
/// with a new generation, so a stale id never reaches another object.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Id {
    index: u32,
    generation: u32,
}

impl Id {
    /// The slot, below the table's capacity.
    pub const fn index(self) -> u32 {
        self.index
    }

    /// How many objects used this slot before this one.
    pub const fn generation(self) -> u32 {
        self.generation
    }
}

/// The table is full; the lifecycle that did not fit is handed back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableFull<T>(pub T);

impl<T> fmt::Display for TableFull<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("table full")
    }
}

impl<T: fmt::Debug> core::error::Error for TableFull<T> {}

/// The id names no object in this table (never inserted, or removed).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UnknownId;

impl fmt::Display for UnknownId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("unknown object id")
    }
}

impl core::error::Error for UnknownId {}

/// A slot index stored as index + 1, so that "none" is 0 and a new table is
/// all zero bits (a `static` one lands in `.bss`).
fn encode(index: Option<u32>) -> u32 {
    index.map_or(0, |i| i.saturating_add(1))
}

fn decode(stored: u32) -> Option<u32> {
    stored.checked_sub(1)
}

/// A slot's bookkeeping in one word (all zero: a free slot at the end of
/// the free list):
///
/// - bit 31: the slot holds an object;
/// - bit 30: the object waits in the ready FIFO;
/// - bits 0–29: for an object, its heap position (encoded, 0: not in the
///   heap); for a free slot, the next free slot (encoded, 0: none). A free
///   slot is in neither the heap nor the FIFO, so they share the bits.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Marks(u32);

impl Marks {
    const IN_USE: u32 = 1 << 31;
    const READY: u32 = 1 << 30;
    const LINK: u32 = Self::READY - 1;

    /// A new object: not in the heap, not ready.
    const OBJECT: Marks = Marks(Self::IN_USE);

    /// A free slot followed in the free list by `next` (encoded).
    const fn free(next: u32) -> Self {
        Marks(next & Self::LINK)
    }

    const fn in_use(self) -> bool {
        self.0 & Self::IN_USE != 0
    }

    const fn ready(self) -> bool {
        self.0 & Self::READY != 0
    }

    fn set_ready(&mut self, on: bool) {
        if on {
            self.0 |= Self::READY;
        } else {
            self.0 &= !Self::READY;
        }
    }

    fn heap_pos(self) -> Option<u32> {
        if self.in_use() {
            decode(self.0 & Self::LINK)
        } else {
            None
        }
    }

    fn set_heap_pos(&mut self, pos: Option<u32>) {
        self.0 = (self.0 & !Self::LINK) | (encode(pos) & Self::LINK);
    }

    /// The next free slot (encoded), for a free slot.
    const fn next_free(self) -> u32 {
        self.0 & Self::LINK
    }
}

/// One slot: an object, or a link in the free list. A free slot holds
/// [`Lifecycle::VACANT`], so that it is all zero bits like its marks.
#[derive(Clone, Debug)]
struct Slot<const F: usize, const C: usize, const L: usize> {
    lifecycle: Lifecycle<F, C, L>,
    generation: u32,
    marks: Marks,
}

impl<const F: usize, const C: usize, const L: usize> Slot<F, C, L> {
    const EMPTY: Self = Slot {
        lifecycle: Lifecycle::VACANT,
        generation: 0,
        marks: Marks::free(0),
    };

    /// The object, if the slot holds one.
    fn object(&self) -> Option<&Lifecycle<F, C, L>> {
        self.marks.in_use().then_some(&self.lifecycle)
    }

    fn object_mut(&mut self) -> Option<&mut Lifecycle<F, C, L>> {
        self.marks.in_use().then_some(&mut self.lifecycle)
    }
}

/// Up to `N` lifecycles, each with up to `F` finalizers and `C` containers.
///
/// Inputs are [`handle`]`(now, id, input)`; outputs are [`poll_action`]
/// (`(id, action)` pairs: objects in the order they came to owe something,
/// each object's actions in its own order) and [`poll_timeout`] (the
/// earliest deadline of all, O(1)). [`handle_timeouts`] handles every object
/// whose deadline has passed, earliest first, in O(log n) each.
///
/// ```
/// use grace_core::{Action, ContainerSpec, DeleteOptions, Input, Lifecycle, Name, Now, Record, Strategy, Table};
///
/// let mut table: Table<8> = Table::new();
/// let app = ContainerSpec::default();
/// let pod = Lifecycle::new(Strategy::POD, Record::new(Name::try_from("u1").unwrap()), &[app]).unwrap();
/// let id = table.insert(pod).unwrap();
/// let at = |ms: i64| Now::from_unix_millis(ms);
///
/// let _ = table.handle(at(0), id, Input::Delete(DeleteOptions::with_grace(5))).unwrap();
/// let _ = table.handle(at(0), id, Input::AgentSync).unwrap();
/// assert_eq!(table.poll_action(), Some((id, Action::RemoveEndpoints)));
/// assert_eq!(table.poll_action(), Some((id, Action::SendStopSignal { container: 0 })));
/// assert_eq!(table.poll_timeout().unwrap().as_millis(), 5_000);
/// table.handle_timeouts(at(5_000));
/// assert_eq!(table.poll_action(), Some((id, Action::SendKill { container: 0 })));
/// ```
///
/// # Placing a big table
///
/// Everything is inline: `size_of::<Table<N, F, C, L>>()` grows with `N` (a
/// `Table<20_000>` with the default capacities is about 36.8 MB, 1 840
/// bytes per object). `Box::new(Table::new())` builds the
/// table on the stack before moving it, which overflows a thread's stack
/// in a debug build. A new table is all zero bits and [`Table::new`] is
/// `const`, so put a big one in a `static`: it lands in `.bss`, costs no
/// image and never touches the stack.
///
/// ```
/// use std::sync::Mutex;
/// use grace_core::Table;
///
/// static TABLE: Mutex<Table<20_000>> = Mutex::new(Table::new());
///
/// let table = TABLE.lock().unwrap();
/// assert_eq!(table.capacity(), 20_000);
/// ```
///
/// On a microcontroller, or to share it with interrupt handlers, the
/// `static` is a [`SharedTable`](crate::SharedTable).
///
/// [`handle`]: Table::handle
/// [`poll_action`]: Table::poll_action
/// [`poll_timeout`]: Table::poll_timeout
/// [`handle_timeouts`]: Table::handle_timeouts
#[derive(Clone, Debug)]
pub struct Table<
    const N: usize,
    const F: usize = 4,
    const C: usize = 4,
    const L: usize = NAME_CAPACITY,
> {
    slots: [Slot<F, C, L>; N],
    /// Indexed binary min-heap of slot indices, keyed by (deadline, index).
    /// Deadlines are read from the lifecycles, not kept twice.
    heap: [u32; N],
    heap_len: u32,
    /// FIFO ring of slot indices that owe actions; each at most once.
    ready: [u32; N],
    ready_head: u32,
    ready_len: u32,
    /// The first freed slot (encoded, 0: none).
    free_head: u32,
    /// Slots at and above this index were never used.
    unused: u32,
    len: u32,
}

impl<const N: usize, const F: usize, const C: usize, const L: usize> Default for Table<N, F, C, L> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize, const F: usize, const C: usize, const L: usize> Table<N, F, C, L> {
    /// Encoded indices (index + 1) must fit a slot's 30 link bits.
    const CAPACITY_FITS: () = assert!(
        N <= Marks::LINK as usize,
        "Table capacity must be below 2^30"
    );

    /// An empty table: all zero bits. `const`, so that it can live in a
    /// `static` (in `.bss`, with no initial image).
    pub const fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::CAPACITY_FITS;
        Table {
            slots: [const { Slot::EMPTY }; N],
            heap: [0; N],
            heap_len: 0,
            ready: [0; N],
            ready_head: 0,
            ready_len: 0,
            free_head: 0,
            unused: 0,
            len: 0,
        }
    }

    /// How many objects the table holds.
    pub const fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the table holds no object.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most objects the table can hold.
    pub const fn capacity(&self) -> usize {
        N
    }

    /// Tracks a lifecycle; hands it back if the table is full.
    #[allow(clippy::result_large_err, reason = "the caller gets its value back")]
    pub fn insert(
        &mut self,
        lifecycle: Lifecycle<F, C, L>,
    ) -> Result<Id, TableFull<Lifecycle<F, C, L>>> {
        let freed = decode(self.free_head);
        let index = match freed {
            Some(index) => index,
            None if (self.unused as usize) < N => self.unused,
            None => return Err(TableFull(lifecycle)),
        };
        let Some(slot) = self.slots.get_mut(index as usize) else {
            return Err(TableFull(lifecycle));
        };
        if freed.is_some() {
            self.free_head = slot.marks.next_free();
        } else {
            self.unused = self.unused.saturating_add(1);
        }
        slot.lifecycle = lifecycle;
        slot.marks = Marks::OBJECT;
        let id = Id {
            index,
            generation: slot.generation,
        };
        self.len = self.len.saturating_add(1);
        self.refresh(index);
        Ok(id)
    }

    /// Stops tracking an object and hands back its lifecycle. Its slot is
    /// reused later under a new generation, so `id` stays dead.
    pub fn remove(&mut self, id: Id) -> Option<Lifecycle<F, C, L>> {
        self.get(id)?;
        self.heap_remove(id.index);
        self.ready_remove(id.index);
        let free_head = self.free_head;
        let slot = self.slots.get_mut(id.index as usize)?;
        let lifecycle = core::mem::replace(&mut slot.lifecycle, Lifecycle::VACANT);
        slot.generation = slot.generation.wrapping_add(1);
        slot.marks = Marks::free(free_head);
        self.free_head = encode(Some(id.index));
        self.len = self.len.saturating_sub(1);
        Some(lifecycle)
    }

    /// Removes the object if it is [finished](Lifecycle::is_finished) and
    /// hands its lifecycle back; otherwise leaves it. This, not
    /// [`remove`](Self::remove) on [`Action::Remove`], is how a caller that
    /// keeps no other copy of its objects frees their slots: after a force
    /// delete the record is removed while the kill still has to run (D4).
    pub fn remove_finished(&mut self, id: Id) -> Option<Lifecycle<F, C, L>> {
        if self.get(id)?.is_finished() {
            self.remove(id)
        } else {
            None
        }
    }

    /// The object's lifecycle, to read.
    pub fn get(&self, id: Id) -> Option<&Lifecycle<F, C, L>> {
        let slot = self.slots.get(id.index as usize)?;
        if slot.generation != id.generation {
            return None;
        }
        slot.object()
    }

    /// Every object, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (Id, &Lifecycle<F, C, L>)> {
        self.slots.iter().zip(0u32..).filter_map(|(slot, index)| {
            let lifecycle = slot.object()?;
            let id = Id {
                index,
                generation: slot.generation,
            };
            Some((id, lifecycle))
        })
    }

    /// Runs `input` on one object and brings the deadline queue and the
    /// ready FIFO up to date: the general form of [`handle`](Self::handle).
    pub fn with<R>(
        &mut self,
        id: Id,
        input: impl FnOnce(&mut Lifecycle<F, C, L>) -> R,
    ) -> Result<R, UnknownId> {
        let result = input(self.object_mut(id)?);
        self.refresh(id.index);
        Ok(result)
    }

    /// Object `id`, to change (the caller then refreshes its slot).
    fn object_mut(&mut self, id: Id) -> Result<&mut Lifecycle<F, C, L>, UnknownId> {
        let slot = self.slots.get_mut(id.index as usize).ok_or(UnknownId)?;
        if slot.generation != id.generation {
            return Err(UnknownId);
        }
        slot.object_mut().ok_or(UnknownId)
    }

    /// [`Lifecycle::handle`] on one object: `input` at `now`, then the
    /// deadline queue and the ready FIFO brought up to date (an input
    /// naming a container may move its SIGKILL deadline later).
    // Always inlined, as `Lifecycle::handle`, and not through the generic
    // `with` (one closure type for every input): a caller's constant input
    // then keeps only its own arm, so a firmware that feeds three kinds of
    // input links three handlers, not all of them (examples/embedded's
    // .text budget).
    #[inline(always)]
    pub fn handle(&mut self, now: Now, id: Id, input: Input) -> Result<Reply, UnknownId> {
        let reply = self.object_mut(id)?.handle(now, input);
        self.refresh(id.index);
        Ok(reply)
    }

    /// Handles every object whose deadline is at or before `now`, earliest
    /// first (ties by slot): [`Input::Timeout`] on each. Each
    /// costs O(log n); objects not due are not touched. Plural, as
    /// `grace_std`'s `Runtime::handle_timeouts`: every object due, where
    /// [`Input::Timeout`] is one object's.
    pub fn handle_timeouts(&mut self, now: Now) {
        // A handled object's deadline moves past `now`, except at the end of
        // time, where deadlines saturate to `now` itself and each handling
        // moves a container one stage on (pre-stop, turn, stopping,
        // killed): a few handlings settle any object.
        let rounds = C.saturating_mul(3).saturating_add(1);
        let due = |deadline: Option<Instant>| deadline.is_some_and(|d| d <= now.mono);
        while let Some(top) = self.heap_top() {
            if !due(self.deadline(top)) {
                break;
            }
            let mut settled = false;
            for _ in 0..rounds {
                if let Some(lifecycle) = self.slots.get_mut(top as usize).and_then(Slot::object_mut)
                {
                    let _ = lifecycle.handle(now, Input::Timeout);
                }
                if !due(self.refresh(top)) {
                    settled = true;
                    break;
                }
            }
            if !settled {
                // A lifecycle that does not move on: stop rather than spin.
                break;
            }
        }
    }

    /// The next action of any object, with the object's id.
    pub fn poll_action(&mut self) -> Option<(Id, Action)> {
        while self.ready_len > 0 {
            let index = *self.ready.get(self.ready_head as usize)?;
            let slot = self.slots.get_mut(index as usize)?;
            let generation = slot.generation;
            // Handing out an action changes no deadline: the heap stays.
            if let Some(action) = slot.object_mut().and_then(Lifecycle::poll_action) {
                return Some((Id { index, generation }, action));
            }
            slot.marks.set_ready(false);
            self.ready_pop_front();
        }
        None
    }

    /// The earliest deadline of all objects, in O(1): when
    /// [`handle_timeouts`](Self::handle_timeouts) has something to do.
    /// [`poll_due`](Self::poll_due) says for which object and what comes
    /// due (see [`Lifecycle::poll_timeout`]).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadline(self.heap_top()?)
    }

    /// The object with the earliest deadline and what comes due at it
    /// ([`Lifecycle::poll_due`]), from the deadline queue in O(C): no scan
    /// of the table. Of objects due at the same instant, the lowest slot.
    pub fn poll_due(&self) -> Option<(Id, Due)> {
        let index = self.heap_top()?;
        let slot = self.slots.get(index as usize)?;
        let due = slot.object()?.poll_due()?;
        let id = Id {
            index,
            generation: slot.generation,
        };
        Some((id, due))
    }

    // ---- bookkeeping ------------------------------------------------------

    /// Brings slot `index`'s heap entry and ready mark up to date; returns
    /// its deadline.
    fn refresh(&mut self, index: u32) -> Option<Instant> {
        let slot = self.slots.get_mut(index as usize)?;
        let deadline = slot.lifecycle.poll_timeout();
        let owes = !slot.marks.ready() && slot.lifecycle.has_action();
        match (deadline.is_some(), slot.marks.heap_pos()) {
            (false, None) => {}
            (false, Some(_)) => self.heap_remove(index),
            // The deadline may have moved either way.
            (true, Some(pos)) => {
                if !self.sift_up(pos) {
                    self.sift_down(pos);
                }
            }
            (true, None) => {
                let pos = self.heap_len;
                if let Some(entry) = self.heap.get_mut(pos as usize) {
                    *entry = index;
                    slot.marks.set_heap_pos(Some(pos));
                    self.heap_len = self.heap_len.saturating_add(1);
                    self.sift_up(pos);
                }
            }
        }
        if owes {
            self.ready_push_back(index);
        }
        deadline
    }

    fn heap_top(&self) -> Option<u32> {
        if self.heap_len == 0 {
            return None;
        }
        self.heap.first().copied()
    }

    /// The deadline of slot `index`'s object, read from its lifecycle.
    fn deadline(&self, index: u32) -> Option<Instant> {
        self.slots.get(index as usize)?.object()?.poll_timeout()
    }

    /// The heap key of a slot: deadline, then index for a total order.
    fn key(&self, index: u32) -> (Instant, u32) {
        (self.deadline(index).unwrap_or(Instant::MAX), index)
    }

    fn heap_at(&self, pos: u32) -> u32 {
        self.heap.get(pos as usize).copied().unwrap_or(0)
    }

    fn heap_set(&mut self, pos: u32, index: u32) {
        if let Some(entry) = self.heap.get_mut(pos as usize) {
            *entry = index;
        }
        if let Some(slot) = self.slots.get_mut(index as usize) {
            slot.marks.set_heap_pos(Some(pos));
        }
    }

    /// Moves the entry at `pos` up to its place; true if it moved.
    fn sift_up(&mut self, start: u32) -> bool {
        let index = self.heap_at(start);
        let key = self.key(index);
        let mut pos = start;
        while pos > 0 {
            let parent = pos.saturating_sub(1) / 2;
            let parent_index = self.heap_at(parent);
            if self.key(parent_index) <= key {
                break;
            }
            self.heap_set(pos, parent_index);
            pos = parent;
        }
        self.heap_set(pos, index);
        pos != start
    }

    fn sift_down(&mut self, mut pos: u32) {
        let index = self.heap_at(pos);
        let key = self.key(index);
        loop {
            let left = pos.saturating_mul(2).saturating_add(1);
            if left >= self.heap_len {
                break;
            }
            let right = left.saturating_add(1);
            let (mut child, mut child_key) = (left, self.key(self.heap_at(left)));
            if right < self.heap_len {
                let right_key = self.key(self.heap_at(right));
                if right_key < child_key {
                    (child, child_key) = (right, right_key);
                }
            }
            if key <= child_key {
                break;
            }
            self.heap_set(pos, child_key.1);
            pos = child;
        }
        self.heap_set(pos, index);
    }

    fn heap_remove(&mut self, index: u32) {
        let Some(pos) = self
            .slots
            .get(index as usize)
            .and_then(|s| s.marks.heap_pos())
        else {
            return;
        };
        if self.heap_len == 0 {
            return;
        }
        let last = self.heap_len.saturating_sub(1);
        let last_index = self.heap_at(last);
        self.heap_len = last;
        if let Some(slot) = self.slots.get_mut(index as usize) {
            slot.marks.set_heap_pos(None);
        }
        if pos != last {
            self.heap_set(pos, last_index);
            if !self.sift_up(pos) {
                self.sift_down(pos);
            }
        }
    }

    fn ready_push_back(&mut self, index: u32) {
        if self.ready_len as usize >= N {
            return;
        }
        let tail = ring_add::<N>(self.ready_head, self.ready_len);
        if let Some(entry) = self.ready.get_mut(tail as usize) {
            *entry = index;
            self.ready_len = self.ready_len.saturating_add(1);
            if let Some(slot) = self.slots.get_mut(index as usize) {
                slot.marks.set_ready(true);
            }
        }
    }

    fn ready_pop_front(&mut self) {
        if self.ready_len == 0 {
            return;
        }
        self.ready_head = ring_add::<N>(self.ready_head, 1);
        self.ready_len = self.ready_len.saturating_sub(1);
    }

    /// Takes `index` out of the ready FIFO, keeping the others' order.
    /// O(n), but only on `remove` of an object that still owes actions.
    fn ready_remove(&mut self, index: u32) {
        let is_ready = self
            .slots
            .get(index as usize)
            .is_some_and(|s| s.marks.ready());
        if !is_ready {
            return;
        }
        let mut kept = 0u32;
        for k in 0..self.ready_len {
            let from = ring_add::<N>(self.ready_head, k);
            let Some(entry) = self.ready.get(from as usize).copied() else {
                continue;
            };
            if entry == index {
                continue;
            }
            let to = ring_add::<N>(self.ready_head, kept);
            if let Some(slot) = self.ready.get_mut(to as usize) {
                *slot = entry;
            }
            kept = kept.saturating_add(1);
        }
        self.ready_len = kept;
        if let Some(slot) = self.slots.get_mut(index as usize) {
            slot.marks.set_ready(false);
        }
    }
}

/// `(start + offset) mod N` for ring positions below `N`.
fn ring_add<const N: usize>(start: u32, offset: u32) -> u32 {
    let n = u64::try_from(N).unwrap_or(u64::MAX).max(1);
    let sum = u64::from(start).saturating_add(u64::from(offset));
    u32::try_from(sum.checked_rem(n).unwrap_or(0)).unwrap_or(0)
}
