//! `kubectl get`'s human output, printed by the server: a `meta.k8s.io/v1`
//! Table with the columns of kube-apiserver's pod printer (NAME, READY,
//! STATUS, RESTARTS, AGE; IP, NODE, NOMINATED NODE, READINESS GATES with
//! `-o wide`), each row carrying the pod's metadata (for `--show-labels`
//! and `-A`).

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

/// Whether the client's Accept asks for a Table.
pub(crate) fn wanted(accept: &str) -> bool {
    accept.contains("as=Table")
}

/// The Table of `pods` at `revision`.
pub(crate) fn table(pods: &[Pod], revision: u64, with_columns: bool) -> Value {
    let column = |name: &str, priority: u8| {
        json!({"name": name, "type": "string", "format": if name == "Name" {"name"} else {""},
               "description": "", "priority": priority})
    };
    let columns = if with_columns {
        vec![
            column("Name", 0),
            column("Ready", 0),
            column("Status", 0),
            column("Restarts", 0),
            column("Age", 0),
            column("IP", 1),
            column("Node", 1),
            column("Nominated Node", 1),
            column("Readiness Gates", 1),
        ]
    } else {
        Vec::new()
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let rows: Vec<Value> = pods.iter().map(|pod| row(pod, now)).collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": revision.to_string()},
        "columnDefinitions": columns,
        "rows": rows,
    })
}

/// One pod's row, as kube-apiserver's `printPod` makes it.
fn row(pod: &Pod, now: i64) -> Value {
    let meta = &pod.metadata;
    let status = pod.status.as_ref();
    let statuses = status
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    let total = pod.spec.as_ref().map_or(0, |s| s.containers.len());
    let ready = statuses
        .iter()
        .filter(|c| c.ready && c.state.as_ref().is_some_and(|s| s.running.is_some()))
        .count();
    let restarts: i64 = statuses.iter().map(|c| i64::from(c.restart_count)).sum();
    let phase = status.and_then(|s| s.phase.clone());
    let mut word = status
        .and_then(|s| s.reason.clone())
        .or(phase.clone())
        .unwrap_or_else(|| "Pending".to_owned());
    // The last container with a waiting or terminated reason wins.
    for c in statuses.iter().rev() {
        let state = c.state.as_ref();
        if let Some(reason) = state
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.clone())
            .filter(|r| !r.is_empty())
        {
            word = reason;
            break;
        }
        if let Some(t) = state.and_then(|s| s.terminated.as_ref()) {
            word = t.reason.clone().unwrap_or_else(|| {
                if t.signal.unwrap_or(0) != 0 {
                    format!("Signal:{}", t.signal.unwrap_or(0))
                } else {
                    format!("ExitCode:{}", t.exit_code)
                }
            });
            break;
        }
    }
    if word == "Completed"
        && statuses
            .iter()
            .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
    {
        word = "Running".to_owned();
    }
    let finished = matches!(phase.as_deref(), Some("Succeeded" | "Failed"));
    if meta.deletion_timestamp.is_some() && !finished {
        word = "Terminating".to_owned();
    }
    let age = meta.creation_timestamp.as_ref().map_or_else(
        || "<unknown>".to_owned(),
        |t| age(now.saturating_sub(t.0.as_second())),
    );
    let none = || "<none>".to_owned();
    let ip = status.and_then(|s| s.pod_ip.clone()).unwrap_or_else(none);
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_else(none);
    let nominated = status
        .and_then(|s| s.nominated_node_name.clone())
        .unwrap_or_else(none);
    json!({
        "cells": [
            meta.name.clone().unwrap_or_default(),
            format!("{ready}/{total}"),
            word,
            restarts.to_string(),
            age,
            ip,
            node,
            nominated,
            "<none>",
        ],
        "object": {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": meta,
        },
    })
}

/// kubectl's AGE for `s` seconds: `45s`, `3m20s`, `12m`, `5h10m`, `20h`,
/// `3d4h`, `12d`, `2y` (Kubernetes' `duration.HumanDuration`).
pub(crate) fn age(s: i64) -> String {
    let s = s.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86_400);
    let two = |big: i64, unit: &str, small: i64, small_unit: &str| {
        if small == 0 {
            format!("{big}{unit}")
        } else {
            format!("{big}{unit}{small}{small_unit}")
        }
    };
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        two(m, "m", s % 60, "s")
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        two(h, "h", m % 60, "m")
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        two(d, "d", h % 24, "h")
    } else if d < 365 * 2 {
        format!("{d}d")
    } else if d < 365 * 8 {
        two(d / 365, "y", d % 365, "d")
    } else {
        format!("{}y", d / 365)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn age_reads_as_kubectl_writes_it() {
        for (s, want) in [
            (5, "5s"),
            (200, "3m20s"),
            (720, "12m"),
            (18_600, "5h10m"),
            (90_000, "25h"),
            (273_600, "3d4h"),
        ] {
            assert_eq!(age(s), want, "{s}");
        }
    }
}
