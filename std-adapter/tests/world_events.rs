//! A custom actuator reports back what happened in its world through the
//! public API ([`WorldEvent`], [`Runtime::handle_world_event`]), as the
//! built-in process actuator does, and the lifecycle moves on from it.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

mod common;

use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};

use common::actuators::{Probe, WorldActuator};
use common::pod;
use grace_core::{Action, DeleteOptions, Duration, Input, Instant, Stage};
use grace_std::clock::{Clock, ManualClock};
use grace_std::runtime::{
    ActionError, Actuator, Change, KillRecord, Runtime, RuntimeBuilder, WorldEvent,
};
use grace_std::store::{MemoryStore, Store, StoredObject};

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::at_unix_millis(1_000_000))
}

/// Hands every report waiting on `reports` to the runtime, as a program's
/// loop does.
fn feed<S: Store, A: Actuator>(
    rt: &mut Runtime<S, Arc<ManualClock>, A>,
    reports: &Receiver<WorldEvent>,
) -> usize {
    let mut n = 0;
    while let Ok(event) = reports.try_recv() {
        rt.handle_world_event(event).expect("taken");
        n += 1;
    }
    n
}

fn stage(rt: &Runtime<impl Store, Arc<ManualClock>, impl Actuator>) -> Stage {
    rt.lifecycle("web-0").expect("tracked").containers()[0].stage()
}

fn open<A: Actuator>(
    store: MemoryStore,
    clock: &Arc<ManualClock>,
    actuator: A,
) -> Runtime<MemoryStore, Arc<ManualClock>, A> {
    RuntimeBuilder::open(Runtime::builder(store, Arc::clone(clock), actuator)).expect("opens")
}

#[test]
fn r60_r61_a_hook_the_actuator_reports_returned_early_sends_the_stop_signal_before_its_budget() {
    let clock = clock();
    let (mut actuator, reports) = WorldActuator::new(Arc::clone(&clock));
    actuator.hook_runs = Some(Duration::from_millis(5_500));
    let recorder = actuator.recorder.clone();
    let mut rt = open(MemoryStore::new(), &clock, actuator);
    rt.create("web-0", pod("u1", true)).expect("created");
    let t0 = clock.now().mono;
    rt.handle("web-0", Input::Delete(DeleteOptions::with_grace(30)))
        .expect("accepted");
    rt.handle("web-0", Input::AgentSync).expect("synced");

    // The hook has returned in its world, but the runtime has not been
    // told yet: it still waits for the hook.
    let budget_end = t0.saturating_add(Duration::from_secs(30));
    assert_eq!(stage(&rt), Stage::PreStop { cutoff: budget_end });
    assert_eq!(feed(&mut rt, &reports), 1);

    // Told, it sends the stop signal at 5.5 s, not at 30 s; the hook is
    // charged 5 whole seconds, so SIGKILL is due 25 s after (R61).
    let returned = t0.saturating_add(Duration::from_millis(5_500));
    assert_eq!(clock.now().mono, returned);
    let container = rt.lifecycle("web-0").expect("tracked").containers()[0];
    let sent = container.stop_signal_sent_at().expect("stop signal sent");
    assert!(sent >= returned && sent < budget_end, "{sent:?}");
    assert_eq!(
        container.stage(),
        Stage::Stopping {
            kill_at: returned.saturating_add(Duration::from_secs(25))
        }
    );
    assert_eq!(
        recorder.take_actions(),
        [
            Action::RemoveEndpoints,
            Action::RunPreStop {
                container: 0,
                budget_seconds: 30
            },
            Action::SendStopSignal { container: 0 },
        ]
    );
}

#[test]
fn r63_an_exit_the_actuator_reports_removes_the_record_without_waiting_for_sigkill() {
    let clock = clock();
    let (mut actuator, reports) = WorldActuator::new(Arc::clone(&clock));
    actuator.exit_on_stop = Some(0);
    let recorder = actuator.recorder.clone();
    let store = MemoryStore::new();
    let mut rt = open(store.clone(), &clock, actuator);
    rt.create("web-0", pod("u1", false)).expect("created");
    let t0 = clock.now().mono;
    rt.handle("web-0", Input::Delete(DeleteOptions::with_grace(30)))
        .expect("accepted");
    rt.handle("web-0", Input::AgentSync).expect("synced");
    assert!(matches!(stage(&rt), Stage::Stopping { .. }));

    assert_eq!(feed(&mut rt, &reports), 1);

    // Gone at once: no SIGKILL, nothing due, nothing in the store.
    assert_eq!(clock.now().mono, t0);
    assert!(rt.lifecycle("web-0").is_none());
    assert_eq!(rt.poll_timeout(), None);
    assert!(store.get("web-0").expect("reads").is_none());
    assert_eq!(
        recorder.take_actions(),
        [
            Action::RemoveEndpoints,
            Action::SendStopSignal { container: 0 },
            Action::ContainerStopped { container: 0 },
        ]
    );
}

