//! The runtime when a store write fails: refused (nothing written), or
//! applied with its acknowledgement lost (a timeout after the commit, an
//! I/O error reported after the data went out). Either way the runtime
//! must neither lose nor move an accepted deletion, must carry out a
//! removal it decided, and must not be left failing once the store works
//! again. Found by the `store_recovery` fuzz target (fuzz/README.md,
//! findings F2–F4).
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

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::actuators::Recorder;
use common::pod;
use grace_core::{Action, DeleteOptions, Duration, Input, Phase};
use grace_std::clock::{Clock, ManualClock};
use grace_std::runtime::{Recovery, Runtime, RuntimeError};
use grace_std::store::{
    BatchError, Listing, MemoryStore, Revision, Store, StoreError, StoredObject, Watch, Write,
};

/// What the store does with one write.
#[derive(Clone, Copy, Debug)]
enum Next {
    Refuse,
    ApplyThenFail,
    /// Refused, and the store stops answering (reads too) until `down`
    /// is cleared.
    GoDown,
}

/// A memory store whose next writes fail as scripted (an empty script lets
/// them through), and whose reads fail while `down`.
#[derive(Clone, Default)]
struct Faulty {
    inner: Arc<MemoryStore>,
    script: Arc<Mutex<VecDeque<Option<Next>>>>,
    down: Arc<AtomicBool>,
    /// Reads of one object asked for (answered or not).
    gets: Arc<AtomicUsize>,
}

impl Faulty {
    /// The next writes: `None` passes, `Some` fails.
    fn then(&self, writes: &[Option<Next>]) {
        self.script
            .lock()
            .expect("not poisoned")
            .extend(writes.iter().copied());
    }

    fn unavailable(what: &str) -> StoreError {
        StoreError::Unavailable(what.into())
    }

    fn stored(&self, name: &str) -> Option<StoredObject> {
        self.inner.get(name).expect("readable").map(|(o, _)| o)
    }
}

impl Store for Faulty {
    fn get(&self, name: &str) -> Result<Option<(StoredObject, Revision)>, StoreError> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        if self.down.load(Ordering::SeqCst) {
            return Err(Faulty::unavailable("down"));
        }
        self.inner.get(name)
    }
    fn list(&self) -> Result<Listing, StoreError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(Faulty::unavailable("down"));
        }
        self.inner.list()
    }
    fn revision(&self) -> Result<Revision, StoreError> {
        self.inner.revision()
    }
    fn batch(&self, writes: Vec<Write>) -> Result<Vec<Revision>, BatchError> {
        let next = self
            .script
            .lock()
            .expect("not poisoned")
            .pop_front()
            .flatten();
        if self.down.load(Ordering::SeqCst) {
            return Err(BatchError::backend(Faulty::unavailable("down")));
        }
        match next {
            None => self.inner.batch(writes),
            Some(Next::Refuse) => Err(BatchError::backend(Faulty::unavailable("refused"))),
            Some(Next::GoDown) => {
                self.down.store(true, Ordering::SeqCst);
                Err(BatchError::backend(Faulty::unavailable("down")))
            }
            Some(Next::ApplyThenFail) => {
                self.inner.batch(writes)?;
                Err(BatchError::backend(Faulty::unavailable(
                    "acknowledgement lost",
                )))
            }
        }
    }
    fn watch(&self, from: Revision) -> Result<Watch, StoreError> {
        self.inner.watch(from)
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_millis(s * 1000)
}

type Rt = Runtime<Faulty, Arc<ManualClock>, Recorder>;

fn open(store: &Faulty, clock: &Arc<ManualClock>, recorder: &Recorder) -> Rt {
    Runtime::open(
        store.clone(),
        clock.clone(),
        recorder.clone(),
        Recovery::default(),
    )
    .expect("opens")
}

fn setup() -> (Faulty, Arc<ManualClock>, Recorder, Rt) {
    let store = Faulty::default();
    let clock = Arc::new(ManualClock::at_unix_millis(1_000_000));
    let recorder = Recorder::default();
    let rt = open(&store, &clock, &recorder);
    (store, clock, recorder, rt)
}

fn stored_ts(store: &Faulty, name: &str) -> Option<i64> {
    store
        .stored(name)
        .and_then(|o| o.record.deletion_timestamp)
        .map(|t| t.as_unix_seconds())
}

