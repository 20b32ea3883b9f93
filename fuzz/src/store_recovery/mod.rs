//! The `store_recovery` target: `grace_std::Runtime` on the in-memory
//! store, with faults injected between any write and its action.
//!
//! An input is an operation script: API requests (create, delete, finalizer
//! updates), agent inputs (sync, eviction, a pre-stop hook returning, a
//! process exiting), time moving (then `handle_timeouts`), and faults: one
//! write failing before it is applied or after (its acknowledgement lost),
//! the process dying after a number of effects (writes applied, actions
//! carried out) — between any write and its action —, a restart of the
//! runtime on the same store, and a reboot (a new clock epoch: every
//! workload is gone). See [`world`] for the fault model and [`check`] for
//! the invariants, which are checked on what took effect after every step:
//!
//! - **invariant 7**: an accepted deletion (a delete answered `Ok`) is never
//!   lost: the store holds the object with a deletion timestamp or not at
//!   all; every action is carried out only after the decision it follows
//!   from is persisted (write-ahead); a record is removed only after its
//!   removal was persisted, with its uid as precondition (R75);
//! - **invariant 2 / R16**: a stored deletion timestamp is never unset and
//!   never moves later than max(previous, now); the stored grace never
//!   grows; the persisted phase never goes back;
//! - **invariant 3, R62, D5, D6**: no SIGKILL before the budget is spent
//!   (the kill's start plus the budget, or a shorter budget counted from
//!   when it was persisted), nor sooner than 2 s after the stop signal as
//!   persisted, and never without a stop signal carried out first; with
//!   `HonourOriginalDeadline` a persisted deadline never moves later and a
//!   container's stage never goes back on one boot, across restarts;
//! - the runtime never panics, and reports a store error only when a fault
//!   fired during that call (a fault must not leave it failing later);
//! - **liveness**, at the end: with faults disarmed, a live agent, every
//!   finalizer removed and time driven from deadline to deadline (at most
//!   [`LIVENESS_ROUNDS`] rounds, no restart), every object stored with a
//!   deletion timestamp is removed, every accepted deletion completed,
//!   every eviction stopped its workload, and the runtime tracks every
//!   object the store holds.

pub mod check;
pub mod world;

use std::sync::Arc;

use arbitrary::Arbitrary;
use grace_core::{
    ContainerSpec, DeleteOutcome, FinalizerChange, Input as CoreInput, Instant, Kind, Name, Now,
    Record, Stage, Strategy, WallTime,
};
use grace_std::clock::{Clock, ManualClock};
use grace_std::runtime::{Answer, Recovery, Runtime, RuntimeError};
use grace_std::store::{MemoryStore, StoredContainer, StoredObject};

pub use self::check::{Checker, persisted};
pub use self::world::{
    BootClock, Event, FaultyStore, Recorder, Shared, World, WriteFault, Written, lock,
};
use crate::input::{DeleteSpec, FinalizerSel, Grace, MonoMs, WallMs, name};

/// Object names: few, so that scripts hit the same objects often.
pub const NAMES: u8 = 3;
/// Steps taken from one input at most.
pub const MAX_OPS: usize = 96;
/// Containers per object at most.
pub const MAX_CONTAINERS: usize = 3;
/// Rounds of the final drive at most.
pub const LIVENESS_ROUNDS: usize = 64;
/// Attempts to open the runtime after a crash before the next step.
const OPEN_ATTEMPTS: usize = 8;
/// The finalizers objects are created with (bit `i` of
/// [`NewObject::finalizers`]) and added later.
const FINALIZERS: [&str; 3] = ["example.com/a", "example.com/b", "example.com/c"];

/// The runtime under test.
pub type Rt = Runtime<FaultyStore, BootClock, Recorder>;

/// A fuzz input.
#[derive(Arbitrary, Debug)]
pub struct Input {
    pub wall: WallMs,
    pub mono: MonoMs,
    /// `Recovery::ResetFullGrace` instead of the default.
    pub reset_full_grace: bool,
    pub ops: Vec<Op>,
}

