//! The agent's Kubernetes API (`grace agent --k8s-api`) driven by the real
//! kubectl: a real agent process, real workloads, kubectl with
//! `KUBECONFIG=DATA_DIR/kubeconfig` and nothing else set up. Without
//! kubectl the tests are skipped outside CI and fail in CI.
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

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::common::{Lines, alive, wait_for};
use support::{Agent, text};

use support::kube_api::{Api, kubectl_missing};

/// A pod whose workload writes its pid to `pid` and ignores SIGTERM
/// (or exits on it).
fn manifest(name: &str, pid: &Path, ignore_term: bool, extra_meta: &str) -> String {
    let trap = if ignore_term {
        "trap '' TERM"
    } else {
        "trap 'exit 0' TERM"
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels:\n    app: {name}\n{extra_meta}spec:\n  terminationGracePeriodSeconds: 30\n  containers:\n  - name: main\n    image: busybox\n    command: [\"sh\", \"-c\", \"echo $$$$ > {pid}; {trap}; while :; do sleep 0.05; done\"]\n",
        pid = pid.display()
    )
}

#[test]
fn nothing_listens_without_the_flag_and_the_kubeconfig_is_private() {
    let plain = tempfile::tempdir().unwrap();
    let agent = Agent::start(plain.path(), &[]);
    assert!(!plain.path().join("kubeconfig").exists());
    assert!(!plain.path().join("k8s-api").exists());
    agent.stop();

    let api = Api::start(&[]);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&api.kubeconfig), 0o600);
    assert_eq!(mode(&api.path().join("k8s-api")), 0o700);
    for file in [
        "ca.crt",
        "ca.key",
        "server.crt",
        "server.key",
        "client.crt",
        "client.key",
    ] {
        assert_eq!(
            mode(&api.path().join("k8s-api").join(file)),
            0o600,
            "{file}"
        );
    }
    // The CA is kept over a restart: the kubeconfig's CA still verifies.
    let ca = std::fs::read(api.path().join("k8s-api/ca.crt")).unwrap();
    let Api { agent, dir, .. } = api;
    agent.stop();
    let again = Agent::start(dir.path(), &["--k8s-api", "127.0.0.1:0"]);
    assert_eq!(
        std::fs::read(dir.path().join("k8s-api/ca.crt")).unwrap(),
        ca
    );
    drop(again);
}

#[test]
fn apply_creates_a_pod_that_runs_and_get_prints_the_server_s_table() {
    if kubectl_missing() {
        return;
    }
    let api = Api::start(&[]);
    let pid = api.path().join("web.pid");
    let out = api.apply(None, "web.yaml", &manifest("web", &pid, false, ""));
    assert_eq!(out.trim(), "pod/web created");
    wait_for("the workload", Duration::from_secs(10), || alive(&pid));

    let table = api.ok(&["get", "pods"]);
    let lines: Vec<&str> = table.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "{table}"
    );
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(&row[..4], ["web", "1/1", "Running", "0"], "{table}");

    let yaml = api.ok(&["get", "pod", "web", "-o", "yaml"]);
    assert!(yaml.contains("name: web"), "{yaml}");
    assert!(yaml.contains("namespace: default"), "{yaml}");
    assert!(yaml.contains("phase: Running"), "{yaml}");
    let described = api.ok(&["describe", "pod", "web"]);
    assert!(described.contains("web"), "{described}");

    // A second apply of a changed manifest updates the labels.
    let changed = manifest("web", &pid, false, "").replace("app: web", "app: web2");
    let out = api.apply(None, "web.yaml", &changed);
    assert_eq!(out.trim(), "pod/web configured");
    let labels = api.ok(&["get", "pod", "web", "-o", "jsonpath={.metadata.labels.app}"]);
    assert_eq!(labels, "web2");

    let out = api.kubectl(&["get", "pod", "nope"]);
    assert!(!out.status.success());
    assert_eq!(
        text(&out.stderr).trim(),
        "Error from server (NotFound): pods \"nope\" not found"
    );
}

