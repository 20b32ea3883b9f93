//! The runtime on the durable store (redb on a temp dir): write-ahead,
//! recovery by D6, and deadlines that survive a restart.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::actuators::{Probe, Recorder, WorldActuator};
use common::pod;
use grace_core::{Action, DeleteOptions, Duration, Handled, Input, Phase};
use grace_std::clock::ManualClock;
use grace_std::runtime::{ActionError, Change, Recovery, Runtime};
use grace_std::store::{
    BatchError, Listing, MemoryStore, RedbStore, Revision, Store, StoreError, StoredObject, Watch,
    Write,
};

fn secs(s: u64) -> Duration {
    Duration::from_millis(s * 1000)
}

fn open(
    path: &std::path::Path,
    clock: &Arc<ManualClock>,
    recorder: &Recorder,
    recovery: Recovery,
) -> Runtime<RedbStore, Arc<ManualClock>, Recorder> {
    let store = RedbStore::open(path).expect("store opens");
    Runtime::open(store, clock.clone(), recorder.clone(), recovery).expect("runtime opens")
}

/// The runtime takes every input of the core through `handle`, those it
/// had no method of its own for too: a fenced node (D7) is made durable
/// and acted on like any input.
#[test]
fn d7_a_node_fenced_input_removes_the_deleting_pod_without_a_signal() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("grace.redb");
    let clock = Arc::new(ManualClock::at_unix_millis(1_000_000));
    let recorder = Recorder::default();
    let mut rt = open(&path, &clock, &recorder, Recovery::default());
    rt.create("web-0", pod("u1", false)).expect("created");
    let _ = rt
        .handle("web-0", Input::Delete(DeleteOptions::with_grace(30)))
        .expect("accepted");
    let _ = rt.handle("web-0", Input::AgentSync).expect("known");
    let _ = recorder.take();

    let fenced = rt.handle("web-0", Input::NodeFenced).expect("taken");
    assert_eq!(fenced.handled(), Handled::Applied);
    let after = recorder.take();
    assert!(
        after
            .iter()
            .all(|(_, a)| !matches!(a, Action::SendKill { .. })),
        "no SIGKILL for a node that is gone: {after:?}"
    );
    assert!(rt.lifecycle("web-0").is_none());
    drop(rt);
    let store = RedbStore::open(&path).expect("store opens");
    assert!(
        store.get("web-0").expect("read").is_none(),
        "removed, durably"
    );
}

/// One object's `Input::Timeout` through `handle`: early, it changes
/// nothing; once the SIGKILL deadline has passed, the kill goes out as
/// `handle_timeouts` would send it.
#[test]
fn a_timeout_input_on_one_object_does_nothing_early_and_kills_when_due() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("grace.redb");
    let clock = Arc::new(ManualClock::at_unix_millis(1_000_000));
    let recorder = Recorder::default();
    let mut rt = open(&path, &clock, &recorder, Recovery::default());
    rt.create("web-0", pod("u1", false)).expect("created");
    let _ = rt
        .handle("web-0", Input::Delete(DeleteOptions::with_grace(10)))
        .expect("accepted");
    let _ = rt.handle("web-0", Input::AgentSync).expect("known");
    let _ = recorder.take();

    let deadline = rt.poll_timeout();
    let revision = rt.store().revision().expect("read");
    clock.advance(secs(5));
    let _ = rt.handle("web-0", Input::Timeout).expect("taken");
    assert_eq!(recorder.take(), [], "nothing due yet");
    assert_eq!(rt.poll_timeout(), deadline);
    assert_eq!(
        rt.store().revision().expect("read"),
        revision,
        "nothing written"
    );

    clock.advance(secs(5));
    let _ = rt.handle("web-0", Input::Timeout).expect("taken");
    assert_eq!(
        recorder.take(),
        [("web-0".into(), Action::SendKill { container: 0 })]
    );
}

