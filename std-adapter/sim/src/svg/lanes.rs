//! What to draw: a lane of bars, kills, removals and inputs for the
//! record and for each container.

use std::fmt::Write as _;

use grace_core::Phase;

use super::*;
use crate::timeline::{ActionKind, Entry, EntryKind, EventEntry, Outcome, RecordView};

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum BarKind {
    Pending,
    Terminating,
    FinalizerWait,
    PreStop,
    Sigterm,
}

impl BarKind {
    /// Its class, fill, label colour and tooltip.
    pub(super) fn style(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            BarKind::Pending => (
                "pending",
                PENDING,
                "#1a1a1a",
                "pending (deletion accepted, agent not started)",
            ),
            BarKind::Terminating => ("terminating", TERMINATING, "#1a1a1a", "Terminating"),
            BarKind::FinalizerWait => (
                "finalizer-wait",
                FINALIZER,
                "#ffffff",
                "finalizer wait (stopped, held by finalizers)",
            ),
            BarKind::PreStop => ("pre-stop", PRE_STOP, "#ffffff", "pre-stop hook"),
            BarKind::Sigterm => ("sigterm", SIGTERM, "#ffffff", "SIGTERM window"),
        }
    }
}

pub(super) struct Bar {
    pub(super) kind: BarKind,
    pub(super) from_ms: i64,
    /// `i64::MAX` when it never ends; past the right edge it is drawn open.
    pub(super) to_ms: i64,
    /// Labels to print inside, longest first; the first that fits is used.
    pub(super) labels: Vec<String>,
}

#[derive(Default)]
pub(super) struct Lane {
    pub(super) id: String,
    /// The full name.
    pub(super) name: String,
    pub(super) bars: Vec<Bar>,
    /// The container's process: alive from t = 0 until it stopped
    /// (`i64::MAX`: never); `None` when nothing happened to it.
    pub(super) running: Option<i64>,
    pub(super) kills: Vec<i64>,
    pub(super) stops: Vec<i64>,
    /// Removal times, and whether forced (D4).
    pub(super) removals: Vec<(i64, bool)>,
    /// Input events: time and a description.
    pub(super) inputs: Vec<(i64, String)>,
}

pub(super) fn record_lane(t: &Timeline) -> Lane {
    let mut lane = Lane {
        id: "lane-record".to_string(),
        name: "record (API)".to_string(),
        ..Lane::default()
    };
    let mut scan = RecordScan::new(t);
    for entry in &t.entries {
        scan.step(t, entry, &mut lane);
    }
    lane.bars.extend(phase_bars(&scan.phases, &scan.waits));
    lane.bars.extend(scan.waits.into_iter().map(wait_bar));
    lane
}

/// A finalizer wait: from, to (open while it lasts), the finalizers.
pub(super) type Wait = (i64, Option<i64>, Vec<String>);

/// The record lane's walk over the timeline: what is stored, the phases
/// and the finalizer waits found so far.
pub(super) struct RecordScan {
    pub(super) stored: bool,
    pub(super) record: Option<RecordView>,
    pub(super) phase: Phase,
    pub(super) acted: Vec<bool>,
    pub(super) stopped: Vec<bool>,
    pub(super) waits: Vec<Wait>,
    pub(super) phases: Vec<(Phase, i64, Option<i64>)>,
}

impl RecordScan {
    pub(super) fn new(t: &Timeline) -> Self {
        RecordScan {
            stored: true,
            record: None,
            phase: t.initial_phase,
            acted: vec![false; t.containers.len()],
            stopped: vec![false; t.containers.len()],
            waits: Vec::new(),
            phases: vec![(t.initial_phase, t.start_ms, None)],
        }
    }

