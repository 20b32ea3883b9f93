//! The stored object: the metadata deletion reads and writes, and the facts
//! about its type that decide how it is deleted.

use core::fmt;

use crate::name::Name;
use crate::time::Timestamp;

/// The finalizer the garbage collector uses to orphan dependents.
pub const FINALIZER_ORPHAN: &str = "orphan";
/// The finalizer the garbage collector uses for foreground deletion.
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";

/// How the type is deleted (its REST strategy, R11).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    all(feature = "arbitrary", not(target_os = "none")),
    derive(arbitrary::Arbitrary)
)]
pub enum Kind {
    /// A pod: graceful strategy, has containers and an agent.
    #[default]
    Pod,
    /// A type with no graceful strategy: removed at once unless finalizers
    /// hold it ([R11], [R30]–[R32]).
    ///
    /// [R11]: crate::rules#r11
    /// [R30]: crate::rules#r30
    /// [R32]: crate::rules#r32
    Generic,
}

/// The type's default garbage-collection policy (R37, R38).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    all(feature = "arbitrary", not(target_os = "none")),
    derive(arbitrary::Arbitrary)
)]
pub enum GcPolicy {
    /// Delete dependents in the background (the usual default; [R38]'s trap:
    /// this is *not* foreground).
    ///
    /// [R38]: crate::rules#r38
    #[default]
    DeleteDependents,
    /// Orphan dependents unless told otherwise.
    OrphanDependents,
    /// The type takes no part in garbage collection.
    Unsupported,
}

/// Facts about the object's type that steer deletion.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    all(feature = "arbitrary", not(target_os = "none")),
    derive(arbitrary::Arbitrary)
)]
pub struct Strategy {
    /// Graceful (pod) or not.
    pub kind: Kind,
    /// The default propagation when a request names none.
    pub default_gc_policy: GcPolicy,
    /// Whether the store manages the `orphan` / `foregroundDeletion`
    /// finalizers at all ([R36]; kube-apiserver's default is on).
    ///
    /// [R36]: crate::rules#r36
    pub gc_enabled: bool,
}

impl Default for Strategy {
    fn default() -> Self {
        Strategy::POD
    }
}

impl Strategy {
    /// Pods as kube-apiserver serves them.
    pub const POD: Strategy = Strategy {
        kind: Kind::Pod,
        default_gc_policy: GcPolicy::DeleteDependents,
        gc_enabled: true,
    };
    /// A non-graceful type such as a ConfigMap.
    pub const GENERIC: Strategy = Strategy {
        kind: Kind::Generic,
        default_gc_policy: GcPolicy::DeleteDependents,
        gc_enabled: true,
    };
}

/// A pod's `status.phase`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    all(feature = "arbitrary", not(target_os = "none")),
    derive(arbitrary::Arbitrary)
)]
pub enum PodPhase {
    /// Accepted, not all containers started.
    Pending,
    /// Bound and running.
    #[default]
    Running,
    /// Every container ended successfully.
    Succeeded,
    /// Every container ended, at least one in failure.
    Failed,
    /// The agent cannot be reached.
    Unknown,
    /// No phase reported yet (`""`).
    Unset,
}

impl PodPhase {
    /// Succeeded or Failed: nothing of the pod runs any more ([R20]).
    ///
    /// [R20]: crate::rules#r20
    #[inline]
    pub const fn is_terminal(self) -> bool {
        matches!(self, PodPhase::Succeeded | PodPhase::Failed)
    }
}

/// The object's finalizers, in order, at most `F` of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Finalizers<const F: usize>(heapless::Vec<Name, F>);

/// More finalizers than the record's capacity.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TooManyFinalizers;

impl fmt::Display for TooManyFinalizers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("more finalizers than the record can hold")
    }
}

impl core::error::Error for TooManyFinalizers {}

impl<const F: usize> Finalizers<F> {
    /// No finalizers.
    pub const fn new() -> Self {
        Finalizers(heapless::Vec::new())
    }

    /// Appends `name`; hands back an error when the list is full.
    pub fn push(&mut self, name: Name) -> Result<(), TooManyFinalizers> {
        self.0.push(name).map_err(|_| TooManyFinalizers)
    }

