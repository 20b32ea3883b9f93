//! How `grace get` prints objects, as kubectl does: a table in aligned
//! columns (a tab-writer, kubectl's own method), `-o wide`, `-o name`, and
//! `-o json|yaml` as Kubernetes Pods (one object, or a `v1 List`).

use std::io::Write;

use grace_core::{Kind, Stage, Timestamp};

use crate::custom_columns::{self, Column};
use crate::jsonpath::Template;
use crate::k8s_pod::to_pod;
use crate::runtime::KillRecord;
use crate::store::StoredObject;

/// `-o`: how `grace get` prints.
#[derive(Clone, Debug, PartialEq)]
pub enum Format {
    /// kubectl's table: NAME, READY, STATUS, RESTARTS, AGE.
    Table,
    /// The table with kubectl's IP, NODE, NOMINATED NODE and READINESS
    /// GATES, then grace's GRACE and FINALIZERS.
    Wide,
    /// `pod/NAME`, one a line.
    Name,
    /// Kubernetes JSON: the Pod, or a `v1 List` of Pods.
    Json,
    /// Kubernetes YAML, likewise.
    Yaml,
    /// grace's stored form, its kill state decoded (for debugging).
    Stored,
    /// `jsonpath=TEMPLATE` (or `jsonpath-file=FILE`): kubectl's template,
    /// run on the Pod or the `v1 List` that `-o json` prints.
    JsonPath(Template),
    /// `custom-columns=SPEC` (or `custom-columns-file=FILE`): a table of
    /// the columns asked for, one row per Pod.
    CustomColumns(Vec<Column>),
}

impl Format {
    /// The formats `-o` takes, for help and errors.
    pub const NAMES: &str = "table, wide, name, json, yaml, stored, jsonpath=TEMPLATE, jsonpath-file=FILE, custom-columns=SPEC, custom-columns-file=FILE";

    /// `-o`'s value as kubectl spells it; a `-file` variant reads its file.
    pub fn parse(text: &str) -> Result<Format, String> {
        let read = |file: &str| {
            std::fs::read_to_string(file).map_err(|e| format!("cannot read {file}: {e}"))
        };
        let template = |text: &str| {
            if text.is_empty() {
                return Err("template format specified but no template given".to_owned());
            }
            Template::parse(text)
                .map(Format::JsonPath)
                .map_err(|e| e.to_string())
        };
        Ok(match text.split_once('=') {
            None => match text {
                "table" => Format::Table,
                "wide" => Format::Wide,
                "name" => Format::Name,
                "json" => Format::Json,
                "yaml" => Format::Yaml,
                "stored" => Format::Stored,
                other => {
                    return Err(format!(
                        "unknown output format \"{other}\": one of {}",
                        Format::NAMES
                    ));
                }
            },
            Some(("jsonpath", t)) => template(t)?,
            Some(("jsonpath-file", file)) => template(&read(file)?)?,
            Some(("custom-columns", spec)) => {
                Format::CustomColumns(custom_columns::parse_spec(spec)?)
            }
            Some(("custom-columns-file", file)) => {
                Format::CustomColumns(custom_columns::parse_file(&read(file)?)?)
            }
            Some((other, _)) => {
                return Err(format!(
                    "unknown output format \"{other}\": one of {}",
                    Format::NAMES
                ));
            }
        })
    }
}

/// The table's header. `-o wide` adds kubectl's columns (a pod has no IP
/// of its own in grace, nor a nominated node or readiness gates: `<none>`),
/// then grace's own.
pub fn header(wide: bool) -> Vec<&'static str> {
    let mut h = vec!["NAME", "READY", "STATUS", "RESTARTS", "AGE"];
    if wide {
        h.extend([
            "IP",
            "NODE",
            "NOMINATED NODE",
            "READINESS GATES",
            "GRACE",
            "FINALIZERS",
        ]);
    }
    h
}

/// One row. STATUS is `Terminating` once the deletion timestamp is set,
/// as kubectl shows it (`status` overrides it, such as `Deleted` in a
/// watch); GRACE is the deletion's grace then, the spec's before.
pub fn row(
    name: &str,
    object: &StoredObject,
    wide: bool,
    now: Timestamp,
    status: Option<&str>,
) -> Vec<String> {
    let meta = &object.record;
    let status = status
        .map(str::to_owned)
        .unwrap_or_else(|| status_word(object));
    let running = ready(object);
    let mut cells = vec![
        name.to_owned(),
        format!("{running}/{}", object.containers.len()),
        status,
        restarts(object, now),
        object
            .created
            .map_or("<unknown>".to_owned(), |c| age(c, now)),
    ];
    if wide {
        let grace = meta
            .deletion_grace_period_seconds
            .or(meta.termination_grace_period_seconds)
            .map_or("-".to_owned(), |g| g.to_string());
        let finalizers: Vec<&str> = meta.finalizers.iter().map(|f| f.as_str()).collect();
        cells.extend([
            "<none>".to_owned(),
            object.node.clone().unwrap_or_else(|| "<none>".to_owned()),
            "<none>".to_owned(),
            "<none>".to_owned(),
            grace,
            if finalizers.is_empty() {
                "<none>".to_owned()
            } else {
                finalizers.join(",")
            },
        ]);
    }
    cells
}