#[test]
fn d6_restart_honours_the_original_kill_deadline() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("grace.redb");
    let clock = Arc::new(ManualClock::at_unix_millis(1_000_000));
    let recorder = Recorder::default();

    let mut rt = open(&path, &clock, &recorder, Recovery::default());
    rt.create("web-0", pod("u1", false)).expect("created");
    let _ = rt
        .handle("web-0", Input::Delete(DeleteOptions::with_grace(10)))
        .expect("accepted");
    let _ = rt.handle("web-0", Input::AgentSync).expect("known");
    assert_eq!(
        recorder.take(),
        [
            ("web-0".into(), Action::RemoveEndpoints),
            ("web-0".into(), Action::SendStopSignal { container: 0 })
        ]
    );
    let deadline = rt.poll_timeout().expect("SIGKILL due");
    assert_eq!(deadline.as_millis(), 1_010_000);

    // Crash 4 s in: nothing is shut down, the process is just gone.
    clock.advance(secs(4));
    drop(rt);

    let mut rt = open(&path, &clock, &recorder, Recovery::default());
    assert_eq!(
        rt.poll_timeout(),
        Some(deadline),
        "the deadline is not extended"
    );
    assert!(
        recorder.take().is_empty(),
        "nothing owed was lost or repeated"
    );
    clock.advance(secs(5));
    rt.handle_timeouts().expect("ok");
    assert!(recorder.take().is_empty(), "no SIGKILL before its deadline");
    clock.advance(secs(1));
    rt.handle_timeouts().expect("ok");
    assert_eq!(
        recorder.take(),
        [("web-0".into(), Action::SendKill { container: 0 })]
    );
    let _ = rt
        .handle("web-0", Input::container_exited(0))
        .expect("known");
    assert_eq!(
        recorder.take(),
        [("web-0".into(), Action::ContainerStopped { container: 0 })]
    );
    assert!(
        rt.store().get("web-0").expect("readable").is_none(),
        "removed"
    );
    assert!(rt.lifecycle("web-0").is_none(), "forgotten once done");
}

#[test]
fn d6_reset_full_grace_restarts_the_budget_but_never_skips_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("grace.redb");
    let clock = Arc::new(ManualClock::at_unix_millis(1_000_000));
    let recorder = Recorder::default();

    let mut rt = open(&path, &clock, &recorder, Recovery::ResetFullGrace);
    rt.create("hook-0", pod("u1", true)).expect("created");
    let _ = rt
        .handle("hook-0", Input::Delete(DeleteOptions::with_grace(10)))
        .expect("accepted");
    let _ = rt.handle("hook-0", Input::AgentSync).expect("known");
    assert_eq!(
        recorder.take().last(),
        Some(&(
            "hook-0".into(),
            Action::RunPreStop {
                container: 0,
                budget_seconds: 10
            }
        ))
    );
    clock.advance(secs(6));
    drop(rt);

    // Like the kubelet after a restart: the hook runs again with the whole
    // grace, counted from now.
    let mut rt = open(&path, &clock, &recorder, Recovery::ResetFullGrace);
    assert_eq!(
        recorder.take(),
        [(
            "hook-0".into(),
            Action::RunPreStop {
                container: 0,
                budget_seconds: 10
            }
        )]
    );
    assert_eq!(rt.poll_timeout().map(|t| t.as_millis()), Some(1_016_000));
    clock.advance(secs(10));
    rt.handle_timeouts().expect("ok");
    assert_eq!(
        recorder.take(),
        [("hook-0".into(), Action::SendStopSignal { container: 0 })]
    );
}

/// D5, R62 through the runtime: SIGTERM at T, a second delete at T+10
/// clamped to grace 1 (R16): no second SIGTERM, SIGKILL at T+10 + max(1, 2)
/// s = T+12, persisted so that a restart at T+11 keeps it (D6).
#[test]
fn d5_r62_late_shortening_kills_two_seconds_later_across_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("grace.redb");
    let clock = Arc::new(ManualClock::at_unix_millis(1_000_000));
    let recorder = Recorder::default();

    let mut rt = open(&path, &clock, &recorder, Recovery::default());
    rt.create("web-0", pod("u1", false)).expect("created");
    let _ = rt
        .handle("web-0", Input::Delete(DeleteOptions::with_grace(30)))
        .expect("accepted");
    let _ = rt.handle("web-0", Input::AgentSync).expect("known");
    assert_eq!(
        recorder.take().last(),
        Some(&("web-0".into(), Action::SendStopSignal { container: 0 }))
    );
    clock.advance(secs(10));
    let _ = rt
        .handle("web-0", Input::Delete(DeleteOptions::with_grace(5)))
        .expect("accepted");
    let (stored, _) = rt.store().get("web-0").expect("readable").expect("kept");
    assert_eq!(stored.record.deletion_grace_period_seconds, Some(1));
    let _ = rt.handle("web-0", Input::AgentSync).expect("known");
    assert!(recorder.take().is_empty(), "no second SIGTERM");
    assert_eq!(rt.poll_timeout().map(|t| t.as_millis()), Some(1_012_000));

    clock.advance(secs(1));
    drop(rt);
    let mut rt = open(&path, &clock, &recorder, Recovery::default());
    assert_eq!(rt.poll_timeout().map(|t| t.as_millis()), Some(1_012_000));
    clock.advance(Duration::from_millis(999));
    rt.handle_timeouts().expect("ok");
    assert!(recorder.take().is_empty(), "no SIGKILL before T+12");
    clock.advance(Duration::from_millis(1));
    rt.handle_timeouts().expect("ok");
    assert_eq!(
        recorder.take(),
        [("web-0".into(), Action::SendKill { container: 0 })]
    );
    let _ = rt
        .handle("web-0", Input::container_exited(0))
        .expect("known");
    assert!(
        rt.store().get("web-0").expect("readable").is_none(),
        "removed at T+12"
    );
}

