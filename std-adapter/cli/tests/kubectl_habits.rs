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
