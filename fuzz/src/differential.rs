//! The `differential` target: the core's pure decisions against
//! [`crate::reference`], field by field. Any difference panics.

use arbitrary::Arbitrary;
use grace_core::Input as CoreInput;
use grace_core::{
    Action, Conflict, Container, ContainerSpec, DeleteError, DeleteOptions, DeleteOutcome,
    FinalizerChange, Handled, Instant, InvalidOptions, Lifecycle, Name, Now, Record, Strategy,
    Timestamp, UpdateError, WallTime, decide_delete, decide_finalizer_update, effective_grace,
    pod_grace_period,
};

use crate::input::{DeleteSpec, FinalizerSel, Grace, MonoMs, ObjectSpec, WallMs};
use crate::reference as model;

/// Finalizer capacity of the records compared.
pub const F: usize = 4;

/// One comparison of each kind.
#[derive(Arbitrary, Debug)]
pub struct Input {
    pub object: ObjectSpec,
    pub now: WallMs,
    pub delete: DeleteInput,
    pub update: (bool, FinalizerSel),
    pub kubelet: KubeletInput,
    pub budget: (Grace, Option<Grace>, Option<Grace>, Option<Grace>),
}

/// A delete request: structured (mostly) or raw `DeleteOptions`.
#[derive(Arbitrary, Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "fuzz inputs: a name or options inline, of any Kubernetes length"
)]
pub enum DeleteInput {
    Structured(DeleteSpec),
    Raw(DeleteOptions),
}

/// One container's kill, started by a deletion or an eviction.
#[derive(Arbitrary, Debug)]
pub struct KubeletInput {
    pub start: MonoMs,
    pub evict: Option<Grace>,
    pub dgps: Option<Grace>,
    pub tgps: Option<Grace>,
    /// None: no hook; Some(None): a hook that hangs; Some(Some(ms)).
    pub hook: Option<Option<Duration>>,
    pub exits_after: Option<Duration>,
}

/// Milliseconds, biased to whole seconds and their neighbours.
#[derive(Clone, Copy, Debug)]
pub struct Duration(pub u64);

impl<'a> Arbitrary<'a> for Duration {
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        let pick: u8 = u.arbitrary()?;
        Ok(Duration(match pick % 6 {
            0 => u64::from(u.int_in_range(0u32..=40)?) * 1000,
            1 => u64::from(u.int_in_range(0u32..=40)?) * 1000 + u.int_in_range(0..=999)?,
            2 => (u64::from(u.int_in_range(0u32..=40)?) * 1000).saturating_sub(1),
            3 => u.int_in_range(0..=100_000)?,
            4 => u64::MAX - u.int_in_range(0..=100)?,
            _ => u.arbitrary()?,
        }))
    }
}

pub use grace_testkit::convert::{to_obj, to_opts, to_type};

fn to_refused(e: &DeleteError) -> Option<model::Refused> {
    Some(match e {
        DeleteError::Invalid(InvalidOptions::OrphanDependentsWithPropagationPolicy) => {
            model::Refused::InvalidBothOrphanAndPolicy
        }
        DeleteError::Invalid(InvalidOptions::UnrecognizedPropagationPolicy) => {
            model::Refused::InvalidPolicy
        }
        DeleteError::Conflict(Conflict::Uid) => model::Refused::ConflictUid,
        DeleteError::Conflict(Conflict::ResourceVersion) => model::Refused::ConflictResourceVersion,
        DeleteError::TooManyFinalizers => model::Refused::TooManyFinalizers,
        _ => return None,
    })
}

fn options(input: &DeleteInput, record: &Record<F>, now_ms: i64) -> DeleteOptions {
    match input {
        DeleteInput::Structured(spec) => spec.options(record, now_ms),
        DeleteInput::Raw(o) => o.clone(),
    }
}

/// Runs every comparison; panics on the first difference.
pub fn run(input: &Input) {
    let record: Record<F> = input.object.record(input.now.0);
    let opts = options(&input.delete, &record, input.now.0);
    compare_delete(&record, &input.object.strategy, &opts, input.now.0);
    compare_update(&record, input.update.0, &input.update.1);
    compare_budget(input.budget);
    compare_pod_grace(&record, opts.grace_period_seconds);
    compare_kill(&input.kubelet);
}

