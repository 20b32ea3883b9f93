//! Kubernetes-shaped inputs and kubectl's habits, as a user runs them: a
//! real `grace agent`, real workloads, real Pod manifests (YAML and JSON)
//! and `grace apply / get / delete / describe / wait` as separate
//! processes.
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
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::common::{alive, wait_for};
use support::{Agent, GRACE, text};

/// A running agent whose data directory comes from `GRACE_DATA_DIR`.
fn agent(dir: &Path) -> Agent {
    let mut command = Command::new(GRACE);
    command
        // The etcd tests' variable is also `--etcd`'s: these use a data dir.
        .env_remove("GRACE_ETCD_ENDPOINTS")
        .arg("agent")
        .env("GRACE_DATA_DIR", dir);
    Agent::spawn(dir, command)
}

/// `grace ARGS` on the store of `dir` (given by the environment, as
/// `GRACE_DATA_DIR` lets a user do).
fn grace(dir: &Path, args: &[&str]) -> Output {
    Command::new(GRACE)
        // The etcd tests' variable is also `--etcd`'s: these use a data dir.
        .env_remove("GRACE_ETCD_ENDPOINTS")
        .args(args)
        .env("GRACE_DATA_DIR", dir)
        .output()
        .expect("grace runs")
}

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

fn write(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("file written");
    path
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

/// A container command that writes its pid to `pid` and exits on SIGTERM
/// (or ignores it). `$$$$` is the shell's `$$`: the agent expands a pod's
/// command as the kubelet does (`$$` is an escaped `$`).
fn workload(pid: &Path, ignore_term: bool) -> String {
    let trap = if ignore_term {
        "trap '' TERM"
    } else {
        "trap 'exit 0' TERM"
    };
    format!(
        "echo $$$$ > {}; {trap}; while :; do sleep 0.05; done",
        pid.display()
    )
}

/// A YAML Pod bound to the agent's node, with fields grace ignores.
fn yaml_pod(name: &str, labels: &str, grace: i64, pid: &Path, extra_meta: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{{labels}}}
{extra_meta}spec:
  nodeName: local
  terminationGracePeriodSeconds: {grace}
  restartPolicy: Never
  containers:
  - name: app
    image: registry.example/app:1.0
    ports:
    - containerPort: 8080
    resources:
      limits: {{cpu: 100m}}
    command: [sh, -c, \"{}\"]
",
        workload(pid, false)
    )
}

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).expect("JSON")
}

#[test]
fn yaml_and_json_pods_with_ignored_fields_sidecars_and_several_documents_run_and_are_deleted() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = agent(d);
    let manifests = d.join("manifests");
    std::fs::create_dir(&manifests).expect("dir");
    let pid = |n: &str| d.join(format!("{n}.pid"));
    // Two documents in one YAML file; the second has a native sidecar.
    let sidecar = format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: b
  labels: {{app: web}}