/// R63: SIGKILL when the grace is spent. `kubectl delete --grace-period=3`
/// on a pod that ignores SIGTERM returns once the pod is gone, about 3 s
/// later, and the process is dead.
#[test]
fn r63_delete_with_grace_period_kills_a_term_ignoring_pod_when_the_grace_is_spent() {
    if kubectl_missing() {
        return;
    }
    let api = Api::start(&[]);
    let pid = api.path().join("stubborn.pid");
    api.apply(None, "p.yaml", &manifest("stubborn", &pid, true, ""));
    wait_for("the workload", Duration::from_secs(10), || alive(&pid));
    let started = Instant::now();
    let out = api.ok(&["delete", "pod", "stubborn", "--grace-period=3"]);
    let took = started.elapsed();
    assert_eq!(out.trim(), "pod \"stubborn\" deleted");
    assert!(
        took >= Duration::from_millis(2_800) && took < Duration::from_secs(8),
        "took {took:?}"
    );
    assert!(!alive(&pid), "the workload was killed");
    assert!(api.agent.log().contains("SIGKILL"), "{}", api.agent.log());
}

/// D5: a second delete with a shorter grace shortens the one in progress.
#[test]
fn d5_a_second_shorter_delete_shortens_the_grace() {
    if kubectl_missing() {
        return;
    }
    let api = Api::start(&[]);
    let pid = api.path().join("slow.pid");
    api.apply(None, "p.yaml", &manifest("slow", &pid, true, ""));
    wait_for("the workload", Duration::from_secs(10), || alive(&pid));
    api.ok(&["delete", "pod", "slow", "--grace-period=60", "--wait=false"]);
    let started = Instant::now();
    api.ok(&["delete", "pod", "slow", "--grace-period=2"]);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(8), "took {took:?}");
    assert!(!alive(&pid));
}

