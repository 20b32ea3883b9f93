//! Group commit of inputs ([`Runtime::open_batch`]) on a real redb store:
//! a batch is one store batch before its actions and one after; each
//! input answers as it would alone, against the state the batch has
//! reached; a refused input writes nothing; a batch that fails, or is
//! dropped, is undone.
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

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::actuators::Recorder;
use common::pod;
use grace_core::{
    DeleteError, DeleteOptions, Input, Name, Phase, Preconditions, Record, Timestamp,
};
use grace_std::clock::ManualClock;
use grace_std::runtime::{Recovery, Runtime, RuntimeError};
use grace_std::store::{
    BatchError, ContainerStatus, Listing, RedbStore, Revision, Store, StoreError, StoredObject,
    Watch, Write,
};

/// A redb store that counts its commits (batches) and can refuse the next.
#[derive(Clone)]
struct Counting {
    inner: Arc<RedbStore>,
    commits: Arc<AtomicUsize>,
    refuse_next: Arc<AtomicBool>,
    /// The writes of each commit, by name.
    log: Arc<Mutex<Vec<Vec<String>>>>,
}

impl Counting {
    fn new(dir: &tempfile::TempDir) -> Counting {
        Counting {
            inner: Arc::new(RedbStore::open(dir.path().join("grace.redb")).expect("opens")),
            commits: Arc::default(),
            refuse_next: Arc::default(),
            log: Arc::default(),
        }
    }

    fn commits(&self) -> usize {
        self.commits.load(Ordering::SeqCst)
    }

    fn stored(&self, name: &str) -> Option<(StoredObject, Revision)> {
        self.inner.get(name).expect("readable")
    }
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
        if self.refuse_next.swap(false, Ordering::SeqCst) {
            return Err(BatchError::backend(StoreError::Unavailable(
                "refused".into(),
            )));
        }
        let names = writes.iter().map(|w| w.name().to_owned()).collect();
        let done = self.inner.batch(writes)?;
        self.commits.fetch_add(1, Ordering::SeqCst);
        self.log.lock().expect("not poisoned").push(names);
        Ok(done)
    }
    fn watch(&self, from: Revision) -> Result<Watch, StoreError> {
        self.inner.watch(from)
    }
}

type Rt = Runtime<Counting, Arc<ManualClock>, Recorder>;

const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

/// A runtime on a fresh store holding one running pod (node-a, one
/// container) per name of [`NAMES`].
fn setup(dir: &tempfile::TempDir) -> (Counting, Recorder, Rt) {
    let store = Counting::new(dir);
    for name in NAMES {
        store
            .inner
            .create(name, pod(&format!("uid-{name}"), false))
            .expect("stored");
    }
    let recorder = Recorder::default();
    let clock = Arc::new(ManualClock::at_unix_millis(1_000_000));
    let rt =
        Runtime::open(store.clone(), clock, recorder.clone(), Recovery::default()).expect("opens");
    (store, recorder, rt)
}

/// The stored object without what differs between two stores that wrote
/// the same things in different commits (the revisions).
fn stored_meta(store: &Counting, name: &str) -> Option<Record<16>> {
    store.stored(name).map(|(o, _)| {
        let mut meta = o.record;
        meta.resource_version = 0;
        meta
    })
}

#[test]
fn a_batch_of_deletes_is_one_commit_before_the_actions_and_one_after_and_answers_as_one_at_a_time()
{
    let (dir_a, dir_b) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let (batched, batched_actions, mut rt) = setup(&dir_a);
    let (alone, alone_actions, mut rt_alone) = setup(&dir_b);
    let before = batched.commits();
    let options = DeleteOptions::with_grace(30);

    let mut batch = rt.open_batch();
    let answers: Vec<_> = NAMES
        .iter()
        .map(|name| {
            let answer = batch
                .handle(name, Input::Delete(options.clone()))
                .expect("accepted")
                .delete()
                .expect("a delete's answer");
            let _ = batch.handle(name, Input::AgentSync).expect("synced");
            answer
        })
        .collect();
    assert_eq!(batch.len(), NAMES.len());
    assert_eq!(
        batched.commits(),
        before,
        "nothing is written before commit"
    );
    batch.commit().expect("committed");
    assert_eq!(batched.commits(), before + 2, "{:?}", batched.log);

    let alone_before = alone.commits();
    for (name, batched_answer) in NAMES.iter().zip(&answers) {
        let answer = rt_alone
            .handle(name, Input::Delete(options.clone()))
            .expect("accepted")
            .delete()
            .expect("a delete's answer");
        let _ = rt_alone.handle(name, Input::AgentSync).expect("synced");
        assert_eq!(&answer, batched_answer, "{name}");
    }
    assert!(alone.commits() - alone_before >= 2 * NAMES.len());
    for name in NAMES {
        assert_eq!(
            stored_meta(&batched, name),
            stored_meta(&alone, name),
            "{name}"
        );
        assert_eq!(
            rt.lifecycle(name).map(|l| l.phase()),
            Some(Phase::Terminating)
        );
    }
    let sorted = |mut v: Vec<(String, grace_core::Action)>| {
        v.sort_by(|x, y| x.0.cmp(&y.0));
        v
    };
    assert_eq!(sorted(batched_actions.take()), sorted(alone_actions.take()));
}

