//! A Pod's process runs as its manifest says, through a real `grace agent`:
//! its `env` (values, `$(NAME)` expansion, fields of the pod), its
//! `workingDir`, the user its `securityContext` names (`runAsNonRoot`
//! refused as the kubelet refuses it), none of the agent's environment,
//! and its `postStart` hook. What grace cannot honour is refused at apply.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::disallowed_methods,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use support::common::wait_for;
use support::{Agent, grace, text};

fn root() -> bool {
    rustix::process::geteuid().is_root()
}

/// An agent whose own environment holds what must not leak into pods.
fn agent(dir: &Path) -> Agent {
    let mut command = Agent::command(dir, &[]);
    command
        .env("GRACE_DATA_DIR", dir)
        .env("RUST_LOG", "debug")
        .env("AGENT_SECRET", "leaked");
    Agent::spawn(dir, command)
}

fn write(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("file written");
    path
}

fn apply(dir: &Path, file: &str, contents: &str) {
    let path = write(dir, file, contents);
    let out = grace(dir, &["apply", "-f", path.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

fn logs(dir: &Path, name: &str) -> String {
    let out = grace(dir, &["logs", name]);
    text(&out.stdout)
}

fn pod_json(dir: &Path, name: &str) -> serde_json::Value {
    let out = grace(dir, &["get", name, "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// The state of the pod's first container (`status.containerStatuses[0]
/// .state`).
fn state(dir: &Path, name: &str) -> serde_json::Value {
    pod_json(dir, name)["status"]["containerStatuses"][0]["state"].clone()
}

fn delete(dir: &Path, name: &str) {
    let out = grace(dir, &["delete", name, "--timeout", "30s"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn a_container_gets_its_env_working_dir_and_user_and_nothing_of_the_agents() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let _agent = agent(dir);
    let work = dir.join("work/not/there/yet");
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: probe
  uid: uid-probe-1
  labels:
    app: web
spec:
  nodeName: local
  terminationGracePeriodSeconds: 1
  securityContext:
    runAsUser: 1000
    runAsGroup: 65534
    supplementalGroups: [4242]
  containers:
  - name: main
    image: busybox
    command: [sh, -c]
    args:
    - 'echo "arg=$1"; echo "uid=$(id -u) gid=$(id -g) groups=$(id -G)"; echo "pwd=$(pwd)"; env | sort; echo done; exec sleep 1000'
    - sh
    - '$(GREETING) $$(GREETING)'
    workingDir: {work}
    securityContext:
      runAsUser: 65534
    env:
    - name: GREETING
      value: hello
    - name: BOTH
      value: '$(GREETING) world $$(GREETING) $(NOPE)'
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    - name: POD_NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    - name: POD_UID
      valueFrom:
        fieldRef:
          fieldPath: metadata.uid
    - name: APP
      valueFrom:
        fieldRef:
          fieldPath: metadata.labels['app']
    - name: NODE
      valueFrom:
        fieldRef:
          fieldPath: spec.nodeName
"#,
        work = work.display()
    );
    apply(dir, "probe.yaml", &manifest);
    if !root() {
        // Not root: the agent cannot run it as another user, and says so.
        wait_for(
            "the container fails to start",
            Duration::from_secs(20),
            || state(dir, "probe")["terminated"]["reason"] == "ContainerCannotRun",
        );
        let message = state(dir, "probe")["terminated"]["message"].to_string();
        assert!(message.contains("not as root"), "{message}");
        return;
    }
    wait_for(
        "the container printed its environment",
        Duration::from_secs(20),
        || logs(dir, "probe").contains("done"),
    );
    let out = logs(dir, "probe");
    let lines: Vec<&str> = out.lines().collect();
    let has = |line: &str| lines.contains(&line);
    // `$(GREETING)` expanded in args, `$$` an escaped `$`.
    assert!(has("arg=hello $(GREETING)"), "{out}");
    // The container's runAsUser over the pod's; the pod's group and
    // supplementary groups.
    assert!(has("uid=65534 gid=65534 groups=65534 4242"), "{out}");
    assert!(has(&format!("pwd={}", work.display())), "{out}");
    assert!(work.is_dir(), "the working directory was created");
    for line in [
        "GREETING=hello",
        "BOTH=hello world $(GREETING) $(NOPE)",
        "POD_NAME=probe",
        "POD_NAMESPACE=default",
        "POD_UID=uid-probe-1",
        "APP=web",
        "NODE=local",
        "HOSTNAME=probe",
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    ] {
        assert!(has(line), "{line} in\n{out}");
    }
    assert!(
        lines.iter().any(|l| l.starts_with("HOME=")),
        "HOME is set: {out}"
    );
    for leaked in ["GRACE_", "RUST_LOG", "AGENT_SECRET"] {
        assert!(
            !lines.iter().any(|l| l.starts_with(leaked)),
            "{leaked} leaked from the agent:\n{out}"
        );
    }
    delete(dir, "probe");
}

#[test]
fn run_as_non_root_refuses_uid_0_with_the_kubelets_messages() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let _agent = agent(dir);
    let ran = dir.join("ran");
    let pod = |name: &str, security: &str| {
        format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}, uid: uid-{name}}}
spec:
  nodeName: local
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    command: [sh, -c, 'touch {ran}; exec sleep 1000']
    securityContext: {security}
"#,
            ran = ran.display()
        )
    };
    apply(
        dir,
        "explicit.yaml",
        &pod("explicit", "{runAsUser: 0, runAsNonRoot: true}"),
    );
    wait_for("the explicit refusal", Duration::from_secs(20), || {
        state(dir, "explicit")["waiting"]["reason"] == "CreateContainerConfigError"
    });
    let message = "container's runAsUser breaks non-root policy (pod: \"explicit_default(uid-explicit)\", container: main)";
    assert_eq!(state(dir, "explicit")["waiting"]["message"], message);
    // As kubectl shows it: the reason as STATUS, the message in describe.
    let get = text(&grace(dir, &["get", "explicit", "--no-headers"]).stdout);
    assert!(get.contains("CreateContainerConfigError"), "{get}");
    let describe = text(&grace(dir, &["describe", "pod", "explicit"]).stdout);
    assert!(
        describe.contains(&format!("CreateContainerConfigError: {message}")),
        "{describe}"
    );
    if root() {
        // No runAsUser: it would run as the agent's user, root here.
        apply(
            dir,
            "implicit.yaml",
            &pod("implicit", "{runAsNonRoot: true}"),
        );
        wait_for("the implicit refusal", Duration::from_secs(20), || {
            state(dir, "implicit")["waiting"]["reason"] == "CreateContainerConfigError"
        });
        assert_eq!(
            state(dir, "implicit")["waiting"]["message"],
            "container has runAsNonRoot and image will run as root (pod: \"implicit_default(uid-implicit)\", container: main)"
        );
        delete(dir, "implicit");
    }
    assert!(!ran.exists(), "no refused container ran");
    // Nothing runs: the delete completes.
    delete(dir, "explicit");
}

#[test]
fn what_grace_cannot_honour_is_refused_at_apply_naming_the_field() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let _agent = agent(dir);
    let cases = [
        (
            "envFrom:\n    - configMapRef: {name: settings}",
            "spec.containers[0].envFrom",
        ),
        (
            "env:\n    - name: TOKEN\n      valueFrom: {secretKeyRef: {name: s, key: token}}",
            "spec.containers[0].env[0].valueFrom.secretKeyRef",
        ),
        (
            "env:\n    - name: IP\n      valueFrom: {fieldRef: {fieldPath: status.podIP}}",
            "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath",
        ),
    ];
    for (i, (fragment, field)) in cases.into_iter().enumerate() {
        let manifest = format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: refused}}\nspec:\n  nodeName: local\n  containers:\n  - name: main\n    command: [sleep, '1000']\n    {fragment}\n"
        );
        let path = write(dir, &format!("refused-{i}.yaml"), &manifest);
        let out = grace(dir, &["apply", "-f", path.to_str().expect("utf-8")]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains(field),
            "{field}: {}",
            text(&out.stderr)
        );
    }
    let out = grace(dir, &["get", "refused"]);
    assert!(!out.status.success(), "nothing was stored");
}