/// An object to create.
#[derive(Arbitrary, Clone, Debug)]
pub struct NewObject {
    /// 0: a generic type (no agent); 1: an unscheduled pod; else a pod on
    /// a node.
    pub kind: u8,
    /// `terminationGracePeriodSeconds`.
    pub tgps: Option<Grace>,
    /// Bit `i`: created with finalizer `i`.
    pub finalizers: u8,
    /// How many of `specs` (modulo [`MAX_CONTAINERS`] + 1).
    pub containers: u8,
    /// Fixed-size, so that seeds are easy to write by hand (a `Vec` takes
    /// its length from the end of the input). `stopped` is ignored: a
    /// stored object's containers are running until the agent says not.
    pub specs: [ContainerSpec; MAX_CONTAINERS],
}

/// One step. `name` picks an object name modulo [`NAMES`]; `container`
/// an index modulo the object's containers plus one (one unknown index).
#[derive(Arbitrary, Clone, Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "fuzz inputs: a name or options inline, of any Kubernetes length"
)]
pub enum Op {
    Create {
        name: u8,
        object: NewObject,
    },
    Delete {
        name: u8,
        spec: DeleteSpec,
    },
    AddFinalizer {
        name: u8,
        finalizer: u8,
    },
    RemoveFinalizer {
        name: u8,
        finalizer: FinalizerSel,
    },
    /// Every finalizer removed, one update each.
    RemoveFinalizers {
        name: u8,
    },
    AgentSync {
        name: u8,
    },
    Evict {
        name: u8,
        grace: Grace,
    },
    PreStopFinished {
        name: u8,
        container: u8,
    },
    ContainerExited {
        name: u8,
        container: u8,
    },
    /// Both clocks move on, then `handle_timeouts`.
    Advance {
        ms: u16,
    },
    AdvanceSeconds {
        s: u8,
    },
    /// To the runtime's next deadline plus an offset (never back), then
    /// `handle_timeouts`.
    ToDeadline {
        offset_ms: i16,
    },
    /// `handle_timeouts` without moving.
    Timeouts,
    /// The wall clock alone jumps (either way).
    WallJump {
        ms: i32,
    },
    /// The `skip % 4 + 1`-th write from now fails: refused, or applied
    /// with its acknowledgement lost.
    FailWrite {
        skip: u8,
        applied: bool,
    },
    /// The process dies after `effects % 6` more effects (writes applied,
    /// actions carried out); the harness restarts it after the step.
    CrashAfter {
        effects: u8,
    },
    /// The runtime is dropped and opened again on the same store and clock.
    Crash,
    /// A crash and another boot: a new clock epoch, the monotonic clock
    /// starting again at `mono`, the wall clock going on.
    Reboot {
        mono: MonoMs,
    },
}

fn object_name(i: u8) -> String {
    format!("obj-{}", i % NAMES)
}

impl Op {
    /// The object this step feeds, the core's input it is, and what to
    /// call it in a violation: the one place where the script's steps
    /// become inputs (`None` for the steps that are not one object's
    /// input). What the step picks is resolved against `rt` (a finalizer
    /// the object has, a container index); a delete's preconditions
    /// against its record at `now`.
    fn input(&self, rt: &Rt, now: Now) -> Option<(String, CoreInput, &'static str)> {
        let container = |n: &str, pick: u8| container_index(rt, n, pick);
        Some(match self {
            Op::Delete { name: n, spec } => {
                let n = object_name(*n);
                let record = rt
                    .lifecycle(&n)
                    .map(|l| l.record().clone())
                    .unwrap_or_else(|| Record::new(Name::new()));
                let options = spec.options(&record, now.wall.as_unix_millis());
                (n, CoreInput::Delete(options), "delete")
            }
            Op::AddFinalizer { name: n, finalizer } => {
                let f = FINALIZERS[usize::from(*finalizer) % FINALIZERS.len()];
                let change = FinalizerChange::Add(name(f));
                (
                    object_name(*n),
                    CoreInput::FinalizerUpdate(change),
                    "add finalizer",
                )
            }
            Op::RemoveFinalizer { name: n, finalizer } => {
                let n = object_name(*n);
                let f = rt
                    .lifecycle(&n)
                    .map(|l| finalizer.resolve(l.record()))
                    .unwrap_or_default();
                let change = CoreInput::FinalizerUpdate(FinalizerChange::Remove(f));
                (n, change, "remove finalizer")
            }
            Op::AgentSync { name: n } => (object_name(*n), CoreInput::AgentSync, "agent sync"),
            Op::Evict { name: n, grace } => (object_name(*n), CoreInput::evict(grace.0), "evict"),
            Op::PreStopFinished {
                name: n,
                container: c,
            } => {
                let n = object_name(*n);
                let c = container(&n, *c);
                (n, CoreInput::pre_stop_finished(c), "pre-stop finished")
            }
            Op::ContainerExited {
                name: n,
                container: c,
            } => {
                let n = object_name(*n);
                let c = container(&n, *c);
                (n, CoreInput::container_exited(c), "container exited")
            }
            Op::Create { .. }
            | Op::RemoveFinalizers { .. }
            | Op::Advance { .. }
            | Op::AdvanceSeconds { .. }
            | Op::ToDeadline { .. }
            | Op::Timeouts
            | Op::WallJump { .. }
            | Op::FailWrite { .. }
            | Op::CrashAfter { .. }
            | Op::Crash
            | Op::Reboot { .. } => return None,
        })
    }
}

