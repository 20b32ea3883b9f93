//! The reference model: the API-level rules of core/RULES.md (R4–R39, R45, R46)
//! and the kubelet's budget (R50–R55) and per-container arithmetic (§3.2,
//! "Time budget summary"), restated as plainly as possible.
//!
//! It shares no code with `grace-core`: plain `String`s and `Vec`s, `i128`
//! arithmetic throughout, every step written in the order of the Kubernetes
//! pseudo-code (`Store.Delete` running `BeforeDelete` twice, once outside
//! and once inside the `GuaranteedUpdate`). It is slow on purpose. The only
//! thing it takes from the core is the shape of the answer (which fields a
//! decision has); every value in it is computed here.
//!
//! Where the contract leaves a choice to grace, the choice modelled is the
//! one the decisions (D1–D8) name, written out here:
//!
//! - D2: a deletion timestamp saturates at 9999-12-31T23:59:59Z
//!   ([`MAX_TS`]). When the API clock itself is past that second, the
//!   ceiling is the current second, so that saturation never moves a
//!   timestamp into the past (R16). Below, nothing can underflow in
//!   practice (a timestamp before `i64::MIN` seconds is always clamped to
//!   now by R16); it is clamped at `i64::MIN` all the same.
//! - D2: generations saturate at `i64::MAX` instead of wrapping.
//! - A delete that keeps the record but changes nothing in it (an
//!   idempotent `markAsDeleting`, R30/R31) writes nothing, as etcd's
//!   `GuaranteedUpdate` skips byte-identical writes; grace reports it as
//!   `Pending`, a kept record that was written as `Graceful`.
//! - The response to a pending request (R26) is the stored object as it is
//!   (R10's normalisation of a negative stored grace stays in memory).
//! - The finalizer list has a capacity: a GC finalizer that would not fit
//!   is an error (`TooManyFinalizers`), after validation, preconditions and
//!   the pending check.

/// D2: 9999-12-31T23:59:59Z in unix seconds.
pub const MAX_TS: i128 = 253_402_300_799;
/// `metav1.FinalizerOrphanDependents`.
pub const ORPHAN: &str = "orphan";
/// `metav1.FinalizerDeleteDependents`.
pub const FOREGROUND: &str = "foregroundDeletion";
/// R62 `minimumGracePeriodInSeconds`.
pub const MIN_STOP: i128 = 2;

/// The record, as plain data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Obj {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion`.
    pub resource_version: u64,
    /// `metadata.generation`.
    pub generation: i64,
    /// `metadata.deletionTimestamp`, unix seconds.
    pub ts: Option<i64>,
    /// `metadata.deletionGracePeriodSeconds`.
    pub dgps: Option<i64>,
    /// `metadata.finalizers`, in order.
    pub finalizers: Vec<String>,
    /// Bound to a node (R19).
    pub scheduled: bool,
    /// `status.phase`, by name (`""` for unset).
    pub phase: &'static str,
    /// `spec.terminationGracePeriodSeconds`.
    pub tgps: Option<i64>,
}

/// The type's default GC policy (R37, R38).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Background or foreground deletion of dependents.
    DeleteDependents,
    /// Dependents are orphaned.
    OrphanDependents,
    /// The type has no garbage-collection policy.
    Unsupported,
}

/// The type, as plain data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Type {
    /// Implements `CheckGracefulDelete` (pods only, R11).
    pub graceful: bool,
    /// The default GC policy (R37, R38).
    pub policy: Policy,
    /// The store manages the GC finalizers (R36).
    pub gc_enabled: bool,
}

/// DeleteOptions, as plain data. `propagation` is the string a client sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opts {
    /// `gracePeriodSeconds`.
    pub grace: Option<i64>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<u64>,
    /// `propagationPolicy`.
    pub propagation: Option<&'static str>,
    /// `orphanDependents`.
    pub orphan: Option<bool>,
}

/// Why a request is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// R5: `orphanDependents` and `propagationPolicy` both given.
    InvalidBothOrphanAndPolicy,
    /// R6: an unknown propagation policy.
    InvalidPolicy,
    /// R7: the uid precondition fails.
    ConflictUid,
    /// R7: the resource version precondition fails.
    ConflictResourceVersion,
    /// A GC finalizer would not fit the list.
    TooManyFinalizers,
}

