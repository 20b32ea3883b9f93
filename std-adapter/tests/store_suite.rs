//! The `Store` contract, checked against every backend: one suite of
//! generic tests instantiated for `MemoryStore`, for `RedbStore` on a
//! temporary directory and (with the `etcd` feature, ignored unless asked
//! for) for `EtcdStore` on a fresh prefix of the server named by
//! `GRACE_ETCD_ENDPOINTS`; then the tests only a durable store can pass
//! (restart, crash, lock, corruption).
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::disallowed_methods,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use grace_core::{Name, Record, Timestamp};
use grace_std::store::{
    BatchError, EventKind, FINALIZERS, KillState, Revision, Store, StoreError, StorePreconditions,
    StoredContainer, StoredObject, Write,
};

/// How long a test waits for an event that must come.
const PATIENCE: Duration = Duration::from_secs(10);

fn obj(uid: &str) -> StoredObject {
    StoredObject::unscheduled(Record::<FINALIZERS>::new(
        Name::try_from(uid).expect("short uid"),
    ))
}

/// An object with every field set, to check nothing is lost on the way.
fn full_obj(uid: &str) -> StoredObject {
    let mut o = obj(uid);
    o.record.generation = 2;
    o.record.deletion_timestamp = Some(Timestamp::from_unix_seconds(1030));
    o.record.deletion_grace_period_seconds = Some(30);
    o.record
        .finalizers
        .push(Name::try_from("example.com/backup").expect("short"))
        .expect("room");
    o.node = Some("node-a".into());
    o.containers = vec![
        StoredContainer::new("app", ["/bin/app", "--port=80"]).with_pre_stop("sleep 5"),
        StoredContainer::new("log", ["/bin/log"]).as_sidecar(),
    ];
    // Opaque to the store: any bytes are kept as written.
    o.agent = Some(KillState::from_bytes(b"\x01kill state \x00\xff"));
    o
}

fn no_pre() -> StorePreconditions {
    StorePreconditions::default()
}

/// Reads `n` events from `watch`, failing the test if they do not come.
fn take(watch: &mut grace_std::store::Watch, n: usize) -> Vec<grace_std::store::Event> {
    (0..n)
        .map(|i| {
            watch
                .next_timeout(PATIENCE)
                .expect("watch works")
                .unwrap_or_else(|| panic!("event {i} of {n} did not come"))
        })
        .collect()
}

// ---------------------------------------------------------------------
// The contract, generic over the backend.
// ---------------------------------------------------------------------

fn create_then_get_returns_the_object_at_its_revision(s: &dyn Store) {
    let written = full_obj("uid-1");
    let rev = s.create("web-0", written.clone()).unwrap();
    let (read, read_rev) = s.get("web-0").unwrap().expect("stored");
    assert_eq!(read_rev, rev);
    assert_eq!(
        read.record.resource_version,
        rev.get(),
        "store sets resourceVersion"
    );
    let mut expected = written;
    expected.record.resource_version = rev.get();
    assert_eq!(
        read, expected,
        "every field, the opaque agent state included"
    );
    assert_eq!(s.get("web-1").unwrap(), None);
}

fn create_of_a_taken_name_is_already_exists_and_writes_nothing(s: &dyn Store) {
    let rev = s.create("a", obj("uid-1")).unwrap();
    let err = s.create("a", obj("uid-2")).unwrap_err();
    assert_eq!(
        err,
        StoreError::AlreadyExists {
            name: "a".into(),
            current: rev
        }
    );
    assert_eq!(
        s.revision().unwrap(),
        rev,
        "a refused write takes no revision"
    );
    assert_eq!(s.get("a").unwrap().unwrap().0.uid(), "uid-1");
}

fn every_write_takes_the_next_revision(s: &dyn Store) {
    assert_eq!(s.revision().unwrap(), Revision::ZERO);
    let r1 = s.create("a", obj("ua")).unwrap();
    let r2 = s.create("b", obj("ub")).unwrap();
    let r3 = s.update("a", obj("ua"), r1).unwrap();
    // Refused writes in between take nothing.
    let _ = s.update("a", obj("ua"), r1).unwrap_err();
    let _ = s.delete("zzz", no_pre()).unwrap_err();
    let r4 = s.delete("b", no_pre()).unwrap();
    assert_eq!([r1, r2, r3, r4], [1, 2, 3, 4].map(Revision));
    assert_eq!(s.revision().unwrap(), r4);
    assert_eq!(
        s.get("a").unwrap().unwrap().1,
        r3,
        "the revision of its last write"
    );
}

fn update_with_a_stale_revision_is_a_conflict_naming_the_current_one(s: &dyn Store) {
    let r1 = s.create("a", obj("uid-1")).unwrap();
    let mut changed = obj("uid-1");
    changed.node = Some("node-a".into());
    let r2 = s.update("a", changed.clone(), r1).unwrap();
    let mut other = obj("uid-1");
    other.node = Some("node-b".into());
    let err = s.update("a", other, r1).unwrap_err();
    assert_eq!(
        err,
        StoreError::Conflict {
            name: "a".into(),
            current: r2
        }
    );
    let (now, rev) = s.get("a").unwrap().unwrap();
    assert_eq!(
        (now.node.as_deref(), rev),
        (Some("node-a"), r2),
        "unchanged"
    );
    // Retrying with the current revision works.
    s.update("a", obj("uid-1"), err_current(&err)).unwrap();
}

