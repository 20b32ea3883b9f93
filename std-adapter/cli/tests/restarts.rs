//! Containers restart as the kubelet restarts them (R92–R101, D9), with a
//! real agent and real processes: the pod's `restartPolicy`, the
//! CrashLoopBackOff of 10 s then 20 s counted from the exit, the restart
//! count and last state, RESTARTS, `logs --previous`, no restart once the
//! pod is being deleted, and a back-off that survives an agent crash.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::cast_precision_loss
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

fn status(pod: &Value) -> &Value {
    &pod["status"]["containerStatuses"][0]
}

/// A Pod manifest: one container that appends the time it starts (unix
/// milliseconds) to `starts`, prints `run N`, and exits with `code`, under
/// `policy` (none: the default).
fn manifest(name: &str, policy: Option<&str>, starts: &Path, code: i32, pre_stop: &str) -> String {
    let policy = policy.map_or(String::new(), |p| format!("  restartPolicy: {p}\n"));
    let starts = starts.display();
    let lifecycle = if pre_stop.is_empty() {
        String::new()
    } else {
        format!(
            "    lifecycle:\n      preStop:\n        exec:\n          command: [sh, -c, '{pre_stop}']\n"
        )
    };
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  terminationGracePeriodSeconds: 5
{policy}  containers:
  - name: app
    command: [sh, -c, 'echo $(($(date +%s%N) / 1000000)) >> {starts}; echo run $(wc -l < {starts}); exit {code}']
{lifecycle}"
    )
}

/// The start times a container recorded (unix milliseconds).
fn starts(file: &Path) -> Vec<u64> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Gaps between successive starts, in seconds.
fn gaps(starts: &[u64]) -> Vec<f64> {
    starts
        .windows(2)
        .map(|w| (w[1] - w[0]) as f64 / 1000.0)
        .collect()
}

fn apply(dir: &Path, file: &str, yaml: &str) {
    let path = dir.join(file);
    std::fs::write(&path, yaml).expect("written");
    ok(dir, &["apply", "-f", path.to_str().expect("utf-8")]);
}

