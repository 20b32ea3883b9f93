//! `grace describe`: an object in detail, and the state of its deletion as
//! events, each decision with its reason and the rule it follows (see the
//! rules in grace-core's docs: R18 the grace's source, R51–R54 the
//! agent's budget, R59–R63 the kill sequence).
//!
//! The events are `grace_k8s::deletion_events`, read from what the store
//! keeps — the record and the agent's persisted kill state — so they say
//! where the deletion is now and why; the agent's log has every step as it
//! happened. The agent's Kubernetes API serves the same events to
//! `kubectl describe`.

use std::io::Write;

use grace_core::{Stage, Timestamp};
use grace_k8s::deletion_events::{Event, deletion_events};
use grace_k8s::rfc3339;

use crate::api::{Client, Reply, Request};
use crate::clock::{Clock, SystemClock};
use crate::kubectl::{CommandError, Selection, Target, fetch_all};
use crate::output::{age, status_word};
use crate::store::{ContainerStatus, StoredObject};

/// `grace describe (NAME… | -l SELECTOR)`: every object selected.
pub fn describe(
    target: Target<'_>,
    selection: &Selection,
    out: &mut impl Write,
) -> Result<(), CommandError> {
    let (_, items) = fetch_all(target)?;
    let (found, missing) = selection.pick(items);
    for (i, item) in found.iter().enumerate() {
        if i > 0 {
            let _ = writeln!(out);
        }
        let _ = write!(out, "{}", text(&item.name, &item.object));
    }
    if !found.is_empty()
        && let Some(condition) = agent_condition(target)
    {
        let _ = writeln!(out, "\n{:<18}{condition}", "Agent:");
    }
    if let Some(e) = selection.missing_type(&missing) {
        return Err(e);
    }
    match missing.first() {
        Some(name) => Err(CommandError::failed(crate::kubectl::not_found(name))),
        None if found.is_empty() => Err(CommandError::failed("No resources found")),
        None => Ok(()),
    }
}

/// What is wrong with the agent serving `target`, if one serves it and
/// something is: its own steps cannot be written (a full disk), so its
/// deadlines and process exits wait (docs/agent.md, "What survives
/// what"). Nothing when no agent answers.
fn agent_condition(target: Target<'_>) -> Option<String> {
    let Target::Agent(dir) = target else {
        return None;
    };
    let mut client = Client::connect(dir).ok()?;
    let Ok(Reply::Status(status)) = client.call(&Request::Status) else {
        return None;
    };
    let unwritable = status.store_unwritable?;
    let since = i64::try_from(unwritable.since_unix_millis / 1000).unwrap_or(i64::MAX);
    Some(format!(
        "store not writable since {} ({} failed attempts): {}; the agent's own steps \
         (deadlines, process exits) wait, retried with back-off",
        rfc3339(Timestamp::from_unix_seconds(since)),
        unwritable.attempts,
        unwritable.error
    ))
}