spec:
  nodeName: local
  terminationGracePeriodSeconds: 5
  initContainers:
  - name: log
    image: busybox
    restartPolicy: Always
    command: [sh, -c, \"{}\"]
  containers:
  - name: app
    image: nginx
    command: [sh, -c, \"{}\"]
",
        workload(&pid("b-log"), false),
        workload(&pid("b"), false)
    );
    write(
        &manifests,
        "pods.yaml",
        &format!(
            "{}---\n{sidecar}",
            yaml_pod("a", "app: web", 5, &pid("a"), "")
        ),
    );
    // One JSON Pod, with a probe grace does not run.
    let c = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "c", "labels": {"app": "db"}},
        "spec": {"nodeName": "local", "containers": [{
            "name": "db", "image": "postgres",
            "livenessProbe": {"exec": {"command": ["true"]}},
            "command": ["sh", "-c", workload(&pid("c"), false)]}]}
    });
    write(&manifests, "c.json", &c.to_string());

    let out = grace(d, &["apply", "-f", path(&manifests)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "pod/c created\npod/a created\npod/b created\n",
        "c.json sorts before pods.yaml"
    );
    let err = text(&out.stderr);
    assert_eq!(err.matches("Warning:").count(), 1, "listed once: {err}");
    for field in [
        "spec.containers[*].image",
        "spec.containers[*].ports",
        "spec.containers[*].resources",
        "spec.containers[*].livenessProbe",
        "spec.initContainers[*].image",
    ] {
        assert!(err.contains(field), "{field}: {err}");
    }
    // Acted on (R92): not listed.
    assert!(!err.contains("spec.restartPolicy"), "{err}");
    for n in ["a", "b", "b-log", "c"] {
        wait_for("the workload starts", Duration::from_secs(5), || {
            alive(&pid(n))
        });
    }

    // kubectl's delete: several names, and it waits until they are gone.
    let started = Instant::now();
    let out = ok(d, &["delete", "pod", "a", "b", "c"]);
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(out.contains("pod \"a\" deleted"), "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "they exit on SIGTERM"
    );
    for n in ["a", "b", "b-log", "c"] {
        assert!(!alive(&pid(n)), "{n} stopped before delete returned");
    }
    let out = grace(d, &["get", "pods"]);
    assert!(out.stdout.is_empty());
    assert_eq!(text(&out.stderr).trim(), "No resources found");
}

#[test]
fn refused_manifests_name_the_field_its_line_and_column_and_store_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = agent(d);
    let pid = d.join("x.pid");
    let good = yaml_pod("x", "app: x", 5, &pid, "");
    let yaml = good.replace("    ports:\n", "    portz:\n");
    let file = write(
        d,
        "bad.yaml",
        &format!("{good}---\n{}", yaml.replace("name: x", "name: y")),
    );
    let out = grace(d, &["apply", "-f", path(&file)]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    // The second document starts at line 19: `portz` is its 13th line.
    assert!(
        err.contains("spec.containers[0].portz: unknown field"),
        "{err}"
    );
    assert!(err.contains("(line 31, column 5)"), "{err}");

    let json = "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"Pod\",\n  \"metadata\": {\"name\": \"j\"},\n  \"spec\": {\n    \"containers\": [{\"name\": \"c\", \"command\": [\"true\"]}],\n    \"terminationGracePeriod\": 3\n  }\n}\n";
    let file = write(d, "bad.json", json);
    let out = grace(d, &["apply", "-f", path(&file)]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("spec.terminationGracePeriod: unknown field"),
        "{err}"
    );
    assert!(err.contains("(line 7, column 5)"), "{err}");

    let wrong_type = good.replace(
        "terminationGracePeriodSeconds: 5",
        "terminationGracePeriodSeconds: soon",
    );
    let file = write(d, "type.yaml", &wrong_type);
    let out = grace(d, &["apply", "-f", path(&file)]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("spec.terminationGracePeriodSeconds"), "{err}");
    assert!(err.contains("(line 8, column"), "{err}");

    // Nothing of the refused files was stored, not even their valid documents.
    let out = grace(d, &["get", "-o", "name"]);
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
}

