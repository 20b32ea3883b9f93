//! Namespaces and Kubernetes names, as a user runs them: a real `grace
//! agent`, real workloads, and `grace apply / get / describe / logs /
//! delete` as separate processes. The same name in two namespaces is two
//! objects; a pod's name is a DNS-1123 subdomain of up to 253 characters;
//! `generateName` makes a name; a store written before namespaces holds
//! the objects of `default`.
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
use std::process::{Command, Output};
use std::time::Duration;

use support::common::{alive, wait_for};
use support::{Agent, GRACE, text};

/// `grace ARGS --data-dir DIR`, with `GRACE_NAMESPACE` set to `namespace`
/// (or unset).
fn grace_in(dir: &Path, namespace: Option<&str>, args: &[&str]) -> Output {
    let mut command = Command::new(GRACE);
    command
        .env_remove("GRACE_ETCD_ENDPOINTS")
        .env_remove("GRACE_NAMESPACE")
        .args(args)
        .arg("--data-dir")
        .arg(dir);
    if let Some(namespace) = namespace {
        command.env("GRACE_NAMESPACE", namespace);
    }
    command.output().expect("grace runs")
}

/// `grace ARGS`, which must succeed; its standard output.
fn ok(dir: &Path, args: &[&str]) -> String {
    let out = grace_in(dir, None, args);
    assert!(
        out.status.success(),
        "grace {args:?}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

fn write(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("file written");
    path
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

/// A Pod bound to the agent's node whose one container writes its
/// namespace (from `fieldRef: metadata.namespace`) to `out.ns`, then its
/// pid to `out`, prints `hello`, and exits on SIGTERM. `meta` is more of
/// `metadata`, indented.
fn pod(meta: &str, labels: &str, out: &Path) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
{meta}  labels: {{{labels}}}
spec:
  nodeName: local
  terminationGracePeriodSeconds: 5
  containers:
  - name: app
    command: [sh, -c, \"echo $$POD_NAMESPACE > {out}.ns; echo $$$$ > {out}; echo hello; trap 'exit 0' TERM; while :; do sleep 0.05; done\"]
    env:
    - name: POD_NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
",
        out = out.display()
    )
}

/// The pid and namespace a workload of [`pod`] wrote to `out`, once it did.
fn started(out: &Path) -> (String, String) {
    wait_for("the workload starts", Duration::from_secs(10), || {
        alive(out)
    });
    let pid = std::fs::read_to_string(out).expect("pid");
    let mut ns_file = out.as_os_str().to_owned();
    ns_file.push(".ns");
    let ns = std::fs::read_to_string(PathBuf::from(ns_file)).expect("namespace");
    (pid.trim().to_owned(), ns.trim().to_owned())
}

fn labels(dir: &Path, namespace: &str, name: &str) -> serde_json::Value {
    let out = ok(dir, &["get", "-n", namespace, "pod", name, "-o", "json"]);
    let pod: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(pod["metadata"]["namespace"], namespace, "{pod}");
    assert_eq!(pod["metadata"]["name"], name, "{pod}");
    pod["metadata"]["labels"].clone()
}

/// The same name in two namespaces is two objects with two processes: a
/// label change in one leaves the other alone, a delete in one leaves the
/// other running; `-A` lists both under NAMESPACE; `GRACE_NAMESPACE` is
/// the namespace without `-n`; a manifest's namespace other than `-n`'s
/// is refused with kubectl's error.
#[test]
fn the_same_name_in_two_namespaces_is_two_objects_with_two_processes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = Agent::start(d, &[]);
    let (a_out, b_out) = (d.join("a.out"), d.join("b.out"));
    // team-a from the manifest, team-b from -n.
    let a = write(
        d,
        "a.yaml",
        &pod("  name: web\n  namespace: team-a\n", "app: a", &a_out),
    );
    let b = write(d, "b.yaml", &pod("  name: web\n", "app: b", &b_out));
    assert_eq!(ok(d, &["apply", "-f", path(&a)]), "pod/web created\n");
    assert_eq!(
        ok(d, &["apply", "-n", "team-b", "-f", path(&b)]),
        "pod/web created\n"
    );
    let (a_pid, a_ns) = started(&a_out);
    let (b_pid, b_ns) = started(&b_out);
    assert_ne!(a_pid, b_pid, "two processes");
    assert_eq!(
        (a_ns.as_str(), b_ns.as_str()),
        ("team-a", "team-b"),
        "fieldRef metadata.namespace"
    );
    // kubectl's last-applied annotation names the namespace the object
    // went to: `-n`'s, when the file names none.
    let out = ok(d, &["get", "-n", "team-b", "pod", "web", "-o", "json"]);
    let applied: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let last =
        applied["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .expect("the annotation");
    let last: serde_json::Value = serde_json::from_str(last).expect("JSON");
    assert_eq!(last["metadata"]["namespace"], "team-b", "{last}");

    // -n that differs from the manifest's namespace: kubectl's error, exit 2.
    let out = grace_in(d, None, &["apply", "-n", "team-b", "-f", path(&a)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(
            "the namespace from the provided object \"team-a\" does not match the namespace \"team-b\". You must pass '--namespace=team-a' to perform this operation."
        ),
        "{}",
        text(&out.stderr)
    );

    // A label change in team-b leaves team-a's object alone.
    let relabelled = write(
        d,
        "b2.yaml",
        &pod("  name: web\n  namespace: team-b\n", "app: b2", &b_out),
    );
    assert_eq!(
        ok(d, &["apply", "-f", path(&relabelled)]),
        "pod/web configured\n"
    );
    assert_eq!(labels(d, "team-b", "web"), serde_json::json!({"app": "b2"}));
    assert_eq!(labels(d, "team-a", "web"), serde_json::json!({"app": "a"}));

    // -A: both, with kubectl's NAMESPACE column; default holds neither.
    let all = ok(d, &["get", "pods", "-A"]);
    let rows: Vec<Vec<&str>> = all
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0][..2], ["NAMESPACE", "NAME"], "{all}");
    assert_eq!(rows[1][..2], ["team-a", "web"], "{all}");
    assert_eq!(rows[2][..2], ["team-b", "web"], "{all}");
    let out = grace_in(d, None, &["get", "pod", "web"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr).trim(),
        "Error from server (NotFound): pods \"web\" not found"
    );
    // GRACE_NAMESPACE, as a context's namespace; -n wins over it.
    let out = grace_in(d, Some("team-a"), &["get", "pod", "web", "-o", "name"]);
    assert_eq!(text(&out.stdout), "pod/web\n", "{}", text(&out.stderr));
    let out = grace_in(
        d,
        Some("team-a"),
        &["describe", "-n", "team-b", "pod", "web"],
    );
    let described = text(&out.stdout);
    assert!(
        described.contains("Namespace:        team-b"),
        "{described}"
    );
    let out = grace_in(d, Some("team-b"), &["logs", "web"]);
    assert_eq!(text(&out.stdout), "hello\n", "{}", text(&out.stderr));

    // A delete in team-a stops team-a's process only.
    let out = grace_in(d, Some("team-a"), &["delete", "pod", "web"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!alive(&a_out), "team-a's web stopped");
    assert!(alive(&b_out), "team-b's web still runs");
    let all = ok(d, &["get", "pods", "-A", "--no-headers"]);
    assert_eq!(all.lines().count(), 1, "{all}");
    assert!(all.starts_with("team-b"), "{all}");
    ok(d, &["delete", "-n", "team-b", "pod", "web"]);
    assert!(!alive(&b_out));
}

/// A pod name is a DNS-1123 subdomain of up to 253 characters, with
/// dots: it runs, its output is kept, and after the agent is killed with
/// SIGKILL the next agent finds its workload record and its logs and
/// adopts the process (its files' names are cut to fit, with a hash).
#[test]
fn a_253_character_dotted_name_runs_and_is_adopted_after_an_agent_crash() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let name = format!("{}.{}.{}", "a".repeat(100), "b".repeat(100), "c".repeat(51));
    assert_eq!(name.len(), 253);
    let out_file = d.join("long.out");
    let manifest = write(
        d,
        "long.yaml",
        &pod(
            &format!("  name: {name}\n  namespace: team-a\n"),
            "app: long",
            &out_file,
        ),
    );
    let agent = Agent::start(d, &[]);
    assert_eq!(
        ok(d, &["apply", "-f", path(&manifest)]),
        format!("pod/{name} created\n")
    );
    let (pid, _) = started(&out_file);
    wait_for("its output is kept", Duration::from_secs(5), || {
        grace_in(d, Some("team-a"), &["logs", &name]).stdout == b"hello\n"
    });
    // One name over 254 is refused, naming the field (exit 2).
    let too_long = write(
        d,
        "too-long.yaml",
        &pod(&format!("  name: {name}x\n"), "app: long", &d.join("x.out")),
    );
    let out = grace_in(d, None, &["apply", "-f", path(&too_long)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("metadata.name"),
        "{}",
        text(&out.stderr)
    );

    agent.crash();
    assert!(alive(&out_file), "the workload outlives its agent");
    let _agent = Agent::start(d, &[]);
    // Adopted, not started again: the same process, its output still there.
    let out = grace_in(d, Some("team-a"), &["logs", &name]);
    assert_eq!(text(&out.stdout), "hello\n", "{}", text(&out.stderr));
    assert_eq!(started(&out_file).0, pid, "the same process");
    let out = grace_in(d, Some("team-a"), &["delete", "pod", &name]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!alive(&out_file), "the adopted process was stopped");
    for path in [grace_agent::workloads_dir(d), d.join("logs")] {
        if let Ok(entries) = std::fs::read_dir(&path) {
            for e in entries.flatten() {
                assert!(e.file_name().len() <= 255, "{}", e.path().display());
            }
        }
    }
}

/// `generateName`: a name made as the API server makes one (the prefix
/// and five characters), printed; each apply creates a new pod.
#[test]
fn generate_name_creates_a_pod_under_a_new_name_each_time() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = Agent::start(d, &[]);
    let manifest = write(
        d,
        "gen.yaml",
        &pod("  generateName: web-\n", "app: gen", &d.join("gen.out")),
    );
    let mut names = Vec::new();
    for _ in 0..2 {
        let out = ok(d, &["apply", "-f", path(&manifest)]);
        let name = out
            .strip_prefix("pod/")
            .and_then(|o| o.strip_suffix(" created\n"))
            .unwrap_or_else(|| panic!("{out}"))
            .to_owned();
        assert_eq!(name.len(), "web-".len() + 5, "{name}");
        assert!(name.starts_with("web-"), "{name}");
        assert!(
            name[4..]
                .bytes()
                .all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b)),
            "{name}"
        );
        names.push(name);
    }
    assert_ne!(names[0], names[1]);
    let listed = ok(d, &["get", "pods", "-o", "name"]);
    for name in &names {
        assert!(listed.contains(&format!("pod/{name}\n")), "{listed}");
    }
    ok(d, &["delete", "--all", "--wait=false"]);
}

/// A store written before namespaces keyed objects by their bare name:
/// they are the objects of `default`, found by name, by `-n default` and
/// under `default` with `-A`.
#[test]
fn a_store_written_before_namespaces_holds_the_objects_of_default() {
    use grace_std::store::{Store, StoredObject};
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    {
        // As the previous version wrote it: the key is the name.
        let store =
            grace_std::store::RedbStore::open(d.join(grace_agent::api::DATABASE)).expect("store");
        let uid = grace_core::Name::try_from("uid-old").expect("uid");
        store
            .create(
                "old-web",
                StoredObject::unscheduled(grace_core::Record::new(uid)),
            )
            .expect("written");
    }
    let _agent = Agent::start(d, &[]);
    assert!(ok(d, &["get", "old-web", "-o", "name"]).ends_with("/old-web\n"));
    assert!(ok(d, &["get", "-n", "default", "old-web", "-o", "name"]).ends_with("/old-web\n"));
    let all = ok(d, &["get", "-A", "--no-headers"]);
    assert!(all.starts_with("default "), "{all}");
    let out = grace_in(d, None, &["get", "-n", "team-a", "old-web"]);
    assert_eq!(out.status.code(), Some(1), "not in another namespace");
}
