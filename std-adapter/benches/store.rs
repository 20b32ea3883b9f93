//! The store writes of graceful deletions, on the embedded durable store
//! (`RedbStore`) and on etcd (`EtcdStore`), in one run: transitions per
//! second and the latency of each commit, every write committed alone and
//! in groups (group commit: one `Store::batch` per group).
//!
//! One object's deletion is the seven writes the runtime makes for it:
//! create; four updates with the persisted lifecycle (delete accepted,
//! endpoints removed, SIGTERM owed, SIGTERM sent); the update once its
//! container exited; the final delete with its uid precondition. The
//! objects and their kill states are built by grace-core beforehand, so
//! only the store is timed. A transition is one write.
//!
//! ```sh
//! cargo bench -p grace-std --bench store                  # redb only
//! GRACE_ETCD_ENDPOINTS=http://127.0.0.1:23790 \
//!     cargo bench -p grace-std --features etcd --bench store
//! ```
//!
//! `GRACE_BENCH_OBJECTS` (256) objects are deleted per run,
//! `GRACE_BENCH_BATCH` (32) per group. Without the `etcd` feature or
//! without `GRACE_ETCD_ENDPOINTS`, etcd is skipped with a message.

use std::time::{Duration, Instant};

use grace_core::{ContainerSpec, DeleteOptions, Name, Now, Record, Strategy};
use grace_std::runtime::{KillRecord, ObjectLifecycle};
use grace_std::store::{
    Preconditions, RedbStore, Revision, Store, StoredContainer, StoredObject, Write,
};

/// The writes of one object's deletion, in order.
const WRITES_PER_OBJECT: usize = 7;

fn main() {
    let objects = env_number("GRACE_BENCH_OBJECTS", 256);
    let batch = env_number("GRACE_BENCH_BATCH", 32).max(1);
    println!(
        "{objects} graceful deletions ({} store writes) per run, groups of {batch}",
        objects * WRITES_PER_OBJECT
    );
    encoding_cost();
    println!();
    println!(
        "| store | commits | transitions/s | time per transition | commit latency p50 | p99 |"
    );
    println!("|---|---|---|---|---|---|");

    let dir = tempfile::tempdir().expect("temp dir");
    let redb = RedbStore::open(dir.path().join("bench.redb")).expect("redb opens");
    let redb_rates = run_both("redb", &redb, objects, batch);
    drop(redb);

    let etcd_rates = etcd(objects, batch);
    if let Some((etcd_alone, etcd_grouped)) = etcd_rates {
        println!();
        println!(
            "redb ÷ etcd, transitions per second: {:.1}× each write alone, {:.1}× with group commit",
            redb_rates.0 / etcd_alone,
            redb_rates.1 / etcd_grouped
        );
    }
}

#[cfg(feature = "etcd")]
fn etcd(objects: usize, batch: usize) -> Option<(f64, f64)> {
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
        Ok(store) => Some(run_both("etcd", &store, objects, batch)),
        Err(e) => {
            println!();
            println!("etcd skipped: {e}");
            None
        }
    }
}

#[cfg(not(feature = "etcd"))]
fn etcd(_objects: usize, _batch: usize) -> Option<(f64, f64)> {
    println!();
    println!("etcd skipped: build with `--features etcd` and set GRACE_ETCD_ENDPOINTS");
    None
}

/// Runs the workload with single commits and with group commits (after a
/// short warm-up); the two rates in transitions per second.
fn run_both(label: &str, store: &dyn Store, objects: usize, batch: usize) -> (f64, f64) {
    let warm_up: Vec<Deletion> = (0..batch.min(objects))
        .map(|i| deletion("warm", i))
        .collect();
    run(store, &warm_up, batch);

    let single: Vec<Deletion> = (0..objects).map(|i| deletion("single", i)).collect();
    let alone = run(store, &single, 1);
    alone.print(label, "each write alone");

    let grouped: Vec<Deletion> = (0..objects).map(|i| deletion("grouped", i)).collect();
    let together = run(store, &grouped, batch);
    together.print(label, &format!("groups of {batch}"));
    (alone.rate(), together.rate())
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
    let mut object = StoredObject::new(Record::new(Name::try_from(uid.as_str()).expect("short")));
    object.node = Some("node-a".into());
    object.containers = vec![StoredContainer {
        name: "app".into(),
        pre_stop: None,
        sidecar: false,
        command: vec!["/bin/app".into(), "--port=8080".into()],
    }];
    let mut lifecycle = ObjectLifecycle::new(
        Strategy::POD,
        object.meta.clone(),
        &[ContainerSpec::default()],
    )
    .expect("one container fits");
    let at = |s: i64| Now::from_unix_millis(1_700_000_000_000 + s * 1000);
    let snapshot = |lifecycle: &ObjectLifecycle| {
        let mut stage = object.clone();
        stage.meta = lifecycle.record().clone();
        let record = KillRecord {
            epoch: "boot:4b2c6a1e-0f1d-4a57-9d7e-5c3b2f1a0e9d".into(),
            lifecycle: lifecycle.clone(),
        };
        stage.agent = Some(record.encode().expect("encodes"));
        stage
    };
    let mut stages = vec![object.clone()];
    let _ = lifecycle.handle_delete(at(0), &DeleteOptions::with_grace(30));
    stages.push(snapshot(&lifecycle)); // delete accepted, endpoints owed
    while lifecycle.poll_action().is_some() {}
    stages.push(snapshot(&lifecycle)); // endpoints removed
    let _ = lifecycle.handle_agent_sync(at(1));
    stages.push(snapshot(&lifecycle)); // SIGTERM owed
    while lifecycle.poll_action().is_some() {}
    stages.push(snapshot(&lifecycle)); // SIGTERM sent
    let _ = lifecycle.handle_container_exited(at(3), 0);
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

/// Deletes every object of `deletions`, `group` objects at a time: each
/// step of the deletion is one commit for the whole group (one write per
/// commit when `group` is 1).
fn run(store: &dyn Store, deletions: &[Deletion], group: usize) -> Timings {
    let mut commits = Vec::new();
    let started = Instant::now();
    for chunk in deletions.chunks(group) {
        let mut revisions = vec![Revision::ZERO; chunk.len()];
        for step in 0..WRITES_PER_OBJECT {
            let writes: Vec<Write> = chunk
                .iter()
                .zip(&revisions)
                .map(|(d, &expected)| write(d, step, expected))
                .collect();
            let commit = Instant::now();
            let written = store.batch(writes).expect("the workload's writes succeed");
            commits.push(commit.elapsed());
            revisions = written;
        }
    }
    Timings {
        transitions: deletions.len() * WRITES_PER_OBJECT,
        total: started.elapsed(),
        commits,
    }
}

/// Write `step` of a deletion; `expected` is the revision of the previous.
fn write(d: &Deletion, step: usize, expected: Revision) -> Write {
    let name = d.name.clone();
    match step {
        0 => Write::Create {
            name,
            object: d.stages[0].clone(),
        },
        s if s < WRITES_PER_OBJECT - 1 => Write::Update {
            name,
            object: d.stages[s].clone(),
            expected,
        },
        _ => Write::Delete {
            name,
            preconditions: Preconditions {
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
