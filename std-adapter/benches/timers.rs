//! 100 000 terminating objects: the runtime's deadline queue vs one tokio
//! task per object sleeping until its deadline, in the same run.
//!
//! Every side starts from the same per-object state (a pod with one
//! container, deleted with its own grace of 1 s to 1 h and synced, so
//! SIGTERM is sent and SIGKILL is due) and, when the deadline fires, does
//! `handle_timeout` and carries out the owed action (one `SendKill`,
//! counted by the same actuator).
//!
//! - grace: a [`Runtime`] on a store that keeps nothing ([`NullStore`]: the
//!   runtime's own memory is measured, not a store's copy). Write-ahead: it
//!   writes every object's kill state before the kill and again after it,
//!   a round of up to `ROUND` objects per store batch.
//! - same work, one task per object: a tokio `current_thread` runtime with
//!   the clock paused; one spawned task per object owns its lifecycle and
//!   spec and sleeps until the deadline, then does what the runtime does
//!   for it — writes the object with its kill state (same encoding, same
//!   kind of store) before the kill, carries the kill out, writes it again
//!   — one store write at a time: no batching across tasks.
//! - bare, one task per object: the same tasks doing only the transition
//!   (`handle_timeout` and the action), persisting nothing.
//!
//! Then grace and the same-work tasks again on the embedded durable store
//! (a [`RedbStore`] in a temp dir, every commit fsynced), the store a user
//! runs: each side starts from the same terminating objects stored in
//! their own database (grace recovers them on open), and the tasks commit
//! each write alone while the runtime commits a round per batch.
//!
//! Memory is live heap bytes (a counting global allocator) after all
//! objects are set up (on the null store only: redb's page cache would be
//! counted on both sides). CPU time is the process's CPU time to drive
//! every object through its deadline, with the clock moved in 60 steps of
//! 60 s; wall time is shown beside it.
//!
//! `cargo bench -p grace-std --bench timers` (`GRACE_BENCH_N` to change n;
//! `GRACE_BENCH_ONLY=grace|same|bare|grace-redb|same-redb` runs one side
//! alone, for profilers; `GRACE_BENCH_REDB=0` skips the redb sides;
//! `GRACE_BENCH_CPU=off` for valgrind, see [`cpu`]).
// A benchmark is not library code: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use std::alloc::System;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration as StdDuration;