/// Finding F5 (fuzz/README.md): a kill started by an eviction alone, with
/// no deletion, must be restarted too, not forgotten.
#[test]
fn d6_reset_full_grace_restarts_an_eviction_in_progress() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("grace.redb");
    let clock = Arc::new(ManualClock::at_unix_millis(1_000_000));
    let recorder = Recorder::default();

    let mut rt = open(&path, &clock, &recorder, Recovery::ResetFullGrace);
    rt.create("web-0", pod("u1", false)).expect("created");
    let _ = rt.handle("web-0", Input::evict(5)).expect("known");
    assert_eq!(
        recorder.take(),
        [("web-0".into(), Action::SendStopSignal { container: 0 })]
    );
    clock.advance(secs(2));
    drop(rt);

    // The kill starts again with the eviction's budget, counted from now.
    let mut rt = open(&path, &clock, &recorder, Recovery::ResetFullGrace);
    assert_eq!(
        recorder.take(),
        [("web-0".into(), Action::SendStopSignal { container: 0 })],
        "the eviction is not forgotten"
    );
    assert_eq!(rt.poll_timeout().map(|t| t.as_millis()), Some(1_007_000));
    clock.advance(secs(5));
    rt.handle_timeouts().expect("ok");
    assert_eq!(
        recorder.take(),
        [("web-0".into(), Action::SendKill { container: 0 })]
    );
    let _ = rt
        .handle("web-0", Input::container_exited(0))
        .expect("known");
    let (stored, _) = rt
        .store()
        .get("web-0")
        .expect("readable")
        .expect("an evicted pod stays");
    assert_eq!(stored.record.phase, grace_core::PodPhase::Failed);
}

#[test]
fn d6_another_boot_finds_the_workload_gone_and_finishes_the_deletion() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("grace.redb");
    let clock = Arc::new(ManualClock::at_unix_millis(1_000_000));
    let recorder = Recorder::default();
    let mut rt = open(&path, &clock, &recorder, Recovery::default());
    rt.create("web-0", pod("u1", false)).expect("created");
    let _ = rt
        .handle("web-0", Input::Delete(DeleteOptions::with_grace(30)))
        .expect("accepted");
    let _ = rt.handle("web-0", Input::AgentSync).expect("known");
    recorder.take();
    drop(rt);

    let rebooted = Arc::new(ManualClock::new(
        grace_core::Now::from_unix_millis(1_060_000),
        "another boot",
    ));
    let rt = open(&path, &rebooted, &recorder, Recovery::default());
    assert_eq!(
        recorder.take(),
        [("web-0".into(), Action::ContainerStopped { container: 0 })],
        "no signal to a process that no longer exists"
    );
    assert!(rt.store().get("web-0").expect("readable").is_none());
}

#[test]
fn accepted_deletion_is_durable_before_any_action() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("grace.redb");
    let clock = Arc::new(ManualClock::at_unix_millis(1_000_000));

    type Seen = Vec<(Action, Option<i64>)>;

    // The actuator checks the store it shares with the runtime: by the time
    // an action runs, the deletion it follows from is already written.
    let store = Arc::new(RedbStore::open(&path).expect("opens"));
    let reader = Arc::clone(&store);
    // Each action, with the deletion timestamp stored when it ran.
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let check = Probe({
        let seen = Arc::clone(&seen);
        move |object: &str, _: &StoredObject, action: &Action| {
            let stored = reader
                .get(object)
                .map_err(|e| ActionError::new(action, e))?;
            let ts =
                stored.and_then(|(o, _)| o.record.deletion_timestamp.map(|t| t.as_unix_seconds()));
            seen.lock().expect("not poisoned").push((*action, ts));
            Ok(())
        }
    });
    let mut rt = Runtime::open(
        Arc::clone(&store),
        clock.clone(),
        check,
        Recovery::default(),
    )
    .expect("opens");
    rt.create("web-0", pod("u1", false)).expect("created");
    let _ = rt
        .handle("web-0", Input::Delete(DeleteOptions::with_grace(10)))
        .expect("accepted");
    let seen = seen.lock().expect("not poisoned").clone();
    assert_eq!(seen, [(Action::RemoveEndpoints, Some(1_010))]);
}