/// What a delete did, as the REST answer says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Accepted or shortened; the record is kept.
    Graceful,
    /// Already deleting; nothing written (R26).
    Pending,
    /// Removed from storage.
    Deleted,
}

/// The decision, as plain data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// What happened.
    pub outcome: Outcome,
    /// The object as the response returns it.
    pub record: Obj,
    /// The record is written.
    pub write: bool,
    /// The record is then removed.
    pub remove: bool,
    /// The request's grace after normalisation and `CheckGracefulDelete`.
    pub grace: Option<i64>,
}

fn floor_seconds(now_ms: i64) -> i128 {
    i128::from(now_ms).div_euclid(1000)
}

/// D2 saturation of a timestamp computed in wide integers.
fn saturate_ts(seconds: i128, now_ms: i64) -> i64 {
    let ceiling = MAX_TS.max(floor_seconds(now_ms));
    let clamped = seconds.min(ceiling).max(i128::from(i64::MIN));
    i64::try_from(clamped).expect("reference: clamped into i64")
}

fn bump(generation: i64) -> i64 {
    i64::try_from((i128::from(generation) + 1).min(i128::from(i64::MAX)))
        .expect("reference: generation in range")
}

fn is_terminal(phase: &str) -> bool {
    phase == "Succeeded" || phase == "Failed"
}

/// `podStrategy.CheckGracefulDelete` (R18–R22) for non-nil options.
pub fn check_graceful_delete(obj: &Obj, grace: Option<i64>) -> i64 {
    let mut period = 0i64;
    if let Some(g) = grace {
        period = g; // user has specified a value
    } else if let Some(t) = obj.tgps {
        period = t; // the spec's default
    }
    if !obj.scheduled {
        period = 0; // R19
    }
    if is_terminal(obj.phase) {
        period = 0; // R20
    }
    if period < 0 {
        period = 1; // R21
    }
    period
}

/// `rest.BeforeDelete` after validation and preconditions (R9–R25).
/// Returns (graceful, pending); mutates `obj` and the request's grace.
fn before_delete(obj: &mut Obj, ty: &Type, grace: &mut Option<i64>, now_ms: i64) -> (bool, bool) {
    // R9
    if let Some(g) = *grace
        && g < 0
    {
        *grace = Some(1);
    }
    // R10
    if let Some(d) = obj.dgps
        && d < 0
    {
        obj.dgps = Some(1);
    }
    // R11
    if !ty.graceful {
        return (false, false);
    }
    if let Some(ts) = obj.ts {
        // R13
        let existing = match obj.dgps {
            None | Some(0) => return (false, false),
            Some(d) => d,
        };
        let Some(period) = *grace else {
            // R17
            *grace = Some(existing);
            return (false, true);
        };
        // R14
        if period >= existing {
            return (false, true);
        }
        // R15, exactly
        let mut new_ts = i128::from(ts) - i128::from(existing) + i128::from(period);
        let mut new_grace = period;
        // R16: strictly before the real instant `now`
        if new_ts * 1000 < i128::from(now_ms) {
            new_ts = floor_seconds(now_ms);
            if new_grace != 0 {
                new_grace = 1;
            }
        }
        obj.ts = Some(saturate_ts(new_ts, now_ms));
        obj.dgps = Some(new_grace);
        return (true, false); // R12: no generation bump
    }
    // R18–R22
    let period = check_graceful_delete(obj, *grace);
    *grace = Some(period);
    // R24 (the fraction of `now` is lost when stored, R48)
    obj.ts = Some(saturate_ts(
        floor_seconds(now_ms) + i128::from(period),
        now_ms,
    ));
    obj.dgps = Some(period);
    // R25
    if obj.generation > 0 {
        obj.generation = bump(obj.generation);
    }
    (true, false)
}