fn err_current(e: &StoreError) -> Revision {
    match e {
        StoreError::Conflict { current, .. } => *current,
        other => panic!("not a conflict: {other}"),
    }
}

fn update_of_a_missing_name_is_not_found(s: &dyn Store) {
    let err = s.update("ghost", obj("u"), Revision(1)).unwrap_err();
    assert_eq!(
        err,
        StoreError::NotFound {
            name: "ghost".into()
        }
    );
    assert_eq!(s.revision().unwrap(), Revision::ZERO);
}

fn delete_of_a_missing_name_is_not_found(s: &dyn Store) {
    let err = s.delete("ghost", no_pre()).unwrap_err();
    assert_eq!(
        err,
        StoreError::NotFound {
            name: "ghost".into()
        }
    );
    // Also after the name existed once.
    s.create("a", obj("u")).unwrap();
    s.delete("a", no_pre()).unwrap();
    let err = s.delete("a", no_pre()).unwrap_err();
    assert_eq!(err, StoreError::NotFound { name: "a".into() });
    assert_eq!(s.revision().unwrap(), Revision(2));
}

fn uid_precondition_spares_an_object_recreated_under_the_same_name(s: &dyn Store) {
    s.create("web-0", obj("uid-old")).unwrap();
    s.delete("web-0", no_pre()).unwrap();
    let new_rev = s.create("web-0", obj("uid-new")).unwrap();
    // The old object's agent, late, sends its final delete.
    let late = StorePreconditions {
        uid: Some("uid-old".into()),
        revision: None,
    };
    let err = s.delete("web-0", late).unwrap_err();
    assert_eq!(
        err,
        StoreError::UidMismatch {
            name: "web-0".into(),
            expected: "uid-old".into(),
            found: "uid-new".into()
        }
    );
    let (still, rev) = s.get("web-0").unwrap().expect("the new object stays");
    assert_eq!((still.uid(), rev), ("uid-new", new_rev));
    assert_eq!(s.revision().unwrap(), new_rev);
}

fn revision_precondition_refuses_a_changed_object(s: &dyn Store) {
    let r1 = s.create("a", obj("uid-1")).unwrap();
    let r2 = s.update("a", obj("uid-1"), r1).unwrap();
    let stale = StorePreconditions {
        uid: Some("uid-1".into()),
        revision: Some(r1),
    };
    assert_eq!(
        s.delete("a", stale).unwrap_err(),
        StoreError::Conflict {
            name: "a".into(),
            current: r2
        }
    );
    let fresh = StorePreconditions {
        uid: Some("uid-1".into()),
        revision: Some(r2),
    };
    let r3 = s.delete("a", fresh).unwrap();
    assert_eq!(r3, Revision(3));
    assert_eq!(s.get("a").unwrap(), None);
}

fn list_is_complete_and_in_name_order(s: &dyn Store) {
    let names = ["web-10", "Web-2", "db-0", "web-2", "a", "ä", "web-1"];
    let mut revs = std::collections::BTreeMap::new();
    for (i, name) in names.iter().enumerate() {
        revs.insert(
            name.to_string(),
            s.create(name, obj(&format!("u{i}"))).unwrap(),
        );
    }
    s.delete("db-0", no_pre()).unwrap();
    revs.remove("db-0");
    let last = s.update("a", obj("u4"), revs["a"]).unwrap();
    revs.insert("a".into(), last);

    let listing = s.list().unwrap();
    assert_eq!(listing.revision, last, "the snapshot's revision");
    let listed: Vec<(&str, Revision)> = listing
        .objects
        .iter()
        .map(|(n, o, r)| {
            assert_eq!(o.record.resource_version, r.get());
            (n.as_str(), *r)
        })
        .collect();
    // BTreeMap orders strings bytewise, as the contract says.
    let expected: Vec<(&str, Revision)> = revs.iter().map(|(n, r)| (n.as_str(), *r)).collect();
    assert_eq!(listed, expected);
}

fn watch_from_zero_replays_every_change_in_order(s: &dyn Store) {
    let r1 = s.create("a", full_obj("ua")).unwrap();
    let r2 = s.create("b", obj("ub")).unwrap();
    let r3 = s.update("a", obj("ua"), r1).unwrap();
    let r4 = s.delete("a", no_pre()).unwrap();
    let mut w = s.watch(Revision::ZERO).unwrap();
    let events = take(&mut w, 4);
    let seen: Vec<(EventKind, &str, Revision)> = events
        .iter()
        .map(|e| (e.kind, e.name.as_str(), e.revision))
        .collect();
    assert_eq!(
        seen,
        [
            (EventKind::Created, "a", r1),
            (EventKind::Created, "b", r2),
            (EventKind::Updated, "a", r3),
            (EventKind::Deleted, "a", r4),
        ]
    );
    assert_eq!(events[0].object.node.as_deref(), Some("node-a"));
    // A delete carries the object as it was last stored.
    assert_eq!(events[3].object.uid(), "ua");
    assert_eq!(events[3].object.record.resource_version, r3.get());
    assert_eq!(w.revision(), r4);
    assert_eq!(w.try_next().unwrap(), None, "nothing more");
}

