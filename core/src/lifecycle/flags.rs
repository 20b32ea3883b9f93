//! The lifecycle's small fields in one 16-bit word: the type's deletion
//! strategy, whether the record is stored, the agent's link and flags,
//! whether `RemoveEndpoints` and `Remove` are owed, and whether an owed
//! removal is forced. Packed so that the timing state of a one-container
//! object fits 48 bytes (`tests/size.rs`); the serialized form spells every
//! field out (`persist.rs`).

use core::fmt;

use crate::lifecycle::Link;
use crate::record::{GcPolicy, Kind, Strategy};

/// One yes/no fact kept in [`Flags`].
#[derive(Copy, Clone)]
pub(crate) enum Flag {
    /// The record is still in storage.
    Stored,
    /// The agent has started the kill.
    Killing,
    /// The agent has seen a deletion (a timestamp, or the record gone).
    DeletionSeen,
    /// An eviction was ordered.
    Evicted,
    /// The agent owes the API a report, to be sent once it is connected.
    OwesReport,
    /// The agent's final report has been made.
    Reported,
    /// The owed `Remove` action is a force removal ([D4]).
    ///
    /// [D4]: crate::rules#d4
    Force,
    /// `RemoveEndpoints` is owed.
    EndpointsOwed,
    /// `Remove` is owed.
    RemoveOwed,
}

impl Flag {
    #[inline]
    const fn bit(self) -> u16 {
        match self {
            Flag::Stored => 1 << 4,
            Flag::Killing => 1 << 7,
            Flag::DeletionSeen => 1 << 8,
            Flag::Evicted => 1 << 9,
            Flag::OwesReport => 1 << 10,
            Flag::Reported => 1 << 11,
            Flag::Force => 1 << 12,
            Flag::EndpointsOwed => 1 << 13,
            Flag::RemoveOwed => 1 << 14,
        }
    }
}

/// Bit 0: a generic (non-pod) type.
const GENERIC: u16 = 1;
/// Bits 1–2: the default garbage-collection policy.
const GC_POLICY_SHIFT: u32 = 1;
/// Bit 3: the store manages garbage-collection finalizers.
const GC_ENABLED: u16 = 1 << 3;
/// Bits 5–6: the agent's link.
const LINK_SHIFT: u32 = 5;
const TWO_BITS: u16 = 0b11;

/// See the module documentation. All zero bits is a valid (vacant) value.
#[derive(Copy, Clone, PartialEq, Eq)]
pub(crate) struct Flags(u16);

impl Flags {
    /// No fact set: a pod type without GC, not stored, connected.
    pub(crate) const VACANT: Flags = Flags(0);

    /// A stored object of type `strategy` with a connected agent.
    #[inline]
    pub(crate) const fn new(strategy: Strategy) -> Self {
        let kind = match strategy.kind {
            Kind::Pod => 0,
            Kind::Generic => GENERIC,
        };
        let policy: u16 = match strategy.default_gc_policy {
            GcPolicy::DeleteDependents => 0,
            GcPolicy::OrphanDependents => 1,
            GcPolicy::Unsupported => 2,
        };
        let gc = if strategy.gc_enabled { GC_ENABLED } else { 0 };
        Flags(kind | (policy << GC_POLICY_SHIFT) | gc | Flag::Stored.bit())
    }

    #[inline]
    pub(crate) const fn strategy(self) -> Strategy {
        Strategy {
            kind: if self.0 & GENERIC != 0 {
                Kind::Generic
            } else {
                Kind::Pod
            },
            default_gc_policy: match (self.0 >> GC_POLICY_SHIFT) & TWO_BITS {
                0 => GcPolicy::DeleteDependents,
                1 => GcPolicy::OrphanDependents,
                _ => GcPolicy::Unsupported,
            },
            gc_enabled: self.0 & GC_ENABLED != 0,
        }
    }

    #[inline]
    pub(crate) const fn is_pod(self) -> bool {
        self.0 & GENERIC == 0
    }

    #[inline]
    pub(crate) const fn link(self) -> Link {
        match (self.0 >> LINK_SHIFT) & TWO_BITS {
            0 => Link::Connected,
            1 => Link::Lost,
            _ => Link::Fenced,
        }
    }

    #[inline]
    pub(crate) fn set_link(&mut self, link: Link) {
        let bits: u16 = match link {
            Link::Connected => 0,
            Link::Lost => 1,
            Link::Fenced => 2,
        };
        self.0 = (self.0 & !(TWO_BITS << LINK_SHIFT)) | (bits << LINK_SHIFT);
    }

    #[inline]
    pub(crate) const fn has(self, flag: Flag) -> bool {
        self.0 & flag.bit() != 0
    }

    #[inline]
    pub(crate) fn set(&mut self, flag: Flag, on: bool) {
        if on {
            self.0 |= flag.bit();
        } else {
            self.0 &= !flag.bit();
        }
    }
}

impl fmt::Debug for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Flags")
            .field("strategy", &self.strategy())
            .field("stored", &self.has(Flag::Stored))
            .field("link", &self.link())
            .field("killing", &self.has(Flag::Killing))
            .field("deletion_seen", &self.has(Flag::DeletionSeen))
            .field("evicted", &self.has(Flag::Evicted))
            .field("owes_report", &self.has(Flag::OwesReport))
            .field("reported", &self.has(Flag::Reported))
            .field("force", &self.has(Flag::Force))
            .field("endpoints_owed", &self.has(Flag::EndpointsOwed))
            .field("remove_owed", &self.has(Flag::RemoveOwed))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_strategy_and_link_round_trips() {
        for kind in [Kind::Pod, Kind::Generic] {
            for default_gc_policy in [
                GcPolicy::DeleteDependents,
                GcPolicy::OrphanDependents,
                GcPolicy::Unsupported,
            ] {
                for gc_enabled in [false, true] {
                    let strategy = Strategy {
                        kind,
                        default_gc_policy,
                        gc_enabled,
                    };
                    let mut flags = Flags::new(strategy);
                    for link in [Link::Lost, Link::Fenced, Link::Connected] {
                        flags.set_link(link);
                        assert_eq!(flags.link(), link);
                        assert_eq!(flags.strategy(), strategy);
                        assert!(flags.has(Flag::Stored));
                    }
                }
            }
        }
    }

    #[test]
    fn flags_are_independent_bits() {
        let all = [
            Flag::Stored,
            Flag::Killing,
            Flag::DeletionSeen,
            Flag::Evicted,
            Flag::OwesReport,
            Flag::Reported,
            Flag::Force,
            Flag::EndpointsOwed,
            Flag::RemoveOwed,
        ];
        for (i, flag) in all.iter().enumerate() {
            let mut flags = Flags::VACANT;
            flags.set_link(Link::Fenced);
            flags.set(*flag, true);
            for (j, other) in all.iter().enumerate() {
                assert_eq!(flags.has(*other), i == j);
            }
            assert_eq!(flags.link(), Link::Fenced);
            assert_eq!(flags.strategy(), Flags::VACANT.strategy());
            flags.set(*flag, false);
            assert!(all.iter().all(|f| !flags.has(*f)));
        }
    }
}