#[test]
fn apply_creates_then_updates_labels_and_finalizers_as_kubernetes_does() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = agent(d);
    let pid = d.join("p.pid");
    let file = d.join("p.yaml");
    let apply = |manifest: &str| {
        std::fs::write(&file, manifest).expect("written");
        grace(d, &["apply", "-f", path(&file)])
    };
    let base = yaml_pod("p", "app: web", 30, &pid, "");
    assert_eq!(text(&apply(&base).stdout), "pod/p created\n");
    wait_for("the workload starts", Duration::from_secs(5), || {
        alive(&pid)
    });
    assert_eq!(text(&apply(&base).stdout), "pod/p unchanged\n");

    // Labels and finalizers may change; the new label selects it.
    let held = yaml_pod(
        "p",
        "app: web, tier: front",
        30,
        &pid,
        "  finalizers: [example.com/keep]\n",
    );
    assert_eq!(text(&apply(&held).stdout), "pod/p configured\n");
    assert_eq!(ok(d, &["get", "-l", "tier=front", "-o", "name"]), "pod/p\n");

    // The spec may not change.
    let out = apply(&held.replace(
        "terminationGracePeriodSeconds: 30",
        "terminationGracePeriodSeconds: 5",
    ));
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("spec: Forbidden: pod updates may not change fields other than")
            && err.contains("changed: spec.terminationGracePeriodSeconds"),
        "{err}"
    );

    // A uid in the manifest must be the stored one (409).
    let out = apply(&held.replace("  name: p\n", "  name: p\n  uid: not-the-uid\n"));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("Precondition failed: UID"),
        "{}",
        text(&out.stderr)
    );

    // While deleting, a new finalizer is refused (R46) and nothing changes.
    ok(d, &["delete", "p", "--grace-period", "1", "--wait=false"]);
    wait_for("the workload is stopped", Duration::from_secs(5), || {
        !alive(&pid)
    });
    let more = yaml_pod(
        "p",
        "app: web",
        30,
        &pid,
        "  finalizers: [example.com/keep, example.com/more]\n",
    );
    let out = apply(&more);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no new finalizers can be added if the object is being deleted"),
        "{}",
        text(&out.stderr)
    );
    let pod = json(&ok(d, &["get", "pod/p", "-o", "json"]));
    assert_eq!(
        pod["metadata"]["finalizers"],
        serde_json::json!(["example.com/keep"])
    );

    // Removing the last finalizer of a stopped pod completes its deletion
    // (the agent's final delete was held by it, R45/R75).
    assert_eq!(text(&apply(&base).stdout), "pod/p configured\n");
    ok(d, &["wait", "--for=delete", "pod/p", "--timeout=10s"]);
}

#[test]
fn delete_by_label_all_ignore_not_found_and_output_name() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = agent(d);
    let pid = |n: &str| d.join(format!("{n}.pid"));
    let docs: Vec<String> = [("w1", "app: web"), ("w2", "app: web"), ("db", "app: db")]
        .iter()
        .map(|(n, l)| yaml_pod(n, l, 5, &pid(n), ""))
        .collect();
    let file = write(d, "all.yaml", &docs.join("---\n"));
    ok(d, &["apply", "-f", path(&file)]);

    assert_eq!(
        ok(d, &["delete", "-l", "app=web", "-o", "name"]),
        "pod/w1\npod/w2\n"
    );
    assert_eq!(ok(d, &["get", "-o", "name"]), "pod/db\n");

    let out = grace(d, &["delete", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr).trim(),
        "Error from server (NotFound): pods \"nope\" not found"
    );
    assert_eq!(
        grace(d, &["delete", "pod/nope", "--ignore-not-found"])
            .status
            .code(),
        Some(0)
    );

    // Names and a selector together are a usage error.
    assert_eq!(
        grace(d, &["delete", "db", "-l", "app=db"]).status.code(),
        Some(2)
    );
    // --force with a grace above 0: kubectl's refusal and exit code.
    let out = grace(d, &["delete", "db", "--force", "--grace-period=5"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr)
            .contains("--force and --grace-period greater than 0 cannot be specified together"),
        "{}",
        text(&out.stderr)
    );
    // --now is a grace of 1 s; --all takes what is left. kubectl's line on
    // standard output; what grace knows besides under -v, on standard
    // error.
    let out = grace(d, &["delete", "--all", "--now", "-v=6"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "pod \"db\" deleted\n");
    assert!(
        text(&out.stderr).contains("pod \"db\": terminating, grace 1 s"),
        "{}",
        text(&out.stderr)
    );
    let out = grace(d, &["delete", "--all"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stderr).trim(), "No resources found");
}

