//! A container that ends while no agent runs reports its real exit code
//! after the agent restarts, as the kubelet would have reported it: the
//! code (128 + the signal for one a signal ended), `Completed` or
//! `Error`, and when it ended. Real `grace agent`s, SIGKILLed and
//! restarted, and real workloads. Only a workload whose waiter was
//! killed with it (SIGKILL to its whole group while no agent ran) is
//! still unknown: 137 and `ContainerStatusUnknown`.
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
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use support::common::workloads::{self, WorkloadRecord};
use support::common::{alive, wait_for};
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

/// The terminated state of `name`'s container, if it is terminated.
fn terminated(dir: &Path, name: &str) -> Option<Value> {
    let pod: Value = serde_json::from_str(&ok(dir, &["get", name, "-o", "json"])).expect("JSON");
    let state = &pod["status"]["containerStatuses"][0]["state"]["terminated"];
    state.is_object().then(|| state.clone())
}

/// A pod whose one container writes its shell's pid to `NAME.pid`, waits
/// until the file `NAME.go` exists, then runs `end`.
fn manifest(dir: &Path, name: &str, end: &str) -> String {
    let (pid, go) = (
        dir.join(format!("{name}.pid")),
        dir.join(format!("{name}.go")),
    );
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  nodeName: local
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  containers:
  - name: app
    command: [sh, -c, \"echo $$$$ > {pid}; while [ ! -e {go} ]; do sleep 0.02; done; {end}\"]
",
        pid = pid.display(),
        go = go.display(),
    )
}

/// The workload record of `name`'s container.
fn record(dir: &Path, name: &str) -> WorkloadRecord {
    let file = workloads::file_name(name, 0, false);
    workloads::records(&grace_agent::workloads_dir(dir))
        .into_iter()
        .find(|(path, _)| path.file_name().is_some_and(|f| *f == *file))
        .map(|(_, record)| record)
        .unwrap_or_else(|| panic!("{name} has a workload record"))
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs().try_into().unwrap_or(i64::MAX))
}

/// An RFC 3339 time of a status, as unix seconds.
fn seconds(time: &Value) -> i64 {
    let text = time.as_str().unwrap_or_else(|| panic!("a time: {time}"));
    let t: k8s_openapi::jiff::Timestamp = text.parse().expect("RFC 3339");
    t.as_second()
}

/// Issue 29 item 6: containers that end while their agent is down (it
/// was SIGKILLed) — `exit 3`, `exit 0`, a shell ended by SIGTERM — report
/// 3 (`Error`), 0 (`Completed`) and 143 (`Error`) once an agent runs
/// again, each finished when it ended, not when the agent came back; one
/// that ends after the restarted agent adopted it reports its code too.
/// The pods are deleted as usual afterwards. One killed with its whole
/// group (its waiter too) while no agent ran is still unknown.
#[test]
fn exit_codes_of_workloads_that_ended_while_no_agent_ran_are_reported_after_a_restart() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let d = tmp.path();
    let agent = Agent::start(d, &[]);
    let pods = [
        manifest(d, "three", "exit 3"),
        manifest(d, "zero", "exit 0"),
        // Ends by SIGTERM, sent to its shell alone (not to its group).
        manifest(d, "term", "while :; do sleep 0.02; done"),
        manifest(d, "later", "exit 4"),
        manifest(d, "killed", "while :; do sleep 0.02; done"),
    ];
    let file = d.join("pods.yaml");
    std::fs::write(&file, pods.join("---\n")).expect("written");
    ok(d, &["apply", "-f", file.to_str().expect("utf-8")]);
    let names = ["three", "zero", "term", "later", "killed"];
    wait_for("every workload runs", Duration::from_secs(10), || {
        names.iter().all(|n| alive(&d.join(format!("{n}.pid"))))
    });
    let records: Vec<WorkloadRecord> = names.iter().map(|n| record(d, n)).collect();
    agent.crash();

    // While no agent runs: three of them end on their own or by SIGTERM,
    // one with its whole group by SIGKILL.
    let crashed = now();
    for name in ["three", "zero"] {
        std::fs::write(d.join(format!("{name}.go")), b"").expect("go");
    }
    let term_pid = std::fs::read_to_string(d.join("term.pid")).expect("pid");
    let kill = |args: &[&str]| {
        let status = std::process::Command::new("kill").args(args).status();
        assert!(status.is_ok_and(|s| s.success()), "kill {args:?}");
    };
    kill(&["-TERM", term_pid.trim()]);
    let killed = &records[4];
    kill(&["-KILL", "--", &format!("-{}", killed.process.pid)]);
    for (name, record) in names.iter().zip(&records) {
        if *name == "later" {
            continue;
        }
        wait_for(
            &format!("{name} ends, its waiter too"),
            Duration::from_secs(10),
            || !record.process.is_alive(),
        );
    }
    let ended = now();
    assert!(records[3].process.is_alive(), "`later` still runs");
    // The next agent starts in a later second than the ends, so that an
    // end reported when the agent took it would show.
    wait_for("a second passes", Duration::from_secs(3), || now() > ended);

    // A new agent: the real codes, and when they ended.
    let agent = Agent::start(d, &[]);
    for (name, code, reason) in [
        ("three", 3, "Error"),
        ("zero", 0, "Completed"),
        ("term", 143, "Error"),
        ("killed", 137, "ContainerStatusUnknown"),
    ] {
        wait_for(
            &format!("{name} is reported terminated"),
            Duration::from_secs(10),
            || terminated(d, name).is_some(),
        );
        let state = terminated(d, name).expect("terminated");
        assert_eq!(state["exitCode"], code, "{name}: {state}");
        assert_eq!(state["reason"], reason, "{name}: {state}");
        if reason != "ContainerStatusUnknown" {
            let finished = seconds(&state["finishedAt"]);
            assert!(
                (crashed..=ended).contains(&finished),
                "{name} finished at {finished}, when it ended ({crashed}..={ended}): {state}"
            );
        }
    }

    // Adopted while it ran, it ends now: its code, not 137.
    assert!(terminated(d, "later").is_none(), "`later` runs: adopted");
    std::fs::write(d.join("later.go"), b"").expect("go");
    wait_for(
        "later is reported terminated",
        Duration::from_secs(10),
        || terminated(d, "later").is_some(),
    );
    let state = terminated(d, "later").expect("terminated");
    assert_eq!(state["exitCode"], 4, "{state}");
    assert_eq!(state["reason"], "Error", "{state}");

    // The deletions work as ever, and leave no record behind.
    for name in names {
        ok(d, &["delete", name, "--timeout=20s"]);
    }
    assert!(
        workloads::records(&grace_agent::workloads_dir(d)).is_empty(),
        "no workload record left"
    );
    let _ = agent.stop();
}
