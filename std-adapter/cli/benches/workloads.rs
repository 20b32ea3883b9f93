//! N real `sleep` workloads on one `grace agent`: its threads, its memory
//! per workload, and how long deleting them all takes. A plain binary that
//! prints what it measured (see BENCHMARKS.md):
//! `cargo bench -p grace-cli --bench workloads`.
//!
//! For each N it starts an agent on a fresh data directory (redb), reads
//! its idle threads, resident memory and open files, applies N pods each
//! running `sleep 1000` (pipelined), waits until every `sleep` runs, reads
//! the same again, then deletes every pod with a grace of G seconds
//! (pipelined) and measures the time until the store is empty and no
//! `sleep` of the agent is left. The agent is then stopped; every `sleep`
//! it started must be gone. Each `sleep` runs under its waiter (the gate's
//! `sh`, the agent's child, which keeps its exit status for a restarted
//! agent): their number, resident and proportional memory are read once
//! every `sleep` runs.
//!
//! `GRACE_BENCH_WORKLOADS` (`1000,10000`) are the Ns, one agent each;
//! `GRACE_BENCH_GRACE` (5) is G; `GRACE_BENCH_IGNORE_TERM=1` runs
//! `sleep 1000` with SIGTERM ignored (`sh -c "trap '' TERM; exec sleep
//! 1000"`), so that every workload lives until its SIGKILL at the end of
//! its grace. The data directory lives in `$TMPDIR` (default `/tmp`).
// A benchmark is not library code: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use std::collections::HashSet;
use std::time::{Duration, Instant};

use grace_agent::api::{Client, Reply, Request};
use grace_core::{DeleteOptions, Record};
use grace_std::store::{StoredContainer, StoredObject};

mod common;
use common::{NODE, env_or, start_agent, stop_agent};

/// Requests per pipelined write: the agent answers while the client
/// still writes, and a client that wrote everything before reading
/// would fill both socket buffers.
const PIPELINE: usize = 256;

/// The bounds.
const MAX_THREADS: u64 = 32;
const MAX_BYTES_PER_WORKLOAD: f64 = 4096.0;
const MAX_OVER_GRACE: Duration = Duration::from_secs(5);

fn main() {
    let counts: Vec<usize> = std::env::var("GRACE_BENCH_WORKLOADS")
        .ok()
        .map(|v| v.split(',').filter_map(|c| c.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1000, 10_000]);
    let grace = env_or("GRACE_BENCH_GRACE", 5i64);
    let ignore_term = std::env::var("GRACE_BENCH_IGNORE_TERM").is_ok_and(|v| v == "1");
    println!(
        "`sleep 1000` workloads{}, deleted with a grace of {grace} s; limits: pid_max {}, \
         RLIMIT_NPROC {}, RLIMIT_NOFILE {}",
        if ignore_term { " ignoring SIGTERM" } else { "" },
        read_trim("/proc/sys/kernel/pid_max"),
        limit("Max processes"),
        limit("Max open files"),
    );
    println!(
        "| N | apply | all running | threads idle → loaded (max) | RSS idle → loaded (max) | \
         RSS per workload | fds idle → loaded | waiters: RSS / PSS each | delete: sleeps gone | all gone | met |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for n in counts {
        let run = run(n, grace, ignore_term);
        let per_workload = run.rss_per_workload();
        let met = run.max_threads <= MAX_THREADS
            && per_workload <= MAX_BYTES_PER_WORKLOAD
            && run.deleted <= Duration::from_secs(grace.unsigned_abs()) + MAX_OVER_GRACE;
        println!(
            "| {n} | {:.2} s | {:.2} s | {} → {} ({}) | {:.1} → {:.1} MiB ({:.1}) | {:.0} B | {} → {} | {}: {:.0} / {:.0} KiB | {:.2} s | {:.2} s | {} |",
            run.applied.as_secs_f64(),
            run.running.as_secs_f64(),
            run.idle.threads,
            run.loaded.threads,
            run.max_threads,
            mib(run.idle.rss),
            mib(run.loaded.rss),
            mib(run.max_rss),
            per_workload,
            run.idle.fds,
            run.loaded.fds,
            run.waiters.count,
            run.waiters.per_rss_kib(),
            run.waiters.per_pss_kib(),
            run.exited.as_secs_f64(),
            run.deleted.as_secs_f64(),
            if met { "yes" } else { "**no**" },
        );
    }
}

