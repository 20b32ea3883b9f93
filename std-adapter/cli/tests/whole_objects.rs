//! A Pod is kept whole: every field as applied, those grace does not act
//! on included, reads back with `grace get -o yaml|json` and applies again
//! unchanged; an apply compares the whole object and follows Kubernetes'
//! pod-update rules; the `kubectl.kubernetes.io/last-applied-configuration`
//! annotation is written as `kubectl apply` writes it and used as kubectl
//! uses it. With a real agent and real processes.
//!
//! The `kubectl run` manifests in `tests/manifests/` are what
//! `kubectl run web --image=busybox --dry-run=client -o yaml -- sh -c …`
//! (and with `--command`) prints: kubectl 1.32 needs an API server even
//! for `--dry-run=client`, so they are kept as files, in its format.
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

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use support::common::wait_for;
use support::{Agent, grace, text};

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

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

/// `grace apply -f` of `contents` written to `dir/file`: its output.
fn apply(dir: &Path, file: &str, contents: &str) -> std::process::Output {
    let path = dir.join(file);
    std::fs::write(&path, contents).expect("written");
    grace(dir, &["apply", "-f", path.to_str().expect("utf-8")])
}

/// `grace apply`, which must succeed: what it printed.
fn applied(dir: &Path, file: &str, contents: &str) -> String {
    let out = apply(dir, file, contents);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// A manifest of `tests/manifests`, its container's marker file made
/// `marker`.
fn fixture(name: &str, marker: &Path) -> String {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "manifests", name]
        .iter()
        .collect();
    std::fs::read_to_string(path)
        .expect("fixture")
        .replace("MARKER", marker.to_str().expect("utf-8"))
}

/// `grace get NAME -o json`.
fn pod(dir: &Path, name: &str) -> Value {
    serde_json::from_str(&ok(dir, &["get", name, "-o", "json"])).expect("JSON")
}

/// Waits until the pod's container runs (its command touched `marker`
/// and the agent reports it running).
fn wait_running(dir: &Path, name: &str, marker: &Path) {
    wait_for("the container runs", Duration::from_secs(10), || {
        marker.exists()
            && pod(dir, name)["status"]["containerStatuses"][0]["state"]["running"].is_object()
    });
}

/// The file as YAML, read as JSON.
fn yaml(text: &str) -> Value {
    serde_saphyr::from_str(text).expect("YAML")
}

#[test]
fn kubectl_run_manifests_apply_and_run_as_written_with_args_or_command() {
    for (file, field) in [
        ("kubectl-run-args.yaml", "args"),
        ("kubectl-run-command.yaml", "command"),
    ] {
        let dir = tempfile::tempdir().expect("temp dir");
        let d = dir.path();
        let _agent = Agent::start(d, &[]);
        let marker = d.join("ran");
        let manifest = fixture(file, &marker);
        assert_eq!(applied(d, file, &manifest), "pod/web created\n", "{file}");
        wait_running(d, "web", &marker);
        let pod = pod(d, "web");
        let container = &pod["spec"]["containers"][0];
        // Kept as written: args stay args, the image, the empty
        // resources, the pod's policies.
        assert_eq!(
            container[field],
            yaml(&manifest)["spec"]["containers"][0][field]
        );
        assert_eq!(container["image"], "busybox");
        assert_eq!(container["resources"], json!({}));
        assert_eq!(pod["spec"]["dnsPolicy"], "ClusterFirst");
        assert_eq!(pod["spec"]["restartPolicy"], "Always");
        assert_eq!(pod["metadata"]["labels"], json!({"run": "web"}));
        assert_eq!(pod["status"]["containerStatuses"][0]["image"], "busybox");
        assert_eq!(applied(d, file, &manifest), "pod/web unchanged\n", "{file}");
    }
}

#[test]
fn a_deployment_pod_template_pasted_into_a_pod_runs_and_reads_back_whole() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = Agent::start(d, &[]);
    let marker = d.join("ran");
    let manifest = fixture("deployment-template.yaml", &marker);
    assert_eq!(applied(d, "nginx.yaml", &manifest), "pod/nginx created\n");
    wait_running(d, "nginx", &marker);
    let file = yaml(&manifest);
    let pod = pod(d, "nginx");
    // Every field grace does not act on is there as applied.
    for field in ["volumes", "tolerations"] {
        assert_eq!(pod["spec"][field], file["spec"][field], "{field}");
    }
    let (got, want) = (
        &pod["spec"]["containers"][0],
        &file["spec"]["containers"][0],
    );
    for field in [
        "image",
        "ports",
        "resources",
        "readinessProbe",
        "volumeMounts",
        "command",
    ] {
        assert_eq!(got[field], want[field], "{field}");
    }
}

#[test]
fn get_o_yaml_round_trips_and_applies_again_unchanged() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = Agent::start(d, &[]);
    let marker = d.join("ran");
    let manifest = fixture("deployment-template.yaml", &marker).replace(
        "  labels:\n",
        "  annotations:\n    example.com/note: kept <as> & written\n  labels:\n",
    );
    assert_eq!(applied(d, "nginx.yaml", &manifest), "pod/nginx created\n");
    wait_running(d, "nginx", &marker);
    let out = ok(d, &["get", "pod/nginx", "-o", "yaml"]);
    let read = yaml(&out);
    let file = yaml(&manifest);
    // The file's fields, field by field, and the server's beside them.
    assert_eq!(read["metadata"]["labels"], file["metadata"]["labels"]);
    assert_eq!(
        read["metadata"]["annotations"]["example.com/note"],
        "kept <as> & written"
    );
    assert_eq!(read["spec"]["volumes"], file["spec"]["volumes"]);
    assert_eq!(read["spec"]["containers"], file["spec"]["containers"]);
    assert_eq!(read["spec"]["tolerations"], file["spec"]["tolerations"]);
    assert_eq!(read["spec"]["nodeName"], "local");
    assert_eq!(read["spec"]["terminationGracePeriodSeconds"], 30);
    assert!(read["metadata"]["uid"].is_string(), "{out}");
    assert_eq!(read["status"]["phase"], "Running", "{out}");
    // Applied again as read: nothing changes.
    assert_eq!(applied(d, "read.yaml", &out), "pod/nginx unchanged\n");
    assert_eq!(applied(d, "nginx.yaml", &manifest), "pod/nginx unchanged\n");
    let json = ok(d, &["get", "pod/nginx", "-o", "json"]);
    assert_eq!(applied(d, "read.json", &json), "pod/nginx unchanged\n");
}