#[test]
fn get_shows_kubectl_tables_and_kubernetes_objects() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = agent(d);
    let long = "a-pod-whose-name-is-longer-than-twenty-four";
    let pid = |n: &str| d.join(format!("{n}.pid"));
    let docs = [
        yaml_pod(long, "app: web", 5, &pid("l"), ""),
        yaml_pod(
            "s",
            "app: web",
            30,
            &pid("s"),
            "  finalizers: [example.com/keep]\n",
        )
        .replace(&workload(&pid("s"), false), &workload(&pid("s"), true)),
    ];
    ok(
        d,
        &[
            "apply",
            "-f",
            path(&write(d, "p.yaml", &docs.join("---\n"))),
        ],
    );
    wait_for("the workloads start", Duration::from_secs(5), || {
        alive(&pid("l")) && alive(&pid("s"))
    });

    let table = ok(d, &["get"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(lines[0].starts_with("NAME") && lines[0].contains("READY") && lines[0].contains("AGE"));
    let status_at = lines[0].find("STATUS");
    assert!(
        lines.iter().skip(1).all(|l| l.find("Running") == status_at),
        "aligned: {table}"
    );
    assert!(lines[1].contains("1/1"), "{table}");

    let wide = ok(d, &["get", "-o", "wide", "--no-headers", "s"]);
    assert!(!wide.contains("NAME"));
    let cells: Vec<&str> = wide.split_whitespace().collect();
    assert_eq!(cells[0], "s");
    // NAME READY STATUS RESTARTS AGE, then kubectl's wide columns (IP,
    // NODE, NOMINATED NODE, READINESS GATES) and grace's (GRACE,
    // FINALIZERS).
    assert_eq!(cells[3], "0", "no restart: {wide}");
    assert_eq!(
        &cells[5..],
        [
            "<none>",
            "local",
            "<none>",
            "<none>",
            "30",
            "example.com/keep"
        ],
        "{wide}"
    );

    // Deleting: the List shows the deletion as Kubernetes does.
    ok(d, &["delete", "s", "--grace-period", "2", "--wait=false"]);
    let pod = json(&ok(d, &["get", "pod", "s", "-o", "json"]));
    assert_eq!(pod["kind"], "Pod", "one name: the object itself");
    assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 2);
    let ts = pod["metadata"]["deletionTimestamp"]
        .as_str()
        .expect("RFC 3339");
    assert!(
        ts.len() == 20 && ts.ends_with('Z') && ts.as_bytes()[10] == b'T',
        "{ts}"
    );
    assert!(pod["status"]["containerStatuses"][0]["state"]["running"].is_object());
    wait_for(
        "SIGKILL reaches the workload",
        Duration::from_secs(10),
        || !alive(&pid("s")),
    );
    // The agent's final grace-0 delete is held by the finalizer (R29).
    wait_for("the final delete", Duration::from_secs(5), || {
        json(&ok(d, &["get", "s", "-o", "json"]))["metadata"]["deletionGracePeriodSeconds"] == 0
    });
    let list = json(&ok(d, &["get", "-o", "json"]));
    assert_eq!(list["kind"], "List");
    assert_eq!(list["apiVersion"], "v1");
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 2);
    let s = &items[1];
    assert_eq!(s["kind"], "Pod");
    assert_eq!(s["metadata"]["name"], "s");
    assert_eq!(
        s["metadata"]["finalizers"],
        serde_json::json!(["example.com/keep"])
    );
    // Killed while deleted: no container will start again, one failed
    // (137), so the kubelet's phase is Failed (R100).
    assert_eq!(s["status"]["phase"], "Failed");
    assert!(
        s["status"]["containerStatuses"][0]["state"]["terminated"].is_object(),
        "{s}"
    );
    assert!(items[0]["status"]["containerStatuses"][0]["state"]["running"].is_object());
    assert!(ok(d, &["get", "s"]).contains("Terminating"));

    // YAML is the same object, and applying it back changes nothing.
    let yaml = ok(d, &["get", long, "-o", "yaml"]);
    assert!(yaml.starts_with("apiVersion: v1\nkind: Pod\n"), "{yaml}");
    let back = write(d, "back.yaml", &yaml);
    assert_eq!(
        ok(d, &["apply", "-f", path(&back)]),
        format!("pod/{long} unchanged\n")
    );
}

