//! The committed seeds of `store_recovery` (`fuzz/corpus/store_recovery/`),
//! written by hand as scripts and encoded into the bytes `arbitrary` 1.x
//! decodes them from: integers little-endian, a `bool` from a byte's low
//! bit, an enum variant from a `u32` scaled to the number of variants, an
//! `Option` as a `bool` then the value, and the script as "one more op?"
//! `bool`s each followed by an op.
//!
//! `seeds_are_the_scripts` checks that every committed file decodes to its
//! script and that the script passes; `GRACE_FUZZ_WRITE_SEEDS=1 cargo test
//! --lib seeds` writes them again after a change of the input types.

use std::path::PathBuf;

use arbitrary::{Arbitrary, Unstructured};
use grace_core::{ContainerSpec, Propagation};

use super::tests::{create, delete, fail, pod};
use super::{Input, NewObject, Op, check};
use crate::input::{DeleteSpec, FinalizerSel, Grace, GraceSel, MonoMs, Pre, WallMs};

/// The variant `index` of an enum with `count` variants: the `u32` that
/// `(x * count) >> 32` maps to it.
fn variant(out: &mut Vec<u8>, index: u64, count: u64) {
    let x = (index << 32).div_ceil(count);
    out.extend(u32::try_from(x).unwrap_or(u32::MAX).to_le_bytes());
}

fn flag(out: &mut Vec<u8>, b: bool) {
    out.push(u8::from(b));
}

fn grace(out: &mut Vec<u8>, g: Grace) {
    match g.0 {
        0 => out.push(0),
        1 => out.push(2),
        2 => out.push(3),
        30 => out.push(4),
        g @ 0..=60 => out.extend([14, u8::try_from(g).unwrap_or(0)]),
        g => {
            out.push(19);
            out.extend(g.to_le_bytes());
        }
    }
}

fn container(out: &mut Vec<u8>, c: &ContainerSpec) {
    flag(out, c.pre_stop);
    flag(out, c.sidecar);
    flag(out, c.stopped);
}

fn new_object(out: &mut Vec<u8>, o: &NewObject) {
    out.push(o.kind);
    flag(out, o.tgps.is_some());
    if let Some(g) = o.tgps {
        grace(out, g);
    }
    out.push(o.finalizers);
    out.push(o.containers);
    for c in &o.specs {
        container(out, c);
    }
}

fn pre(out: &mut Vec<u8>, p: Pre) {
    let i = match p {
        Pre::Absent => 0,
        Pre::Matching => 1,
        Pre::Mismatching => 2,
    };
    variant(out, i, 3);
}

fn delete_spec(out: &mut Vec<u8>, d: &DeleteSpec) {
    match d.grace {
        GraceSel::Absent => variant(out, 0, 4),
        GraceSel::Value(g) => {
            variant(out, 1, 4);
            grace(out, g);
        }
        GraceSel::BelowStored(k) => {
            variant(out, 2, 4);
            out.push(k);
        }
        GraceSel::LandsAt(k) => {
            variant(out, 3, 4);
            out.push(k);
        }
    }
    pre(out, d.uid);
    pre(out, d.resource_version);
    flag(out, d.propagation.is_some());
    if let Some(p) = d.propagation {
        let i = match p {
            Propagation::Orphan => 0,
            Propagation::Background => 1,
            Propagation::Foreground => 2,
            Propagation::Unrecognized => 3,
            other => panic!("seeds: a policy the encoding does not know: {other:?}"),
        };
        variant(out, i, 4);
    }
    flag(out, d.orphan_dependents.is_some());
    if let Some(b) = d.orphan_dependents {
        flag(out, b);
    }
    flag(out, d.dry_run);
}

/// Ops in declaration order.
const OPS: u64 = 18;

