//! The `table` target: `Table<N, F, C>` against grace-testkit's `TableModel`, a `Vec` of
//! lifecycles, a `Vec` of the objects that owe actions (in the order they
//! came to owe them) and a linear scan for deadlines. Both get the same
//! inputs in the same order; they must answer the same, hold the same
//! lifecycles, report the same next deadline and hand out the same actions
//! for the same objects in the same order.

use arbitrary::Arbitrary;
use grace_core::Input as CoreInput;
use grace_core::{FinalizerChange, Id, Lifecycle, Name, Now, Table, TableFull};

use crate::input::{DeleteSpec, FinalizerSel, Grace, MonoMs, ObjectSpec, WallMs};
use grace_testkit::checker::Clock;
use grace_testkit::table_model::TableModel;

/// Capacity: small, so that a full table is common.
pub const N: usize = 4;
pub const F: usize = 2;
pub const C: usize = 2;
type Lc = Lifecycle<F, C>;
/// Steps taken from one input at most.
pub const MAX_OPS: usize = 160;

#[derive(Arbitrary, Debug)]
pub struct Input {
    pub wall: WallMs,
    pub mono: MonoMs,
    pub ops: Vec<Op>,
}

/// One step. `u8` picks an object: the model's live objects by position,
/// then ids that were removed (stale).
#[derive(Arbitrary, Debug)]
pub enum Op {
    Insert(ObjectSpec),
    Remove(u8),
    Delete(u8, DeleteSpec),
    Sync(u8),
    Evict(u8, Grace),
    HookDone(u8, u8),
    Exit(u8, u8),
    AddFinalizer(u8, Name),
    RemoveFinalizer(u8, FinalizerSel),
    NodeLost(u8),
    NodeReady(u8),
    Fence(u8),
    /// Both clocks move on, then `handle_timeouts`.
    Advance(u16),
    AdvanceSeconds(u16),
    /// To the table's next deadline plus an offset (never back), then
    /// `handle_timeouts`.
    ToDeadline(i16),
    /// The monotonic clock jumps to `u64::MAX - n`, then `handle_timeouts`.
    NearEndOfMono(u16),
    /// `handle_timeouts` without moving.
    Timeout,
    /// Take up to this many actions.
    Poll(u8),
}

/// The obviously correct restatement (shared with grace-core's `table`
/// property test).
type Model = TableModel<F, C>;

fn container(i: u8) -> usize {
    usize::from(i) % (C + 1)
}

/// `Table::handle_timeouts(now)`, which handles "every object whose deadline
/// is at or before `now`": no such deadline may be left, at the end of the
/// monotonic clock too (finding F1, fixed: see README.md). The model handles
/// everything due in one go.
fn table_timeout(table: &mut Table<N, F, C>, now: Now) -> Result<(), String> {
    table.handle_timeouts(now);
    match table.poll_timeout() {
        Some(t) if t <= now.mono => Err(format!(
            "handle_timeouts({} ms) left a deadline at {} ms",
            now.mono.as_millis(),
            t.as_millis()
        )),
        _ => Ok(()),
    }
}

