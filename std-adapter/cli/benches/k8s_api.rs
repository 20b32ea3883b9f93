//! The agent's Kubernetes API (`grace agent --k8s-api`) against its Unix
//! socket, in one run: a plain binary that prints tables (see
//! BENCHMARKS.md): `cargo bench -p grace-cli --bench k8s_api`.
//!
//! 1. **Deletes** from 1, 8 and 64 concurrent clients, each one request at
//!    a time over its own connection (HTTPS keep-alive with the agent's
//!    client certificate, or the socket): deletes per second and each
//!    request's latency. The objects are pods bound to the agent's node
//!    with no container, stored before the agent starts: a delete is
//!    decided, taken at once (nothing to stop) and the record removed,
//!    durable before the answer — the request path, not a grace period.
//!    Every client connects (HTTPS: its TLS handshake and a `GET
//!    /version`) before the clock starts. The transports alternate round
//!    by round on fresh agents.
//! 2. **Watchers**: N HTTPS watches (`GET …/pods?watch=true`) on one
//!    agent, each ready once it has seen every pod's `ADDED`; then pods
//!    are deleted one at a time through the socket, each delete waiting
//!    until every watcher has seen its `DELETED`. Measured: the time from
//!    sending the delete to each watcher reading the event.
//! 3. **Memory per idle watch**: the agent's resident memory
//!    (`/proc/PID/status` VmRSS) with those N watches open and idle, less
//!    before they were opened, divided by N.
//!
//! `GRACE_BENCH_DELETES` (512) deletes per run, `GRACE_BENCH_ROUNDS` (3),
//! `GRACE_BENCH_CLIENTS` (`1,8,64`), `GRACE_BENCH_WATCHERS` (100; the API
//! serves at most `API_CONNECTIONS`, 256, connections at once: watchers
//! over that are refused with 429 and counted), `GRACE_BENCH_CHANGES`
//! (20).
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
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use grace_agent::api::{Client, DATABASE, Reply, Request};
use grace_agent::is_serving;
use grace_core::{DeleteOptions, Name, Record};
use grace_std::store::{RedbStore, Store, StoredObject, Write};

mod common;
use common::{GRACE, NODE, env_or, stop_agent};
#[path = "../tests/support/https.rs"]
mod https;
use https::{Endpoint, Https, Watch};