fn watch_from_a_revision_skips_what_came_before(s: &dyn Store) {
    let r1 = s.create("a", obj("ua")).unwrap();
    let r2 = s.create("b", obj("ub")).unwrap();
    let mut w = s.watch(r1).unwrap();
    // Changes after opening are delivered too.
    let r3 = s.delete("b", no_pre()).unwrap();
    let revs: Vec<Revision> = take(&mut w, 2).iter().map(|e| e.revision).collect();
    assert_eq!(revs, [r2, r3]);
    // From the current revision: only what comes next.
    let mut w = s.watch(r3).unwrap();
    assert_eq!(w.next_timeout(Duration::from_millis(20)).unwrap(), None);
    let r4 = s.create("c", obj("uc")).unwrap();
    assert_eq!(take(&mut w, 1)[0].revision, r4);
}

fn watch_sees_concurrent_writers_in_revision_order(s: Arc<dyn Store>) {
    const WRITERS: usize = 3;
    const PER_WRITER: usize = 40;
    let start = s.create("seed", obj("u-seed")).unwrap();
    let mut w = s.watch(start).unwrap();
    let writers: Vec<_> = (0..WRITERS)
        .map(|t| {
            let s = Arc::clone(&s);
            thread::spawn(move || {
                // Each writer creates, updates and deletes its own names.
                let mut mine = Vec::new();
                for i in 0..PER_WRITER {
                    let name = format!("w{t}-{}", i / 3);
                    let rev = match i % 3 {
                        0 => s.create(&name, obj(&format!("u{t}-{i}"))).unwrap(),
                        1 => {
                            let (o, r) = s.get(&name).unwrap().unwrap();
                            s.update(&name, o, r).unwrap()
                        }
                        _ => s.delete(&name, no_pre()).unwrap(),
                    };
                    mine.push(rev);
                }
                mine
            })
        })
        .collect();
    // Read while they write.
    let events = take(&mut w, WRITERS * PER_WRITER);
    let mut written = BTreeSet::new();
    for writer in writers {
        written.extend(writer.join().expect("writer finished"));
    }
    let revs: Vec<u64> = events.iter().map(|e| e.revision.get()).collect();
    let expected: Vec<u64> =
        (start.get() + 1..=start.get() + (WRITERS * PER_WRITER) as u64).collect();
    assert_eq!(
        revs, expected,
        "every change once, in revision order, no gap"
    );
    assert_eq!(written.len(), WRITERS * PER_WRITER);
    assert!(written.iter().map(|r| r.get()).eq(expected.iter().copied()));
    // Per name, the kinds follow its writes: created, updated, deleted.
    let mut per_name: std::collections::BTreeMap<&str, Vec<EventKind>> = Default::default();
    for e in &events {
        per_name.entry(e.name.as_str()).or_default().push(e.kind);
    }
    for (name, kinds) in per_name {
        let full = [EventKind::Created, EventKind::Updated, EventKind::Deleted];
        assert_eq!(kinds, full[..kinds.len()], "{name}");
    }
    assert_eq!(w.try_next().unwrap(), None);
}

fn an_idle_watch_times_out_empty(s: &dyn Store) {
    let mut w = s.watch(Revision::ZERO).unwrap();
    let t = std::time::Instant::now();
    assert_eq!(w.next_timeout(Duration::from_millis(50)).unwrap(), None);
    assert!(t.elapsed() >= Duration::from_millis(50));
    assert_eq!(w.try_next().unwrap(), None);
}

fn a_blocked_watch_wakes_on_a_write_from_another_thread(s: Arc<dyn Store>) {
    let mut w = s.watch(Revision::ZERO).unwrap();
    let writer = {
        let s = Arc::clone(&s);
        thread::spawn(move || {
            // Not a wait for readiness: the write should come while the
            // watch is blocked (it is woken either way).
            thread::sleep(Duration::from_millis(50));
            s.create("late", obj("u")).unwrap()
        })
    };
    let t = std::time::Instant::now();
    let e = w
        .next_timeout(PATIENCE)
        .unwrap()
        .expect("woken by the write");
    assert!(t.elapsed() < PATIENCE / 2, "woken, not timed out");
    assert_eq!(e.revision, writer.join().unwrap());
    // The iterator form blocks the same way.
    s.create("later", obj("u2")).unwrap();
    let next = w.next().expect("iterator yields").unwrap();
    assert_eq!(next.name, "later");
}

fn a_batch_applies_all_in_order_with_consecutive_revisions(s: &dyn Store) {
    let r1 = s.create("keep", obj("uk")).unwrap();
    let revs = s
        .batch(vec![
            Write::Create {
                name: "x".into(),
                object: obj("ux"),
            },
            // Sees the create before it: its revision is r1 + 1.
            Write::Update {
                name: "x".into(),
                object: full_obj("ux"),
                expected: Revision(r1.get() + 1),
            },
            Write::Delete {
                name: "keep".into(),
                preconditions: StorePreconditions {
                    uid: Some("uk".into()),
                    revision: Some(r1),
                },
            },
        ])
        .unwrap();
    assert_eq!(revs, [2, 3, 4].map(Revision));
    assert_eq!(s.get("x").unwrap().unwrap().1, Revision(3));
    assert_eq!(s.get("keep").unwrap(), None);
    let kinds: Vec<EventKind> = take(&mut s.watch(r1).unwrap(), 3)
        .iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        [EventKind::Created, EventKind::Updated, EventKind::Deleted]
    );
    assert_eq!(s.batch(Vec::new()).unwrap(), Vec::<Revision>::new());
    assert_eq!(
        s.revision().unwrap(),
        Revision(4),
        "an empty batch writes nothing"
    );
}

