//! `grace simulate --format svg`: a [`Timeline`] as a picture, written by
//! hand as SVG text.
//!
//! One lane for the record (the API level) and one per container, in
//! declaration order; bars for the phases (pending, Terminating, finalizer
//! wait; pre-stop hook, SIGTERM window), a distinct mark at each SIGKILL,
//! labelled guide lines at the delete requests, SIGTERMs, SIGKILLs and the
//! removal, and an axis in seconds since the first event.
//!
//! The output is deterministic (same timeline, same bytes) and every
//! coordinate is finite: times are clamped to the axis, which is at least
//! one second long, and a scenario `until` far past the last entry is
//! clipped rather than squashing the picture.
//!
//! Elements carry ids and classes a program can find: lanes are
//! `<g id="lane-record" class="lane record">` and
//! `<g id="lane-NAME" class="lane container" data-container="NAME">`; bars
//! are `<rect class="bar KIND">` with `KIND` one of `pending`,
//! `terminating`, `finalizer-wait`, `pre-stop`, `sigterm`; a SIGKILL is a
//! `<line class="kill">` at its time; the axis is `<g id="axis">` with one
//! `<g class="tick" data-ms="..">` per tick.

use std::fmt::Write as _;

use grace_core::Phase;

use crate::scenario::Scenario;
use crate::timeline::{ActionKind, Entry, EntryKind, EventEntry, Outcome, RecordView, Timeline};

/// What the picture may know beyond the timeline itself (the scenario's
/// world model). [`SvgOptions::default`] knows nothing more.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SvgOptions {
    /// The scenario's `until`, unix milliseconds. When later than the last
    /// entry it becomes the right edge, clipped at four times the entries'
    /// span (at least 10 s past the last entry).
    pub until_ms: Option<i64>,
    /// How long each container's pre-stop hook runs (by index), in
    /// milliseconds. With it, a pre-stop bar ends where the hook returned;
    /// without it, at the container's next signal.
    pub hook_ms: Vec<Option<i64>>,
}

impl SvgOptions {
    /// The options a scenario gives: its `until` and its hooks' durations.
    pub fn of(scenario: &Scenario) -> Self {
        SvgOptions {
            until_ms: scenario.until_ms,
            hook_ms: scenario.containers.iter().map(|c| c.pre_stop_ms).collect(),
        }
    }
}

impl Timeline {
    /// The timeline as an SVG picture, from the timeline alone.
    pub fn to_svg(&self) -> String {
        self.to_svg_with(&SvgOptions::default())
    }

    /// The timeline as an SVG picture, using what `options` add.
    pub fn to_svg_with(&self, options: &SvgOptions) -> String {
        let axis = Axis::new(self, options);
        let record = record_lane(self);
        let containers: Vec<Lane> = (0..self.containers.len())
            .map(|i| container_lane(self, i, options))
            .collect();
        let marks = marks(self);
        render(self, &axis, &record, &containers, &marks)
    }
}

// ---------------------------------------------------------------------------
// Layout and colours.

const WIDTH: f64 = 960.0;
/// The plot's left and right edges.
const X0: f64 = 160.0;
const X1: f64 = 930.0;
const LANE_H: f64 = 36.0;
const BAR_H: f64 = 16.0;
const LABEL_ROW_H: f64 = 15.0;
const MAX_LABEL_ROWS: usize = 6;
/// Approximate advance of one character at the 11 px label size.
const CHAR_W: f64 = 6.3;
/// Most steps between ticks on the axis.
const MAX_STEPS: f64 = 10.0;
/// The longest lane name shown in full.
const MAX_LANE_LABEL: usize = 20;

const PENDING: &str = "#f5b83d";
const TERMINATING: &str = "#a9c4e8";
const FINALIZER: &str = "#7e57c2";
const PRE_STOP: &str = "#26a69a";
const SIGTERM: &str = "#ef6c00";
const KILL: &str = "#c62828";
const RUNNING: &str = "#8d8d8d";
const REMOVED: &str = "#212121";
const DELETE: &str = "#1565c0";
const INPUT: &str = "#616161";

// ---------------------------------------------------------------------------
// The axis: relative milliseconds to x.

struct Axis {
    /// t = 0, unix ms.
    start_ms: i64,
    /// The right edge, ms after `start_ms` (≥ 1000).
    edge_ms: f64,
    /// Tick spacing, ms (1, 2 or 5 × a power of ten, ≥ 100).
    step_ms: f64,
    /// The scenario's `until`, relative, when it lies past the right edge.
    clipped_until_ms: Option<i64>,
}

