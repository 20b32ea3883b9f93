//! `RedbStore::snapshot`: a reader that never gets in a writer's way — it
//! takes no lock, writes nothing, refuses writes, reads a file left by a
//! crash, and reads whole commits while a writer commits.
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

mod common;

use common::pod;
use grace_std::store::{RedbStore, Store, StoreError};

#[test]
fn a_snapshot_reads_a_store_another_handle_holds_and_never_writes_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("grace.redb");
    let holder = RedbStore::open(&path).expect("open");
    let _ = holder.create("web", pod("u1", false)).expect("created");
    let before = std::fs::read(&path).expect("read");

    let snapshot = RedbStore::snapshot(&path).expect("no lock needed");
    let (object, _) = snapshot.get("web").expect("read").expect("there");
    assert_eq!(object.uid(), "u1");
    assert_eq!(
        snapshot.revision().expect("revision"),
        holder.revision().expect("revision")
    );
    let refused = snapshot.create("other", pod("u2", false));
    assert!(
        matches!(refused, Err(StoreError::Unavailable(_))),
        "{refused:?}"
    );
    drop(snapshot);
    assert_eq!(
        std::fs::read(&path).expect("read"),
        before,
        "file unchanged"
    );
    // The holder goes on writing as before.
    let _ = holder.create("other", pod("u3", false)).expect("created");
}

#[test]
fn a_snapshot_of_a_file_left_by_a_crash_is_repaired_in_memory_only() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("grace.redb");
    {
        let store = RedbStore::open(&path).expect("open");
        let _ = store.create("web", pod("u1", false)).expect("created");
        // A crash: the database is never closed cleanly.
        std::mem::forget(store);
    }
    let before = std::fs::read(&path).expect("read");
    let snapshot = RedbStore::snapshot(&path).expect("repaired in memory");
    assert!(snapshot.get("web").expect("read").is_some());
    assert_eq!(
        std::fs::read(&path).expect("read"),
        before,
        "file unchanged"
    );
}

#[test]
fn a_snapshot_taken_while_a_writer_commits_shows_whole_commits() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("grace.redb");
    let writer = RedbStore::open(&path).expect("open");
    let _ = writer.create("web", pod("u1", false)).expect("created");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writing = {
        let stop = stop.clone();
        let writer = writer.clone();
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let _ = writer
                    .create(&format!("o-{n}"), pod("u", false))
                    .expect("written");
            }
            n
        })
    };
    let mut last = 0;
    for _ in 0..30 {
        let snapshot = RedbStore::snapshot(&path).expect("a whole commit");
        let listing = snapshot.list().expect("listed");
        // Every object created up to the snapshot's revision is in it.
        assert_eq!(
            u64::try_from(listing.objects.len()).expect("fits"),
            listing.revision.get(),
            "one object per commit"
        );
        assert!(listing.revision.get() >= last, "never goes back");
        last = listing.revision.get();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = writing.join().expect("writer");
    assert!(written > 0);
}

#[test]
fn a_snapshot_of_something_else_is_an_error_and_of_nothing_an_io_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let junk = dir.path().join("junk");
    std::fs::write(&junk, vec![0x5a; 8192]).expect("written");
    assert!(RedbStore::snapshot(&junk).is_err());
    assert_eq!(std::fs::read(&junk).expect("read"), vec![0x5a; 8192]);
    let missing = RedbStore::snapshot(dir.path().join("missing"));
    assert!(matches!(missing, Err(StoreError::Io(_))), "{missing:?}");
    assert!(!dir.path().join("missing").exists());
}
