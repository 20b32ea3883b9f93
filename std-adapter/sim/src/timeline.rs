//! What a simulation produced, in time order, and its renderings: JSON lines
//! (the public format of docs/scenarios.md) and a readable text timeline.

use std::fmt::Write as _;

use grace_core::{Phase, PodPhase, Record};
use serde::Serialize;

/// A whole simulation's output.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    /// The object's name.
    pub name: String,
    /// The node it is bound to.
    pub node: Option<String>,
    /// Container names, by index.
    pub containers: Vec<String>,
    /// The phase before the first event.
    pub initial_phase: Phase,
    /// The first event's time (t = 0 of the text timeline), unix ms.
    pub start_ms: i64,
    /// Everything that happened, in order.
    pub entries: Vec<Entry>,
}

/// One line of the timeline.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// When, in unix milliseconds.
    pub at_ms: i64,
    /// What.
    pub kind: EntryKind,
}

/// The three kinds of line.
#[derive(Clone, Debug, PartialEq)]
pub enum EntryKind {
    /// A scenario input and its result.
    Event(EventEntry),
    /// Something the machine asked for.
    Action {
        /// Which action.
        kind: ActionKind,
        /// The container it concerns, by index.
        container: Option<usize>,
    },
    /// The lifecycle phase changed.
    State(Phase),
    /// The agent wrote the record on its own (its final delete, R75, or a
    /// status); shown in the text timeline, not part of the JSON format.
    RecordWritten {
        /// The record after the write.
        record: RecordView,
        /// Whether it is still stored.
        stored: bool,
    },
}

/// The actions of the JSON format.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ActionKind {
    /// `remove_endpoints`
    RemoveEndpoints,
    /// `pre_stop`, with its budget.
    PreStop {
        /// Whole seconds.
        budget_seconds: i64,
    },
    /// `sigterm`
    Sigterm,
    /// `sigkill`
    Sigkill,
    /// `container_stopped`
    ContainerStopped,
    /// `remove`; `force` when the workload may still run (D4).
    Remove {
        /// Removed before the workload was confirmed stopped.
        force: bool,
    },
    /// `back_off`: an exited container waits before it starts again
    /// (CrashLoopBackOff, R95, D9).
    BackOff {
        /// The wait, whole seconds.
        seconds: i64,
    },
    /// `restart`: the container is started again (R92, R93).
    Restart {
        /// Its restarts so far, this one included (`restartCount`).
        restart_count: u32,
    },
}

impl ActionKind {
    /// The name in the JSON format.
    pub fn name(self) -> &'static str {
        match self {
            ActionKind::RemoveEndpoints => "remove_endpoints",
            ActionKind::PreStop { .. } => "pre_stop",
            ActionKind::Sigterm => "sigterm",
            ActionKind::Sigkill => "sigkill",
            ActionKind::ContainerStopped => "container_stopped",
            ActionKind::Remove { .. } => "remove",
            ActionKind::BackOff { .. } => "back_off",
            ActionKind::Restart { .. } => "restart",
        }
    }
}

/// The result of an input, as docs/scenarios.md names it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Deletion accepted or shortened; kept.
    Graceful,
    /// Already in progress; nothing changed.
    Pending,
    /// Removed from storage now.
    Deleted,
    /// A precondition failed.
    Conflict,
    /// Bad options or a refused update.
    Invalid,
    /// Any other event that applied.
    Ok,
    /// The event does not apply in this state.
    Ignored,
    /// The object is gone.
    NotFound,
}

impl Outcome {
    /// The name in the JSON format (`graceful`, `not_found`, …).
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Graceful => "graceful",
            Outcome::Pending => "pending",
            Outcome::Deleted => "deleted",
            Outcome::Conflict => "conflict",
            Outcome::Invalid => "invalid",
            Outcome::Ok => "ok",
            Outcome::Ignored => "ignored",
            Outcome::NotFound => "not_found",
        }
    }
}

/// The record fields every event line carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordView {
    /// Unix seconds.
    pub deletion_timestamp: Option<i64>,
    /// Seconds.
    pub deletion_grace_period_seconds: Option<i64>,
    /// The object's generation.
    pub generation: i64,
    /// Finalizer names, in order.
    pub finalizers: Vec<String>,
    /// The store's version of the record.
    pub resource_version: u64,
    /// The pod's phase.
    pub pod_phase: PodPhase,
}

impl RecordView {
    /// The view of a core record.
    pub fn of<const F: usize>(record: &Record<F>) -> Self {
        RecordView {
            deletion_timestamp: record.deletion_timestamp.map(|t| t.as_unix_seconds()),
            deletion_grace_period_seconds: record.deletion_grace_period_seconds,
            generation: record.generation,
            finalizers: record.finalizers.iter().map(|f| f.to_string()).collect(),
            resource_version: record.resource_version,
            pod_phase: record.phase,
        }
    }
}

