//! Scenario files (a public format, described in `docs/scenarios.md`): one object
//! and a list of timed inputs, parsed into checked values.
//!
//! Every error names the field (`events[2].delete.grace_period_seconds`) and,
//! where the JSON reader knows it, the line and column.

use std::fmt;

use grace_core::{
    ContainerSpec, DeleteOptions, FinalizerChange, Finalizers, GcPolicy, Input, Kind, Name,
    PodPhase, Preconditions, Propagation, Record, RestartPolicy, Strategy, Timestamp,
};
use serde::Deserialize;

/// Most finalizers a scenario object may carry.
pub const MAX_FINALIZERS: usize = 16;
/// Most containers a scenario object may have.
pub const MAX_CONTAINERS: usize = 16;

/// A parsed, checked scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// The object's name (for display).
    pub name: String,
    /// The node it is bound to, if any.
    pub node: Option<String>,
    /// Its type's deletion strategy.
    pub strategy: Strategy,
    /// The stored record at the start.
    pub record: Record<MAX_FINALIZERS>,
    /// Its containers, in declaration order.
    pub containers: Vec<ContainerDef>,
    /// Its `restartPolicy`: which exited containers the simulated agent
    /// starts again, after CrashLoopBackOff (R92–R97, D9); `None` (a file
    /// that names none): it starts none, as before restarts were modelled.
    pub restart_policy: Option<RestartPolicy>,
    /// The timed inputs, in time order.
    pub events: Vec<ScenarioEvent>,
    /// Simulate deadlines up to this time (unix milliseconds).
    pub until_ms: Option<i64>,
}

/// A container as the scenario describes its behaviour.
#[derive(Clone, Debug, PartialEq)]
pub struct ContainerDef {
    /// Its name.
    pub name: String,
    /// How long its pre-stop hook runs, in milliseconds; `None`: no hook.
    pub pre_stop_ms: Option<i64>,
    /// How long after the stop signal it exits; `None`: ignores it.
    pub exits_after_sigterm_ms: Option<i64>,
    /// A sidecar, stopped after the main containers.
    pub sidecar: bool,
}

impl ContainerDef {
    /// What the agent knows of it.
    pub fn spec(&self) -> ContainerSpec {
        ContainerSpec {
            pre_stop: self.pre_stop_ms.is_some(),
            sidecar: self.sidecar,
            stopped: false,
        }
    }
}

/// One timed input.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioEvent {
    /// When, in unix milliseconds.
    pub at_ms: i64,
    /// What.
    pub kind: ScenarioEventKind,
    /// A `container_exit`'s exit code (0 when the file gives none): what
    /// `restart_policy` `OnFailure` looks at.
    pub exit_code: i32,
}

/// The inputs a scenario can contain: a delete as the format writes it,
/// the core's other inputs as they are, and a read.
#[derive(Clone, Debug, PartialEq)]
pub enum ScenarioEventKind {
    /// An API delete request ([`Input::Delete`], with what the format
    /// allows beyond the core's options).
    Delete(DeleteRequest),
    /// One of the core's other inputs. The format names `agent_sync`
    /// ([`Input::AgentSync`]), `evict` ([`Input::Evict`]),
    /// `add_finalizer` and `remove_finalizer` ([`Input::FinalizerUpdate`]),
    /// `container_exit` ([`Input::ContainerExited`]: the index into the
    /// scenario's containers), `node_lost`, `node_ready` and `node_fenced`
    /// (D7); the simulator takes any input.
    Input(Input),
    /// Report the stored record.
    Get,
}

impl ScenarioEventKind {
    /// The event's name in the scenario format (an input the format does
    /// not name: its name in the timeline).
    pub fn name(&self) -> &'static str {
        match self {
            ScenarioEventKind::Delete(_) => "delete",
            ScenarioEventKind::Input(input) => input_name(input),
            ScenarioEventKind::Get => "get",
        }
    }
}

