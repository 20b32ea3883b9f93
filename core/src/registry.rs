//! The API server's side of deletion: `BeforeDelete`, the pod grace
//! computation, the store's keep-or-remove orchestration, garbage-collection
//! finalizers and the update-path rules (R1–R48).
//!
//! Everything here is a pure decision over a stored record: it says what to
//! write and whether to remove, and changes nothing itself. That makes dry
//! run (R42) the same decision, not applied.

use crate::name::{InlineName, NAME_CAPACITY, Name};
use core::fmt;

use crate::options::{DeleteOptions, InvalidOptions, Propagation};
use crate::record::{
    FINALIZER_FOREGROUND, FINALIZER_ORPHAN, Finalizers, GcPolicy, Kind, Record, Strategy,
    TooManyFinalizers,
};
use crate::time::{Timestamp, WallTime, saturate_timestamp};

/// What a delete request did to the record.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum DeleteOutcome {
    /// Deletion accepted or shortened; the record is kept.
    Graceful,
    /// A deletion was already in progress and nothing changed ([R14], [R17], [R26]).
    ///
    /// [R14]: crate::rules#r14
    /// [R17]: crate::rules#r17
    /// [R26]: crate::rules#r26
    Pending,
    /// The record is removed from storage now.
    Deleted,
}

impl DeleteOutcome {
    /// The HTTP status a Kubernetes API server answers a successful delete
    /// with ([R34]): 202 Accepted when the record was kept and the request
    /// asked for cascading deletion with `orphan_dependents: Some(false)`,
    /// 200 otherwise (a graceful pod delete is 200 too: Kubernetes keeps
    /// 200 there so as not to break old clients).
    ///
    /// [R34]: crate::rules#r34
    pub const fn http_status(self, options: &DeleteOptions) -> u16 {
        match (self, options.orphan_dependents) {
            (DeleteOutcome::Graceful | DeleteOutcome::Pending, Some(false)) => 202,
            _ => 200,
        }
    }
}

/// The decision for one delete request on one stored record.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "a decision changes nothing until the caller writes or removes the record"]
pub struct DeleteDecision<const F: usize, const L: usize = NAME_CAPACITY> {
    /// What happened, as the REST answer says it.
    pub outcome: DeleteOutcome,
    /// The object as the response returns it ([R33]): the state written, or,
    /// when nothing was written before removal, the stored state ([R30], [R32]).
    ///
    /// [R33]: crate::rules#r33
    /// [R30]: crate::rules#r30
    /// [R32]: crate::rules#r32
    pub record: Record<F, L>,
    /// The record must be written (before removal, if `remove`).
    pub write: bool,
    /// The record must then be removed from storage.
    pub remove: bool,
    /// The normalised grace the decision used (`lastGraceful` in [R29]).
    ///
    /// [R29]: crate::rules#r29
    pub grace_period_seconds: Option<i64>,
}

/// A precondition that did not hold (HTTP 409).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Conflict {
    /// The stored uid differs from `preconditions.uid` (a re-created object).
    Uid,
    /// The stored resource version differs from `preconditions.resource_version`.
    ResourceVersion,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Conflict::Uid => "precondition failed: uid differs from the stored object",
            Conflict::ResourceVersion => {
                "precondition failed: resource_version differs from the stored object"
            }
        })
    }
}

impl core::error::Error for Conflict {}

/// Why a delete request was refused. Nothing was changed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum DeleteError {
    /// The options are invalid (422, [R4] step 1).
    ///
    /// [R4]: crate::rules#r4
    Invalid(InvalidOptions),
    /// A precondition failed (409, [R4] step 2).
    ///
    /// [R4]: crate::rules#r4
    Conflict(Conflict),
    /// The object is not stored (404, [R3]).
    ///
    /// [R3]: crate::rules#r3
    NotFound,
    /// The garbage-collection finalizer would not fit the record.
    TooManyFinalizers,
}

