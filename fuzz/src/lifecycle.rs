//! The `lifecycle` target: one object, any sequence of inputs and time
//! jumps, and the invariants of core/RULES.md checked after every step by
//! grace-testkit's checker (the one grace-core's `invariants` property
//! tests use). A violation panics with the invariant's name, the step and
//! the states before and after.

use arbitrary::Arbitrary;
use grace_core::{DeleteOptions, FinalizerChange, Input as CoreInput, Lifecycle, Name};
use grace_testkit::checker::{self, Checker, Clock, Reply, Step};

use crate::input::{DeleteSpec, FinalizerSel, Grace, MonoMs, ObjectSpec, WallMs};

/// Finalizer capacity: small, so that a full list is common.
pub const F: usize = 3;
/// Container capacity.
pub const C: usize = 3;
/// The lifecycle under test.
pub type Lc = Lifecycle<F, C>;
/// Steps taken from one input at most (longer inputs are cut).
pub const MAX_OPS: usize = 128;

/// A fuzz input: the object, both clocks' start, and the steps.
#[derive(Arbitrary, Debug)]
pub struct Input {
    pub object: ObjectSpec,
    pub wall: WallMs,
    pub mono: MonoMs,
    pub ops: Vec<Op>,
}

/// One step.
#[derive(Arbitrary, Clone, Debug)]
pub enum Op {
    /// A delete request with structured preconditions.
    Delete(DeleteSpec),
    /// A delete request with any options at all.
    DeleteRaw(DeleteOptions),
    AddFinalizer(Name),
    RemoveFinalizer(FinalizerSel),
    AgentSync,
    Evict {
        grace: Grace,
    },
    /// Container index modulo `C + 1` (so `C` is an unknown container).
    PreStopDone {
        container: u8,
    },
    /// Container index modulo `C + 1`.
    Exit {
        container: u8,
    },
    NodeLost,
    NodeReady,
    Fence,
    /// `handle_timeout` at the current time.
    Timeout,
    /// Both clocks move on.
    Advance {
        ms: u16,
    },
    AdvanceSeconds {
        s: u16,
    },
    AdvanceRaw {
        ms: u64,
    },
    /// To the next deadline plus an offset (never backwards), then maybe
    /// `handle_timeout`.
    ToDeadline {
        offset_ms: i16,
        handle: bool,
    },
    /// Both clocks jump so that the monotonic one is `u64::MAX - back_ms`.
    NearEndOfMono {
        back_ms: u16,
    },
    /// Both clocks jump so that the wall clock is `i64::MAX - back_ms`.
    NearEndOfWall {
        back_ms: u16,
    },
    /// The wall clock alone jumps, either way (NTP); the monotonic clock
    /// never goes back.
    WallJump {
        ms: i64,
    },
    /// A stopped container started again (R92); index modulo `C + 1`.
    Start {
        container: u8,
    },
}

/// What one step fed in (`None`: only the clocks moved) and what came
/// back.
struct Applied {
    fed: Option<CoreInput>,
    reply: Reply<F>,
}

fn container(index: u8) -> usize {
    usize::from(index) % (C + 1)
}