use grace_core::Input;
use grace_core::{Action, ContainerSpec, DeleteOptions, Duration, Name, Now, Record, Strategy};
use grace_std::clock::{Clock, ManualClock};
use grace_std::runtime::{ActionError, Actuator, KillRecord, ObjectLifecycle, Recovery, Runtime};
use grace_std::store::RedbStore;
use grace_std::store::{
    BatchError, KillState, Listing, Revision, Store, StoreError, StoredContainer, StoredObject,
    Watch, Write,
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

/// Heap allocations (and reallocations) since `region` was taken.
fn allocations(region: &Region<'_, System>) -> usize {
    let c = region.change();
    c.allocations + c.reallocations
}

/// The process's CPU time (all threads: a store's threads would count);
/// zero with `GRACE_BENCH_CPU=off`, for valgrind (under which rustix's
/// vDSO lookup fails).
fn cpu() -> StdDuration {
    if std::env::var_os("GRACE_BENCH_CPU").is_some_and(|v| v == "off") {
        return StdDuration::ZERO;
    }
    let t = clock_gettime(ClockId::ProcessCPUTime);
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
    fn batch_ref(&self, writes: &[Write]) -> Result<Vec<Revision>, BatchError> {
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
    fn perform(&mut self, _: &str, _: &StoredObject, action: &Action) -> Result<(), ActionError> {
        if matches!(action, Action::SendKill { .. }) {
            self.0 += 1;
        }
        Ok(())
    }
}

fn pod(i: usize) -> StoredObject {
    let uid = Name::try_from(format!("uid-{i}").as_str()).expect("short");
    let mut object = StoredObject::on_node(Record::new(uid), "node-a");
    object.containers = vec![StoredContainer::named("app")];
    object
}

struct Measured {
    bytes_per_object: f64,
    cpu: StdDuration,
    /// Wall-clock time of the same phase (fsync waits count here).
    wall: StdDuration,
    /// Heap allocations per object while driving them (reallocations too).
    allocations: f64,
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
            .handle(
                &name,
                Input::Delete(DeleteOptions::with_grace(grace_for(i))),
            )
            .expect("accepted");
        let _ = rt.handle(&name, Input::AgentSync).expect("synced");
    }
    let bytes = live(&region);
    measure_drive(rt, &region, bytes as f64 / n as f64, n)
}

/// grace on redb: the terminating objects stored in `store` (by [`seed`])
/// are recovered by `Runtime::open`, then driven through their deadlines.
fn grace_on(store: RedbStore, n: usize) -> Measured {
    let region = Region::new(GLOBAL);
    let rt = Runtime::open(
        store,
        ManualClock::at_unix_millis(START_MS),
        CountKills::default(),
        Recovery::default(),
    )
    .expect("opens and recovers");
    measure_drive(rt, &region, f64::NAN, n)
}

/// Drives `rt` through every deadline, timed.
fn measure_drive<S: Store>(
    mut rt: Runtime<S, ManualClock, CountKills>,
    region: &Region<'_, System>,
    bytes_per_object: f64,
    n: usize,
) -> Measured {
    let allocated = allocations(region);
    let (start, started) = (cpu(), std::time::Instant::now());
    drive(&mut rt);
    let (spent, wall) = (cpu() - start, started.elapsed());
    let allocated = allocations(region) - allocated;
    let kills = rt.actuator().0;
    drop(rt);
    Measured {
        bytes_per_object,
        cpu: spent,
        wall,
        allocations: allocated as f64 / n as f64,
        kills,
    }
}

/// Moves the clock through every deadline (a function of its own, for
/// profilers: `valgrind --tool=callgrind --toggle-collect='timers::drive'`).
#[inline(never)]
fn drive<S: Store>(rt: &mut Runtime<S, ManualClock, CountKills>) {
    for _ in 0..STEPS {
        rt.clock().advance(Duration::from_millis(STEP_S * 1000));
        rt.handle_timeouts().expect("handled");
    }
}

// ---- baselines: one tokio task per object -------------------------------------

fn now_at(since_start: StdDuration) -> Now {
    let ms = i64::try_from(since_start.as_millis()).expect("small");
    Now::from_unix_millis(START_MS + ms)
}

/// The same lifecycle the runtime builds for `pod(i)`, deleted and synced.
fn terminating(i: usize) -> ObjectLifecycle {
    let mut record = pod(i).record;
    record.scheduled = true;
    let mut lifecycle: ObjectLifecycle =
        ObjectLifecycle::new(Strategy::POD, record, &[ContainerSpec::default()]).expect("fits");
    let now = now_at(StdDuration::ZERO);
    let _ = lifecycle
        .handle(now, Input::Delete(DeleteOptions::with_grace(grace_for(i))))
        .delete()
        .unwrap();
    let _ = lifecycle.handle(now, Input::AgentSync).handled();
    while lifecycle.poll_action().is_some() {}
    lifecycle
}

/// What a task-per-object runtime shares between its tasks (a
/// single-threaded `LocalSet`, so `Rc` and `RefCell`).
struct Shared<S> {
    store: S,
    actuator: RefCell<CountKills>,
    /// The clock epoch written with every kill state.
    epoch: String,
    /// One encoding buffer for all tasks, as the runtime has one.
    buf: RefCell<Vec<u8>>,
}

/// One task's object: its name, lifecycle, the rest of its stored object,
/// and the revision of its last write.
struct Object {
    name: String,
    lifecycle: ObjectLifecycle,
    node: Option<String>,
    containers: Vec<StoredContainer>,
    revision: Revision,
}

impl Object {
    /// Object `i`, stored at `revision`.
    fn new(i: usize, revision: Revision) -> Object {
        let pod = pod(i);
        Object {
            name: format!("p{i}"),
            lifecycle: terminating(i),
            node: pod.node,
            containers: pod.containers,
            revision,
        }
    }

    /// The stored object for the lifecycle as it is, with `agent`.
    fn stored(&self, agent: KillState) -> StoredObject {
        let mut object = StoredObject::unscheduled(self.lifecycle.record().clone());
        object.record.scheduled = self.lifecycle.record().scheduled;
        object.strategy = Strategy::POD;
        object.node = self.node.clone();
        object.containers = self.containers.clone();
        object.agent = Some(agent);
        object
    }

    /// Write-ahead: writes the lifecycle with its kill state (one store
    /// write); returns the kill state written. `reuse` is the object as
    /// last written, to update rather than build anew.
    fn persist<S: Store>(&mut self, shared: &Shared<S>, reuse: Option<StoredObject>) -> KillState {
        let state =
            KillRecord::encode_with(&mut shared.buf.borrow_mut(), &shared.epoch, &self.lifecycle)
                .expect("encodes");
        let object = match reuse {
            Some(mut object) => {
                object.record.clone_from(self.lifecycle.record());
                object.agent = Some(state.clone());
                object
            }
            None => self.stored(state.clone()),
        };
        let revision = shared
            .store
            .update(&self.name, object, self.revision)
            .expect("written");
        self.lifecycle.set_resource_version(revision.get());
        self.revision = revision;
        state
    }

    /// What the runtime does at the deadline, for this one object: the
    /// transition, the kill state written before the action, the action,
    /// the kill state written again.
    #[inline(never)]
    fn timeout<S: Store>(&mut self, shared: &Shared<S>, now: Now) {
        let before = self.lifecycle.clone();
        let _ = self.lifecycle.handle(now, Input::Timeout);
        if self.lifecycle == before {
            return;
        }
        let written = self.persist(shared, None);
        let mut shown = None;
        let mut acted = false;
        while let Some(action) = self.lifecycle.poll_action() {
            acted = true;
            let shown = shown.get_or_insert_with(|| self.stored(written.clone()));
            let _ = shared
                .actuator
                .borrow_mut()
                .perform(&self.name, shown, &action);
        }
        if acted {
            self.persist(shared, shown);
        }
    }
}

/// Spawns one task per object; `job` runs at its deadline. Returns the
/// live heap per object once every task is waiting, the CPU time to drive
/// all through their deadlines and the allocations per object meanwhile.
fn tasks<T: 'static>(
    n: usize,
    state: impl Fn(usize) -> T,
    job: impl Fn(&mut T, Now) + Clone + 'static,
) -> (f64, StdDuration, StdDuration, f64) {
    let region = Region::new(GLOBAL);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    let done = Rc::new(Cell::new(0usize));
    let local = tokio::task::LocalSet::new();
    let (bytes, spent, wall, allocated) = local.block_on(&rt, async {
        let origin = tokio::time::Instant::now();
        for i in 0..n {
            let mut state = state(i);
            let job = job.clone();
            let done = Rc::clone(&done);
            let grace = StdDuration::from_secs(u64::try_from(grace_for(i)).expect("positive"));
            tokio::task::spawn_local(async move {
                tokio::time::sleep_until(origin + grace).await;
                job(&mut state, now_at(origin.elapsed()));
                done.set(done.get() + 1);
            });
        }
        // Every task polled once: its timer is registered.
        tokio::task::yield_now().await;
        let bytes = live(&region);
        let allocated = allocations(&region);
        let (start, started) = (cpu(), std::time::Instant::now());
        for _ in 0..STEPS {
            tokio::time::advance(StdDuration::from_secs(STEP_S)).await;
        }
        while done.get() < n {
            tokio::task::yield_now().await;
        }
        let (spent, wall) = (cpu() - start, started.elapsed());
        (bytes, spent, wall, allocations(&region) - allocated)
    });
    drop(local);
    drop(rt);
    (
        bytes as f64 / n as f64,
        spent,
        wall,
        allocated as f64 / n as f64,
    )
}