/// R37: `shouldOrphanDependents`.
fn should_orphan(finalizers: &[String], ty: &Type, o: &Opts) -> bool {
    if ty.policy == Policy::Unsupported {
        return false;
    }
    if let Some(orphan) = o.orphan {
        return orphan;
    }
    match o.propagation {
        Some("Orphan") => return true,
        Some("Background") | Some("Foreground") => return false,
        _ => {}
    }
    for f in finalizers {
        if f == ORPHAN {
            return true;
        }
        if f == FOREGROUND {
            return false;
        }
    }
    ty.policy == Policy::OrphanDependents
}

/// R38: `shouldDeleteDependents`.
fn should_foreground(finalizers: &[String], ty: &Type, o: &Opts) -> bool {
    if ty.policy == Policy::Unsupported {
        return false;
    }
    if o.orphan.is_some() {
        return false;
    }
    match o.propagation {
        Some("Foreground") => return true,
        Some("Background") | Some("Orphan") => return false,
        _ => {}
    }
    for f in finalizers {
        if f == FOREGROUND {
            return true;
        }
        if f == ORPHAN {
            return false;
        }
    }
    false
}

/// R36–R39: `deletionFinalizersForGarbageCollection`: the new list when the
/// set changes, `None` otherwise.
pub fn gc_finalizers(finalizers: &[String], ty: &Type, o: &Opts) -> Option<Vec<String>> {
    if !ty.gc_enabled {
        return None; // R36
    }
    let orphan = should_orphan(finalizers, ty, o);
    let foreground = should_foreground(finalizers, ty, o);
    let mut next: Vec<String> = finalizers
        .iter()
        .filter(|f| *f != ORPHAN && *f != FOREGROUND)
        .cloned()
        .collect();
    if orphan {
        next.push(ORPHAN.to_string());
    }
    if foreground {
        next.push(FOREGROUND.to_string());
    }
    let old: std::collections::BTreeSet<&String> = finalizers.iter().collect();
    let new: std::collections::BTreeSet<&String> = next.iter().collect();
    if old == new { None } else { Some(next) }
}

/// R31 `markAsDeleting`.
fn mark_as_deleting(obj: &mut Obj, now_ms: i64) {
    if obj.ts.is_none() && obj.generation > 0 {
        obj.generation = bump(obj.generation);
    }
    let after_now = obj
        .ts
        .is_some_and(|ts| i128::from(ts) * 1000 > i128::from(now_ms));
    if obj.ts.is_none() || after_now {
        obj.ts = Some(saturate_ts(floor_seconds(now_ms), now_ms));
    }
    obj.dgps = Some(0);
}