/// `decide_delete` against [`model::delete`].
pub fn compare_delete(record: &Record<F>, strategy: &Strategy, opts: &DeleteOptions, now_ms: i64) {
    let core = decide_delete(record, strategy, opts, WallTime::from_unix_millis(now_ms));
    let want = model::delete(
        &to_obj(record),
        &to_type(strategy),
        &to_opts(opts),
        now_ms,
        F,
    );
    let context = || {
        format!(
            "\n  stored:   {record:?}\n  strategy: {strategy:?}\n  options:  {opts:?}\n  now:      {now_ms} ms"
        )
    };
    match (&core, &want) {
        (Err(e), Err(w)) => {
            if to_refused(e) != Some(*w) {
                panic!(
                    "decide_delete: refused with {e:?}, the reference says {w:?}{}",
                    context()
                );
            }
        }
        (Ok(d), Ok(w)) => {
            let outcome = match d.outcome {
                DeleteOutcome::Graceful => model::Outcome::Graceful,
                DeleteOutcome::Pending => model::Outcome::Pending,
                DeleteOutcome::Deleted => model::Outcome::Deleted,
                other => panic!("unknown to the checker: {other:?}"),
            };
            let got = model::Decision {
                outcome,
                record: to_obj(&d.record),
                write: d.write,
                remove: d.remove,
                grace: d.grace_period_seconds,
            };
            if got != *w {
                panic!(
                    "decide_delete differs from the reference{}\n  core:      {got:?}\n  reference: {w:?}",
                    context()
                );
            }
        }
        _ => panic!(
            "decide_delete: core {core:?}, reference {want:?}{}",
            context()
        ),
    }
}

/// `decide_finalizer_update` against [`model::update`].
pub fn compare_update(record: &Record<F>, add: bool, which: &FinalizerSel) {
    let name: Name = which.resolve(record);
    let (change, model_change) = if add {
        (
            FinalizerChange::Add(name.clone()),
            model::Change::Add(name.as_str().into()),
        )
    } else {
        (
            FinalizerChange::Remove(name.clone()),
            model::Change::Remove(name.as_str().into()),
        )
    };
    let core = decide_finalizer_update(record, &change);
    let want = model::update(&to_obj(record), &model_change, F);
    let same = match (&core, &want) {
        (Ok(d), Ok((r, write, remove))) => {
            to_obj(&d.record) == *r && d.write == *write && d.remove == *remove
        }
        (
            Err(UpdateError::NoNewFinalizersWhileDeleting),
            Err(model::UpdateRefused::NoNewFinalizersWhileDeleting),
        )
        | (Err(UpdateError::TooManyFinalizers), Err(model::UpdateRefused::TooManyFinalizers)) => {
            true
        }
        _ => false,
    };
    if !same {
        panic!(
            "decide_finalizer_update differs from the reference\n  stored: {record:?}\n  change: {change:?}\n  core:      {core:?}\n  reference: {want:?}"
        );
    }
}

/// `effective_grace` against [`model::effective_grace`].
pub fn compare_budget((remembered, d, o, s): (Grace, Option<Grace>, Option<Grace>, Option<Grace>)) {
    // The agent remembers 0 (not started) or a budget of at least 1 s.
    let remembered = if remembered.0 < 1 { 0 } else { remembered.0 };
    let (d, o, s) = (d.map(|g| g.0), o.map(|g| g.0), s.map(|g| g.0));
    let core = effective_grace(remembered, d, o, s);
    let want = model::effective_grace(remembered, d, o, s);
    if (core.seconds, core.shortened) != want {
        panic!(
            "effective_grace({remembered}, {d:?}, {o:?}, {s:?}) = {core:?}, the reference says {want:?}"
        );
    }
}

/// `pod_grace_period` against [`model::check_graceful_delete`] (after R9).
pub fn compare_pod_grace(record: &Record<F>, requested: Option<i64>) {
    let requested = requested.map(|g| if g < 0 { 1 } else { g });
    let core = pod_grace_period(record, requested);
    let want = model::check_graceful_delete(&to_obj(record), requested);
    if core != want {
        panic!("pod_grace_period({record:?}, {requested:?}) = {core}, the reference says {want}");
    }
}

