//! Crash test: a child process runs the runtime on the durable store while
//! the test kills it with SIGKILL at random points during many terminations,
//! restarts it on the same database, and finally lets it finish. Then:
//! no accepted deletion was lost, no deletion timestamp moved later, no
//! SIGKILL came before its deadline, and every object ended Deleted.
//!
//! The child is this test binary itself, started with `GRACE_CRASH_DB` set
//! and filtered to `crash_worker_entry_point`, which then plays the runtime
//! and a small world of processes.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use grace_core::{Action, DeleteOptions, Input, Name, Phase, Record, Stage};
use grace_std::clock::{Clock, SystemClock};
use grace_std::runtime::{ActionError, KillRecord, ObjectLifecycle, Recovery, Runtime};
use grace_std::store::{RedbStore, Store, StoredContainer, StoredObject};

mod common;

use common::actuators::Probe;

const WORKER_ENV: &str = "GRACE_CRASH_DB";
const OBJECTS: usize = 10;
const CAMPAIGNS: usize = 8;
const KILLS_PER_CAMPAIGN: usize = 13;

/// Object `i`: its grace, whether its pre-stop hook hangs, and whether it
/// exits 300 ms after SIGTERM (else it ignores SIGTERM).
fn spec(i: usize) -> (i64, bool, bool) {
    let grace = 1 + (i % 2) as i64;
    (grace, i % 4 == 1, i.is_multiple_of(2))
}

fn name(i: usize) -> String {
    format!("p{i:02}")
}

// ---- the child --------------------------------------------------------------

/// Logs every action with the boot-time clock; reports exits on the
/// world's behalf.
struct World {
    log: std::fs::File,
    exits: Vec<(u64, String)>,
}

impl World {
    fn line(&mut self, text: &str) {
        let now = SystemClock::new().now().mono.as_millis();
        // One write per line: appends of whole lines survive a SIGKILL.
        let _ = self.log.write_all(format!("{now} {text}\n").as_bytes());
    }
}

impl World {
    /// Carries out `action` in the world (the actuator: a [`Probe`] that
    /// calls this).
    fn act(
        &mut self,
        object: &str,
        stored: &StoredObject,
        action: &Action,
    ) -> Result<(), ActionError> {
        let now = SystemClock::new().now().mono.as_millis();
        let i: usize = object[1..]
            .parse()
            .map_err(|e| ActionError::new(action, e))?;
        let (_, _, exits_on_term) = spec(i);
        // The decision as persisted before this action (write-ahead): its
        // instants are the machine's, not this call's.
        let decided: Option<ObjectLifecycle> = stored
            .agent
            .as_ref()
            .and_then(|a| KillRecord::decode(a).ok())
            .map(|r| r.lifecycle);
        let stage = decided
            .as_ref()
            .and_then(|l| l.containers().first().map(|c| c.stage()));
        match action {
            Action::SendStopSignal { .. } => {
                let Some(Stage::Stopping { .. }) = stage else {
                    return Err(ActionError::new(
                        action,
                        "SIGTERM owed but not persisted as Stopping",
                    ));
                };
                let since = decided
                    .as_ref()
                    .and_then(|l| l.containers()[0].stop_signal_sent_at())
                    .map_or(0, |t| t.as_millis());
                self.line(&format!("sigterm {object} {since}"));
                if exits_on_term {
                    self.exits.push((now + 300, object.to_owned()));
                }
            }
            Action::SendKill { .. } => {
                self.line(&format!("sigkill {object}"));
                self.exits.push((now, object.to_owned()));
            }
            Action::RunPreStop { .. } => {
                let Some(Stage::PreStop { cutoff }) = stage else {
                    return Err(ActionError::new(action, "pre-stop owed but not persisted"));
                };
                self.line(&format!("prestop {object} {}", cutoff.as_millis()));
            }
            Action::RemoveEndpoints => self.line(&format!("endpoints {object}")),
            Action::ContainerStopped { .. } => self.line(&format!("stopped {object}")),
            Action::Remove { .. } => {}
            other => {
                return Err(ActionError::new(
                    action,
                    format!("an action this test does not know: {other:?}"),
                ));
            }
        }
        Ok(())
    }
}

