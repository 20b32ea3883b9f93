//! One transition through the state machine vs a hand-written enum `match`
//! doing the same transition, measured in the same run.
//!
//! "The same transition" means the same observable effect from the same
//! input: the same fields written (deletion timestamp, grace, generation,
//! resource version; the kill stage), the same action returned, and the
//! validation a careful hand-written machine must do for that input
//! (delete options, preconditions, the grace rules R9 and R18–R21, the
//! garbage-collection finalizers R36–R39, timestamp saturation). The
//! baseline keeps its state in the cheapest form it likes (plain fields,
//! finalizers as flags and a count) and handles only what the benchmark
//! feeds it. Inputs and outputs pass through `black_box` on both sides,
//! and so does the state after the transition.
//!
//! The timeout group has two references besides: the bare match on a
//! state kept next to a pod record (the footprint per object of grace's
//! lifecycle, which holds the record), and the floor (returning a constant
//! action, touching no state).
//!
//! `cargo bench -p grace-core --bench transition`
// A benchmark is not library code: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use grace_core::Input;
use grace_core::{
    Action, ContainerSpec, DeleteOptions, Instant, Lifecycle, MAX_TIMESTAMP_SECONDS, Name, Now,
    Propagation, Record, Strategy,
};

/// One container, like the bare machine's pod.
type Lc = Lifecycle<4, 1>;

/// States prepared per timed batch: few enough that a batch of either
/// machine's states stays in the L2 cache (256 lifecycles of 448 bytes),
/// many enough that reading the timer twice per batch is noise. Criterion's
/// `SmallInput` batches grow with the iteration count until the larger
/// state misses the caches, which would measure memory, not the transition.
const BATCH: u64 = 256;

/// Times `$body` once per state, on batches of `BATCH` fresh copies of
/// `$template`, as criterion's `iter_batched_ref` does, but with the
/// routine written into the timed loop rather than called through a
/// closure: criterion's loop inlined the bare machines' small closures and
/// called grace's larger ones out of line, charging grace alone a call per
/// transition (seen in the bench binary's code).
macro_rules! batched {
    ($b:expr, $template:expr, |$state:ident| $body:block) => {
        $b.iter_custom(|iters| {
            let mut elapsed = std::time::Duration::ZERO;
            let mut done = 0;
            while done < iters {
                let n = (iters - done).min(BATCH);
                let mut states: Vec<_> = black_box((0..n).map(|_| $template.clone()).collect());
                let mut outputs = Vec::with_capacity(states.len());
                let start = std::time::Instant::now();
                for $state in states.iter_mut() {
                    outputs.push($body);
                }
                elapsed += start.elapsed();
                black_box(outputs);
                done += n;
            }
            elapsed
        })
    };
}

fn at(ms: i64) -> Now {
    Now::from_unix_millis(ms)
}

fn uid() -> Name {
    Name::try_from("uid-1").expect("short")
}

fn live_pod() -> Lc {
    Lifecycle::new(
        Strategy::POD,
        Record::new(uid()),
        &[ContainerSpec::default()],
    )
    .expect("fits")
}

/// A pod whose container got SIGTERM at 0 s with a 30 s grace.
fn stopping_pod() -> Lc {
    let mut pod = live_pod();
    let _ = pod
        .handle(at(0), Input::Delete(DeleteOptions::default()))
        .delete()
        .unwrap();
    let _ = pod.handle(at(0), Input::AgentSync).handled();
    while pod.poll_action().is_some() {}
    pod
}

// ---- The hand-written machine -----------------------------------------------

/// What the hand-written machine asks its caller to do.
#[derive(Copy, Clone, Debug, PartialEq)]
enum BareAction {
    RemoveEndpoints,
    Remove,
    Kill,
}

/// Why it refuses a delete.
#[derive(Copy, Clone, Debug, PartialEq)]
enum BareError {
    Invalid,
    Conflict,
}

/// Where the object is.
#[derive(Copy, Clone, Debug, PartialEq)]
enum BareState {
    Live,
    Deleting { deletion_ts: i64, grace: i64 },
    Removed,
}

/// The object as a hand-written pod machine keeps it.
#[derive(Clone, Debug)]
struct BarePod {
    uid: Name,
    state: BareState,
    resource_version: u64,
    generation: i64,
    termination_grace: Option<i64>,
    scheduled: bool,
    finished: bool,
    /// Finalizers: the garbage collector's two as flags, the others counted.
    orphan: bool,
    foreground: bool,
    other_finalizers: u8,
}

