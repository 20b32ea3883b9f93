//! Input generation: `Arbitrary` wrappers biased towards the values where
//! the rules have edges (zero, one, negatives, the Go overflow boundary of
//! R89–R91, the RFC 3339 maximum of D2, the ends of `i64` and `u64`), and
//! the description of one stored object that the lifecycle and table
//! targets start from.

use arbitrary::{Arbitrary, Result, Unstructured};
use grace_core::{
    ContainerSpec, DeleteOptions, Finalizers, GcPolicy, Kind, Lifecycle, Name, PodPhase,
    Preconditions, Propagation, Record, Strategy, Timestamp, WallTime,
};

/// D2: 9999-12-31T23:59:59Z in unix seconds. Written out here rather than
/// taken from the core, so that a change of the core's constant is noticed.
pub const MAX_TS: i64 = 253_402_300_799;

/// A grace value in seconds (any `i64`), biased to the edges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grace(pub i64);

impl<'a> Arbitrary<'a> for Grace {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let pick: u8 = u.arbitrary()?;
        Ok(Grace(match pick % 20 {
            0 | 1 => 0,
            2 => 1,
            3 => 2,
            4 => 30,
            5 => -1,
            6 => i64::MIN,
            7 => i64::MAX,
            8 => i64::MAX - 1,
            // R89/R90: the last value Go's nanosecond product holds, the
            // first it wraps on, and int64(time.Hour) from resttest.go.
            9 => 9_223_372_036,
            10 => 9_223_372_037,
            11 => 3_600_000_000_000,
            12 => MAX_TS,
            13 => u.int_in_range(-3..=3)?,
            14..=17 => u.int_in_range(0..=60)?,
            18 => u.int_in_range(0..=100_000)?,
            _ => u.arbitrary()?,
        }))
    }
}

/// A wall-clock instant in unix milliseconds, biased to the edges of D2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WallMs(pub i64);

impl<'a> Arbitrary<'a> for WallMs {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let pick: u8 = u.arbitrary()?;
        Ok(WallMs(match pick % 12 {
            // On a whole second often: R16's "strictly before now" and
            // R31's "strictly after now" have their edge there.
            0 | 1 => 1_700_000_000_000 + 1000 * u.int_in_range(0..=100_000)?,
            2 => 1_700_000_000_000 + u.int_in_range(0..=100_000_000)?,
            3 => 0,
            4 => u.int_in_range(-4_000_000_000_000..=0)?,
            5 => MAX_TS * 1000 - u.int_in_range(0..=100_000)?,
            6 => MAX_TS * 1000 + u.int_in_range(0..=100_000)?,
            7 => i64::MAX - u.int_in_range(0..=100_000)?,
            8 => i64::MIN + u.int_in_range(0..=100_000)?,
            9 => u.int_in_range(0..=4_000_000_000_000)?,
            _ => u.arbitrary()?,
        }))
    }
}

/// A monotonic instant in milliseconds, biased to the epoch and the end of time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MonoMs(pub u64);

impl<'a> Arbitrary<'a> for MonoMs {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let pick: u8 = u.arbitrary()?;
        Ok(MonoMs(match pick % 8 {
            0..=2 => 0,
            3 => u.int_in_range(0..=100_000)?,
            4 => u.int_in_range(0..=1_000_000_000_000)?,
            5 => u64::MAX - u.int_in_range(0..=100_000)?,
            6 => u64::MAX,
            _ => u.arbitrary()?,
        }))
    }
}

/// A precondition relative to the record at the time of the request.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pre {
    /// Not given.
    Absent,
    /// The record's current value.
    Matching,
    /// Some other value.
    Mismatching,
}

/// The grace of a delete request: a value, or one chosen against the
/// stored deletion so that R14–R16's edges are hit often.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub enum GraceSel {
    /// No `gracePeriodSeconds` (R1, R17).
    Absent,
    /// This value.
    Value(Grace),
    /// The stored grace minus `k` (R14 at 0, a shortening above).
    BelowStored(u8),
    /// The grace whose R15 timestamp lands `d` seconds from the current
    /// second: `d = 0` is R16's equality edge on a whole-second clock,
    /// `d < 0` is clamped. `d` is within ±2 for most values of the byte.
    LandsAt(u8),
}