fn apply(lc: &mut Lc, clock: &mut Clock, op: &Op) -> Applied {
    let fed = match op {
        Op::Delete(spec) => Some(CoreInput::Delete(spec.options(lc.record(), clock.wall))),
        Op::DeleteRaw(o) => Some(CoreInput::Delete(o.clone())),
        Op::AddFinalizer(n) => Some(CoreInput::FinalizerUpdate(FinalizerChange::Add(n.clone()))),
        Op::RemoveFinalizer(sel) => Some(CoreInput::FinalizerUpdate(FinalizerChange::Remove(
            sel.resolve(lc.record()),
        ))),
        Op::AgentSync => Some(CoreInput::AgentSync),
        Op::Evict { grace } => Some(CoreInput::evict(grace.0)),
        Op::PreStopDone { container: i } => Some(CoreInput::pre_stop_finished(container(*i))),
        Op::Exit { container: i } => Some(CoreInput::container_exited(container(*i))),
        Op::Start { container: i } => Some(CoreInput::container_started(container(*i))),
        Op::NodeLost => Some(CoreInput::NodeLost),
        Op::NodeReady => Some(CoreInput::NodeReady),
        Op::Fence => Some(CoreInput::NodeFenced),
        Op::Timeout => Some(CoreInput::Timeout),
        Op::Advance { ms } => {
            clock.advance(u64::from(*ms));
            None
        }
        Op::AdvanceSeconds { s } => {
            clock.advance(u64::from(*s) * 1000);
            None
        }
        Op::AdvanceRaw { ms } => {
            clock.advance(*ms);
            None
        }
        Op::ToDeadline { offset_ms, handle } => {
            if let Some(d) = lc.poll_timeout() {
                clock.advance_to_mono(i128::from(d.as_millis()) + i128::from(*offset_ms));
            }
            handle.then_some(CoreInput::Timeout)
        }
        Op::NearEndOfMono { back_ms } => {
            clock.advance_to_mono(i128::from(u64::MAX) - i128::from(*back_ms));
            None
        }
        Op::NearEndOfWall { back_ms } => {
            let delta = i128::from(i64::MAX) - i128::from(*back_ms) - i128::from(clock.wall);
            if delta > 0 {
                clock.advance(u64::try_from(delta).unwrap_or(u64::MAX));
            }
            None
        }
        Op::WallJump { ms } => {
            clock.wall = clock.wall.saturating_add(*ms);
            None
        }
    };
    let reply = match &fed {
        Some(input) => checker::feed(lc, clock.now(), input),
        None => Reply::Nothing,
    };
    Applied { fed, reply }
}

/// Runs one input, checking every invariant after every step.
pub fn run(input: &Input) {
    let mut clock = Clock {
        wall: input.wall.0,
        mono: input.mono.0,
    };
    let mut lc: Lc = input.object.lifecycle(clock.wall);
    if let Some(a) = lc.poll_action() {
        panic!("a new lifecycle owes {a:?}");
    }
    let mut checker = Checker::new(&lc);
    for (n, op) in input.ops.iter().take(MAX_OPS).enumerate() {
        let before = lc.clone();
        let Applied { fed, reply } = apply(&mut lc, &mut clock, op);
        let actions = match checker::drain(&mut lc) {
            Ok(actions) => actions,
            Err(actions) => panic!("step {n}: {op:?}: poll_action does not run dry: {actions:?}"),
        };
        let step = Step {
            input: fed.as_ref(),
            now: clock.now(),
            before: &before,
            after: &lc,
            reply: &reply,
            actions: &actions,
        };
        let violations = checker.check(&step);
        if let Some(first) = violations.first() {
            panic!(
                "invariant violated at step {n}: {op:?} at {:?}\n  {first}\n  (all: {violations:?})\n  actions: {actions:?}\n  reply: {reply:?}\n  before: {before:?}\n  after: {lc:?}",
                step.now
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::Grace;
    use grace_core::{ContainerSpec, PodPhase, Strategy};

    /// The pod: grace 30, one container without a hook, which
    /// ignores SIGTERM.
    fn pod() -> ObjectSpec {
        ObjectSpec {
            strategy: Strategy::POD,
            scheduled: true,
            phase: PodPhase::Running,
            tgps: Some(Grace(30)),
            generation: 1,
            resource_version: 1,
            finalizers: Vec::new(),
            containers: vec![ContainerSpec::default()],
            seeded: None,
        }
    }

    /// D5, R62: deleted and signalled at T, then at T+10 a second delete
    /// clamped to grace 1 (R16) or an eviction with grace 1: the checker
    /// wants SIGKILL no sooner than T+12 (T+10 + max(1, 2) s), which the
    /// older reading, max(T+10 + 1, T + 2) = T+11, broke.
    #[test]
    fn d5_r62_shortening_after_the_stop_signal_passes_the_checker() {
        let shortenings = [
            vec![Op::DeleteRaw(DeleteOptions::with_grace(5)), Op::AgentSync],
            vec![Op::Evict { grace: Grace(1) }],
        ];
        for shortening in shortenings {
            let mut ops = vec![
                Op::DeleteRaw(DeleteOptions::default()),
                Op::AgentSync,
                Op::AdvanceSeconds { s: 10 },
            ];
            ops.extend(shortening);
            ops.extend([
                Op::Advance { ms: 1_999 },
                Op::Timeout,
                Op::ToDeadline {
                    offset_ms: 0,
                    handle: true,
                },
                Op::Exit { container: 0 },
                Op::AgentSync,
            ]);
            run(&Input {
                object: pod(),
                wall: WallMs(1_700_000_000_000),
                mono: MonoMs(0),
                ops,
            });
        }
    }
}