fn worker(dir: &Path) {
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("log"))
        .expect("log opens");
    let world = Arc::new(Mutex::new(World {
        log,
        exits: Vec::new(),
    }));
    let line = |text: &str| world.lock().expect("not poisoned").line(text);
    line("start");
    let history = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
    let store = RedbStore::open(dir.join("grace.redb")).expect("store opens");
    let actuator = Probe({
        let world = Arc::clone(&world);
        move |object: &str, stored: &StoredObject, action: &Action| {
            world
                .lock()
                .expect("not poisoned")
                .act(object, stored, action)
        }
    });
    let mut rt = Runtime::open(store, SystemClock::new(), actuator, Recovery::default())
        .expect("runtime opens");
    let transitions = rt.subscribe();

    for i in 0..OBJECTS {
        let n = name(i);
        // What the store holds now, for the timestamp check.
        if let Some((o, _)) = rt.store().get(&n).expect("readable") {
            let ts = o.record.deletion_timestamp.map(|t| t.as_unix_seconds());
            let wall = rt.clock().now().wall.as_unix_millis() / 1000;
            line(&format!("observed {n} {ts:?} {wall}"));
        }
        // The workload of a killed process is gone; tell the runtime.
        let killed = rt
            .lifecycle(&n)
            .is_some_and(|l| l.containers().iter().any(|c| c.stage() == Stage::Killed));
        if killed {
            let _ = rt.handle(&n, Input::container_exited(0));
        }
        let exists = rt.store().get(&n).expect("readable").is_some();
        // Created earlier: any line names it (a worker killed between the
        // create's commit and its `created` line leaves only the lines of
        // the workers after it, `observed` first). Created again, a removed
        // object would be deleted again, with a later timestamp.
        let was_created = history
            .lines()
            .any(|l| l.split(' ').nth(2) == Some(n.as_str()));
        if was_created && !exists && !history.contains(&format!(" removed {n}\n")) {
            // Removed just before the last crash, before it was logged.
            line(&format!("removed {n}"));
        }
        if !exists && !was_created {
            let (_, hook, _) = spec(i);
            let mut object = StoredObject::on_node(
                Record::new(Name::try_from(format!("uid-{n}").as_str()).expect("short")),
                "node-a",
            );
            object.containers = vec![
                StoredContainer::named("app")
                    .with_pre_stop_hook(hook.then(|| "sleep infinity".into())),
            ];
            rt.create(&n, object).expect("created");
            line(&format!("created {n}"));
        }
        if rt.lifecycle(&n).is_some_and(|l| l.phase() == Phase::Live) {
            let (grace, _, _) = spec(i);
            let response = rt
                .handle(&n, Input::Delete(DeleteOptions::with_grace(grace)))
                .expect("accepted")
                .delete()
                .expect("a delete's answer");
            let ts = response
                .record
                .deletion_timestamp
                .map(|t| t.as_unix_seconds());
            line(&format!("accepted {n} {ts:?}"));
        }
        if rt.lifecycle(&n).is_some() {
            let _ = rt.handle(&n, Input::AgentSync);
        }
    }

    loop {
        let now = rt.clock().now().mono.as_millis();
        let due: Vec<String> = {
            let exits = &mut world.lock().expect("not poisoned").exits;
            let (due, later): (Vec<_>, Vec<_>) = exits.drain(..).partition(|(t, _)| *t <= now);
            *exits = later;
            due.into_iter().map(|(_, n)| n).collect()
        };
        for n in due {
            let _ = rt.handle(&n, Input::container_exited(0));
        }
        rt.handle_timeouts().expect("timeouts");
        for t in transitions.try_iter() {
            if let grace_std::runtime::Change::Action(Action::Remove { .. }) = t.change {
                line(&format!("removed {}", t.object));
            }
        }
        if rt.names().next().is_none() {
            line("done");
            return;
        }
        std::thread::sleep(StdDuration::from_millis(5));
    }
}

/// The child's entry point. As a plain test (without `GRACE_CRASH_DB`) it
/// does nothing: it is only the way for the crash test to start a runtime
/// process it can kill.
#[test]
fn crash_worker_entry_point() {
    if let Some(dir) = std::env::var_os(WORKER_ENV) {
        worker(Path::new(&dir));
    }
}

// ---- the test ---------------------------------------------------------------

/// Starts a worker on `dir`'s database; its output goes to `worker.out`
/// there (the last run's: printed if it fails).
fn spawn(dir: &Path) -> std::process::Child {
    let out = std::fs::File::create(dir.join("worker.out")).expect("worker.out");
    let err = out.try_clone().expect("worker.out");
    Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "crash_worker_entry_point", "--test-threads", "1"])
        .env(WORKER_ENV, dir)
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .expect("worker starts")
}

/// A small deterministic generator, so that a failure can be replayed.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