/// F2: the decision was durable and its actions carried out when the write
/// after them failed; the runtime must not forget the deletion (and decide
/// it again, later, on a retry).
#[test]
fn a_write_refused_after_the_actions_neither_forgets_nor_moves_the_deletion() {
    let (store, clock, recorder, mut rt) = setup();
    rt.create("web-0", pod("u1", false)).expect("created");
    // The decision is written, the endpoints removed, then the write that
    // records them as done fails.
    store.then(&[None, Some(Next::Refuse)]);
    let result = rt.handle("web-0", Input::Delete(DeleteOptions::with_grace(30)));
    assert!(matches!(result, Err(RuntimeError::Store(_))), "{result:?}");
    assert_eq!(stored_ts(&store, "web-0"), Some(1_030));
    // Read back, the stored decision still owes the endpoints' removal:
    // carried out again (at least once; actions are idempotent).
    assert!(recorder.take_actions().contains(&Action::RemoveEndpoints));
    assert_ne!(
        rt.lifecycle("web-0").map(|l| l.phase()),
        Some(Phase::Live),
        "the durable deletion is not forgotten"
    );

    // The client retries 5 s later: the timestamp stays where it was.
    clock.advance(secs(5));
    let response = rt
        .handle("web-0", Input::Delete(DeleteOptions::with_grace(30)))
        .expect("accepted")
        .delete()
        .expect("a delete's answer");
    assert_eq!(
        response
            .record
            .deletion_timestamp
            .map(|t| t.as_unix_seconds()),
        Some(1_030)
    );
    assert_eq!(stored_ts(&store, "web-0"), Some(1_030), "never moved later");
}

/// F3: the final delete failed; the removal stays owed (in the store, so a
/// restart does it too) and is retried, not dropped.
#[test]
fn a_refused_removal_is_retried() {
    let (store, clock, recorder, mut rt) = setup();
    rt.create("web-0", pod("u1", false)).expect("created");
    let _ = rt
        .handle("web-0", Input::Delete(DeleteOptions::with_grace(30)))
        .expect("accepted");
    let _ = rt.handle("web-0", Input::AgentSync).expect("known");
    recorder.take_actions();
    // The decision is written, the container released, the record's
    // removal refused; read back at once, the removal is retried.
    store.then(&[None, Some(Next::Refuse)]);
    let result = rt.handle("web-0", Input::container_exited(0));
    assert!(matches!(result, Err(RuntimeError::Store(_))), "{result:?}");
    assert!(store.stored("web-0").is_none(), "removed on the retry");

    // When the store stops answering there, the removal stays owed in the
    // store, and a restart carries it out.
    rt.create("web-1", pod("u2", false)).expect("created");
    let _ = rt
        .handle("web-1", Input::Delete(DeleteOptions::with_grace(30)))
        .expect("accepted");
    let _ = rt.handle("web-1", Input::AgentSync).expect("known");
    store.then(&[None, Some(Next::GoDown)]);
    let _ = rt.handle("web-1", Input::container_exited(0));
    assert!(store.stored("web-1").is_some());
    drop(rt);
    store.down.store(false, Ordering::SeqCst);
    let _rt = open(&store, &clock, &recorder);
    assert!(store.stored("web-1").is_none(), "removed at the restart");
}

/// F3, without a restart: the retry comes from `handle_timeouts`, once
/// the store answers again.
#[test]
fn a_removal_refused_while_the_store_is_down_is_retried_from_handle_timeouts() {
    let (store, clock, _recorder, mut rt) = setup();
    rt.create("web-0", pod("u1", false)).expect("created");
    let _ = rt
        .handle("web-0", Input::Delete(DeleteOptions::with_grace(30)))
        .expect("accepted");
    let _ = rt.handle("web-0", Input::AgentSync).expect("known");
    // The removal fails and the store stops answering altogether.
    store.then(&[None, Some(Next::GoDown)]);
    let result = rt.handle("web-0", Input::container_exited(0));
    assert!(matches!(result, Err(RuntimeError::Store(_))), "{result:?}");
    let retry = rt.poll_timeout().expect("a retry is scheduled");
    assert!(retry > clock.now().mono, "not a busy loop");

    store.down.store(false, Ordering::SeqCst);
    clock.advance_to(retry);
    rt.handle_timeouts().expect("the store answers again");
    assert!(store.stored("web-0").is_none(), "removed");
    assert!(rt.lifecycle("web-0").is_none(), "forgotten once done");
}

