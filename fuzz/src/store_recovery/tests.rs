//! Scripts for the harness: each fault the target injects, on its own.

use grace_core::ContainerSpec;

use super::{Input, MAX_CONTAINERS, NewObject, Op, check};
use crate::input::{DeleteSpec, Grace, GraceSel, MonoMs, Pre, WallMs};

const POD: u8 = 2;

/// A pod with a 30 s grace and up to three containers: (pre-stop hook,
/// sidecar) each.
pub(super) fn pod(containers: &[(bool, bool)]) -> NewObject {
    let mut specs = [ContainerSpec::default(); MAX_CONTAINERS];
    for (spec, &(pre_stop, sidecar)) in specs.iter_mut().zip(containers) {
        spec.pre_stop = pre_stop;
        spec.sidecar = sidecar;
    }
    NewObject {
        kind: POD,
        tgps: Some(Grace(30)),
        finalizers: 0,
        containers: u8::try_from(containers.len()).unwrap_or(0),
        specs,
    }
}

pub(super) fn create(object: NewObject) -> Op {
    Op::Create { name: 0, object }
}

pub(super) fn delete(grace: i64) -> Op {
    Op::Delete {
        name: 0,
        spec: DeleteSpec {
            grace: GraceSel::Value(Grace(grace)),
            uid: Pre::Absent,
            resource_version: Pre::Absent,
            propagation: None,
            orphan_dependents: None,
            dry_run: false,
        },
    }
}

fn script(ops: Vec<Op>) -> Result<(), String> {
    check(&Input {
        wall: WallMs(1_700_000_000_000),
        mono: MonoMs(1_000_000),
        reset_full_grace: false,
        ops,
    })
}

pub(super) fn fail(skip: u8, applied: bool) -> Op {
    Op::FailWrite { skip, applied }
}

#[test]
fn a_plain_deletion_passes() {
    script(vec![
        create(pod(&[(true, false), (false, true)])),
        delete(30),
        Op::AgentSync { name: 0 },
        Op::AdvanceSeconds { s: 10 },
        Op::Crash,
        Op::ContainerExited {
            name: 0,
            container: 0,
        },
        Op::ToDeadline { offset_ms: 0 },
    ])
    .unwrap();
}

#[test]
fn lost_ack_on_create() {
    script(vec![fail(0, true), create(pod(&[(false, false)]))]).unwrap();
}

#[test]
fn lost_ack_on_delete() {
    script(vec![
        create(pod(&[(false, false)])),
        fail(0, true),
        delete(30),
        Op::AdvanceSeconds { s: 5 },
        delete(30),
    ])
    .unwrap();
}

#[test]
fn refused_write_after_the_actions_of_a_delete() {
    script(vec![
        create(pod(&[(false, false)])),
        fail(1, false),
        delete(30),
        Op::AdvanceSeconds { s: 5 },
        delete(30),
    ])
    .unwrap();
}

#[test]
fn refused_removal() {
    script(vec![
        create(pod(&[(false, false)])),
        delete(30),
        Op::AgentSync { name: 0 },
        fail(1, false),
        Op::ContainerExited {
            name: 0,
            container: 0,
        },
    ])
    .unwrap();
}

#[test]
fn crash_between_every_write_and_action() {
    for effects in 0..8 {
        script(vec![
            create(pod(&[(true, false), (false, false)])),
            Op::CrashAfter { effects },
            delete(30),
            Op::CrashAfter { effects },
            Op::AgentSync { name: 0 },
            Op::CrashAfter { effects },
            Op::AdvanceSeconds { s: 31 },
            Op::CrashAfter { effects },
            Op::ContainerExited {
                name: 0,
                container: 0,
            },
        ])
        .unwrap_or_else(|e| panic!("dying after {effects} effects: {e}"));
    }
}

#[test]
fn an_eviction_survives_a_reset_full_grace_restart() {
    check(&Input {
        wall: WallMs(1_700_000_000_000),
        mono: MonoMs(1_000_000),
        reset_full_grace: true,
        ops: vec![
            create(pod(&[(false, false)])),
            Op::Evict {
                name: 0,
                grace: Grace(5),
            },
            Op::AdvanceSeconds { s: 1 },
            Op::Crash,
        ],
    })
    .unwrap();
}

#[test]
fn refused_write_after_the_actions_of_a_sync() {
    script(vec![
        create(pod(&[(false, false)])),
        delete(30),
        fail(1, false),
        Op::AgentSync { name: 0 },
        Op::AdvanceSeconds { s: 5 },
        Op::AgentSync { name: 0 },
    ])
    .unwrap();
}
