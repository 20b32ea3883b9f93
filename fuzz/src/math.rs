//! The `grace_math` target: the pure arithmetic on extreme values. No
//! panic, no wrap (the targets are built with overflow checks, and every
//! result is compared with the same computation in `i128`), and results
//! monotone where the rules say so.

use arbitrary::Arbitrary;
use grace_core::{
    Duration, Instant, MAX_TIMESTAMP_SECONDS, Now, Record, Timestamp, WallTime, decide_delete,
    effective_grace, pod_grace_period,
};

use crate::input::{DeleteSpec, Grace, MAX_TS, MonoMs, ObjectSpec, WallMs};

/// Finalizer capacity of the records used here.
const F: usize = 4;

#[derive(Arbitrary, Debug)]
pub enum Case {
    /// `effective_grace` (R50–R55).
    Effective {
        remembered: Grace,
        dgps: Option<Grace>,
        over: Option<Grace>,
        spec: Option<Grace>,
    },
    /// `pod_grace_period` (R18–R21) for two requests.
    PodGrace {
        object: ObjectSpec,
        a: Option<Grace>,
        b: Option<Grace>,
    },
    /// `decide_delete` for two requests that differ only in their grace.
    DeleteMonotone {
        object: ObjectSpec,
        now: WallMs,
        spec: DeleteSpec,
        a: Option<Grace>,
        b: Grace,
    },
    Instant {
        a: MonoMs,
        b: MonoMs,
        d: MonoMs,
    },
    Duration {
        s: Grace,
        t: Grace,
        ms: MonoMs,
        other: MonoMs,
    },
    Wall {
        a: WallMs,
        b: WallMs,
    },
    Timestamp {
        a: i64,
        b: i64,
    },
}

/// R9: a negative request reads as 1.
fn normalise(g: Option<i64>) -> Option<i64> {
    g.map(|g| if g < 0 { 1 } else { g })
}

/// R10: a stored negative grace reads as 1.
fn read_grace(g: i64) -> i64 {
    if g < 0 { 1 } else { g }
}

/// Runs every case; panics on the first violation.
pub fn run(cases: &[Case]) {
    for case in cases.iter().take(64) {
        check(case);
    }
}