fn a_refused_write_in_a_batch_writes_nothing(s: &dyn Store) {
    let r1 = s.create("a", obj("ua")).unwrap();
    let err = s
        .batch(vec![
            Write::Create {
                name: "b".into(),
                object: obj("ub"),
            },
            Write::Update {
                name: "a".into(),
                object: obj("ua"),
                expected: r1,
            },
            Write::Delete {
                name: "b".into(),
                preconditions: StorePreconditions {
                    uid: Some("not-ub".into()),
                    revision: None,
                },
            },
        ])
        .unwrap_err();
    assert_eq!(err.index, Some(2));
    assert!(matches!(err.error, StoreError::UidMismatch { .. }), "{err}");
    assert_eq!(s.revision().unwrap(), r1, "no revision taken");
    assert_eq!(s.get("b").unwrap(), None, "the create before it is undone");
    assert_eq!(
        s.get("a").unwrap().unwrap().1,
        r1,
        "the update before it too"
    );
    assert_eq!(s.list().unwrap().objects.len(), 1);
    let mut w = s.watch(Revision::ZERO).unwrap();
    assert_eq!(take(&mut w, 1)[0].revision, r1);
    assert_eq!(
        w.try_next().unwrap(),
        None,
        "no event from the refused batch"
    );
    // A write that conflicts with an earlier one of the same batch.
    let err: BatchError = s
        .batch(vec![
            Write::Delete {
                name: "a".into(),
                preconditions: no_pre(),
            },
            Write::Update {
                name: "a".into(),
                object: obj("ua"),
                expected: r1,
            },
        ])
        .unwrap_err();
    assert_eq!(err.index, Some(1));
    assert_eq!(err.error, StoreError::NotFound { name: "a".into() });
    assert!(s.get("a").unwrap().is_some());
}

/// `batch_ref` applies lent writes as `batch` applies its own: the same
/// revisions, the objects stored with them, and nothing written when one
/// write is refused; the writes stay the caller's, as they were.
fn batch_ref_applies_the_writes_it_is_lent(s: &dyn Store) {
    let writes = [
        Write::Create {
            name: "a".into(),
            object: obj("ua"),
        },
        Write::Create {
            name: "b".into(),
            object: obj("ub"),
        },
    ];
    let kept = writes.clone();
    assert_eq!(s.batch_ref(&writes).unwrap(), [1, 2].map(Revision));
    assert_eq!(writes, kept, "the caller's writes are left as they were");
    let (stored, revision) = s.get("b").unwrap().unwrap();
    assert_eq!(revision, Revision(2));
    assert_eq!(stored.uid(), "ub");
    assert_eq!(stored.record.resource_version, 2);
    let err = s.batch_ref(&writes[..1]).unwrap_err();
    assert_eq!(err.index, Some(0));
    assert!(matches!(err.error, StoreError::AlreadyExists { .. }));
    assert_eq!(s.revision().unwrap(), Revision(2), "nothing written");
    assert_eq!(
        s.batch_ref(&[]).unwrap(),
        [],
        "an empty batch writes nothing"
    );
}

/// `open(retention)` gives a store that keeps the last `retention` changes.
fn old_revisions_are_compacted(open: &dyn Fn(u64) -> Box<dyn Store>) {
    let s = open(3);
    for i in 0..5 {
        s.create(&format!("o{i}"), obj(&format!("u{i}"))).unwrap();
    }
    // Revisions 1 and 2 have left the log.
    match s.watch(Revision(1)) {
        Err(StoreError::Compacted {
            requested,
            compacted,
        }) => assert_eq!((requested, compacted), (Revision(1), Revision(2))),
        other => panic!("expected Compacted, got {other:?}"),
    }
    let mut w = s.watch(Revision(2)).unwrap();
    let revs: Vec<u64> = take(&mut w, 3).iter().map(|e| e.revision.get()).collect();
    assert_eq!(revs, [3, 4, 5]);
    // A watcher that falls behind by more than the log is told so.
    let mut lagging = s.watch(Revision(5)).unwrap();
    for i in 5..10 {
        s.create(&format!("o{i}"), obj(&format!("u{i}"))).unwrap();
    }
    assert!(matches!(
        lagging.next_timeout(PATIENCE),
        Err(StoreError::Compacted { .. })
    ));
    // The objects themselves are all there.
    assert_eq!(s.list().unwrap().objects.len(), 10);
}