#[test]
fn post_start_runs_beside_the_process_and_a_failing_one_stops_the_container() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let _agent = agent(dir);
    let work = dir.join("hooked");
    // The process waits for what its hook writes: in its directory, with
    // its environment.
    apply(
        dir,
        "hooked.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: hooked}}
spec:
  nodeName: local
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    command: [sh, -c, 'while [ ! -s started ]; do sleep 0.05; done; echo "hook wrote $(cat started)"; exec sleep 1000']
    workingDir: {work}
    env:
    - {{name: GREETING, value: hello}}
    lifecycle:
      postStart:
        exec:
          command: [sh, -c, 'echo "$GREETING from $HOSTNAME" > started']
"#,
            work = work.display()
        ),
    );
    wait_for(
        "the process saw its hook's file",
        Duration::from_secs(20),
        || logs(dir, "hooked").contains("hook wrote hello from hooked"),
    );
    delete(dir, "hooked");
    // A hook that fails: the container is stopped (its stop signal) and
    // stays terminated (restartPolicy Never). The hook runs beside the
    // process: it fails once the process has set its trap (a file in their
    // directory), or the signal could come first.
    let work = dir.join("failing");
    apply(
        dir,
        "failing.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: failing}}
spec:
  nodeName: local
  restartPolicy: Never
  terminationGracePeriodSeconds: 30
  containers:
  - name: main
    command: [sh, -c, 'trap "echo stopped by TERM; exit 0" TERM; echo running; : > trapped; while :; do sleep 0.05; done']
    workingDir: {work}
    lifecycle:
      postStart:
        exec:
          command: [sh, -c, 'while [ ! -e trapped ]; do sleep 0.05; done; exit 3']
"#,
            work = work.display()
        ),
    );
    wait_for(
        "the container is terminated",
        Duration::from_secs(20),
        || !state(dir, "failing")["terminated"].is_null(),
    );
    assert!(
        logs(dir, "failing").contains("stopped by TERM"),
        "{}",
        logs(dir, "failing")
    );
    delete(dir, "failing");
}

