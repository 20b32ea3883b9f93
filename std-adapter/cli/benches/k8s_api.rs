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
//! serves at most 64 connections at once, so the watchers over that are
//! refused with 429 and counted), `GRACE_BENCH_CHANGES` (20).
// A benchmark is not library code: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use std::io::{BufRead, BufReader, Read, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use grace_agent::api::{Client, DATABASE, Reply, Request};
use grace_agent::is_serving;
use grace_core::{DeleteOptions, Name, Record};
use grace_std::store::{RedbStore, Store, StoredObject, Write};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

mod common;
use common::{GRACE, NODE, env_or, stop_agent};

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
            let tls = agent.tls.clone();
            let port = agent.port;
            let connected = connected.clone();
            std::thread::spawn(move || {
                let mut latencies = Vec::with_capacity(per_client);
                match transport {
                    Transport::Https => {
                        let mut https = Https::connect(&tls, port);
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
    drop(Watch::open(&agent.tls, agent.port, changes).expect("a watch"));
    let before = rss_kib(agent.child.id());

    let (events, seen) = mpsc::channel::<(usize, Instant)>();
    let mut open = Vec::new();
    let mut refused = 0;
    for w in 0..watchers {
        match Watch::open(&agent.tls, agent.port, changes) {
            Some(watch) => {
                let events = events.clone();
                open.push(std::thread::spawn(move || watch.follow(w, &events)));
            }
            None => refused += 1,
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
    port: u16,
    tls: Arc<rustls::ClientConfig>,
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
        let port = loop {
            if is_serving(dir)
                && let Some(port) = std::fs::read_to_string(&kubeconfig)
                    .ok()
                    .as_deref()
                    .and_then(server_port)
            {
                break port;
            }
            assert!(Instant::now() < deadline, "the agent serves within 30 s");
            std::thread::sleep(Duration::from_millis(10));
        };
        Agent {
            child,
            port,
            tls: Arc::new(client_config(&dir.join("k8s-api"))),
        }
    }
}

/// The port of the kubeconfig's `server: https://127.0.0.1:PORT`.
fn server_port(kubeconfig: &str) -> Option<u16> {
    let line = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: https://"))?;
    line.rsplit_once(':')?.1.trim().parse().ok()
}

/// TLS as the kubeconfig has it: the agent's CA, its user's certificate.
fn client_config(dir: &Path) -> rustls::ClientConfig {
    let file = |name: &str| -> PathBuf { dir.join(name) };
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_file_iter(file("ca.crt")).expect("ca.crt") {
        roots.add(ca.expect("a CA certificate")).expect("the CA");
    }
    let chain: Vec<_> = CertificateDer::pem_file_iter(file("client.crt"))
        .expect("client.crt")
        .map(|c| c.expect("a client certificate"))
        .collect();
    let key = PrivateKeyDer::from_pem_file(file("client.key")).expect("client.key");
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .expect("the client certificate")
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

fn tls_connect(config: &Arc<rustls::ClientConfig>, port: u16) -> Tls {
    let tcp = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    tcp.set_nodelay(true).expect("nodelay");
    let name = ServerName::try_from("127.0.0.1").expect("a server name");
    let connection = rustls::ClientConnection::new(config.clone(), name).expect("TLS");
    rustls::StreamOwned::new(connection, tcp)
}

/// One HTTPS keep-alive connection, one request at a time.
struct Https(BufReader<Tls>);

impl Https {
    fn connect(config: &Arc<rustls::ClientConfig>, port: u16) -> Https {
        Https(BufReader::new(tls_connect(config, port)))
    }

    /// `METHOD PATH` with no body; the answer's status and body.
    fn request(&mut self, method: &str, path: &str) -> (u16, Vec<u8>) {
        let request = format!(
            "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: application/json\r\n\
             content-length: 0\r\n\r\n"
        );
        self.0
            .get_mut()
            .write_all(request.as_bytes())
            .expect("sent");
        let (status, chunked, length) = head(&mut self.0);
        let body = if chunked {
            let mut body = Vec::new();
            while let Some(chunk) = next_chunk(&mut self.0) {
                body.extend(chunk);
            }
            body
        } else {
            let mut body = vec![0; length];
            self.0.read_exact(&mut body).expect("the body");
            body
        };
        (status, body)
    }
}

/// The status line and headers of an answer: its status, whether it is
/// chunked, its content length.
fn head(reader: &mut impl BufRead) -> (u16, bool, usize) {
    let mut line = String::new();
    reader.read_line(&mut line).expect("a status line");
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {line:?}"));
    let (mut chunked, mut length) = (false, 0);
    loop {
        line.clear();
        reader.read_line(&mut line).expect("a header");
        let header = line.trim_end();
        if header.is_empty() {
            return (status, chunked, length);
        }
        let (key, value) = header.split_once(':').unwrap_or((header, ""));
        let value = value.trim();
        if key.eq_ignore_ascii_case("transfer-encoding") && value.eq_ignore_ascii_case("chunked") {
            chunked = true;
        } else if key.eq_ignore_ascii_case("content-length") {
            length = value.parse().expect("a length");
        }
    }
}

/// The next chunk of a chunked body; `None` at its end (or the stream's).
fn next_chunk(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let size = usize::from_str_radix(line.trim(), 16).ok()?;
    let mut chunk = vec![0; size + 2];
    reader.read_exact(&mut chunk).ok()?;
    chunk.truncate(size);
    (size > 0).then_some(chunk)
}

/// An HTTPS watch of the default namespace's pods.
struct Watch {
    reader: BufReader<Tls>,
    /// Bytes of an event not yet ended by its newline.
    pending: Vec<u8>,
}

impl Watch {
    /// Opens a watch and reads the `ADDED` of each of the `pods` stored;
    /// `None` when the server refuses it (429).
    fn open(config: &Arc<rustls::ClientConfig>, port: u16, pods: usize) -> Option<Watch> {
        let mut https = Https::connect(config, port);
        let request = "GET /api/v1/namespaces/default/pods?watch=true HTTP/1.1\r\n\
                       host: 127.0.0.1\r\naccept: application/json\r\n\r\n";
        https.0.get_mut().write_all(request.as_bytes()).ok()?;
        let (status, chunked, _) = head(&mut https.0);
        if status == 429 {
            return None;
        }
        assert!(status == 200 && chunked, "a watch: {status}");
        let mut watch = Watch {
            reader: https.0,
            pending: Vec::new(),
        };
        let mut added = 0;
        while added < pods {
            let event = watch.next_event().expect("the ADDED events");
            added += usize::from(event.contains("\"ADDED\""));
        }
        Some(watch)
    }

    /// The next event line; `None` when the stream ends.
    fn next_event(&mut self) -> Option<String> {
        loop {
            if let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                return Some(String::from_utf8_lossy(&line).into_owned());
            }
            let chunk = next_chunk(&mut self.reader)?;
            self.pending.extend(chunk);
        }
    }

    /// Reports when each `DELETED` event arrives, until the stream ends.
    fn follow(mut self, watcher: usize, events: &mpsc::Sender<(usize, Instant)>) {
        while let Some(event) = self.next_event() {
            if event.contains("\"DELETED\"") && events.send((watcher, Instant::now())).is_err() {
                return;
            }
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
