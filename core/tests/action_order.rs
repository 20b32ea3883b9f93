//! The order in which `poll_action` hands out what is owed: the order
//! things happened, across containers, endpoints and removal. A
//! container's own outputs come out together, in its place, in the order
//! they arise within a kill (pre-stop, stop signal, SIGKILL, stopped).
//! Drivers that take every action after each input never see more than one
//! entry owed at a time; these tests feed several inputs first.

use grace_core::{Action, ContainerSpec, DeleteOptions, Lifecycle, Name, Now, Record, Strategy};

const APP: ContainerSpec = ContainerSpec {
    pre_stop: false,
    sidecar: false,
    stopped: false,
};
const HOOKED: ContainerSpec = ContainerSpec {
    pre_stop: true,
    ..APP
};

fn at(ms: i64) -> Now {
    Now::from_unix_millis(1_700_000_000_000 + ms)
}

fn pod<const C: usize>(containers: &[ContainerSpec]) -> Lifecycle<4, C> {
    let uid = Name::try_from("uid-1").expect("short");
    Lifecycle::new(Strategy::POD, Record::new(uid), containers).expect("fits")
}

fn drain<const C: usize>(p: &mut Lifecycle<4, C>) -> Vec<Action> {
    let mut out = Vec::new();
    while let Some(action) = p.poll_action() {
        out.push(action);
    }
    assert!(!p.has_action());
    out
}

#[test]
fn outputs_come_out_in_the_order_they_arose_across_containers() {
    let mut p = pod::<4>(&[HOOKED, APP, APP]);
    let _ = p.handle_delete(at(0), &DeleteOptions::with_grace(10));
    let _ = p.handle_agent_sync(at(0));
    // Container 2 exits before anything is taken; then container 1.
    let _ = p.handle_container_exited(at(100), 2);
    let _ = p.handle_container_exited(at(200), 1);
    assert!(p.has_action());
    assert_eq!(
        drain(&mut p),
        [
            Action::RemoveEndpoints,
            Action::RunPreStop {
                container: 0,
                budget_seconds: 10
            },
            // Each container keeps its place; what it owes later joins it.
            Action::SendStopSignal { container: 1 },
            Action::ContainerStopped { container: 1 },
            Action::SendStopSignal { container: 2 },
            Action::ContainerStopped { container: 2 },
        ]
    );
}

#[test]
fn an_entry_that_owes_again_after_being_drained_goes_to_the_back() {
    let mut p = pod::<4>(&[APP, APP]);
    let _ = p.handle_delete(at(0), &DeleteOptions::with_grace(10));
    let _ = p.handle_agent_sync(at(0));
    assert_eq!(p.poll_action(), Some(Action::RemoveEndpoints));
    assert_eq!(
        p.poll_action(),
        Some(Action::SendStopSignal { container: 0 })
    );
    // Container 0 has nothing owed now; its exit comes after container 1's
    // stop signal, which was owed before it.
    let _ = p.handle_container_exited(at(100), 0);
    let _ = p.handle_container_exited(at(200), 1);
    assert_eq!(
        drain(&mut p),
        [
            Action::SendStopSignal { container: 1 },
            Action::ContainerStopped { container: 1 },
            Action::ContainerStopped { container: 0 },
            Action::Remove { force: false },
        ]
    );
}

#[test]
fn a_force_delete_removes_before_the_kill_that_follows_it() {
    let mut p = pod::<2>(&[APP]);
    let _ = p.handle_delete(at(0), &DeleteOptions::with_grace(0));
    // D4: removed first, then the agent sees the removal and stops it.
    let _ = p.handle_agent_sync(at(10));
    let out = drain(&mut p);
    assert_eq!(
        out,
        [
            Action::RemoveEndpoints,
            Action::Remove { force: true },
            Action::SendStopSignal { container: 0 },
        ]
    );
}

#[test]
fn the_largest_lifecycle_orders_every_container() {
    // 253 containers is the most a lifecycle holds: every one is ordered.
    const C: usize = 253;
    let specs = [APP; C];
    let mut p = pod::<C>(&specs);
    let _ = p.handle_delete(at(0), &DeleteOptions::with_grace(10));
    let _ = p.handle_agent_sync(at(0));
    // The last container exits first: it keeps its place behind the others.
    let _ = p.handle_container_exited(at(100), C - 1);
    let out = drain(&mut p);
    assert_eq!(out.first(), Some(&Action::RemoveEndpoints));
    let signals: Vec<u8> = out
        .iter()
        .filter_map(|a| match a {
            Action::SendStopSignal { container } => Some(*container),
            _ => None,
        })
        .collect();
    let expected: Vec<u8> = (0..=252).collect();
    assert_eq!(signals, expected);
    assert_eq!(
        out.last(),
        Some(&Action::ContainerStopped { container: 252 })
    );
    assert_eq!(out.len(), 1 + C + 1);
}

#[test]
fn nothing_owed_means_none_and_no_action() {
    let mut p = pod::<2>(&[APP]);
    assert!(!p.has_action());
    assert_eq!(p.poll_action(), None);
    let _ = p.handle_delete(at(0), &DeleteOptions::with_grace(10));
    assert!(p.has_action());
    assert_eq!(p.poll_action(), Some(Action::RemoveEndpoints));
    assert!(!p.has_action());
    assert_eq!(p.poll_action(), None);
}
