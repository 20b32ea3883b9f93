//! kubectl's habits on the `grace` command line (docs/kubectl.md), through
//! a real agent and real workloads: `grace patch -p` with the three patch
//! kinds, `grace logs`' selection and time options.
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
use std::process::Output;
use std::time::Duration;

use support::common::{alive, wait_for};
use support::{Agent, grace, text};

/// A pod bound to the agent's node whose workload writes its pid to
/// `pid_file` (`$$$$`: the kubelet makes `$$` one `$`), labelled
/// `app=web`; `extra` goes into its metadata.
fn apply_pod(dir: &Path, name: &str, pid_file: &Path, extra: &str) {
    let pod = format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","labels":{{"app":"web"}}{extra}}},
            "spec":{{"nodeName":"local","terminationGracePeriodSeconds":1,
                    "containers":[{{"name":"app","command":["sh","-c","echo $$$$ > {pid}; trap 'exit 0' TERM; while :; do sleep 0.05; done"]}}]}}}}"#,
        pid = pid_file.display()
    );
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, pod).expect("written");
    let out = grace(dir, &["apply", "-f", path.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// The pod as `grace get -o json` shows it.
fn pod_json(dir: &Path, name: &str) -> Option<serde_json::Value> {
    let out = grace(dir, &["get", "pod", name, "-o", "json"]);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).expect("JSON"))
}

fn patch(dir: &Path, args: &[&str]) -> Output {
    grace(dir, &[&["patch"], args].concat())
}

/// The output of a command that must succeed.
fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn patch_of_each_type_changes_labels_annotations_and_finalizers_of_a_running_pod() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pid = dir.path().join("web.pid");
    let _agent = Agent::start(dir.path(), &[]);
    apply_pod(dir.path(), "web", &pid, "");
    wait_for("the workload", Duration::from_secs(10), || alive(&pid));
    let before = std::fs::read_to_string(&pid).expect("pid");

    // Strategic merge (kubectl's default), as `pod NAME`.
    let out = patch(
        dir.path(),
        &[
            "pod",
            "web",
            "-p",
            r#"{"metadata":{"labels":{"tier":"front"}}}"#,
        ],
    );
    assert_eq!(ok(&out), "pod/web patched\n");
    // The same again changes nothing: kubectl's word for it.
    let out = patch(
        dir.path(),
        &[
            "pod/web",
            "-p",
            r#"{"metadata":{"labels":{"tier":"front"}}}"#,
        ],
    );
    assert_eq!(ok(&out), "pod/web patched (no change)\n");
    // YAML is read as kubectl reads it; a merge patch; null removes.
    let out = patch(
        dir.path(),
        &[
            "web",
            "--type",
            "merge",
            "-p",
            "metadata: {annotations: {note: hi}, labels: {app: null}}",
        ],
    );
    assert_eq!(ok(&out), "pod/web patched\n");
    // A label no apply set goes when a patch takes it out: the patched pod
    // replaces the labels (no three-way merge with the last apply's).
    let out = patch(
        dir.path(),
        &["web", "-p", r#"{"metadata":{"labels":{"extra":"1"}}}"#],
    );
    assert_eq!(ok(&out), "pod/web patched\n");
    let out = patch(
        dir.path(),
        &[
            "web",
            "--type",
            "json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/labels/extra"}]"#,
        ],
    );
    assert_eq!(ok(&out), "pod/web patched\n");
    // A JSON patch adds a finalizer (R46: allowed before the deletion).
    let out = patch(
        dir.path(),
        &[
            "web",
            "--type",
            "json",
            "-p",
            r#"[{"op":"add","path":"/metadata/finalizers","value":["example.com/keep"]}]"#,
        ],
    );
    assert_eq!(ok(&out), "pod/web patched\n");
    let pod = pod_json(dir.path(), "web").expect("stored");
    assert_eq!(
        pod["metadata"]["labels"],
        serde_json::json!({"tier": "front"})
    );
    assert_eq!(pod["metadata"]["annotations"]["note"], "hi");
    assert_eq!(
        pod["metadata"]["finalizers"],
        serde_json::json!(["example.com/keep"])
    );
    // Metadata changes restart nothing.
    assert!(alive(&pid));
    assert_eq!(std::fs::read_to_string(&pid).expect("pid"), before);

    // R46: no new finalizer once the pod is being deleted.
    let out = grace(dir.path(), &["delete", "pod/web", "--wait=false"]);
    ok(&out);
    let out = patch(
        dir.path(),
        &[
            "web",
            "-p",
            r#"{"metadata":{"finalizers":["example.com/late"]}}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains(
            "The Pod \"web\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted"
        ),
        "{}",
        text(&out.stderr)
    );
    // R45: a JSON patch removing the last finalizer completes the deletion.
    let out = patch(
        dir.path(),
        &[
            "web",
            "--type",
            "json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers/0"}]"#,
        ],
    );
    assert_eq!(ok(&out), "pod/web patched\n");
    wait_for("the pod is gone", Duration::from_secs(10), || {
        pod_json(dir.path(), "web").is_none()
    });
    assert!(!alive(&pid), "the workload was stopped");
}