/// F4: the create was applied, its acknowledgement lost. The object must
/// not stay stored behind the runtime's back.
#[test]
fn a_create_whose_acknowledgement_was_lost_is_tracked() {
    let (store, _clock, _recorder, mut rt) = setup();
    store.then(&[Some(Next::ApplyThenFail)]);
    let result = rt.create("web-0", pod("u1", false));
    assert!(matches!(result, Err(RuntimeError::Store(_))), "{result:?}");
    assert!(store.stored("web-0").is_some());
    assert!(rt.lifecycle("web-0").is_some(), "tracked");
    let _ = rt
        .handle("web-0", Input::Delete(DeleteOptions::with_grace(0)))
        .expect("deletable");
}

/// F4: the delete's write was applied, its acknowledgement lost. The
/// runtime must take the stored state as it is, not fail every later
/// write on a stale revision.
#[test]
fn a_write_whose_acknowledgement_was_lost_does_not_wedge_the_object() {
    let (store, clock, recorder, mut rt) = setup();
    rt.create("web-0", pod("u1", false)).expect("created");
    store.then(&[Some(Next::ApplyThenFail)]);
    let result = rt.handle("web-0", Input::Delete(DeleteOptions::with_grace(30)));
    assert!(matches!(result, Err(RuntimeError::Store(_))), "{result:?}");
    assert_eq!(stored_ts(&store, "web-0"), Some(1_030));

    clock.advance(secs(5));
    let _ = rt.handle("web-0", Input::AgentSync).expect("not wedged");
    assert!(
        recorder
            .take_actions()
            .contains(&Action::SendStopSignal { container: 0 }),
        "the stored deletion is acted on"
    );
    let _ = rt
        .handle("web-0", Input::container_exited(0))
        .expect("not wedged");
    assert!(store.stored("web-0").is_none(), "removed");
}

/// F6: with group commit, the batch written after a round's actions (a
/// SIGKILL here) was applied but its answer lost; the runtime kept the
/// revisions from before it, so the object's next input conflicted. Found
/// by `store_recovery` after the fixes above were combined with group
/// commit.
#[test]
fn a_round_whose_batch_after_the_actions_lost_its_answer_does_not_wedge_the_object() {
    let (store, clock, recorder, mut rt) = setup();
    rt.create("web-0", pod("u1", false)).expect("created");
    let _ = rt
        .handle("web-0", Input::Delete(DeleteOptions::with_grace(5)))
        .expect("accepted");
    let _ = rt.handle("web-0", Input::AgentSync).expect("synced");
    recorder.take_actions();

    clock.advance(secs(5));
    // The write-ahead batch passes; the one after the SIGKILL is applied
    // with its answer lost.
    store.then(&[None, Some(Next::ApplyThenFail)]);
    let result = rt.handle_timeouts();
    assert!(matches!(result, Err(RuntimeError::Store(_))), "{result:?}");
    assert!(
        recorder
            .take_actions()
            .contains(&Action::SendKill { container: 0 })
    );

    let _ = rt
        .handle("web-0", Input::container_exited(0))
        .expect("not wedged");
    assert!(store.stored("web-0").is_none(), "removed");
}