    /// Whether `name` is in the list.
    #[inline]
    pub fn contains(&self, name: &str) -> bool {
        self.0.iter().any(|n| n.as_str() == name)
    }

    /// Removes every occurrence of `name`; true if one was there.
    pub fn remove(&mut self, name: &str) -> bool {
        let before = self.0.len();
        self.0.retain(|n| n.as_str() != name);
        self.0.len() != before
    }

    /// The names, in order.
    #[inline]
    pub fn iter(&self) -> impl Iterator<Item = &Name> {
        self.0.iter()
    }

    /// How many there are.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when nothing holds the object.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<const F: usize> TryFrom<&[&str]> for Finalizers<F> {
    type Error = FinalizerListError;
    fn try_from(names: &[&str]) -> Result<Self, FinalizerListError> {
        let mut out = Finalizers::new();
        for name in names {
            let name = Name::try_from_str(name).map_err(|_| FinalizerListError::NameTooLong)?;
            out.push(name).map_err(|_| FinalizerListError::TooMany)?;
        }
        Ok(out)
    }
}

/// Why a list of finalizer names does not fit a record.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FinalizerListError {
    /// A name is longer than [`crate::NAME_CAPACITY`].
    NameTooLong,
    /// More names than the record's capacity.
    TooMany,
}

impl fmt::Display for FinalizerListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FinalizerListError::NameTooLong => crate::name::NameTooLong.fmt(f),
            FinalizerListError::TooMany => TooManyFinalizers.fmt(f),
        }
    }
}

impl core::error::Error for FinalizerListError {}

/// The stored object, as far as deletion is concerned: identity, the
/// deletion fields, finalizers, and the pod fields the grace computation
/// reads ([R18]–[R21]). `F` is the finalizer capacity.
///
/// [R18]: crate::rules#r18
/// [R21]: crate::rules#r21
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Record<const F: usize> {
    /// Identity; preconditions and the agent's final delete check it.
    pub uid: Name,
    /// Bumped by the store on every write.
    pub resource_version: u64,
    /// Bumped once when deletion starts, if positive ([R25], [R31]).
    ///
    /// [R25]: crate::rules#r25
    /// [R31]: crate::rules#r31
    pub generation: i64,
    /// Set once deletion is accepted; `None` while live.
    pub deletion_timestamp: Option<Timestamp>,
    /// The grace the API chose; may hold a legacy negative ([R10]).
    ///
    /// [R10]: crate::rules#r10
    pub deletion_grace_period_seconds: Option<i64>,
    /// While non-empty the object is never removed (invariant 4).
    pub finalizers: Finalizers<F>,
    /// Whether the pod is bound to a node (`spec.nodeName != ""`, [R19]).
    ///
    /// [R19]: crate::rules#r19
    pub scheduled: bool,
    /// `status.phase` ([R20]).
    ///
    /// [R20]: crate::rules#r20
    pub phase: PodPhase,
    /// `spec.terminationGracePeriodSeconds`; the API defaults it to 30.
    pub termination_grace_period_seconds: Option<i64>,
}

impl<const F: usize> Record<F> {
    /// The placeholder in a free table slot: all zero bits, so that a
    /// `static` table needs no initial image.
    pub(crate) const VACANT: Self = Record {
        uid: Name::new(),
        resource_version: 0,
        generation: 0,
        deletion_timestamp: None,
        deletion_grace_period_seconds: None,
        finalizers: Finalizers::new(),
        scheduled: false,
        phase: PodPhase::Pending,
        termination_grace_period_seconds: None,
    };

    /// A live, scheduled, running pod with the API's default grace of 30 s,
    /// generation 1 and resource version 1.
    pub fn new(uid: Name) -> Self {
        Record {
            uid,
            resource_version: 1,
            generation: 1,
            deletion_timestamp: None,
            deletion_grace_period_seconds: None,
            finalizers: Finalizers::new(),
            scheduled: true,
            phase: PodPhase::Running,
            termination_grace_period_seconds: Some(30),
        }
    }
}