/// Runs one input; panics on the first difference.
pub fn run(input: &Input) {
    let mut table: Table<N, F, C> = Table::new();
    let mut model = Model::default();
    let mut issued: Vec<Id> = Vec::new();
    let mut clock = Clock {
        wall: input.wall.0,
        mono: input.mono.0,
    };

    for (n, op) in input.ops.iter().take(MAX_OPS).enumerate() {
        let now = clock.now();
        // Live objects by position, then stale ids; None before any insert.
        let pick = |k: u8, model: &Model| -> Option<Id> {
            let stale: Vec<Id> = issued
                .iter()
                .copied()
                .filter(|id| model.objects.iter().all(|(i, _)| i != id))
                .collect();
            let total = model.objects.len() + stale.len();
            if total == 0 {
                return None;
            }
            let k = usize::from(k) % total;
            Some(match model.objects.get(k) {
                Some((id, _)) => *id,
                None => stale[k - model.objects.len()],
            })
        };
        let fail = |what: String| -> ! {
            panic!("table differs from the model at step {n}: {op:?} at {now:?}\n  {what}")
        };
        macro_rules! same {
            ($got:expr, $want:expr, $what:expr) => {{
                let (got, want) = ($got, $want);
                if got != want {
                    fail(format!("{}: table {:?}, model {:?}", $what, got, want));
                }
            }};
        }
        match op {
            Op::Insert(object) => {
                let lifecycle: Lc = object.lifecycle(clock.wall);
                match table.insert(lifecycle.clone()) {
                    Ok(id) => {
                        if model.objects.len() >= N {
                            fail(format!("insert beyond capacity {N}"));
                        }
                        if issued.contains(&id) {
                            fail(format!("id {id:?} issued twice"));
                        }
                        issued.push(id);
                        model.objects.push((id, lifecycle));
                        model.touched(id);
                    }
                    Err(TableFull(back)) => {
                        if model.objects.len() != N {
                            fail(format!("full with {} objects", model.objects.len()));
                        }
                        same!(back, lifecycle, "the lifecycle handed back");
                    }
                }
            }
            Op::Remove(k) => {
                let Some(id) = pick(*k, &model) else { continue };
                let got = table.remove(id);
                let pos = model.objects.iter().position(|(i, _)| *i == id);
                let want = pos.map(|p| model.objects.remove(p).1);
                model.ready.retain(|i| *i != id);
                same!(got, want, "remove");
                if table.get(id).is_some() {
                    fail("a removed id still resolves".into());
                }
            }
            Op::Delete(k, spec) => {
                let Some(id) = pick(*k, &model) else { continue };
                let record = model.get_mut(id).map(|l| l.record().clone());
                let options = match &record {
                    Some(r) => spec.options(r, clock.wall),
                    None => spec.options(&grace_core::Record::<F>::new(Name::new()), clock.wall),
                };
                let got = table.handle(now, id, CoreInput::Delete(options.clone()));
                let want = model
                    .get_mut(id)
                    .map(|l| l.handle(now, CoreInput::Delete(options.clone())));
                match want {
                    Some(want) => same!(got, Ok(want), "delete"),
                    None => {
                        if got.is_ok() {
                            fail("delete on an unknown id succeeded".into());
                        }
                    }
                }
                model.touched(id);
            }
            Op::Sync(k) => {
                let Some(id) = pick(*k, &model) else { continue };
                let got = table.handle(now, id, CoreInput::AgentSync).ok();
                let want = model
                    .get_mut(id)
                    .map(|l| l.handle(now, CoreInput::AgentSync));
                same!(got, want, "agent sync");
                model.touched(id);
            }
            Op::Evict(k, g) => {
                let Some(id) = pick(*k, &model) else { continue };
                let got = table.handle(now, id, CoreInput::evict(g.0)).ok();
                let want = model
                    .get_mut(id)
                    .map(|l| l.handle(now, CoreInput::evict(g.0)));
                same!(got, want, "evict");
                model.touched(id);
            }
            Op::HookDone(k, c) => {
                let Some(id) = pick(*k, &model) else { continue };
                let c = container(*c);
                let got = table.handle(now, id, CoreInput::pre_stop_finished(c)).ok();
                let want = model
                    .get_mut(id)
                    .map(|l| l.handle(now, CoreInput::pre_stop_finished(c)));
                same!(got, want, "pre-stop finished");
                model.touched(id);
            }
            Op::Exit(k, c) => {
                let Some(id) = pick(*k, &model) else { continue };
                let c = container(*c);
                let got = table.handle(now, id, CoreInput::container_exited(c)).ok();
                let want = model
                    .get_mut(id)
                    .map(|l| l.handle(now, CoreInput::container_exited(c)));
                same!(got, want, "container exited");
                model.touched(id);
            }
            Op::AddFinalizer(k, name) => {
                let Some(id) = pick(*k, &model) else { continue };
                let change = FinalizerChange::Add(name.clone());
                let got = table
                    .handle(now, id, CoreInput::FinalizerUpdate(change.clone()))
                    .ok();
                let want = model
                    .get_mut(id)
                    .map(|l| l.handle(now, CoreInput::FinalizerUpdate(change.clone())));
                same!(got, want, "add finalizer");
                model.touched(id);
            }
            Op::RemoveFinalizer(k, sel) => {
                let Some(id) = pick(*k, &model) else { continue };
                let name = match model.get_mut(id) {
                    Some(l) => sel.resolve(l.record()),
                    None => Name::new(),
                };
                let change = FinalizerChange::Remove(name);
                let got = table
                    .handle(now, id, CoreInput::FinalizerUpdate(change.clone()))
                    .ok();
                let want = model
                    .get_mut(id)
                    .map(|l| l.handle(now, CoreInput::FinalizerUpdate(change.clone())));
                same!(got, want, "remove finalizer");
                model.touched(id);
            }
            Op::NodeLost(k) => {
                let Some(id) = pick(*k, &model) else { continue };
                let got = table.handle(now, id, CoreInput::NodeLost).ok();
                let want = model
                    .get_mut(id)
                    .map(|l| l.handle(now, CoreInput::NodeLost));
                same!(got, want, "node lost");
                model.touched(id);
            }
            Op::NodeReady(k) => {
                let Some(id) = pick(*k, &model) else { continue };
                let got = table.handle(now, id, CoreInput::NodeReady).ok();
                let want = model
                    .get_mut(id)
                    .map(|l| l.handle(now, CoreInput::NodeReady));
                same!(got, want, "node ready");
                model.touched(id);
            }
            Op::Fence(k) => {
                let Some(id) = pick(*k, &model) else { continue };
                let got = table.handle(now, id, CoreInput::NodeFenced).ok();
                let want = model
                    .get_mut(id)
                    .map(|l| l.handle(now, CoreInput::NodeFenced));
                same!(got, want, "node fenced");
                model.touched(id);
            }
            Op::Advance(ms) | Op::AdvanceSeconds(ms) => {
                let ms = u64::from(*ms);
                let ms = if matches!(op, Op::AdvanceSeconds(_)) {
                    ms * 1000
                } else {
                    ms
                };
                clock.advance(ms);
                table_timeout(&mut table, clock.now()).unwrap_or_else(|e| fail(e));
                model.handle_timeouts(clock.now());
            }
            Op::ToDeadline(offset) => {
                if let Some(t) = table.poll_timeout() {
                    let target = i128::from(t.as_millis()) + i128::from(*offset);
                    let delta = target - i128::from(clock.mono);
                    if delta > 0 {
                        clock.advance(u64::try_from(delta).unwrap_or(u64::MAX));
                    }
                }
                table_timeout(&mut table, clock.now()).unwrap_or_else(|e| fail(e));
                model.handle_timeouts(clock.now());
            }
            Op::NearEndOfMono(back) => {
                let target = u64::MAX - u64::from(*back);
                if target > clock.mono {
                    clock.advance(target - clock.mono);
                }
                table_timeout(&mut table, clock.now()).unwrap_or_else(|e| fail(e));
                model.handle_timeouts(clock.now());
            }
            Op::Timeout => {
                table_timeout(&mut table, now).unwrap_or_else(|e| fail(e));
                model.handle_timeouts(now);
            }
            Op::Poll(count) => {
                for _ in 0..*count {
                    let got = table.poll_action();
                    let want = model.poll_action();
                    same!(got, want, "poll_action");
                    if got.is_none() {
                        break;
                    }
                }
            }
        }
        same!(table.poll_timeout(), model.poll_timeout(), "poll_timeout");
        same!(table.len(), model.objects.len(), "len");
        for (id, lifecycle) in &model.objects {
            same!(table.get(*id), Some(lifecycle), format!("object {id:?}"));
        }
        let mut listed: Vec<Id> = table.iter().map(|(id, _)| id).collect();
        let mut expected: Vec<Id> = model.objects.iter().map(|(id, _)| *id).collect();
        if !listed.windows(2).all(|w| w[0].index() < w[1].index()) {
            fail(format!("iter is not in slot order: {listed:?}"));
        }
        listed.sort();
        expected.sort();
        same!(listed, expected, "iter");
    }
    // Drain both to the end: the same remaining actions.
    for _ in 0..10_000 {
        let got = table.poll_action();
        let want = model.poll_action();
        if got != want {
            panic!(
                "table differs from the model in the final drain: table {got:?}, model {want:?}"
            );
        }
        if got.is_none() {
            return;
        }
    }
    panic!("poll_action never runs dry");
}