/// A round whose write-ahead batch got no answer leaves all its objects
/// unsure; the store is asked once, not once per object (on etcd each
/// unanswered read waits out a timeout). While it stays down, each retry
/// asks it once; when it answers again, every object is read back and its
/// kill carried out.
#[test]
fn a_store_still_down_at_the_retry_is_asked_once_not_once_per_object() {
    let (store, clock, recorder, mut rt) = setup();
    let names: Vec<String> = (0..5).map(|i| format!("web-{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        rt.create(name, pod(&format!("u{i}"), false))
            .expect("created");
        let _ = rt
            .handle(name, Input::Delete(DeleteOptions::with_grace(5)))
            .expect("accepted");
        let _ = rt.handle(name, Input::AgentSync).expect("synced");
    }
    recorder.take_actions();
    clock.advance(secs(5));
    store.then(&[Some(Next::GoDown)]);
    let before = store.gets.load(Ordering::SeqCst);
    assert!(rt.handle_timeouts().is_err(), "the round's batch failed");
    assert_eq!(
        store.gets.load(Ordering::SeqCst) - before,
        1,
        "one unanswered read back, not one per object of the round"
    );
    // Due, SIGKILL goes out unwritten (see
    // `r63_a_sigkill_due_while_the_store_takes_no_write_is_sent_at_its_deadline`),
    // and nothing else.
    assert_eq!(
        recorder.take_actions(),
        vec![Action::SendKill { container: 0 }; names.len()],
        "only the due SIGKILLs act unwritten"
    );

    let retry = rt.poll_timeout().expect("a retry is scheduled");
    clock.advance_to(retry);
    let before = store.gets.load(Ordering::SeqCst);
    assert!(rt.handle_timeouts().is_err(), "still down");
    assert_eq!(
        store.gets.load(Ordering::SeqCst) - before,
        1,
        "one unanswered read stops the retry"
    );
    assert!(recorder.take_actions().is_empty(), "each SIGKILL once");

    store.down.store(false, Ordering::SeqCst);
    let retry = rt.poll_timeout().expect("a retry is scheduled again");
    assert!(retry > clock.now().mono, "not a busy loop");
    clock.advance_to(retry);
    rt.handle_timeouts().expect("the store answers again");
    let kills = recorder
        .take_actions()
        .into_iter()
        .filter(|a| matches!(a, Action::SendKill { .. }))
        .count();
    assert_eq!(kills, names.len(), "every object's SIGKILL, once");
}

/// R63 while the store takes no write (a full disk, an etcd out of
/// reach): the SIGKILL that is due goes out at its deadline all the same,
/// though its write-ahead cannot be written — not a millisecond before, and
/// once while the outage lasts. Once the store takes writes again, the
/// deletion is recorded and ends as usual.
#[test]
fn r63_a_sigkill_due_while_the_store_takes_no_write_is_sent_at_its_deadline() {
    let (store, clock, recorder, mut rt) = setup();
    rt.create("web-0", pod("u1", false)).expect("created");
    let _ = rt
        .handle("web-0", Input::Delete(DeleteOptions::with_grace(3)))
        .expect("accepted");
    let _ = rt.handle("web-0", Input::AgentSync).expect("synced");
    assert!(
        recorder
            .take_actions()
            .contains(&Action::SendStopSignal { container: 0 })
    );
    let kill_at = rt.poll_timeout().expect("SIGKILL is due later");

    store.down.store(true, Ordering::SeqCst);
    clock.advance_to(kill_at.saturating_sub(Duration::from_millis(1)));
    let _ = rt.handle_timeouts();
    assert!(
        recorder.take_actions().is_empty(),
        "not a millisecond early"
    );
    clock.advance_to(kill_at);
    let result = rt.handle_timeouts();
    assert!(matches!(result, Err(RuntimeError::Store(_))), "{result:?}");
    assert_eq!(
        recorder.take_actions(),
        vec![Action::SendKill { container: 0 }],
        "sent though unwritten"
    );
    for _ in 0..3 {
        clock.advance(secs(1));
        let _ = rt.handle_timeouts();
    }
    assert!(recorder.take_actions().is_empty(), "once while it lasts");

    store.down.store(false, Ordering::SeqCst);
    clock.advance(secs(5));
    rt.handle_timeouts().expect("the store answers again");
    let _ = rt
        .handle("web-0", Input::container_exited(0))
        .expect("known");
    assert!(store.stored("web-0").is_none(), "removed");
}

/// R62 when the store stops taking writes just after a stop signal went
/// out (its record is not written; the state read back still owes it):
/// the signal is not sent again, and SIGKILL comes 2 s after the one that
/// went out, at the grace's end, unwritten.
#[test]
fn r62_a_stop_signal_whose_record_was_not_written_is_not_sent_again() {
    let (store, clock, recorder, mut rt) = setup();
    rt.create("web-0", pod("u1", false)).expect("created");
    let _ = rt
        .handle("web-0", Input::Delete(DeleteOptions::with_grace(3)))
        .expect("accepted");
    let deleted = clock.now().mono;
    // The stop signal's write-ahead passes; every write after it is
    // refused, while reads still work (a full disk).
    store.then(&[None]);
    store.then(&[Some(Next::Refuse); 100]);
    let result = rt.handle("web-0", Input::AgentSync);
    assert!(matches!(result, Err(RuntimeError::Store(_))), "{result:?}");
    let stop_signals = |actions: &[Action]| {
        actions
            .iter()
            .filter(|a| matches!(a, Action::SendStopSignal { .. }))
            .count()
    };
    assert_eq!(stop_signals(&recorder.take_actions()), 1);
    // Retries read the stored state back and try again: no second signal.
    let mut kills = Vec::new();
    while clock.now().mono < deleted.saturating_add(secs(3)) {
        clock.advance(Duration::from_millis(250));
        let _ = rt.handle_timeouts();
        let actions = recorder.take_actions();
        assert_eq!(stop_signals(&actions), 0, "sent once");
        if actions.contains(&Action::SendKill { container: 0 }) {
            kills.push(clock.now().mono);
        }
    }
    assert_eq!(
        kills,
        vec![deleted.saturating_add(secs(3))],
        "SIGKILL once, when the grace is spent"
    );
}