#[test]
fn a_refused_input_in_a_batch_writes_nothing_and_holds_back_no_other() {
    let dir = tempfile::tempdir().expect("dir");
    let (store, _, mut rt) = setup(&dir);
    let (_, b_revision) = store.stored("b").expect("stored");
    let wrong_uid = DeleteOptions::default().with_preconditions(Preconditions {
        uid: Some(Name::try_from("someone-else").expect("short")),
        resource_version: None,
    });

    store.log.lock().expect("ok").clear();
    let mut batch = rt.open_batch();
    batch
        .handle("a", Input::Delete(DeleteOptions::default()))
        .expect("a");
    let refused = batch.handle("b", Input::Delete(wrong_uid.clone()));
    assert!(
        matches!(refused, Err(RuntimeError::Delete(DeleteError::Conflict(_)))),
        "{refused:?}"
    );
    let missing = batch.handle("nobody", Input::Delete(DeleteOptions::default()));
    assert!(
        matches!(missing, Err(RuntimeError::NotFound(_))),
        "{missing:?}"
    );
    batch
        .handle("c", Input::Delete(DeleteOptions::default()))
        .expect("c");
    assert_eq!(batch.len(), 2, "only the accepted inputs are in the batch");
    batch.commit().expect("committed");

    let (b, revision) = store.stored("b").expect("b is still stored");
    assert_eq!(revision, b_revision, "b was not written");
    assert_eq!(b.record.deletion_timestamp, None);
    for name in ["a", "c"] {
        let (object, _) = store.stored(name).expect("stored");
        assert!(object.record.deletion_timestamp.is_some(), "{name}");
    }
    let written: Vec<String> = store.log.lock().expect("ok").concat();
    assert!(!written.iter().any(|n| n == "b"), "{written:?}");
}

#[test]
fn an_input_sees_the_inputs_before_it_in_its_batch() {
    let dir = tempfile::tempdir().expect("dir");
    let (store, _, mut rt) = setup(&dir);
    let before = store.commits();
    // An unscheduled object: deleted at once (R19), here in the batch that
    // creates it; the delete's uid precondition holds against the object
    // the create put in the batch.
    let object = StoredObject::unscheduled(Record::new(Name::try_from("uid-x").expect("short")));
    let uid_x = DeleteOptions::default().with_preconditions(Preconditions {
        uid: Some(Name::try_from("uid-x").expect("short")),
        resource_version: None,
    });

    let mut batch = rt.open_batch();
    let missing = batch.handle("x", Input::Delete(uid_x.clone()));
    assert!(
        matches!(missing, Err(RuntimeError::NotFound(_))),
        "{missing:?}"
    );
    batch.create("x", object).expect("created");
    assert!(batch.touches("x"));
    let again = batch.create(
        "x",
        StoredObject::unscheduled(Record::new(Name::try_from("uid-y").expect("short"))),
    );
    assert!(
        matches!(again, Err(RuntimeError::AlreadyExists(_))),
        "{again:?}"
    );
    let answer = batch
        .handle("x", Input::Delete(uid_x.clone()))
        .expect("sees the created object")
        .delete()
        .expect("a delete's answer");
    assert_eq!(answer.response.outcome, grace_core::DeleteOutcome::Deleted);
    batch.commit().expect("committed");

    assert_eq!(store.commits(), before + 2);
    assert_eq!(store.stored("x"), None, "created, then removed");
    assert!(rt.lifecycle("x").is_none());
}

