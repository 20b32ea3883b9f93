//! The table against a simple model: a `Vec` of lifecycles, a `Vec` for the
//! objects that owe actions, and a linear scan for deadlines. On random
//! operation sequences both must hand out the same actions for the same
//! objects, in the same order, and report the same next deadline.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use grace_core::Input;
use grace_core::{
    Action, ContainerSpec, DeleteOptions, FinalizerChange, Id, Instant, Lifecycle, Name, Now,
    Record, SharedTable, Strategy as DeleteStrategy, Table, TableFull, UnknownId,
};
use grace_testkit::table_model::TableModel;
use proptest::prelude::*;

const N: usize = 6;
const F: usize = 2;
const C: usize = 2;
type Lc = Lifecycle<F, C>;

fn name(s: &str) -> Name {
    Name::try_from(s).expect("short name")
}

fn pod(seed: u8) -> Lc {
    let mut record = Record::<F>::new(name("uid"));
    if seed & 1 != 0 {
        record
            .finalizers
            .push(name("example.com/hold"))
            .expect("room");
    }
    record.termination_grace_period_seconds = Some(i64::from(seed % 7));
    let spec = |bits: u8| ContainerSpec {
        pre_stop: bits & 1 != 0,
        sidecar: bits & 2 != 0,
        stopped: false,
    };
    let containers = [spec(seed >> 1), spec(seed >> 3)];
    let count = usize::from(seed >> 5) % (C + 1);
    Lifecycle::new(DeleteStrategy::POD, record, &containers[..count]).expect("fits")
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u8),
    Remove(usize),
    Delete(usize, Option<i64>),
    Sync(usize),
    Evict(usize, i64),
    HookDone(usize, usize),
    Exit(usize, usize),
    DropFinalizer(usize),
    NodeLost(usize),
    NodeReady(usize),
    Fence(usize),
    /// Milliseconds to move the clock, then `handle_timeouts`.
    Advance(u64),
    /// Move to the table's next deadline, then `handle_timeouts`.
    ToDeadline,
    /// Take up to this many actions.
    Poll(u8),
}

fn op() -> impl Strategy<Value = Op> {
    let slot = 0..N + 1;
    prop_oneof![
        3 => any::<u8>().prop_map(Op::Insert),
        1 => slot.clone().prop_map(Op::Remove),
        3 => (slot.clone(), prop_oneof![Just(None), (0i64..40).prop_map(Some)])
            .prop_map(|(s, g)| Op::Delete(s, g)),
        3 => slot.clone().prop_map(Op::Sync),
        1 => (slot.clone(), -2i64..10).prop_map(|(s, g)| Op::Evict(s, g)),
        1 => (slot.clone(), 0..C + 1).prop_map(|(s, c)| Op::HookDone(s, c)),
        2 => (slot.clone(), 0..C + 1).prop_map(|(s, c)| Op::Exit(s, c)),
        1 => slot.clone().prop_map(Op::DropFinalizer),
        1 => slot.clone().prop_map(Op::NodeLost),
        1 => slot.clone().prop_map(Op::NodeReady),
        1 => slot.prop_map(Op::Fence),
        3 => (0u64..5_000).prop_map(Op::Advance),
        3 => Just(Op::ToDeadline),
        4 => (0u8..6).prop_map(Op::Poll),
    ]
}

/// The obviously correct restatement (grace-testkit's, which the `table`
/// fuzz target compares with too).
type Model = TableModel<F, C>;

