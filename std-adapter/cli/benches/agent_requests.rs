//! Deletes through a real `grace agent` on redb, from 1, 8 and 64
//! concurrent clients: deletes per second and each request's latency, with
//! the agent's group commit and without it (`GRACE_AGENT_GROUP_COMMIT=off`),
//! in one run. A plain binary that prints a table (see BENCHMARKS.md):
//! `cargo bench -p grace-cli --bench agent_requests`.
//!
//! Each run stores its objects first (straight into a fresh store, before
//! the agent opens it), then starts the agent and lets every client delete
//! its share, one request at a time, over its own connection. The objects
//! are pods bound to the agent's node with no container: a delete is
//! decided, the agent takes it at once (its kill has nothing to stop) and
//! the record is removed — all of it durable before the answer. After the
//! run the agent is stopped and the store must be empty.
//!
//! `GRACE_BENCH_DELETES` (1 024) is the number of deletes per run,
//! `GRACE_BENCH_ROUNDS` (3) how many runs of each kind, alternating,
//! `GRACE_BENCH_CLIENTS` (`1,8,64`) the client counts; the store lives in
//! `$TMPDIR` (default `/tmp`).
// A benchmark is not library code: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::disallowed_methods,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use std::path::Path;
use std::time::{Duration, Instant};

use grace_agent::GROUP_COMMIT_ENV;
use grace_agent::api::{Client, DATABASE, Reply, Request};
use grace_core::{DeleteOptions, Name, Record};
use grace_std::store::{RedbStore, Store, StoredObject, Write};

mod common;
use common::{NODE, env_or, start_agent, stop_agent};

fn main() {
    let deletes = env_or("GRACE_BENCH_DELETES", 1024usize);
    let rounds = env_or("GRACE_BENCH_ROUNDS", 3usize).max(1);
    let clients: Vec<usize> = std::env::var("GRACE_BENCH_CLIENTS")
        .ok()
        .map(|v| v.split(',').filter_map(|c| c.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 8, 64]);
    println!(
        "{deletes} deletes per run, each client one request at a time; {rounds} rounds, \
         group commit on and off alternating"
    );
    println!(
        "| group commit | clients | round | deletes/s | p50 | p99 | max |\n|---|---|---|---|---|---|---|"
    );
    let mut summary = Vec::new();
    for &n in &clients {
        let mut rates = [Vec::new(), Vec::new()];
        let mut pooled = [Vec::new(), Vec::new()];
        for round in 1..=rounds {
            for (k, group_commit) in [true, false].into_iter().enumerate() {
                let run = run(group_commit, n, deletes);
                println!(
                    "| {} | {n} | {round} | {:.0} | {} | {} | {} |",
                    on_off(group_commit),
                    run.per_second(),
                    ms(percentile(&run.latencies, 50)),
                    ms(percentile(&run.latencies, 99)),
                    ms(percentile(&run.latencies, 100)),
                );
                rates[k].push(run.per_second());
                pooled[k].extend(run.latencies);
            }
        }
        summary.push((n, rates, pooled));
    }
    println!("\nMedians over the rounds (latencies pooled over them):");
    println!(
        "| clients | group commit | deletes/s | p50 | p99 | on ÷ off |\n|---|---|---|---|---|---|"
    );
    for (n, mut rates, mut pooled) in summary {
        let medians = rates.each_mut().map(|r| median(r));
        for (k, group_commit) in [true, false].into_iter().enumerate() {
            pooled[k].sort_unstable();
            println!(
                "| {n} | {} | {:.0} | {} | {} | {} |",
                on_off(group_commit),
                medians[k],
                ms(percentile(&pooled[k], 50)),
                ms(percentile(&pooled[k], 99)),
                if group_commit {
                    format!("**{:.1}x**", medians[0] / medians[1])
                } else {
                    String::new()
                },
            );
        }
    }
}

fn on_off(group_commit: bool) -> &'static str {
    if group_commit { "on" } else { "off" }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// The `p`th percentile of sorted `latencies` (100: the largest).
fn percentile(latencies: &[Duration], p: usize) -> Duration {
    let n = latencies.len();
    let i = (n * p / 100).min(n.saturating_sub(1));
    latencies.get(i).copied().unwrap_or_default()
}

/// What one run measured.
struct Run {
    elapsed: Duration,
    /// Every request's latency, sorted.
    latencies: Vec<Duration>,
}

impl Run {
    fn per_second(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64()
    }
}

/// `clients` clients delete `deletes` objects (rounded up to a multiple of
/// `clients`) through an agent with group commit on or off.
fn run(group_commit: bool, clients: usize, deletes: usize) -> Run {
    let per_client = deletes.div_ceil(clients);
    let dir = tempfile::tempdir().expect("temp dir");
    store_objects(dir.path(), clients, per_client);
    let switch = if group_commit { "on" } else { "off" };
    let mut agent = start_agent(dir.path(), &[(GROUP_COMMIT_ENV, switch)]);

    let started = Instant::now();
    let workers: Vec<_> = (0..clients)
        .map(|c| {
            let dir = dir.path().to_path_buf();
            std::thread::spawn(move || {
                let mut client = Client::connect(&dir).expect("connects");
                let mut latencies = Vec::with_capacity(per_client);
                for i in 0..per_client {
                    let request = Request::Delete {
                        name: name(c, i),
                        options: DeleteOptions::default(),
                    };
                    let sent = Instant::now();
                    let reply = client.call(&request).expect("the delete is accepted");
                    latencies.push(sent.elapsed());
                    assert!(matches!(reply, Reply::Deleted(_)), "{reply:?}");
                }
                latencies
            })
        })
        .collect();
    let mut latencies: Vec<Duration> = workers
        .into_iter()
        .flat_map(|w| w.join().expect("client"))
        .collect();
    let elapsed = started.elapsed();
    latencies.sort_unstable();

    stop_agent(&mut agent);
    let store = RedbStore::open(dir.path().join(DATABASE)).expect("store");
    let left = store.list().expect("list").objects.len();
    assert_eq!(left, 0, "every deleted object is removed");
    Run { elapsed, latencies }
}

fn name(client: usize, i: usize) -> String {
    format!("c{client}-o{i}")
}

/// Pods bound to the agent's node, with no container, stored before the
/// agent starts.
fn store_objects(dir: &Path, clients: usize, per_client: usize) {
    let store = RedbStore::open(dir.join(DATABASE)).expect("store");
    let writes: Vec<Write> = (0..clients)
        .flat_map(|c| (0..per_client).map(move |i| (c, i)))
        .map(|(c, i)| {
            let uid = format!("uid-{c}-{i}");
            let object = StoredObject::on_node(
                Record::new(Name::try_from(uid.as_str()).expect("a short uid")),
                NODE,
            );
            Write::Create {
                name: name(c, i),
                object,
            }
        })
        .collect();
    for chunk in writes.chunks(1024) {
        store.batch(chunk.to_vec()).expect("objects stored");
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}