#[test]
fn d6_a_reported_hook_return_is_durable_before_the_stop_signal_it_owes_goes_out() {
    let clock = clock();
    let (mut world, reports) = WorldActuator::new(Arc::clone(&clock));
    world.hook_runs = Some(Duration::from_secs(3));
    let store = MemoryStore::new();
    let reader = store.clone();
    // The stage the store holds when the stop signal goes out.
    let stored_at_signal: Arc<Mutex<Option<Stage>>> = Arc::default();
    let seen = Arc::clone(&stored_at_signal);
    let actuator = Probe(
        move |object: &str, stored: &StoredObject, action: &Action| {
            if matches!(action, Action::SendStopSignal { .. }) {
                let (object_now, _) = reader
                    .get(object)
                    .map_err(|e| ActionError::new(action, e))?
                    .ok_or_else(|| ActionError::new(action, "not stored"))?;
                let state = object_now
                    .agent
                    .ok_or_else(|| ActionError::new(action, "no state"))?;
                let record = KillRecord::decode(&state).map_err(|e| ActionError::new(action, e))?;
                *seen.lock().expect("not poisoned") =
                    Some(record.lifecycle.containers()[0].stage());
            }
            world.perform(object, stored, action)
        },
    );
    let mut rt = open(store.clone(), &clock, actuator);
    rt.create("web-0", pod("u1", true)).expect("created");
    rt.handle("web-0", Input::Delete(DeleteOptions::with_grace(30)))
        .expect("accepted");
    rt.handle("web-0", Input::AgentSync).expect("synced");
    assert_eq!(feed(&mut rt, &reports), 1);

    // Written ahead: the store already said "stopping", SIGKILL at 3 + 27 s.
    let kill_at = rt.lifecycle("web-0").expect("tracked").containers()[0].stage();
    assert!(matches!(kill_at, Stage::Stopping { .. }));
    assert_eq!(
        *stored_at_signal.lock().expect("not poisoned"),
        Some(kill_at)
    );
    // And a restart finds it so (nothing owed again: the signal went out).
    drop(rt);
    let (again, _) = WorldActuator::new(Arc::clone(&clock));
    let recorder = again.recorder.clone();
    let rt = open(store, &clock, again);
    assert_eq!(stage(&rt), kill_at);
    assert_eq!(recorder.take_actions(), []);
}

#[test]
fn an_action_the_actuator_cannot_carry_out_is_reported_failed_with_its_reason() {
    let clock = clock();
    let actuator = Probe(|_: &str, _: &StoredObject, action: &Action| match action {
        Action::SendStopSignal { .. } => Err(ActionError::new(
            action,
            std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        )),
        _ => Ok(()),
    });
    let mut builder = Runtime::builder(MemoryStore::new(), Arc::clone(&clock), actuator);
    let transitions = builder.subscribe();
    let mut rt = builder.open().expect("opens");
    rt.create("web-0", pod("u1", false)).expect("created");
    let t0: Instant = clock.now().mono;
    rt.handle("web-0", Input::Delete(DeleteOptions::with_grace(30)))
        .expect("accepted");
    rt.handle("web-0", Input::AgentSync)
        .expect("a failed action is no failed input");

    let failed: Vec<Change> = transitions
        .try_iter()
        .map(|t| t.change)
        .filter(|c| matches!(c, Change::ActionFailed(..)))
        .collect();
    assert_eq!(
        failed,
        [Change::ActionFailed(ActionError::new(
            &Action::SendStopSignal { container: 0 },
            "permission denied"
        ))]
    );
    // The deletion goes on: SIGKILL stays due after the grace.
    assert_eq!(
        stage(&rt),
        Stage::Stopping {
            kill_at: t0.saturating_add(Duration::from_secs(30))
        }
    );
}