#[test]
fn an_image_or_annotation_change_is_configured_and_other_spec_changes_are_forbidden() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = Agent::start(d, &[]);
    let marker = d.join("ran");
    let manifest = fixture("kubectl-run-args.yaml", &marker);
    applied(d, "web.yaml", &manifest);
    wait_running(d, "web", &marker);
    let started =
        pod(d, "web")["status"]["containerStatuses"][0]["state"]["running"]["startedAt"].clone();

    // A new image is kept, and restarts nothing (grace pulls no image).
    let image = manifest.replace("image: busybox", "image: busybox:1.36");
    assert_eq!(applied(d, "web.yaml", &image), "pod/web configured\n");
    let now = pod(d, "web");
    assert_eq!(now["spec"]["containers"][0]["image"], "busybox:1.36");
    let status = &now["status"]["containerStatuses"][0];
    assert_eq!(status["state"]["running"]["startedAt"], started);
    assert_eq!(status["restartCount"], 0);

    // An annotation.
    let annotated = image.replace(
        "  labels:\n",
        "  annotations:\n    note: hello\n  labels:\n",
    );
    assert_eq!(applied(d, "web.yaml", &annotated), "pod/web configured\n");
    assert_eq!(pod(d, "web")["metadata"]["annotations"]["note"], "hello");

    // An environment variable: Kubernetes forbids it, and so does grace,
    // with the API server's words; nothing is stored.
    let env = annotated.replace(
        "    resources: {}\n",
        "    resources: {}\n    env:\n    - name: MODE\n      value: fast\n",
    );
    let out = apply(d, "web.yaml", &env);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("Pod \"web\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"),
        "{err}"
    );
    assert!(err.contains("spec.containers[0].env"), "{err}");
    assert_eq!(pod(d, "web")["spec"]["containers"][0].get("env"), None);
    assert_eq!(applied(d, "web.yaml", &annotated), "pod/web unchanged\n");
}

#[test]
fn the_last_applied_annotation_is_kubectls_and_a_label_removed_from_the_file_goes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = Agent::start(d, &[]);
    let marker = d.join("ran");
    let manifest = fixture("kubectl-run-args.yaml", &marker)
        .replace("    run: web\n", "    run: web\n    tier: front\n");
    applied(d, "web.yaml", &manifest);
    let annotation = pod(d, "web")["metadata"]["annotations"][LAST_APPLIED].clone();
    let want = format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{{\"annotations\":{{}},\"creationTimestamp\":null,\"labels\":{{\"run\":\"web\",\"tier\":\"front\"}},\"name\":\"web\",\"namespace\":\"default\"}},\"spec\":{{\"containers\":[{{\"args\":[\"sh\",\"-c\",\"touch {} \\u0026\\u0026 exec sleep 1000\"],\"image\":\"busybox\",\"name\":\"web\",\"resources\":{{}}}}],\"dnsPolicy\":\"ClusterFirst\",\"restartPolicy\":\"Always\"}},\"status\":{{}}}}\n",
        marker.display()
    );
    assert_eq!(annotation, Value::String(want));

    // The label the last apply set and this one leaves out is removed.
    let fewer = manifest.replace("    tier: front\n", "");
    assert_eq!(applied(d, "web.yaml", &fewer), "pod/web configured\n");
    assert_eq!(pod(d, "web")["metadata"]["labels"], json!({"run": "web"}));
    assert_eq!(
        ok(d, &["get", "-l", "tier=front", "-o", "name"]),
        "",
        "no longer selected"
    );
}

#[test]
fn a_pod_stored_unbound_while_no_agent_ran_is_bound_and_started_when_it_starts() {
    use grace_std::store::{RedbStore, Store, StoredContainer, StoredObject};

    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let marker = d.join("ran");
    {
        // As a version that bound pods only when it ran them left it.
        let store = RedbStore::open(d.join("grace.redb")).expect("store");
        let record = grace_core::Record::builder("uid-old")
            .build()
            .expect("record");
        let mut object = StoredObject::unscheduled(record);
        object.containers.push(StoredContainer::new(
            "app",
            [
                "sh",
                "-c",
                &format!("touch {} && exec sleep 1000", marker.display()),
            ],
        ));
        grace_std::api_server::create(&store, "old", object).expect("stored");
        assert!(
            store
                .get("old")
                .expect("read")
                .is_some_and(|(o, _)| o.node.is_none())
        );
    }
    let agent = Agent::start(d, &[]);
    wait_running(d, "old", &marker);
    assert_eq!(pod(d, "old")["spec"]["nodeName"], "local");
    // The binding is durable: in the store, not only in the agent.
    drop(agent);
    let store = RedbStore::open(d.join("grace.redb")).expect("store");
    let (object, _) = store.get("old").expect("read").expect("stored");
    assert_eq!(object.node.as_deref(), Some("local"));
}