impl GraceSel {
    /// The grace meant, against `record` at `now_ms`.
    pub fn resolve<const F: usize>(&self, record: &Record<F>, now_ms: i64) -> Option<i64> {
        let stored = record.deletion_grace_period_seconds.unwrap_or(30);
        match *self {
            GraceSel::Absent => None,
            GraceSel::Value(g) => Some(g.0),
            GraceSel::BelowStored(k) => Some(stored.saturating_sub(i64::from(k))),
            GraceSel::LandsAt(d) => {
                let ts = record
                    .deletion_timestamp
                    .map_or(0, |t| i128::from(t.as_unix_seconds()));
                let now_s = i128::from(now_ms).div_euclid(1000);
                let d: i128 = if d < 200 {
                    i128::from(d % 5) - 2
                } else {
                    i128::from(d) - 228
                };
                let g = now_s - ts + i128::from(stored) + d;
                Some(i64::try_from(g).unwrap_or(if g < 0 { i64::MIN } else { i64::MAX }))
            }
        }
    }
}

/// A delete request as the targets send it: structured so that matching
/// preconditions are common, with every option the API has.
#[derive(Arbitrary, Clone, Debug)]
pub struct DeleteSpec {
    /// `gracePeriodSeconds`.
    pub grace: GraceSel,
    /// `preconditions.uid`.
    pub uid: Pre,
    /// `preconditions.resourceVersion`.
    pub resource_version: Pre,
    /// `propagationPolicy` (Unrecognized is invalid, R6).
    pub propagation: Option<Propagation>,
    /// `orphanDependents` (with a policy: invalid, R5).
    pub orphan_dependents: Option<bool>,
    /// `dryRun: ["All"]`.
    pub dry_run: bool,
}

impl DeleteSpec {
    /// The options for a request against `record` at `now_ms`.
    pub fn options<const F: usize>(&self, record: &Record<F>, now_ms: i64) -> DeleteOptions {
        let uid = match self.uid {
            Pre::Absent => None,
            Pre::Matching => Some(record.uid.clone()),
            Pre::Mismatching => Some(name(OTHER_UID)),
        };
        let resource_version = match self.resource_version {
            Pre::Absent => None,
            Pre::Matching => Some(record.resource_version),
            Pre::Mismatching => Some(record.resource_version ^ 1),
        };
        DeleteOptions::default()
            .with_grace_period(self.grace.resolve(record, now_ms))
            .with_preconditions(Preconditions {
                uid,
                resource_version,
            })
            .with_propagation_policy(self.propagation)
            .with_orphan_dependents(self.orphan_dependents)
            .with_dry_run(self.dry_run)
    }
}

/// The uid every generated object has.
pub const UID: &str = "uid-1";
/// A uid no generated object has.
pub const OTHER_UID: &str = "uid-2";

/// A short name (the callers only pass constants that fit).
pub fn name(s: &str) -> Name {
    Name::try_from(s).unwrap_or_default()
}

/// A finalizer to remove: one the record has (by position), or any name.
#[derive(Arbitrary, Clone, Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "fuzz inputs: a name or options inline, of any Kubernetes length"
)]
pub enum FinalizerSel {
    /// The record's finalizer at this position (modulo the count).
    Existing(u8),
    /// Any name (the core's `Arbitrary` picks meaningful ones often).
    Named(Name),
}

impl FinalizerSel {
    /// The name meant, against `record`.
    pub fn resolve<const F: usize>(&self, record: &Record<F>) -> Name {
        match self {
            FinalizerSel::Existing(i) => {
                let n = record.finalizers.len();
                if n == 0 {
                    name("example.com/none")
                } else {
                    record
                        .finalizers
                        .iter()
                        .nth(usize::from(*i) % n)
                        .cloned()
                        .unwrap_or_default()
                }
            }
            FinalizerSel::Named(n) => n.clone(),
        }
    }
}

/// The stored object a lifecycle starts from.
#[derive(Clone, Debug)]
pub struct ObjectSpec {
    /// The type's deletion strategy.
    pub strategy: Strategy,
    /// Bound to a node (R19).
    pub scheduled: bool,
    /// `status.phase` (R20).
    pub phase: PodPhase,
    /// `spec.terminationGracePeriodSeconds`.
    pub tgps: Option<Grace>,
    /// `metadata.generation`.
    pub generation: i64,
    /// `metadata.resourceVersion`.
    pub resource_version: u64,
    /// Finalizers (at most the capacity the caller builds with).
    pub finalizers: Vec<Name>,
    /// Containers (at most the capacity the caller builds with).
    pub containers: Vec<ContainerSpec>,
    /// A deletion already stored: the timestamp in seconds from the start
    /// second (signed), and its grace (possibly nil, R13, or negative, R10).
    pub seeded: Option<(Grace, bool, Option<Grace>)>,
}