/// R45: a finalizer holds the deleted pod's record until an update
/// removes it; `--force`, `--now` and `-l` delete as on the socket.
#[test]
fn r45_a_finalizer_holds_the_pod_until_patched_away() {
    if kubectl_missing() {
        return;
    }
    let api = Api::start(&[]);
    let pid = api.path().join("held.pid");
    let finalizer = "  finalizers:\n  - example.com/hold\n";
    api.apply(None, "p.yaml", &manifest("held", &pid, false, finalizer));
    wait_for("the workload", Duration::from_secs(10), || alive(&pid));
    api.ok(&["delete", "pod", "held", "--wait=false"]);
    wait_for("the workload to stop", Duration::from_secs(10), || {
        !alive(&pid)
    });
    let still = api.ok(&[
        "get",
        "pod",
        "held",
        "-o",
        "jsonpath={.metadata.deletionTimestamp}",
    ]);
    assert!(!still.is_empty(), "held, and deleting");
    let out = api.ok(&[
        "patch",
        "pod",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    assert!(out.contains("pod/held patched"), "{out}");
    let out = api.ok(&["wait", "--for=delete", "pod/held", "--timeout=20s"]);
    assert!(out.is_empty() || out.contains("condition met"), "{out}");

    // label, annotate, and the strategic patch of finalizers.
    let pid = api.path().join("a.pid");
    api.apply(None, "a.yaml", &manifest("a", &pid, false, ""));
    api.ok(&["label", "pod", "a", "tier=fe"]);
    api.ok(&["annotate", "pod", "a", "note=hi"]);
    api.ok(&[
        "patch",
        "pod",
        "a",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/x"]}}"#,
    ]);
    let got = api.ok(&[
        "get",
        "pod",
        "a",
        "-o",
        "jsonpath={.metadata.labels.tier} {.metadata.finalizers} {.metadata.annotations.note}",
    ]);
    assert_eq!(got, "fe [\"example.com/x\"] hi");
    // A label taken out is gone, though no apply set it (the PATCH's pod
    // replaces the labels).
    api.ok(&["label", "pod", "a", "tier-"]);
    let got = api.ok(&["get", "pod", "a", "-o", "jsonpath={.metadata.labels}"]);
    assert!(!got.contains("tier"), "{got}");
    api.ok(&[
        "patch",
        "pod",
        "a",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers/0"}]"#,
    ]);

    // --force removes at once; -l deletes what the selector picks.
    let out = api.kubectl(&["delete", "pod", "a", "--force"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("force deleted"));
    let pid_b = api.path().join("b.pid");
    api.apply(None, "b.yaml", &manifest("b", &pid_b, false, ""));
    let out = api.ok(&["delete", "pod", "-l", "app=b", "--now"]);
    assert_eq!(out.trim(), "pod \"b\" deleted");
    assert!(api.ok(&["get", "pods", "-o", "name"]).trim().is_empty());
}

/// The Events table of a describe: (Type, Reason, From, Message) a row,
/// cut at the header's columns (Age left out: it moves with the clock).
fn event_rows(described: &str) -> Vec<[String; 4]> {
    let mut lines = described.lines().skip_while(|l| *l != "Events:").skip(1);
    let Some(head) = lines.next() else {
        return Vec::new();
    };
    let at = |name: &str| head.find(name).unwrap();
    let (r, a, f, m) = (at("Reason"), at("Age"), at("From"), at("Message"));
    lines
        .skip(1)
        .take_while(|l| l.starts_with("  ") && l.len() > m)
        .map(|l| {
            [
                l[..r].trim().to_owned(),
                l[r..a].trim().to_owned(),
                l[f..m].trim().to_owned(),
                l[m..].trim().to_owned(),
            ]
        })
        .collect()
}

/// `kubectl describe pod` lists grace's decisions about the deletion as
/// its Events (served at `…/events`, made from the store): the same rows,
/// in the same order, as `grace describe`, the rule in each message.
#[test]
fn kubectl_describe_shows_the_deletion_s_decisions_as_events() {
    if kubectl_missing() {
        return;
    }
    let api = Api::start(&[]);
    let pid = api.path().join("held.pid");
    let finalizer = "  finalizers:\n  - example.com/hold\n";
    api.apply(None, "p.yaml", &manifest("held", &pid, true, finalizer));
    wait_for("the workload", Duration::from_secs(10), || alive(&pid));
    let before = api.ok(&["describe", "pod", "held"]);
    assert!(
        before
            .lines()
            .any(|l| l.starts_with("Events:") && l.ends_with(" <none>")),
        "{before}"
    );

    api.ok(&["delete", "pod", "held", "--wait=false", "--grace-period=3"]);
    let grace_describe = || {
        let out = support::grace(api.path(), &["describe", "pod", "held"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    wait_for(
        "SIGKILL at the end of the grace",
        Duration::from_secs(15),
        || grace_describe().contains("Stopped") && !alive(&pid),
    );
    let theirs = api.ok(&["describe", "pod", "held"]);
    let rows = event_rows(&theirs);
    let reasons: Vec<&str> = rows.iter().map(|r| r[1].as_str()).collect();
    assert_eq!(
        reasons,
        [
            "DeletionAccepted",
            "GenerationBumped",
            "HeldByFinalizers",
            "KillStarted",
            "Stopped",
            "FinalDelete"
        ],
        "{theirs}"
    );
    for row in &rows {
        assert_eq!(row[0], "Normal", "{theirs}");
        let from = if row[1] == "DeletionAccepted"
            || row[1] == "GenerationBumped"
            || row[1] == "HeldByFinalizers"
        {
            "grace-api"
        } else {
            "grace-agent"
        };
        assert_eq!(row[2], from, "{theirs}");
    }
    assert!(rows[3][3].starts_with("effective grace 3 s"), "{theirs}");
    assert!(
        rows[4][3].contains("SIGKILL was due 3 s after the stop signal"),
        "{theirs}"
    );
    // Each message names its rule (R and a number).
    let names_a_rule = |m: &str| {
        m.split('R')
            .skip(1)
            .any(|after| after.starts_with(|c: char| c.is_ascii_digit()))
    };
    assert!(rows.iter().all(|r| names_a_rule(&r[3])), "{theirs}");
    // The same rows as grace's own describe.
    assert_eq!(rows, event_rows(&grace_describe()), "{theirs}");

    // Another pod's events are not this one's.
    let (code, list) = api.curl(
        &api.kubeconfig,
        "GET",
        "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dother",
        None,
    );
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(0), "{list}");
    let (code, status) = api.curl(
        &api.kubeconfig,
        "GET",
        "/api/v1/namespaces/default/events?fieldSelector=reason%3DKilled",
        None,
    );
    assert_eq!(code, 400, "{status}");
    assert_eq!(status["message"], "field label not supported: reason");
}

/// `kubectl get -w` sees the store's events, as `grace get -w` does.
#[test]
fn get_watch_sees_the_changes() {
    if kubectl_missing() {
        return;
    }
    let api = Api::start(&[]);
    let pid = api.path().join("w.pid");
    api.apply(None, "w.yaml", &manifest("w", &pid, false, ""));
    let mut watch = api
        .command(&["get", "pods", "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = Lines::of(watch.stdout.take().unwrap());
    lines.until(|l| l.starts_with("ADDED"));
    api.ok(&["label", "pod", "w", "x=1"]);
    lines.until(|l| l.starts_with("MODIFIED"));
    api.ok(&["delete", "pod", "w"]);
    lines.until(|l| l.starts_with("DELETED"));
    let _ = watch.kill();
    let _ = watch.wait();
}

/// Without a client certificate, or with one another CA signed, nothing
/// is served.
#[test]
fn anonymous_and_foreign_certificates_are_refused() {
    if kubectl_missing() {
        return;
    }
    let api = Api::start(&[]);
    let config = std::fs::read_to_string(&api.kubeconfig).unwrap();
    let field = |name: &str| {
        config
            .lines()
            .find_map(|l| l.trim().strip_prefix(name).map(str::to_owned))
            .unwrap()
    };
    let server = field("server: ");
    let ca = field("certificate-authority-data: ");
    // Anonymous: the CA, no client certificate.
    let anonymous = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: u\n  user: {{}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n"
    );
    // Foreign: a client certificate of another CA.
    let other_ca = rcgen::generate_simple_self_signed(vec!["x".to_owned()]).unwrap();
    let b64 = |s: String| {
        let out = Command::new("base64")
            .arg("-w0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(s.as_bytes())?;
                c.wait_with_output()
            })
            .unwrap();
        text(&out.stdout)
    };
    let foreign = anonymous.replace(
        "user: {}",
        &format!(
            "user:\n    client-certificate-data: {}\n    client-key-data: {}",
            b64(other_ca.cert.pem()),
            b64(other_ca.signing_key.serialize_pem())
        ),
    );
    for (what, config) in [("anonymous", anonymous), ("foreign", foreign)] {
        let path = api.path().join(format!("{what}.kubeconfig"));
        std::fs::write(&path, config).unwrap();
        let out = Command::new("kubectl")
            .env("KUBECONFIG", &path)
            .arg("--cache-dir")
            .arg(api.path().join(format!("{what}-cache")))
            .args(["get", "pods", "--request-timeout=10s"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{what}: {}", text(&out.stdout));
    }
}

/// `kubectl logs --previous`: the output of the run before the
/// container's last restart (the first restart comes 10 s after the
/// first exit, as the kubelet's back-off has it).
#[test]
fn logs_previous_is_the_run_before_the_last_restart() {
    if kubectl_missing() {
        return;
    }
    let api = Api::start(&[]);
    let count = api.path().join("runs");
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: again\nspec:\n  restartPolicy: Always\n  containers:\n  - name: main\n    command: [\"sh\", \"-c\", \"n=$(cat {runs} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {runs}; echo run $n; exit 1\"]\n",
        runs = count.display()
    );
    api.apply(None, "again.yaml", &manifest);
    wait_for("the second run", Duration::from_secs(30), || {
        std::fs::read_to_string(&count).is_ok_and(|n| n.trim() == "2")
            && api.ok(&["logs", "again"]) == "run 2\n"
    });
    assert_eq!(api.ok(&["logs", "again", "--previous"]), "run 1\n");
    assert_eq!(
        api.ok(&["logs", "again", "-p", "--timestamps"])
            .split_once(' ')
            .map(|(_, l)| l),
        Some("run 1\n")
    );
}

/// `kubectl logs`: the container's output, `--tail`, and `-f` until the
/// pod is removed; `--previous` of a container never restarted is refused
/// as kubectl words it.
#[test]
fn logs_tail_and_follow_until_the_pod_is_removed() {
    if kubectl_missing() {
        return;
    }
    let api = Api::start(&[]);
    let manifest = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: talk\nspec:\n  containers:\n  - name: main\n    command: [\"sh\", \"-c\", \"i=0; while :; do i=$((i+1)); echo line $i; sleep 0.1; done\"]\n";
    api.apply(None, "talk.yaml", manifest);
    wait_for("three lines", Duration::from_secs(10), || {
        api.ok(&["logs", "talk"]).lines().count() >= 3
    });
    let all = api.ok(&["logs", "talk"]);
    assert!(all.starts_with("line 1\nline 2\n"), "{all}");
    let last = api.ok(&["logs", "talk", "--tail=1"]);
    assert_eq!(last.lines().count(), 1, "{last}");
    let out = api.kubectl(&["logs", "talk", "--previous"]);
    assert!(
        text(&out.stderr)
            .contains("previous terminated container \"main\" in pod \"talk\" not found"),
        "{}",
        text(&out.stderr)
    );
    let mut follow = api
        .command(&["logs", "-f", "talk"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = Lines::of(follow.stdout.take().unwrap());
    lines.until(|l| l == "line 1");
    api.ok(&["delete", "pod", "talk", "--now"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while follow.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "logs -f ends with the pod");
        std::thread::sleep(Duration::from_millis(50));
    }
}