/// One row of describe's Events table.
struct EventRow {
    kind: String,
    age: String,
    from: String,
    message: String,
}

/// The first row of `reason` in the Events table of `described`, cut at
/// the header's columns (kubectl's layout: Type, Reason, Age, From,
/// Message).
fn event(described: &str, reason: &str) -> Option<EventRow> {
    let mut lines = described.lines().skip_while(|l| *l != "Events:").skip(1);
    let head = lines.next()?;
    let at = |name: &str| head.find(name);
    let (r, a, f, m) = (at("Reason")?, at("Age")?, at("From")?, at("Message")?);
    lines
        .take_while(|l| l.starts_with("  "))
        .filter(|l| l.len() > m)
        .find(|l| l[r..a].trim() == reason)
        .map(|l| EventRow {
            kind: l[..r].trim().to_owned(),
            age: l[a..f].trim().to_owned(),
            from: l[f..m].trim().to_owned(),
            message: l[m..].to_owned(),
        })
}

#[test]
fn describe_tells_each_decision_of_the_deletion_with_its_rule() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = agent(d);
    let pid = d.join("h.pid");
    let manifest = format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: h, finalizers: [example.com/keep]}}
spec:
  nodeName: local
  terminationGracePeriodSeconds: 4
  containers:
  - name: app
    command: [sh, -c, \"{}\"]
    lifecycle:
      preStop:
        sleep: {{seconds: 1}}
",
        workload(&pid, true)
    );
    ok(d, &["apply", "-f", path(&write(d, "h.yaml", &manifest))]);
    wait_for("the workload starts", Duration::from_secs(5), || {
        alive(&pid)
    });
    let out = ok(d, &["describe", "pod", "h"]);
    assert!(out.contains("Pre-stop:     sh -c \"sleep 1\""), "{out}");
    assert!(out.contains("\nEvents:           <none>\n"), "{out}");

    ok(d, &["delete", "h", "--wait=false"]);
    wait_for("the stop signal", Duration::from_secs(5), || {
        event(&ok(d, &["describe", "h"]), "StopSignalSent").is_some()
    });
    let out = ok(d, &["describe", "h"]);
    assert!(out.contains("Status:           Terminating"), "{out}");
    for (reason, kind, from, message) in [
        (
            "DeletionAccepted",
            "Normal",
            "grace-api",
            "grace 4 s: the request's grace, or spec.terminationGracePeriodSeconds when it gave none (R18)",
        ),
        (
            "GenerationBumped",
            "Normal",
            "grace-api",
            "generation 2: bumped once by the first delete (R25)",
        ),
        (
            "HeldByFinalizers",
            "Normal",
            "grace-api",
            "[example.com/keep]",
        ),
        (
            "KillStarted",
            "Normal",
            "grace-agent",
            "effective grace 4 s",
        ),
        ("StopSignalSent", "Normal", "grace-agent", "app: at +"),
        (
            "KillScheduled",
            "Normal",
            "grace-agent",
            "app: SIGKILL due at +",
        ),
        (
            "KillScheduled",
            "Normal",
            "grace-agent",
            "3 s after the stop signal",
        ),
        ("KillScheduled", "Normal", "grace-agent", "(R62)"),
    ] {
        let row = event(&out, reason).unwrap_or_else(|| panic!("{reason}: {out}"));
        assert_eq!(
            (row.kind.as_str(), row.from.as_str()),
            (kind, from),
            "{reason}: {out}"
        );
        assert!(row.message.contains(message), "{reason}: {message}: {out}");
    }
    // Ages: the request a moment ago; the kill's start is not kept when
    // every container has a pre-stop hook; the stop signal after the 1 s
    // hook.
    let age = |reason: &str| event(&out, reason).unwrap().age;
    assert!(
        ["0s", "1s", "2s"].contains(&age("DeletionAccepted").as_str()),
        "{out}"
    );
    assert_eq!(age("KillStarted"), "<unknown>", "{out}");
    assert!(
        ["0s", "1s"].contains(&age("StopSignalSent").as_str()),
        "{out}"
    );
    // After SIGKILL (a finalizer keeps the object to look at).
    wait_for("SIGKILL", Duration::from_secs(10), || {
        event(&ok(d, &["describe", "h"]), "Stopped").is_some()
    });
    let out = ok(d, &["describe", "h"]);
    let stopped = event(&out, "Stopped").unwrap();
    assert!(
        stopped.message.starts_with("app: the process has exited")
            && stopped
                .message
                .contains("SIGKILL was due 3 s after the stop signal"),
        "{out}"
    );
    // Its age is its status's finishedAt: a moment ago.
    assert!(["0s", "1s", "2s"].contains(&stopped.age.as_str()), "{out}");
    let out = grace(d, &["describe", "nope"]);
    assert_eq!(out.status.code(), Some(1));
}