/// Finalizer and container counts the object generator produces at most.
pub const MAX_FINALIZERS: usize = 4;
/// See [`MAX_FINALIZERS`].
pub const MAX_CONTAINERS: usize = 4;

impl<'a> Arbitrary<'a> for ObjectSpec {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let kind = if u.ratio(1u8, 5)? {
            Kind::Generic
        } else {
            Kind::Pod
        };
        let default_gc_policy = match u.int_in_range(0u8..=5)? {
            0 => GcPolicy::OrphanDependents,
            1 => GcPolicy::Unsupported,
            _ => GcPolicy::DeleteDependents,
        };
        let gc_enabled = !u.ratio(1u8, 6)?;
        let scheduled = !u.ratio(1u8, 6)?;
        let phase = if u.ratio(1u8, 2)? {
            PodPhase::Running
        } else {
            u.arbitrary()?
        };
        let tgps = match u.int_in_range(0u8..=3)? {
            0 => None,
            1 => Some(Grace(30)),
            _ => Some(u.arbitrary()?),
        };
        let generation = match u.int_in_range(0u8..=6)? {
            0 => 0,
            1 | 2 => 1,
            3 => -1,
            4 => i64::MAX,
            _ => u.arbitrary()?,
        };
        let resource_version = match u.int_in_range(0u8..=3)? {
            0 => u64::MAX,
            1 => u.arbitrary()?,
            _ => u.int_in_range(0..=5)?,
        };
        let nf = u.int_in_range(0..=MAX_FINALIZERS)?;
        let mut finalizers = Vec::with_capacity(nf);
        for _ in 0..nf {
            finalizers.push(u.arbitrary()?);
        }
        let nc = u.int_in_range(0..=MAX_CONTAINERS)?;
        let mut containers = Vec::with_capacity(nc);
        for _ in 0..nc {
            containers.push(ContainerSpec {
                pre_stop: u.arbitrary()?,
                sidecar: u.ratio(1u8, 4)?,
                stopped: u.ratio(1u8, 8)?,
            });
        }
        let seeded = if u.ratio(1u8, 4)? {
            Some((u.arbitrary()?, u.arbitrary()?, u.arbitrary()?))
        } else {
            None
        };
        Ok(ObjectSpec {
            strategy: Strategy {
                kind,
                default_gc_policy,
                gc_enabled,
            },
            scheduled,
            phase,
            tgps,
            generation,
            resource_version,
            finalizers,
            containers,
            seeded,
        })
    }
}

impl ObjectSpec {
    /// The stored record at wall time `wall_ms` (the seeded timestamp is
    /// relative to its second), with as many finalizers as fit `F`.
    pub fn record<const F: usize>(&self, wall_ms: i64) -> Record<F> {
        let mut record = Record::new(name(UID));
        record.resource_version = self.resource_version;
        record.generation = self.generation;
        record.scheduled = self.scheduled;
        record.phase = self.phase;
        record.termination_grace_period_seconds = self.tgps.map(|g| g.0);
        let mut finalizers = Finalizers::new();
        for f in &self.finalizers {
            if finalizers.push(f.clone()).is_err() {
                break;
            }
        }
        record.finalizers = finalizers;
        if let Some((offset, negative, grace)) = self.seeded {
            let start = WallTime::from_unix_millis(wall_ms)
                .floor_to_timestamp()
                .as_unix_seconds();
            let ts = if negative {
                start.saturating_sub(offset.0)
            } else {
                start.saturating_add(offset.0)
            };
            record.deletion_timestamp = Some(Timestamp::from_unix_seconds(ts));
            record.deletion_grace_period_seconds = grace.map(|g| g.0);
        }
        record
    }

    /// The containers that fit `C`.
    pub fn containers(&self, capacity: usize) -> &[ContainerSpec] {
        &self.containers[..self.containers.len().min(capacity)]
    }

    /// The lifecycle, with finalizers and containers cut to the capacities.
    pub fn lifecycle<const F: usize, const C: usize>(&self, wall_ms: i64) -> Lifecycle<F, C> {
        let record = self.record::<F>(wall_ms);
        match Lifecycle::new(self.strategy, record, self.containers(C)) {
            Ok(l) => l,
            Err(e) => panic!(
                "harness: {} containers do not fit {C}: {e}",
                self.containers.len()
            ),
        }
    }

    /// Whether the object has an agent at all (a scheduled pod).
    pub fn has_agent(&self) -> bool {
        self.strategy.kind == Kind::Pod && self.scheduled
    }
}