#[test]
fn r92_r95_d9_a_failing_container_restarts_after_10_s_then_20_s_and_never_does_not() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = Agent::start(d, &[]);
    let file = |name: &str| d.join(format!("{name}.starts"));
    let pods = [
        manifest("always", None, &file("always"), 1, ""),
        manifest("onfailure", Some("OnFailure"), &file("onfailure"), 1, ""),
        manifest("never", Some("Never"), &file("never"), 1, ""),
        manifest("done", Some("OnFailure"), &file("done"), 0, ""),
    ];
    apply(d, "pods.yaml", &pods.join("---\n"));

    // Never, and OnFailure after exit 0: the pod is over at once (R98).
    wait_for("never and done are over", Duration::from_secs(10), || {
        pod(d, "never")["status"]["phase"] == "Failed"
            && pod(d, "done")["status"]["phase"] == "Succeeded"
    });
    // Between the runs: waiting, CrashLoopBackOff, in the kubelet's words,
    // the pod Running (it is being restarted, R98).
    wait_for(
        "always waits out its back-off",
        Duration::from_secs(10),
        || status(&pod(d, "always"))["state"]["waiting"]["reason"] == "CrashLoopBackOff",
    );
    let always = pod(d, "always");
    let uid = always["metadata"]["uid"]
        .as_str()
        .expect("a uid")
        .to_owned();
    assert_eq!(
        status(&always)["state"]["waiting"]["message"],
        format!("back-off 10s restarting failed container=app pod=always_default({uid})"),
        "{always}"
    );
    assert_eq!(always["status"]["phase"], "Running");
    assert_eq!(status(&always)["restartCount"], 0);
    assert_eq!(status(&always)["lastState"]["terminated"]["exitCode"], 1);
    assert_eq!(
        status(&always)["lastState"]["terminated"]["reason"],
        "Error"
    );
    let table = ok(d, &["get", "always"]);
    assert!(table.contains("CrashLoopBackOff"), "{table}");
    assert!(
        table.lines().next().is_some_and(|h| h.contains("RESTARTS")),
        "{table}"
    );

    // Three runs: 10 s, then 20 s after the exits (D9: from the first).
    for name in ["always", "onfailure"] {
        wait_for(
            &format!("{name} runs a third time"),
            Duration::from_secs(45),
            || starts(&file(name)).len() >= 3,
        );
    }
    for name in ["always", "onfailure"] {
        let gaps = gaps(&starts(&file(name)));
        eprintln!("{name}: seconds between starts: {gaps:?}");
        // The run itself takes milliseconds; the loop's timer, a few more.
        assert!(
            (9.9..12.0).contains(&gaps[0]) && (19.9..23.0).contains(&gaps[1]),
            "{name}: restarts after 10 s then 20 s: {gaps:?}"
        );
        assert!(
            gaps[1] > gaps[0] * 1.7,
            "{name}: the back-off doubles: {gaps:?}"
        );
    }
    wait_for("always waits 40 s now", Duration::from_secs(10), || {
        let p = pod(d, "always");
        status(&p)["restartCount"] == 2
            && status(&p)["state"]["waiting"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("back-off 40s restarting failed container=app"))
    });
    let always = pod(d, "always");
    let last = &status(&always)["lastState"]["terminated"];
    assert!(
        last["startedAt"].is_string() && last["finishedAt"].is_string(),
        "{always}"
    );
    // RESTARTS: the count, and how long ago the last restarted run ended.
    let row = ok(d, &["get", "always", "--no-headers"]);
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        &cells[..4],
        ["always", "0/1", "CrashLoopBackOff", "2"],
        "{row}"
    );
    assert!(cells[4].starts_with('(') && cells[5] == "ago)", "{row}");
    // The previous run's output, and the current one's.
    assert_eq!(ok(d, &["logs", "always", "--previous"]), "run 2\n");
    assert_eq!(ok(d, &["logs", "always"]), "run 3\n");
    let described = ok(d, &["describe", "always"]);
    assert!(described.contains("Restart Count: 2"), "{described}");

    // Never and exit 0 under OnFailure: one run each, long after 10 s.
    assert_eq!(starts(&file("never")).len(), 1);
    assert_eq!(starts(&file("done")).len(), 1);
    assert_eq!(pod(d, "never")["status"]["phase"], "Failed");
    assert_eq!(status(&pod(d, "never"))["restartCount"], 0);
    let out = grace(d, &["logs", "never", "--previous"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr)
            .contains("previous terminated container \"app\" in pod \"never\" not found"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn r94_a_delete_during_the_back_off_ends_at_once_with_no_hook_signal_or_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = Agent::start(d, &[]);
    let starts_file = d.join("p.starts");
    let hook = d.join("hook-ran");
    apply(
        d,
        "p.yaml",
        &manifest(
            "p",
            None,
            &starts_file,
            1,
            &format!("touch {}", hook.display()),
        ),
    );
    wait_for("p waits out its back-off", Duration::from_secs(10), || {
        status(&pod(d, "p"))["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    });
    let asked = std::time::Instant::now();
    ok(d, &["delete", "p", "--wait=false"]);
    wait_for("p is gone", Duration::from_secs(10), || {
        !grace(d, &["get", "p"]).status.success()
    });
    // No process ran: nothing to stop, no grace to wait out (5 s).
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
    assert!(
        !hook.exists(),
        "no pre-stop hook for a container that is not running"
    );
    // Past the back-off's end: it was not started again.
    std::thread::sleep(Duration::from_secs(11));
    assert_eq!(starts(&starts_file).len(), 1);
}

#[test]
fn r95_the_back_off_survives_an_agent_crash() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let agent = Agent::start(d, &[]);
    let file = d.join("p.starts");
    apply(d, "p.yaml", &manifest("p", None, &file, 1, ""));
    // The second run has ended: it waits 20 s.
    wait_for("p waits 20 s", Duration::from_secs(20), || {
        status(&pod(d, "p"))["state"]["waiting"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("back-off 20s"))
    });
    agent.crash();
    let _agent = Agent::start(d, &[]);
    wait_for("p runs a third time", Duration::from_secs(30), || {
        starts(&file).len() >= 3
    });
    let gaps = gaps(&starts(&file));
    eprintln!("across the crash: seconds between starts: {gaps:?}");
    // Not 10 s again from the new agent's start: the persisted instant.
    assert!(
        (9.9..12.0).contains(&gaps[0]) && (19.9..23.0).contains(&gaps[1]),
        "restarts after 10 s then 20 s, across the crash: {gaps:?}"
    );
    // The agent starts the process, then records the restart: waited for.
    wait_for("the restart recorded", Duration::from_secs(5), || {
        status(&pod(d, "p"))["restartCount"] == 2
    });
}

#[test]
fn r93_a_native_sidecar_restarts_whatever_the_pods_policy() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = Agent::start(d, &[]);
    let starts_file = d.join("log.starts");
    let starts_path = starts_file.display();
    // Policy Never, a main container that runs, a sidecar that exits 0 at
    // once: the sidecar is started again all the same.
    apply(
        d,
        "s.yaml",
        &format!(
            "apiVersion: v1
kind: Pod
metadata:
  name: s
spec:
  terminationGracePeriodSeconds: 2
  restartPolicy: Never
  initContainers:
  - name: log
    restartPolicy: Always
    command: [sh, -c, 'echo $(($(date +%s%N) / 1000000)) >> {starts_path}; exit 0']
  containers:
  - name: app
    command: [sh, -c, \"trap 'exit 0' TERM; while :; do sleep 0.05; done\"]
"
        ),
    );
    wait_for(
        "the sidecar runs a second time",
        Duration::from_secs(20),
        || starts(&starts_file).len() >= 2,
    );
    let gaps = gaps(&starts(&starts_file));
    assert!((9.9..12.0).contains(&gaps[0]), "{gaps:?}");
    wait_for("restartCount 1", Duration::from_secs(5), || {
        pod(d, "s")["status"]["initContainerStatuses"][0]["restartCount"] == 1
    });
    assert_eq!(pod(d, "s")["status"]["phase"], "Running");
    ok(d, &["delete", "s", "--timeout=20s"]);
}