/// An input's line.
#[derive(Clone, Debug, PartialEq)]
pub struct EventEntry {
    /// The event's name (`delete`, `agent_sync`, …).
    pub event: &'static str,
    /// What the input said, for the text timeline (`grace 10`, a name).
    pub detail: String,
    /// The container of a `container_exit`.
    pub container: Option<usize>,
    /// Its result.
    pub outcome: Outcome,
    /// For `conflict` and `invalid`: why.
    pub error: Option<String>,
    /// A dry run: the fields are what would have been written.
    pub dry_run: bool,
    /// A force delete (D4).
    pub force: bool,
    /// The record after the event (see docs/scenarios.md for dry runs and removals).
    pub record: RecordView,
    /// Whether the record is stored after the event.
    pub stored: bool,
    /// The phase after the event.
    pub state: Phase,
}

/// `at` as docs/scenarios.md writes it: whole seconds as an integer, otherwise a
/// decimal.
#[derive(Serialize)]
#[serde(untagged)]
enum At {
    Whole(i64),
    Fraction(f64),
}

fn at(ms: i64) -> At {
    if ms.rem_euclid(1000) == 0 {
        At::Whole(ms.div_euclid(1000))
    } else {
        At::Fraction(ms as f64 / 1000.0)
    }
}

#[derive(Serialize)]
struct EventLine<'a> {
    at: At,
    event: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    container: Option<&'a str>,
    outcome: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    state: &'a str,
    stored: bool,
    deletion_timestamp: Option<i64>,
    deletion_grace_period_seconds: Option<i64>,
    generation: i64,
    finalizers: &'a [String],
    resource_version: String,
    pod_phase: &'a str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    dry_run: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    force: bool,
}

#[derive(Serialize)]
struct ActionLine<'a> {
    at: At,
    action: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    container: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    budget_seconds: Option<i64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    force: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    back_off_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    restart_count: Option<u32>,
}

#[derive(Serialize)]
struct StateLine<'a> {
    at: At,
    state: &'a str,
}

impl Timeline {
    fn container_name(&self, index: Option<usize>) -> Option<&str> {
        index
            .and_then(|i| self.containers.get(i))
            .map(String::as_str)
    }

    /// One JSON object per entry of the public format (docs/scenarios.md
    /// "Output"), serialised, in time order.
    pub fn json_lines(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter_map(|entry| {
                let line = match &entry.kind {
                    EntryKind::Event(e) => serde_json::to_string(&EventLine {
                        at: at(entry.at_ms),
                        event: e.event,
                        container: self.container_name(e.container),
                        outcome: e.outcome.name(),
                        error: e.error.as_deref(),
                        state: e.state.as_str(),
                        stored: e.stored,
                        deletion_timestamp: e.record.deletion_timestamp,
                        deletion_grace_period_seconds: e.record.deletion_grace_period_seconds,
                        generation: e.record.generation,
                        finalizers: &e.record.finalizers,
                        resource_version: e.record.resource_version.to_string(),
                        pod_phase: e.record.pod_phase.as_str(),
                        dry_run: e.dry_run,
                        force: e.force,
                    }),
                    EntryKind::Action { kind, container } => serde_json::to_string(&ActionLine {
                        at: at(entry.at_ms),
                        action: kind.name(),
                        container: self.container_name(*container),
                        budget_seconds: match kind {
                            ActionKind::PreStop { budget_seconds } => Some(*budget_seconds),
                            ActionKind::RemoveEndpoints
                            | ActionKind::Sigterm
                            | ActionKind::Sigkill
                            | ActionKind::ContainerStopped
                            | ActionKind::Remove { .. }
                            | ActionKind::BackOff { .. }
                            | ActionKind::Restart { .. } => None,
                        },
                        force: matches!(kind, ActionKind::Remove { force: true }),
                        back_off_seconds: match kind {
                            ActionKind::BackOff { seconds } => Some(*seconds),
                            _ => None,
                        },
                        restart_count: match kind {
                            ActionKind::Restart { restart_count } => Some(*restart_count),
                            _ => None,
                        },
                    }),
                    EntryKind::State(phase) => serde_json::to_string(&StateLine {
                        at: at(entry.at_ms),
                        state: phase.as_str(),
                    }),
                    EntryKind::RecordWritten { .. } => return None,
                };
                // Serialising these plain structs cannot fail.
                line.ok()
            })
            .collect()
    }

    /// JSON lines, one object a line, each line ending in a newline.
    pub fn to_json_lines(&self) -> String {
        let mut out = String::new();
        for line in self.json_lines() {
            out.push_str(&line);
            out.push('\n');
        }
        out
    }