fn main() {
    let deletes = env_or("GRACE_BENCH_DELETES", 512usize);
    let rounds = env_or("GRACE_BENCH_ROUNDS", 3usize).max(1);
    let clients: Vec<usize> = std::env::var("GRACE_BENCH_CLIENTS")
        .ok()
        .map(|v| v.split(',').filter_map(|c| c.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 8, 64]);
    let watchers = env_or("GRACE_BENCH_WATCHERS", 100usize);
    let changes = env_or("GRACE_BENCH_CHANGES", 20usize).max(1);

    println!(
        "{deletes} deletes per run, each client one request at a time; {rounds} rounds, \
         HTTPS and socket alternating"
    );
    println!("| transport | clients | round | deletes/s | p50 | p99 | max |");
    println!("|---|---|---|---|---|---|---|");
    let mut summary = Vec::new();
    for &n in &clients {
        let mut rates = [Vec::new(), Vec::new()];
        let mut pooled = [Vec::new(), Vec::new()];
        for round in 1..=rounds {
            for (k, transport) in [Transport::Https, Transport::Socket]
                .into_iter()
                .enumerate()
            {
                let run = deletes_run(transport, n, deletes);
                println!(
                    "| {} | {n} | {round} | {:.0} | {} | {} | {} |",
                    transport.name(),
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
    println!("| clients | transport | deletes/s | p50 | p99 | HTTPS ÷ socket |");
    println!("|---|---|---|---|---|---|");
    for (n, mut rates, mut pooled) in summary {
        let medians = rates.each_mut().map(|r| median(r));
        for (k, transport) in [Transport::Https, Transport::Socket]
            .into_iter()
            .enumerate()
        {
            pooled[k].sort_unstable();
            println!(
                "| {n} | {} | {:.0} | {} | {} | {} |",
                transport.name(),
                medians[k],
                ms(percentile(&pooled[k], 50)),
                ms(percentile(&pooled[k], 99)),
                if k == 0 {
                    format!("**{:.2}x**", medians[0] / medians[1])
                } else {
                    String::new()
                },
            );
        }
    }

    watchers_run(watchers, changes);
}

#[derive(Clone, Copy)]
enum Transport {
    Https,
    Socket,
}

impl Transport {
    fn name(self) -> &'static str {
        match self {
            Transport::Https => "HTTPS",
            Transport::Socket => "socket",
        }
    }
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

/// `clients` clients delete `deletes` pods (rounded up to a multiple of
/// `clients`) through a fresh agent over `transport`.
fn deletes_run(transport: Transport, clients: usize, deletes: usize) -> Run {
    let per_client = deletes.div_ceil(clients);
    let dir = tempfile::tempdir().expect("temp dir");
    store_pods(dir.path(), clients, per_client);
    let mut agent = Agent::start(dir.path());

    // Every client connects (and, over HTTPS, does its TLS handshake)
    // before the clock starts: the run measures requests, not handshakes.
    let connected = Arc::new(Barrier::new(clients + 1));
    let workers: Vec<_> = (0..clients)
        .map(|c| {
            let dir = dir.path().to_path_buf();
            let api = agent.api.clone();
            let connected = connected.clone();
            std::thread::spawn(move || {
                let mut latencies = Vec::with_capacity(per_client);
                match transport {
                    Transport::Https => {
                        let mut https = Https::connect(&api);
                        // A first request ends the handshake (rustls
                        // finishes it on the first write and read).
                        let (status, _) = https.request("GET", "/version");
                        assert_eq!(status, 200);
                        connected.wait();
                        for i in 0..per_client {
                            let path = format!("/api/v1/namespaces/default/pods/{}", name(c, i));
                            let sent = Instant::now();
                            let (status, body) = https.request("DELETE", &path);
                            latencies.push(sent.elapsed());
                            assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
                        }
                    }
                    Transport::Socket => {
                        let mut client = Client::connect(&dir).expect("connects");
                        connected.wait();
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
                    }
                }
                latencies
            })
        })
        .collect();
    connected.wait();
    let started = Instant::now();
    let mut latencies: Vec<Duration> = workers
        .into_iter()
        .flat_map(|w| w.join().expect("client"))
        .collect();
    let elapsed = started.elapsed();
    latencies.sort_unstable();

    stop_agent(&mut agent.child);
    let store = RedbStore::open(dir.path().join(DATABASE)).expect("store");
    let left = store.list().expect("list").objects.len();
    assert_eq!(left, 0, "every deleted pod is removed");
    Run { elapsed, latencies }
}

/// `watchers` HTTPS watches on one agent; `changes` deletes through the
/// socket, each seen by every watcher; then the memory the idle watches
/// hold.
fn watchers_run(watchers: usize, changes: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    store_pods(dir.path(), 1, changes);
    let mut agent = Agent::start(dir.path());
    let mut socket = Client::connect(dir.path()).expect("connects");
    // A first watch and its close, so that the server's lazily made state
    // (its TLS session cache, its watch machinery) is not counted as the
    // watchers' memory.
    drop(Watch::open(&agent.api, changes).expect("a watch"));
    let before = rss_kib(agent.child.id());

    let (events, seen) = mpsc::channel::<(usize, Instant)>();
    let mut open = Vec::new();
    let mut refused = 0;
    for w in 0..watchers {
        match Watch::open(&agent.api, changes) {
            Ok(watch) => {
                let events = events.clone();
                open.push(std::thread::spawn(move || follow(watch, w, &events)));
            }
            Err(429) => refused += 1,
            Err(status) => panic!("a watch: {status}"),
        }
    }
    let served = open.len();
    // Idle: every served watch has sent its ADDED events (Watch::open
    // read them); nothing changes until the deletes below.
    let with = rss_kib(agent.child.id());
    let per_watch = (with as f64 - before as f64) / served.max(1) as f64;

    let mut latencies = Vec::with_capacity(served * changes);
    for i in 0..changes {
        let sent = Instant::now();
        let reply = socket
            .call(&Request::Delete {
                name: name(0, i),
                options: DeleteOptions::default(),
            })
            .expect("the delete is accepted");
        assert!(matches!(reply, Reply::Deleted(_)), "{reply:?}");
        for _ in 0..served {
            let (_, at) = seen
                .recv_timeout(Duration::from_secs(10))
                .expect("every watcher sees the delete within 10 s");
            latencies.push(at.saturating_duration_since(sent));
        }
    }
    latencies.sort_unstable();
    stop_agent(&mut agent.child);
    for watch in open {
        let _ = watch.join();
    }
    println!(
        "\n{served} HTTPS watchers served ({refused} of {watchers} refused with 429: \
         the API's connection cap), {changes} deletes through the socket, one at a time"
    );
    println!("| watchers | events | p50 | p99 | max | memory per idle watch |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| {served} | {} | {} | {} | {} | {:.0} KiB ({} → {} KiB agent RSS) |",
        latencies.len(),
        ms(percentile(&latencies, 50)),
        ms(percentile(&latencies, 99)),
        ms(percentile(&latencies, 100)),
        per_watch,
        before,
        with,
    );
}

/// A `grace agent --k8s-api 127.0.0.1:0`, and what its clients need.
struct Agent {
    child: Child,
    api: Endpoint,
}

impl Agent {
    /// Starts it on `dir`; ready when the socket serves and the
    /// kubeconfig (written after the API's port is bound) names a port.
    fn start(dir: &Path) -> Agent {
        let child = Command::new(GRACE)
            .args(["agent", "--k8s-api", "127.0.0.1:0", "--data-dir"])
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the agent starts");
        let kubeconfig = dir.join("kubeconfig");
        let deadline = Instant::now() + Duration::from_secs(30);
        let api = loop {
            if is_serving(dir)
                && let Some(api) = Endpoint::from_kubeconfig(&kubeconfig)
            {
                break api;
            }
            assert!(Instant::now() < deadline, "the agent serves within 30 s");
            std::thread::sleep(Duration::from_millis(10));
        };
        Agent { child, api }
    }
}

/// Reports when each `DELETED` event of `watch` arrives, until the
/// stream ends.
fn follow(mut watch: Watch, watcher: usize, events: &mpsc::Sender<(usize, Instant)>) {
    while let Some(event) = watch.next_event() {
        if event.contains("\"DELETED\"") && events.send((watcher, Instant::now())).is_err() {
            return;
        }
    }
}

/// The resident memory of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

fn name(client: usize, i: usize) -> String {
    format!("c{client}-o{i}")
}

/// Pods bound to the agent's node, with no container, stored before the
/// agent starts.
fn store_pods(dir: &Path, clients: usize, per_client: usize) {
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
        store.batch(chunk.to_vec()).expect("pods stored");
    }
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

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}