fn check(case: &Case) {
    match case {
        Case::Effective {
            remembered,
            dgps,
            over,
            spec,
        } => {
            let (d, o, s) = (dgps.map(|g| g.0), over.map(|g| g.0), spec.map(|g| g.0));
            // Any i64 must not panic, even a remembered budget the agent
            // never holds (negative).
            let _ = effective_grace(remembered.0, d, o, s);
            // The agent remembers 0 (not started) or a budget ≥ 1.
            let rem = remembered.0.max(0);
            let r = effective_grace(rem, d, o, s);
            let fail = |why: &str| -> ! {
                panic!("effective_grace({rem}, {d:?}, {o:?}, {s:?}) = {r:?}: {why}")
            };
            if r.seconds < 1 {
                fail("R54: below 1 s");
            }
            if rem > 0 && r.seconds > rem {
                fail("R50: the budget grew");
            }
            if r.shortened != (rem != 0 && rem != r.seconds) {
                fail("R55: shortened flag");
            }
            if let Some(o) = o
                && r.seconds > o.max(1)
            {
                fail("R52: an override only shortens");
            }
            if let Some(d) = d
                && d != 0
                && r.seconds > d.max(1)
            {
                fail("R51: a smaller deletion grace is bedrock truth");
            }
            if rem == 0 && d.is_none() && o.is_none() && r.seconds != s.unwrap_or(0).max(1) {
                fail("R53: the spec is the fallback");
            }
        }
        Case::PodGrace { object, a, b } => {
            let record: Record<F> = object.record(0);
            let _ = pod_grace_period(&record, a.map(|g| g.0)); // raw: no panic
            let (a, b) = (normalise(a.map(|g| g.0)), normalise(b.map(|g| g.0)));
            let (pa, pb) = (pod_grace_period(&record, a), pod_grace_period(&record, b));
            let fail = |why: &str| -> ! {
                panic!("pod_grace_period({record:?}, {a:?} / {b:?}) = {pa} / {pb}: {why}")
            };
            if pa < 0 || pb < 0 {
                fail("R21: negative period");
            }
            let nothing_runs = !record.scheduled || record.phase.is_terminal();
            if nothing_runs && (pa != 0 || pb != 0) {
                fail("R19/R20: unscheduled or finished pods get 0");
            }
            if !nothing_runs && (a.is_some_and(|a| pa != a) || b.is_some_and(|b| pb != b)) {
                fail("R18: the request's grace is taken");
            }
            if let (Some(a), Some(b)) = (a, b)
                && a <= b
                && pa > pb
            {
                fail("a shorter request gave a longer period");
            }
        }
        Case::DeleteMonotone {
            object,
            now,
            spec,
            a,
            b,
        } => check_delete_monotone(object, now.0, spec, a.map(|g| g.0), b.0),
        Case::Instant { a, b, d } => {
            let (ia, ib, dd) = (
                Instant::from_millis(a.0),
                Instant::from_millis(b.0),
                Duration::from_millis(d.0),
            );
            let sum = u128::from(a.0) + u128::from(d.0);
            let want_checked = u64::try_from(sum).ok();
            if ia.checked_add(dd).map(Instant::as_millis) != want_checked {
                panic!(
                    "Instant({}) checked_add {}: {:?}",
                    a.0,
                    d.0,
                    ia.checked_add(dd)
                );
            }
            let want_sat = u64::try_from(sum).unwrap_or(u64::MAX);
            if ia.saturating_add(dd).as_millis() != want_sat {
                panic!(
                    "Instant({}) saturating_add {}: {:?}",
                    a.0,
                    d.0,
                    ia.saturating_add(dd)
                );
            }
            let since = ia.saturating_duration_since(ib).as_millis();
            if since != a.0.saturating_sub(b.0) {
                panic!("Instant({}) - Instant({}) = {since}", a.0, b.0);
            }
            if (ia <= ib) != (a.0 <= b.0) {
                panic!("Instant order");
            }
            if a.0 <= b.0 && ia.saturating_add(dd) > ib.saturating_add(dd) {
                panic!("saturating_add is not monotone");
            }
        }
        Case::Duration { s, t, ms, other } => {
            let grace_ms = |g: i64| -> u64 {
                if g <= 0 {
                    0
                } else {
                    u64::try_from(i128::from(g) * 1000).unwrap_or(u64::MAX)
                }
            };
            let (ds, dt) = (
                Duration::from_grace_seconds(s.0),
                Duration::from_grace_seconds(t.0),
            );
            if ds.as_millis() != grace_ms(s.0) {
                panic!("from_grace_seconds({}) = {ds:?}", s.0);
            }
            if s.0 <= t.0 && ds > dt {
                panic!("from_grace_seconds is not monotone: {} {}", s.0, t.0);
            }
            let d = Duration::from_millis(ms.0);
            if d.whole_seconds() != ms.0 / 1000 {
                panic!("R61: whole_seconds({}) = {}", ms.0, d.whole_seconds());
            }
            let sum = d.saturating_add(Duration::from_millis(other.0)).as_millis();
            if sum != ms.0.saturating_add(other.0) {
                panic!("Duration saturating_add {} {}", ms.0, other.0);
            }
            if Duration::MAX.saturating_add(d) != Duration::MAX
                || Instant::MAX.saturating_add(d) != Instant::MAX
            {
                panic!("D2: the end of time moved");
            }
        }
        Case::Wall { a, b } => {
            for w in [a.0, b.0] {
                let ts = WallTime::from_unix_millis(w)
                    .floor_to_timestamp()
                    .as_unix_seconds();
                let want = i128::from(w).div_euclid(1000);
                if i128::from(ts) != want {
                    panic!("R48: floor_to_timestamp({w}) = {ts}");
                }
                let now = Now::from_unix_millis(w);
                if now.wall.as_unix_millis() != w
                    || now.mono.as_millis() != u64::try_from(w.max(0)).unwrap_or(0)
                {
                    panic!("Now::from_unix_millis({w}) = {now:?}");
                }
            }
            let (fa, fb) = (
                WallTime::from_unix_millis(a.0).floor_to_timestamp(),
                WallTime::from_unix_millis(b.0).floor_to_timestamp(),
            );
            if a.0 <= b.0 && fa > fb {
                panic!("floor_to_timestamp is not monotone: {} {}", a.0, b.0);
            }
        }
        Case::Timestamp { a, b } => {
            let (ta, tb) = (
                Timestamp::from_unix_seconds(*a),
                Timestamp::from_unix_seconds(*b),
            );
            if ta.as_unix_seconds() != *a || (ta < tb) != (a < b) {
                panic!("Timestamp round trip / order: {a} {b}");
            }
            if MAX_TIMESTAMP_SECONDS != MAX_TS {
                panic!("D2: MAX_TIMESTAMP_SECONDS is {MAX_TIMESTAMP_SECONDS}");
            }
        }
    }
}