impl BarePod {
    fn live() -> Self {
        BarePod {
            uid: uid(),
            state: BareState::Live,
            resource_version: 1,
            generation: 1,
            termination_grace: Some(30),
            scheduled: true,
            finished: false,
            orphan: false,
            foreground: false,
            other_finalizers: 0,
        }
    }
}

/// A delete of a live pod (R4–R9, R18–R29, R36–R39, R85). Deletes of a
/// pod already being deleted are not benchmarked and answer "pending".
fn bare_delete(
    pod: &mut BarePod,
    now_ms: i64,
    o: &DeleteOptions,
) -> Result<Option<BareAction>, BareError> {
    // R5, R6
    if o.orphan_dependents.is_some() && o.propagation_policy.is_some() {
        return Err(BareError::Invalid);
    }
    if o.propagation_policy == Some(Propagation::Unrecognized) {
        return Err(BareError::Invalid);
    }
    // R7
    if o.preconditions.uid.as_ref().is_some_and(|u| *u != pod.uid)
        || o.preconditions
            .resource_version
            .is_some_and(|rv| rv != pod.resource_version)
    {
        return Err(BareError::Conflict);
    }
    match pod.state {
        BareState::Live => {
            // R9, R18–R21
            let mut grace = o
                .grace_period_seconds
                .map(|g| if g < 0 { 1 } else { g })
                .or(pod.termination_grace)
                .unwrap_or(0);
            if !pod.scheduled || pod.finished {
                grace = 0;
            }
            if grace < 0 {
                grace = 1;
            }
            // R37, R38 with the pod default (background); the order of two
            // GC finalizers already present is not tracked.
            let (orphan, foreground) = match (o.orphan_dependents, o.propagation_policy) {
                (Some(orphan), _) => (orphan, false),
                (None, Some(p)) => (p == Propagation::Orphan, p == Propagation::Foreground),
                (None, None) => (pod.orphan, pod.foreground && !pod.orphan),
            };
            let held = pod.other_finalizers > 0 || orphan || foreground;
            if o.dry_run {
                return Ok(None);
            }
            // R24: now + grace in whole seconds, saturating (D2).
            let now_s = now_ms.div_euclid(1000);
            let ceiling = now_s.max(MAX_TIMESTAMP_SECONDS);
            let ts = (i128::from(now_s) + i128::from(grace)).min(i128::from(ceiling));
            pod.state = BareState::Deleting {
                deletion_ts: i64::try_from(ts).unwrap_or(i64::MAX),
                grace,
            };
            pod.orphan = orphan;
            pod.foreground = foreground;
            if pod.generation > 0 {
                pod.generation = pod.generation.saturating_add(1);
            }
            pod.resource_version = pod.resource_version.saturating_add(1);
            if !held && grace == 0 {
                // R29: written, then removed.
                pod.state = BareState::Removed;
                return Ok(Some(BareAction::Remove));
            }
            // R85: out of the endpoints while it terminates.
            Ok((pod.scheduled && !pod.finished).then_some(BareAction::RemoveEndpoints))
        }
        BareState::Deleting { .. } | BareState::Removed => Ok(None),
    }
}

/// One container's kill stage (the two this transition moves between).
#[derive(Copy, Clone, Debug, PartialEq)]
enum BareStage {
    Stopping { kill_at_ms: u64 },
    Killed,
}

/// The agent's side of a one-container pod.
#[derive(Copy, Clone, Debug)]
struct BareKill {
    fenced: bool,
    stage: BareStage,
}

/// [`BareKill`] kept next to the pod's record, as a pod machine keeps its
/// object: the same bytes per object as grace's lifecycle, which holds the
/// record, so that a batch of these falls out of the L1 cache as grace's
/// does. The record is not read by the transition.
#[derive(Clone, Debug)]
struct BarePodKill {
    record: Record<4>,
    kill: BareKill,
}

/// A deadline passed (R63); a fenced node acts no more (R82).
fn bare_timeout(pod: &mut BareKill, now_ms: u64) -> Option<BareAction> {
    if pod.fenced {
        return None;
    }
    match pod.stage {
        BareStage::Stopping { kill_at_ms } if kill_at_ms <= now_ms => {
            pod.stage = BareStage::Killed;
            Some(BareAction::Kill)
        }
        BareStage::Stopping { .. } | BareStage::Killed => None,
    }
}

// ---- Benchmarks -------------------------------------------------------------