/// `Store.Delete` (R2–R44) for one request with a body, at `now_ms` (unix
/// milliseconds), on a record that can hold `capacity` finalizers.
pub fn delete(
    stored: &Obj,
    ty: &Type,
    o: &Opts,
    now_ms: i64,
    capacity: usize,
) -> Result<Decision, Refused> {
    // R4.1, R5, R6 (dry run entries are always "All" here)
    if o.orphan.is_some() && o.propagation.is_some() {
        return Err(Refused::InvalidBothOrphanAndPolicy);
    }
    if let Some(p) = o.propagation
        && !matches!(p, "Orphan" | "Background" | "Foreground")
    {
        return Err(Refused::InvalidPolicy);
    }
    // R4.2, R7
    if let Some(uid) = &o.uid
        && *uid != stored.uid
    {
        return Err(Refused::ConflictUid);
    }
    if let Some(rv) = o.resource_version
        && rv != stored.resource_version
    {
        return Err(Refused::ConflictResourceVersion);
    }

    // `options` is mutated by BeforeDelete and kept for what follows (R22, R28).
    let mut grace = o.grace;
    let mut obj = stored.clone();
    let (graceful, pending) = before_delete(&mut obj, ty, &mut grace, now_ms);
    let pending_answer = |grace: Option<i64>| Decision {
        outcome: Outcome::Pending,
        record: stored.clone(),
        write: false,
        remove: false,
        grace,
    };
    if pending {
        return Ok(pending_answer(grace)); // R26
    }
    // R27 (outer check, on the stored object) and the GC change.
    let pending_finalizers = !obj.finalizers.is_empty();
    let should_update_finalizers = gc_finalizers(&obj.finalizers, ty, o).is_some();
    let delete_as_stored = |grace: Option<i64>| Decision {
        outcome: Outcome::Deleted,
        record: stored.clone(),
        write: false,
        remove: true,
        grace,
    };
    if !(graceful || pending_finalizers || should_update_finalizers) {
        return Ok(delete_as_stored(grace)); // R32
    }

    // R28: GuaranteedUpdate on the freshest object (the stored one: no
    // concurrent writer here), BeforeDelete again with the mutated options.
    let mut fresh = stored.clone();
    let (graceful2, pending2) = before_delete(&mut fresh, ty, &mut grace, now_ms);
    if pending2 {
        return Ok(pending_answer(grace));
    }
    if let Some(list) = gc_finalizers(&fresh.finalizers, ty, o) {
        if list.len() > capacity {
            return Err(Refused::TooManyFinalizers);
        }
        fresh.finalizers = list;
    }
    let pending_finalizers = !fresh.finalizers.is_empty(); // R27 (inner check)
    let keep = |record: Obj, grace: Option<i64>| {
        let write = record != *stored;
        Decision {
            outcome: if write {
                Outcome::Graceful
            } else {
                Outcome::Pending
            },
            record,
            write,
            remove: false,
            grace,
        }
    };
    if !graceful2 {
        if pending_finalizers {
            mark_as_deleting(&mut fresh, now_ms); // R30, R31
            return Ok(keep(fresh, grace));
        }
        return Ok(delete_as_stored(grace)); // R30, R40: errDeleteNow
    }
    // R29: `lastGraceful` is the request's grace, not the stored one.
    let last_graceful = grace.unwrap_or(0);
    if pending_finalizers || last_graceful > 0 {
        return Ok(keep(fresh, grace));
    }
    Ok(Decision {
        outcome: Outcome::Deleted,
        record: fresh,
        write: true,
        remove: true,
        grace,
    })
}

/// An update of the finalizer list.
#[derive(Clone, Debug)]
pub enum Change {
    /// Append this finalizer.
    Add(String),
    /// Remove every occurrence of this finalizer.
    Remove(String),
}

/// Why a finalizer update is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateRefused {
    /// R46.
    NoNewFinalizersWhileDeleting,
    /// The list is full.
    TooManyFinalizers,
}

/// R45, R46: (record after, write, remove).
pub fn update(
    stored: &Obj,
    change: &Change,
    capacity: usize,
) -> Result<(Obj, bool, bool), UpdateRefused> {
    let mut next = stored.clone();
    match change {
        Change::Add(f) => {
            if !next.finalizers.contains(f) {
                if next.ts.is_some() {
                    return Err(UpdateRefused::NoNewFinalizersWhileDeleting); // R46
                }
                if next.finalizers.len() >= capacity {
                    return Err(UpdateRefused::TooManyFinalizers);
                }
                next.finalizers.push(f.clone());
            }
        }
        Change::Remove(f) => next.finalizers.retain(|x| x != f),
    }
    // R45 ShouldDeleteDuringUpdate: new object without finalizers, old one
    // with a deletion timestamp and a nil or zero grace.
    let remove =
        next.finalizers.is_empty() && stored.ts.is_some() && matches!(stored.dgps, None | Some(0));
    let write = next != *stored;
    Ok((next, write, remove))
}

/// The kubelet's budget (`calculateEffectiveGracePeriod`, R50–R55): the budget
/// and whether it counts as shortened. R50 (never grows once started) is
/// applied on top of the Go code, which alone would let an override after a
/// deletion grace of 0 grow the budget.
pub fn effective_grace(
    remembered: i64,
    dgps: Option<i64>,
    override_seconds: Option<i64>,
    spec: Option<i64>,
) -> (i64, bool) {
    let mut g = i128::from(remembered);
    let mut overridden = false;
    if let Some(d) = dgps
        && (g == 0 || i128::from(d) < g)
    {
        g = i128::from(d); // R51
        overridden = true;
    }
    if let Some(o) = override_seconds
        && (g == 0 || i128::from(o) < g)
    {
        g = i128::from(o); // R52
        overridden = true;
    }
    if !overridden
        && g == 0
        && let Some(s) = spec
    {
        g = i128::from(s); // R53
    }
    if g < 1 {
        g = 1; // R54
    }
    if remembered > 0 && g > i128::from(remembered) {
        g = i128::from(remembered); // R50
    }
    let g = i64::try_from(g).expect("reference: budget in i64");
    (g, remembered != 0 && remembered != g) // R55
}