    /// Takes in one entry: inputs and removals go on `lane`, then the
    /// finalizer wait opens or closes.
    pub(super) fn step(&mut self, t: &Timeline, entry: &Entry, lane: &mut Lane) {
        let at = entry.at_ms;
        match &entry.kind {
            EntryKind::Event(e) => {
                lane.inputs.push((at, describe_input(t, at, e)));
                if !e.dry_run && !matches!(e.outcome, Outcome::Conflict | Outcome::Invalid) {
                    self.record = Some(e.record.clone());
                    self.stored = e.stored;
                }
            }
            EntryKind::RecordWritten { record, stored } => {
                self.record = Some(record.clone());
                self.stored = *stored;
            }
            EntryKind::Action { kind, container } => self.action(at, kind, *container, lane),
            EntryKind::State(p) => {
                if let Some(last) = self.phases.last_mut() {
                    last.2 = Some(at);
                }
                self.phase = *p;
                self.phases.push((*p, at, None));
            }
        }
        self.update_wait(at);
    }

    pub(super) fn action(
        &mut self,
        at: i64,
        kind: &ActionKind,
        container: Option<usize>,
        lane: &mut Lane,
    ) {
        if let Some(a) = container.and_then(|i| self.acted.get_mut(i)) {
            *a = true;
        }
        match kind {
            ActionKind::ContainerStopped => {
                if let Some(s) = container.and_then(|i| self.stopped.get_mut(i)) {
                    *s = true;
                }
            }
            ActionKind::Remove { force } => {
                self.stored = false;
                lane.removals.push((at, *force));
            }
            ActionKind::Restart { .. } => {
                if let Some(s) = container.and_then(|i| self.stopped.get_mut(i)) {
                    *s = false;
                }
            }
            ActionKind::RemoveEndpoints
            | ActionKind::PreStop { .. }
            | ActionKind::Sigterm
            | ActionKind::Sigkill
            | ActionKind::BackOff { .. } => {}
        }
    }

    /// Finalizer waits: Terminating, stored, deletion requested,
    /// finalizers left, and every container the agent acted on stopped.
    pub(super) fn update_wait(&mut self, at: i64) {
        let holding = self.record.as_ref().filter(|r| {
            self.stored
                && self.phase == Phase::Terminating
                && r.deletion_timestamp.is_some()
                && !r.finalizers.is_empty()
                && self.acted.iter().zip(&self.stopped).all(|(a, s)| !a || *s)
        });
        let open = self.waits.last().is_some_and(|w| w.1.is_none());
        match (holding, open) {
            (Some(r), false) => self.waits.push((at, None, r.finalizers.clone())),
            (None, true) => {
                if let Some(w) = self.waits.last_mut() {
                    w.1 = Some(at);
                }
            }
            (Some(_), true) | (None, false) => {}
        }
    }
}

/// A bar per pending or terminating phase; a finalizer wait inside the
/// phase takes over from its start.
pub(super) fn phase_bars(phases: &[(Phase, i64, Option<i64>)], waits: &[Wait]) -> Vec<Bar> {
    let mut bars = Vec::new();
    for &(phase, from, to) in phases {
        let (kind, labels) = match phase {
            Phase::GracefulPending => (
                BarKind::Pending,
                vec!["GracefulPending".into(), "pending".into()],
            ),
            Phase::Terminating => (BarKind::Terminating, vec!["Terminating".into()]),
            // Live, Deleted: no bar.
            _ => continue,
        };
        let cut = waits
            .iter()
            .map(|w| w.0)
            .find(|&w| w >= from && to.is_none_or(|to| w < to));
        let to = match (cut, to) {
            (Some(c), _) => c,
            (None, Some(to)) => to,
            (None, None) => i64::MAX,
        };
        bars.push(Bar {
            kind,
            from_ms: from,
            to_ms: to,
            labels,
        });
    }
    bars
}

pub(super) fn wait_bar((from, to, finalizers): Wait) -> Bar {
    Bar {
        kind: BarKind::FinalizerWait,
        from_ms: from,
        to_ms: to.unwrap_or(i64::MAX),
        labels: vec![
            format!("finalizers: {}", finalizers.join(", ")),
            "finalizers".into(),
        ],
    }
}

