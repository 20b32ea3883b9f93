//! The agent's Kubernetes API across namespaces, driven by the real
//! kubectl (and, where kubectl sends no such request, by curl with the
//! kubeconfig's client certificate): a real agent process, real
//! workloads. The same name in two namespaces is two pods; `-A` lists
//! every namespace. Without kubectl the tests are skipped outside CI and
//! fail in CI.
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
use std::process::{Command, Stdio};
use std::time::Duration;

use support::common::{Lines, alive, wait_for};
use support::text;

use support::kube_api::{Api, kubectl_missing};

/// A pod whose workload writes its pid to `pid` and exits on SIGTERM (or
/// ignores it, `ignore_term`).
fn manifest(name: &str, pid: &Path, ignore_term: bool, labels: &str) -> String {
    let trap = if ignore_term {
        "trap '' TERM"
    } else {
        "trap 'exit 0' TERM"
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels: {{app: {name}{labels}}}\nspec:\n  terminationGracePeriodSeconds: 30\n  containers:\n  - name: main\n    image: busybox\n    command: [\"sh\", \"-c\", \"echo $$$$ > {pid}; {trap}; while :; do sleep 0.05; done\"]\n",
        pid = pid.display()
    )
}

fn pid_of(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap().trim().to_owned()
}

/// The same name in two namespaces is two pods with two processes;
/// `get pods -A` lists both with kubectl's NAMESPACE column; a pod in
/// `team-a` is invisible to `-n default`; deleting one leaves the other
/// running; a watch sees its namespace only (`-A`: every one).
#[test]
fn the_same_name_in_two_namespaces_is_two_pods_and_a_to_k_lists_both() {
    if kubectl_missing() {
        return;
    }
    let api = Api::start(&[]);
    let (a_pid, d_pid) = (api.path().join("a.pid"), api.path().join("d.pid"));
    let out = api.apply(
        Some("team-a"),
        "a.yaml",
        &manifest("web", &a_pid, false, ""),
    );
    assert_eq!(out.trim(), "pod/web created");
    let out = api.apply(None, "d.yaml", &manifest("web", &d_pid, false, ""));
    assert_eq!(out.trim(), "pod/web created");
    wait_for("both workloads", Duration::from_secs(10), || {
        alive(&a_pid) && alive(&d_pid)
    });
    assert_ne!(pid_of(&a_pid), pid_of(&d_pid), "two processes");

    let all = api.ok(&["get", "pods", "-A"]);
    let lines: Vec<Vec<&str>> = all
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0][..2], ["NAMESPACE", "NAME"], "{all}");
    assert_eq!(lines.len(), 3, "{all}");
    assert_eq!(lines[1][..2], ["default", "web"], "{all}");
    assert_eq!(lines[2][..2], ["team-a", "web"], "{all}");
    let ns = api.ok(&[
        "-n",
        "team-a",
        "get",
        "pod",
        "web",
        "-o",
        "jsonpath={.metadata.namespace}",
    ]);
    assert_eq!(ns, "team-a");
    // The CLI sees the API's pods where kubectl put them.
    let out = support::grace(
        api.path(),
        &["get", "-n", "team-a", "pod", "web", "-o", "json"],
    );
    let pod: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(pod["metadata"]["namespace"], "team-a", "{pod}");

    // A pod of team-a only: invisible to default.
    let solo_pid = api.path().join("solo.pid");
    api.apply(
        Some("team-a"),
        "solo.yaml",
        &manifest("solo", &solo_pid, false, ""),
    );
    let out = api.kubectl(&["get", "pod", "solo"]);
    assert!(!out.status.success());
    assert_eq!(
        text(&out.stderr).trim(),
        "Error from server (NotFound): pods \"solo\" not found"
    );
    assert_eq!(api.ok(&["get", "pods", "-o", "name"]).trim(), "pod/web");
    let names = api.ok(&["-n", "team-a", "get", "pods", "-o", "name"]);
    assert_eq!(names.lines().collect::<Vec<_>>(), ["pod/solo", "pod/web"]);
    // One at a time (limit=1 and continue), in namespace then name order.
    let chunks = api.ok(&[
        "get",
        "pods",
        "-A",
        "--chunk-size=1",
        "-o",
        "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}",
    ]);
    assert_eq!(chunks.trim(), "default/web team-a/solo team-a/web");

    // A watch of team-a sees team-a's changes only: default's label comes
    // first, team-a's first event is solo's.
    let mut watch = api
        .command(&["-n", "team-a", "get", "pods", "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = Lines::of(watch.stdout.take().unwrap());
    lines.until(|l| l.starts_with("ADDED") && l.contains("web"));
    api.ok(&["label", "pod", "web", "x=1"]);
    api.ok(&["-n", "team-a", "label", "pod", "solo", "x=1"]);
    let first = lines.until(|l| l.starts_with("MODIFIED")).pop().unwrap();
    assert!(first.contains("solo"), "{first}");
    let _ = watch.kill();
    let _ = watch.wait();

    // -A -w: every namespace's events, with the NAMESPACE column.
    let mut watch = api
        .command(&["get", "pods", "-A", "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = Lines::of(watch.stdout.take().unwrap());
    lines.until(|l| l.starts_with("ADDED") && l.contains("solo"));
    let b_pid = api.path().join("b.pid");
    api.apply(Some("team-b"), "b.yaml", &manifest("b", &b_pid, false, ""));
    let added = lines.until(|l| l.contains(" b ")).pop().unwrap();
    let cells: Vec<&str> = added.split_whitespace().collect();
    assert_eq!(cells[..3], ["ADDED", "team-b", "b"], "{added}");
    let _ = watch.kill();
    let _ = watch.wait();

    // Deleting team-a's web stops its process only.
    let out = api.ok(&["-n", "team-a", "delete", "pod", "web"]);
    assert_eq!(out.trim(), "pod \"web\" deleted");
    assert!(!alive(&a_pid), "team-a's web is stopped");
    assert!(alive(&d_pid), "default's web still runs");
    assert_eq!(
        api.ok(&["get", "pod", "web", "-o", "jsonpath={.status.phase}"]),
        "Running"
    );

    // Namespaces: default and those with pods; any valid one exists.
    let namespaces = api.ok(&["get", "ns", "-o", "name"]);
    assert_eq!(
        namespaces.lines().collect::<Vec<_>>(),
        ["namespace/default", "namespace/team-a", "namespace/team-b"],
        "{namespaces}"
    );
    let table = api.ok(&["get", "namespaces"]);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(
        table.contains("team-a") && table.contains("Active"),
        "{table}"
    );
    let phase = api.ok(&["get", "ns", "team-z", "-o", "jsonpath={.status.phase}"]);
    assert_eq!(phase, "Active");
    assert_eq!(
        api.ok(&["create", "ns", "team-c"]).trim(),
        "namespace/team-c created"
    );
    // apply of a Namespace: it exists already, so kubectl patches it
    // (and nothing is kept).
    let ns = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-d\n";
    let out = api.apply(None, "ns.yaml", ns);
    assert_eq!(out.trim(), "namespace/team-d configured");
    let out = api.kubectl(&["delete", "ns", "team-a"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("grace keeps no Namespace objects"),
        "{}",
        text(&out.stderr)
    );
}

/// A body whose `metadata.namespace` is not the URL's is refused as
/// kube-apiserver refuses it (kubectl checks this itself, so curl sends
/// it); an invalid namespace in the URL is NotFound.
#[test]
fn a_body_in_another_namespace_than_the_url_s_is_a_bad_request() {
    if kubectl_missing() {
        return;
    }
    let api = Api::start(&[]);
    let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","namespace":"team-b"},
                  "spec":{"containers":[{"name":"c","command":["sleep","60"]}]}}"#;
    let (code, status) = api.curl(
        &api.kubeconfig,
        "POST",
        "/api/v1/namespaces/team-a/pods",
        Some(pod),
    );
    assert_eq!(code, 400, "{status}");
    assert_eq!(status["reason"], "BadRequest");
    assert_eq!(
        status["message"],
        "the namespace of the provided object does not match the namespace sent on the request"
    );
    let (code, status) = api.curl(
        &api.kubeconfig,
        "GET",
        "/api/v1/namespaces/Team_A/pods",
        None,
    );
    assert_eq!(code, 404, "{status}");
    assert_eq!(status["message"], "namespaces \"Team_A\" not found");
    assert!(
        api.ok(&["get", "pods", "-A", "-o", "name"])
            .trim()
            .is_empty()
    );
}

/// deletecollection (kube-rs's `Api::delete_collection`; kubectl 1.32
/// deletes one by one instead): `DELETE …/namespaces/NS/pods` with
/// selectors deletes each pod they pick through the same path as a
/// single delete, with the DeleteOptions of the body or the query; the
/// answer is the PodList of the pods as their deletions left them. R63:
/// a pod that ignores SIGTERM lives out its grace; `dryRun=All` changes
/// nothing; another namespace's pod of the same name is untouched.
#[test]
fn deletecollection_deletes_each_pod_the_selectors_pick_with_its_grace() {
    if kubectl_missing() {
        return;
    }
    let api = Api::start(&[]);
    let pid = |name: &str| api.path().join(format!("{name}.pid"));
    let batch = ", tier: batch";
    api.apply(
        Some("team-a"),
        "b1.yaml",
        &manifest("b1", &pid("b1"), true, batch),
    );
    api.apply(
        Some("team-a"),
        "b2.yaml",
        &manifest("b2", &pid("b2"), false, batch),
    );
    api.apply(
        Some("team-a"),
        "keep.yaml",
        &manifest("keep", &pid("keep"), false, ""),
    );
    api.apply(None, "d.yaml", &manifest("b1", &pid("d"), false, batch));
    wait_for("the workloads", Duration::from_secs(10), || {
        ["b1", "b2", "keep", "d"].iter().all(|n| alive(&pid(n)))
    });
    let pods = "/api/v1/namespaces/team-a/pods?labelSelector=tier%3Dbatch";
    let names = |list: &serde_json::Value| -> Vec<String> {
        let items = list["items"].as_array().unwrap_or_else(|| panic!("{list}"));
        items
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_owned())
            .collect()
    };

    let (code, list) = api.curl(
        &api.kubeconfig,
        "DELETE",
        &format!("{pods}&dryRun=All"),
        None,
    );
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["kind"], "PodList");
    assert_eq!(names(&list), ["b1", "b2"]);
    let deleting = api.ok(&[
        "get",
        "pods",
        "-A",
        "-o",
        "jsonpath={.items[*].metadata.deletionTimestamp}",
    ]);
    assert!(deleting.is_empty(), "a dry run changes nothing: {deleting}");

    let started = std::time::Instant::now();
    let options = r#"{"gracePeriodSeconds":2,"propagationPolicy":"Background"}"#;
    let (code, list) = api.curl(&api.kubeconfig, "DELETE", pods, Some(options));
    assert_eq!(code, 200, "{list}");
    assert_eq!(names(&list), ["b1", "b2"]);
    for pod in list["items"].as_array().unwrap() {
        assert_eq!(pod["metadata"]["namespace"], "team-a", "{pod}");
        assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 2, "{pod}");
        assert!(pod["metadata"]["deletionTimestamp"].is_string(), "{pod}");
    }
    assert!(
        alive(&pid("b1")),
        "R63: b1 ignores SIGTERM and has its grace"
    );
    wait_for("b2 to stop on SIGTERM", Duration::from_secs(10), || {
        !alive(&pid("b2"))
    });
    wait_for("b1 to be killed", Duration::from_secs(10), || {
        !alive(&pid("b1"))
    });
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(1_800), "took {took:?}");
    assert!(alive(&pid("keep")) && alive(&pid("d")), "the others run");
    api.ok(&[
        "-n",
        "team-a",
        "wait",
        "--for=delete",
        "pod/b1",
        "pod/b2",
        "--timeout=20s",
    ]);

    // A field selector and the options in the query.
    let (code, list) = api.curl(
        &api.kubeconfig,
        "DELETE",
        "/api/v1/namespaces/team-a/pods?fieldSelector=metadata.name%3Dkeep&gracePeriodSeconds=1",
        None,
    );
    assert_eq!(code, 200, "{list}");
    assert_eq!(names(&list), ["keep"]);
    assert_eq!(
        list["items"][0]["metadata"]["deletionGracePeriodSeconds"],
        1
    );
    wait_for("keep to stop", Duration::from_secs(10), || {
        !alive(&pid("keep"))
    });
    assert!(alive(&pid("d")), "default's b1 still runs");
    assert_eq!(
        api.ok(&["get", "pods", "-A", "-o", "name"]).trim(),
        "pod/b1"
    );
}