/// D2: a grace too long for the calendar saturates the deletion
/// timestamp at 9999-12-31T23:59:59Z and the agent's deadlines at the end
/// of its clock; `get` still shows the object as being deleted and
/// `describe` says so instead of printing wrapped numbers. A later, shorter
/// grace (R15) ends it.
#[test]
fn d2_a_grace_past_the_calendar_is_shown_saturated_and_a_shorter_one_ends_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = agent(d);
    let pid = d.join("forever.pid");
    // Its workload ignores SIGTERM: only SIGKILL ends it.
    let manifest = yaml_pod("forever", "app: f", i64::MAX, &pid, "")
        .replace(&workload(&pid, false), &workload(&pid, true));
    ok(
        d,
        &["apply", "-f", path(&write(d, "forever.yaml", &manifest))],
    );
    wait_for("the workload starts", Duration::from_secs(5), || {
        alive(&pid)
    });
    ok(d, &["delete", "forever", "--wait=false"]);
    wait_for("the stop signal", Duration::from_secs(5), || {
        event(&ok(d, &["describe", "forever"]), "StopSignalSent").is_some()
    });

    let pod = json(&ok(d, &["get", "forever", "-o", "json"]));
    assert_eq!(
        pod["metadata"]["deletionTimestamp"], "9999-12-30T22:00:00Z",
        "being deleted, at the latest time a Kubernetes Time holds in Rust"
    );
    assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], i64::MAX);
    let out = ok(d, &["describe", "forever"]);
    for needle in [
        "Deletion time:    9999-12-31T23:59:59Z",
        "stops there (D2)",
        "no SIGKILL: the 9223372036854775807 s budget passes the end of the agent's clock",
    ] {
        assert!(out.contains(needle), "{needle}: {out}");
    }
    assert!(!out.contains(" -9"), "no wrapped number: {out}");

    ok(
        d,
        &["delete", "forever", "--grace-period=1", "--timeout=10s"],
    );
    assert!(!alive(&pid), "SIGKILL reached it");
}

#[test]
fn wait_for_delete_and_delete_wait_time_out_while_a_finalizer_holds_the_object() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = agent(d);
    let pid = d.join("f.pid");
    let manifest = yaml_pod("f", "app: f", 1, &pid, "  finalizers: [example.com/keep]\n");
    ok(d, &["apply", "-f", path(&write(d, "f.yaml", &manifest))]);

    let started = Instant::now();
    let out = grace(d, &["delete", "pod/f", "--timeout=1s"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert!(
        text(&out.stderr).contains("timed out waiting for the condition on pods/f"),
        "{}",
        text(&out.stderr)
    );
    let out = grace(d, &["wait", "--for=delete", "pod/f", "--timeout=500ms"]);
    assert_eq!(out.status.code(), Some(1));

    ok(d, &["patch", "f", "--remove-finalizer", "example.com/keep"]);
    assert_eq!(
        ok(d, &["wait", "--for=delete", "pod/f", "--timeout=10s"]),
        "pod/f condition met\n"
    );
    // Already gone: the condition holds.
    assert_eq!(
        ok(d, &["wait", "--for=delete", "f"]),
        "pod/f condition met\n"
    );
}

#[test]
fn a_container_stop_signal_is_the_one_sent() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = agent(d);
    let got = d.join("got");
    let up = d.join("up");
    let manifest = format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: s}}
