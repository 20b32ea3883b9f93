//! Labelled marks above the lanes (delete requests, SIGTERMs, SIGKILLs,
//! the removal), and the rows their labels are placed in.

use std::fmt::Write as _;

use super::*;
use crate::timeline::{ActionKind, EntryKind, EventEntry, Outcome};

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum MarkKind {
    Delete,
    Sigterm,
    Sigkill,
    Removed,
}

impl MarkKind {
    /// Its class and colour.
    pub(super) fn style(self) -> (&'static str, &'static str) {
        match self {
            MarkKind::Delete => ("delete", DELETE),
            MarkKind::Sigterm => ("sigterm", SIGTERM),
            MarkKind::Sigkill => ("sigkill", KILL),
            MarkKind::Removed => ("removed", REMOVED),
        }
    }
}

pub(super) struct Mark {
    pub(super) at_ms: i64,
    pub(super) kind: MarkKind,
    /// What happened; the time is added when drawn.
    pub(super) what: String,
    /// Containers concerned (SIGTERM, SIGKILL), merged at one instant.
    pub(super) who: Vec<String>,
}

pub(super) fn marks(t: &Timeline) -> Vec<Mark> {
    let mut marks: Vec<Mark> = Vec::new();
    for entry in &t.entries {
        let at = entry.at_ms;
        let (kind, what, who) = match &entry.kind {
            EntryKind::Event(e) if e.event == "delete" => (MarkKind::Delete, delete_label(e), None),
            EntryKind::Action { kind, container } => {
                let who = container
                    .and_then(|i| t.containers.get(i))
                    .cloned()
                    .unwrap_or_default();
                match kind {
                    ActionKind::Sigterm => (MarkKind::Sigterm, "SIGTERM".into(), Some(who)),
                    ActionKind::Sigkill => (MarkKind::Sigkill, "SIGKILL".into(), Some(who)),
                    ActionKind::Remove { force: false } => {
                        (MarkKind::Removed, "removed".into(), None)
                    }
                    ActionKind::Remove { force: true } => {
                        (MarkKind::Removed, "force-removed".into(), None)
                    }
                    ActionKind::RemoveEndpoints
                    | ActionKind::PreStop { .. }
                    | ActionKind::ContainerStopped
                    | ActionKind::BackOff { .. }
                    | ActionKind::Restart { .. } => continue,
                }
            }
            EntryKind::Event(_) | EntryKind::State(_) | EntryKind::RecordWritten { .. } => {
                continue;
            }
        };
        // Signals of several containers at one instant share a label.
        if let Some(who) = &who
            && let Some(m) = marks
                .iter_mut()
                .find(|m| m.at_ms == at && m.kind == kind && m.what == what)
        {
            m.who.push(who.clone());
            continue;
        }
        marks.push(Mark {
            at_ms: at,
            kind,
            what,
            who: who.into_iter().collect(),
        });
    }
    marks
}

pub(super) fn delete_label(e: &EventEntry) -> String {
    let mut s = String::from(if e.force { "force delete" } else { "delete" });
    match e.outcome {
        Outcome::Graceful | Outcome::Pending | Outcome::Deleted => {
            if let Some(g) = e.record.deletion_grace_period_seconds {
                let _ = write!(s, " (grace {})", count_label(g));
            }
            if matches!(e.outcome, Outcome::Pending) {
                s.push_str(": no change");
            }
        }
        Outcome::Conflict => s.push_str(": conflict"),
        Outcome::Invalid => s.push_str(": invalid"),
        Outcome::NotFound => s.push_str(": not found"),
        Outcome::Ok | Outcome::Ignored => {}
    }
    if e.dry_run {
        s.push_str(" (dry run)");
    }
    s
}

pub(super) struct PlacedLabel {
    pub(super) row: usize,
    pub(super) anchor_end: bool,
    pub(super) text: String,
}

/// Puts each label in the first row where it overlaps nothing (rows count
/// up from the lanes); when every row is taken, in the least crowded.
pub(super) fn place_labels(marks: &[Mark], axis: &Axis) -> Vec<PlacedLabel> {
    let mut rows: Vec<Vec<(f64, f64)>> = vec![Vec::new(); MAX_LABEL_ROWS];
    let mut placed = Vec::with_capacity(marks.len());
    for m in marks {
        let mut text = m.what.clone();
        if !m.who.is_empty() {
            text = format!("{}: {text}", truncate(&m.who.join(", "), 40));
        }
        let _ = write!(
            text,
            " {}",
            relative_label(m.at_ms.saturating_sub(axis.start_ms))
        );
        let x = axis.x(m.at_ms);
        let w = text_width(&text, CHAR_W);
        let anchor_end = x + 3.0 + w > WIDTH - 6.0;
        let extent = if anchor_end {
            (x - 3.0 - w, x - 3.0)
        } else {
            (x + 3.0, x + 3.0 + w)
        };
        let overlaps = |row: &Vec<(f64, f64)>| {
            row.iter()
                .filter(|(a, b)| extent.0 < b + 10.0 && *a - 10.0 < extent.1)
                .count()
        };
        // The first free row, else the least crowded one.
        let row = rows
            .iter()
            .position(|r| overlaps(r) == 0)
            .unwrap_or_else(|| {
                (rows.iter().enumerate())
                    .min_by_key(|(_, r)| overlaps(r))
                    .map_or(0, |(i, _)| i)
            });
        if let Some(r) = rows.get_mut(row) {
            r.push(extent);
        }
        placed.push(PlacedLabel {
            row,
            anchor_end,
            text,
        });
    }
    placed
}
