//! The store writes of graceful deletions, on the embedded durable store
//! (`RedbStore`) and on etcd (`EtcdStore`), in one run: transitions per
//! second and the latency of each commit, every write committed alone and
//! in groups (group commit: one `Store::batch` per group).
//!
//! One object's deletion is the seven writes the runtime makes for it:
//! create; four updates with the persisted lifecycle (delete accepted,
//! endpoints removed, SIGTERM owed, SIGTERM sent); the update once its
//! container exited; the final delete with its uid precondition. The
//! objects, their kill states and every write are built beforehand, so only
//! the store is timed. A transition is one write.
//!
//! Groups are as large as the runtime's group commit makes them on each
//! store: `runtime::ROUND` (1024) objects, or fewer if one batch of the
//! store holds fewer (`Store::max_batch`: 62 writes on etcd with its
//! default `--max-txn-ops`). One client, one batch at a time, as the
//! runtime writes. For comparison, redb also runs with etcd's group size.
//!
//! ```sh
//! cargo bench -p grace-std --bench store                  # redb only
//! GRACE_ETCD_ENDPOINTS=http://127.0.0.1:23790 \
//!     cargo bench -p grace-std --features etcd --bench store
//! ```
//!
//! `GRACE_BENCH_OBJECTS` (2048) objects are deleted in groups,
//! `GRACE_BENCH_SINGLE` (256) with each write alone; `GRACE_BENCH_BATCH`
//! caps the group size. Without the `etcd` feature or without
//! `GRACE_ETCD_ENDPOINTS`, etcd is skipped with a message.
// A benchmark is not library code: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use std::time::{Duration, Instant};

use grace_core::Input;
use grace_core::{ContainerSpec, DeleteOptions, Name, Now, Record, Strategy};
use grace_std::runtime::{KillRecord, ObjectLifecycle, ROUND};
use grace_std::store::{
    RedbStore, Revision, Store, StorePreconditions, StoredContainer, StoredObject, Write,
};

/// The writes of one object's deletion, in order.
const WRITES_PER_OBJECT: usize = 7;

/// The sizes of a run.
#[derive(Clone, Copy)]
struct Sizes {
    /// Objects deleted in groups.
    grouped: usize,
    /// Objects deleted with each write alone.
    single: usize,
    /// The most objects per group, whatever the store takes.
    cap: usize,
}

fn main() {
    let sizes = Sizes {
        grouped: env_number("GRACE_BENCH_OBJECTS", 2048),
        single: env_number("GRACE_BENCH_SINGLE", 256),
        cap: env_number("GRACE_BENCH_BATCH", usize::MAX).max(1),
    };
    println!(
        "{} graceful deletions ({} store writes) in groups, {} ({} writes) with each write alone",
        sizes.grouped,
        sizes.grouped * WRITES_PER_OBJECT,
        sizes.single,
        sizes.single * WRITES_PER_OBJECT,
    );
    encoding_cost();
    println!();
    println!(
        "| store | commits | transitions/s | time per transition | commit latency p50 | p99 |"
    );
    println!("|---|---|---|---|---|---|");

    let dir = tempfile::tempdir().expect("temp dir");
    let redb = RedbStore::open(dir.path().join("bench.redb")).expect("redb opens");
    let redb_rates = run_both("redb", &redb, sizes);

    let etcd_rates = etcd(sizes);
    if let Some(etcd) = &etcd_rates {
        // redb with etcd's group size, for comparison.
        let same = run_grouped("redb", &redb, sizes.grouped, etcd.group, "same");
        println!();
        println!(
            "redb ÷ etcd, transitions per second: {:.1}× each write alone, {:.1}× with group \
             commit (groups of {} and {}); {:.1}× with groups of {} on both",
            redb_rates.alone / etcd.alone,
            redb_rates.grouped / etcd.grouped,
            redb_rates.group,
            etcd.group,
            same / etcd.grouped,
            etcd.group,
        );
    }
}

/// One store's rates, in transitions per second.
struct Rates {
    alone: f64,
    grouped: f64,
    /// The group size used.
    group: usize,
}