/// Each task only does the transition and counts the kill.
fn bare_tasks(n: usize) -> Measured {
    let kills = Rc::new(Cell::new(0usize));
    let counted = Rc::clone(&kills);
    let (bytes_per_object, cpu, wall, allocations) =
        tasks(n, terminating, move |lifecycle, now| {
            let _ = lifecycle.handle(now, Input::Timeout);
            while let Some(action) = lifecycle.poll_action() {
                if matches!(action, Action::SendKill { .. }) {
                    counted.set(counted.get() + 1);
                }
            }
        });
    Measured {
        bytes_per_object,
        cpu,
        wall,
        allocations,
        kills: kills.get(),
    }
}

/// Each task does the runtime's work for its object, one write at a time,
/// on `store`, where object `i` is stored at `revisions(i)`.
fn same_work_tasks<S: Store + 'static>(
    n: usize,
    store: S,
    revisions: impl Fn(usize) -> Revision,
) -> Measured {
    let shared = Rc::new(Shared {
        store,
        actuator: RefCell::new(CountKills::default()),
        epoch: ManualClock::at_unix_millis(START_MS).epoch(),
        buf: RefCell::new(Vec::new()),
    });
    let job = {
        let shared = Rc::clone(&shared);
        move |object: &mut Object, now: Now| object.timeout(&*shared, now)
    };
    let (bytes_per_object, cpu, wall, allocations) =
        tasks(n, |i| Object::new(i, revisions(i)), job);
    let kills = shared.actuator.borrow().0;
    Measured {
        bytes_per_object,
        cpu,
        wall,
        allocations,
        kills,
    }
}

// ---- on the embedded durable store ----------------------------------------------

