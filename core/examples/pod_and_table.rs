//! A first program on `grace-core` alone, as a new user writes it: one pod
//! with an app container, a sidecar with a pre-stop hook and a finalizer,
//! deleted and driven to the end; then a `Table` of 10 000 pods deleted
//! together and driven by their deadlines.
//!
//! `cargo run -p grace-core --example pod_and_table` (the test
//! `core/tests/examples.rs` runs it too).
#![deny(warnings)]
// The example's own bookkeeping (counters, printed offsets, simulated exit
// times) counts freely, and it takes a delete input's reply as a delete
// reply (`Reply::delete` is `None` only for the reply to another input):
// the restriction lints are for library code.
#![allow(clippy::arithmetic_side_effects, clippy::unwrap_used)]

use std::sync::Mutex;

use grace_core::Input;
use grace_core::{
    Action, ContainerSpec, DeleteOptions, Duration, Error, FinalizerChange, Instant, Lifecycle,
    Now, Phase, Record, Strategy, Table, UpdateOutcome,
};

/// How many pods the table holds.
const PODS: usize = 10_000;

/// 10 000 pods with two containers each. A big table belongs in a `static`
/// (all zero bits: it lands in `.bss`, never on the stack).
static TABLE: Mutex<Table<PODS, 4, 2>> = Mutex::new(Table::new());

/// Runs both parts.
pub fn main() -> Result<(), Error> {
    one_pod()?;
    ten_thousand_pods()?;
    Ok(())
}

fn one_pod() -> Result<(), Error> {
    let record = Record::<4>::builder("uid-web-0")
        .grace_period_seconds(10)
        .finalizer("example.com/backup")
        .build()?;
    let containers = [
        ContainerSpec::app(),
        ContainerSpec::sidecar().with_pre_stop(),
    ];
    let mut pod = Lifecycle::<4, 2>::new(Strategy::POD, record, &containers)?;
    let mut now = Instant::from_millis(1_000_000);

    pod.handle(Now::at(now), Input::Delete(DeleteOptions::default()))
        .delete()
        .unwrap()?;
    pod.handle(Now::at(now), Input::AgentSync).handled();
    let mut log = Vec::new();
    // The world: hooks return at once, a signalled process exits 1 s later.
    let mut exits: Vec<(Instant, u8)> = Vec::new();
    loop {
        while let Some(action) = pod.poll_action() {
            println!("{:>6} ms  {action}", now.as_millis() - 1_000_000);
            log.push(action);
            match action {
                Action::RunPreStop { container, .. } => {
                    pod.handle(Now::at(now), Input::pre_stop_finished(container))
                        .container()?;
                }
                Action::SendStopSignal { container } => {
                    exits.push((now + Duration::from_secs(1), container));
                }
                Action::SendKill { container } => exits.push((now, container)),
                _ => {}
            }
        }
        exits.sort();
        let next_exit = exits.first().map(|&(at, _)| at);
        let next = match (next_exit, pod.poll_timeout()) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => match a.or(b) {
                Some(t) => t,
                None => break,
            },
        };
        now = next;
        while let Some(&(at, container)) = exits.first() {
            if at > now {
                break;
            }
            exits.remove(0);
            pod.handle(Now::at(now), Input::container_exited(container))
                .container()?;
        }
        let _ = pod.handle(Now::at(now), Input::Timeout);
    }
    // The sidecar was signalled after the app had stopped (R69).
    let app_stopped = log
        .iter()
        .position(|a| *a == Action::ContainerStopped { container: 0 });
    let sidecar_signal = log
        .iter()
        .position(|a| *a == Action::SendStopSignal { container: 1 });
    assert!(
        app_stopped < sidecar_signal && sidecar_signal.is_some(),
        "{log:?}"
    );
    // Everything stopped; the finalizer holds the record.
    assert_eq!(pod.phase(), Phase::Terminating);
    assert!(pod.is_stored());

    let outcome = pod
        .handle(
            Now::at(now),
            Input::FinalizerUpdate(FinalizerChange::remove("example.com/backup")?),
        )
        .update()
        .unwrap()?;
    assert_eq!(outcome, UpdateOutcome::Deleted { force: false });
    assert_eq!(pod.poll_action(), Some(Action::Remove { force: false }));
    assert_eq!(pod.phase(), Phase::Deleted);
    Ok(())
}

fn ten_thousand_pods() -> Result<(), Error> {
    let mut table = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    let start = Instant::from_millis(0);
    let mut ids = Vec::new();
    for i in 0..PODS {
        let record = Record::builder(format!("uid-{i}").as_str()).build()?;
        let pod = Lifecycle::new(Strategy::POD, record, &[ContainerSpec::app()])?;
        ids.push(table.insert(pod)?);
    }
    // Graces of 1 to 10 s; nobody exits on SIGTERM, so each gets SIGKILL
    // when its grace is spent, and never sooner than 2 s after its SIGTERM.
    let mut kill_due = std::collections::HashMap::new();
    for (i, &id) in ids.iter().enumerate() {
        let grace = 1 + (i % 10) as i64;
        kill_due.insert(id, start.as_millis() + 1_000 * grace.max(2) as u64);
        let _ = table
            .handle(
                Now::at(start),
                id,
                Input::Delete(DeleteOptions::with_grace(grace)),
            )?
            .result()?;
        let _ = table
            .handle(Now::at(start), id, Input::AgentSync)?
            .result()?;
    }
    let (mut kills, mut removed, mut now) = (0, 0, start);
    loop {
        while let Some((id, action)) = table.poll_action() {
            match action {
                // Nobody exits on SIGTERM; SIGKILL ends them at once.
                Action::SendKill { container } => {
                    kills += 1;
                    // Every SIGKILL at its millisecond.
                    assert_eq!(
                        Some(&now.as_millis()),
                        kill_due.get(&id),
                        "SIGKILL of {id:?}"
                    );
                    let _ = table
                        .handle(Now::at(now), id, Input::container_exited(container))?
                        .result()?;
                }
                // Stopped and removed: nothing more will come for it.
                Action::Remove { force: false } => {
                    removed += 1;
                    table.remove(id);
                }
                _ => {}
            }
        }
        let Some(next) = table.poll_timeout() else {
            break;
        };
        now = next;
        table.handle_timeouts(Now::at(now));
    }
    assert_eq!((kills, removed), (PODS, PODS));
    assert!(table.is_empty());
    Ok(())
}
