//! 100 000 terminating objects: the runtime's deadline queue vs one tokio
//! task per object sleeping until its deadline, in the same run.
//!
//! Both sides hold the same per-object state, a grace-std
//! [`ObjectLifecycle`] (a pod with one container, deleted with its own
//! grace of 1 s to 1 h and synced, so SIGTERM is sent and SIGKILL is due),
//! and both do the same transition when the deadline fires:
//! `handle_timeout` and draining the owed actions (one `SendKill`).
//!
//! - grace: a [`Runtime`] on a store that keeps nothing ([`NullStore`]: the
//!   runtime's own memory is measured, not a store's copy) with an
//!   actuator that counts kills. Its deadline path still builds and
//!   JSON-encodes the write-ahead records it hands the store.
//! - baseline: a tokio `current_thread` runtime with the clock paused; one
//!   spawned task per object owns its lifecycle and sleeps until the
//!   deadline.
//!
//! Memory is live heap bytes (a counting global allocator) after all
//! 100 000 are set up. CPU time is this thread's CPU time to drive every
//! object through its deadline, with the clock moved in 60 steps of 60 s.
//!
//! `cargo bench -p grace-std --bench timers` (`GRACE_BENCH_N` to change n).

use std::alloc::System;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration as StdDuration;

use grace_core::{Action, ContainerSpec, DeleteOptions, Duration, Name, Now, Record, Strategy};
use grace_std::clock::ManualClock;
use grace_std::runtime::{Actuator, ObjectLifecycle, Recovery, Runtime};
use grace_std::store::{
    BatchError, Listing, Revision, Store, StoreError, StoredContainer, StoredObject, Watch, Write,
};
use rustix::time::{ClockId, clock_gettime};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Unix time of the start, in milliseconds.
const START_MS: i64 = 1_700_000_000_000;
/// The clock moves in this many steps ...
const STEPS: u64 = 60;
/// ... of this many seconds (the longest grace is 3600 s).
const STEP_S: u64 = 60;

/// Grace periods spread over an hour, as in grace-core's expiry bench.
fn grace_for(k: usize) -> i64 {
    i64::try_from(1 + (k as u64).wrapping_mul(7919) % 3600).expect("small")
}

/// Live heap bytes since `region` was taken.
fn live(region: &Region<'_, System>) -> i64 {
    let c = region.change();
    let allocated = i64::try_from(c.bytes_allocated).expect("fits");
    let freed = i64::try_from(c.bytes_deallocated).expect("fits");
    allocated - freed + i64::try_from(c.bytes_reallocated).expect("fits")
}

/// This thread's CPU time.
fn cpu() -> StdDuration {
    let t = clock_gettime(ClockId::ThreadCPUTime);
    StdDuration::new(
        u64::try_from(t.tv_sec).expect("positive"),
        u32::try_from(t.tv_nsec).expect("small"),
    )
}

// ---- grace ------------------------------------------------------------------

/// A store that keeps nothing: every write succeeds with the next revision.
#[derive(Default)]
struct NullStore {
    revision: std::sync::atomic::AtomicU64,
}

impl Store for NullStore {
    fn get(&self, _: &str) -> Result<Option<(StoredObject, Revision)>, StoreError> {
        Ok(None)
    }
    fn list(&self) -> Result<Listing, StoreError> {
        Ok(Listing::default())
    }
    fn revision(&self) -> Result<Revision, StoreError> {
        Ok(Revision(
            self.revision.load(std::sync::atomic::Ordering::Relaxed),
        ))
    }
    fn batch(&self, writes: Vec<Write>) -> Result<Vec<Revision>, BatchError> {
        let n = writes.len() as u64;
        let last = self
            .revision
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        Ok((1..=n).map(|i| Revision(last + i)).collect())
    }
    fn watch(&self, _: Revision) -> Result<Watch, StoreError> {
        Err(StoreError::Unavailable(
            "the null store has no watch".into(),
        ))
    }
}

/// Counts SIGKILLs; does nothing else.
#[derive(Default)]
struct CountKills(usize);

impl Actuator for CountKills {
    fn perform(&mut self, _: &str, _: &StoredObject, action: &Action) -> Result<(), String> {
        if matches!(action, Action::SendKill { .. }) {
            self.0 += 1;
        }
        Ok(())
    }
}

fn pod(i: usize) -> StoredObject {
    let uid = Name::try_from(format!("uid-{i}").as_str()).expect("short");
    let mut object = StoredObject::new(Record::new(uid));
    object.node = Some("node-a".into());
    object.containers = vec![StoredContainer {
        name: "app".into(),
        ..StoredContainer::default()
    }];
    object
}

struct Measured {
    bytes_per_object: f64,
    cpu: StdDuration,
    kills: usize,
}