impl Axis {
    fn new(timeline: &Timeline, options: &SvgOptions) -> Self {
        let start_ms = timeline.start_ms;
        let last = timeline
            .entries
            .iter()
            .map(|e| e.at_ms.saturating_sub(start_ms).max(0))
            .max()
            .unwrap_or(0);
        let until = options.until_ms.map(|u| u.saturating_sub(start_ms));
        let mut clipped_until_ms = None;
        let end = match until {
            Some(u) if u > last => {
                let cap = last.saturating_mul(4).max(last.saturating_add(10_000));
                if u > cap {
                    clipped_until_ms = Some(u);
                }
                // The requested edge: no padding.
                u.min(cap) as f64
            }
            _ => {
                let end = last as f64;
                end + (end * 0.05).max(1000.0)
            }
        };
        let end = end.max(1000.0);
        let step_ms = nice_step(end / MAX_STEPS);
        let edge_ms = (end / step_ms).ceil() * step_ms;
        Axis {
            start_ms,
            edge_ms: if edge_ms.is_finite() && edge_ms >= 1000.0 {
                edge_ms
            } else {
                end
            },
            step_ms,
            clipped_until_ms,
        }
    }

    /// Milliseconds after t = 0, clamped to the axis.
    fn rel(&self, at_ms: i64) -> f64 {
        (at_ms.saturating_sub(self.start_ms).max(0) as f64).min(self.edge_ms)
    }

    /// The x of an absolute time.
    fn x(&self, at_ms: i64) -> f64 {
        self.x_rel(self.rel(at_ms))
    }

    /// The x of a time relative to t = 0.
    fn x_rel(&self, rel_ms: f64) -> f64 {
        X0 + rel_ms.clamp(0.0, self.edge_ms) / self.edge_ms * (X1 - X0)
    }

    /// The right edge as a unix time (saturating).
    fn edge_unix_ms(&self) -> i64 {
        // `as` saturates; the edge is finite and non-negative.
        self.start_ms.saturating_add(self.edge_ms as i64)
    }
}

/// The smallest 1, 2 or 5 × 10^k milliseconds (≥ 100 ms) at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let mut magnitude = 100.0;
    // 10^2 .. 10^21 ms covers every i64 span.
    for _ in 0..20 {
        for m in [1.0, 2.0, 5.0] {
            if m * magnitude >= raw {
                return m * magnitude;
            }
        }
        magnitude *= 10.0;
    }
    magnitude
}

// ---------------------------------------------------------------------------
// What to draw: lanes of bars and marks.

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum BarKind {
    Pending,
    Terminating,
    FinalizerWait,
    PreStop,
    Sigterm,
}