impl fmt::Display for DeleteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeleteError::Invalid(e) => write!(f, "invalid delete options: {e}"),
            DeleteError::Conflict(e) => e.fmt(f),
            DeleteError::NotFound => f.write_str("not found"),
            DeleteError::TooManyFinalizers => TooManyFinalizers.fmt(f),
        }
    }
}

impl DeleteError {
    /// The HTTP status a Kubernetes API server answers with ([R34]): 422
    /// invalid options, 409 a failed precondition, 404 nothing stored. A
    /// record with no room for a garbage-collection finalizer is 413
    /// (Request Entity Too Large): grace's own limit, the fixed finalizer
    /// capacity, where Kubernetes has no such limit.
    ///
    /// [R34]: crate::rules#r34
    pub const fn http_status(&self) -> u16 {
        match self {
            DeleteError::Invalid(_) => 422,
            DeleteError::Conflict(_) => 409,
            DeleteError::NotFound => 404,
            DeleteError::TooManyFinalizers => 413,
        }
    }
}

impl core::error::Error for DeleteError {}

/// The deletion fields a delete writes: its timestamp and grace, and the
/// generation (bumped once when deletion starts, R25, R31).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Deletion {
    timestamp: Timestamp,
    grace_period_seconds: i64,
    generation: i64,
}

/// `BeforeDelete`'s answer (R9–R25).
enum BeforeDelete {
    /// No graceful strategy, or nothing graceful left to wait for ([R11],
    /// [R13]): finalizers alone decide.
    ///
    /// [R11]: crate::rules#r11
    /// [R13]: crate::rules#r13
    NotGraceful,
    /// A deletion is in progress and nothing changes ([R14], [R17]); `grace`
    /// is the grace the decision used.
    ///
    /// [R14]: crate::rules#r14
    /// [R17]: crate::rules#r17
    Pending { grace: i64 },
    /// Graceful: the deletion fields to write, and the grace the decision
    /// used (the request's, which [R16] may not have written).
    ///
    /// [R16]: crate::rules#r16
    Graceful { deletion: Deletion, grace: i64 },
}

/// What a delete writes: the deletion fields and, when they change, the
/// garbage-collection finalizers. Decided against the stored record without
/// copying it; [`decide_delete`] applies it to a copy, a lifecycle to its
/// stored record in place.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct DeletionPatch {
    deletion: Deletion,
    gc: Option<GcSet>,
}

impl DeletionPatch {
    /// Writes the patch into `record`.
    #[inline]
    pub(crate) fn apply<const F: usize, const L: usize>(&self, record: &mut Record<F, L>) {
        record.deletion_timestamp = Some(self.deletion.timestamp);
        record.deletion_grace_period_seconds = Some(self.deletion.grace_period_seconds);
        record.generation = self.deletion.generation;
        if let Some(gc) = self.gc {
            gc.apply(&mut record.finalizers);
        }
    }

    /// Whether the patched record differs from `stored`.
    #[inline]
    fn changes<const F: usize, const L: usize>(&self, stored: &Record<F, L>) -> bool {
        stored.deletion_timestamp != Some(self.deletion.timestamp)
            || stored.deletion_grace_period_seconds != Some(self.deletion.grace_period_seconds)
            || stored.generation != self.deletion.generation
            // A GC change is only recorded when the set differs (R39).
            || self.gc.is_some()
    }
}

/// `markAsDeleting` (R31): the non-graceful path's "deleting now".
#[inline]
fn mark_as_deleting<const F: usize, const L: usize>(
    stored: &Record<F, L>,
    now: WallTime,
) -> Deletion {
    let now_ts = now.floor_to_timestamp();
    let (timestamp, generation) = match stored.deletion_timestamp {
        None => (now_ts, bump(stored.generation)),
        Some(ts) if ts.as_millis_wide() > now.as_millis_wide() => (now_ts, stored.generation),
        Some(ts) => (ts, stored.generation),
    };
    Deletion {
        timestamp,
        grace_period_seconds: 0,
        generation,
    }
}