#[test]
fn crash_at_random_points_loses_nothing_and_never_kills_early() {
    let mut rng = Lcg(0x9e37_79b9_7f4a_7c15);
    let mut kills = 0;
    let started = StdInstant::now();
    for campaign in 0..CAMPAIGNS {
        let dir = tempfile::tempdir().expect("temp dir");
        for _ in 0..KILLS_PER_CAMPAIGN {
            let mut child = spawn(dir.path());
            std::thread::sleep(StdDuration::from_millis(20 + rng.below(250)));
            child.kill().expect("SIGKILL");
            child.wait().expect("reaped");
            kills += 1;
        }
        // Then let it finish.
        let mut child = spawn(dir.path());
        let deadline = StdInstant::now() + StdDuration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().expect("waitable") {
                assert!(
                    status.success(),
                    "campaign {campaign}: worker failed: {status}; its output:\n{}",
                    std::fs::read_to_string(dir.path().join("worker.out")).unwrap_or_default()
                );
                break;
            }
            assert!(
                StdInstant::now() < deadline,
                "campaign {campaign}: did not finish"
            );
            std::thread::sleep(StdDuration::from_millis(20));
        }
        check(campaign, dir.path());
    }
    assert!(kills >= 100, "{kills} kill points");
    eprintln!("{kills} kill points in {:?}", started.elapsed());
}

fn check(campaign: usize, dir: &Path) {
    let log = std::fs::read_to_string(dir.join("log")).expect("log");
    let store = RedbStore::open(dir.join("grace.redb")).expect("store opens");
    assert!(
        store.list().expect("listable").objects.is_empty(),
        "campaign {campaign}: every object ended Deleted"
    );
    assert!(log.ends_with("done\n"), "campaign {campaign}: finished");

    // The number after the name on the first `kind` line for `n`.
    let field = |kind: &str, n: &str| -> Option<u64> {
        log.lines().find_map(|l| {
            let mut w = l.split(' ');
            w.next()?;
            (w.next()? == kind && w.next()? == n).then_some(())?;
            w.next()?.parse().ok()
        })
    };
    let first = |kind: &str, n: &str| -> Option<u64> {
        log.lines().find_map(|l| {
            let mut w = l.split(' ');
            let t = w.next()?.parse().ok()?;
            (w.next()? == kind && w.next()? == n).then_some(t)
        })
    };
    for i in 0..OBJECTS {
        let n = name(i);
        let (grace, _, _) = spec(i);
        // Not lost: every object is deleted, so every one is removed.
        assert!(
            first("removed", &n).is_some(),
            "campaign {campaign}: {n} never removed"
        );
        // Never early (R62, R63, D6), on the machine's own decision times
        // as persisted before each action: SIGKILL (when it was carried
        // out) no sooner than 2 s after the SIGTERM decision, nor before the
        // grace counted from the kill's start; a hung hook's SIGTERM not
        // before its cut-off.
        if let Some(kill) = first("sigkill", &n) {
            let term = field("sigterm", &n).expect("SIGTERM before SIGKILL");
            assert!(
                kill >= term + 2000,
                "campaign {campaign}: {n} SIGKILL at {kill}, SIGTERM decided at {term}"
            );
            match field("prestop", &n) {
                Some(cutoff) => assert!(
                    term >= cutoff,
                    "campaign {campaign}: {n} SIGTERM at {term}, hook cut-off {cutoff}"
                ),
                None => {
                    let grace_ms = u64::try_from(grace.max(2)).expect("positive") * 1000;
                    assert!(
                        kill >= term + grace_ms,
                        "campaign {campaign}: {n} SIGKILL at {kill}, kill started {term}, grace {grace}"
                    );
                }
            }
        }
    }

    // Timestamps never move later than the later of themselves and now
    // (invariant 2; the agent's final delete clamps a past one to now, R16).
    let mut seen: BTreeMap<String, i64> = BTreeMap::new();
    for l in log.lines() {
        let w: Vec<&str> = l.split(' ').collect();
        let (Some(kind), Some(n), Some(ts)) = (w.get(1), w.get(2), w.get(3)) else {
            continue;
        };
        if *kind != "accepted" && *kind != "observed" {
            continue;
        }
        let Some(ts) = ts
            .strip_prefix("Some(")
            .and_then(|t| t.strip_suffix(')'))
            .and_then(|t| t.parse::<i64>().ok())
        else {
            continue;
        };
        let wall: i64 = w.get(4).and_then(|t| t.parse().ok()).unwrap_or(i64::MIN);
        if let Some(before) = seen.get(*n) {
            assert!(
                ts <= (*before).max(wall),
                "campaign {campaign}: {n} deletion timestamp moved from {before} to {ts} at {wall}; \
                 the log:\n{}",
                log.lines()
                    .filter(|l| l.split(' ').nth(2) == Some(*n) || l.ends_with(" start"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        seen.insert((*n).to_owned(), ts);
    }
    assert_eq!(
        seen.len(),
        OBJECTS,
        "campaign {campaign}: every deletion was recorded"
    );
}