/// An input's name in the scenario format.
fn input_name(input: &Input) -> &'static str {
    match input {
        Input::Delete(_) => "delete",
        Input::AgentSync => "agent_sync",
        Input::Evict { .. } => "evict",
        Input::FinalizerUpdate(FinalizerChange::Add(_)) => "add_finalizer",
        Input::FinalizerUpdate(FinalizerChange::Remove(_)) => "remove_finalizer",
        Input::FinalizerUpdate(_) => "finalizer",
        Input::ContainerExited(_) => "container_exit",
        Input::PreStopFinished(_) => "pre_stop_finished",
        Input::StopSignalSent(_) => "stop_signal_sent",
        Input::NodeLost => "node_lost",
        Input::NodeReady => "node_ready",
        Input::NodeFenced => "node_fenced",
        Input::Timeout => "timeout",
        _ => "input",
    }
}

/// A delete request as written in the scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct DeleteRequest {
    /// The options as the core takes them.
    pub options: DeleteOptions,
    /// A resource-version precondition that is not a number: it can never
    /// match a stored (numeric) resource version, so the request conflicts.
    pub unmatchable_resource_version: Option<String>,
}

/// Why a JSON document (a scenario, an object file) was refused: the field,
/// where it is, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field, as a path (`events[1].at`); empty for the whole document.
    pub field: String,
    /// Line and column in the file, when known.
    pub position: Option<(usize, usize)>,
    /// What is wrong.
    pub message: String,
}

/// Why a scenario file was refused.
pub type ScenarioError = FieldError;

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let field = if self.field.is_empty() || self.field == "." {
            "document"
        } else {
            &self.field
        };
        write!(f, "field `{field}`")?;
        if let Some((line, column)) = self.position {
            write!(f, " (line {line}, column {column})")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for FieldError {}

impl FieldError {
    pub(crate) fn at(field: impl Into<String>, message: impl Into<String>) -> Self {
        ScenarioError {
            field: field.into(),
            position: None,
            message: message.into(),
        }
    }
}

/// Parses and checks a scenario document.
pub fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    let raw: RawScenario = from_json(text)?;
    let positions = EventLines::scan(text);
    raw.check(&positions)
}

/// Deserializes one JSON document; an error names the field's path, line
/// and column.
fn from_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, FieldError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let position = (inner.line() > 0).then(|| (inner.line(), inner.column()));
        FieldError {
            field: path,
            position,
            message: strip_position(&inner.to_string()),
        }
    })?;
    de.end().map_err(|e| FieldError {
        field: String::new(),
        position: Some((e.line(), e.column())),
        message: strip_position(&e.to_string()),
    })?;
    Ok(value)
}

/// serde_json appends " at line L column C"; the position is shown apart.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// The line of each element of the top-level `events` array, found by a
/// small scan, so that checks made after parsing can name a line too.
struct EventLines(Vec<(usize, usize)>);