/// What the agent process looks like at one moment.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    threads: u64,
    /// Resident bytes.
    rss: u64,
    fds: usize,
}

/// The agent's children that wait for a workload each (`sh`): how many,
/// and their summed resident and proportional set sizes.
#[derive(Clone, Copy, Debug, Default)]
struct Waiters {
    count: usize,
    rss: u64,
    pss: u64,
}

impl Waiters {
    fn per_rss_kib(&self) -> f64 {
        self.rss as f64 / 1024.0 / self.count.max(1) as f64
    }

    fn per_pss_kib(&self) -> f64 {
        self.pss as f64 / 1024.0 / self.count.max(1) as f64
    }
}

/// What one run measured.
struct Run {
    /// The workloads' waiters, once every `sleep` runs.
    waiters: Waiters,
    idle: Sample,
    loaded: Sample,
    /// The most threads and resident bytes seen at any sample of the run.
    max_threads: u64,
    max_rss: u64,
    n: usize,
    /// From the first apply sent to the last answer read.
    applied: Duration,
    /// From the first apply sent to every `sleep` running.
    running: Duration,
    /// From the first delete sent to no `sleep` left.
    exited: Duration,
    /// From the first delete sent to the store empty and no `sleep` left.
    deleted: Duration,
}

impl Run {
    fn rss_per_workload(&self) -> f64 {
        self.loaded.rss.saturating_sub(self.idle.rss) as f64 / self.n as f64
    }
}

fn run(n: usize, grace: i64, ignore_term: bool) -> Run {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut agent = start_agent(dir.path(), &[]);
    let pid = agent.id();
    // Let the agent settle (its threads started, the store open).
    std::thread::sleep(Duration::from_secs(1));
    let idle = sample(pid);
    let mut max = (idle.threads, idle.rss);
    let mut watch = |s: Sample| {
        max = (max.0.max(s.threads), max.1.max(s.rss));
    };

    let command: Vec<String> = if ignore_term {
        ["sh", "-c", "trap '' TERM; exec sleep 1000"]
            .map(String::from)
            .to_vec()
    } else {
        ["sleep", "1000"].map(String::from).to_vec()
    };
    let mut client = Client::connect(dir.path()).expect("connects");
    let started = Instant::now();
    let applies: Vec<Request> = (0..n)
        .map(|i| {
            let mut object = StoredObject::on_node(
                Record::builder(format!("uid-{i}").as_str())
                    .build()
                    .expect("a short uid"),
                NODE,
            );
            object
                .containers
                .push(StoredContainer::new("main", command.clone()));
            Request::Apply {
                name: name(i),
                object: Box::new(object),
            }
        })
        .collect();
    for chunk in applies.chunks(PIPELINE) {
        for reply in client.pipeline(chunk).expect("the agent answers") {
            let reply = reply.expect("the apply is accepted");
            assert!(matches!(reply, Reply::Applied { .. }), "{reply:?}");
        }
        watch(sample(pid));
    }
    let applied = started.elapsed();
    let workloads = wait_for(Duration::from_secs(600), || {
        watch(sample(pid));
        let sleeping = sleeps_of(pid);
        (sleeping.len() >= n).then_some(sleeping)
    })
    .unwrap_or_else(|| panic!("{n} sleeps run within 10 minutes"));
    let running = started.elapsed();
    // Let the agent finish what follows a start (statuses written).
    std::thread::sleep(Duration::from_secs(2));
    let loaded = sample(pid);
    watch(loaded);
    let waiters = waiters_of(pid);

    let started = Instant::now();
    let deletes: Vec<Request> = (0..n)
        .map(|i| Request::Delete {
            name: name(i),
            options: DeleteOptions::with_grace(grace),
        })
        .collect();
    for chunk in deletes.chunks(PIPELINE) {
        for reply in client.pipeline(chunk).expect("the agent answers") {
            let reply = reply.expect("the delete is accepted");
            assert!(matches!(reply, Reply::Deleted(_)), "{reply:?}");
        }
    }
    // The processes first (cheaper to look at than a listing of the
    // store), then the records.
    let mut exited = Duration::ZERO;
    let gone = wait_for(Duration::from_secs(600), || {
        watch(sample(pid));
        sleeps_of(pid).is_empty().then_some(())
    })
    .and_then(|()| {
        exited = started.elapsed();
        wait_for(Duration::from_secs(600), || {
            matches!(
                client.call(&Request::Get { name: None }),
                Ok(Reply::Objects { ref items, .. }) if items.is_empty()
            )
            .then_some(())
        })
    });
    let deleted = started.elapsed();
    assert!(gone.is_some(), "every object is removed within 10 minutes");
    drop(client);
    stop_agent(&mut agent);
    let left: Vec<(u32, u64)> = workloads.into_iter().filter(|&p| still_runs(p)).collect();
    assert!(left.is_empty(), "sleeps left running: {left:?}");
    Run {
        waiters,
        idle,
        loaded,
        max_threads: max.0,
        max_rss: max.1,
        n,
        applied,
        running,
        exited,
        deleted,
    }
}