pub(super) fn describe_input(t: &Timeline, at: i64, e: &EventEntry) -> String {
    let mut s = format!(
        "{} {}",
        relative_label(at.saturating_sub(t.start_ms)),
        e.event
    );
    if !e.detail.is_empty() {
        let _ = write!(s, " {}", e.detail);
    }
    let _ = write!(s, " → {}", e.outcome.name());
    if e.dry_run {
        s.push_str(" (dry run)");
    }
    if e.force {
        s.push_str(" (force)");
    }
    s
}

pub(super) fn container_lane(t: &Timeline, index: usize, options: &SvgOptions) -> Lane {
    let name = t.containers.get(index).cloned().unwrap_or_default();
    let mut lane = Lane {
        name,
        ..Lane::default()
    };
    let hook_ms = options.hook_ms.get(index).copied().flatten();
    let mut pre_stop: Option<(i64, i64)> = None;
    let mut sigterm: Option<i64> = None;
    let mut acted = false;
    for entry in &t.entries {
        let EntryKind::Action {
            kind,
            container: Some(c),
        } = &entry.kind
        else {
            continue;
        };
        if *c != index {
            continue;
        }
        let at = entry.at_ms;
        acted = true;
        // A signal or an exit ends the hook, if it still ran.
        if !matches!(kind, ActionKind::PreStop { .. })
            && let Some((from, budget)) = pre_stop.take()
        {
            lane.bars
                .push(pre_stop_bar(from, budget, hook_ms, Some(at)));
        }
        match kind {
            ActionKind::PreStop { budget_seconds } => {
                pre_stop = Some((at, *budget_seconds));
            }
            ActionKind::Sigterm => sigterm = Some(at),
            ActionKind::Sigkill | ActionKind::ContainerStopped => {
                if let Some(from) = sigterm.take() {
                    lane.bars.push(Bar {
                        kind: BarKind::Sigterm,
                        from_ms: from,
                        to_ms: at,
                        labels: vec!["SIGTERM".into()],
                    });
                }
                if matches!(kind, ActionKind::Sigkill) {
                    lane.kills.push(at);
                } else {
                    lane.stops.push(at);
                    if lane.running.is_none() {
                        lane.running = Some(at);
                    }
                }
            }
            ActionKind::RemoveEndpoints
            | ActionKind::Remove { .. }
            | ActionKind::BackOff { .. }
            | ActionKind::Restart { .. } => {}
        }
    }
    if let Some((from, budget)) = pre_stop {
        lane.bars.push(pre_stop_bar(from, budget, hook_ms, None));
    }
    if let Some(from) = sigterm {
        lane.bars.push(Bar {
            kind: BarKind::Sigterm,
            from_ms: from,
            to_ms: i64::MAX,
            labels: vec!["SIGTERM".into()],
        });
    }
    if acted && lane.running.is_none() {
        lane.running = Some(i64::MAX);
    }
    lane
}

/// A pre-stop bar from `from`: it ends when the hook returns (when its
/// duration is known; cut at its budget) or at `next`, the container's next
/// signal or exit, whichever is first.
pub(super) fn pre_stop_bar(
    from: i64,
    budget_seconds: i64,
    hook_ms: Option<i64>,
    next: Option<i64>,
) -> Bar {
    let budget_ms = budget_seconds.max(0).saturating_mul(1000);
    let returns = hook_ms.map(|h| from.saturating_add(h.max(0).min(budget_ms)));
    let to = match (returns, next) {
        (Some(r), Some(n)) => r.min(n),
        (Some(r), None) => r,
        (None, Some(n)) => n,
        (None, None) => i64::MAX,
    };
    Bar {
        kind: BarKind::PreStop,
        from_ms: from,
        to_ms: to,
        labels: vec![
            format!("pre-stop (budget {})", seconds_label(budget_ms)),
            "pre-stop".into(),
        ],
    }
}
