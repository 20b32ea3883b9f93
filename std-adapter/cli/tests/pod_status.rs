//! A pod's status tells the truth, as the kubelet reports it without
//! probes: the phase (R98–R101), READY, the conditions, `status.startTime`
//! and each container's `startedAt` / `finishedAt`, through `grace get`
//! and `grace describe` with a real agent and real processes.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use support::common::wait_for;
use support::{Agent, grace, text};

/// `grace ARGS`, which must succeed; its standard output.
fn ok(dir: &Path, args: &[&str]) -> String {
    let out = grace(dir, args);
    assert!(
        out.status.success(),
        "grace {args:?}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// `grace get NAME -o json`.
fn pod(dir: &Path, name: &str) -> Value {
    serde_json::from_str(&ok(dir, &["get", name, "-o", "json"])).expect("JSON")
}

/// A Pod manifest: `node` (none: unscheduled), one container running
/// `script` under `sh -c`.
fn manifest(name: &str, node: Option<&str>, script: &str) -> String {
    let node = node.map_or(String::new(), |n| format!("  nodeName: {n}\n"));
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
{node}  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  containers:
  - name: app
    command: [sh, -c, \"{script}\"]
"
    )
}

/// The condition of type `kind`: (status, reason).
fn condition(pod: &Value, kind: &str) -> (String, String) {
    let list = pod["status"]["conditions"].as_array().expect("conditions");
    let c = list
        .iter()
        .find(|c| c["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {list:?}"));
    (
        c["status"].as_str().unwrap_or_default().to_owned(),
        c["reason"].as_str().unwrap_or_default().to_owned(),
    )
}

fn state(pod: &Value) -> &Value {
    &pod["status"]["containerStatuses"][0]["state"]
}

/// An RFC 3339 time of the status, as unix seconds.
fn seconds(time: &Value) -> i64 {
    let text = time.as_str().unwrap_or_else(|| panic!("a time: {time}"));
    let t: k8s_openapi::jiff::Timestamp = text.parse().expect("RFC 3339");
    t.as_second()
}

#[test]
fn r98_r100_phase_ready_conditions_and_times_as_the_kubelet_reports_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let agent = Agent::start(d, &[]);
    let pods = [
        manifest("unscheduled", None, "sleep 100"),
        manifest("elsewhere", Some("other-node"), "sleep 100"),
        manifest(
            "runs",
            Some("local"),
            "trap 'exit 0' TERM; while :; do sleep 0.05; done",
        ),
        manifest("fails", Some("local"), "exit 3"),
        manifest("succeeds", Some("local"), "exit 0"),
    ];
    let file = d.join("pods.yaml");
    std::fs::write(&file, pods.join("---\n")).expect("written");
    ok(d, &["apply", "-f", file.to_str().expect("utf-8")]);
    wait_for(
        "the workloads start and exit",
        Duration::from_secs(10),
        || {
            state(&pod(d, "runs"))["running"].is_object()
                && state(&pod(d, "fails"))["terminated"].is_object()
                && state(&pod(d, "succeeds"))["terminated"].is_object()
        },
    );

    // Pending: a node no agent serves. READY 0/1. (A pod that names no
    // node is bound by the lone agent and runs; a pod no agent has bound
    // is Pending with only `PodScheduled`, false: grace-k8s's
    // `an_object_without_a_node_shows_as_waiting_unscheduled`.)
    let table = ok(d, &["get"]);
    let name = "elsewhere";
    let row = table.lines().find(|l| l.starts_with(name)).expect("a row");
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[1..3], ["0/1", "Pending"], "{table}");
    let p = pod(d, name);
    assert_eq!(p["status"]["phase"], "Pending", "{p}");
    assert!(p["status"]["startTime"].is_null(), "no agent took it: {p}");
    let unscheduled = pod(d, "unscheduled");
    assert_eq!(
        unscheduled["spec"]["nodeName"], "local",
        "bound: {unscheduled}"
    );
    assert_eq!(condition(&unscheduled, "PodScheduled").0, "True");
    let elsewhere = pod(d, "elsewhere");
    assert_eq!(condition(&elsewhere, "PodScheduled").0, "True");
    assert_eq!(
        condition(&elsewhere, "Ready"),
        ("False".into(), "ContainersNotReady".into())
    );

    // Running: ready, started, every condition true.
    let runs = pod(d, "runs");
    assert_eq!(runs["status"]["phase"], "Running", "{runs}");
    for kind in ["Initialized", "Ready", "ContainersReady", "PodScheduled"] {
        assert_eq!(condition(&runs, kind).0, "True", "{kind}: {runs}");
    }
    let start = seconds(&runs["status"]["startTime"]);
    let started = seconds(&state(&runs)["running"]["startedAt"]);
    assert!(start <= started, "{runs}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("runs") && l.contains("1/1"))
    );

    // Exited, and not restarted (restartPolicy Never): Failed or Succeeded.
    let fails = pod(d, "fails");
    assert_eq!(fails["status"]["phase"], "Failed", "{fails}");
    let terminated = &state(&fails)["terminated"];
    assert_eq!(terminated["exitCode"], 3);
    assert_eq!(terminated["reason"], "Error");
    assert!(seconds(&terminated["startedAt"]) <= seconds(&terminated["finishedAt"]));
    assert_eq!(
        condition(&fails, "Ready"),
        ("False".into(), "ContainersNotReady".into())
    );
    let succeeds = pod(d, "succeeds");
    assert_eq!(succeeds["status"]["phase"], "Succeeded", "{succeeds}");
    assert_eq!(state(&succeeds)["terminated"]["reason"], "Completed");
    assert_eq!(
        condition(&succeeds, "ContainersReady"),
        ("False".into(), "PodCompleted".into())
    );
    let described = ok(d, &["describe", "fails"]);
    assert!(
        described.contains("Phase:            Failed"),
        "{described}"
    );
    assert!(described.contains("Start Time:"), "{described}");
    assert!(
        described.contains("Ready             False    ContainersNotReady"),
        "{described}"
    );

    // The times are stored: a new agent reports the same ones.
    agent.stop();
    let _agent = Agent::start(d, &[]);
    let again = pod(d, "runs");
    assert_eq!(again["status"]["startTime"], runs["status"]["startTime"]);
    assert_eq!(
        state(&again)["running"]["startedAt"],
        state(&runs)["running"]["startedAt"],
        "{again}"
    );
    assert_eq!(
        state(&pod(d, "fails"))["terminated"],
        *terminated,
        "the exit's times too"
    );
}