#[cfg(test)]
mod tests {
    use grace_core::{
        ContainerSpec, Input as CoreInput, Instant, Lifecycle, Name, Now, Record, Strategy, Table,
        WallTime,
    };

    /// Finding F1 (fuzz/README.md, fixed): at the very end of the monotonic
    /// clock deadlines saturate to `now` and a handled object stays due;
    /// the table's loop bound once ran out before every due object was
    /// handled. `Table::handle_timeouts` promises to handle "every object
    /// whose deadline is at or before `now`".
    #[test]
    fn f1_end_of_time_leaves_due_objects() {
        let spec = [
            ContainerSpec {
                pre_stop: true,
                sidecar: true,
                stopped: false,
            },
            ContainerSpec {
                pre_stop: true,
                sidecar: false,
                stopped: false,
            },
        ];
        let mut table: Table<2, 0, 2> = Table::new();
        let start = Now::new(
            WallTime::from_unix_millis(0),
            Instant::from_millis(u64::MAX - 10_000),
        );
        for uid in ["a", "b"] {
            let record = Record::new(Name::try_from(uid).unwrap());
            let pod = Lifecycle::new(Strategy::POD, record, &spec).unwrap();
            let id = table.insert(pod).unwrap();
            assert_eq!(
                table
                    .handle(start, id, CoreInput::evict(30))
                    .map(grace_core::Reply::handled),
                Ok(grace_core::Handled::Applied)
            );
        }
        while table.poll_action().is_some() {}
        let end = Now::new(WallTime::from_unix_millis(10_000), Instant::MAX);
        table.handle_timeouts(end);
        assert_eq!(
            table.poll_timeout(),
            None,
            "a deadline at or before now is left"
        );
    }
}
