//! The board's decisions, apart from its hardware and its log, so that a
//! host test (`core/tests/embedded_example.rs`) drives the same code: what
//! each workload does when the board carries out an action, and when the
//! board may forget an object.

use grace_core::{Action, Id, Phase, Table};

/// One pod, as the scenario defines it.
pub struct Spec {
    /// Its name, which is also its uid.
    pub name: &'static str,
    /// The grace of its delete request, in seconds; 0 is a force delete.
    pub grace: i64,
    /// Whether its container has a pre-stop hook (which hangs).
    pub pre_stop: bool,
    /// The process exits this long after SIGTERM; `None`: it ignores SIGTERM.
    pub exits_after_sigterm_ms: Option<u64>,
}

/// Something the outside world does to a pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The node agent sees the deletion (or the removal) and acts on it.
    AgentSync,
    /// The container's process exits.
    Exit,
}

/// One pod at run time: its id in the table, the last phase logged, the
/// next thing the outside world does to it, and whether the board has
/// forgotten it (its slot freed).
pub struct Pod {
    /// The scenario's pod.
    pub spec: &'static Spec,
    /// Its slot in the table.
    pub id: Id,
    /// The phase last seen.
    pub phase: Phase,
    /// When, in ms since boot, the world next does what.
    pub event: Option<(u64, Event)>,
    /// Out of the table: nothing more can happen to it.
    pub forgotten: bool,
}

/// What the workload does when the board carries out `action` at `ms`.
pub fn carry_out(pod: &mut Pod, action: Action, ms: u64) {
    match action {
        Action::SendStopSignal { .. } => {
            if let Some(after) = pod.spec.exits_after_sigterm_ms {
                pod.event = Some((ms.saturating_add(after), Event::Exit));
            }
        }
        // SIGKILL cannot be ignored: the process is gone at once.
        Action::SendKill { .. } => pod.event = Some((ms, Event::Exit)),
        // The hook hangs and never reports back; the rest needs nothing of
        // the workload. `Remove` is the record's end, not the object's: a
        // force delete's kill goes on.
        Action::RemoveEndpoints
        | Action::RunPreStop { .. }
        | Action::ContainerStopped { .. }
        | Action::Remove { .. } => {}
        // An action added to the core later: nothing to carry out here.
        _ => {}
    }
}

/// Frees the pod's slot once it is finished (removed, nothing owed,
/// nothing running); returns whether it did.
pub fn forget_if_finished<const N: usize, const F: usize, const C: usize, const L: usize>(
    table: &mut Table<N, F, C, L>,
    pod: &mut Pod,
) -> bool {
    if !pod.forgotten && table.remove_finished(pod.id).is_some() {
        pod.forgotten = true;
    }
    pod.forgotten
}
