//! The serialized form of a [`Lifecycle`]: every field spelled out, apart
//! from how memory packs them, so that a saved lifecycle reads plainly.
//! Written from borrowed fields ([`PersistedRef`]: no copy of the record),
//! read into owned ones ([`Persisted`]).

use serde::{Deserialize, Serialize, Serializer};

use super::flags::{Flag, Flags};
use super::{AgentState, Lifecycle, Phase};
use crate::kill::Container;
use crate::record::{Record, Strategy};

#[derive(Deserialize)]
pub(super) struct Persisted<const F: usize, const C: usize> {
    strategy: Strategy,
    record: Record<F>,
    stored: bool,
    phase: Phase,
    agent: AgentState,
    containers: heapless::Vec<Container, C>,
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
struct PersistedRef<'a, const F: usize> {
    strategy: Strategy,
    record: &'a Record<F>,
    stored: bool,
    phase: Phase,
    agent: AgentState,
    containers: &'a [Container],
    endpoints_since: u16,
    remove_since: u16,
    force: bool,
}

impl<const F: usize, const C: usize> Serialize for Lifecycle<F, C> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        PersistedRef {
            strategy: self.strategy(),
            record: &self.record,
            stored: self.is_stored(),
            phase: self.phase,
            agent: self.agent(),
            containers: self.containers(),
            endpoints_since: self.endpoints_since,
            remove_since: self.remove_since,
            force: self.flags.has(Flag::Force),
        }
        .serialize(serializer)
    }
}

impl<const F: usize, const C: usize> From<Persisted<F, C>> for Lifecycle<F, C> {
    fn from(p: Persisted<F, C>) -> Self {
        let mut flags = Flags::new(p.strategy);
        flags.set(Flag::Stored, p.stored);
        flags.set_link(p.agent.link);
        flags.set(Flag::Killing, p.agent.killing);
        flags.set(Flag::DeletionSeen, p.agent.deletion_seen);
        flags.set(Flag::Evicted, p.agent.evicted);
        flags.set(Flag::OwesReport, p.agent.owes_report);
        flags.set(Flag::Reported, p.agent.reported);
        flags.set(Flag::Force, p.force);
        let mut containers = [Container::VACANT; C];
        for (slot, c) in containers.iter_mut().zip(&p.containers) {
            *slot = *c;
        }
        Lifecycle {
            record: p.record,
            containers,
            remembered_grace: p.agent.remembered_grace,
            endpoints_since: p.endpoints_since,
            remove_since: p.remove_since,
            flags,
            phase: p.phase,
            count: Self::count_of(p.containers.len()),
        }
    }
}
