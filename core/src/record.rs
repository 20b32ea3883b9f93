//! The stored object: the metadata deletion reads and writes, and the facts
//! about its type that decide how it is deleted.

use core::fmt;

use crate::name::{InlineName, NAME_CAPACITY};
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
#[non_exhaustive]
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
#[non_exhaustive]
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
#[non_exhaustive]
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
    /// Kubernetes' word for the phase, as `status.phase` spells it:
    /// `"Pending"`, `"Running"`, `"Succeeded"`, `"Failed"`, `"Unknown"`,
    /// and `""` for [`Unset`](PodPhase::Unset). [`FromStr`](core::str::FromStr)
    /// reads it back.
    ///
    /// ```
    /// use grace_core::PodPhase;
    ///
    /// assert_eq!(PodPhase::Succeeded.as_str(), "Succeeded");
    /// assert_eq!("Failed".parse(), Ok(PodPhase::Failed));
    /// assert_eq!("".parse(), Ok(PodPhase::Unset));
    /// assert!("failed".parse::<PodPhase>().is_err());
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            PodPhase::Pending => "Pending",
            PodPhase::Running => "Running",
            PodPhase::Succeeded => "Succeeded",
            PodPhase::Failed => "Failed",
            PodPhase::Unknown => "Unknown",
            PodPhase::Unset => "",
        }
    }

    /// Succeeded or Failed: nothing of the pod runs any more ([R20]).
    ///
    /// [R20]: crate::rules#r20
    #[inline]
    pub const fn is_terminal(self) -> bool {
        matches!(self, PodPhase::Succeeded | PodPhase::Failed)
    }
}

impl fmt::Display for PodPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `status.phase` that is none of Kubernetes' words (they are
/// case-sensitive); see [`PodPhase::as_str`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UnknownPodPhase;

impl fmt::Display for UnknownPodPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a pod phase (Pending, Running, Succeeded, Failed, Unknown or empty)")
    }
}

impl core::error::Error for UnknownPodPhase {}

impl core::str::FromStr for PodPhase {
    type Err = UnknownPodPhase;

    /// The phase [`as_str`](PodPhase::as_str) spells `s`: `""` is
    /// [`Unset`](PodPhase::Unset).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "Pending" => PodPhase::Pending,
            "Running" => PodPhase::Running,
            "Succeeded" => PodPhase::Succeeded,
            "Failed" => PodPhase::Failed,
            "Unknown" => PodPhase::Unknown,
            "" => PodPhase::Unset,
            _ => return Err(UnknownPodPhase),
        })
    }
}

/// The object's finalizers, in order, at most `F` of them, each of at most
/// `L` bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Finalizers<const F: usize, const L: usize = NAME_CAPACITY>(
    heapless::Vec<InlineName<L>, F>,
);

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

impl<const F: usize, const L: usize> Finalizers<F, L> {
    /// No finalizers.
    pub const fn new() -> Self {
        Finalizers(heapless::Vec::new())
    }

    /// Appends `name`; hands back an error when the list is full.
    pub fn push(&mut self, name: InlineName<L>) -> Result<(), TooManyFinalizers> {
        self.0.push(name).map_err(|_| TooManyFinalizers)
    }

    /// Appends the name `name`: a `&str` or a [`Name`](crate::Name).
    pub fn push_str(&mut self, name: &str) -> Result<(), FinalizerListError> {
        let name = InlineName::try_from_str(name).map_err(|_| FinalizerListError::NameTooLong)?;
        self.push(name).map_err(|_| FinalizerListError::TooMany)
    }

    /// Whether `name` is in the list.
    #[inline]
    pub fn contains(&self, name: &str) -> bool {
        self.0.iter().any(|n| n.as_bytes() == name.as_bytes())
    }

    /// Removes every occurrence of `name`; true if one was there.
    pub fn remove(&mut self, name: &str) -> bool {
        let before = self.0.len();
        self.0.retain(|n| n.as_bytes() != name.as_bytes());
        self.0.len() != before
    }