/// R25, R31: the generation, bumped once when deletion starts, if positive.
#[inline]
fn bump(generation: i64) -> i64 {
    if generation > 0 {
        generation.saturating_add(1)
    } else {
        generation
    }
}

/// A delete decision without the record: what [`decide_delete`] decides,
/// with the state to write as a [`DeletionPatch`].
#[derive(Copy, Clone, Debug)]
pub(crate) struct DeletePlan {
    pub(crate) outcome: DeleteOutcome,
    /// What to write (before removal, if `remove`); `None`: nothing.
    pub(crate) write: Option<DeletionPatch>,
    pub(crate) remove: bool,
    pub(crate) grace_period_seconds: Option<i64>,
}

/// Decides a delete request against the stored record (`Store.Delete`, [R2]–[R44]).
///
/// `now` is the API server's clock. The decision is the same for a dry run;
/// the caller simply does not apply it ([R42]).
///
/// [R2]: crate::rules#r2
/// [R44]: crate::rules#r44
/// [R42]: crate::rules#r42
pub fn decide_delete<const F: usize, const L: usize>(
    stored: &Record<F, L>,
    strategy: &Strategy,
    options: &DeleteOptions,
    now: WallTime,
) -> Result<DeleteDecision<F, L>, DeleteError> {
    let plan = plan_delete(stored, strategy, options, now)?;
    // R33: the state written, or the stored state when nothing is (R26,
    // R30, R32); a kept record that does not change is not written.
    let mut record = stored.clone();
    if let Some(patch) = plan.write {
        patch.apply(&mut record);
    }
    Ok(DeleteDecision {
        outcome: plan.outcome,
        record,
        write: plan.write.is_some(),
        remove: plan.remove,
        grace_period_seconds: plan.grace_period_seconds,
    })
}

/// [`decide_delete`] without copying the record.
#[inline]
pub(crate) fn plan_delete<const F: usize, const L: usize>(
    stored: &Record<F, L>,
    strategy: &Strategy,
    options: &DeleteOptions,
    now: WallTime,
) -> Result<DeletePlan, DeleteError> {
    // R4: validation, then preconditions, then everything else.
    options.validate().map_err(DeleteError::Invalid)?;
    check_preconditions(stored, options)?;

    // R9: a negative request means 1 from here on.
    let requested = options
        .grace_period_seconds
        .map(|g| if g < 0 { 1 } else { g });
    let (graceful, grace) = match before_delete(stored, strategy, requested, now) {
        // R26: nothing written; the stored object is returned as it is
        // (R10's normalisation stays in memory).
        BeforeDelete::Pending { grace } => {
            return Ok(DeletePlan {
                outcome: DeleteOutcome::Pending,
                write: None,
                remove: false,
                grace_period_seconds: Some(grace),
            });
        }
        BeforeDelete::NotGraceful => (None, requested),
        BeforeDelete::Graceful { deletion, grace } => (Some(deletion), Some(grace)),
    };
    let plan = |outcome, write, remove| DeletePlan {
        outcome,
        write,
        remove,
        grace_period_seconds: grace,
    };

    let view = GcView::of(&stored.finalizers);
    let gc = gc_change(&view, strategy, options, F)?;
    // R28: graceful, finalizers already there, or a GC change ⇒ update first.
    if graceful.is_none() && stored.finalizers.is_empty() && gc.is_none() {
        // R32: removed as it is, without a write.
        return Ok(plan(DeleteOutcome::Deleted, None, true));
    }
    // R27: finalizers are looked at again after the GC adjustment.
    let held = match gc {
        None => !stored.finalizers.is_empty(),
        Some(gc) => gc.orphan || gc.foreground || view.others > 0,
    };
    let deletion = match graceful {
        None if !held => {
            // R30, R40: the update is abandoned, the stored object removed.
            return Ok(plan(DeleteOutcome::Deleted, None, true));
        }
        // R30, R31: kept, marked as deleting now.
        None => mark_as_deleting(stored, now),
        Some(deletion) if !held && grace.unwrap_or(0) <= 0 => {
            // R29 (by the request's grace, not the stored one): written,
            // then removed.
            let patch = DeletionPatch { deletion, gc };
            return Ok(plan(DeleteOutcome::Deleted, Some(patch), true));
        }
        Some(deletion) => deletion,
    };
    // Kept, and written only if something changed.
    let patch = DeletionPatch { deletion, gc };
    Ok(if patch.changes(stored) {
        plan(DeleteOutcome::Graceful, Some(patch), false)
    } else {
        plan(DeleteOutcome::Pending, None, false)
    })
}