/// The description of one object, stored under the key `name` (its
/// namespace and name).
pub fn text(name: &str, object: &StoredObject) -> String {
    let mut s = String::new();
    let meta = &object.record;
    let now = SystemClock::new().now();
    let now_s = now.wall.floor_to_timestamp();
    let mut line = |k: &str, v: String| s.push_str(&format!("{:<18}{v}\n", format!("{k}:")));
    let (namespace, name) = crate::store::split_key(name);
    // kubectl's lines first, in its order; then grace's own.
    line("Name", name.to_owned());
    line("Namespace", namespace.to_owned());
    line(
        "Node",
        object.node.clone().unwrap_or_else(|| {
            if object.containers.is_empty() {
                "<none> (unscheduled)".into()
            } else {
                "<none> (PodScheduled False: waiting for an agent to bind it)".into()
            }
        }),
    );
    if let Some(started) = object.started {
        line("Start Time", rfc3339(started));
    }
    let labels: Vec<String> = object
        .labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    line(
        "Labels",
        if labels.is_empty() {
            "<none>".into()
        } else {
            labels.join(",")
        },
    );
    s.push_str(&annotations(object));
    let mut line = |k: &str, v: String| s.push_str(&format!("{:<18}{v}\n", format!("{k}:")));
    line("Status", status_word(object));
    // kubectl's line: grace gives a pod no address of its own.
    line("IP", "<none>".into());
    line(
        "Kind",
        match object.strategy.kind {
            grace_core::Kind::Pod => "Pod",
            _ => "Object (no graceful strategy)",
        }
        .to_owned(),
    );
    line("UID", meta.uid.to_string());
    let finalizers: Vec<&str> = meta.finalizers.iter().map(|f| f.as_str()).collect();
    line(
        "Finalizers",
        if finalizers.is_empty() {
            "<none>".into()
        } else {
            finalizers.join(", ")
        },
    );
    if !object.owners.is_empty() {
        let owners: Vec<String> = object
            .owners
            .iter()
            .map(|r| format!("{}/{} ({})", r.kind, r.name, r.uid))
            .collect();
        line("Owners", owners.join(", "));
    }
    line(
        "Phase",
        grace_k8s::pod_status::phase(object).as_str().to_owned(),
    );
    if let Some(created) = object.created {
        line(
            "Created",
            format!("{} ({} ago)", rfc3339(created), age(created, now_s)),
        );
    }
    line("Resource version", meta.resource_version.to_string());
    line("Generation", meta.generation.to_string());
    line(
        "Grace period",
        meta.termination_grace_period_seconds
            .map_or("<none>".into(), |g| {
                format!("{g} s (spec.terminationGracePeriodSeconds)")
            }),
    );
    if let Some(ts) = meta.deletion_timestamp {
        line("Deletion time", rfc3339(ts));
        line(
            "Deletion grace",
            meta.deletion_grace_period_seconds
                .map_or("<none>".into(), |g| format!("{g} s")),
        );
    }
    s.push_str("Containers:\n");
    let stages = crate::output::stages(object);
    for (i, (c, stage)) in object.containers.iter().zip(&stages).enumerate() {
        let role = if c.sidecar { " (sidecar)" } else { "" };
        s.push_str(&format!("  {}{role}:\n", c.name));
        s.push_str(&format!("    Command:      {}\n", c.command.join(" ")));
        if let Some(hook) = &c.post_start {
            s.push_str(&format!("    Post-start:   sh -c {hook:?}\n"));
        }
        if let Some(hook) = &c.pre_stop {
            s.push_str(&format!("    Pre-stop:     sh -c {hook:?}\n"));
        }
        // Why the agent would not start it (CreateContainerConfigError).
        if let Some(grace_std::store::ContainerStatus::Waiting {
            reason,
            message: Some(message),
        }) = object.status.get(i)
        {
            s.push_str(&format!("    Waiting:      {reason}: {message}\n"));
        }
        let signal = c
            .stop_signal
            .map_or("SIGTERM (default)".to_owned(), |n| format!("signal {n}"));
        s.push_str(&format!("    Stop signal:  {signal}\n"));
        if let Some(reported) = object.status.get(i) {
            s.push_str(&state_block("State", reported));
        }
        s.push_str(&format!("    Kill stage:   {}\n", stage_word(*stage)));
        if let Some(r) = object.restarts.get(i) {
            if let Some(delay) = r.waiting() {
                s.push_str(&format!(
                    "    Waiting:      CrashLoopBackOff: back-off {}s restarting failed container\n",
                    delay.whole_seconds()
                ));
            }
            if let Some(last) = &r.last_state {
                s.push_str(&state_block("Last State", last));
            }
        }
        if object.strategy.kind == grace_core::Kind::Pod {
            let ready = grace_k8s::pod_status::container_ready(object, i);
            s.push_str(&format!(
                "    Ready:        {}\n",
                if ready { "True" } else { "False" }
            ));
        }
        let count = object.restarts.get(i).map_or(0, |r| r.count);
        s.push_str(&format!("    Restart Count: {count}\n"));
        s.push_str(&environment(&c.env));
    }
    // After the containers, as kubectl orders them.
    if object.strategy.kind == grace_core::Kind::Pod {
        s.push_str(&conditions(object));
    }
    let events = deletion_events(object);
    s.push_str(&events_table(&events, now.wall.floor_to_timestamp()));
    s
}