/// A fresh redb database in `dir` holding the `n` objects terminating, as
/// the runtime would have written them (created in batches of a thousand,
/// not timed); returns it and each object's revision.
fn seed(dir: &std::path::Path, n: usize) -> (RedbStore, Vec<Revision>) {
    let store = RedbStore::open(dir.join("timers.redb")).expect("redb opens");
    let epoch = ManualClock::at_unix_millis(START_MS).epoch();
    let mut buf = Vec::new();
    let mut revisions = Vec::with_capacity(n);
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let writes = chunk
            .iter()
            .map(|&i| {
                let object = Object::new(i, Revision(0));
                let state =
                    KillRecord::encode_with(&mut buf, &epoch, &object.lifecycle).expect("encodes");
                Write::Create {
                    name: object.name.clone(),
                    object: object.stored(state),
                }
            })
            .collect();
        revisions.extend(store.batch(writes).expect("seeded"));
    }
    (store, revisions)
}

/// CPU time of encoding `count` kill states as the runtime does.
fn encoding(count: usize) -> StdDuration {
    let lifecycle = terminating(1);
    let epoch = ManualClock::at_unix_millis(START_MS).epoch();
    let mut buf = Vec::new();
    let start = cpu();
    for _ in 0..count {
        std::hint::black_box(
            KillRecord::encode_with(&mut buf, &epoch, std::hint::black_box(&lifecycle))
                .expect("encodes"),
        );
    }
    cpu() - start
}

fn main() {
    let n: usize = std::env::var("GRACE_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let with_redb = std::env::var("GRACE_BENCH_REDB").as_deref() != Ok("0");
    let lifecycle = std::mem::size_of::<ObjectLifecycle>();
    println!("timers: n = {n}, ObjectLifecycle = {lifecycle} bytes");

    let ms = |d: StdDuration| d.as_secs_f64() * 1e3;
    let show = |what: &str, m: &Measured| {
        assert_eq!(m.kills, n, "{what} every object killed once");
        let heap = if m.bytes_per_object.is_nan() {
            "     - B/object live heap".to_owned()
        } else {
            format!("{:>6.0} B/object live heap", m.bytes_per_object)
        };
        println!(
            "{what:<34} {heap}, {:>8.1} ms CPU, {:>8.1} ms wall, {:>5.1} allocations/object",
            ms(m.cpu),
            ms(m.wall),
            m.allocations,
        );
    };
    let dir = tempfile::tempdir_in(std::env::temp_dir()).expect("temp dir");
    let redb_grace = || {
        let (store, _) = seed(&dir.path().join("grace"), n);
        grace_on(store, n)
    };
    let redb_same = || {
        let (store, revisions) = seed(&dir.path().join("same"), n);
        Measured {
            // Not compared: see the module docs.
            bytes_per_object: f64::NAN,
            ..same_work_tasks(n, store, |i| revisions[i])
        }
    };
    for side in ["grace", "same"] {
        std::fs::create_dir_all(dir.path().join(side)).expect("dir");
    }
    // One side alone, for profilers.
    match std::env::var("GRACE_BENCH_ONLY").as_deref() {
        Ok("grace") => return show("grace (Runtime, deadline queue):", &grace(n)),
        Ok("same") => {
            let same = same_work_tasks(n, NullStore::default(), |_| Revision(1));
            return show("tasks doing the same work:", &same);
        }
        Ok("bare") => return show("bare tasks (transition only):", &bare_tasks(n)),
        Ok("grace-redb") => return show("grace on redb:", &redb_grace()),
        Ok("same-redb") => return show("same-work tasks on redb:", &redb_same()),
        _ => {}
    }
    let bare = bare_tasks(n);
    let same = same_work_tasks(n, NullStore::default(), |_| Revision(1));
    let ours = grace(n);
    let encode = encoding(2 * n);

    println!("on a store that keeps nothing:");
    show("grace (Runtime, deadline queue):", &ours);
    show("tasks doing the same work:", &same);
    show("bare tasks (transition only):", &bare);
    println!(
        "  encoding 2 kill states per object, timed alone: {:.1} ms CPU",
        ms(encode)
    );
    for (what, base) in [("same-work", &same), ("bare", &bare)] {
        println!(
            "ratios grace/{what} baseline: memory {:.2}x, CPU {:.2}x",
            ours.bytes_per_object / base.bytes_per_object,
            ms(ours.cpu) / ms(base.cpu),
        );
    }
    if !with_redb {
        return;
    }
    let redb_same = redb_same();
    let redb_ours = redb_grace();
    println!("on redb (fsync per commit; memory not measured):");
    show("grace on redb:", &redb_ours);
    show("same-work tasks on redb:", &redb_same);
    println!(
        "ratios grace/same-work on redb: CPU {:.2}x, wall {:.2}x",
        ms(redb_ours.cpu) / ms(redb_same.cpu),
        ms(redb_ours.wall) / ms(redb_same.wall),
    );
}