/// R7: each precondition given must match the stored object.
#[inline]
fn check_preconditions<const F: usize, const L: usize>(
    stored: &Record<F, L>,
    options: &DeleteOptions,
) -> Result<(), DeleteError> {
    let pre = &options.preconditions;
    if pre
        .uid
        .as_ref()
        .is_some_and(|uid| uid.as_bytes() != stored.uid.as_bytes())
    {
        return Err(DeleteError::Conflict(Conflict::Uid));
    }
    if pre
        .resource_version
        .is_some_and(|rv| rv != stored.resource_version)
    {
        return Err(DeleteError::Conflict(Conflict::ResourceVersion));
    }
    Ok(())
}

/// `rest.BeforeDelete` after validation and preconditions (R9–R25), with
/// the request's grace `requested` (R9 applied).
#[inline]
fn before_delete<const F: usize, const L: usize>(
    stored: &Record<F, L>,
    strategy: &Strategy,
    requested: Option<i64>,
    now: WallTime,
) -> BeforeDelete {
    if strategy.kind == Kind::Generic {
        // R11: no graceful strategy; only finalizers can hold the object.
        return BeforeDelete::NotGraceful;
    }
    if let Some(ts) = stored.deletion_timestamp {
        return redelete(
            ts,
            stored.deletion_grace_period_seconds,
            stored.generation,
            requested,
            now,
        );
    }
    let period = pod_grace_period(stored, requested); // R22
    BeforeDelete::Graceful {
        deletion: Deletion {
            // R24: ts = now + grace, saturating at the RFC 3339 maximum (D2).
            timestamp: now.floor_to_timestamp().saturating_add_seconds(period),
            grace_period_seconds: period,
            // R25
            generation: bump(stored.generation),
        },
        grace: period,
    }
}

/// [`before_delete`] for a pod whose deletion is already in progress since
/// `ts`, with the stored grace and generation (R10, R12–R17): only a
/// shorter grace changes anything. Out of line: the first deletion is the
/// path to keep short.
fn redelete(
    ts: Timestamp,
    stored_grace: Option<i64>,
    generation: i64,
    requested: Option<i64>,
    now: WallTime,
) -> BeforeDelete {
    // R10: a stored negative grace reads as 1, in memory only.
    let existing = match stored_grace.map(|g| if g < 0 { 1 } else { g }) {
        // R13: nothing graceful left to wait for: delete now.
        None | Some(0) => return BeforeDelete::NotGraceful,
        Some(existing) => existing,
    };
    let Some(requested) = requested else {
        // R17: no grace asked ⇒ the existing one, and pending.
        return BeforeDelete::Pending { grace: existing };
    };
    if requested >= existing {
        // R14: only a shorter grace is taken.
        return BeforeDelete::Pending { grace: requested };
    }
    // R15: counted from when the deletion was first asked for, computed
    // exactly in wide integers (D2).
    let mut new_ts = i128::from(ts.as_unix_seconds())
        .saturating_sub(i128::from(existing))
        .saturating_add(i128::from(requested));
    let mut new_grace = requested;
    // R16: never into the past; strict comparison on the real instant.
    if new_ts.saturating_mul(1000) < now.as_millis_wide() {
        new_ts = i128::from(now.floor_to_timestamp().as_unix_seconds());
        if new_grace != 0 {
            new_grace = 1;
        }
    }
    BeforeDelete::Graceful {
        deletion: Deletion {
            timestamp: saturate_timestamp(new_ts, now.floor_to_timestamp()),
            grace_period_seconds: new_grace,
            // R12: re-deletes never bump the generation.
            generation,
        },
        grace: requested,
    }
}

