//! An object's labels and creation time: kept by the runtime with the
//! object's spec, changed with `Runtime::update_labels` (Kubernetes lets
//! labels change at any time, deleting or not), and kept by every later
//! write and across a restart.
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

use std::collections::BTreeMap;
use std::sync::Arc;

use common::actuators::Recorder;
use common::pod;
use grace_core::{DeleteOptions, Input, Timestamp};
use grace_std::clock::ManualClock;
use grace_std::runtime::{Recovery, Runtime, RuntimeError};
use grace_std::store::{RedbStore, Store};

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn labels_change_at_any_time_and_survive_later_writes_and_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("grace.redb");
    let clock = Arc::new(ManualClock::at_unix_millis(1_000_000));
    let mut object = pod("u-1", false);
    object.labels = labels(&[("app", "web")]);
    object.created = Some(Timestamp::from_unix_seconds(1_000));
    {
        let store = RedbStore::open(&path).expect("store");
        let mut rt = Runtime::open(
            store,
            clock.clone(),
            Recorder::default(),
            Recovery::default(),
        )
        .expect("opens");
        rt.create("web", object).expect("created");
        let before = rt.store().revision().expect("revision");
        // Unchanged labels write nothing.
        rt.update_labels("web", labels(&[("app", "web")]))
            .expect("no change");
        assert_eq!(rt.store().revision().expect("revision"), before);
        rt.update_labels("web", labels(&[("app", "web"), ("tier", "front")]))
            .expect("updated");
        // A delete writes the record: the labels stay, and may still change.
        let _ = rt
            .handle("web", Input::Delete(DeleteOptions::default()))
            .expect("graceful");
        rt.update_labels("web", labels(&[("app", "web"), ("tier", "back")]))
            .expect("updated while deleting");
        let (stored, _) = rt.store().get("web").expect("read").expect("there");
        assert_eq!(stored.labels, labels(&[("app", "web"), ("tier", "back")]));
        assert!(stored.record.deletion_timestamp.is_some());
        assert!(matches!(
            rt.update_labels("nope", BTreeMap::new()),
            Err(RuntimeError::NotFound(_))
        ));
    }
    let store = RedbStore::open(&path).expect("store");
    let rt =
        Runtime::open(store, clock, Recorder::default(), Recovery::default()).expect("reopens");
    let object = rt.object("web").expect("tracked");
    assert_eq!(object.labels, labels(&[("app", "web"), ("tier", "back")]));
    assert_eq!(object.created, Some(Timestamp::from_unix_seconds(1_000)));
}