/// One container's kill without sidecars (core/RULES.md, "The budget
/// in one line"), in milliseconds on the agent's clock, which ends at
/// `u64::MAX` (D2: deadlines saturate there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KillTimes {
    /// The pre-stop hook's budget, when there is a hook.
    pub pre_stop_budget: Option<i64>,
    /// When the stop signal is sent.
    pub stop_signal_at: u64,
    /// When SIGKILL is sent, if the process has not exited by then.
    pub kill_at: Option<u64>,
}

/// `start`: when the kill starts; `g0`: the effective grace (≥ 1);
/// `hook_ms`: `Some(d)` for a hook that returns after `d` ms (`None` inside
/// it for one that hangs); `exits_after_ms`: when the process exits after
/// the stop signal (`None`: never on its own). At one instant the process's
/// own exit comes before SIGKILL.
pub fn kill_times(
    start: u64,
    g0: i64,
    hook_ms: Option<Option<u64>>,
    exits_after_ms: Option<u64>,
) -> KillTimes {
    let end = i128::from(u64::MAX);
    let at = |t: i128| u64::try_from(t.min(end)).expect("reference: instant in range");
    let start_w = i128::from(start);
    let g0_w = i128::from(g0);
    // e = min(preStopDuration, G0), 0 without a hook; the agent stops
    // waiting at start + G0, which saturates at the end of time.
    let (budget, signal_w) = match hook_ms {
        Some(duration) if g0 > 0 => {
            let cutoff = (start_w + g0_w * 1000).min(end);
            let returns = duration.map_or(end, |d| start_w + i128::from(d));
            (Some(g0), returns.min(cutoff))
        }
        _ => (None, start_w),
    };
    let e = signal_w - start_w;
    // timeout = max(G0 − ⌊e⌋, 2): the hook's time is charged in whole seconds.
    let timeout = (g0_w - e.div_euclid(1000)).max(MIN_STOP);
    let kill_w = signal_w + timeout * 1000;
    let exits_first = exits_after_ms.is_some_and(|x| signal_w + i128::from(x) <= kill_w.min(end));
    KillTimes {
        pre_stop_budget: budget,
        stop_signal_at: at(signal_w),
        kill_at: (!exits_first).then(|| at(kill_w)),
    }
}

#[cfg(test)]
mod tests {
    //! The reference model against the numbers core/RULES.md states.
    use super::*;

    fn pod() -> Obj {
        Obj {
            uid: "u".into(),
            resource_version: 1,
            generation: 1,
            ts: None,
            dgps: None,
            finalizers: vec![],
            scheduled: true,
            phase: "Running",
            tgps: Some(30),
        }
    }

    const POD: Type = Type {
        graceful: true,
        policy: Policy::DeleteDependents,
        gc_enabled: true,
    };
    const GENERIC: Type = Type {
        graceful: false,
        policy: Policy::DeleteDependents,
        gc_enabled: true,
    };

    fn grace(g: Option<i64>) -> Opts {
        Opts {
            grace: g,
            uid: None,
            resource_version: None,
            propagation: None,
            orphan: None,
        }
    }

    #[test]
    fn r24_r25_default_delete() {
        let d = delete(&pod(), &POD, &grace(None), 1_000_500, 4).unwrap();
        assert_eq!(d.outcome, Outcome::Graceful);
        assert_eq!(d.record.ts, Some(1030));
        assert_eq!(d.record.dgps, Some(30));
        assert_eq!(d.record.generation, 2);
        assert!(d.write && !d.remove);
    }