spec:
  nodeName: local
  terminationGracePeriodSeconds: 10
  containers:
  - name: app
    command: [sh, -c, \"trap 'echo USR1 > {got}; exit 0' USR1; trap '' TERM; touch {up}; while :; do sleep 0.05; done\"]
    lifecycle:
      stopSignal: SIGUSR1
",
        got = got.display(),
        up = up.display()
    );
    ok(d, &["apply", "-f", path(&write(d, "s.yaml", &manifest))]);
    // Touched once its traps are installed.
    wait_for("the workload runs", Duration::from_secs(20), || up.exists());
    let started = Instant::now();
    ok(d, &["delete", "s"]);
    // SIGKILL would come at the end of the 10 s grace.
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "it exited on its signal, not SIGKILL"
    );
    assert_eq!(
        std::fs::read_to_string(&got).expect("the trap ran").trim(),
        "USR1"
    );
}

#[test]
fn completions_for_bash_zsh_and_fish() {
    let dir = tempfile::tempdir().expect("temp dir");
    for shell in ["bash", "zsh", "fish"] {
        // The script registers a function that asks grace itself.
        let out = ok(dir.path(), &["completion", shell]);
        assert!(
            out.contains("GRACE_COMPLETE") && out.contains("grace"),
            "{shell}: {out}"
        );
    }
    assert_eq!(
        grace(dir.path(), &["completion", "tcsh"]).status.code(),
        Some(2)
    );
}