fn now_at(ms: u64) -> Now {
    Now::from_unix_millis(1_700_000_000_000 + i64::try_from(ms).expect("small"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn table_matches_a_vec_of_lifecycles(ops in prop::collection::vec(op(), 1..80)) {
        let mut table: Table<N, F, C> = Table::new();
        let mut model = Model::default();
        // Every id ever handed out, live or not.
        let mut issued: Vec<Id> = Vec::new();
        let mut ms: u64 = 0;

        for op in ops {
            // Pick an existing id by position; `N` (out of range) and ids of
            // removed objects test the unknown-id paths.
            let pick = |k: usize| -> Id {
                model.objects.get(k).map(|(id, _)| *id)
                    .or_else(|| issued.first().copied())
                    .unwrap_or_else(|| {
                        // No id yet: one the table never issued.
                        let mut t: Table<1, F, C> = Table::new();
                        t.insert(pod(0)).expect("room")
                    })
            };
            let now = now_at(ms);
            match op {
                Op::Insert(seed) => {
                    let lifecycle = pod(seed);
                    match table.insert(lifecycle.clone()) {
                        Ok(id) => {
                            prop_assert!(model.objects.len() < N);
                            prop_assert!(
                                model.objects.iter().all(|(i, _)| *i != id),
                                "id {:?} reused while live", id
                            );
                            prop_assert!(!issued.contains(&id), "id {:?} issued twice", id);
                            issued.push(id);
                            model.objects.push((id, lifecycle));
                            model.touched(id);
                        }
                        Err(TableFull(back)) => {
                            prop_assert_eq!(model.objects.len(), N);
                            prop_assert_eq!(back, lifecycle);
                        }
                    }
                }
                Op::Remove(k) => {
                    let id = pick(k);
                    let got = table.remove(id);
                    let pos = model.objects.iter().position(|(i, _)| *i == id);
                    let want = pos.map(|p| model.objects.remove(p).1);
                    model.ready.retain(|i| *i != id);
                    prop_assert_eq!(got, want);
                    prop_assert!(table.get(id).is_none());
                    prop_assert_eq!(table.handle(now, id, Input::AgentSync), Err(UnknownId));
                }
                Op::Delete(k, grace) => {
                    let id = pick(k);
                    let options = DeleteOptions::default().with_grace_period(grace);
                    let got = table.handle(now, id, Input::Delete(options.clone()));
                    match model.get_mut(id).map(|l| l.handle(now, Input::Delete(options.clone()))) {
                        Some(want) => prop_assert_eq!(got, Ok(want)),
                        None => prop_assert!(got.is_err()),
                    }
                    model.touched(id);
                }
                Op::Sync(k) => {
                    let id = pick(k);
                    let got = table.handle(now, id, Input::AgentSync).ok();
                    let want = model.get_mut(id).map(|l| l.handle(now, Input::AgentSync));
                    prop_assert_eq!(got, want);
                    model.touched(id);
                }
                Op::Evict(k, g) => {
                    let id = pick(k);
                    let got = table.handle(now, id, Input::evict(g)).ok();
                    let want = model.get_mut(id).map(|l| l.handle(now, Input::evict(g)));
                    prop_assert_eq!(got, want);
                    model.touched(id);
                }
                Op::HookDone(k, c) => {
                    let id = pick(k);
                    let got = table.handle(now, id, Input::pre_stop_finished(c)).ok();
                    let want = model.get_mut(id).map(|l| l.handle(now, Input::pre_stop_finished(c)));
                    prop_assert_eq!(got, want);
                    model.touched(id);
                }
                Op::Exit(k, c) => {
                    let id = pick(k);
                    let got = table.handle(now, id, Input::container_exited(c)).ok();
                    let want = model.get_mut(id).map(|l| l.handle(now, Input::container_exited(c)));
                    prop_assert_eq!(got, want);
                    model.touched(id);
                }
                Op::DropFinalizer(k) => {
                    let id = pick(k);
                    let change = FinalizerChange::Remove(name("example.com/hold"));
                    let got = table.handle(now, id, Input::FinalizerUpdate(change.clone())).ok();
                    let want = model.get_mut(id).map(|l| l.handle(now, Input::FinalizerUpdate(change.clone())));
                    prop_assert_eq!(got, want);
                    model.touched(id);
                }
                Op::NodeLost(k) => {
                    let id = pick(k);
                    let got = table.handle(now, id, Input::NodeLost).ok();
                    let want = model.get_mut(id).map(|l| l.handle(now, Input::NodeLost));
                    prop_assert_eq!(got, want);
                    model.touched(id);
                }
                Op::NodeReady(k) => {
                    let id = pick(k);
                    let got = table.handle(now, id, Input::NodeReady).ok();
                    let want = model.get_mut(id).map(|l| l.handle(now, Input::NodeReady));
                    prop_assert_eq!(got, want);
                    model.touched(id);
                }
                Op::Fence(k) => {
                    let id = pick(k);
                    let got = table.handle(now, id, Input::NodeFenced).ok();
                    let want = model.get_mut(id).map(|l| l.handle(now, Input::NodeFenced));
                    prop_assert_eq!(got, want);
                    model.touched(id);
                }
                Op::Advance(step) => {
                    ms = ms.saturating_add(step);
                    table.handle_timeouts(now_at(ms));
                    model.handle_timeouts(now_at(ms));
                }
                Op::ToDeadline => {
                    if let Some(t) = table.poll_timeout() {
                        let base = now_at(0).mono.as_millis();
                        ms = ms.max(t.as_millis().saturating_sub(base));
                    }
                    table.handle_timeouts(now_at(ms));
                    model.handle_timeouts(now_at(ms));
                }
                Op::Poll(count) => {
                    for _ in 0..count {
                        let got = table.poll_action();
                        prop_assert_eq!(got, model.poll_action());
                        if got.is_none() {
                            break;
                        }
                    }
                }
            }
            prop_assert_eq!(table.poll_timeout(), model.poll_timeout());
            prop_assert_eq!(table.len(), model.objects.len());
            for (id, lifecycle) in &model.objects {
                prop_assert_eq!(table.get(*id), Some(lifecycle));
            }
        }
        // Drain both to the end: the same remaining actions.
        loop {
            let got = table.poll_action();
            prop_assert_eq!(got, model.poll_action());
            if got.is_none() {
                break;
            }
        }
    }
}

#[test]
fn full_table_hands_the_lifecycle_back_and_a_freed_slot_gets_a_new_id() {
    let mut table: Table<2, F, C> = Table::new();
    let a = table.insert(pod(0)).expect("room");
    let b = table.insert(pod(2)).expect("room");
    let third = pod(4);
    assert_eq!(table.insert(third.clone()), Err(TableFull(third)));
    assert_eq!(table.len(), 2);

    assert!(table.remove(a).is_some());
    let c = table.insert(pod(6)).expect("a slot was freed");
    assert_eq!(c.index(), a.index(), "the freed slot is reused");
    assert_ne!(c, a, "under a new generation");
    assert!(table.get(a).is_none(), "the old id stays dead");
    assert!(table.get(b).is_some() && table.get(c).is_some());
}

#[test]
fn next_deadline_is_the_earliest_of_all_objects() {
    let mut table: Table<4, F, C> = Table::new();
    let start = now_at(0);
    let mut ids = Vec::new();
    for grace in [30, 5, 12] {
        let id = table.insert(pod(1 << 5)).expect("room");
        let options = DeleteOptions::with_grace(grace);
        let _ = table
            .handle(start, id, Input::Delete(options.clone()))
            .expect("accepted");
        let _ = table.handle(start, id, Input::AgentSync).expect("known");
        ids.push(id);
    }
    while table.poll_action().is_some() {}
    let base = start.mono.as_millis();
    assert_eq!(
        table.poll_timeout().map(|t| t.as_millis() - base),
        Some(5_000)
    );
    table.handle_timeouts(now_at(5_000));
    assert_eq!(
        table.poll_action(),
        Some((ids[1], Action::SendKill { container: 0 }))
    );
    assert_eq!(
        table.poll_timeout().map(|t| t.as_millis() - base),
        Some(12_000)
    );
}

#[test]
fn shared_table_is_usable_from_a_static() {
    static TABLE: SharedTable<4, F, C> = SharedTable::new();
    let id = TABLE
        .with(|t| t.insert(pod(0)).expect("room"))
        .expect("not busy");
    let nested = TABLE.with(|_| TABLE.with(|t| t.len()));
    assert_eq!(
        nested,
        Ok(Err(grace_core::Busy)),
        "a nested call is refused, not a panic"
    );
    let len = TABLE.with(|t| {
        assert!(t.get(id).is_some());
        t.len()
    });
    assert_eq!(len, Ok(1));
}

/// Found by the `table` fuzz target (F1): at the end of the monotonic
/// clock every deadline saturates to `now` itself, so one handling could
/// leave an object due, and the table stopped with a due object left. Now
/// one `handle_timeouts` leaves nothing due, whatever the instant.
#[test]
fn handle_timeouts_at_the_end_of_time_leaves_nothing_due() {
    let mut table: Table<4, F, C> = Table::new();
    let sidecar = ContainerSpec {
        pre_stop: true,
        sidecar: true,
        stopped: false,
    };
    let app = ContainerSpec {
        pre_stop: true,
        sidecar: false,
        stopped: false,
    };
    let record = Record::<F>::new(name("uid"));
    let pod = Lifecycle::new(DeleteStrategy::POD, record, &[sidecar, app]).expect("fits");
    let id = table.insert(pod).expect("room");
    let late = Now::new(now_at(0).wall, Instant::from_millis(u64::MAX - 1_000));
    let _ = table.handle(late, id, Input::Delete(DeleteOptions::default()));
    let _ = table.handle(late, id, Input::AgentSync);
    while table.poll_action().is_some() {}
    let end = Now::new(now_at(0).wall, Instant::MAX);
    table.handle_timeouts(end);
    assert!(
        table.poll_timeout().is_none_or(|t| t > end.mono),
        "{:?}",
        table.poll_timeout()
    );
}

#[test]
fn d4_remove_finished_keeps_a_force_deleted_kill_until_it_ends() {
    let mut table: Table<2, F, C> = Table::new();
    // One plain container (seed 1 << 5: no hook, no finalizer, grace 4).
    let id = table.insert(pod(1 << 5)).expect("room");
    let start = now_at(0);
    let response = table
        .handle(start, id, Input::Delete(DeleteOptions::with_grace(0)))
        .expect("known")
        .delete()
        .expect("a delete's reply")
        .expect("accepted");
    assert!(response.force);
    let mut actions = Vec::new();
    while let Some((_, action)) = table.poll_action() {
        actions.push(action);
    }
    assert_eq!(
        actions,
        [Action::RemoveEndpoints, Action::Remove { force: true }]
    );
    // Removing on `Remove` would drop the kill: `remove_finished` does not.
    assert!(table.remove_finished(id).is_none());
    assert!(table.get(id).is_some());
    let _ = table
        .handle(now_at(100), id, Input::AgentSync)
        .expect("known");
    assert_eq!(
        table.poll_action(),
        Some((id, Action::SendStopSignal { container: 0 }))
    );
    assert!(table.remove_finished(id).is_none(), "SIGKILL is due");
    table.handle_timeouts(now_at(2_100));
    assert_eq!(
        table.poll_action(),
        Some((id, Action::SendKill { container: 0 }))
    );
    let _ = table
        .handle(now_at(2_150), id, Input::container_exited(0))
        .expect("known");
    assert!(table.remove_finished(id).is_none(), "an action is owed");
    assert_eq!(
        table.poll_action(),
        Some((id, Action::ContainerStopped { container: 0 }))
    );
    let finished = table.remove_finished(id).expect("finished now");
    assert!(finished.is_finished());
    assert!(table.is_empty());
}