#[test]
fn a_batch_whose_commit_fails_is_undone_and_can_be_done_again() {
    let dir = tempfile::tempdir().expect("dir");
    let (store, actions, mut rt) = setup(&dir);

    let mut batch = rt.open_batch();
    for name in NAMES {
        batch
            .handle(name, Input::Delete(DeleteOptions::default()))
            .expect("accepted");
    }
    batch
        .create("new", pod("uid-new", false))
        .expect("accepted");
    store.refuse_next.store(true, Ordering::SeqCst);
    let failed = batch.commit();
    assert!(matches!(failed, Err(RuntimeError::Store(_))), "{failed:?}");

    // (The objects were read back, as after any failed write, and written
    // again as read.)
    for name in NAMES {
        let (object, _) = store.stored(name).expect("stored");
        assert_eq!(object.record.deletion_timestamp, None, "{name}");
    }
    assert_eq!(store.stored("new"), None);
    assert!(actions.take().is_empty(), "nothing was carried out");
    for name in NAMES {
        assert_eq!(rt.lifecycle(name).map(|l| l.phase()), Some(Phase::Live));
    }
    assert!(rt.lifecycle("new").is_none(), "the create is undone");

    let mut batch = rt.open_batch();
    for name in NAMES {
        batch
            .handle(name, Input::Delete(DeleteOptions::default()))
            .expect("accepted");
    }
    batch.commit().expect("committed");
    for name in NAMES {
        let (object, _) = store.stored(name).expect("stored");
        assert!(object.record.deletion_timestamp.is_some(), "{name}");
    }
}

#[test]
fn a_batch_dropped_without_commit_writes_nothing_and_is_undone() {
    let dir = tempfile::tempdir().expect("dir");
    let (store, _, mut rt) = setup(&dir);
    let before = store.commits();
    {
        let mut batch = rt.open_batch();
        batch
            .handle("a", Input::Delete(DeleteOptions::default()))
            .expect("accepted");
        batch
            .create("new", pod("uid-new", false))
            .expect("accepted");
    }
    assert_eq!(store.commits(), before);
    assert_eq!(rt.lifecycle("a").map(|l| l.phase()), Some(Phase::Live));
    assert!(rt.lifecycle("new").is_none());
    assert!(
        rt.handle("a", Input::Delete(DeleteOptions::default()))
            .is_ok()
    );
}

#[test]
fn container_statuses_set_in_a_batch_are_one_commit_and_stored_as_set_alone() {
    let (dir_a, dir_b) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let (batched, _, mut rt) = setup(&dir_a);
    let (alone, _, mut rt_alone) = setup(&dir_b);
    let before = batched.commits();
    let mut batch = rt.open_batch();
    for name in NAMES {
        batch
            .set_container_status(name, 0, ContainerStatus::RUNNING)
            .expect("set");
        // Setting it again changes nothing.
        batch
            .set_container_status(name, 0, ContainerStatus::RUNNING)
            .expect("set");
    }
    assert!(
        batch
            .set_container_status("a", 1, ContainerStatus::RUNNING)
            .is_err(),
        "no container 1"
    );
    assert_eq!(batched.commits(), before, "nothing written before commit");
    batch.commit().expect("committed");
    assert_eq!(batched.commits(), before + 1, "{:?}", batched.log);
    for name in NAMES {
        rt_alone
            .set_container_status(name, 0, ContainerStatus::RUNNING)
            .expect("set");
        let status = |s: &Counting| s.stored(name).map(|(o, _)| o.status);
        // Stamped with the runtime's clock (1 000 s), set alone or batched.
        let running = ContainerStatus::Running {
            started_at: Some(Timestamp::from_unix_seconds(1_000)),
        };
        assert_eq!(status(&batched), Some(vec![running]));
        assert_eq!(status(&batched), status(&alone), "{name}");
        assert_eq!(stored_meta(&batched, name), stored_meta(&alone, name));
    }
}

#[test]
fn a_container_status_set_in_a_dropped_batch_is_undone() {
    let dir = tempfile::tempdir().expect("dir");
    let (store, _, mut rt) = setup(&dir);
    let before = store.commits();
    {
        let mut batch = rt.open_batch();
        batch
            .set_container_status("a", 0, ContainerStatus::exited(Some(0)))
            .expect("set");
    }
    assert_eq!(store.commits(), before);
    assert_eq!(rt.object("a").map(|o| o.status), Some(Vec::new()));
    assert_eq!(store.stored("a").map(|(o, _)| o.status), Some(Vec::new()));
}