/// A shorter requested grace never gives a later timestamp — except that
/// R16 clamps into the present: `ts(short) ≤ max(ts(long), now)` — nor a
/// longer stored grace; timestamps saturate (D2); generations bump at most
/// once, only on a first deletion (R12, R25, R31), and never wrap.
fn check_delete_monotone(
    object: &ObjectSpec,
    now_ms: i64,
    spec: &DeleteSpec,
    a: Option<i64>,
    b: i64,
) {
    let record: Record<F> = object.record(now_ms);
    let now = WallTime::from_unix_millis(now_ms);
    let now_ts = now.floor_to_timestamp();
    let with = |g: Option<i64>| spec.options(&record, now_ms).with_grace_period(g);
    let (oa, ob) = (with(a), with(Some(b)));
    let ra = decide_delete(&record, &object.strategy, &oa, now);
    let rb = decide_delete(&record, &object.strategy, &ob, now);
    for (options, r) in [(&oa, &ra), (&ob, &rb)] {
        let Ok(d) = r else { continue };
        let fail = |why: &str| -> ! {
            panic!(
                "decide_delete: {why}\n  stored: {record:?}\n  strategy: {:?}\n  options: {options:?}\n  now: {now_ms}\n  decision: {d:?}",
                object.strategy
            )
        };
        if !d.write && d.record != record {
            fail("nothing written, yet the response differs from the stored record");
        }
        if d.write
            && let Some(ts) = d.record.deletion_timestamp
            && Some(ts) != record.deletion_timestamp
            && ts.as_unix_seconds() > MAX_TS.max(now_ts.as_unix_seconds())
        {
            fail("D2: timestamp past 9999-12-31T23:59:59Z");
        }
        let g0 = record.generation;
        let g1 = d.record.generation;
        let bumped = g0.saturating_add(1);
        let allowed = if record.deletion_timestamp.is_none() && g0 > 0 {
            g1 == g0 || g1 == bumped
        } else {
            g1 == g0
        };
        if !allowed {
            fail("R12/R25/R31: generation");
        }
    }
    if a.is_none() {
        return; // "no grace" is not ordered against a number
    }
    let (Ok(da), Ok(db)) = (&ra, &rb) else { return };
    let (na, nb) = (normalise(a), normalise(Some(b)));
    let ((short, short_opts), (long, long_opts)) = if na <= nb {
        ((da, &oa), (db, &ob))
    } else {
        ((db, &ob), (da, &oa))
    };
    let fail = |why: &str| -> ! {
        panic!(
            "decide_delete is not monotone in the grace: {why}\n  stored: {record:?}\n  strategy: {:?}\n  now: {now_ms}\n  shorter: {short_opts:?}\n    -> {short:?}\n  longer: {long_opts:?}\n    -> {long:?}",
            object.strategy
        )
    };
    if let (Some(ts_s), Some(ts_l)) = (
        short.record.deletion_timestamp,
        long.record.deletion_timestamp,
    ) && ts_s > ts_l.max(now_ts)
    {
        fail("the shorter request's timestamp is later (beyond now)");
    }
    if let (Some(g_s), Some(g_l)) = (
        short.record.deletion_grace_period_seconds,
        long.record.deletion_grace_period_seconds,
    ) && read_grace(g_s) > read_grace(g_l)
    {
        fail("the shorter request's stored grace is longer");
    }
}