/// The pod strategy's `CheckGracefulDelete` ([R18]–[R21]): the grace a first
/// deletion gets.
///
/// [R18]: crate::rules#r18
/// [R21]: crate::rules#r21
#[inline]
pub fn pod_grace_period<const F: usize, const L: usize>(
    record: &Record<F, L>,
    requested: Option<i64>,
) -> i64 {
    // R18
    let mut period = requested
        .or(record.termination_grace_period_seconds)
        .unwrap_or(0);
    // R19: not scheduled ⇒ nothing runs ⇒ now.
    if !record.scheduled {
        period = 0;
    }
    // R20: already finished ⇒ now.
    if record.phase.is_terminal() {
        period = 0;
    }
    // R21: a negative spec value means 1.
    if period < 0 {
        period = 1;
    }
    period
}

/// `deletionFinalizersForGarbageCollection` ([R36]–[R39]): the new finalizer
/// list, or `None` when the set would not change.
///
/// [R36]: crate::rules#r36
/// [R39]: crate::rules#r39
pub fn gc_finalizers<const F: usize, const L: usize>(
    existing: &Finalizers<F, L>,
    strategy: &Strategy,
    options: &DeleteOptions,
) -> Result<Option<Finalizers<F, L>>, DeleteError> {
    Ok(
        gc_change(&GcView::of(existing), strategy, options, F)?.map(|gc| {
            let mut next = existing.clone();
            gc.apply(&mut next);
            next
        }),
    )
}

/// Which garbage-collection finalizers an object is to carry.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct GcSet {
    orphan: bool,
    foreground: bool,
}

impl GcSet {
    const NONE: GcSet = GcSet {
        orphan: false,
        foreground: false,
    };

    /// The other finalizers in their order, then `orphan`, then
    /// `foregroundDeletion`, as wanted. [`gc_change`] checked the room.
    fn apply<const F: usize, const L: usize>(self, finalizers: &mut Finalizers<F, L>) {
        finalizers.remove(FINALIZER_ORPHAN);
        finalizers.remove(FINALIZER_FOREGROUND);
        for (wanted, name) in [
            (self.orphan, FINALIZER_ORPHAN),
            (self.foreground, FINALIZER_FOREGROUND),
        ] {
            if wanted && let Ok(name) = InlineName::try_from_str(name) {
                let _ = finalizers.push(name);
            }
        }
    }

    fn len(self) -> usize {
        usize::from(self.orphan).saturating_add(usize::from(self.foreground))
    }
}

/// What the garbage collector reads in a finalizer list, in one pass.
#[derive(Copy, Clone, Debug)]
struct GcView {
    /// Which of its finalizers are there.
    present: GcSet,
    /// Which of them comes first: `Some(true)` for `orphan`, `Some(false)`
    /// for `foregroundDeletion`, `None` when neither is there.
    first_is_orphan: Option<bool>,
    /// How many finalizers are not the garbage collector's.
    others: usize,
}

