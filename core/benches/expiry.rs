//! Handling the next expiry among n terminating objects: the table's
//! deadline heap (O(1) to find, O(log n) to handle) vs a linear scan of
//! every lifecycle's `poll_timeout` (O(n)), at 1 k, 100 k and 1 M objects,
//! measured in the same run. Each step finds the earliest SIGKILL deadline,
//! handles it, lets the process exit, and replaces the removed object with
//! a fresh one deleted "now", so the number of objects stays n. A step
//! handles every object due at that instant (the initial deadlines are
//! distinct; a replacement's may meet another's, so now and then a step
//! handles two or three), in both worlds alike.
//!
//! Also prints the bytes each tracked object costs.
//!
//! `cargo bench -p grace-core --bench expiry`
// A benchmark is not library code: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use std::hint::black_box;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use criterion::{BenchmarkId, Criterion, SamplingMode, criterion_group, criterion_main};
use grace_core::Input;
use grace_core::{
    Action, ContainerSpec, DeleteOptions, Instant, Lifecycle, Name, Now, Record, Strategy, Table,
};

const F: usize = 1;
const C: usize = 1;
type Lc = Lifecycle<F, C>;

/// Grace periods spread over an hour so the heap has real work to do.
fn grace_for(k: u64) -> i64 {
    i64::try_from(1 + k.wrapping_mul(7919) % 3600).expect("small")
}

fn now_at(ms: u64) -> Now {
    let wall = i64::try_from(ms).expect("small") + 1_700_000_000_000;
    Now::new(Now::from_unix_millis(wall).wall, Instant::from_millis(ms))
}

/// A pod deleted at `ms` with its own grace: its container is stopping.
fn terminating(ms: u64, k: u64) -> Lc {
    let record = Record::new(Name::try_from("uid").expect("short"));
    let mut pod: Lc =
        Lifecycle::new(Strategy::POD, record, &[ContainerSpec::default()]).expect("fits");
    let _ = pod
        .handle(
            now_at(ms),
            Input::Delete(DeleteOptions::with_grace(grace_for(k))),
        )
        .delete()
        .unwrap();
    let _ = pod.handle(now_at(ms), Input::AgentSync).handled();
    while pod.poll_action().is_some() {}
    pod
}

/// Builds a table on a thread with a large stack: `Table<1_000_000>` is
/// hundreds of megabytes and is assembled before it is boxed.
fn boxed_table<const N: usize>() -> Box<Table<N, F, C>> {
    std::thread::Builder::new()
        .stack_size(3 << 30)
        .spawn(|| Box::new(Table::<N, F, C>::new()))
        .expect("thread")
        .join()
        .expect("built")
}

struct TableWorld<const N: usize> {
    table: Box<Table<N, F, C>>,
    next: u64,
}

/// When object `k` of the initial population is deleted (ms): with its
/// grace (`grace_for`, periodic in k with period 3600), distinct deadlines
/// for up to 3.6 million objects.
fn deleted_at(k: u64) -> u64 {
    (k / 3600) % 1000
}

impl<const N: usize> TableWorld<N> {
    fn new() -> Self {
        let mut table = boxed_table::<N>();
        for k in 0..N as u64 {
            assert!(table.insert(terminating(deleted_at(k), k)).is_ok());
        }
        TableWorld {
            table,
            next: N as u64,
        }
    }

    fn step(&mut self) {
        let due = self.table.poll_timeout().expect("a deadline").as_millis();
        let now = now_at(due);
        self.table.handle_timeouts(now);
        while let Some((id, action)) = self.table.poll_action() {
            match action {
                // The process dies at once.
                Action::SendKill { container } => {
                    let _ = self
                        .table
                        .handle(now, id, Input::container_exited(container));
                }
                // The agent's final delete removed the record: a fresh
                // object takes its place.
                Action::Remove { .. } => {
                    self.table.remove(id);
                    self.next += 1;
                    assert!(self.table.insert(terminating(due, self.next)).is_ok());
                }
                _ => {}
            }
        }
    }
}

struct ScanWorld {
    pods: Vec<Lc>,
    next: u64,
    /// The pods due at the earliest deadline, found by one scan.
    due: Vec<usize>,
}

impl ScanWorld {
    fn new(n: usize) -> Self {
        ScanWorld {
            pods: (0..n as u64)
                .map(|k| terminating(deleted_at(k), k))
                .collect(),
            next: n as u64,
            due: Vec::new(),
        }
    }

    fn step(&mut self) {
        let mut earliest = Instant::MAX;
        self.due.clear();
        for (i, pod) in self.pods.iter().enumerate() {
            let Some(deadline) = pod.poll_timeout() else {
                continue;
            };
            if deadline < earliest {
                earliest = deadline;
                self.due.clear();
            }
            if deadline == earliest {
                self.due.push(i);
            }
        }
        let due = earliest.as_millis();
        let now = now_at(due);
        for &i in &self.due {
            let pod = &mut self.pods[i];
            let _ = pod.handle(now, Input::Timeout);
            while let Some(action) = pod.poll_action() {
                match action {
                    Action::SendKill { container } => {
                        let _ = pod
                            .handle(now, Input::container_exited(container))
                            .container();
                    }
                    Action::Remove { .. } => {
                        self.next += 1;
                        *pod = terminating(due, self.next);
                        break;
                    }
                    _ => {}
                }
            }
        }
    }
}

fn bench_at<const N: usize>(c: &mut Criterion) {
    let mut group = c.benchmark_group("expiry");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.warm_up_time(StdDuration::from_millis(500));
    group.measurement_time(StdDuration::from_secs(if N >= 1_000_000 { 20 } else { 3 }));

    let mut world = TableWorld::<N>::new();
    group.bench_function(BenchmarkId::new("table", N), |b| {
        b.iter(|| {
            world.step();
            black_box(world.table.len())
        })
    });
    // Every step replaced what it finished: n objects, all still waiting.
    assert_eq!(world.table.len(), N);
    assert!(world.table.iter().all(|(_, l)| l.poll_timeout().is_some()));
    drop(world);

    let mut world = ScanWorld::new(N);
    group.bench_function(BenchmarkId::new("linear scan", N), |b| {
        b.iter(|| {
            world.step();
            black_box(world.pods.len())
        })
    });
    assert!(world.pods.iter().all(|p| p.poll_timeout().is_some()));
    group.finish();
}

fn sizes(_: &mut Criterion) {
    let lifecycle = std::mem::size_of::<Lc>();
    let record = std::mem::size_of::<Record<F>>();
    let per_object = std::mem::size_of::<Table<1024, F, C>>() / 1024;
    println!("bytes: Lifecycle<{F},{C}> {lifecycle}, of which Record<{F}> {record}");
    println!("bytes: per object in Table<N,{F},{C}> (slot, heap entry, ready entry) {per_object}");
    println!(
        "bytes: per object in the table, without the record {}",
        per_object - record
    );
    let t = StdInstant::now();
    let table = boxed_table::<1_000_000>();
    println!(
        "Table<1_000_000,{F},{C}>: {} MiB, built in {:?}",
        std::mem::size_of_val(&*table) >> 20,
        t.elapsed()
    );
}

criterion_group!(
    benches,
    sizes,
    bench_at::<1_000>,
    bench_at::<100_000>,
    bench_at::<1_000_000>
);
criterion_main!(benches);