#[test]
fn patch_refuses_spec_changes_and_bad_patches_in_kubectls_words() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pid = dir.path().join("web.pid");
    let _agent = Agent::start(dir.path(), &[]);
    apply_pod(dir.path(), "web", &pid, "");
    let stored = pod_json(dir.path(), "web").expect("stored");
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &[
                "web",
                "--type",
                "merge",
                "-p",
                r#"{"spec":{"terminationGracePeriodSeconds":5}}"#,
            ],
            2,
            "grace patch: The Pod \"web\" is invalid: spec: Forbidden: pod updates may not change fields other than",
        ),
        (
            &["web", "-p", "{bad"],
            2,
            "grace patch: Error from server (BadRequest): patch: key must be a string",
        ),
        (
            &["web", "-p", "metadata: {labels: {a: b}"],
            2,
            "grace patch: unable to parse \"metadata: {labels: {a: b}\": yaml: ",
        ),
        (
            &["web", "--type", "json", "-p", r#"{"op":"add"}"#],
            2,
            "grace patch: The Pod \"web\" is invalid: patch: a JSON patch is a list of operations",
        ),
        (
            &[
                "web",
                "--type",
                "json",
                "-p",
                r#"[{"op":"remove","path":"/metadata/nothere"}]"#,
            ],
            2,
            "grace patch: The Pod \"web\" is invalid: patch: no value at /metadata/nothere",
        ),
        (
            &["web", "--type", "foo", "-p", "{}"],
            2,
            "grace patch: --type must be one of [json merge strategic], not \"foo\"",
        ),
        (
            &["nope", "-p", "{}"],
            1,
            "grace patch: Error from server (NotFound): pods \"nope\" not found",
        ),
    ];
    for (args, code, expected) in cases {
        let out = patch(dir.path(), args);
        assert_eq!(out.status.code(), Some(*code), "{args:?}");
        assert!(
            text(&out.stderr).starts_with(expected),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    // Nothing was changed.
    let pod = pod_json(dir.path(), "web").expect("stored");
    assert_eq!(
        pod["metadata"]["resourceVersion"],
        stored["metadata"]["resourceVersion"]
    );
}

/// Applies a pod bound to the agent's node, labelled `app=web`, whose
/// containers print their name once and sleep; `annotations` is JSON.
fn apply_printing(dir: &Path, name: &str, containers: &[&str], annotations: &str) {
    let containers: Vec<serde_json::Value> = containers
        .iter()
        .map(|c| {
            serde_json::json!({"name": c, "command": ["sh", "-c", format!("echo {c}-says-hi; exec sleep 1000")]})
        })
        .collect();
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"},
                     "annotations": serde_json::from_str::<serde_json::Value>(annotations).expect("JSON")},
        "spec": {"nodeName": "local", "terminationGracePeriodSeconds": 1, "containers": containers},
    });
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, pod.to_string()).expect("written");
    let out = grace(dir, &["apply", "-f", path.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn logs_pick_the_default_container_or_all_of_them_with_prefixes_and_by_selector() {
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(dir.path(), &[]);
    apply_printing(dir.path(), "two", &["a", "b"], "{}");
    apply_printing(
        dir.path(),
        "picked",
        &["a", "b"],
        r#"{"kubectl.kubernetes.io/default-container": "b"}"#,
    );
    // Ready once every container has printed its line.
    for (pod, c) in [("two", "a"), ("two", "b"), ("picked", "a"), ("picked", "b")] {
        wait_for("the containers' lines", Duration::from_secs(10), || {
            let out = grace(dir.path(), &["logs", pod, "-c", c]);
            text(&out.stdout) == format!("{c}-says-hi\n")
        });
    }

    // kubectl's default container, said on standard error; `pod/NAME`.
    let out = grace(dir.path(), &["logs", "pod/two"]);
    assert_eq!(ok(&out), "a-says-hi\n");
    assert_eq!(
        text(&out.stderr),
        "Defaulted container \"a\" out of: a, b\n"
    );
    // The annotation names it: nothing said.
    let out = grace(dir.path(), &["logs", "pod", "picked"]);
    assert_eq!(ok(&out), "b-says-hi\n");
    assert_eq!(text(&out.stderr), "");
    // Every container, one after another, with or without kubectl's prefix.
    let out = grace(dir.path(), &["logs", "two", "--all-containers"]);
    assert_eq!(ok(&out), "a-says-hi\nb-says-hi\n");
    let out = grace(dir.path(), &["logs", "two", "--all-containers", "--prefix"]);
    assert_eq!(ok(&out), "[pod/two/a] a-says-hi\n[pod/two/b] b-says-hi\n");
    // Every pod the selector picks, its default container each.
    let out = grace(dir.path(), &["logs", "-l", "app=web", "--prefix"]);
    assert_eq!(
        ok(&out),
        "[pod/picked/b] b-says-hi\n[pod/two/a] a-says-hi\n"
    );
    let out = grace(dir.path(), &["logs", "-l", "app=none"]);
    assert_eq!(ok(&out), "");
    assert_eq!(
        text(&out.stderr),
        "No resources found in default namespace.\n"
    );
    // kubectl's error for a container the pod does not have.
    let out = grace(dir.path(), &["logs", "two", "-c", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "grace logs: container nope is not valid for pod two\n"
    );
}

/// A pod whose container prints `early`, then `late` once the file `go`
/// exists (the test's signal), then sleeps.
fn apply_early_late(dir: &Path, name: &str, go: &Path) {
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"nodeName": "local", "terminationGracePeriodSeconds": 1, "containers": [{
            "name": "app",
            "command": ["sh", "-c", format!(
                "echo early; while [ ! -e {go} ]; do sleep 0.02; done; echo late; exec sleep 1000",
                go = go.display()
            )],
        }]},
    });
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, pod.to_string()).expect("written");
    let out = grace(dir, &["apply", "-f", path.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// `TIME TEXT` lines (`--timestamps`) split, each time checked to be
/// RFC 3339 with nanoseconds, UTC.
fn stamped(output: &str) -> Vec<(String, String)> {
    output
        .lines()
        .map(|l| {
            let (time, rest) = l.split_once(' ').expect("a time and the text");
            assert_eq!(time.len(), 30, "{time}");
            assert!(time.ends_with('Z') && time.as_bytes()[10] == b'T', "{time}");
            (time.to_owned(), rest.to_owned())
        })
        .collect()
}

#[test]
fn logs_timestamps_and_since_read_the_time_each_line_was_written() {
    let dir = tempfile::tempdir().expect("temp dir");
    let go = dir.path().join("go");
    let _agent = Agent::start(dir.path(), &[]);
    apply_early_late(dir.path(), "clock", &go);
    wait_for("early", Duration::from_secs(10), || {
        text(&grace(dir.path(), &["logs", "clock"]).stdout) == "early\n"
    });
    std::fs::write(&go, "").expect("signalled");
    wait_for("late", Duration::from_secs(10), || {
        text(&grace(dir.path(), &["logs", "clock"]).stdout) == "early\nlate\n"
    });
    let lines = stamped(&ok(&grace(dir.path(), &["logs", "clock", "--timestamps"])));
    let texts: Vec<&str> = lines.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(texts, ["early", "late"]);
    // The times are today's, in order (RFC 3339 sorts as text).
    let today = ok(&grace(
        dir.path(),
        &[
            "get",
            "pod",
            "clock",
            "-o",
            "jsonpath={.metadata.creationTimestamp}",
        ],
    ));
    assert_eq!(lines[0].0[..10], today[..10]);
    assert!(lines[0].0 <= lines[1].0);
    let late = &lines[1].0;
    let since = |args: &[&str]| ok(&grace(dir.path(), &[&["logs", "clock"], args].concat()));
    assert_eq!(since(&["--since-time", late]), "late\n");
    assert_eq!(since(&["--since-time", &lines[0].0]), "early\nlate\n");
    assert_eq!(since(&["--since-time", "2999-01-01T00:00:00Z"]), "");
    assert_eq!(since(&["--since", "1h"]), "early\nlate\n");
    assert_eq!(
        since(&["--since", "1h", "--tail", "1", "--prefix"]),
        "[pod/clock/app] late\n"
    );
    let out = grace(dir.path(), &["logs", "clock", "--since-time", "yesterday"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// The real kubectl against the agent's Kubernetes API (skipped without
/// kubectl outside CI).
fn kubectl(dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new("kubectl")
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .arg("--cache-dir")
        .arg(dir.join("kube-cache"))
        .args(args)
        .output()
        .expect("kubectl runs")
}

#[test]
fn kubectl_logs_timestamps_and_since_through_the_agents_api() {
    let kubectl_there = std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !kubectl_there {
        support::common::missing_tool("kubectl is not installed (apt-get install kubectl)");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let go = dir.path().join("go");
    let _agent = Agent::start(dir.path(), &["--k8s-api", "127.0.0.1:0"]);
    wait_for("the kubeconfig", Duration::from_secs(10), || {
        dir.path().join("kubeconfig").exists()
    });
    apply_early_late(dir.path(), "clock", &go);
    std::fs::write(&go, "").expect("signalled");
    wait_for("both lines", Duration::from_secs(10), || {
        text(&kubectl(dir.path(), &["logs", "clock"]).stdout) == "early\nlate\n"
    });
    let lines = stamped(&ok(&kubectl(
        dir.path(),
        &["logs", "clock", "--timestamps"],
    )));
    let texts: Vec<&str> = lines.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(texts, ["early", "late"]);
    // The same times as `grace logs --timestamps` reads.
    let ours = stamped(&ok(&grace(dir.path(), &["logs", "clock", "--timestamps"])));
    assert_eq!(lines, ours);
    let since = |args: &[&str]| ok(&kubectl(dir.path(), &[&["logs", "clock"], args].concat()));
    assert_eq!(since(&["--since", "1h"]), "early\nlate\n");
    assert_eq!(since(&["--since-time", "2999-01-01T00:00:00Z"]), "");
    assert_eq!(
        since(&["--since-time", "2000-01-01T00:00:00Z", "--tail", "1"]),
        "late\n"
    );
}

/// The top-level fields of a `describe` (lines that start a field).
fn fields(described: &str) -> Vec<String> {
    described
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.is_empty())
        .filter_map(|l| l.split_once(':').map(|(k, _)| k.to_owned()))
        .collect()
}

#[test]
fn describe_follows_kubectls_layout_with_graces_own_fields_after_its() {
    let kubectl_there = std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !kubectl_there {
        support::common::missing_tool("kubectl is not installed (apt-get install kubectl)");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(dir.path(), &["--k8s-api", "127.0.0.1:0"]);
    wait_for("the kubeconfig", Duration::from_secs(10), || {
        dir.path().join("kubeconfig").exists()
    });
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "labels": {"app": "web"}, "annotations": {"note": "hi"}},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
            "name": "app",
            "command": ["sh", "-c", "exec sleep 1000"],
            "env": [{"name": "FOO", "value": "bar"},
                    {"name": "ME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        }]},
    });
    let path = dir.path().join("web.json");
    std::fs::write(&path, pod.to_string()).expect("written");
    ok(&grace(
        dir.path(),
        &["apply", "-f", path.to_str().expect("utf-8")],
    ));
    ok(&grace(
        dir.path(),
        &[
            "wait",
            "--for=condition=Ready",
            "pod/web",
            "--timeout",
            "10s",
        ],
    ));

    let ours = ok(&grace(dir.path(), &["describe", "pod", "web"]));
    for needle in [
        "Annotations:      note: hi\n",
        "IP:               <none>\n",
        "    Ready:        True\n",
        "    Environment:\n      FOO:  bar\n      ME:   (v1:metadata.name)\n",
    ] {
        assert!(ours.contains(needle), "{needle:?}: {ours}");
    }
    assert!(!ours.contains("last-applied-configuration"), "{ours}");
    // The fields kubectl shows for the same pod, in kubectl's order; the
    // container's state as kubectl writes it.
    let theirs = ok(&kubectl(dir.path(), &["describe", "pod", "web"]));
    let state = |described: &str| -> Vec<String> {
        described
            .lines()
            .filter(|l| l.starts_with("    State:") || l.starts_with("      Started:"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(state(&ours), state(&theirs), "{ours}\n{theirs}");
    assert_eq!(state(&ours).len(), 2, "{ours}");
    let (ours, theirs) = (fields(&ours), fields(&theirs));
    let shared: Vec<&String> = theirs.iter().filter(|f| ours.contains(f)).collect();
    let in_ours: Vec<&String> = ours.iter().filter(|f| theirs.contains(f)).collect();
    assert_eq!(in_ours, shared, "ours {ours:?}, kubectl's {theirs:?}");
    for field in [
        "Name",
        "Namespace",
        "Node",
        "Start Time",
        "Labels",
        "Annotations",
        "Status",
        "IP",
        "Containers",
        "Conditions",
        "Events",
    ] {
        assert!(shared.iter().any(|f| *f == field), "{field}: {shared:?}");
    }
}