#[test]
fn transitions_are_reported_as_a_stream() {
    let dir = tempfile::tempdir().expect("temp dir");
    let clock = Arc::new(ManualClock::at_unix_millis(1_000_000));
    let recorder = Recorder::default();
    let mut rt = open(
        &dir.path().join("g.redb"),
        &clock,
        &recorder,
        Recovery::default(),
    );
    let stream = rt.subscribe();
    rt.create("web-0", pod("u1", false)).expect("created");
    let _ = rt
        .handle("web-0", Input::Delete(DeleteOptions::with_grace(0)))
        .expect("accepted");
    let changes: Vec<Change> = stream.try_iter().map(|t| t.change).collect();
    assert_eq!(
        changes.last(),
        Some(&Change::Phase {
            from: Phase::Live,
            to: Phase::Deleted
        })
    );
    assert!(changes.contains(&Change::Action(Action::Remove { force: true })));
}

/// A store that counts the batches it is sent (every write is one) and
/// the largest; with a `max`, a larger batch is refused whole, as etcd's
/// transactions refuse one.
#[derive(Clone, Default)]
struct Counting {
    inner: MemoryStore,
    batches: Arc<AtomicUsize>,
    writes: Arc<AtomicUsize>,
    largest: Arc<AtomicUsize>,
    max: Option<usize>,
}

impl Store for Counting {
    fn get(&self, name: &str) -> Result<Option<(StoredObject, Revision)>, StoreError> {
        self.inner.get(name)
    }
    fn list(&self) -> Result<Listing, StoreError> {
        self.inner.list()
    }
    fn revision(&self) -> Result<Revision, StoreError> {
        self.inner.revision()
    }
    fn batch(&self, writes: Vec<Write>) -> Result<Vec<Revision>, BatchError> {
        self.largest.fetch_max(writes.len(), Ordering::SeqCst);
        if self.max.is_some_and(|max| writes.len() > max) {
            return Err(BatchError::backend(StoreError::Unavailable(
                "too many operations in one transaction".into(),
            )));
        }
        self.batches.fetch_add(1, Ordering::SeqCst);
        self.writes.fetch_add(writes.len(), Ordering::SeqCst);
        self.inner.batch(writes)
    }
    fn watch(&self, from: Revision) -> Result<Watch, StoreError> {
        self.inner.watch(from)
    }
    fn max_batch(&self) -> usize {
        self.max.unwrap_or(usize::MAX)
    }
}

impl Counting {
    fn take(&self) -> (usize, usize) {
        (
            self.batches.swap(0, Ordering::SeqCst),
            self.writes.swap(0, Ordering::SeqCst),
        )
    }
}

#[test]
fn deadlines_due_together_are_group_committed_write_ahead() {
    const N: usize = 50;
    let store = Counting::default();
    let clock = Arc::new(ManualClock::at_unix_millis(1_000_000));
    // Records, for every action, the store's revision when it was carried out.
    let seen: Arc<Mutex<Vec<(Action, Revision)>>> = Arc::default();
    let actuator = Probe({
        let (reader, seen) = (store.inner.clone(), Arc::clone(&seen));
        move |_: &str, _: &StoredObject, action: &Action| {
            let revision = reader.revision().map_err(|e| ActionError::new(action, e))?;
            seen.lock().expect("not poisoned").push((*action, revision));
            Ok(())
        }
    });
    let mut rt = Runtime::open(store.clone(), clock.clone(), actuator, Recovery::default())
        .expect("runtime opens");
    for i in 0..N {
        let name = format!("web-{i:02}");
        rt.create(&name, pod(&format!("u{i}"), false))
            .expect("created");
        let _ = rt
            .handle(&name, Input::Delete(DeleteOptions::with_grace(10)))
            .expect("accepted");
        let _ = rt.handle(&name, Input::AgentSync).expect("synced");
    }
    seen.lock().expect("not poisoned").clear();
    let _ = store.take();
    let before = store.inner.revision().expect("revision").get();

    clock.advance(secs(10));
    rt.handle_timeouts().expect("timeouts");

    // Two batches for the whole round, not two writes per object.
    assert_eq!(store.take(), (2, 2 * N));
    let kills = std::mem::take(&mut *seen.lock().expect("not poisoned"));
    assert_eq!(kills.len(), N);
    for (action, revision) in kills {
        assert_eq!(action, Action::SendKill { container: 0 });
        // Write-ahead: all N records of the round were durable before the
        // first SIGKILL, and the records after the actions came later.
        assert_eq!(revision.get(), before + N as u64);
    }
    assert_eq!(
        store.inner.revision().expect("revision").get(),
        before + 2 * N as u64
    );
    // The kill state is kept once, in the lifecycle: the tracked object
    // carries no copy of the agent record (the store does).
    assert!(rt.object("web-00").expect("tracked").agent.is_none());
    let (stored, _) = store.get("web-00").expect("read").expect("stored");
    assert!(stored.agent.is_some());
    // Nothing is due any more; a repeated call writes nothing.
    rt.handle_timeouts().expect("timeouts");
    assert_eq!(store.take(), (0, 0));
}