impl GcView {
    #[inline]
    fn of<const F: usize, const L: usize>(finalizers: &Finalizers<F, L>) -> Self {
        let mut view = GcView {
            present: GcSet::NONE,
            first_is_orphan: None,
            others: 0,
        };
        // Bytes, not text: no UTF-8 check on the delete path.
        const ORPHAN: &[u8] = FINALIZER_ORPHAN.as_bytes();
        const FOREGROUND: &[u8] = FINALIZER_FOREGROUND.as_bytes();
        for name in finalizers.iter() {
            match name.as_bytes() {
                ORPHAN => {
                    view.present.orphan = true;
                    view.first_is_orphan.get_or_insert(true);
                }
                FOREGROUND => {
                    view.present.foreground = true;
                    view.first_is_orphan.get_or_insert(false);
                }
                _ => view.others = view.others.saturating_add(1),
            }
        }
        view
    }
}

/// [`gc_finalizers`] as the set wanted, without building the list; `room`
/// is the list's capacity.
#[inline]
fn gc_change(
    view: &GcView,
    strategy: &Strategy,
    options: &DeleteOptions,
    room: usize,
) -> Result<Option<GcSet>, DeleteError> {
    if !strategy.gc_enabled {
        return Ok(None); // R36
    }
    // The usual request: it names no propagation, the list holds neither
    // GC finalizer, and the type does not orphan by default, so neither is
    // wanted and none is there (R37, R38, R39).
    if options.orphan_dependents.is_none()
        && options.propagation_policy.is_none()
        && view.first_is_orphan.is_none()
        && strategy.default_gc_policy != GcPolicy::OrphanDependents
    {
        return Ok(None);
    }
    let wanted = gc_wanted(view, strategy, options);
    // R39: the old list, in its old order, when the set is unchanged. Then
    // the new list is no longer than the old one.
    if wanted == view.present {
        return Ok(None);
    }
    if view.others.saturating_add(wanted.len()) > room {
        return Err(DeleteError::TooManyFinalizers);
    }
    Ok(Some(wanted))
}

/// R37, R38: which garbage-collection finalizers are wanted. For each, the
/// first rule that applies wins: a type outside garbage collection wants
/// neither; then `orphanDependents`; then the propagation policy (an
/// unrecognized one decides only against `foregroundDeletion`); then
/// whichever of the two comes first in the list; then, for `orphan`, the
/// type's default (R38's trap: the usual default is not foreground).
#[inline]
fn gc_wanted(view: &GcView, strategy: &Strategy, options: &DeleteOptions) -> GcSet {
    if strategy.default_gc_policy == GcPolicy::Unsupported {
        return GcSet::NONE;
    }
    let orphan_by_list = view
        .first_is_orphan
        .unwrap_or(strategy.default_gc_policy == GcPolicy::OrphanDependents);
    let (orphan, foreground) = match (options.orphan_dependents, options.propagation_policy) {
        (Some(orphan), _) => (orphan, false),
        (None, Some(Propagation::Orphan)) => (true, false),
        (None, Some(Propagation::Background)) => (false, false),
        (None, Some(Propagation::Foreground)) => (false, true),
        (None, Some(Propagation::Unrecognized)) => (orphan_by_list, false),
        (None, None) => (orphan_by_list, view.first_is_orphan == Some(false)),
    };
    GcSet { orphan, foreground }
}

/// A change to the finalizer list through an update (not a delete).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    all(feature = "arbitrary", not(target_os = "none")),
    derive(arbitrary::Arbitrary)
)]
#[non_exhaustive]
pub enum FinalizerChange {
    /// Append a finalizer (refused once deletion started, [R46]).
    ///
    /// [R46]: crate::rules#r46
    Add(Name),
    /// Remove a finalizer (may complete the deletion, [R45]).
    ///
    /// [R45]: crate::rules#r45
    Remove(Name),
}

impl FinalizerChange {
    /// Append the finalizer `name` (a `&str`, or a [`Name`]).
    ///
    /// ```
    /// use grace_core::FinalizerChange;
    ///
    /// let change = FinalizerChange::add("example.com/backup").unwrap();
    /// assert_eq!(change, FinalizerChange::Add("example.com/backup".parse().unwrap()));
    /// ```
    pub fn add<N: TryInto<Name>>(name: N) -> Result<Self, N::Error> {
        Ok(FinalizerChange::Add(name.try_into()?))
    }