#[cfg(feature = "etcd")]
fn etcd(sizes: Sizes) -> Option<Rates> {
    use grace_std::store::{EtcdOptions, EtcdStore};
    let Ok(endpoints) = std::env::var("GRACE_ETCD_ENDPOINTS") else {
        println!();
        println!("etcd skipped: set GRACE_ETCD_ENDPOINTS (e.g. http://127.0.0.1:23790)");
        return None;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let options = EtcdOptions {
        prefix: format!("/grace-bench/{}-{nanos}/", std::process::id()),
        ..EtcdOptions::new(endpoints.split(',').map(str::trim))
    };
    match EtcdStore::connect_with(options) {
        Ok(store) => Some(run_both("etcd", &store, sizes)),
        Err(e) => {
            println!();
            println!("etcd skipped: {e}");
            None
        }
    }
}

#[cfg(not(feature = "etcd"))]
fn etcd(_sizes: Sizes) -> Option<Rates> {
    println!();
    println!("etcd skipped: build with `--features etcd` and set GRACE_ETCD_ENDPOINTS");
    None
}

/// Runs the workload with single commits and with group commits of the
/// runtime's size for this store (after a short warm-up).
fn run_both(label: &str, store: &dyn Store, sizes: Sizes) -> Rates {
    let group = ROUND.min(store.max_batch()).min(sizes.cap).max(1);
    let warm_up: Vec<Deletion> = (0..group.min(64)).map(|i| deletion("warm", i)).collect();
    run(store, plan(&warm_up, group));

    let single: Vec<Deletion> = (0..sizes.single).map(|i| deletion("single", i)).collect();
    let alone = run(store, plan(&single, 1));
    alone.print(label, "each write alone");

    let grouped = run_grouped(label, store, sizes.grouped, group, "grouped");
    Rates {
        alone: alone.rate(),
        grouped,
        group,
    }
}

/// Deletes `objects` objects in groups of `group`; the rate.
fn run_grouped(
    label: &str,
    store: &dyn Store,
    objects: usize,
    group: usize,
    run_name: &str,
) -> f64 {
    let deletions: Vec<Deletion> = (0..objects).map(|i| deletion(run_name, i)).collect();
    let timings = run(store, plan(&deletions, group));
    timings.print(label, &format!("groups of {group}"));
    timings.rate()
}

/// What every write costs both stores before any I/O: the object as JSON
/// (each write encodes it twice, as the object and as its change-log
/// event).
fn encoding_cost() {
    let stages = deletion("encode", 0).stages;
    let rounds = 2000;
    let mut bytes = 0;
    let started = Instant::now();
    for _ in 0..rounds {
        for stage in &stages {
            bytes += serde_json::to_vec(std::hint::black_box(stage))
                .expect("encodes")
                .len();
        }
    }
    let encodes = rounds * stages.len();
    println!(
        "one stored object as JSON: {} bytes on average, {} to encode",
        bytes / encodes,
        show(started.elapsed() / encodes as u32)
    );
}

/// One object's name and its writes' contents.
struct Deletion {
    name: String,
    uid: String,
    /// The object as created, then as each update writes it.
    stages: Vec<StoredObject>,
}

/// The objects one graceful deletion writes, computed by grace-core: a pod
/// with one container, deleted with a 30 s grace, stopped by SIGTERM.
fn deletion(run: &str, i: usize) -> Deletion {
    let uid = format!("uid-{run}-{i:06}");
    let mut object = StoredObject::on_node(
        Record::new(Name::try_from(uid.as_str()).expect("short")),
        "node-a",
    );
    object.containers = vec![StoredContainer::new("app", ["/bin/app", "--port=8080"])];
    let mut lifecycle = ObjectLifecycle::new(
        Strategy::POD,
        object.record.clone(),
        &[ContainerSpec::default()],
    )
    .expect("one container fits");
    let at = |s: i64| Now::from_unix_millis(1_700_000_000_000 + s * 1000);
    let snapshot = |lifecycle: &ObjectLifecycle| {
        let mut stage = object.clone();
        stage.record = lifecycle.record().clone();
        let record = KillRecord {
            epoch: "boot:4b2c6a1e-0f1d-4a57-9d7e-5c3b2f1a0e9d".into(),
            lifecycle: lifecycle.clone(),
        };
        stage.agent = Some(record.encode().expect("encodes"));
        stage
    };
    let mut stages = vec![object.clone()];
    let _ = lifecycle
        .handle(at(0), Input::Delete(DeleteOptions::with_grace(30)))
        .delete()
        .unwrap();
    stages.push(snapshot(&lifecycle)); // delete accepted, endpoints owed
    while lifecycle.poll_action().is_some() {}
    stages.push(snapshot(&lifecycle)); // endpoints removed
    let _ = lifecycle.handle(at(1), Input::AgentSync).handled();
    stages.push(snapshot(&lifecycle)); // SIGTERM owed
    while lifecycle.poll_action().is_some() {}
    stages.push(snapshot(&lifecycle)); // SIGTERM sent
    let _ = lifecycle
        .handle(at(3), Input::container_exited(0))
        .container();
    stages.push(snapshot(&lifecycle)); // exited; the final delete owed
    assert_eq!(stages.len(), WRITES_PER_OBJECT - 1);
    Deletion {
        name: format!("pods/{run}-{i:06}"),
        uid,
        stages,
    }
}

/// The timings of one run.
struct Timings {
    transitions: usize,
    total: Duration,
    /// One per commit.
    commits: Vec<Duration>,
}

impl Timings {
    fn rate(&self) -> f64 {
        self.transitions as f64 / self.total.as_secs_f64()
    }

    fn print(&self, store: &str, commits: &str) {
        let mut sorted = self.commits.clone();
        sorted.sort_unstable();
        let at = |q: f64| {
            let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
            sorted[i - 1]
        };
        println!(
            "| {store} | {commits} | {:.0} | {} | {} | {} |",
            self.rate(),
            show(self.total / self.transitions as u32),
            show(at(0.50)),
            show(at(0.99)),
        );
    }
}

fn show(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        format!("{:.1} µs", d.as_secs_f64() * 1e6)
    } else {
        format!("{:.2} ms", d.as_secs_f64() * 1e3)
    }
}