#[test]
fn group_commit_rounds_fit_the_stores_largest_batch() {
    const N: usize = 50;
    let store = Counting {
        max: Some(16),
        ..Counting::default()
    };
    let clock = Arc::new(ManualClock::at_unix_millis(1_000_000));
    let recorder = Recorder::default();
    let mut rt = Runtime::open(
        store.clone(),
        clock.clone(),
        recorder.clone(),
        Recovery::default(),
    )
    .expect("runtime opens");
    for i in 0..N {
        let name = format!("web-{i:02}");
        rt.create(&name, pod(&format!("u{i}"), false))
            .expect("created");
        let _ = rt
            .handle(&name, Input::Delete(DeleteOptions::with_grace(10)))
            .expect("accepted");
        let _ = rt.handle(&name, Input::AgentSync).expect("synced");
    }
    let _ = store.take();
    recorder.take();

    clock.advance(secs(10));
    rt.handle_timeouts().expect("timeouts");

    // Four rounds (16 + 16 + 16 + 2), each a batch before its SIGKILLs and
    // one after; none larger than the store takes.
    assert_eq!(store.take(), (8, 2 * N));
    assert_eq!(store.largest.load(Ordering::SeqCst), 16);
    let kills = recorder.take();
    assert_eq!(kills.len(), N);
    assert!(
        kills
            .iter()
            .all(|(_, a)| *a == Action::SendKill { container: 0 })
    );
}

#[test]
fn r62_sigkill_counts_two_seconds_from_when_the_stop_signal_really_went_out() {
    let clock = Arc::new(ManualClock::at_unix_millis(1_000_000));
    // Stop signals take 300 ms of the clock to go out (a loaded machine,
    // a round of many actions).
    let (mut actuator, _) = WorldActuator::new(clock.clone());
    actuator.stop_takes = Duration::from_millis(300);
    let recorder = actuator.recorder.clone();
    let mut rt = Runtime::open(
        grace_std::MemoryStore::new(),
        clock.clone(),
        actuator,
        Recovery::default(),
    )
    .expect("runtime opens");
    rt.create("web-0", pod("u1", false)).expect("created");
    // Grace 1: decided at 1 000 000 with SIGKILL due at 1 002 000 by the
    // budget; the stop signal went out at 1 000 300 (read after it
    // returned, rounded up to 1 000 301): no SIGKILL before 1 002 301.
    let _ = rt
        .handle("web-0", Input::Delete(DeleteOptions::with_grace(1)))
        .expect("accepted");
    let _ = rt.handle("web-0", Input::AgentSync).expect("known");
    assert_eq!(
        recorder.take_actions(),
        [
            Action::RemoveEndpoints,
            Action::SendStopSignal { container: 0 }
        ]
    );
    assert_eq!(
        rt.poll_timeout().map(|t| t.as_millis()),
        Some(1_002_301),
        "2 s after the stop signal went out, not after it was decided"
    );
    clock.advance_to(grace_core::Instant::from_millis(1_002_300));
    rt.handle_timeouts().expect("ok");
    assert!(recorder.take_actions().is_empty(), "not yet");
    clock.advance(Duration::from_millis(1));
    rt.handle_timeouts().expect("ok");
    assert_eq!(recorder.take_actions(), [Action::SendKill { container: 0 }]);
}