    /// A timeline a person can read: times relative to the first event,
    /// what happened, and the phase as it changes.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let node = self.node.as_deref().unwrap_or("no node");
        let _ = writeln!(
            out,
            "{} on {} — containers: {}",
            self.name,
            node,
            if self.containers.is_empty() {
                "none".to_string()
            } else {
                self.containers.join(", ")
            }
        );
        let _ = writeln!(
            out,
            "t=0 is unix {}; starts {}\n",
            format_seconds(self.start_ms),
            self.initial_phase
        );
        let mut last_record: Option<(RecordView, bool)> = None;
        for entry in &self.entries {
            let t = relative(entry.at_ms.saturating_sub(self.start_ms));
            match &entry.kind {
                EntryKind::Event(e) => {
                    let mut line = format!("{:>10}  {}", t, e.event);
                    if !e.detail.is_empty() {
                        let _ = write!(line, " {}", e.detail);
                    }
                    let _ = write!(line, "  → {}", e.outcome.name());
                    if e.dry_run {
                        line.push_str(" (dry run, nothing written)");
                    }
                    if e.force {
                        line.push_str(" (FORCE: workload may still run)");
                    }
                    if let Some(err) = &e.error {
                        let _ = write!(line, ": {err}");
                    }
                    let _ = writeln!(out, "{line}");
                    if last_record.as_ref() != Some(&(e.record.clone(), e.stored))
                        || e.dry_run
                        || matches!(e.event, "delete" | "get")
                    {
                        let _ = writeln!(
                            out,
                            "{:>10}      {}",
                            "",
                            describe_record(&e.record, e.stored)
                        );
                    }
                    if !e.dry_run {
                        last_record = Some((e.record.clone(), e.stored));
                    }
                }
                EntryKind::RecordWritten { record, stored } => {
                    let what = match (stored, record.deletion_grace_period_seconds) {
                        (false, _) => "agent's final delete (grace 0, uid precondition)",
                        (true, Some(0)) => {
                            "agent's final delete (grace 0, uid precondition), held by finalizers"
                        }
                        (true, _) => "agent wrote the record",
                    };
                    let _ = writeln!(
                        out,
                        "{t:>10}    · {what} {}",
                        describe_record(record, *stored)
                    );
                    last_record = Some((record.clone(), *stored));
                }
                EntryKind::Action { kind, container } => {
                    let who = self
                        .container_name(*container)
                        .map(|c| format!("{c}: "))
                        .unwrap_or_default();
                    let what = match kind {
                        ActionKind::RemoveEndpoints => "removed from endpoints".to_string(),
                        ActionKind::PreStop { budget_seconds } => {
                            format!("pre-stop hook starts (budget {budget_seconds} s)")
                        }
                        ActionKind::Sigterm => "SIGTERM".to_string(),
                        ActionKind::Sigkill => "SIGKILL (grace spent)".to_string(),
                        ActionKind::ContainerStopped => "stopped".to_string(),
                        ActionKind::Remove { force: false } => "record removed".to_string(),
                        ActionKind::Remove { force: true } => {
                            "record removed (FORCE: workload may still run)".to_string()
                        }
                        ActionKind::BackOff { seconds } => {
                            format!("CrashLoopBackOff: starts again in {seconds} s")
                        }
                        ActionKind::Restart { restart_count } => {
                            format!("started again (restart {restart_count})")
                        }
                    };
                    let _ = writeln!(out, "{t:>10}    · {who}{what}");
                }
                EntryKind::State(phase) => {
                    let _ = writeln!(out, "{t:>10}    ▶ {phase}");
                }
            }
        }
        out
    }
}

fn describe_record(r: &RecordView, stored: bool) -> String {
    let mut s = String::new();
    match (r.deletion_timestamp, r.deletion_grace_period_seconds) {
        (Some(ts), Some(g)) => {
            let _ = write!(s, "deletion at {ts} (grace {g} s)");
        }
        (Some(ts), None) => {
            let _ = write!(s, "deletion at {ts}");
        }
        (None, _) => s.push_str("no deletion"),
    }
    let _ = write!(s, ", generation {}", r.generation);
    if !r.finalizers.is_empty() {
        let _ = write!(s, ", finalizers [{}]", r.finalizers.join(", "));
    }
    if !stored {
        s.push_str(", not stored");
    }
    format!("[{s}]")
}

fn format_seconds(ms: i64) -> String {
    if ms.rem_euclid(1000) == 0 {
        ms.div_euclid(1000).to_string()
    } else {
        let s = format!("{:.3}", ms as f64 / 1000.0);
        s.trim_end_matches('0').to_string()
    }
}

fn relative(ms: i64) -> String {
    format!("+{}s", format_seconds(ms))
}