impl NewObject {
    fn build(&self, uid: &str) -> StoredObject {
        let mut meta = Record::new(name(uid));
        meta.termination_grace_period_seconds = self.tgps.map(|g| g.0);
        for (i, f) in FINALIZERS.iter().enumerate() {
            if self.finalizers & (1 << i) != 0 {
                let _ = meta.finalizers.push(name(f));
            }
        }
        let mut object = StoredObject::unscheduled(meta);
        match self.kind % 8 {
            0 => object.strategy = Strategy::GENERIC,
            1 => object.node = None,
            _ => object.node = Some("node-a".into()),
        }
        if object.strategy.kind == Kind::Generic {
            object.node = None;
        }
        let count = usize::from(self.containers) % (MAX_CONTAINERS + 1);
        object.containers = self.specs[..count]
            .iter()
            .enumerate()
            .map(|(i, c)| {
                StoredContainer::named(format!("c{i}"))
                    .with_pre_stop_hook(c.pre_stop.then(|| "true".into()))
                    .with_sidecar(c.sidecar)
            })
            .collect();
        object
    }
}

/// One input's world, runtime and checker.
pub struct Harness {
    inner: Arc<MemoryStore>,
    world: Shared,
    clock: Arc<ManualClock>,
    boots: u32,
    recovery: Recovery,
    rt: Option<Rt>,
    uids: u32,
    checker: Checker,
    /// The world's log as last drained, kept for its capacity.
    drained: Vec<Event>,
}

/// The outcome of one runtime call: `Err` is a violation.
type Checked = Result<(), String>;

impl Harness {
    pub fn new(wall: i64, mono: u64, recovery: Recovery) -> Self {
        let clock = Arc::new(ManualClock::new(
            Now::new(WallTime::from_unix_millis(wall), Instant::from_millis(mono)),
            "boot-0",
        ));
        let world = Shared::default();
        Harness {
            // Nothing watches it: one change is all its watch log keeps
            // (the default retention would copy every write again, and
            // keep kilobytes per write for nothing).
            inner: Arc::new(MemoryStore::with_log_retention(1)),
            checker: Checker::new(recovery, clock.epoch()),
            world,
            clock,
            boots: 0,
            recovery,
            rt: None,
            uids: 0,
            drained: Vec::new(),
        }
    }

    fn now(&self) -> Now {
        self.clock.now()
    }

    /// Feeds what took effect to the checker, then checks the store
    /// against the log.
    fn settle(&mut self) -> Checked {
        let mut events = std::mem::take(&mut self.drained);
        std::mem::swap(&mut events, &mut lock(&self.world).events);
        let now = self.now();
        let checked = self.checker.events(&events, now);
        events.clear();
        self.drained = events;
        checked?;
        self.checker.store(&*self.inner)
    }

    /// Opens the runtime on the store, as a supervisor restarts a crashed
    /// process: again while faults make it fail, at most a few times.
    pub fn open(&mut self) -> Checked {
        self.rt = None;
        for _ in 0..OPEN_ATTEMPTS {
            lock(&self.world).fired = 0;
            let opened = Runtime::open(
                FaultyStore {
                    inner: Arc::clone(&self.inner),
                    world: Arc::clone(&self.world),
                },
                BootClock(Arc::clone(&self.clock)),
                Recorder {
                    world: Arc::clone(&self.world),
                },
                self.recovery,
            );
            self.settle()?;
            match opened {
                Ok(rt) => {
                    self.rt = Some(rt);
                    return Ok(());
                }
                Err(e) => {
                    let mut world = lock(&self.world);
                    if world.fired == 0 {
                        return Err(format!("open failed without a fault: {e}"));
                    }
                    world.restart();
                }
            }
        }
        Ok(())
    }

