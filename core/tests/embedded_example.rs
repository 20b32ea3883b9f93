//! The decisions of the embedded example (`examples/embedded/src/world.rs`,
//! compiled here for the host): a force delete's kill runs to its end
//! before the board frees the object's slot (D4), where the example used to
//! free it on `Remove`.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

// The example reads fields the test does not.
#[allow(dead_code)]
#[path = "../../examples/embedded/src/world.rs"]
mod world;

use grace_core::Input;
use grace_core::{
    Action, ContainerSpec, DeleteOptions, Lifecycle, Name, Now, Phase, Record, Strategy, Table,
};
use world::{Event, Pod, Spec};

const FORCED: Spec = Spec {
    name: "forced",
    grace: 0,
    pre_stop: false,
    exits_after_sigterm_ms: None,
};

fn at(ms: u64) -> Now {
    Now::from_unix_millis(i64::try_from(ms).expect("small"))
}

/// Hands out every action as the example does, returning them with the
/// times, and frees the slot when the board may.
fn settle(table: &mut Table<4, 2, 1>, pod: &mut Pod, ms: u64, log: &mut Vec<(u64, Action)>) {
    while let Some((id, action)) = table.poll_action() {
        assert_eq!(id, pod.id);
        log.push((ms, action));
        world::carry_out(pod, action, ms);
    }
    world::forget_if_finished(table, pod);
}

#[test]
fn d4_example_finishes_a_force_deleted_kill_before_freeing_the_slot() {
    let mut table: Table<4, 2, 1> = Table::new();
    let record = Record::new(Name::try_from(FORCED.name).expect("short"));
    let lifecycle =
        Lifecycle::new(Strategy::POD, record, &[ContainerSpec::default()]).expect("fits");
    let id = table.insert(lifecycle).expect("room");
    let mut pod = Pod {
        spec: &FORCED,
        id,
        phase: Phase::Live,
        event: None,
        forgotten: false,
    };
    let mut log = Vec::new();

    let options = DeleteOptions::with_grace(FORCED.grace);
    assert!(
        table
            .handle(at(0), id, Input::Delete(options.clone()))
            .expect("known")
            .delete()
            .expect("a delete's reply")
            .expect("accepted")
            .force
    );
    settle(&mut table, &mut pod, 0, &mut log);
    assert_eq!(log.last(), Some(&(0, Action::Remove { force: true })));
    assert!(!pod.forgotten, "freed on Remove: the kill would be dropped");
    assert_eq!(table.get(id).map(Lifecycle::phase), Some(Phase::Deleted));

    // The agent sees the removal at 500 ms; then time runs as in main.rs:
    // the world's next event or the table's next deadline, whichever first.
    pod.event = Some((500, Event::AgentSync));
    let mut ms = 0;
    while !pod.forgotten {
        let deadline = table.poll_timeout().map(|d| d.as_millis());
        let event = pod.event.map(|(t, _)| t);
        ms = match (deadline, event) {
            (Some(d), Some(e)) => d.min(e),
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => panic!("at {ms} ms: nothing to wait for, yet not finished"),
        };
        assert!(ms <= 10_000, "the kill never finished");
        table.handle_timeouts(at(ms));
        settle(&mut table, &mut pod, ms, &mut log);
        if let Some((due, what)) = pod.event
            && due <= ms
        {
            pod.event = None;
            let _ = match what {
                Event::AgentSync => table.handle(at(ms), id, Input::AgentSync).expect("known"),
                Event::Exit => table
                    .handle(at(ms), id, Input::container_exited(0))
                    .expect("known"),
            };
            settle(&mut table, &mut pod, ms, &mut log);
        }
    }
    assert_eq!(
        log,
        [
            (0, Action::RemoveEndpoints),
            (0, Action::Remove { force: true }),
            (500, Action::SendStopSignal { container: 0 }),
            (2_500, Action::SendKill { container: 0 }),
            (2_500, Action::ContainerStopped { container: 0 }),
        ]
    );
    assert_eq!(ms, 2_500, "freed once the process exited after SIGKILL");
    assert!(table.is_empty());
}