fn name(i: usize) -> String {
    format!("w{i}")
}

/// Calls `f` every 50 ms until it gives something, at most `limit` (not
/// more often: reading `/proc` for thousands of processes takes CPU from
/// the agent measured).
fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(t) = f() {
            return Some(t);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The `sleep`s of the agent's workloads (each the child of its waiter,
/// the agent's child): pid and start time (pids are reused: with
/// thousands of processes a pid soon names another).
fn sleeps_of(agent: u32) -> HashSet<(u32, u64)> {
    let processes = processes();
    let children: HashSet<u32> = processes
        .iter()
        .filter(|p| p.ppid == agent)
        .map(|p| p.pid)
        .collect();
    processes
        .iter()
        .filter(|p| p.comm == "sleep" && (p.ppid == agent || children.contains(&p.ppid)))
        .map(|p| (p.pid, p.start_time))
        .collect()
}

/// The agent's `sh` children (the waiters), with their memory.
fn waiters_of(agent: u32) -> Waiters {
    let mut waiters = Waiters::default();
    for p in processes() {
        if p.ppid != agent || p.comm != "sh" {
            continue;
        }
        let rollup =
            std::fs::read_to_string(format!("/proc/{}/smaps_rollup", p.pid)).unwrap_or_default();
        let field = |key: &str| {
            rollup
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
                * 1024
        };
        waiters.count += 1;
        waiters.rss += field("Rss:");
        waiters.pss += field("Pss:");
    }
    waiters
}

/// One process, from `/proc/PID/stat`.
struct Process {
    pid: u32,
    ppid: u32,
    comm: String,
    start_time: u64,
}

/// Every process on the machine.
fn processes() -> Vec<Process> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: comm may hold spaces, so split after
        // its closing parenthesis.
        let Some((head, tail)) = stat.rsplit_once(')') else {
            continue;
        };
        let Some(ppid) = tail.split_whitespace().nth(1).and_then(|p| p.parse().ok()) else {
            continue;
        };
        let comm = head.split_once('(').map_or("", |(_, c)| c).to_owned();
        found.push(Process {
            pid,
            ppid,
            comm,
            start_time: start_time(tail),
        });
    }
    found
}

/// Field 22 of `/proc/PID/stat` (`starttime`), from what follows `comm`.
fn start_time(after_comm: &str) -> u64 {
    after_comm
        .split_whitespace()
        .nth(19)
        .and_then(|t| t.parse().ok())
        .unwrap_or(0)
}

/// Whether the process `pid` that started at `started` still runs.
fn still_runs((pid, started): (u32, u64)) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(')').map(|(_, tail)| start_time(tail)))
        == Some(started)
}

fn sample(pid: u32) -> Sample {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Sample {
        threads: field("Threads:"),
        rss: field("VmRSS:") * 1024,
        fds: std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count),
    }
}

/// A line of this process's `/proc/self/limits`: `soft hard`.
fn limit(name: &str) -> String {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    limits
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .map(|v| v.split_whitespace().take(2).collect::<Vec<_>>().join("/"))
        .unwrap_or_default()
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