    /// A crash: the runtime is gone; a new one opens on the same store.
    fn crash(&mut self) -> Checked {
        self.rt = None;
        lock(&self.world).restart();
        self.open()
    }

    /// `handle_timeouts`; when it succeeds nothing due is left.
    fn timeouts(&mut self) -> Checked {
        let now = self.now();
        let Some(rt) = self.rt.as_mut() else {
            return Ok(());
        };
        let result = rt.handle_timeouts();
        let left = rt.poll_timeout();
        answer(&self.world, "handle_timeouts", &result)?;
        if result.is_ok()
            && let Some(t) = left
            && t <= now.mono
            && now.mono != Instant::MAX
        {
            return Err(format!(
                "handle_timeouts at {} ms left a deadline at {} ms",
                now.mono.as_millis(),
                t.as_millis()
            ));
        }
        Ok(())
    }

    /// Runs one step.
    pub fn step(&mut self, op: &Op) -> Checked {
        if self.rt.is_none() {
            self.open()?;
        }
        lock(&self.world).fired = 0;
        self.apply(op)?;
        self.settle()?;
        if lock(&self.world).dead {
            self.crash()?;
        }
        Ok(())
    }

    fn apply(&mut self, op: &Op) -> Checked {
        let now = self.now();
        match op {
            Op::Advance { ms } => {
                self.clock
                    .advance(grace_core::Duration::from_millis(u64::from(*ms)));
                return self.timeouts();
            }
            Op::AdvanceSeconds { s } => {
                self.clock
                    .advance(grace_core::Duration::from_millis(u64::from(*s) * 1000));
                return self.timeouts();
            }
            Op::ToDeadline { offset_ms } => {
                if let Some(t) = self.rt.as_ref().and_then(Rt::poll_timeout) {
                    let target = i128::from(t.as_millis()) + i128::from(*offset_ms);
                    let target = u64::try_from(target.max(0)).unwrap_or(u64::MAX);
                    self.clock.advance_to(Instant::from_millis(target));
                }
                return self.timeouts();
            }
            Op::Timeouts => return self.timeouts(),
            Op::WallJump { ms } => {
                let wall = now.wall.as_unix_millis().saturating_add(i64::from(*ms));
                self.clock.set_wall(WallTime::from_unix_millis(wall));
                return Ok(());
            }
            Op::FailWrite { skip, applied } => {
                lock(&self.world).fault = Some(WriteFault {
                    skip: u32::from(*skip % 4),
                    applied: *applied,
                });
                return Ok(());
            }
            Op::CrashAfter { effects } => {
                lock(&self.world).dies_after = Some(u32::from(*effects % 6));
                return Ok(());
            }
            Op::Crash => return self.crash(),
            Op::Reboot { mono } => {
                self.rt = None;
                self.boots += 1;
                let start = Now::new(now.wall, Instant::from_millis(mono.0));
                self.clock = Arc::new(ManualClock::new(start, format!("boot-{}", self.boots)));
                self.checker.reboot(self.clock.epoch());
                lock(&self.world).restart();
                return self.open();
            }
            Op::Create { .. }
            | Op::Delete { .. }
            | Op::AddFinalizer { .. }
            | Op::RemoveFinalizer { .. }
            | Op::RemoveFinalizers { .. }
            | Op::AgentSync { .. }
            | Op::Evict { .. }
            | Op::PreStopFinished { .. }
            | Op::ContainerExited { .. } => {}
        }
        let Some(rt) = self.rt.as_mut() else {
            return Ok(());
        };
        match op {
            Op::Create { name: n, object } => {
                let uid = format!("uid-{}", self.uids);
                self.uids += 1;
                let result = rt.create(&object_name(*n), object.build(&uid));
                return answer(&self.world, "create", &result);
            }
            Op::RemoveFinalizers { name: n } => {
                let n = object_name(*n);
                return self.remove_finalizers(&n);
            }
            _ => {}
        }
        let Some((n, input, what)) = op.input(rt, now) else {
            return Ok(());
        };
        let result = rt.handle(&n, input);
        answer(&self.world, what, &result)?;
        if let Ok(Answer::Delete(answer)) = result
            && !answer.response.dry_run
        {
            // Kept means marked (removed at once: nothing to mark).
            if answer.response.outcome != DeleteOutcome::Deleted
                && answer.record.deletion_timestamp.is_none()
            {
                return Err(format!("delete of {n} kept without a timestamp"));
            }
            // Everything done so far is in the log; take it in before the
            // acceptance.
            self.settle()?;
            self.checker.accepted(answer.record.uid.as_str())?;
        }
        Ok(())
    }