/// kubectl's `Annotations:` lines: one `key: value` a line, the first
/// beside the label, kubectl's own last-applied annotation left out (as
/// kubectl leaves it out).
fn annotations(object: &StoredObject) -> String {
    let manifest = object.manifest.as_ref().and_then(|m| m.to_json().ok());
    let shown: Vec<String> = manifest
        .as_ref()
        .and_then(|m| m.pointer("/metadata/annotations"))
        .and_then(serde_json::Value::as_object)
        .map(|a| {
            a.iter()
                .filter(|(k, _)| *k != "kubectl.kubernetes.io/last-applied-configuration")
                .map(|(k, v)| format!("{k}: {}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    if shown.is_empty() {
        return format!("{:<18}<none>\n", "Annotations:");
    }
    let mut text = String::new();
    for (i, entry) in shown.iter().enumerate() {
        let label = if i == 0 { "Annotations:" } else { "" };
        text.push_str(&format!("{label:<18}{entry}\n"));
    }
    text
}

/// kubectl's `Environment:` of a container: `NAME: value`, or the pod
/// field it is read from.
fn environment(env: &[grace_std::store::EnvVar]) -> String {
    if env.is_empty() {
        return "    Environment:  <none>\n".to_owned();
    }
    let mut text = "    Environment:\n".to_owned();
    for var in env {
        let value = match &var.source {
            grace_std::store::EnvSource::Value(v) => v.clone(),
            grace_std::store::EnvSource::FieldRef(path) => format!(" (v1:{path})"),
            // A source added later.
            other => format!("{other:?}"),
        };
        text.push_str(&format!("      {}:  {value}\n", var.name));
    }
    text
}

/// The pod's conditions as kubectl describes them: type, status, reason.
fn conditions(object: &StoredObject) -> String {
    let mut rows = vec![vec![
        "  Type".to_owned(),
        "Status".to_owned(),
        "Reason".to_owned(),
    ]];
    for c in grace_k8s::pod_status::conditions(object) {
        rows.push(vec![
            format!("  {}", c.type_),
            c.status,
            c.reason.unwrap_or_default(),
        ]);
    }
    let table = crate::output::aligned(&rows);
    let lines: Vec<&str> = table.lines().map(str::trim_end).collect();
    format!("Conditions:\n{}\n", lines.join("\n"))
}

/// A container's state as kubectl describes it (`State:` or `Last
/// State:`, then its reason, exit code and times, indented), from what the
/// agent last reported.
fn state_block(label: &str, status: &ContainerStatus) -> String {
    let at = |t: &Option<Timestamp>| t.map_or("<unknown>".to_owned(), kubectl_time);
    let field = |k: &str, v: String| format!("      {:<14}{v}\n", format!("{k}:"));
    let head = |word: &str| format!("    {:<16}{word}\n", format!("{label}:"));
    match status {
        ContainerStatus::Waiting { reason, message } => {
            let mut text = head("Waiting") + &field("Reason", reason.clone());
            if let Some(message) = message {
                text.push_str(&field("Message", message.clone()));
            }
            text
        }
        ContainerStatus::Running { started_at } => {
            head("Running") + &field("Started", at(started_at))
        }
        ContainerStatus::Terminated {
            exit_code,
            reason,
            started_at,
            finished_at,
            ..
        } => {
            let code = exit_code.map_or("<unknown>".to_owned(), |c| c.to_string());
            head("Terminated")
                + &field("Reason", reason.clone())
                + &field("Exit Code", code)
                + &field("Started", at(started_at))
                + &field("Finished", at(finished_at))
        }
        // A state added later: its debug form.
        other => head(&format!("{other:?}")),
    }
}

/// A time as kubectl describes it (`Sat, 28 Nov 2026 02:25:11 +0000`).
fn kubectl_time(t: Timestamp) -> String {
    use k8s_openapi::jiff::{SignedDuration, civil::DateTime};
    DateTime::constant(1970, 1, 1, 0, 0, 0, 0)
        .checked_add(SignedDuration::from_secs(t.as_unix_seconds()))
        .map_or_else(
            |_| t.as_unix_seconds().to_string(),
            |ts| ts.strftime("%a, %d %b %Y %H:%M:%S +0000").to_string(),
        )
}

fn stage_word(stage: Option<Stage>) -> &'static str {
    match stage {
        None => "Unknown",
        Some(Stage::Running) => "Running",
        Some(Stage::PreStop { .. }) => "PreStop (hook running)",
        Some(Stage::AwaitingTurn { .. }) => "AwaitingTurn (sidecar ordering)",
        Some(Stage::Stopping { .. }) => "Stopping (stop signal sent)",
        Some(Stage::Killed) => "Killed (SIGKILL sent)",
        Some(Stage::Stopped) => "Stopped",
        Some(_) => "Unknown",
    }
}

/// kubectl's Events section: `<none>` beside the heading, or a table of
/// Type, Reason, Age, From and Message (columns two spaces apart, as
/// kubectl's tab writer pads them).
fn events_table(events: &[Event], now: Timestamp) -> String {
    if events.is_empty() {
        return format!("{:<18}<none>\n", "Events:");
    }
    let rows: Vec<[String; 5]> = events
        .iter()
        .map(|e| {
            [
                if e.warning { "Warning" } else { "Normal" }.to_owned(),
                e.reason.to_owned(),
                e.at.map_or("<unknown>".to_owned(), |t| {
                    age(Timestamp::from_unix_seconds(t.floor() as i64), now)
                }),
                e.from.to_owned(),
                e.message.clone(),
            ]
        })
        .collect();
    let head = ["Type", "Reason", "Age", "From", "Message"];
    // kubectl's rule under each heading (four dashes under "Age" too).
    let rule = ["----", "------", "----", "----", "-------"].map(str::to_owned);
    let mut width = [0usize; 4];
    let head = head.map(str::to_owned);
    for row in std::iter::once(&head)
        .chain(std::iter::once(&rule))
        .chain(&rows)
    {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut s = "Events:\n".to_owned();
    for row in std::iter::once(head)
        .chain(std::iter::once(rule))
        .chain(rows)
    {
        s.push_str("  ");
        for (cell, w) in row.iter().zip(width) {
            s.push_str(&format!("{cell:<w$}  "));
        }
        if let Some(message) = row.last() {
            s.push_str(message);
        }
        s.push('\n');
    }
    s
}