/// `open(retention)` as above: an object whose last write has left the
/// change log is read, listed, updated and deleted whole, and a batch longer
/// than the log keeps every object it wrote.
fn objects_outlive_the_log_entries_of_their_writes(open: &dyn Fn(u64) -> Box<dyn Store>) {
    let s = open(3);
    let written = full_obj("ua");
    let ra = s.create("a", written.clone()).unwrap();
    let mut rb = s.create("b", obj("ub")).unwrap();
    for _ in 0..4 {
        rb = s.update("b", obj("ub"), rb).unwrap();
    }
    // a's create has left the log.
    assert!(matches!(s.watch(ra), Err(StoreError::Compacted { .. })));
    let mut expected = written.clone();
    expected.record.resource_version = ra.get();
    assert_eq!(s.get("a").unwrap(), Some((expected.clone(), ra)));
    let listing = s.list().unwrap();
    assert_eq!(listing.objects[0], ("a".to_owned(), expected.clone(), ra));
    // Deleted whole: its event carries the object as last stored.
    let mut w = s.watch(rb).unwrap();
    let pre = StorePreconditions {
        uid: Some("ua".into()),
        revision: Some(ra),
    };
    let gone = s.delete("a", pre).unwrap();
    let event = take(&mut w, 1).remove(0);
    assert_eq!(
        (
            event.kind,
            event.name.as_str(),
            event.revision,
            &event.object
        ),
        (EventKind::Deleted, "a", gone, &expected)
    );

    // A batch of five writes (two of one object) with a log of three.
    let writes = vec![
        Write::Create {
            name: "c".into(),
            object: obj("uc"),
        },
        Write::Create {
            name: "d".into(),
            object: obj("ud"),
        },
        Write::Update {
            name: "b".into(),
            object: full_obj("ub"),
            expected: rb,
        },
        Write::Create {
            name: "e".into(),
            object: obj("ue"),
        },
        Write::Create {
            name: "f".into(),
            object: obj("uf"),
        },
    ];
    let revs = s.batch(writes).unwrap();
    let uids: Vec<(String, String, Revision)> = s
        .list()
        .unwrap()
        .objects
        .into_iter()
        .map(|(n, o, r)| (n, o.uid().to_owned(), r))
        .collect();
    let expected: Vec<(String, String, Revision)> = ["b", "c", "d", "e", "f"]
        .iter()
        .zip([revs[2], revs[0], revs[1], revs[3], revs[4]])
        .map(|(n, r)| (n.to_string(), format!("u{n}"), r))
        .collect();
    assert_eq!(uids, expected);
    let (b, _) = s.get("b").unwrap().expect("stored");
    assert_eq!(b.containers, full_obj("ub").containers);
    s.update("c", obj("uc"), revs[0]).unwrap();
}

fn a_store_is_send_sync_and_object_safe<S: Store + 'static>(s: S) {
    fn send_sync<T: Send + Sync>(_: &T) {}
    send_sync(&s);
    let shared: Arc<dyn Store> = Arc::new(s);
    let w = shared.watch(Revision::ZERO).unwrap();
    thread::spawn(move || drop(w)).join().unwrap();
}