fn grace(n: usize) -> Measured {
    let region = Region::new(GLOBAL);
    let clock = ManualClock::at_unix_millis(START_MS);
    let mut rt = Runtime::open(
        NullStore::default(),
        clock,
        CountKills::default(),
        Recovery::default(),
    )
    .expect("opens");
    for i in 0..n {
        let name = format!("p{i}");
        rt.create(&name, pod(i)).expect("created");
        let _ = rt
            .delete(&name, &DeleteOptions::with_grace(grace_for(i)))
            .expect("accepted");
        let _ = rt.agent_sync(&name).expect("synced");
    }
    let bytes = live(&region);
    let start = cpu();
    for _ in 0..STEPS {
        rt.clock().advance(Duration::from_millis(STEP_S * 1000));
        rt.handle_timeouts().expect("handled");
    }
    let spent = cpu() - start;
    let kills = rt.actuator().0;
    drop(rt);
    Measured {
        bytes_per_object: bytes as f64 / n as f64,
        cpu: spent,
        kills,
    }
}

// ---- baseline: one tokio task per object ---------------------------------------

fn now_at(since_start: StdDuration) -> Now {
    let ms = i64::try_from(since_start.as_millis()).expect("small");
    Now::from_unix_millis(START_MS + ms)
}

/// The same lifecycle the runtime builds for `pod(i)`, deleted and synced.
fn terminating(i: usize) -> ObjectLifecycle {
    let mut record = pod(i).meta;
    record.scheduled = true;
    let mut lifecycle: ObjectLifecycle =
        ObjectLifecycle::new(Strategy::POD, record, &[ContainerSpec::default()]).expect("fits");
    let now = now_at(StdDuration::ZERO);
    let _ = lifecycle.handle_delete(now, &DeleteOptions::with_grace(grace_for(i)));
    let _ = lifecycle.handle_agent_sync(now);
    while lifecycle.poll_action().is_some() {}
    lifecycle
}

fn tasks(n: usize) -> Measured {
    let region = Region::new(GLOBAL);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    let kills = Rc::new(Cell::new(0usize));
    let done = Rc::new(Cell::new(0usize));
    let local = tokio::task::LocalSet::new();
    let (bytes, spent) = local.block_on(&rt, async {
        let origin = tokio::time::Instant::now();
        for i in 0..n {
            let mut lifecycle = terminating(i);
            let kills = Rc::clone(&kills);
            let done = Rc::clone(&done);
            let grace = StdDuration::from_secs(u64::try_from(grace_for(i)).expect("positive"));
            tokio::task::spawn_local(async move {
                tokio::time::sleep_until(origin + grace).await;
                lifecycle.handle_timeout(now_at(origin.elapsed()));
                while let Some(action) = lifecycle.poll_action() {
                    if matches!(action, Action::SendKill { .. }) {
                        kills.set(kills.get() + 1);
                    }
                }
                done.set(done.get() + 1);
            });
        }
        // Every task polled once: its timer is registered.
        tokio::task::yield_now().await;
        let bytes = live(&region);
        let start = cpu();
        for _ in 0..STEPS {
            tokio::time::advance(StdDuration::from_secs(STEP_S)).await;
        }
        while done.get() < n {
            tokio::task::yield_now().await;
        }
        (bytes, cpu() - start)
    });
    Measured {
        bytes_per_object: bytes as f64 / n as f64,
        cpu: spent,
        kills: kills.get(),
    }
}

/// CPU time of encoding `count` agent records as the runtime does (the
/// lifecycle as a JSON tree), for the share of grace's time it is.
fn encoding(count: usize) -> StdDuration {
    let lifecycle = terminating(1);
    let start = cpu();
    for _ in 0..count {
        std::hint::black_box(serde_json::to_value(&lifecycle).expect("encodes"));
    }
    cpu() - start
}

fn main() {
    let n: usize = std::env::var("GRACE_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let lifecycle = std::mem::size_of::<ObjectLifecycle>();
    println!("timers: n = {n}, ObjectLifecycle = {lifecycle} bytes");

    let base = tasks(n);
    let ours = grace(n);
    assert_eq!(base.kills, n, "baseline: every object killed once");
    assert_eq!(ours.kills, n, "grace: every object killed once");
    let json = encoding(2 * n);

    let l = lifecycle as f64;
    let ms = |d: StdDuration| d.as_secs_f64() * 1e3;
    println!(
        "baseline (tokio task per object): {:.0} B/object live heap ({:.0} besides the lifecycle), {:.1} ms CPU",
        base.bytes_per_object,
        base.bytes_per_object - l,
        ms(base.cpu)
    );
    println!(
        "grace (Runtime, deadline queue):  {:.0} B/object live heap ({:.0} besides the lifecycle), {:.1} ms CPU",
        ours.bytes_per_object,
        ours.bytes_per_object - l,
        ms(ours.cpu)
    );
    println!(
        "  of which encoding 2 agent records per object (serde_json::to_value): {:.1} ms CPU",
        ms(json)
    );
    println!(
        "ratios grace/baseline: memory {:.2}x (besides the lifecycle {:.2}x), CPU {:.2}x (without the encoding {:.2}x)",
        ours.bytes_per_object / base.bytes_per_object,
        (ours.bytes_per_object - l) / (base.bytes_per_object - l),
        ms(ours.cpu) / ms(base.cpu),
        (ms(ours.cpu) - ms(json)) / ms(base.cpu),
    );
}