/// The label columns kubectl adds after its own: one per `-L` key, headed
/// by the key's name part in capitals, then LABELS for `--show-labels`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelColumns {
    /// `-L` keys, in the order given.
    pub keys: Vec<String>,
    /// `--show-labels`.
    pub all: bool,
}

impl LabelColumns {
    /// The headers of the added columns.
    pub fn headers(&self) -> Vec<String> {
        let mut headers: Vec<String> = self
            .keys
            .iter()
            .map(|key| key.rsplit('/').next().unwrap_or(key).to_uppercase())
            .collect();
        if self.all {
            headers.push("LABELS".to_owned());
        }
        headers
    }

    /// The added cells for `object`: a key's value (empty without it),
    /// and LABELS as `k=v,k=v` in key order (`<none>` without labels).
    pub fn cells(&self, object: &StoredObject) -> Vec<String> {
        let mut cells: Vec<String> = self
            .keys
            .iter()
            .map(|key| object.labels.get(key).cloned().unwrap_or_default())
            .collect();
        if self.all {
            cells.push(if object.labels.is_empty() {
                "<none>".to_owned()
            } else {
                object
                    .labels
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            });
        }
        cells
    }
}

/// kubectl's RESTARTS: the containers' restart counts summed, and how
/// long ago the last restarted run ended (`3 (12s ago)`; `0` before any
/// restart).
pub fn restarts(object: &StoredObject, now: Timestamp) -> String {
    use grace_std::store::ContainerStatus as S;
    let count: u64 = object.restarts.iter().map(|r| u64::from(r.count)).sum();
    let last = object
        .restarts
        .iter()
        .filter_map(|r| match &r.last_state {
            Some(S::Terminated { finished_at, .. }) => *finished_at,
            _ => None,
        })
        .max();
    match last {
        Some(at) if count > 0 => format!("{count} ({} ago)", age(at, now)),
        _ => count.to_string(),
    }
}

/// READY's count: the containers its agent reported running whose kill
/// has not stopped them, as kubectl counts ready containers. A container
/// not started yet (a `Pending` pod, one whose node has no agent) is not
/// ready.
pub fn ready(object: &StoredObject) -> usize {
    let stages = stages(object);
    stages
        .iter()
        .enumerate()
        .filter(|(i, stage)| {
            object.record.scheduled
                && object
                    .status
                    .get(*i)
                    .is_some_and(grace_std::store::ContainerStatus::is_running)
                && !matches!(stage, Some(Stage::Killed | Stage::Stopped))
        })
        .count()
}

/// kubectl's STATUS word for the object.
pub fn status_word(object: &StoredObject) -> String {
    if object.record.deletion_timestamp.is_some() {
        "Terminating".to_owned()
    } else if object.strategy.kind == Kind::Generic {
        "Active".to_owned()
    } else {
        containers_status(object).unwrap_or_else(|| match object.record.phase.as_str() {
            "" => "Pending".to_owned(),
            word => word.to_owned(),
        })
    }
}

/// A pod's STATUS from the states its agent reported
/// ([`StoredObject::status`]), as kubectl sums them up: the reason a
/// container could not run or will not be started; `Running` while one runs; `Completed` once all
/// exited 0, `Error` once all exited and one did not; `Pending` before any
/// started (no agent has reported any: none runs it yet). `None` without
/// containers.
fn containers_status(object: &StoredObject) -> Option<String> {
    use grace_std::store::ContainerStatus as S;
    if object.containers.is_empty() {
        return None;
    }
    let status = |i: usize| object.status.get(i);
    let all = 0..object.containers.len();
    let cannot_run = all.clone().any(|i| {
        matches!(status(i), Some(S::Terminated { reason, .. }) if reason == "ContainerCannotRun")
    });
    if cannot_run {
        return Some("ContainerCannotRun".to_owned());
    }
    // One waits out its back-off before it starts again (R95).
    let backing_off = all.clone().any(|i| {
        object
            .restarts
            .get(i)
            .is_some_and(|r| r.restart_at_ms.is_some())
    });
    if backing_off {
        return Some(grace_core::CRASH_LOOP_BACK_OFF.to_owned());
    }
    // A container the agent will not start says why, as kubectl shows a
    // waiting reason (`CreateContainerConfigError`).
    let refused = all.clone().find_map(|i| match status(i) {
        Some(S::Waiting { reason, .. }) if reason != "ContainerCreating" => Some(reason.clone()),
        _ => None,
    });
    if let Some(reason) = refused {
        return Some(reason);
    }
    if all.clone().any(|i| status(i).is_some_and(S::is_running)) {
        return Some("Running".to_owned());
    }
    if all
        .clone()
        .all(|i| matches!(status(i), Some(S::Terminated { .. })))
    {
        let ok = all.clone().all(
            |i| matches!(status(i), Some(S::Terminated { reason, .. }) if reason == "Completed"),
        );
        return Some(if ok { "Completed" } else { "Error" }.to_owned());
    }
    Some("Pending".to_owned())
}