/// Every batch of the run, in order: `group` objects at a time, each step
/// of their deletion one batch for the whole group (one write per batch
/// when `group` is 1). Updates name `Revision::ZERO` until the run fills
/// in the revision the previous step wrote.
fn plan(deletions: &[Deletion], group: usize) -> Vec<Vec<Write>> {
    let mut batches = Vec::new();
    for chunk in deletions.chunks(group) {
        for step in 0..WRITES_PER_OBJECT {
            batches.push(chunk.iter().map(|d| write(d, step)).collect());
        }
    }
    batches
}

/// Applies the batches of a [`plan`], each update naming the revision its
/// object's previous write got.
fn run(store: &dyn Store, batches: Vec<Vec<Write>>) -> Timings {
    let transitions = batches.iter().map(Vec::len).sum();
    let mut commits = Vec::with_capacity(batches.len());
    let mut revisions: Vec<Revision> = Vec::new();
    let started = Instant::now();
    for mut writes in batches {
        for (write, &previous) in writes.iter_mut().zip(&revisions) {
            if let Write::Update { expected, .. } = write {
                *expected = previous;
            }
        }
        let commit = Instant::now();
        revisions = store.batch(writes).expect("the workload's writes succeed");
        commits.push(commit.elapsed());
    }
    Timings {
        transitions,
        total: started.elapsed(),
        commits,
    }
}

/// Write `step` of a deletion (an update's expected revision is filled in
/// by [`run`]).
fn write(d: &Deletion, step: usize) -> Write {
    let name = d.name.clone();
    match step {
        0 => Write::Create {
            name,
            object: d.stages[0].clone(),
        },
        s if s < WRITES_PER_OBJECT - 1 => Write::Update {
            name,
            object: d.stages[s].clone(),
            expected: Revision::ZERO,
        },
        _ => Write::Delete {
            name,
            preconditions: StorePreconditions {
                uid: Some(d.uid.clone()),
                revision: None,
            },
        },
    }
}

fn env_number(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, not {v:?}")),
        Err(_) => default,
    }
}