/// Answers the discovery requests `kubectl run --dry-run=client` makes
/// (`/api`, `/apis`, `/api/v1`), which is all it needs of a server; its
/// address.
fn discovery_server() -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = format!("http://{}", listener.local_addr().expect("bound"));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let request = String::from_utf8_lossy(&request);
            let path = request.split_whitespace().nth(1).unwrap_or("");
            let body = match path.split('?').next().unwrap_or("") {
                "/api" => {
                    r#"{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[]}"#
                }
                "/apis" => r#"{"kind":"APIGroupList","apiVersion":"v1","groups":[]}"#,
                "/api/v1" => {
                    r#"{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"pods","singularName":"pod","namespaced":true,"kind":"Pod","verbs":["create","get"]}]}"#
                }
                _ => "",
            };
            let status = if body.is_empty() {
                "404 Not Found"
            } else {
                "200 OK"
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    address
}

#[test]
fn manifests_kubectl_run_writes_apply_and_run() {
    let Ok(version) = std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .output()
    else {
        eprintln!("kubectl is not installed: skipped");
        return;
    };
    assert!(version.status.success());
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let _agent = agent(dir);
    let server = discovery_server();
    let kubectl_run = |name: &str, tail: &[&str]| {
        let out = std::process::Command::new("kubectl")
            .env("KUBECONFIG", dir.join("no-kubeconfig"))
            .args(["--server", &server, "run", name, "--image=busybox"])
            .args(["--dry-run=client", "-o", "yaml"])
            .args(tail)
            .output()
            .expect("kubectl runs");
        assert!(out.status.success(), "{}", text(&out.stderr));
        // Bound to the agent's node, as a scheduler would.
        text(&out.stdout).replace("spec:\n", "spec:\n  nodeName: local\n")
    };
    // `-- ARGS`: arguments only; `--command -- CMD`: a command.
    let args = kubectl_run(
        "by-args",
        &["--", "sh", "-c", "echo ran by args; exec sleep 1000"],
    );
    assert!(
        args.contains("args:") && !args.contains("command:"),
        "{args}"
    );
    let command = kubectl_run(
        "by-command",
        &[
            "--command",
            "--",
            "sh",
            "-c",
            "echo ran by command; exec sleep 1000",
        ],
    );
    assert!(command.contains("command:"), "{command}");
    apply(dir, "by-args.yaml", &args);
    apply(dir, "by-command.yaml", &command);
    wait_for("both ran", Duration::from_secs(20), || {
        logs(dir, "by-args").contains("ran by args")
            && logs(dir, "by-command").contains("ran by command")
    });
    delete(dir, "by-args");
    delete(dir, "by-command");
}

#[test]
fn the_pre_stop_hook_runs_with_the_containers_env_user_and_directory() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let _agent = agent(dir);
    // Writable by the container's user, wherever it runs as.
    let shared = tempfile::Builder::new()
        .prefix("grace-pre-stop")
        .tempdir_in("/tmp")
        .expect("shared dir");
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let user = if root() { "65534" } else { "null" };
    apply(
        dir,
        "hooked.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: stopping}}
spec:
  nodeName: local
  terminationGracePeriodSeconds: 10
  securityContext: {{runAsUser: {user}}}
  containers:
  - name: main
    command: [sh, -c, 'echo up; exec sleep 1000']
    workingDir: {shared}
    env:
    - {{name: GREETING, value: hello}}
    lifecycle:
      preStop:
        exec:
          command: [sh, -c, 'echo "$GREETING $(id -u) $(pwd) ${{RUST_LOG:-none}}" > hook.out']
"#,
            shared = shared.path().display()
        ),
    );
    wait_for("the container runs", Duration::from_secs(20), || {
        logs(dir, "stopping").contains("up")
    });
    delete(dir, "stopping");
    let wrote = std::fs::read_to_string(shared.path().join("hook.out")).expect("the hook wrote");
    let uid = if root() {
        "65534".to_owned()
    } else {
        rustix::process::geteuid().as_raw().to_string()
    };
    assert_eq!(
        wrote.trim(),
        format!("hello {uid} {} none", shared.path().display())
    );
}

#[test]
fn a_relative_program_is_found_in_the_working_directory() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let _agent = agent(dir);
    let work = dir.join("app");
    std::fs::create_dir(&work).expect("dir");
    let script = work.join("hello.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\necho hello from $(pwd)\nexec sleep 1000\n",
    )
    .expect("script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    apply(
        dir,
        "relative.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: relative}}\nspec:\n  nodeName: local\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    command: [./hello.sh]\n    workingDir: {}\n",
            work.display()
        ),
    );
    wait_for("the script ran", Duration::from_secs(20), || {
        logs(dir, "relative").contains(&format!("hello from {}", work.display()))
    });
    delete(dir, "relative");
}