impl BarKind {
    /// Its class, fill, label colour and tooltip.
    fn style(self) -> (&'static str, &'static str, &'static str, &'static str) {
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

struct Bar {
    kind: BarKind,
    from_ms: i64,
    /// `i64::MAX` when it never ends; past the right edge it is drawn open.
    to_ms: i64,
    /// Labels to print inside, longest first; the first that fits is used.
    labels: Vec<String>,
}

#[derive(Default)]
struct Lane {
    id: String,
    /// The full name.
    name: String,
    bars: Vec<Bar>,
    /// The container's process: alive from t = 0 until it stopped
    /// (`i64::MAX`: never); `None` when nothing happened to it.
    running: Option<i64>,
    kills: Vec<i64>,
    stops: Vec<i64>,
    /// Removal times, and whether forced (D4).
    removals: Vec<(i64, bool)>,
    /// Input events: time and a description.
    inputs: Vec<(i64, String)>,
}

fn record_lane(t: &Timeline) -> Lane {
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
type Wait = (i64, Option<i64>, Vec<String>);

/// The record lane's walk over the timeline: what is stored, the phases
/// and the finalizer waits found so far.
struct RecordScan {
    stored: bool,
    record: Option<RecordView>,
    phase: Phase,
    acted: Vec<bool>,
    stopped: Vec<bool>,
    waits: Vec<Wait>,
    phases: Vec<(Phase, i64, Option<i64>)>,
}

impl RecordScan {
    fn new(t: &Timeline) -> Self {
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
    fn step(&mut self, t: &Timeline, entry: &Entry, lane: &mut Lane) {
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

    fn action(&mut self, at: i64, kind: &ActionKind, container: Option<usize>, lane: &mut Lane) {
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
            ActionKind::RemoveEndpoints
            | ActionKind::PreStop { .. }
            | ActionKind::Sigterm
            | ActionKind::Sigkill => {}
        }
    }

    /// Finalizer waits: Terminating, stored, deletion requested,
    /// finalizers left, and every container the agent acted on stopped.
    fn update_wait(&mut self, at: i64) {
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
fn phase_bars(phases: &[(Phase, i64, Option<i64>)], waits: &[Wait]) -> Vec<Bar> {
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

fn wait_bar((from, to, finalizers): Wait) -> Bar {
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

fn describe_input(t: &Timeline, at: i64, e: &EventEntry) -> String {
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

fn container_lane(t: &Timeline, index: usize, options: &SvgOptions) -> Lane {
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
            ActionKind::RemoveEndpoints | ActionKind::Remove { .. } => {}
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
fn pre_stop_bar(from: i64, budget_seconds: i64, hook_ms: Option<i64>, next: Option<i64>) -> Bar {
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

// ---------------------------------------------------------------------------
// Labelled marks above the lanes.

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum MarkKind {
    Delete,
    Sigterm,
    Sigkill,
    Removed,
}

impl MarkKind {
    /// Its class and colour.
    fn style(self) -> (&'static str, &'static str) {
        match self {
            MarkKind::Delete => ("delete", DELETE),
            MarkKind::Sigterm => ("sigterm", SIGTERM),
            MarkKind::Sigkill => ("sigkill", KILL),
            MarkKind::Removed => ("removed", REMOVED),
        }
    }
}

struct Mark {
    at_ms: i64,
    kind: MarkKind,
    /// What happened; the time is added when drawn.
    what: String,
    /// Containers concerned (SIGTERM, SIGKILL), merged at one instant.
    who: Vec<String>,
}

fn marks(t: &Timeline) -> Vec<Mark> {
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
                    | ActionKind::ContainerStopped => continue,
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

fn delete_label(e: &EventEntry) -> String {
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

// ---------------------------------------------------------------------------
// Numbers and text.

/// A coordinate: two decimals at most, never `-0`, never NaN or infinite.
fn num(v: f64) -> String {
    if !v.is_finite() {
        return "0".to_string();
    }
    let s = format!("{:.2}", v + 0.0);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" || s.is_empty() {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// A large magnitude in short scientific notation (`9.2e18`).
fn sci(v: f64) -> String {
    let s = format!("{v:.1e}");
    match s.split_once('e') {
        Some((m, e)) => format!("{}e{e}", m.trim_end_matches('0').trim_end_matches('.')),
        None => s,
    }
}

/// A count of seconds, short even when absurd.
fn count_label(seconds: i64) -> String {
    if seconds.unsigned_abs() >= 1_000_000 {
        format!("{} s", sci(seconds as f64))
    } else {
        format!("{seconds} s")
    }
}

/// Milliseconds as seconds: `30 s`, `11.5 s`, `2.5e11 s`.
fn seconds_label(ms: i64) -> String {
    if ms.unsigned_abs() >= 1_000_000_000 {
        return format!("{} s", sci(ms as f64 / 1000.0));
    }
    format!("{} s", plain_seconds(ms))
}

/// Unix milliseconds as seconds, in full: `1000`, `1000.5`.
fn plain_seconds(ms: i64) -> String {
    let whole = ms.div_euclid(1000);
    match ms.rem_euclid(1000) {
        0 => whole.to_string(),
        frac => format!("{whole}.{}", format!("{frac:03}").trim_end_matches('0')),
    }
}

/// A time relative to t = 0: `+30 s`.
fn relative_label(ms: i64) -> String {
    format!("+{}", seconds_label(ms.max(0)))
}

/// A tick label: `+5 s`, `+0.2 s`, `+2e11 s`.
fn tick_label(ms: f64, step_ms: f64) -> String {
    let s = ms / 1000.0;
    if s.abs() >= 1e6 {
        format!("+{} s", sci(s))
    } else if step_ms < 1000.0 {
        format!("+{s:.1} s")
    } else {
        format!("+{s:.0} s")
    }
}

/// Text made safe for XML: escaped, and without characters XML 1.0 forbids.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(' '),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {
                out.push('\u{fffd}');
            }
            c => out.push(c),
        }
    }
    out
}

/// A name cut to `max` characters, with an ellipsis when cut.
fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

fn text_width(s: &str, char_w: f64) -> f64 {
    s.chars().count() as f64 * char_w
}

/// An id made of safe characters, unique among `taken`.
fn lane_id(name: &str, index: usize, taken: &[String]) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let base = match cleaned.is_empty() {
        true => format!("lane-{index}"),
        false => format!("lane-{cleaned}"),
    };
    let (mut id, mut n) = (base.clone(), index);
    while taken.contains(&id) {
        id = format!("{base}-{n}");
        n = n.saturating_add(1);
    }
    id
}

// ---------------------------------------------------------------------------
// Rendering.

struct PlacedLabel {
    row: usize,
    anchor_end: bool,
    text: String,
}

/// Puts each label in the first row where it overlaps nothing (rows count
/// up from the lanes); when every row is taken, in the least crowded.
fn place_labels(marks: &[Mark], axis: &Axis) -> Vec<PlacedLabel> {
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
        let row = (0..MAX_LABEL_ROWS)
            .find(|&r| overlaps(&rows[r]) == 0)
            .unwrap_or_else(|| {
                (0..MAX_LABEL_ROWS)
                    .min_by_key(|&r| overlaps(&rows[r]))
                    .unwrap_or(0)
            });
        rows[row].push(extent);
        placed.push(PlacedLabel {
            row,
            anchor_end,
            text,
        });
    }
    placed
}

/// Tooltip markup: `<title>` with the text escaped.
fn title(text: &str) -> String {
    format!("<title>{}</title>", esc(text))
}

fn render(t: &Timeline, axis: &Axis, record: &Lane, containers: &[Lane], marks: &[Mark]) -> String {
    let labels = place_labels(marks, axis);
    let label_rows = labels.iter().map(|l| l.row + 1).max().unwrap_or(1);
    let lanes_top = 58.0 + label_rows as f64 * LABEL_ROW_H + 8.0;
    let ids = lane_ids(record, containers);
    let lanes: Vec<(&Lane, &str, f64)> = std::iter::once(record)
        .chain(containers)
        .zip(&ids)
        .enumerate()
        .map(|(i, (lane, id))| (lane, id.as_str(), lanes_top + i as f64 * LANE_H))
        .collect();
    let lanes_bottom = lanes_top + lanes.len() as f64 * LANE_H;
    let axis_y = lanes_bottom + 6.0;
    let legend_top = axis_y + 48.0;
    let mut legend = String::new();
    let legend_h = render_legend(&mut legend, legend_top);
    let height = legend_top + legend_h + 10.0;

    let mut out = String::new();
    render_heading(&mut out, t, axis, height);
    render_backgrounds(&mut out, &lanes);
    let _ = writeln!(out, "</g>\n<g id=\"guides\">");
    for (m, l) in marks.iter().zip(&labels) {
        render_guide(&mut out, axis, m, l, lanes_top, axis_y);
    }
    let _ = writeln!(out, "</g>\n<g id=\"lanes\">");
    for (i, (lane, id, y)) in lanes.iter().enumerate() {
        render_lane(&mut out, axis, lane, id, i == 0, *y);
    }
    // Labels last, on a white halo, so no line crosses their text.
    let _ = writeln!(out, "</g>\n<g id=\"marks\">");
    for (m, l) in marks.iter().zip(&labels) {
        render_mark_label(&mut out, axis, m, l, lanes_top);
    }
    let _ = writeln!(out, "</g>");
    render_axis(&mut out, axis, axis_y);
    out.push_str(&legend);
    out.push_str("</svg>\n");
    out
}

/// Lane ids: the record first, then the containers, all distinct.
fn lane_ids(record: &Lane, containers: &[Lane]) -> Vec<String> {
    let mut ids = vec![record.id.clone()];
    for (i, lane) in containers.iter().enumerate() {
        let id = lane_id(&lane.name, i, &ids);
        ids.push(id);
    }
    ids
}

/// The `<svg>` element, its background, the title and the subtitle.
fn render_heading(out: &mut String, t: &Timeline, axis: &Axis, height: f64) {
    let (width, height) = (num(WIDTH), num(height));
    let tip = title(&format!("{}: graceful deletion timeline", t.name));
    let _ = writeln!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" font-size="11">{tip}"##
    );
    let _ = writeln!(
        out,
        r##"<rect class="background" width="{width}" height="{height}" fill="#ffffff"/>"##
    );
    let heading = esc(&format!("{} — graceful deletion", truncate(&t.name, 80)));
    let _ = writeln!(
        out,
        r##"<text id="title" x="16" y="26" font-size="16" font-weight="bold" fill="#1a1a1a">{heading}</text>"##
    );
    let containers_list = if t.containers.is_empty() {
        "none".to_string()
    } else {
        t.containers.join(", ")
    };
    let mut subtitle = format!(
        "node {} · containers: {containers_list} · t = 0 is unix {} · starts {}",
        t.node.as_deref().unwrap_or("none"),
        plain_seconds(t.start_ms),
        t.initial_phase
    );
    if let Some(u) = axis.clipped_until_ms {
        let _ = write!(subtitle, " · until {} (axis clipped)", relative_label(u));
    }
    let subtitle = esc(&truncate(&subtitle, 150));
    let _ = writeln!(
        out,
        r##"<text id="subtitle" x="16" y="44" fill="#555555">{subtitle}</text>"##
    );
}

/// Lane backgrounds (the record's tinted, the containers' alternating),
/// drawn first so the guide lines and bars sit on them.
fn render_backgrounds(out: &mut String, lanes: &[(&Lane, &str, f64)]) {
    let _ = writeln!(out, "<g id=\"lane-backgrounds\">");
    let (w, h) = (num(X1 + 2.0), num(LANE_H));
    for (i, (_, _, y)) in lanes.iter().enumerate() {
        let fill = match i {
            0 => "#eef2f8",
            i if i % 2 == 1 => "#f7f7f7",
            _ => "#fdfdfd",
        };
        let y = num(*y);
        let _ = writeln!(
            out,
            r#"<rect x="8" y="{y}" width="{w}" height="{h}" fill="{fill}"/>"#
        );
    }
}

/// A marked time's dashed line, from its label's row down to the axis.
fn render_guide(
    out: &mut String,
    axis: &Axis,
    m: &Mark,
    l: &PlacedLabel,
    lanes_top: f64,
    axis_y: f64,
) {
    let x = num(axis.x(m.at_ms));
    let ms = m.at_ms.saturating_sub(axis.start_ms).max(0);
    let top = num(lanes_top - 4.0 - l.row as f64 * LABEL_ROW_H);
    let bottom = num(axis_y);
    let (class, colour) = m.kind.style();
    let _ = writeln!(
        out,
        r#"<line class="guide {class}" data-ms="{ms}" x1="{x}" y1="{top}" x2="{x}" y2="{bottom}" stroke="{colour}" stroke-dasharray="3 3" opacity="0.7"/>"#
    );
}

/// A marked time's label, in the row and on the side placed for it.
fn render_mark_label(out: &mut String, axis: &Axis, m: &Mark, l: &PlacedLabel, lanes_top: f64) {
    let x = axis.x(m.at_ms);
    let (tx, anchor) = match l.anchor_end {
        true => (num(x - 3.0), "end"),
        false => (num(x + 3.0), "start"),
    };
    let y = num(lanes_top - 6.0 - l.row as f64 * LABEL_ROW_H);
    let ms = m.at_ms.saturating_sub(axis.start_ms).max(0);
    let ((class, colour), text) = (m.kind.style(), esc(&l.text));
    let _ = writeln!(
        out,
        r##"<text class="mark {class}" data-ms="{ms}" x="{tx}" y="{y}" text-anchor="{anchor}" fill="{colour}" stroke="#ffffff" stroke-width="3" paint-order="stroke">{text}</text>"##
    );
}

/// Where a lane sits: its top, its middle and its bars' top.
#[derive(Clone, Copy)]
struct LaneY {
    top: f64,
    mid: f64,
    bar: f64,
}

fn render_lane(out: &mut String, axis: &Axis, lane: &Lane, id: &str, is_record: bool, y: f64) {
    let mid = y + LANE_H / 2.0;
    let at = LaneY {
        top: y,
        mid,
        bar: mid - BAR_H / 2.0,
    };
    render_lane_label(out, lane, id, is_record, at);
    render_running(out, axis, lane, is_record, at);
    for bar in &lane.bars {
        render_bar(out, axis, bar, at);
    }
    render_stops(out, axis, &lane.stops, at);
    render_kills(out, axis, &lane.kills, at);
    render_removals(out, axis, &lane.removals, at);
    render_inputs(out, axis, &lane.inputs, at);
    let _ = writeln!(out, "</g>");
}

/// `at` relative to the axis's start (`+4 s`).
fn rel(axis: &Axis, at: i64) -> String {
    relative_label(at.saturating_sub(axis.start_ms))
}

/// Opens the lane's group and writes its name at the left.
fn render_lane_label(out: &mut String, lane: &Lane, id: &str, is_record: bool, at: LaneY) {
    let id = esc(id);
    if is_record {
        let _ = writeln!(out, r#"<g id="{id}" class="lane record">"#);
    } else {
        let name = esc(&lane.name);
        let _ = writeln!(
            out,
            r#"<g id="{id}" class="lane container" data-container="{name}">"#
        );
    }
    let (label_x, label_y) = (num(X0 - 10.0), num(at.mid + 4.0));
    let weight = if is_record { "bold" } else { "normal" };
    let (short, tip) = (
        esc(&truncate(&lane.name, MAX_LANE_LABEL)),
        title(&lane.name),
    );
    let _ = writeln!(
        out,
        r##"<text class="lane-label" x="{label_x}" y="{label_y}" text-anchor="end" font-size="12" font-weight="{weight}" fill="#1a1a1a">{short}{tip}</text>"##
    );
}

/// The thin line of a running process, or "no action" for a container
/// the agent never acted on.
fn render_running(out: &mut String, axis: &Axis, lane: &Lane, is_record: bool, at: LaneY) {
    let (x0, mid) = (num(X0), num(at.mid));
    match lane.running {
        Some(until) => {
            let x2 = num(axis.x(until));
            let tip = title(&match until > axis.edge_unix_ms() {
                true => "running, still at the right edge".to_string(),
                false => format!("running until {}", rel(axis, until)),
            });
            let _ = writeln!(
                out,
                r#"<line class="running" x1="{x0}" y1="{mid}" x2="{x2}" y2="{mid}" stroke="{RUNNING}" stroke-width="2">{tip}</line>"#
            );
        }
        None if !is_record => {
            let (x, label_y) = (num(X0 + 6.0), num(at.mid + 4.0));
            let _ = writeln!(
                out,
                r##"<text class="idle" x="{x}" y="{label_y}" fill="#999999" font-style="italic">no action</text>"##
            );
        }
        None => {}
    }
}

/// One bar: its rectangle with a tooltip, an arrow when it is still open
/// at the right edge, and the longest of its labels that fits.
fn render_bar(out: &mut String, axis: &Axis, bar: &Bar, at: LaneY) {
    let (left, right) = (axis.x(bar.from_ms), axis.x(bar.to_ms));
    let width = right - left;
    if width <= 0.0 {
        return;
    }
    let open = bar.to_ms > axis.edge_unix_ms();
    let until = match open {
        true => "(still at the right edge)".to_string(),
        false => rel(axis, bar.to_ms),
    };
    let (class, fill, text_fill, describe) = bar.kind.style();
    let mut tip = format!("{describe}: {} → {until}", rel(axis, bar.from_ms));
    if let Some(first) = bar.labels.first().filter(|l| *l != describe) {
        let _ = write!(tip, " · {first}");
    }
    let tip = title(&tip);
    let open_class = if open { " open" } else { "" };
    let (x, w, bar_y, bar_h) = (num(left), num(width), num(at.bar), num(BAR_H));
    let _ = writeln!(
        out,
        r#"<rect class="bar {class}{open_class}" x="{x}" y="{bar_y}" width="{w}" height="{bar_h}" rx="2" fill="{fill}">{tip}</rect>"#
    );
    if open && width > 12.0 {
        let (a, b, mid) = (num(right - 9.0), num(right - 4.0), num(at.mid));
        let (top, bottom) = (num(at.bar + 4.0), num(at.bar + BAR_H - 4.0));
        let _ = writeln!(
            out,
            r##"<polyline class="open-end" points="{a},{top} {b},{mid} {a},{bottom}" fill="none" stroke="#ffffff" stroke-width="1.5"/>"##
        );
    }
    let room = width - if open { 18.0 } else { 8.0 };
    if let Some(label) = bar.labels.iter().find(|l| text_width(l, 5.8) <= room) {
        let (x, y, label) = (num(left + 4.0), num(at.mid + 3.5), esc(label));
        let _ = writeln!(
            out,
            r#"<text class="bar-label" x="{x}" y="{y}" font-size="10" fill="{text_fill}">{label}</text>"#
        );
    }
}

/// A short tick where the process stopped by itself.
fn render_stops(out: &mut String, axis: &Axis, stops: &[i64], at: LaneY) {
    let (tick_top, tick_bottom) = (num(at.mid - 5.0), num(at.mid + 5.0));
    for &when in stops {
        let (x, tip) = (
            num(axis.x(when)),
            title(&format!("stopped {}", rel(axis, when))),
        );
        let _ = writeln!(
            out,
            r#"<line class="stopped" x1="{x}" y1="{tick_top}" x2="{x}" y2="{tick_bottom}" stroke="{RUNNING}" stroke-width="2">{tip}</line>"#
        );
    }
}

/// A thick red line and a cross at each SIGKILL.
fn render_kills(out: &mut String, axis: &Axis, kills: &[i64], at: LaneY) {
    let (kill_top, kill_bottom) = (num(at.bar - 5.0), num(at.bar + BAR_H + 5.0));
    let glyph_top = num(at.bar - 11.0);
    for &when in kills {
        let xf = axis.x(when);
        let (x, l, r) = (num(xf), num(xf - 4.0), num(xf + 4.0));
        let tip = title(&format!("SIGKILL {}", rel(axis, when)));
        let _ = writeln!(
            out,
            r#"<line class="kill" x1="{x}" y1="{kill_top}" x2="{x}" y2="{kill_bottom}" stroke="{KILL}" stroke-width="4">{tip}</line>"#
        );
        let _ = writeln!(
            out,
            r#"<path class="kill-glyph" d="M{l} {glyph_top} L{r} {kill_top} M{r} {glyph_top} L{l} {kill_top}" stroke="{KILL}" stroke-width="2"/>"#
        );
    }
}

/// A narrow block where the record was removed (forced or not).
fn render_removals(out: &mut String, axis: &Axis, removals: &[(i64, bool)], at: LaneY) {
    let (removed_y, removed_h) = (num(at.bar - 4.0), num(BAR_H + 8.0));
    for &(when, force) in removals {
        let (class, what) = match force {
            true => ("removed force", "force-removed"),
            false => ("removed", "removed"),
        };
        let (x, tip) = (
            num(axis.x(when) - 1.5),
            title(&format!("{what} {}", rel(axis, when))),
        );
        let _ = writeln!(
            out,
            r#"<rect class="{class}" x="{x}" y="{removed_y}" width="3" height="{removed_h}" fill="{REMOVED}">{tip}</rect>"#
        );
    }
}

/// A small triangle at the lane's foot for each input, its tooltip saying
/// what it was.
fn render_inputs(out: &mut String, axis: &Axis, inputs: &[(i64, String)], at: LaneY) {
    let (tip_y, base_y) = (num(at.top + LANE_H - 7.0), num(at.top + LANE_H - 1.0));
    for (when, what) in inputs {
        let xf = axis.x(*when);
        let (l, x, r, tip) = (num(xf - 3.5), num(xf), num(xf + 3.5), title(what));
        let _ = writeln!(
            out,
            r#"<polygon class="input" points="{l},{base_y} {r},{base_y} {x},{tip_y}" fill="{INPUT}">{tip}</polygon>"#
        );
    }
}

fn render_axis(out: &mut String, axis: &Axis, y: f64) {
    let (start, edge) = (axis.start_ms, num(axis.edge_ms));
    let (x0, x1, y0, y5, y17) = (num(X0), num(X1), num(y), num(y + 5.0), num(y + 17.0));
    let _ = writeln!(
        out,
        r##"<g id="axis" data-start-ms="{start}" data-edge-ms="{edge}">
<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="#444444"/>"##
    );
    let steps = (axis.edge_ms / axis.step_ms).round().clamp(1.0, 1000.0) as u32;
    for i in 0..=steps {
        let ms = f64::from(i) * axis.step_ms;
        let (x, data, label) = (num(axis.x_rel(ms)), num(ms), tick_label(ms, axis.step_ms));
        let _ = writeln!(
            out,
            r##"<g class="tick" data-ms="{data}"><line x1="{x}" y1="{y0}" x2="{x}" y2="{y5}" stroke="#444444"/><text x="{x}" y="{y17}" text-anchor="middle" fill="#444444">{label}</text></g>"##
        );
    }
    let (cx, cy) = (num((X0 + X1) / 2.0), num(y + 33.0));
    let _ = writeln!(
        out,
        r##"<text x="{cx}" y="{cy}" text-anchor="middle" fill="#555555">seconds since the first event</text>
</g>"##
    );
}

/// How a legend entry is drawn.
enum Swatch {
    /// A bar of this colour.
    Bar(&'static str),
    /// A horizontal line: colour, width.
    Line(&'static str, &'static str),
    /// A vertical line: colour, width, dashes.
    Tall(&'static str, &'static str, &'static str),
    /// The input-event triangle.
    Input,
}

const LEGEND: [(Swatch, &str); 10] = [
    (Swatch::Bar(PENDING), "pending (agent not started)"),
    (Swatch::Bar(TERMINATING), "Terminating"),
    (Swatch::Bar(FINALIZER), "finalizer wait"),
    (Swatch::Bar(PRE_STOP), "pre-stop hook"),
    (Swatch::Bar(SIGTERM), "SIGTERM window"),
    (Swatch::Tall(KILL, "4", "none"), "SIGKILL"),
    (Swatch::Line(RUNNING, "2"), "process running"),
    (Swatch::Line(REMOVED, "3"), "record removed"),
    (Swatch::Tall(DELETE, "1", "3 3"), "delete request"),
    (Swatch::Input, "input event"),
];

/// Draws the legend from `top`, wrapping; returns its height.
fn render_legend(out: &mut String, top: f64) -> f64 {
    let _ = writeln!(out, "<g id=\"legend\">");
    let (mut x, mut y) = (16.0, top);
    for (swatch, label) in &LEGEND {
        let advance = 38.0 + text_width(label, 6.0);
        if x + advance > WIDTH - 8.0 {
            (x, y) = (16.0, y + 18.0);
        }
        let (left, right, centre) = (num(x), num(x + 16.0), num(x + 8.0));
        let (top, mid, bottom, high, low) = (
            num(y),
            num(y + 5.0),
            num(y + 9.0),
            num(y - 2.0),
            num(y + 12.0),
        );
        let _ = match swatch {
            Swatch::Bar(fill) => writeln!(
                out,
                r#"<rect x="{left}" y="{top}" width="16" height="10" rx="2" fill="{fill}"/>"#
            ),
            Swatch::Line(stroke, width) => writeln!(
                out,
                r#"<line x1="{left}" y1="{mid}" x2="{right}" y2="{mid}" stroke="{stroke}" stroke-width="{width}"/>"#
            ),
            Swatch::Tall(stroke, width, dashes) => writeln!(
                out,
                r#"<line x1="{centre}" y1="{high}" x2="{centre}" y2="{low}" stroke="{stroke}" stroke-width="{width}" stroke-dasharray="{dashes}"/>"#
            ),
            Swatch::Input => {
                let (l, r, apex) = (num(x + 4.5), num(x + 11.5), num(y + 3.0));
                writeln!(
                    out,
                    r#"<polygon points="{l},{bottom} {r},{bottom} {centre},{apex}" fill="{INPUT}"/>"#
                )
            }
        };
        let (tx, label) = (num(x + 22.0), esc(label));
        let _ = writeln!(
            out,
            r##"<text x="{tx}" y="{bottom}" fill="#333333">{label}</text>"##
        );
        x += advance;
    }
    let _ = writeln!(out, "</g>");
    y - top + 14.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_short_and_finite() {
        assert_eq!(num(-0.0), "0");
        assert_eq!(num(f64::NAN), "0");
        assert_eq!(num(f64::INFINITY), "0");
        assert_eq!(num(12.5), "12.5");
        assert_eq!(num(3.0), "3");
        assert_eq!(sci(9.223372036854776e18), "9.2e18");
        assert_eq!(count_label(i64::MAX), "9.2e18 s");
        assert_eq!(seconds_label(11_500), "11.5 s");
        assert_eq!(seconds_label(30_000), "30 s");
    }

    #[test]
    fn steps_are_one_two_five() {
        assert_eq!(nice_step(3_360.0), 5_000.0);
        assert_eq!(nice_step(1_100.0), 2_000.0);
        assert_eq!(nice_step(50.0), 100.0);
        assert!(nice_step(f64::MAX).is_finite());
    }

    #[test]
    fn escaping_removes_what_xml_forbids() {
        assert_eq!(esc("a<b>&\"'\u{1}"), "a&lt;b&gt;&amp;&quot;&apos;\u{fffd}");
    }
}
