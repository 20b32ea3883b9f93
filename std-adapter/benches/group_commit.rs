//! Transitions per second on the durable store (redb, one fsync per
//! commit): one commit per write vs group commit (batches of 64 and 256
//! writes per commit), in the same run, on a temp dir.
//!
//! Each transition is one compare-and-swap update of an object carrying a
//! runtime kill state (a pod with one container, its lifecycle encoded as
//! the runtime encodes it),
//! the write the runtime makes per input.
//!
//! `cargo bench -p grace-std --bench group_commit` (`GRACE_BENCH_N` to
//! change the number of transitions per mode).
// A benchmark is not library code: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use std::time::Instant as StdInstant;

use grace_core::Input;
use grace_core::{DeleteOptions, Name, Now, Record, Strategy};
use grace_std::runtime::{KillRecord, ObjectLifecycle};
use grace_std::store::{RedbStore, Revision, Store, StoredContainer, StoredObject, Write};

/// Objects written round-robin (each transition updates one of them).
const OBJECTS: usize = 256;

fn object(i: usize) -> StoredObject {
    let uid = Name::try_from(format!("uid-{i}").as_str()).expect("short");
    let mut object = StoredObject::on_node(Record::new(uid), "node-a");
    object.containers = vec![StoredContainer::named("app")];
    let mut record = object.record.clone();
    record.scheduled = true;
    let mut lifecycle = ObjectLifecycle::new(
        Strategy::POD,
        record,
        &[grace_core::ContainerSpec::default()],
    )
    .expect("fits");
    let now = Now::from_unix_millis(1_700_000_000_000);
    let _ = lifecycle
        .handle(now, Input::Delete(DeleteOptions::with_grace(30)))
        .delete()
        .unwrap();
    let _ = lifecycle.handle(now, Input::AgentSync).handled();
    let record = KillRecord {
        epoch: "bench".into(),
        lifecycle,
    };
    object.agent = Some(record.encode().expect("encodes"));
    object
}

/// Writes `n` updates in commits of `per_commit`; transitions per second.
fn run(n: usize, per_commit: usize) -> f64 {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = RedbStore::open(dir.path().join("bench.redb")).expect("opens");
    let objects: Vec<StoredObject> = (0..OBJECTS).map(object).collect();
    let mut revisions: Vec<Revision> = Vec::with_capacity(OBJECTS);
    let creates = (0..OBJECTS)
        .map(|i| Write::Create {
            name: format!("p{i}"),
            object: objects[i].clone(),
        })
        .collect();
    revisions.extend(store.batch(creates).expect("created"));

    let start = StdInstant::now();
    let mut done = 0;
    while done < n {
        let count = per_commit.min(n - done);
        let slots: Vec<usize> = (done..done + count).map(|k| k % OBJECTS).collect();
        // One batch names each object at most once (OBJECTS >= per_commit).
        let writes = slots
            .iter()
            .map(|&i| Write::Update {
                name: format!("p{i}"),
                object: objects[i].clone(),
                expected: revisions[i],
            })
            .collect();
        let written = store.batch(writes).expect("written");
        for (&i, revision) in slots.iter().zip(written) {
            revisions[i] = revision;
        }
        done += count;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let n: usize = std::env::var("GRACE_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4096);
    println!("group_commit: {n} transitions per mode, redb with fsync per commit");
    let single = run(n, 1);
    println!("  1 write per commit:    {single:>9.0} transitions/s");
    for per_commit in [64, 256] {
        let batched = run(n, per_commit);
        println!(
            "  {per_commit:>3} writes per commit: {batched:>9.0} transitions/s ({:.1}x)",
            batched / single
        );
    }
}