fn transition(c: &mut Criterion) {
    let mut group = c.benchmark_group("deadline: SIGKILL due");
    let template = stopping_pod();
    let due = template.poll_timeout().expect("a kill deadline");
    let now = Now::new(at(30_000).wall, due);
    group.bench_function("grace handle_timeout + poll_action", |b| {
        batched!(b, template, |pod| {
            let _ = pod.handle(black_box(now), Input::Timeout);
            let action = black_box(pod.poll_action());
            black_box(&*pod);
            action
        })
    });
    // Not a machine: what handing an `Option<Action>` (8 bytes) through
    // `black_box` and into criterion's outputs costs by itself, on the same
    // states. At 24 bytes it was written field by field and read back
    // whole, which the CPU cannot forward from its store buffer (2.3–2.7×
    // the bare match); one word is built in a register and stored once.
    group.bench_function("floor: Some(SendKill) through black_box", |b| {
        batched!(b, template, |pod| {
            let action = black_box(Some(Action::SendKill {
                container: black_box(0),
            }));
            black_box(&*pod);
            action
        })
    });
    let bare = BareKill {
        fenced: false,
        stage: BareStage::Stopping {
            kill_at_ms: due.as_millis(),
        },
    };
    group.bench_function("bare enum match", |b| {
        batched!(b, bare, |pod| {
            let action = black_box(bare_timeout(pod, black_box(now).mono.as_millis()));
            black_box(&*pod);
            action
        })
    });
    let next_to_record = BarePodKill {
        record: template.record().clone(),
        kill: bare,
    };
    group.bench_function("bare enum match, next to the record", |b| {
        batched!(b, next_to_record, |pod| {
            let action = black_box(bare_timeout(&mut pod.kill, black_box(now).mono.as_millis()));
            black_box(&*pod);
            action
        })
    });
    group.finish();

    let mut group = c.benchmark_group("delete: Live to GracefulPending");
    let template = live_pod();
    let options = DeleteOptions::default();
    let now = at(1_000_000);
    group.bench_function("grace handle_delete + poll_action", |b| {
        batched!(b, template, |pod| {
            let response = pod
                .handle(black_box(now), Input::Delete(black_box(&options).clone()))
                .delete()
                .unwrap();
            black_box(&response);
            let action = black_box(pod.poll_action());
            black_box(&*pod);
            action
        })
    });
    let bare = BarePod::live();
    group.bench_function("bare enum match", |b| {
        batched!(b, bare, |pod| {
            let action = black_box(bare_delete(
                pod,
                black_box(now).wall.as_unix_millis(),
                black_box(&options),
            ));
            black_box(&*pod);
            action
        })
    });
    group.finish();

    same_transitions();
}

/// Both machines must do the same thing, or the comparison is void.
fn same_transitions() {
    // SIGKILL due.
    let mut pod = stopping_pod();
    let due = pod.poll_timeout().expect("a kill deadline");
    let _ = pod.handle(Now::new(at(30_000).wall, due), Input::Timeout);
    assert_eq!(pod.poll_action(), Some(Action::SendKill { container: 0 }));
    assert_eq!(pod.poll_timeout(), None);
    let mut bare = BareKill {
        fenced: false,
        stage: BareStage::Stopping {
            kill_at_ms: due.as_millis(),
        },
    };
    assert_eq!(
        bare_timeout(&mut bare, due.as_millis()),
        Some(BareAction::Kill)
    );
    assert_eq!(bare.stage, BareStage::Killed);
    assert_eq!(bare_timeout(&mut bare, Instant::MAX.as_millis()), None);
    // Next to the record: the same object as grace's, within 64 bytes.
    let with_record = BarePodKill {
        record: pod.record().clone(),
        kill: bare,
    };
    assert_eq!(with_record.record, *pod.record());
    assert!(size_of::<BarePodKill>().abs_diff(size_of::<Lc>()) <= 64);

    // First delete.
    let mut pod = live_pod();
    let _ = pod
        .handle(at(1_000_000), Input::Delete(DeleteOptions::default()))
        .delete()
        .unwrap();
    assert_eq!(pod.poll_action(), Some(Action::RemoveEndpoints));
    assert_eq!(pod.poll_action(), None);
    let record = pod.record();
    let mut bare = BarePod::live();
    assert_eq!(
        bare_delete(&mut bare, 1_000_000, &DeleteOptions::default()),
        Ok(Some(BareAction::RemoveEndpoints))
    );
    assert_eq!(
        bare.state,
        BareState::Deleting {
            deletion_ts: record.deletion_timestamp.expect("set").as_unix_seconds(),
            grace: record.deletion_grace_period_seconds.expect("set"),
        }
    );
    assert_eq!(bare.generation, record.generation);
    assert_eq!(bare.resource_version, record.resource_version);
    assert_eq!(
        (bare.orphan, bare.foreground, bare.other_finalizers),
        (false, false, 0)
    );
    assert!(record.finalizers.is_empty());
}

criterion_group!(benches, transition);
criterion_main!(benches);