/// Instantiates the suite for one backend: `$open` is an expression of
/// type `fn(u64) -> (Guard, Store)` that opens an empty store keeping
/// `retention` changes; the guard lives as long as the store is used.
/// Attributes before the module name go on every test.
macro_rules! store_suite {
    ($(#[$attr:meta])* $module:ident, $open:expr) => {
        mod $module {
            use super::*;

            fn store() -> (impl Sized, impl Store + 'static) {
                ($open)(grace_std::store::DEFAULT_LOG_RETENTION)
            }

            macro_rules! case {
                ($name:ident) => {
                    #[test]
$(#[$attr])*
                    fn $name() {
                        let (_guard, s) = store();
                        super::$name(&s);
                    }
                };
            }
            macro_rules! shared_case {
                ($name:ident) => {
                    #[test]
$(#[$attr])*
                    fn $name() {
                        let (_guard, s) = store();
                        super::$name(Arc::new(s));
                    }
                };
            }

            case!(create_then_get_returns_the_object_at_its_revision);
            case!(create_of_a_taken_name_is_already_exists_and_writes_nothing);
            case!(every_write_takes_the_next_revision);
            case!(update_with_a_stale_revision_is_a_conflict_naming_the_current_one);
            case!(update_of_a_missing_name_is_not_found);
            case!(delete_of_a_missing_name_is_not_found);
            case!(uid_precondition_spares_an_object_recreated_under_the_same_name);
            case!(revision_precondition_refuses_a_changed_object);
            case!(list_is_complete_and_in_name_order);
            case!(watch_from_zero_replays_every_change_in_order);
            case!(watch_from_a_revision_skips_what_came_before);
            case!(an_idle_watch_times_out_empty);
            case!(a_batch_applies_all_in_order_with_consecutive_revisions);
            case!(a_refused_write_in_a_batch_writes_nothing);
            case!(batch_ref_applies_the_writes_it_is_lent);
            shared_case!(watch_sees_concurrent_writers_in_revision_order);
            shared_case!(a_blocked_watch_wakes_on_a_write_from_another_thread);

            #[test]
$(#[$attr])*
            fn old_revisions_are_compacted() {
                let guards = std::cell::RefCell::new(Vec::new());
                super::old_revisions_are_compacted(&|retention| {
                    let (guard, s) = ($open)(retention);
                    guards
                        .borrow_mut()
                        .push(Box::new(guard) as Box<dyn std::any::Any>);
                    Box::new(s) as Box<dyn Store>
                });
            }

            #[test]
$(#[$attr])*
            fn objects_outlive_the_log_entries_of_their_writes() {
                let guards = std::cell::RefCell::new(Vec::new());
                super::objects_outlive_the_log_entries_of_their_writes(&|retention| {
                    let (guard, s) = ($open)(retention);
                    guards
                        .borrow_mut()
                        .push(Box::new(guard) as Box<dyn std::any::Any>);
                    Box::new(s) as Box<dyn Store>
                });
            }

            #[test]
$(#[$attr])*
            fn a_store_is_send_sync_and_object_safe() {
                let (_guard, s) = store();
                super::a_store_is_send_sync_and_object_safe(s);
            }
        }
    };
}

store_suite!(memory, |retention| (
    (),
    grace_std::store::MemoryStore::with_log_retention(retention)
));

store_suite!(redb, |retention| {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut options = grace_std::store::RedbOptions::default();
    options.log_retention = retention;
    let s = grace_std::store::RedbStore::open_with(dir.path().join("grace.redb"), options)
        .expect("opens");
    (dir, s)
});

/// The etcd server the etcd tests use: `GRACE_ETCD_ENDPOINTS`, comma
/// separated.
#[cfg(feature = "etcd")]
fn etcd_endpoints() -> Vec<String> {
    let endpoints = std::env::var("GRACE_ETCD_ENDPOINTS").expect(
        "the etcd tests need an etcd server: set GRACE_ETCD_ENDPOINTS, e.g. http://127.0.0.1:23790",
    );
    endpoints.split(',').map(|e| e.trim().to_owned()).collect()
}

/// A prefix no other test (of this run or an earlier one) uses: each test
/// gets an empty store of its own on the shared server.
#[cfg(feature = "etcd")]
fn fresh_prefix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "/grace-test/suite-{}-{nanos}-{}/",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(feature = "etcd")]
store_suite!(
    #[ignore = "needs an etcd server: set GRACE_ETCD_ENDPOINTS, e.g. http://127.0.0.1:23790"]
    etcd,
    |retention| {
        let options = grace_std::store::EtcdOptions {
            prefix: fresh_prefix(),
            log_retention: retention,
            ..grace_std::store::EtcdOptions::new(etcd_endpoints())
        };
        let s = grace_std::store::EtcdStore::connect_with(options).expect("etcd is reachable");
        ((), s)
    }
);

#[cfg(feature = "etcd")]
#[path = "common/secure_etcd.rs"]
mod secure_etcd;

// The whole suite again on an etcd as deployed: TLS with client
// certificates and authentication on, the client a user whose role may
// use the test prefixes only. Each test starts a server of its own.
#[cfg(feature = "etcd")]
store_suite!(
    #[ignore = "starts its own etcd with TLS and auth (GRACE_ETCD_BIN or etcd on PATH); .ci/etcd runs it"]
    etcd_tls_auth,
    |retention| {
        let server = secure_etcd::SecureEtcd::start();
        let options = grace_std::store::EtcdOptions {
            log_retention: retention,
            ..server.store_options(&fresh_prefix())
        };
        let s = grace_std::store::EtcdStore::connect_with(options)
            .expect("with TLS, its certificate and the password, the client is served");
        (server, s)
    }
);

// ---------------------------------------------------------------------
// What only the durable store promises.
// ---------------------------------------------------------------------

mod durable {
    use super::*;
    use grace_std::store::{RedbOptions, RedbStore};
    use std::io::{BufRead, BufReader, Write as _};
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};

    fn temp() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("grace.redb");
        (dir, path)
    }

    #[test]
    fn data_and_revisions_survive_close_and_reopen() {
        let (_dir, path) = temp();
        let (r1, r2, r3);
        {
            let s = RedbStore::open(&path).unwrap();
            r1 = s.create("a", full_obj("ua")).unwrap();
            r2 = s.create("b", obj("ub")).unwrap();
            r3 = s.update("a", obj("ua"), r1).unwrap();
            s.delete("b", no_pre()).unwrap();
        }
        let s = RedbStore::open(&path).unwrap();
        assert_eq!(s.revision().unwrap(), Revision(4));
        let listing = s.list().unwrap();
        assert_eq!(listing.revision, Revision(4));
        assert_eq!(listing.objects.len(), 1);
        assert_eq!(s.get("a").unwrap().unwrap().1, r3);
        assert!(r2 < r3);
        // The counter goes on from where it was: no revision is reused.
        assert_eq!(s.create("b", obj("ub2")).unwrap(), Revision(5));
    }

    #[test]
    fn a_watch_from_before_a_restart_replays_the_log() {
        let (_dir, path) = temp();
        let seen;
        {
            let s = RedbStore::open(&path).unwrap();
            let r1 = s.create("a", obj("ua")).unwrap();
            let mut w = s.watch(Revision::ZERO).unwrap();
            seen = take(&mut w, 1)[0].revision;
            assert_eq!(seen, r1);
            s.update("a", full_obj("ua"), r1).unwrap();
            s.delete("a", no_pre()).unwrap();
            // The watch holds the database open; a restart drops it.
        }
        let s = RedbStore::open(&path).unwrap();
        let mut w = s.watch(seen).unwrap();
        let after_restart = s.create("a", obj("ua2")).unwrap();
        let events = take(&mut w, 3);
        let got: Vec<(EventKind, u64)> =
            events.iter().map(|e| (e.kind, e.revision.get())).collect();
        assert_eq!(
            got,
            [
                (EventKind::Updated, 2),
                (EventKind::Deleted, 3),
                (EventKind::Created, after_restart.get())
            ]
        );
        assert_eq!(events[0].object.node.as_deref(), Some("node-a"));
    }

    #[test]
    fn compaction_is_kept_across_restarts() {
        let (_dir, path) = temp();
        let mut small = RedbOptions::default();
        small.log_retention = 2;
        {
            let s = RedbStore::open_with(&path, small.clone()).unwrap();
            for i in 0..4 {
                s.create(&format!("o{i}"), obj("u")).unwrap();
            }
        }
        let s = RedbStore::open_with(&path, small).unwrap();
        assert!(matches!(
            s.watch(Revision(1)),
            Err(StoreError::Compacted {
                compacted: Revision(2),
                ..
            })
        ));
        assert_eq!(
            take(&mut s.watch(Revision(2)).unwrap(), 2)[1].revision,
            Revision(4)
        );
    }

    #[test]
    fn a_refused_batch_leaves_nothing_on_disk() {
        let (_dir, path) = temp();
        {
            let s = RedbStore::open(&path).unwrap();
            s.create("a", obj("ua")).unwrap();
            let err = s
                .batch(vec![
                    Write::Create {
                        name: "b".into(),
                        object: obj("ub"),
                    },
                    Write::Create {
                        name: "a".into(),
                        object: obj("ua"),
                    },
                ])
                .unwrap_err();
            assert_eq!(err.index, Some(1));
        }
        let s = RedbStore::open(&path).unwrap();
        assert_eq!(s.revision().unwrap(), Revision(1));
        assert_eq!(s.get("b").unwrap(), None);
        assert_eq!(take(&mut s.watch(Revision::ZERO).unwrap(), 1)[0].name, "a");
        assert_eq!(s.watch(Revision(1)).unwrap().try_next().unwrap(), None);
    }

    #[test]
    fn a_batch_commits_once_for_all_its_writes() {
        let (_dir, path) = temp();
        {
            let s = RedbStore::open(&path).unwrap();
            let writes = (0..500)
                .map(|i| Write::Create {
                    name: format!("o{i:03}"),
                    object: obj(&format!("u{i}")),
                })
                .collect();
            let revs = s.batch(writes).unwrap();
            assert_eq!(revs.len(), 500);
            assert_eq!(revs.last(), Some(&Revision(500)));
        }
        let s = RedbStore::open(&path).unwrap();
        let listing = s.list().unwrap();
        assert_eq!(listing.objects.len(), 500);
        assert_eq!(listing.objects[0].0, "o000");
        assert_eq!(listing.objects[499].2, Revision(500));
    }

    #[test]
    fn opening_an_open_database_in_this_process_is_already_open() {
        let (_dir, path) = temp();
        let _first = RedbStore::open(&path).unwrap();
        let err = RedbStore::open(&path).unwrap_err();
        assert_eq!(err, StoreError::AlreadyOpen { path: path.clone() });
        assert!(err.to_string().contains("already open"), "{err}");
    }

    /// Runs one of the `child_*` tests below in a new process of this
    /// test binary, with `path` in its environment.
    fn child(test: &str, path: &Path) -> Child {
        Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                test,
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("child starts")
    }

    const CHILD_ENV: &str = "GRACE_STORE_SUITE_CHILD_DB";

    /// What follows `prefix` on each line the child prints that has it.
    fn lines_with<'a>(
        out: &'a mut BufReader<std::process::ChildStdout>,
        prefix: &'a str,
    ) -> impl Iterator<Item = String> + 'a {
        std::iter::from_fn(move || {
            let mut line = String::new();
            loop {
                line.clear();
                if out.read_line(&mut line).ok()? == 0 {
                    return None;
                }
                // libtest prints its "test NAME ... " header on the same
                // line as the child's first output.
                let line = line.trim_end();
                if let Some(at) = line.find(prefix) {
                    return Some(line[at + prefix.len()..].to_owned());
                }
            }
        })
    }

    #[test]
    fn opening_a_database_another_process_holds_is_already_open() {
        let (_dir, path) = temp();
        RedbStore::open(&path)
            .unwrap()
            .create("a", obj("ua"))
            .unwrap();
        let mut holder = child("durable::child_holds_the_database", &path);
        let mut out = BufReader::new(holder.stdout.take().unwrap());
        assert_eq!(lines_with(&mut out, "holding").next().as_deref(), Some(""));

        let err = RedbStore::open(&path).unwrap_err();
        assert_eq!(err, StoreError::AlreadyOpen { path: path.clone() });

        // Once the holder is gone, the database opens again, intact.
        drop(holder.stdin.take());
        holder.wait().unwrap();
        let s = RedbStore::open(&path).unwrap();
        assert_eq!(s.get("a").unwrap().unwrap().0.uid(), "ua");
    }

    #[test]
    #[ignore = "run by opening_a_database_another_process_holds_is_already_open"]
    fn child_holds_the_database() {
        let Some(path) = std::env::var_os(CHILD_ENV) else {
            return;
        };
        let _s = RedbStore::open(path).unwrap();
        println!("holding");
        std::io::stdout().flush().unwrap();
        // Until the parent closes stdin.
        let _ = std::io::stdin().read_line(&mut String::new());
    }

    #[test]
    fn a_killed_writer_loses_no_acknowledged_write() {
        let (_dir, path) = temp();
        let mut writer = child("durable::child_writes_until_killed", &path);
        let mut out = BufReader::new(writer.stdout.take().unwrap());
        let acked: Vec<u64> = lines_with(&mut out, "acked ")
            .take(60)
            .map(|r| r.parse().unwrap())
            .collect();
        assert_eq!(acked.len(), 60, "the writer acknowledged 60 writes");
        writer.kill().unwrap(); // SIGKILL, mid-stream
        writer.wait().unwrap();

        let s = RedbStore::open(&path).expect("reopens after the crash");
        let revision = s.revision().unwrap().get();
        let last = *acked.last().unwrap();
        assert!(
            revision >= last,
            "revision {revision} < acknowledged {last}"
        );
        let listing = s.list().unwrap();
        assert_eq!(
            listing.objects.len() as u64,
            revision,
            "one object per write"
        );
        for rev in acked {
            let (o, r) = s
                .get(&format!("o{rev:06}"))
                .unwrap()
                .expect("acknowledged write kept");
            assert_eq!((o.record.resource_version, r), (rev, Revision(rev)));
        }
        // The log holds every change too.
        let n = revision as usize;
        assert_eq!(take(&mut s.watch(Revision::ZERO).unwrap(), n).len(), n);
    }

    #[test]
    #[ignore = "run by a_killed_writer_loses_no_acknowledged_write"]
    fn child_writes_until_killed() {
        let Some(path) = std::env::var_os(CHILD_ENV) else {
            return;
        };
        let s = RedbStore::open(path).unwrap();
        let mut out = std::io::stdout();
        for i in 1..=100_000u64 {
            let rev = s.create(&format!("o{i:06}"), obj("u")).unwrap();
            assert_eq!(rev, Revision(i));
            // Acknowledged only once `create` has returned.
            writeln!(out, "acked {i}").unwrap();
            out.flush().unwrap();
        }
    }

    #[test]
    fn an_undecodable_object_is_corrupt_not_a_panic_and_an_update_repairs_it() {
        use ::redb::{Database, TableDefinition};
        let (_dir, path) = temp();
        RedbStore::open(&path)
            .unwrap()
            .create("a", obj("ua"))
            .unwrap();
        {
            let db = Database::create(&path).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let objects: TableDefinition<&str, (u64, &[u8])> = TableDefinition::new("objects");
                let mut t = txn.open_table(objects).unwrap();
                t.insert("bad", (9u64, b"{not json".as_slice())).unwrap();
            }
            txn.commit().unwrap();
        }
        let s = RedbStore::open(&path).unwrap();
        assert!(matches!(s.get("bad"), Err(StoreError::Corrupt(_))));
        assert!(matches!(s.list(), Err(StoreError::Corrupt(_))));
        assert!(s.get("a").unwrap().is_some(), "the rest still reads");
        // An update with the right revision repairs it.
        let rev = s.update("bad", obj("ub"), Revision(9)).unwrap();
        assert_eq!(s.get("bad").unwrap().unwrap().1, rev);
        assert_eq!(s.list().unwrap().objects.len(), 2);
    }

    #[test]
    fn a_file_that_is_not_a_database_is_reported() {
        let (_dir, path) = temp();
        std::fs::write(&path, vec![0x5a; 8192]).unwrap();
        let err = RedbStore::open(&path).unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Corrupt(_) | StoreError::Io(_) | StoreError::Unavailable(_)
            ),
            "{err:?}"
        );
    }

    /// A full disk fails a write with an I/O error and writes nothing;
    /// once there is room again the same store takes writes (redb refuses
    /// every transaction after a failed write until the file is opened
    /// again, which the store does by itself). Needs root (a small tmpfs).
    #[test]
    fn a_write_on_a_full_disk_fails_and_the_store_works_again_once_there_is_room() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: mounting a small disk needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            eprintln!("skipped: tmpfs cannot be mounted here");
            return;
        }
        struct Unmount<'a>(&'a Path);
        impl Drop for Unmount<'_> {
            fn drop(&mut self) {
                let _ = Command::new("umount").arg(self.0).status();
            }
        }
        let _unmount = Unmount(dir.path());
        let s = RedbStore::open(dir.path().join("grace.redb")).unwrap();
        s.create("kept", full_obj("uk")).unwrap();
        let fill = dir.path().join("fill");
        let _ = std::fs::write(&fill, vec![0u8; 8 << 20]);

        // Big enough that it cannot fit in pages the file already has.
        let mut big = full_obj("ub");
        big.labels.insert("big".into(), "x".repeat(1 << 20));
        let mut failed = 0;
        for i in 0..8 {
            match s.create(&format!("big-{i}"), big.clone()) {
                Err(StoreError::Io(_)) => failed += 1,
                Err(e) => panic!("a full disk is an I/O error: {e:?}"),
                Ok(_) => {}
            }
        }
        assert!(failed > 0, "the disk filled up");
        assert!(
            matches!(s.create("after", obj("ua")), Err(StoreError::Io(_))),
            "still full: still an I/O error, not a wedged store"
        );

        std::fs::remove_file(&fill).unwrap();
        let rev = s
            .create("after", obj("ua"))
            .expect("room again: the store works");
        assert_eq!(s.get("after").unwrap().map(|(_, r)| r), Some(rev));
        assert_eq!(
            s.get("kept").unwrap().unwrap().0,
            full_obj("uk"),
            "nothing lost"
        );
    }
}