/// The socket's access, for certificates: `grace kubeconfig --user alice
/// --group nogroup` (run by the agent's owner) gives alice the access the
/// agent's `--allow-group nogroup:ro|rw` gives its members. Read-only:
/// get and list, and every change is a 403 in kube-apiserver's words (the
/// pod runs on); read-write: the delete stops the pod. A certificate of
/// no allowed group is refused outright.
#[test]
fn an_allow_group_user_s_kubeconfig_has_the_group_s_access() {
    if kubectl_missing() {
        return;
    }
    for (access, writes) in [("ro", false), ("rw", true)] {
        let api = Api::start(&["--allow-group", &format!("nogroup:{access}")]);
        let pid = api.path().join("web.pid");
        api.apply(None, "web.yaml", &manifest("web", &pid, false, ""));
        wait_for("the workload", Duration::from_secs(10), || alive(&pid));
        let alice = api.user_kubeconfig("alice", "nogroup");
        let as_alice = |args: &[&str]| api.command_as(&alice, args).output().unwrap();
        let out = as_alice(&["get", "pods", "-o", "name"]);
        assert!(out.status.success(), "{access}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout).trim(), "pod/web");

        let out = as_alice(&["delete", "pod", "web", "--wait=false"]);
        if writes {
            assert!(out.status.success(), "rw: {}", text(&out.stderr));
            wait_for("the delete to stop web", Duration::from_secs(10), || {
                !alive(&pid)
            });
        } else {
            assert!(!out.status.success());
            assert_eq!(
                text(&out.stderr).trim(),
                "Error from server (Forbidden): pods \"web\" is forbidden: User \"alice\" cannot delete resource \"pods\" in API group \"\" in the namespace \"default\""
            );
            let out = as_alice(&["label", "pod", "web", "x=1"]);
            assert!(
                text(&out.stderr).contains("(Forbidden)"),
                "{}",
                text(&out.stderr)
            );
            let (code, status) =
                api.curl(&alice, "DELETE", "/api/v1/namespaces/default/pods", None);
            assert_eq!(code, 403, "{status}");
            assert_eq!(
                status["message"],
                "pods is forbidden: User \"alice\" cannot deletecollection resource \"pods\" in API group \"\" in the namespace \"default\""
            );
            assert!(alive(&pid), "ro: web runs on");
            assert_eq!(
                api.ok(&["get", "pod", "web", "-o", "name"]).trim(),
                "pod/web"
            );
        }

        let bob = api.user_kubeconfig("bob", "staff");
        let out = api.command_as(&bob, &["get", "pods"]).output().unwrap();
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains("(Forbidden)"),
            "{}",
            text(&out.stderr)
        );
    }
}

/// `grace kubeconfig` needs the CA's key: without an agent that served
/// the API on the data directory there is none, and it says so.
#[test]
fn kubeconfig_without_the_ca_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(support::GRACE)
        .args(["kubeconfig", "--user", "alice", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("only the agent's owner can issue certificates"),
        "{err}"
    );
}
