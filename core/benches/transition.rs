//! One transition through the state machine vs a bare hand-written enum
//! `match` doing the same thing, measured in the same run.
//!
//! `cargo bench -p grace-core --bench transition`

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use grace_core::{Action, ContainerSpec, DeleteOptions, Lifecycle, Name, Now, Record, Strategy};

type Lc = Lifecycle<4, 2>;

fn at(ms: i64) -> Now {
    Now::from_unix_millis(ms)
}

fn live_pod() -> Lc {
    let record = Record::new(Name::try_from("uid-1").expect("short"));
    Lifecycle::new(Strategy::POD, record, &[ContainerSpec::default()]).expect("fits")
}

/// A pod whose container got SIGTERM at 0 s with a 30 s grace.
fn stopping_pod() -> Lc {
    let mut pod = live_pod();
    let _ = pod.handle_delete(at(0), &DeleteOptions::default());
    let _ = pod.handle_agent_sync(at(0));
    while pod.poll_action().is_some() {}
    pod
}

/// The baseline: the least a hand-written machine must do for the same
/// transitions.
#[derive(Copy, Clone)]
enum Bare {
    Live {
        tgps: i64,
        generation: i64,
    },
    Pending {
        deletion_ts: i64,
        grace: i64,
        generation: i64,
    },
    Stopping {
        kill_at_ms: u64,
    },
    Killed,
}

#[derive(Copy, Clone, Debug, PartialEq)]
enum BareAction {
    RemoveEndpoints,
    Kill,
}

fn bare_delete(state: &mut Bare, now_s: i64, grace: Option<i64>) -> Option<BareAction> {
    match *state {
        Bare::Live { tgps, generation } => {
            let grace = grace.unwrap_or(tgps).max(0);
            *state = Bare::Pending {
                deletion_ts: now_s.saturating_add(grace),
                grace,
                generation: generation.saturating_add(1),
            };
            Some(BareAction::RemoveEndpoints)
        }
        Bare::Pending { .. } | Bare::Stopping { .. } | Bare::Killed => None,
    }
}

fn bare_timeout(state: &mut Bare, now_ms: u64) -> Option<BareAction> {
    match *state {
        Bare::Stopping { kill_at_ms } if kill_at_ms <= now_ms => {
            *state = Bare::Killed;
            Some(BareAction::Kill)
        }
        Bare::Live { .. } | Bare::Pending { .. } | Bare::Stopping { .. } | Bare::Killed => None,
    }
}

fn transition(c: &mut Criterion) {
    let mut group = c.benchmark_group("deadline: SIGKILL due");
    let template = stopping_pod();
    let due = template.poll_timeout().expect("a kill deadline");
    let now = Now::new(at(30_000).wall, due);
    group.bench_function("grace handle_timeout + poll_action", |b| {
        b.iter_batched_ref(
            || template.clone(),
            |pod| {
                pod.handle_timeout(black_box(now));
                black_box(pod.poll_action())
            },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("bare enum match", |b| {
        b.iter_batched_ref(
            || Bare::Stopping {
                kill_at_ms: due.as_millis(),
            },
            |state| black_box(bare_timeout(state, black_box(due.as_millis()))),
            BatchSize::SmallInput,
        )
    });
    group.finish();

    let mut group = c.benchmark_group("delete: Live to GracefulPending");
    let template = live_pod();
    let options = DeleteOptions::default();
    group.bench_function("grace handle_delete + poll_action", |b| {
        b.iter_batched_ref(
            || template.clone(),
            |pod| {
                let response = pod.handle_delete(black_box(at(1_000_000)), black_box(&options));
                black_box(&response);
                black_box(pod.poll_action())
            },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("bare enum match", |b| {
        b.iter_batched_ref(
            || Bare::Live {
                tgps: 30,
                generation: 1,
            },
            |state| black_box(bare_delete(state, black_box(1_000), black_box(None))),
            BatchSize::SmallInput,
        )
    });
    group.finish();

    // Both machines must agree on what they did, or the comparison is void.
    let mut pod = template.clone();
    let _ = pod.handle_delete(at(1_000_000), &options);
    assert_eq!(pod.poll_action(), Some(Action::RemoveEndpoints));
    let mut bare = Bare::Live {
        tgps: 30,
        generation: 1,
    };
    assert_eq!(
        bare_delete(&mut bare, 1_000, None),
        Some(BareAction::RemoveEndpoints)
    );
    assert!(matches!(
        bare,
        Bare::Pending {
            deletion_ts: 1_030,
            grace: 30,
            generation: 2
        }
    ));
}

criterion_group!(benches, transition);
criterion_main!(benches);