/// One container, no sidecars: the times of the pre-stop hook, the stop
/// signal and SIGKILL against [`model::kill_times`].
pub fn compare_kill(k: &KubeletInput) {
    let wall = WallTime::from_unix_millis(1_700_000_000_000);
    let at = |ms: u64| Now::new(wall, Instant::from_millis(ms));
    let mut record = Record::<1>::new(crate::input::name(crate::input::UID));
    record.termination_grace_period_seconds = k.tgps.map(|g| g.0);
    if k.evict.is_none() {
        record.deletion_timestamp = Some(Timestamp::from_unix_seconds(1_700_000_030));
        record.deletion_grace_period_seconds = k.dgps.map(|g| g.0);
    }
    let spec = ContainerSpec {
        pre_stop: k.hook.is_some(),
        sidecar: false,
        stopped: false,
    };
    let mut pod = match Lifecycle::<1, 1>::new(Strategy::POD, record, &[spec]) {
        Ok(p) => p,
        Err(e) => panic!("harness: {e}"),
    };
    let start = k.start.0;
    let (g0, started) = match k.evict {
        Some(o) => (
            model::effective_grace(0, None, Some(o.0), k.tgps.map(|g| g.0)).0,
            pod.handle(at(start), CoreInput::evict(o.0)).handled(),
        ),
        None => (
            model::effective_grace(0, k.dgps.map(|g| g.0), None, k.tgps.map(|g| g.0)).0,
            pod.handle(at(start), CoreInput::AgentSync).handled(),
        ),
    };
    assert_eq!(started, Handled::Applied, "the kill starts");
    let want = model::kill_times(
        start,
        g0,
        k.hook.map(|h| h.map(|d| d.0)),
        k.exits_after.map(|d| d.0),
    );

    // Drive the container: at each instant the world's reports (the hook
    // returning, the process exiting) come first, then the deadlines.
    let mut hook_returns: Option<u64> = None;
    let mut exits: Option<u64> = None;
    let mut got_budget = None;
    let mut got_signal = None;
    let mut got_kill = None;
    let mut now = start;
    for _round in 0..32 {
        while let Some(action) = pod.poll_action() {
            match action {
                Action::RunPreStop {
                    container,
                    budget_seconds,
                } => {
                    // The action's budget saturates at 32 bits; the
                    // container keeps the exact one.
                    let exact = pod
                        .containers()
                        .get(usize::from(container))
                        .map(Container::budget_seconds);
                    let saturated = exact.map(|b| u32::try_from(b).unwrap_or(u32::MAX));
                    if saturated != Some(budget_seconds) {
                        panic!("pre-stop budget {budget_seconds} s, container's {exact:?}");
                    }
                    got_budget = exact;
                    hook_returns = match k.hook {
                        Some(Some(d)) => now.checked_add(d.0),
                        _ => None,
                    };
                }
                Action::SendStopSignal { .. } => {
                    got_signal = Some(now);
                    hook_returns = None;
                    exits = k.exits_after.and_then(|d| now.checked_add(d.0));
                }
                Action::SendKill { .. } => {
                    got_kill = Some(now);
                    exits = Some(now);
                }
                Action::ContainerStopped { .. } => exits = None,
                Action::RemoveEndpoints | Action::Remove { .. } => {}
                other => panic!("unknown to the checker: {other:?}"),
            }
        }
        let deadline = pod.poll_timeout().map(Instant::as_millis);
        let world = [hook_returns, exits].into_iter().flatten().min();
        let next = match (world, deadline) {
            (None, None) => break,
            (Some(w), Some(d)) => w.min(d),
            (Some(w), None) => w,
            (None, Some(d)) => d,
        };
        now = now.max(next);
        if hook_returns == Some(now) {
            hook_returns = None;
            let _ = pod
                .handle(at(now), CoreInput::pre_stop_finished(0))
                .container();
        } else if exits == Some(now) {
            exits = None;
            let _ = pod
                .handle(at(now), CoreInput::container_exited(0))
                .container();
        } else {
            let _ = pod.handle(at(now), CoreInput::Timeout);
        }
    }
    let got = (got_budget, got_signal, got_kill);
    let expected = (
        want.pre_stop_budget,
        Some(want.stop_signal_at),
        want.kill_at,
    );
    if got != expected {
        panic!(
            "kill of one container differs from the budget in one line of RULES.md (R58–R66): {k:?} (G0 = {g0})\n  core (hook budget, stop signal, SIGKILL):      {got:?}\n  reference: {expected:?}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// R16's edge: a shortened timestamp equal to now (to the millisecond)
    /// is not clamped and keeps the requested grace.
    #[test]
    fn r16_equality_with_now_is_compared() {
        let mut record = Record::<F>::new(crate::input::name(crate::input::UID));
        record.deletion_timestamp = Some(Timestamp::from_unix_seconds(1030));
        record.deletion_grace_period_seconds = Some(30);
        let d = decide_delete(
            &record,
            &Strategy::POD,
            &DeleteOptions::with_grace(5),
            WallTime::from_unix_millis(1_005_000),
        )
        .unwrap();
        assert_eq!(d.record.deletion_grace_period_seconds, Some(5));
        compare_delete(
            &record,
            &Strategy::POD,
            &DeleteOptions::with_grace(5),
            1_005_000,
        );
        compare_delete(
            &record,
            &Strategy::POD,
            &DeleteOptions::with_grace(5),
            1_005_001,
        );
    }
}