fn op(out: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Create { name, object } => {
            variant(out, 0, OPS);
            out.push(*name);
            new_object(out, object);
        }
        Op::Delete { name, spec } => {
            variant(out, 1, OPS);
            out.push(*name);
            delete_spec(out, spec);
        }
        Op::AddFinalizer { name, finalizer } => {
            variant(out, 2, OPS);
            out.extend([*name, *finalizer]);
        }
        Op::RemoveFinalizer { name, finalizer } => {
            variant(out, 3, OPS);
            out.push(*name);
            match finalizer {
                FinalizerSel::Existing(i) => {
                    variant(out, 0, 2);
                    out.push(*i);
                }
                // The core's `Name` generator: pick 2 is this name.
                FinalizerSel::Named(_) => {
                    variant(out, 1, 2);
                    out.push(2);
                }
            }
        }
        Op::RemoveFinalizers { name } => {
            variant(out, 4, OPS);
            out.push(*name);
        }
        Op::AgentSync { name } => {
            variant(out, 5, OPS);
            out.push(*name);
        }
        Op::Evict { name, grace: g } => {
            variant(out, 6, OPS);
            out.push(*name);
            grace(out, *g);
        }
        Op::PreStopFinished { name, container } => {
            variant(out, 7, OPS);
            out.extend([*name, *container]);
        }
        Op::ContainerExited { name, container } => {
            variant(out, 8, OPS);
            out.extend([*name, *container]);
        }
        Op::Advance { ms } => {
            variant(out, 9, OPS);
            out.extend(ms.to_le_bytes());
        }
        Op::AdvanceSeconds { s } => {
            variant(out, 10, OPS);
            out.push(*s);
        }
        Op::ToDeadline { offset_ms } => {
            variant(out, 11, OPS);
            out.extend(offset_ms.to_le_bytes());
        }
        Op::Timeouts => variant(out, 12, OPS),
        Op::WallJump { ms } => {
            variant(out, 13, OPS);
            out.extend(ms.to_le_bytes());
        }
        Op::FailWrite { skip, applied } => {
            variant(out, 14, OPS);
            out.push(*skip);
            flag(out, *applied);
        }
        Op::CrashAfter { effects } => {
            variant(out, 15, OPS);
            out.push(*effects);
        }
        Op::Crash => variant(out, 16, OPS),
        Op::Reboot { mono } => {
            variant(out, 17, OPS);
            out.push(7);
            out.extend(mono.0.to_le_bytes());
        }
    }
}

/// The bytes `Input::arbitrary_take_rest` decodes into `input`.
pub fn encode(input: &Input) -> Vec<u8> {
    let mut out = vec![10];
    out.extend(input.wall.0.to_le_bytes());
    out.push(7);
    out.extend(input.mono.0.to_le_bytes());
    flag(&mut out, input.reset_full_grace);
    for o in &input.ops {
        flag(&mut out, true);
        op(&mut out, o);
    }
    out
}

fn input(reset_full_grace: bool, ops: Vec<Op>) -> Input {
    Input {
        wall: WallMs(1_700_000_000_000),
        mono: MonoMs(5_000_000),
        reset_full_grace,
        ops,
    }
}

fn sync(name: u8) -> Op {
    Op::AgentSync { name }
}

fn exit(name: u8, container: u8) -> Op {
    Op::ContainerExited { name, container }
}

