//! The serialized form of a [`Lifecycle`]: every field spelled out, apart
//! from how memory packs them, so that a saved lifecycle reads plainly.
//! Written from borrowed fields ([`PersistedRef`]: no copy of the record),
//! read into owned ones ([`Persisted`]). The order of owed outputs is
//! written as each entry's place in it (1 for the oldest, 0 for none), not
//! as the links memory keeps (`queue.rs`).

use serde::{Deserialize, Serialize, Serializer};

use super::flags::{Flag, Flags};
use super::queue::{ENDPOINTS, Ends, Entry, REMOVE};
use super::{AgentState, Lifecycle, Phase};
use crate::kill::{Container, PersistedContainer};
use crate::record::{Record, Strategy};

#[derive(Deserialize)]
pub(super) struct Persisted<const F: usize, const C: usize, const L: usize> {
    strategy: Strategy,
    record: Record<F, L>,
    stored: bool,
    phase: Phase,
    agent: AgentState,
    containers: heapless::Vec<PersistedContainer, C>,
    /// Place of an owed `RemoveEndpoints` in the action order; 0: none owed.
    endpoints_since: u16,
    /// Place of an owed `Remove`; 0: none owed.
    remove_since: u16,
    /// The owed `Remove` is a force removal.
    force: bool,
}

/// [`Persisted`] as written: the same fields in the same order, borrowed.
#[derive(Serialize)]
#[serde(rename = "Persisted")]
struct PersistedRef<'a, const F: usize, const C: usize, const L: usize> {
    strategy: Strategy,
    record: &'a Record<F, L>,
    stored: bool,
    phase: Phase,
    agent: AgentState,
    containers: Containers<'a, F, C, L>,
    endpoints_since: u16,
    remove_since: u16,
    force: bool,
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl<const F: usize, const C: usize, const L: usize> Serialize for Lifecycle<F, C, L> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        PersistedRef {
            strategy: self.strategy(),
            record: &self.record,
            stored: self.is_stored(),
            phase: self.phase,
            agent: self.agent(),
            containers: Containers(self),
            endpoints_since: self.place_of(ENDPOINTS),
            remove_since: self.place_of(REMOVE),
            force: self.flags.has(Flag::Force),
        }
        .serialize(serializer)
    }
}

/// A lifecycle's containers as written: each with its place.
struct Containers<'a, const F: usize, const C: usize, const L: usize>(&'a Lifecycle<F, C, L>);

impl<const F: usize, const C: usize, const L: usize> Serialize for Containers<'_, F, C, L> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let lifecycle = self.0;
        serializer.collect_seq(lifecycle.containers().iter().enumerate().map(|(i, c)| {
            PersistedContainer::new(c, lifecycle.place_of(Lifecycle::<F, C>::entry_of(i)))
        }))
    }
}

impl<const F: usize, const C: usize, const L: usize> From<Persisted<F, C, L>>
    for Lifecycle<F, C, L>
{
    fn from(p: Persisted<F, C, L>) -> Self {
        let mut flags = Flags::new(p.strategy);
        flags.set(Flag::Stored, p.stored);
        flags.set_link(p.agent.link);
        flags.set(Flag::Killing, p.agent.killing);
        flags.set(Flag::DeletionSeen, p.agent.deletion_seen);
        flags.set(Flag::Evicted, p.agent.evicted);
        flags.set(Flag::OwesReport, p.agent.owes_report);
        flags.set(Flag::Reported, p.agent.reported);
        flags.set(Flag::Force, p.force);
        flags.set(Flag::EndpointsOwed, p.endpoints_since != 0);
        flags.set(Flag::RemoveOwed, p.remove_since != 0);
        let count = Self::count_of(p.containers.len());
        let mut containers = [Container::VACANT; C];
        let mut places = [0u16; C];
        for ((slot, place), c) in containers.iter_mut().zip(&mut places).zip(p.containers) {
            (*slot, *place) = c.into_parts();
        }
        let mut lifecycle = Lifecycle {
            record: p.record,
            containers,
            remembered_grace: p.agent.remembered_grace,
            ends: Ends::EMPTY,
            endpoints_next: 0,
            remove_next: 0,
            flags,
            phase: p.phase,
            count,
        };
        lifecycle.enqueue_by_place(|entry: Entry| match entry {
            ENDPOINTS => p.endpoints_since,
            REMOVE => p.remove_since,
            e => places
                .get(usize::from(e).wrapping_sub(1))
                .copied()
                .unwrap_or(0),
        });
        lifecycle
    }
}