    /// Remove the finalizer `name` (a `&str`, or a [`Name`]).
    pub fn remove<N: TryInto<Name>>(name: N) -> Result<Self, N::Error> {
        Ok(FinalizerChange::Remove(name.try_into()?))
    }
}

/// Why an update of the finalizers was refused. Nothing was changed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum UpdateError {
    /// A finalizer may not be added once the deletion timestamp is set ([R46], 422).
    ///
    /// [R46]: crate::rules#r46
    NoNewFinalizersWhileDeleting,
    /// The list is full.
    TooManyFinalizers,
    /// The object is not stored.
    NotFound,
    /// The finalizer's name is longer than the record's names can hold
    /// (its capacity `L`, below Kubernetes' limit).
    NameTooLong,
}

impl fmt::Display for UpdateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpdateError::NoNewFinalizersWhileDeleting => {
                f.write_str("no new finalizers can be added if the object is being deleted")
            }
            UpdateError::TooManyFinalizers => TooManyFinalizers.fmt(f),
            UpdateError::NotFound => f.write_str("not found"),
            UpdateError::NameTooLong => crate::name::NameTooLong.fmt(f),
        }
    }
}

impl UpdateError {
    /// The HTTP status a Kubernetes API server answers with: 422 for a
    /// finalizer added while deleting ([R46], a validation error), 404 for
    /// nothing stored; 413 for a full finalizer list (grace's own limit,
    /// as for [`DeleteError::http_status`]).
    ///
    /// [R46]: crate::rules#r46
    pub const fn http_status(&self) -> u16 {
        match self {
            UpdateError::NoNewFinalizersWhileDeleting => 422,
            UpdateError::TooManyFinalizers => 413,
            UpdateError::NotFound => 404,
            // Too long for this configuration: grace's own limit, like 413.
            UpdateError::NameTooLong => 413,
        }
    }
}

impl core::error::Error for UpdateError {}

/// The decision for one finalizer update.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "a decision changes nothing until the caller writes or removes the record"]
pub struct UpdateDecision<const F: usize, const L: usize = NAME_CAPACITY> {
    /// The record after the update.
    pub record: Record<F, L>,
    /// Something changed and must be written.
    pub write: bool,
    /// The update completes a deletion: remove the record ([R45]).
    ///
    /// [R45]: crate::rules#r45
    pub remove: bool,
}

/// Decides an update of the finalizer list ([R45], [R46]).
///
/// [R45]: crate::rules#r45
/// [R46]: crate::rules#r46
pub fn decide_finalizer_update<const F: usize, const L: usize>(
    stored: &Record<F, L>,
    change: &FinalizerChange,
) -> Result<UpdateDecision<F, L>, UpdateError> {
    let mut record = stored.clone();
    match change {
        FinalizerChange::Add(name) => {
            if record.finalizers.contains(name) {
                // Already there: a no-op update.
            } else if record.deletion_timestamp.is_some() {
                return Err(UpdateError::NoNewFinalizersWhileDeleting);
            } else {
                let name = InlineName::try_from(name).map_err(|_| UpdateError::NameTooLong)?;
                record
                    .finalizers
                    .push(name)
                    .map_err(|_| UpdateError::TooManyFinalizers)?;
            }
        }
        FinalizerChange::Remove(name) => {
            record.finalizers.remove(name);
        }
    }
    // R45: no finalizers left, deletion timestamp set, and no grace left
    // (nil or 0) ⇒ the update deletes the object.
    let remove = record.finalizers.is_empty()
        && stored.deletion_timestamp.is_some()
        && matches!(stored.deletion_grace_period_seconds, None | Some(0));
    let write = record != *stored;
    Ok(UpdateDecision {
        record,
        write,
        remove,
    })
}