    #[test]
    fn r29_grace_zero_writes_then_removes() {
        let d = delete(&pod(), &POD, &grace(Some(0)), 1_000_000, 4).unwrap();
        assert_eq!(d.outcome, Outcome::Deleted);
        assert!(d.write && d.remove);
        assert_eq!(d.record.dgps, Some(0));
        assert_eq!(d.record.generation, 2);
    }

    #[test]
    fn timeline_5_shorten_into_the_past_clamps() {
        let mut p = pod();
        p.ts = Some(1030);
        p.dgps = Some(30);
        let d = delete(&p, &POD, &grace(Some(5)), 1_010_000, 4).unwrap();
        assert_eq!(d.record.ts, Some(1010));
        assert_eq!(d.record.dgps, Some(1));
        assert!(!d.remove);
    }

    #[test]
    fn r14_r17_pending() {
        let mut p = pod();
        p.ts = Some(1030);
        p.dgps = Some(30);
        assert_eq!(
            delete(&p, &POD, &grace(Some(30)), 1_000_000, 4)
                .unwrap()
                .outcome,
            Outcome::Pending
        );
        assert_eq!(
            delete(&p, &POD, &grace(None), 1_000_000, 4).unwrap().grace,
            Some(30)
        );
    }

    #[test]
    fn r32_generic_removed_unwritten() {
        let d = delete(&pod(), &GENERIC, &grace(Some(10)), 0, 4).unwrap();
        assert!(d.remove && !d.write);
        assert_eq!(d.record, pod());
    }

    #[test]
    fn r39_unchanged_set_keeps_old_order() {
        let list: Vec<String> = vec!["x".into(), ORPHAN.into(), "y".into()];
        let mut o = grace(None);
        o.propagation = Some("Orphan");
        assert_eq!(gc_finalizers(&list, &POD, &o), None);
        let list: Vec<String> = vec!["x".into(), "y".into()];
        assert_eq!(
            gc_finalizers(&list, &POD, &o),
            Some(vec!["x".into(), "y".into(), ORPHAN.into()])
        );
    }

    #[test]
    fn d2_saturates_at_rfc3339_max() {
        let d = delete(&pod(), &POD, &grace(Some(i64::MAX)), 1_000_000, 4).unwrap();
        assert_eq!(d.record.ts, Some(253_402_300_799));
        assert_eq!(d.record.dgps, Some(i64::MAX));
    }

    #[test]
    fn kubelet_budget() {
        assert_eq!(effective_grace(0, Some(0), None, Some(30)), (1, false)); // R53
        assert_eq!(effective_grace(0, None, None, Some(30)), (30, false));
        assert_eq!(effective_grace(30, Some(5), None, Some(30)), (5, true));
        // The Go code lets an override replace a deletion grace of 0 (its
        // `g == 0` means "nothing yet"); R50 then caps it at what was in force.
        assert_eq!(effective_grace(30, Some(0), Some(45), Some(30)).0, 30);
        assert_eq!(effective_grace(0, Some(0), Some(45), Some(30)).0, 45);
    }

    #[test]
    fn kill_timelines() {
        // Timeline 2: preStop 10 s, ignores SIGTERM: SIGTERM +10, SIGKILL +30.
        let k = kill_times(0, 30, Some(Some(10_000)), None);
        assert_eq!((k.stop_signal_at, k.kill_at), (10_000, Some(30_000)));
        // Timeline 3: the hook hangs: +30, +32.
        let k = kill_times(0, 30, Some(None), None);
        assert_eq!((k.stop_signal_at, k.kill_at), (30_000, Some(32_000)));
        // No hook: SIGKILL at max(G0, 2).
        assert_eq!(kill_times(0, 1, None, None).kill_at, Some(2_000));
        // R61: a 9.5 s hook costs 9 s.
        let k = kill_times(0, 30, Some(Some(9_500)), None);
        assert_eq!(k.kill_at, Some(9_500 + 21_000));
        // Exits within the timeout: no SIGKILL.
        assert_eq!(kill_times(0, 30, None, Some(30_000)).kill_at, None);
        // The end of time.
        let k = kill_times(u64::MAX - 10, i64::MAX, Some(None), None);
        assert_eq!((k.stop_signal_at, k.kill_at), (u64::MAX, Some(u64::MAX)));
    }
}
