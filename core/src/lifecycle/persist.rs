//! The serialized form of a [`Lifecycle`]: every field spelled out, apart
//! from how memory packs them, so that a saved lifecycle reads plainly.
//! Written from borrowed fields ([`PersistedRef`]: no copy of the record),
//! read into owned ones ([`Persisted`]), or into a lifecycle in place
//! ([`InPlace`]: the record, about 5 KB, is not moved through each layer
//! that builds it). The order of owed outputs is
//! written as each entry's place in it (1 for the oldest, 0 for none), not
//! as the links memory keeps (`queue.rs`).

use core::fmt;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::flags::{Flag, Flags};
use super::queue::{ENDPOINTS, Ends, Entry, REMOVE};
use super::{AgentState, Lifecycle, Phase};
use crate::kill::{Container, PersistedContainer};
use crate::record::{Record, RecordInPlace, Strategy};

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
        let Persisted {
            strategy,
            record,
            stored,
            phase,
            agent,
            containers,
            endpoints_since,
            remove_since,
            force,
        } = p;
        let mut lifecycle = Lifecycle {
            record,
            ..Lifecycle::VACANT
        };
        lifecycle.restore(Rest {
            strategy,
            stored,
            phase,
            agent,
            containers,
            endpoints_since,
            remove_since,
            force,
        });
        lifecycle
    }
}

/// [`Persisted`] but for the record.
struct Rest<const C: usize> {
    strategy: Strategy,
    stored: bool,
    phase: Phase,
    agent: AgentState,
    containers: heapless::Vec<PersistedContainer, C>,
    endpoints_since: u16,
    remove_since: u16,
    force: bool,
}

impl<const F: usize, const C: usize, const L: usize> Lifecycle<F, C, L> {
    /// Sets every field but the record from what was persisted.
    fn restore(&mut self, p: Rest<C>) {
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
        let mut containers = [Container::VACANT; C];
        let mut places = [0u16; C];
        let count = Self::count_of(p.containers.len());
        for ((slot, place), c) in containers.iter_mut().zip(&mut places).zip(p.containers) {
            (*slot, *place) = c.into_parts();
        }
        // Every field named: one added later is not forgotten here.
        let Lifecycle {
            record: _,
            containers: to_containers,
            remembered_grace,
            ends,
            endpoints_next,
            remove_next,
            flags: to_flags,
            phase,
            count: to_count,
        } = self;
        *to_containers = containers;
        *remembered_grace = p.agent.remembered_grace;
        *ends = Ends::EMPTY;
        *endpoints_next = 0;
        *remove_next = 0;
        *to_flags = flags;
        *phase = p.phase;
        *to_count = count;
        self.enqueue_by_place(|entry: Entry| match entry {
            ENDPOINTS => p.endpoints_since,
            REMOVE => p.remove_since,
            e => places
                .get(usize::from(e).wrapping_sub(1))
                .copied()
                .unwrap_or(0),
        });
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl<'de, const F: usize, const C: usize, const L: usize> Deserialize<'de> for Lifecycle<F, C, L> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Persisted::deserialize(deserializer).map(Lifecycle::from)
    }

    /// Decodes into `place`, whatever it held, writing only what the input
    /// holds (see the module docs): the same lifecycle as
    /// [`deserialize`](Self::deserialize). If it fails, `place` is left
    /// partly written.
    fn deserialize_in_place<D: Deserializer<'de>>(
        deserializer: D,
        place: &mut Self,
    ) -> Result<(), D::Error> {
        deserializer.deserialize_struct("Persisted", FIELDS, InPlace(place))
    }
}

/// [`Persisted`]'s fields, in order.
const FIELDS: &[&str] = &[
    "strategy",
    "record",
    "stored",
    "phase",
    "agent",
    "containers",
    "endpoints_since",
    "remove_since",
    "force",
];

/// Decodes a [`Persisted`] into a lifecycle in place.
struct InPlace<'a, const F: usize, const C: usize, const L: usize>(&'a mut Lifecycle<F, C, L>);

impl<'de, const F: usize, const C: usize, const L: usize> Visitor<'de> for InPlace<'_, F, C, L> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("struct Persisted")
    }

    /// The fields in order (postcard): the record decoded into the
    /// lifecycle's, the rest beside it, then set.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let missing = |i| de::Error::invalid_length(i, &"struct Persisted with 9 elements");
        let strategy = seq.next_element()?.ok_or_else(|| missing(0))?;
        seq.next_element_seed(RecordInPlace(&mut self.0.record))?
            .ok_or_else(|| missing(1))?;
        let rest = Rest {
            strategy,
            stored: seq.next_element()?.ok_or_else(|| missing(2))?,
            phase: seq.next_element()?.ok_or_else(|| missing(3))?,
            agent: seq.next_element()?.ok_or_else(|| missing(4))?,
            containers: seq.next_element()?.ok_or_else(|| missing(5))?,
            endpoints_since: seq.next_element()?.ok_or_else(|| missing(6))?,
            remove_since: seq.next_element()?.ok_or_else(|| missing(7))?,
            force: seq.next_element()?.ok_or_else(|| missing(8))?,
        };
        self.0.restore(rest);
        Ok(())
    }

    /// Fields by name (JSON): decoded whole.
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        let persisted = Persisted::deserialize(de::value::MapAccessDeserializer::new(map))?;
        *self.0 = Lifecycle::from(persisted);
        Ok(())
    }
}