    fn remove_finalizers(&mut self, n: &str) -> Checked {
        let Some(rt) = self.rt.as_mut() else {
            return Ok(());
        };
        let finalizers: Vec<Name> = rt
            .lifecycle(n)
            .filter(|l| l.is_stored())
            .map(|l| l.record().finalizers.iter().cloned().collect())
            .unwrap_or_default();
        for f in finalizers {
            let result = rt.handle(n, CoreInput::FinalizerUpdate(FinalizerChange::Remove(f)));
            answer(&self.world, "remove finalizers", &result)?;
        }
        Ok(())
    }

    /// The end: faults disarmed, a live agent, finalizers removed, time
    /// driven from deadline to deadline; then the liveness checks.
    pub fn finish(&mut self) -> Checked {
        lock(&self.world).calm();
        if self.rt.is_none() {
            self.open()?;
        }
        if self.rt.is_none() {
            return Err("the runtime does not open without faults".into());
        }
        for _ in 0..LIVENESS_ROUNDS {
            let names: Vec<String> = match self.rt.as_ref() {
                Some(rt) => rt.names().map(str::to_owned).collect(),
                None => Vec::new(),
            };
            for n in &names {
                self.remove_finalizers(n)?;
                let Some(rt) = self.rt.as_mut() else { break };
                let result = rt.handle(n, CoreInput::AgentSync);
                answer(&self.world, "final agent sync", &result)?;
                let killed: Vec<usize> = rt
                    .lifecycle(n)
                    .map(|l| {
                        l.containers()
                            .iter()
                            .enumerate()
                            .filter(|(_, c)| c.stage() == Stage::Killed)
                            .map(|(i, _)| i)
                            .collect()
                    })
                    .unwrap_or_default();
                for i in killed {
                    let result = rt.handle(n, CoreInput::container_exited(i));
                    answer(&self.world, "final exit", &result)?;
                }
            }
            let quiet = lock(&self.world).events.is_empty();
            self.settle()?;
            let next = self.rt.as_ref().and_then(Rt::poll_timeout);
            match next {
                Some(t) => self.clock.advance_to(t),
                None if quiet => break,
                None => {}
            }
            self.timeouts()?;
            self.settle()?;
        }
        let Some(rt) = self.rt.as_ref() else {
            return Err("no runtime at the end".into());
        };
        self.checker.end(&*self.inner, |n| rt.lifecycle(n))
    }
}

/// A runtime call's answer: `Err(Store)` only when a fault fired during it.
fn answer<T>(world: &Shared, what: &str, result: &Result<T, RuntimeError>) -> Checked {
    if let Err(RuntimeError::Store(e)) = result
        && lock(world).fired == 0
    {
        return Err(format!(
            "{what}: store error without an injected fault: {e}"
        ));
    }
    Ok(())
}

fn container_index(rt: &Rt, n: &str, pick: u8) -> usize {
    let count = rt.lifecycle(n).map_or(0, |l| l.containers().len());
    usize::from(pick) % (count + 1)
}

/// Runs one input; the first violation, with the step and the script so far.
pub fn check(input: &Input) -> Result<(), String> {
    let recovery = if input.reset_full_grace {
        Recovery::ResetFullGrace
    } else {
        Recovery::HonourOriginalDeadline
    };
    let mut h = Harness::new(input.wall.0, input.mono.0, recovery);
    h.open()
        .map_err(|why| format!("opening an empty store: {why}"))?;
    let ops = &input.ops[..input.ops.len().min(MAX_OPS)];
    for (n, op) in ops.iter().enumerate() {
        h.step(op).map_err(|why| {
            format!(
                "invariant violated at step {n}: {op:?} at {:?}\n  {why}\n  script: {:?}",
                h.now(),
                &ops[..=n]
            )
        })?;
    }
    h.finish().map_err(|why| {
        format!(
            "at the end at {:?} ({recovery:?}):\n  {why}\n  script: {ops:?}",
            h.now()
        )
    })
}

/// Runs one input; panics on the first violation.
pub fn run(input: &Input) {
    if let Err(why) = check(input) {
        panic!("store_recovery: {why}");
    }
}

#[cfg(test)]
mod seeds;
#[cfg(test)]
mod tests;