#[test]
fn bash_completion_offers_types_names_and_flags_from_the_running_agent() {
    let Ok(bash) = Command::new("bash")
        .args(["-c", "echo ${BASH_VERSINFO[0]}"])
        .output()
    else {
        eprintln!("bash is not installed: skipped");
        return;
    };
    assert!(
        text(&bash.stdout)
            .trim()
            .parse::<u32>()
            .is_ok_and(|v| v >= 4)
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = agent(d);
    for name in ["web-1", "web-2", "db"] {
        let file = write(
            d,
            &format!("{name}.json"),
            &format!(r#"{{"kind":"Object","metadata":{{"name":"{name}"}}}}"#),
        );
        ok(d, &["apply", "-f", file.to_str().expect("utf-8")]);
    }
    // As the shell calls the registered function on TAB.
    let complete = |words: &str| {
        let script = format!(
            r#"source <(grace completion bash)
COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}}-1)); COMP_TYPE=9
_clap_complete_grace grace "${{COMP_WORDS[$COMP_CWORD]}}" "${{COMP_WORDS[$COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}""#
        );
        let bin = std::path::Path::new(GRACE)
            .parent()
            .expect("the binary's dir");
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = Command::new("bash")
            .args(["-c", &script])
            .env("PATH", path)
            .env("GRACE_DATA_DIR", d)
            .env_remove("GRACE_ETCD_ENDPOINTS")
            .output()
            .expect("bash runs");
        text(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(complete(r#"grace delete w"#), ["web-1", "web-2"]);
    assert_eq!(complete(r#"grace get pod/d"#), ["pod/db"]);
    let all = complete(r#"grace describe """#);
    for word in ["pod", "pods", "db", "web-1", "web-2"] {
        assert!(all.iter().any(|w| w == word), "{word} in {all:?}");
    }
    assert_eq!(complete(r#"grace get --show"#), ["--show-labels"]);
    assert_eq!(complete(r#"grace des"#), ["describe"]);
}

#[test]
fn a_completion_script_into_a_pipe_closed_early_ends_quietly() {
    // `grace completion bash | head -1`, made certain: the reader is gone
    // before the first byte is written.
    for shell in ["bash", "zsh", "fish"] {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let out = Command::new(GRACE)
            .args(["completion", shell])
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .expect("grace runs");
        let err = text(&out.stderr);
        assert!(!err.contains("panicked"), "{shell}: {err}");
        assert_eq!(out.status.code(), Some(0), "{shell}: {err}");
    }
}

#[test]
fn the_store_flags_come_from_the_environment_too() {
    let dir = tempfile::tempdir().expect("temp dir");
    // GRACE_DATA_DIR: every test here relies on it; the directory tried
    // is the one named (no agent, no store there).
    let out = Command::new(GRACE)
        .args(["get"])
        .env_remove("GRACE_ETCD_ENDPOINTS")
        .env("GRACE_DATA_DIR", dir.path())
        .output()
        .expect("grace runs");
    assert!(
        text(&out.stderr).contains(&format!("no agent is serving {}", dir.path().display())),
        "{}",
        text(&out.stderr)
    );
    // GRACE_ETCD_ENDPOINTS is --etcd.
    let out = Command::new(GRACE)
        .args(["get"])
        .env("GRACE_ETCD_ENDPOINTS", "http://127.0.0.1:1")
        .env("GRACE_DATA_DIR", dir.path())
        .output()
        .expect("grace runs");
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--etcd"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn apply_reads_standard_input_and_delete_f_deletes_a_files_objects() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = agent(d);
    let pid = |n: &str| d.join(format!("{n}.pid"));
    let docs = [
        yaml_pod("in1", "app: in", 5, &pid("in1"), ""),
        yaml_pod("in2", "app: in", 5, &pid("in2"), ""),
    ]
    .join("---\n");
    let mut child = Command::new(GRACE)
        .env_remove("GRACE_ETCD_ENDPOINTS")
        .env("GRACE_DATA_DIR", d)
        .args(["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("grace runs");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), docs.as_bytes())
        .expect("written");
    let out = child.wait_with_output().expect("grace exits");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "pod/in1 created\npod/in2 created\n");
    for n in ["in1", "in2"] {
        wait_for("the workload starts", Duration::from_secs(5), || {
            alive(&pid(n))
        });
    }

    // The same manifests name what `delete -f` deletes.
    let file = write(d, "in.yaml", &docs);
    let out = ok(d, &["delete", "-f", path(&file), "-o", "name"]);
    assert_eq!(out, "pod/in1\npod/in2\n");
    assert!(
        !alive(&pid("in1")) && !alive(&pid("in2")),
        "waited for both"
    );
    let out = grace(d, &["delete", "-f", path(&file)]);
    assert_eq!(out.status.code(), Some(1), "gone: not found");
    assert_eq!(text(&out.stderr).matches("NotFound").count(), 2);
}

/// A pod this agent does not run (no `nodeName`, or another node's) frees
/// its name once its record is removed: the same name can be applied
/// again at once, as `get` says it is gone (before, the agent kept it
/// until it restarted).
#[test]
fn a_deleted_pod_this_agent_does_not_run_frees_its_name() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let _agent = agent(d);
    let unscheduled = write(
        d,
        "u.json",
        r#"{"metadata":{"name":"u"},"spec":{"containers":[{"name":"c","command":["sleep","100"]}]}}"#,
    );
    let elsewhere = write(
        d,
        "w.json",
        r#"{"metadata":{"name":"w"},"spec":{"nodeName":"other","containers":[{"name":"c","command":["sleep","100"]}]}}"#,
    );
    for (name, file) in [("u", &unscheduled), ("w", &elsewhere)] {
        assert_eq!(
            ok(d, &["apply", "-f", path(file)]),
            format!("pod/{name} created\n")
        );
        // Another node's pod waits for its own agent: forced here.
        ok(d, &["delete", name, "--grace-period=0", "--force"]);
        let out = grace(d, &["get", name]);
        assert_eq!(out.status.code(), Some(1), "{name} is gone");
        assert_eq!(
            ok(d, &["apply", "-f", path(file)]),
            format!("pod/{name} created\n"),
            "{name}: its name is free"
        );
        ok(d, &["delete", name, "--grace-period=0", "--force"]);
    }
}
