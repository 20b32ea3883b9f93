//! Pods as manifests leave them: without `spec.nodeName` (what `kubectl
//! run` writes), and with `metadata.ownerReferences`, whose dependents the
//! garbage collector deletes with their owner (R37, R38). A real `grace
//! agent`, real workloads, `grace` as separate processes.
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

use support::common::{alive, wait_for};
use support::{Agent, grace, text};

/// What `kubectl run x --image=busybox --dry-run=client -o yaml --command
/// -- sleep 100` prints (kubectl 1.32; it needs a server to run, so its
/// output is kept here): no `spec.nodeName`.
const KUBECTL_RUN: &str = r#"apiVersion: v1
kind: Pod
metadata:
  creationTimestamp: null
  labels:
    run: x
  name: x
spec:
  containers:
  - command:
    - sleep
    - "100"
    image: busybox
    name: x
    resources: {}
  dnsPolicy: ClusterFirst
  restartPolicy: Always
status: {}
"#;

fn write(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("file written");
    path
}

/// Applies `contents` as the file `file`, which must succeed.
fn apply(dir: &Path, file: &str, contents: &str) {
    let path = write(dir, file, contents);
    let out = grace(dir, &["apply", "-f", path.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// `grace get NAME -o json`: the Pod, or `None` once it is gone.
fn pod(dir: &Path, name: &str) -> Option<serde_json::Value> {
    let out = grace(dir, &["get", name, "-o", "json"]);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).expect("JSON"))
}

/// A pod without `spec.nodeName` whose workload writes its pid to
/// `NAME.pid` in `dir` and exits on SIGTERM (or ignores it, `ignore_term`),
/// with these owner references (YAML flow list items).
fn manifest(dir: &Path, name: &str, ignore_term: bool, owners: &[String]) -> String {
    let pid = dir.join(format!("{name}.pid"));
    let trap = if ignore_term { "''" } else { "'exit 0'" };
    // One that ignores SIGTERM lingers for its grace.
    let grace = if ignore_term { 5 } else { 3 };
    let owners = if owners.is_empty() {
        String::new()
    } else {
        format!("  ownerReferences: [{}]\n", owners.join(", "))
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n{owners}spec:\n  terminationGracePeriodSeconds: {grace}\n  containers:\n  - name: app\n    command: [sh, -c, \"echo $$$$ > {pid}; trap {trap} TERM; while :; do sleep 0.05; done\"]\n",
        pid = pid.display(),
    )
}

/// An owner reference to the pod `name` with uid `uid`.
fn owner_ref(name: &str, uid: &str, block: bool) -> String {
    format!(
        "{{apiVersion: v1, kind: Pod, name: {name}, uid: \"{uid}\", controller: false, blockOwnerDeletion: {block}}}"
    )
}

/// Applies an owner pod and two dependents (`d1` blocking its owner's
/// deletion and ignoring SIGTERM, `d2` neither), waits until the three
/// run, and returns the owner's uid.
fn owner_and_dependents(dir: &Path) -> String {
    apply(dir, "owner.yaml", &manifest(dir, "owner", false, &[]));
    let uid = pod(dir, "owner").expect("stored")["metadata"]["uid"]
        .as_str()
        .expect("a uid")
        .to_owned();
    apply(
        dir,
        "d1.yaml",
        &manifest(dir, "d1", true, &[owner_ref("owner", &uid, true)]),
    );
    apply(
        dir,
        "d2.yaml",
        &manifest(dir, "d2", false, &[owner_ref("owner", &uid, false)]),
    );
    for name in ["owner", "d1", "d2"] {
        wait_for(&format!("{name} runs"), Duration::from_secs(10), || {
            alive(&dir.join(format!("{name}.pid")))
        });
    }
    let d1 = pod(dir, "d1").expect("stored");
    assert_eq!(d1["metadata"]["ownerReferences"][0]["uid"], uid.as_str());
    assert_eq!(
        d1["metadata"]["ownerReferences"][0]["blockOwnerDeletion"],
        true
    );
    uid
}

fn pid_of(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.pid"))
}

#[test]
fn a_pod_without_node_name_as_kubectl_run_writes_it_is_bound_to_the_lone_agent_and_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = Agent::start(d, &[]);
    apply(d, "x.yaml", KUBECTL_RUN);
    wait_for("x runs", Duration::from_secs(10), || {
        pod(d, "x")
            .is_some_and(|p| p["status"]["containerStatuses"][0]["state"]["running"].is_object())
    });
    let x = pod(d, "x").expect("stored");
    assert_eq!(x["spec"]["nodeName"], "local", "bound to the agent's node");
    let wide = text(&grace(d, &["get", "x", "-o", "wide"]).stdout);
    assert!(wide.contains("local"), "{wide}");
    // Applied again (no nodeName still): unchanged, not refused.
    let path = write(d, "x.yaml", KUBECTL_RUN);
    let out = grace(d, &["apply", "-f", path.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "pod/x unchanged");
}

#[test]
fn r38_background_delete_of_an_owner_deletes_its_dependents_once_it_is_gone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = Agent::start(d, &[]);
    owner_and_dependents(d);
    // kubectl's default: --cascade=background.
    let out = grace(d, &["delete", "owner", "--wait=false"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    wait_for("the owner is gone", Duration::from_secs(10), || {
        pod(d, "owner").is_none()
    });
    wait_for("the dependents are gone", Duration::from_secs(15), || {
        pod(d, "d1").is_none() && pod(d, "d2").is_none()
    });
    assert!(!alive(&pid_of(d, "d1")), "d1 was stopped");
    assert!(!alive(&pid_of(d, "d2")), "d2 was stopped");
}

#[test]
fn r38_foreground_delete_keeps_the_owner_until_its_blocking_dependents_are_gone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = Agent::start(d, &[]);
    owner_and_dependents(d);
    let out = grace(
        d,
        &["delete", "owner", "--cascade=foreground", "--wait=false"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    // d1 ignores SIGTERM: it lingers for its grace (5 s), and the owner,
    // whose own workload exits at once, with it.
    wait_for("d1 is being deleted", Duration::from_secs(10), || {
        pod(d, "d1").is_some_and(|p| p["metadata"]["deletionTimestamp"].is_string())
    });
    wait_for(
        "the owner's workload stopped",
        Duration::from_secs(10),
        || !alive(&pid_of(d, "owner")),
    );
    assert!(
        alive(&pid_of(d, "d1")),
        "d1 still runs (its grace is not spent)"
    );
    let owner = pod(d, "owner").expect("the owner waits for d1");
    assert!(owner["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(owner["metadata"]["finalizers"][0], "foregroundDeletion");
    wait_for("d1 and d2 are gone", Duration::from_secs(15), || {
        pod(d, "d1").is_none() && pod(d, "d2").is_none()
    });
    wait_for("then the owner", Duration::from_secs(10), || {
        pod(d, "owner").is_none()
    });
    assert!(!alive(&pid_of(d, "d1")) && !alive(&pid_of(d, "d2")));
}

#[test]
fn r37_orphan_delete_of_an_owner_leaves_its_dependents_running_without_the_reference() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = Agent::start(d, &[]);
    owner_and_dependents(d);
    let out = grace(d, &["delete", "owner", "--cascade=orphan"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    wait_for("the owner is gone", Duration::from_secs(10), || {
        pod(d, "owner").is_none()
    });
    for name in ["d1", "d2"] {
        let p = pod(d, name).expect("kept");
        assert!(p["metadata"]["ownerReferences"].is_null(), "{p}");
        assert!(p["metadata"]["deletionTimestamp"].is_null(), "{p}");
        assert!(alive(&pid_of(d, name)), "{name} still runs");
    }
    for name in ["d1", "d2"] {
        let out = grace(d, &["delete", name, "--grace-period=0", "--force"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
}

#[test]
fn a_dependent_of_two_owners_goes_with_the_last_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = Agent::start(d, &[]);
    let mut uids = Vec::new();
    for name in ["a", "b"] {
        apply(d, &format!("{name}.yaml"), &manifest(d, name, false, &[]));
        uids.push(
            pod(d, name).expect("stored")["metadata"]["uid"]
                .as_str()
                .expect("uid")
                .to_owned(),
        );
    }
    apply(
        d,
        "dep.yaml",
        &manifest(
            d,
            "dep",
            false,
            &[
                owner_ref("a", &uids[0], false),
                owner_ref("b", &uids[1], false),
            ],
        ),
    );
    wait_for("dep runs", Duration::from_secs(10), || {
        alive(&pid_of(d, "dep"))
    });
    assert!(grace(d, &["delete", "a"]).status.success());
    wait_for(
        "a is gone and dep loses its reference",
        Duration::from_secs(10),
        || {
            pod(d, "a").is_none()
                && pod(d, "dep").is_some_and(|p| {
                    p["metadata"]["ownerReferences"].as_array().map(Vec::len) == Some(1)
                })
        },
    );
    assert!(alive(&pid_of(d, "dep")), "dep runs while b is there");
    assert!(grace(d, &["delete", "b"]).status.success());
    wait_for("dep goes with b", Duration::from_secs(15), || {
        pod(d, "dep").is_none()
    });
    assert!(!alive(&pid_of(d, "dep")));
}