/// Each container's kill stage, from the persisted kill state.
pub fn stages(object: &StoredObject) -> Vec<Option<Stage>> {
    let record = object
        .agent
        .as_ref()
        .and_then(|state| KillRecord::decode(state).ok());
    (0..object.containers.len())
        .map(|i| {
            record
                .as_ref()
                .and_then(|r| r.lifecycle.containers().get(i).map(|c| c.stage()))
        })
        .collect()
}

/// Rows in aligned columns (Go's tabwriter settings that kubectl uses:
/// padding 3).
pub fn aligned(rows: &[Vec<String>]) -> String {
    let mut tw = tabwriter::TabWriter::new(Vec::new()).padding(3);
    for row in rows {
        let _ = writeln!(tw, "{}", row.join("\t"));
    }
    tw.into_inner()
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .unwrap_or_default()
}

/// kubectl's AGE: `45s`, `3m20s`, `12m`, `5h10m`, `20h`, `3d4h`, `12d`,
/// `2y` (Kubernetes' `duration.HumanDuration`).
pub fn age(created: Timestamp, now: Timestamp) -> String {
    let s = now
        .as_unix_seconds()
        .saturating_sub(created.as_unix_seconds())
        .max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86_400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", s % 60)
        }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        if h % 24 == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        }
    } else if d < 365 * 2 {
        format!("{d}d")
    } else if d < 365 * 8 {
        let y = d / 365;
        if d % 365 == 0 {
            format!("{y}y")
        } else {
            format!("{y}y{}d", d % 365)
        }
    } else {
        format!("{}y", d / 365)
    }
}

/// The objects as Kubernetes shows them: the Pod itself when `single`,
/// else a `v1 List`.
pub fn kubernetes(items: &[(&str, &StoredObject)], single: bool) -> serde_json::Value {
    let pods: Vec<serde_json::Value> = items
        .iter()
        .map(|(name, object)| {
            let mut pod = serde_json::to_value(to_pod(name, object)).unwrap_or_default();
            if let Some(map) = pod.as_object_mut() {
                // k8s-openapi writes apiVersion and kind first already;
                // keep them for Lists too, as kubectl does.
                map.entry("apiVersion").or_insert("v1".into());
                map.entry("kind").or_insert("Pod".into());
            }
            pod
        })
        .collect();
    match (single, pods.as_slice()) {
        (true, [pod]) => pod.clone(),
        _ => serde_json::json!({
            "apiVersion": "v1",
            "kind": "List",
            "metadata": { "resourceVersion": "" },
            "items": pods,
        }),
    }
}

/// `value` as YAML.
pub fn yaml(value: &serde_json::Value) -> String {
    serde_saphyr::to_string(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn age_reads_as_kubectl_writes_it() {
        let at = |s: i64| {
            age(
                Timestamp::from_unix_seconds(0),
                Timestamp::from_unix_seconds(s),
            )
        };
        assert_eq!(at(5), "5s");
        assert_eq!(at(119), "119s");
        assert_eq!(at(200), "3m20s");
        assert_eq!(at(720), "12m");
        assert_eq!(at(5 * 3600 + 600), "5h10m");
        assert_eq!(at(20 * 3600), "20h");
        assert_eq!(at(3 * 86_400 + 4 * 3600), "3d4h");
        assert_eq!(at(12 * 86_400), "12d");
        assert_eq!(at(-5), "0s");
    }

    #[test]
    fn columns_are_aligned_to_the_longest_cell() {
        let text = aligned(&[
            vec!["NAME".into(), "STATUS".into()],
            vec![
                "a-very-long-pod-name-indeed-longer-than-24".into(),
                "Running".into(),
            ],
            vec!["b".into(), "Terminating".into()],
        ]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0].find("STATUS"), lines[1].find("Running"), "{text}");
        assert_eq!(
            lines[1].find("Running"),
            lines[2].find("Terminating"),
            "{text}"
        );
        assert!(lines[0].find("STATUS").is_some_and(|i| i > 40), "{text}");
    }
}