/// The seeds: a name each, and the script.
pub fn scripts() -> Vec<(&'static str, Input)> {
    let hook_and_sidecar = || pod(&[(true, false), (false, true)]);
    let mut generic = pod(&[]);
    generic.kind = 0;
    generic.finalizers = 0b011;
    let mut held = pod(&[(false, false)]);
    held.finalizers = 0b100;
    vec![
        (
            "graceful_hook_sidecar",
            input(
                false,
                vec![
                    create(hook_and_sidecar()),
                    delete(30),
                    sync(0),
                    Op::AdvanceSeconds { s: 4 },
                    Op::PreStopFinished {
                        name: 0,
                        container: 0,
                    },
                    Op::ToDeadline { offset_ms: 0 },
                    exit(0, 0),
                    Op::ToDeadline { offset_ms: 0 },
                    exit(0, 1),
                ],
            ),
        ),
        (
            "lost_ack_on_delete",
            input(
                false,
                vec![
                    create(pod(&[(false, false)])),
                    fail(0, true),
                    delete(30),
                    Op::AdvanceSeconds { s: 5 },
                    delete(30),
                    sync(0),
                    Op::ToDeadline { offset_ms: -1 },
                    Op::ToDeadline { offset_ms: 0 },
                ],
            ),
        ),
        (
            "refused_removal",
            input(
                false,
                vec![
                    create(pod(&[(false, false)])),
                    delete(30),
                    sync(0),
                    fail(1, false),
                    exit(0, 0),
                    Op::Timeouts,
                ],
            ),
        ),
        (
            "crash_between_write_and_action",
            input(
                false,
                vec![
                    create(hook_and_sidecar()),
                    Op::CrashAfter { effects: 1 },
                    delete(10),
                    Op::CrashAfter { effects: 2 },
                    sync(0),
                    Op::CrashAfter { effects: 0 },
                    Op::ToDeadline { offset_ms: 0 },
                    Op::ToDeadline { offset_ms: 0 },
                    exit(0, 0),
                    Op::ToDeadline { offset_ms: 0 },
                ],
            ),
        ),
        (
            "reboot_mid_kill",
            input(
                false,
                vec![
                    create(pod(&[(true, false)])),
                    delete(30),
                    sync(0),
                    Op::AdvanceSeconds { s: 5 },
                    Op::Reboot { mono: MonoMs(0) },
                    Op::Timeouts,
                ],
            ),
        ),
        (
            "reset_full_grace_eviction",
            input(
                true,
                vec![
                    create(pod(&[(true, false)])),
                    Op::Evict {
                        name: 0,
                        grace: Grace(5),
                    },
                    delete(20),
                    sync(0),
                    Op::AdvanceSeconds { s: 3 },
                    Op::Crash,
                    Op::ToDeadline { offset_ms: 0 },
                    exit(0, 0),
                ],
            ),
        ),
        (
            "finalizers_force_and_lost_ack",
            input(
                false,
                vec![
                    Op::Create {
                        name: 1,
                        object: generic,
                    },
                    Op::Delete {
                        name: 1,
                        spec: DeleteSpec {
                            grace: GraceSel::Absent,
                            uid: Pre::Matching,
                            resource_version: Pre::Absent,
                            propagation: Some(Propagation::Orphan),
                            orphan_dependents: None,
                            dry_run: false,
                        },
                    },
                    Op::RemoveFinalizer {
                        name: 1,
                        finalizer: FinalizerSel::Existing(0),
                    },
                    Op::Crash,
                    Op::RemoveFinalizers { name: 1 },
                    create(held),
                    delete(0),
                    fail(0, true),
                    sync(0),
                    Op::WallJump { ms: -60_000 },
                    Op::RemoveFinalizers { name: 0 },
                    Op::ToDeadline { offset_ms: 0 },
                ],
            ),
        ),
    ]
}

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus/store_recovery")
}

#[test]
fn seeds_are_the_scripts() {
    let write = std::env::var_os("GRACE_FUZZ_WRITE_SEEDS").is_some_and(|v| v == "1");
    for (name, script) in scripts() {
        let bytes = encode(&script);
        let decoded = Input::arbitrary_take_rest(Unstructured::new(&bytes))
            .unwrap_or_else(|e| panic!("{name}: does not decode: {e}"));
        assert_eq!(
            format!("{decoded:?}"),
            format!("{script:?}"),
            "{name}: the bytes decode to another script"
        );
        check(&script).unwrap_or_else(|why| panic!("{name}: {why}"));
        let path = corpus().join(name);
        if write {
            std::fs::create_dir_all(corpus()).expect("corpus directory");
            std::fs::write(&path, &bytes).expect("seed written");
        }
        let committed = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (GRACE_FUZZ_WRITE_SEEDS=1 writes it)",
                path.display()
            )
        });
        assert_eq!(
            committed, bytes,
            "{name}: the committed seed is out of date"
        );
    }
}