impl EventLines {
    // Lines, columns and depth count characters of `text`: below its length.
    #[allow(clippy::arithmetic_side_effects)]
    fn scan(text: &str) -> Self {
        let mut lines = Vec::new();
        let Some(start) = find_events_array(text) else {
            return EventLines(lines);
        };
        let mut depth = 0usize;
        let mut in_string = false;
        let mut escaped = false;
        let mut line = 1 + text[..start].matches('\n').count();
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let mut column = text[line_start..start].chars().count();
        for ch in text[start..].chars() {
            if ch == '\n' {
                line += 1;
                column = 0;
            } else {
                column += 1;
            }
            if in_string {
                match (escaped, ch) {
                    (true, _) => escaped = false,
                    (false, '\\') => escaped = true,
                    (false, '"') => in_string = false,
                    _ => {}
                }
                continue;
            }
            match ch {
                '"' => in_string = true,
                '[' | '{' => {
                    if depth == 1 {
                        lines.push((line, column));
                    }
                    depth += 1;
                }
                ']' | '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
        }
        EventLines(lines)
    }

    fn line(&self, index: usize) -> Option<(usize, usize)> {
        self.0.get(index).copied()
    }
}

/// Byte offset of the `[` that opens the top-level `"events"` value.
// Offsets and depth stay below `text.len()`, and `bytes[i]` is read only
// while `i < bytes.len()`.
#[allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]
fn find_events_array(text: &str) -> Option<usize> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    value.get("events")?.as_array()?;
    // The key occurs at depth 1; scan for it outside strings at that depth.
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0usize;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let end = string_end(bytes, i)?;
                if depth == 1 && &text[i..=end] == "\"events\"" {
                    let rest = &text[end + 1..];
                    let colon = rest.find(':')?;
                    let after = &rest[colon + 1..];
                    let open = after.find('[')?;
                    return Some(end + 1 + colon + 1 + open);
                }
                i = end;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

/// The index of the `"` that closes the string opened at `open`.
// `bytes[i]` is read only while `i < bytes.len()`; `i` stays below
// `bytes.len() + 2`.
#[allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]
fn string_end(bytes: &[u8], open: usize) -> Option<usize> {
    let mut i = open + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

// ---- The document as written ------------------------------------------------

/// Distinguishes an absent field (`None`) from an explicit `null`
/// (`Some(None)`).
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    object: RawObject,
    #[serde(default)]
    events: Vec<RawEvent>,
    #[serde(default)]
    until: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawObject {
    name: String,
    #[serde(default)]
    kind: Option<RawKind>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    resource_version: Option<StringOrInt>,
    #[serde(default)]
    generation: Option<i64>,
    #[serde(default)]
    node: Option<String>,
    #[serde(default)]
    phase: Option<RawPhase>,
    #[serde(default, deserialize_with = "present")]
    termination_grace_period_seconds: Option<Option<i64>>,
    #[serde(default)]
    finalizers: Vec<String>,
    #[serde(default)]
    deletion_timestamp: Option<i64>,
    #[serde(default)]
    deletion_grace_period_seconds: Option<i64>,
    #[serde(default)]
    containers: Option<Vec<RawContainer>>,
    #[serde(default)]
    default_gc_policy: Option<RawGcPolicy>,
    #[serde(default)]
    gc_enabled: Option<bool>,
    #[serde(default)]
    restart_policy: Option<RestartPolicy>,
}

#[derive(Deserialize)]
enum RawKind {
    Pod,
    Generic,
}

#[derive(Deserialize)]
enum RawPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
    #[serde(rename = "")]
    Unset,
}

#[derive(Deserialize)]
enum RawGcPolicy {
    DeleteDependents,
    OrphanDependents,
    Unsupported,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum StringOrInt {
    String(String),
    Int(u64),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawContainer {
    name: String,
    #[serde(default)]
    pre_stop_seconds: Option<f64>,
    #[serde(default)]
    exits_after_sigterm_seconds: Option<f64>,
    #[serde(default)]
    sidecar: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvent {
    at: f64,
    #[serde(default, deserialize_with = "present")]
    delete: Option<Option<RawDeleteOptions>>,
    #[serde(default, deserialize_with = "present")]
    agent_sync: Option<Option<Empty>>,
    #[serde(default)]
    evict: Option<RawEvict>,
    #[serde(default)]
    remove_finalizer: Option<String>,
    #[serde(default)]
    add_finalizer: Option<String>,
    #[serde(default)]
    container_exit: Option<RawContainerRef>,
    #[serde(default, deserialize_with = "present")]
    node_lost: Option<Option<Empty>>,
    #[serde(default, deserialize_with = "present")]
    node_ready: Option<Option<Empty>>,
    #[serde(default, deserialize_with = "present")]
    node_fenced: Option<Option<Empty>>,
    #[serde(default, deserialize_with = "present")]
    get: Option<Option<Empty>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvict {
    grace_period_seconds: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawContainerRef {
    container: String,
    #[serde(default)]
    exit_code: Option<i32>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawDeleteOptions {
    #[serde(default)]
    grace_period_seconds: Option<i64>,
    #[serde(default)]
    preconditions: Option<RawPreconditions>,
    #[serde(default)]
    propagation_policy: Option<String>,
    #[serde(default)]
    orphan_dependents: Option<bool>,
    #[serde(default)]
    dry_run: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawPreconditions {
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    resource_version: Option<StringOrInt>,
}

/// Seconds (possibly fractional) to whole milliseconds, refusing values that
/// do not fit.
fn seconds_to_ms(seconds: f64, field: &str) -> Result<i64, ScenarioError> {
    let ms = (seconds * 1000.0).round();
    // i64 milliseconds reach ±292 million years; keep well inside.
    if !ms.is_finite() || ms.abs() > 9.0e15 {
        return Err(ScenarioError::at(
            field,
            format!("{seconds} seconds is out of range"),
        ));
    }
    Ok(ms as i64)
}

fn duration_ms(seconds: Option<f64>, field: &str) -> Result<Option<i64>, ScenarioError> {
    match seconds {
        None => Ok(None),
        Some(s) if s < 0.0 => Err(ScenarioError::at(field, "must not be negative")),
        Some(s) => seconds_to_ms(s, field).map(Some),
    }
}

fn name(value: &str, field: &str) -> Result<Name, ScenarioError> {
    Name::try_from_str(value).map_err(|e| ScenarioError::at(field, e.to_string()))
}

impl RawScenario {
    fn check(self, lines: &EventLines) -> Result<Scenario, ScenarioError> {
        let object = self.object;
        if object.name.is_empty() {
            return Err(ScenarioError::at("object.name", "must not be empty"));
        }
        let strategy = object.strategy();
        let scheduled = object.node.as_ref().is_some_and(|n| !n.is_empty());
        let record = object.record(scheduled)?;
        let node = object.node.filter(|n| !n.is_empty());
        let containers = check_containers(object.containers)?;
        let events = check_events(self.events, lines, &containers)?;
        let last_ms = events.last().map(|e| e.at_ms);
        let until_ms = check_until(self.until, last_ms)?;
        Ok(Scenario {
            name: object.name,
            node,
            strategy,
            record,
            containers,
            restart_policy: object.restart_policy,
            events,
            until_ms,
        })
    }
}

impl RawObject {
    /// The type's deletion strategy: a pod that deletes dependents, with
    /// the garbage collector's finalizers on, unless told otherwise.
    fn strategy(&self) -> Strategy {
        let kind = match self.kind {
            None | Some(RawKind::Pod) => Kind::Pod,
            Some(RawKind::Generic) => Kind::Generic,
        };
        Strategy {
            kind,
            default_gc_policy: match self.default_gc_policy {
                None | Some(RawGcPolicy::DeleteDependents) => GcPolicy::DeleteDependents,
                Some(RawGcPolicy::OrphanDependents) => GcPolicy::OrphanDependents,
                Some(RawGcPolicy::Unsupported) => GcPolicy::Unsupported,
            },
            gc_enabled: self.gc_enabled.unwrap_or(true),
        }
    }

    /// The stored record; `scheduled` when the object names a node.
    fn record(&self, scheduled: bool) -> Result<Record<MAX_FINALIZERS>, ScenarioError> {
        let uid = self
            .uid
            .clone()
            .unwrap_or_else(|| format!("uid-{}", self.name));
        let resource_version = match &self.resource_version {
            None => 1,
            Some(StringOrInt::Int(v)) => *v,
            Some(StringOrInt::String(s)) => s.parse::<u64>().map_err(|_| {
                ScenarioError::at(
                    "object.resource_version",
                    format!("`{s}` is not a decimal resource version"),
                )
            })?,
        };
        let mut finalizers = Finalizers::new();
        for (i, f) in self.finalizers.iter().enumerate() {
            let field = format!("object.finalizers[{i}]");
            finalizers.push(name(f, &field)?).map_err(|_| {
                ScenarioError::at(&field, format!("more than {MAX_FINALIZERS} finalizers"))
            })?;
        }
        let mut record = Record::new(name(&uid, "object.uid")?);
        record.resource_version = resource_version;
        record.generation = self.generation.unwrap_or(0);
        record.deletion_timestamp = self.deletion_timestamp.map(Timestamp::from_unix_seconds);
        record.deletion_grace_period_seconds = self.deletion_grace_period_seconds;
        record.finalizers = finalizers;
        record.scheduled = scheduled;
        record.phase = match self.phase {
            None | Some(RawPhase::Running) => PodPhase::Running,
            Some(RawPhase::Pending) => PodPhase::Pending,
            Some(RawPhase::Succeeded) => PodPhase::Succeeded,
            Some(RawPhase::Failed) => PodPhase::Failed,
            Some(RawPhase::Unknown) => PodPhase::Unknown,
            Some(RawPhase::Unset) => PodPhase::Unset,
        };
        record.termination_grace_period_seconds =
            self.termination_grace_period_seconds.unwrap_or(Some(30));
        Ok(record)
    }
}

/// The containers, or one `main` container that exits on SIGTERM when
/// none are given: at most [`MAX_CONTAINERS`], each named, no name twice.
fn check_containers(
    containers: Option<Vec<RawContainer>>,
) -> Result<Vec<ContainerDef>, ScenarioError> {
    let Some(list) = containers else {
        return Ok(vec![ContainerDef {
            name: "main".to_string(),
            pre_stop_ms: None,
            exits_after_sigterm_ms: Some(0),
            sidecar: false,
        }]);
    };
    if list.len() > MAX_CONTAINERS {
        return Err(ScenarioError::at(
            "object.containers",
            format!("more than {MAX_CONTAINERS} containers"),
        ));
    }
    let mut out: Vec<ContainerDef> = Vec::with_capacity(list.len());
    for (i, c) in list.into_iter().enumerate() {
        let field = format!("object.containers[{i}]");
        if c.name.is_empty() {
            return Err(ScenarioError::at(
                format!("{field}.name"),
                "must not be empty",
            ));
        }
        if out.iter().any(|o| o.name == c.name) {
            return Err(ScenarioError::at(
                format!("{field}.name"),
                format!("duplicate container name `{}`", c.name),
            ));
        }
        out.push(ContainerDef {
            pre_stop_ms: duration_ms(c.pre_stop_seconds, &format!("{field}.pre_stop_seconds"))?,
            exits_after_sigterm_ms: duration_ms(
                c.exits_after_sigterm_seconds,
                &format!("{field}.exits_after_sigterm_seconds"),
            )?,
            sidecar: c.sidecar.unwrap_or(false),
            name: c.name,
        });
    }
    Ok(out)
}

/// The events in time order, each error located at its event's line.
fn check_events(
    raw_events: Vec<RawEvent>,
    lines: &EventLines,
    containers: &[ContainerDef],
) -> Result<Vec<ScenarioEvent>, ScenarioError> {
    let mut events = Vec::with_capacity(raw_events.len());
    let mut previous: Option<i64> = None;
    for (i, raw) in raw_events.into_iter().enumerate() {
        let field = format!("events[{i}]");
        let located = |e: ScenarioError| ScenarioError {
            position: e.position.or_else(|| lines.line(i)),
            ..e
        };
        let at_ms = seconds_to_ms(raw.at, &format!("{field}.at")).map_err(located)?;
        if previous.is_some_and(|p| at_ms < p) {
            return Err(located(ScenarioError::at(
                format!("{field}.at"),
                "events must be in time order (`at` may not decrease)",
            )));
        }
        previous = Some(at_ms);
        let exit_code = raw
            .container_exit
            .as_ref()
            .and_then(|c| c.exit_code)
            .unwrap_or(0);
        let kind = raw.into_kind(&field, containers).map_err(located)?;
        events.push(ScenarioEvent {
            at_ms,
            kind,
            exit_code,
        });
    }
    Ok(events)
}

/// `until`, which may not come before the last event (at `last_ms`).
fn check_until(until: Option<f64>, last_ms: Option<i64>) -> Result<Option<i64>, ScenarioError> {
    let Some(u) = until else { return Ok(None) };
    let ms = seconds_to_ms(u, "until")?;
    if last_ms.is_some_and(|p| ms < p) {
        return Err(ScenarioError::at(
            "until",
            "must not be before the last event",
        ));
    }
    Ok(Some(ms))
}

impl RawEvent {
    fn into_kind(
        self,
        field: &str,
        containers: &[ContainerDef],
    ) -> Result<ScenarioEventKind, ScenarioError> {
        let mut kinds: Vec<ScenarioEventKind> = Vec::new();
        if let Some(options) = self.delete {
            kinds.push(ScenarioEventKind::Delete(delete_request(
                options.unwrap_or_default(),
                &format!("{field}.delete"),
            )?));
        }
        if self.agent_sync.is_some() {
            kinds.push(ScenarioEventKind::Input(Input::AgentSync));
        }
        if let Some(evict) = self.evict {
            kinds.push(ScenarioEventKind::Input(Input::evict(
                evict.grace_period_seconds,
            )));
        }
        if let Some(f) = self.remove_finalizer {
            kinds.push(ScenarioEventKind::Input(Input::FinalizerUpdate(
                FinalizerChange::Remove(name(&f, &format!("{field}.remove_finalizer"))?),
            )));
        }
        if let Some(f) = self.add_finalizer {
            kinds.push(ScenarioEventKind::Input(Input::FinalizerUpdate(
                FinalizerChange::Add(name(&f, &format!("{field}.add_finalizer"))?),
            )));
        }
        if let Some(c) = self.container_exit {
            let container = containers
                .iter()
                .position(|d| d.name == c.container)
                .ok_or_else(|| {
                    ScenarioError::at(
                        format!("{field}.container_exit.container"),
                        format!("no container named `{}`", c.container),
                    )
                })?;
            kinds.push(ScenarioEventKind::Input(Input::container_exited(container)));
        }
        if self.node_lost.is_some() {
            kinds.push(ScenarioEventKind::Input(Input::NodeLost));
        }
        if self.node_ready.is_some() {
            kinds.push(ScenarioEventKind::Input(Input::NodeReady));
        }
        if self.node_fenced.is_some() {
            kinds.push(ScenarioEventKind::Input(Input::NodeFenced));
        }
        if self.get.is_some() {
            kinds.push(ScenarioEventKind::Get);
        }
        let count = kinds.len();
        match (kinds.pop(), count) {
            (Some(kind), 1) => Ok(kind),
            (_, 0) => Err(ScenarioError::at(
                field,
                "needs one of delete, agent_sync, evict, remove_finalizer, add_finalizer, \
                 container_exit, node_lost, node_ready, node_fenced, get",
            )),
            _ => Err(ScenarioError::at(
                field,
                "has more than one event; give each its own entry",
            )),
        }
    }
}

fn delete_request(raw: RawDeleteOptions, field: &str) -> Result<DeleteRequest, ScenarioError> {
    let pre = raw.preconditions.unwrap_or_default();
    let uid = match pre.uid {
        None => None,
        Some(u) => Some(name(&u, &format!("{field}.preconditions.uid"))?),
    };
    let (resource_version, unmatchable) = match pre.resource_version {
        None => (None, None),
        Some(StringOrInt::Int(v)) => (Some(v), None),
        Some(StringOrInt::String(s)) => match s.parse::<u64>() {
            Ok(v) => (Some(v), None),
            Err(_) => (None, Some(s)),
        },
    };
    let propagation_policy = raw.propagation_policy.map(|p| match p.as_str() {
        "Orphan" => Propagation::Orphan,
        "Background" => Propagation::Background,
        "Foreground" => Propagation::Foreground,
        // R6: refused by validation, not by the parser.
        _ => Propagation::Unrecognized,
    });
    Ok(DeleteRequest {
        options: DeleteOptions::default()
            .with_grace_period(raw.grace_period_seconds)
            .with_preconditions(Preconditions {
                uid,
                resource_version,
            })
            .with_propagation_policy(propagation_policy)
            .with_orphan_dependents(raw.orphan_dependents)
            .with_dry_run(raw.dry_run.unwrap_or(false)),
        unmatchable_resource_version: unmatchable,
    })
}