    /// The names, in order.
    #[inline]
    pub fn iter(&self) -> impl Iterator<Item = &InlineName<L>> {
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

impl<const F: usize, const L: usize> TryFrom<&[&str]> for Finalizers<F, L> {
    type Error = FinalizerListError;
    fn try_from(names: &[&str]) -> Result<Self, FinalizerListError> {
        let mut out = Finalizers::new();
        for name in names {
            let name =
                InlineName::try_from_str(name).map_err(|_| FinalizerListError::NameTooLong)?;
            out.push(name).map_err(|_| FinalizerListError::TooMany)?;
        }
        Ok(out)
    }
}

/// Why a list of finalizer names does not fit a record.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum FinalizerListError {
    /// A name is longer than the names' capacity.
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
/// reads ([R18]–[R21]). `F` is the finalizer capacity, `L` the longest uid
/// or finalizer name in bytes ([`NAME_CAPACITY`], every Kubernetes-legal
/// name, by default).
///
/// Built with [`Record::new`] or [`Record::builder`], then its fields set
/// (more may come).
///
/// [R18]: crate::rules#r18
/// [R21]: crate::rules#r21
#[derive(Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Record<const F: usize, const L: usize = NAME_CAPACITY> {
    /// Identity; preconditions and the agent's final delete check it.
    pub uid: InlineName<L>,
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
    pub finalizers: Finalizers<F, L>,
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

// `clone_from` copies only what the source holds: a record is about 5 KB
// (room for `F` finalizer names of `L` bytes), nearly all of it unused.
impl<const F: usize, const L: usize> Clone for Record<F, L> {
    fn clone(&self) -> Self {
        Record {
            uid: self.uid.clone(),
            resource_version: self.resource_version,
            generation: self.generation,
            deletion_timestamp: self.deletion_timestamp,
            deletion_grace_period_seconds: self.deletion_grace_period_seconds,
            finalizers: self.finalizers.clone(),
            scheduled: self.scheduled,
            phase: self.phase,
            termination_grace_period_seconds: self.termination_grace_period_seconds,
        }
    }

    fn clone_from(&mut self, source: &Self) {
        // Destructured whole: a new field cannot be forgotten here.
        let Record {
            uid,
            resource_version,
            generation,
            deletion_timestamp,
            deletion_grace_period_seconds,
            finalizers,
            scheduled,
            phase,
            termination_grace_period_seconds,
        } = source;
        // Copied only if they differ (a slot written again for the same
        // object): the uid and the finalizers are most of the bytes.
        if self.uid != *uid {
            self.uid.clone_from(uid);
        }
        self.resource_version = *resource_version;
        self.generation = *generation;
        self.deletion_timestamp = *deletion_timestamp;
        self.deletion_grace_period_seconds = *deletion_grace_period_seconds;
        if self.finalizers != *finalizers {
            self.finalizers.clone_from(finalizers);
        }
        self.scheduled = *scheduled;
        self.phase = *phase;
        self.termination_grace_period_seconds = *termination_grace_period_seconds;
    }
}

impl<const F: usize, const L: usize> Record<F, L> {
    /// The placeholder in a free table slot: all zero bits, so that a
    /// `static` table needs no initial image.
    pub(crate) const VACANT: Self = Record {
        uid: InlineName::new(),
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
    /// generation 1 and resource version 1. For anything else (unscheduled,
    /// finished, another grace, finalizers) see [`Record::builder`].
    pub fn new(uid: InlineName<L>) -> Self {
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

impl<const F: usize, const L: usize> Record<F, L> {
    /// A record built step by step, starting from [`Record::new`]'s live,
    /// scheduled, running pod with 30 s of grace; the uid is a `&str` or a
    /// [`Name`](crate::Name). Errors (a name too long, too many finalizers) are reported
    /// once, by [`build`](RecordBuilder::build).
    ///
    /// ```
    /// use grace_core::{PodPhase, Record};
    ///
    /// let record = Record::<4>::builder("uid-1")
    ///     .grace_period_seconds(10)
    ///     .finalizer("example.com/backup")
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(record.termination_grace_period_seconds, Some(10));
    /// assert!(record.scheduled && record.finalizers.contains("example.com/backup"));
    ///
    /// let pending = Record::<4>::builder("uid-2").unscheduled().phase(PodPhase::Pending).build().unwrap();
    /// assert!(!pending.scheduled);
    /// ```
    pub fn builder<N: TryInto<InlineName<L>>>(uid: N) -> RecordBuilder<F, L> {
        RecordBuilder {
            record: uid
                .try_into()
                .map(Record::new)
                .map_err(|_| crate::Error::NameTooLong),
        }
    }
}

/// Builds a [`Record`] (see [`Record::builder`]).
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct RecordBuilder<const F: usize, const L: usize = NAME_CAPACITY> {
    record: Result<Record<F, L>, crate::Error>,
}

impl<const F: usize, const L: usize> RecordBuilder<F, L> {
    fn with(mut self, change: impl FnOnce(&mut Record<F, L>) -> Result<(), crate::Error>) -> Self {
        if let Ok(record) = &mut self.record
            && let Err(e) = change(record)
        {
            self.record = Err(e);
        }
        self
    }

    /// `spec.terminationGracePeriodSeconds` (30 unless set).
    pub fn grace_period_seconds(self, seconds: i64) -> Self {
        self.with(|r| {
            r.termination_grace_period_seconds = Some(seconds);
            Ok(())
        })
    }

    /// Not bound to a node (no agent runs it): a delete removes it at once
    /// (R19).
    pub fn unscheduled(self) -> Self {
        self.with(|r| {
            r.scheduled = false;
            Ok(())
        })
    }

    /// `status.phase` (`Running` unless set); a finished pod (Succeeded,
    /// Failed) has nothing to stop (R20).
    pub fn phase(self, phase: PodPhase) -> Self {
        self.with(|r| {
            r.phase = phase;
            Ok(())
        })
    }

    /// Appends a finalizer: a `&str` or a [`Name`](crate::Name).
    pub fn finalizer<N: TryInto<InlineName<L>>>(self, name: N) -> Self {
        self.with(|r| {
            let name = name.try_into().map_err(|_| crate::Error::NameTooLong)?;
            Ok(r.finalizers.push(name)?)
        })
    }

    /// The resource version and generation the record starts with (1 and 1
    /// unless set).
    pub fn versions(self, resource_version: u64, generation: i64) -> Self {
        self.with(|r| {
            r.resource_version = resource_version;
            r.generation = generation;
            Ok(())
        })
    }

    /// The record, or the first error met.
    pub fn build(self) -> Result<Record<F, L>, crate::Error> {
        self.record
    }
}

/// Decoding a record into one in place: the record is about 5 KB (room for
/// `F` finalizer names of `L` bytes), and a decoded value is moved whole
/// through every layer that builds it; decoded in place, only what the
/// input holds is written ([`Lifecycle`](crate::Lifecycle)'s
/// `deserialize_in_place`).
#[cfg(feature = "serde")]
pub(crate) struct RecordInPlace<'a, const F: usize, const L: usize>(
    pub(crate) &'a mut Record<F, L>,
);

#[cfg(feature = "serde")]
const RECORD_FIELDS: &[&str] = &[
    "uid",
    "resource_version",
    "generation",
    "deletion_timestamp",
    "deletion_grace_period_seconds",
    "finalizers",
    "scheduled",
    "phase",
    "termination_grace_period_seconds",
];

#[cfg(feature = "serde")]
impl<'de, const F: usize, const L: usize> serde::de::DeserializeSeed<'de>
    for RecordInPlace<'_, F, L>
{
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_struct("Record", RECORD_FIELDS, self)
    }
}

#[cfg(feature = "serde")]
impl<'de, const F: usize, const L: usize> serde::de::Visitor<'de> for RecordInPlace<'_, F, L> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("struct Record")
    }

    /// The fields in order (a compact format such as postcard), each
    /// written into the record.
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let record = self.0;
        let missing = |i| serde::de::Error::invalid_length(i, &"struct Record with 9 elements");
        record.uid = seq.next_element()?.ok_or_else(|| missing(0))?;
        record.resource_version = seq.next_element()?.ok_or_else(|| missing(1))?;
        record.generation = seq.next_element()?.ok_or_else(|| missing(2))?;
        record.deletion_timestamp = seq.next_element()?.ok_or_else(|| missing(3))?;
        record.deletion_grace_period_seconds = seq.next_element()?.ok_or_else(|| missing(4))?;
        seq.next_element_seed(FinalizersInPlace(&mut record.finalizers))?
            .ok_or_else(|| missing(5))?;
        record.scheduled = seq.next_element()?.ok_or_else(|| missing(6))?;
        record.phase = seq.next_element()?.ok_or_else(|| missing(7))?;
        record.termination_grace_period_seconds = seq.next_element()?.ok_or_else(|| missing(8))?;
        Ok(())
    }

    /// Fields by name (a self-describing format such as JSON): decoded as
    /// a whole record.
    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        use serde::Deserialize;
        *self.0 = Record::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
        Ok(())
    }
}

/// The finalizer names decoded into a list in place (see [`RecordInPlace`]).
#[cfg(feature = "serde")]
struct FinalizersInPlace<'a, const F: usize, const L: usize>(&'a mut Finalizers<F, L>);

#[cfg(feature = "serde")]
impl<'de, const F: usize, const L: usize> serde::de::DeserializeSeed<'de>
    for FinalizersInPlace<'_, F, L>
{
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

#[cfg(feature = "serde")]
impl<'de, const F: usize, const L: usize> serde::de::Visitor<'de> for FinalizersInPlace<'_, F, L> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a list of at most {F} finalizer names")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let list = &mut (self.0).0;
        list.clear();
        while let Some(name) = seq.next_element()? {
            list.push(name).map_err(|_| {
                serde::de::Error::invalid_length(
                    F,
                    &"no more finalizer names than the record holds",
                )
            })?;
        }
        Ok(())
    }
}
