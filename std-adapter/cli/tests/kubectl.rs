//! The store commands as a user runs them: a real `grace agent` process on
//! a temporary data directory, real workloads, and `grace apply / delete /
//! get / patch` as separate processes. Exit codes: 0 done, 1 a failed
//! operation, 2 invalid input; a refused request changes nothing.
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
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use grace_std::RedbStore;
use support::common::{Lines, alive, wait_for};
use support::{Agent, GRACE, grace, text};

fn write(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("file written");
    path
}

/// A pod bound to the agent's node whose workload writes its pid to
/// `pid_file` and `ignore`s SIGTERM or exits on it.
fn pod(name: &str, grace: i64, pid_file: &Path, ignore_term: bool, extra: &str) -> String {
    let trap = if ignore_term {
        "trap '' TERM"
    } else {
        "trap 'exit 0' TERM"
    };
    format!(
        r#"{{"metadata":{{"name":"{name}"{extra}}},
            "spec":{{"nodeName":"local","terminationGracePeriodSeconds":{grace},
                    "containers":[{{"name":"app","command":["sh","-c","echo $$ > {pid}; {trap}; while :; do sleep 0.05; done"]}}]}}}}"#,
        pid = pid_file.display()
    )
}

/// Writes an object file and applies it, which must succeed.
fn apply(dir: &Path, file: &str, contents: &str) {
    let path = write(dir, file, contents);
    let out = grace(dir, &["apply", "-f", path.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

fn get_json(dir: &Path, name: &str) -> Option<serde_json::Value> {
    let out = grace(dir, &["get", name, "-o", "stored"]);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).expect("JSON"))
}

fn store_revision(dir: &Path) -> u64 {
    let out = grace(dir, &["get", "-o", "stored"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    v["revision"].as_u64().expect("revision")
}

#[test]
fn delete_terminates_then_kills_then_removes_and_get_shows_terminating() {
    let dir = tempfile::tempdir().expect("temp dir");
    let agent = Agent::start(dir.path(), &[]);
    let pid = dir.path().join("web.pid");
    let file = write(dir.path(), "web.json", &pod("web", 2, &pid, true, ""));
    let out = grace(dir.path(), &["apply", "-f", file.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "pod/web created");
    wait_for("the workload starts", Duration::from_secs(5), || {
        alive(&pid)
    });

    let out = grace(dir.path(), &["get"]);
    let table = text(&out.stdout);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(
        table.contains("web") && table.contains("Running"),
        "{table}"
    );

    let started = Instant::now();
    let out = grace(dir.path(), &["delete", "web", "--wait=false"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("deleted"),
        "{}",
        text(&out.stdout)
    );
    let out = grace(dir.path(), &["get", "web"]);
    assert!(
        text(&out.stdout).contains("Terminating"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        alive(&pid),
        "SIGTERM is ignored: still running within the grace"
    );

    wait_for("the object is gone", Duration::from_secs(10), || {
        get_json(dir.path(), "web").is_none()
    });
    // Grace 2 s: SIGKILL is due 2 s after the deletion, and the stop signal
    // came at once (no hook), so the 2 s floor is met too.
    assert!(started.elapsed() >= Duration::from_secs(2));
    assert!(!alive(&pid), "SIGKILL reached the workload");
    let out = grace(dir.path(), &["get", "web"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("pods \"web\" not found"));

    let log = agent.stop();
    let order: Vec<&str> = [
        "Live → GracefulPending",
        "stop signal",
        "SIGKILL",
        "Deleted",
    ]
    .into_iter()
    .filter(|w| log.contains(w))
    .collect();
    assert_eq!(order.len(), 4, "{log}");
    let at = |w: &str| log.find(w).expect("in the log");
    assert!(at("stop signal") < at("SIGKILL") && at("SIGKILL") < at("Terminating → Deleted"));
}

#[test]
fn get_watch_shows_terminating_then_deleted() {
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(dir.path(), &[]);
    let pid = dir.path().join("w.pid");
    apply(dir.path(), "w.json", &pod("w", 1, &pid, false, ""));

    let mut watch = Command::new(GRACE)
        // The etcd tests' variable is also `--etcd`'s: these use a data dir.
        .env_remove("GRACE_ETCD_ENDPOINTS")
        .args(["get", "w", "-w", "--data-dir"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .expect("watch starts");
    let lines = Lines::of(watch.stdout.take().expect("stdout"));
    let header = lines.next();
    assert!(header.starts_with("NAME"), "{header}");
    let first = lines.next();
    assert!(first.contains("Running"), "{first}");

    assert!(
        grace(dir.path(), &["delete", "w", "--wait=false"])
            .status
            .success()
    );
    let seen = lines.until(|l| l.contains("Deleted"));
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(seen.iter().any(|l| l.contains("Terminating")), "{seen:?}");
    assert!(
        seen.last()
            .is_some_and(|l| l.starts_with("w ") && l.contains("Deleted"))
    );
    // Rows that say nothing new are not repeated.
    for pair in seen.windows(2) {
        assert_ne!(pair[0], pair[1], "{seen:?}");
    }
}

#[test]
fn d4_force_delete_removes_the_record_at_once_and_warns() {
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(dir.path(), &[]);
    let pid = dir.path().join("f.pid");
    apply(dir.path(), "f.json", &pod("f", 30, &pid, true, ""));
    wait_for("the workload starts", Duration::from_secs(5), || {
        alive(&pid)
    });

    let out = grace(
        dir.path(),
        &["delete", "f", "--grace-period", "0", "--force"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // kubectl's words: the warning on standard error, capital W, then
    // "force deleted".
    assert!(
        text(&out.stderr).starts_with("Warning: Immediate deletion"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(text(&out.stdout), "pod \"f\" force deleted\n");
    assert!(
        get_json(dir.path(), "f").is_none(),
        "the record is gone at once"
    );
    // The agent still stops the workload (D4: the stop continues).
    wait_for("the workload is stopped", Duration::from_secs(10), || {
        !alive(&pid)
    });
}

#[test]
fn kubectl_grace_period_zero_without_force_is_a_one_second_graceful_delete() {
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(dir.path(), &[]);
    let pid = dir.path().join("z.pid");
    apply(dir.path(), "z.json", &pod("z", 30, &pid, true, ""));
    let out = grace(dir.path(), &["delete", "z", "--grace-period", "0", "-v"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), "pod \"z\" deleted\n");
    assert!(
        text(&out.stderr).contains("grace 1 s"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn dry_run_and_failed_preconditions_change_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(dir.path(), &[]);
    let pid = dir.path().join("p.pid");
    apply(dir.path(), "p.json", &pod("p", 5, &pid, false, ""));
    let before = get_json(dir.path(), "p").expect("stored");
    let revision = store_revision(dir.path());

    let out = grace(
        dir.path(),
        &["delete", "p", "--dry-run", "--grace-period", "3"],
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("(server dry run)"));

    let out = grace(dir.path(), &["delete", "p", "--uid", "not-its-uid"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("precondition failed: uid"),
        "{}",
        text(&out.stderr)
    );

    let stale = (before["revision"].as_u64().expect("rv") + 100).to_string();
    let out = grace(dir.path(), &["delete", "p", "--resource-version", &stale]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("resource_version"),
        "{}",
        text(&out.stderr)
    );

    let out = grace(dir.path(), &["delete", "p", "--resource-version", "abc"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--resource-version"));

    let out = grace(dir.path(), &["delete", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("pods \"nope\" not found"));

    assert_eq!(store_revision(dir.path()), revision, "nothing was written");
    assert_eq!(get_json(dir.path(), "p"), Some(before));

    // The right uid passes.
    let uid = get_json(dir.path(), "p").expect("stored")["object"]["meta"]["uid"]
        .as_str()
        .expect("uid")
        .to_owned();
    let out = grace(dir.path(), &["delete", "p", "--uid", &uid, "--wait=false"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn r38_cascade_foreground_finishes_on_its_own_through_the_gc_step() {
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(dir.path(), &[]);
    // An object with no graceful strategy: removed at once unless held.
    apply(
        dir.path(),
        "cm.json",
        r#"{"kind":"Object","metadata":{"name":"cm"}}"#,
    );
    let out = grace(
        dir.path(),
        &[
            "delete",
            "cm",
            "--cascade",
            "foreground",
            "--wait=false",
            "-v",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // -v shows the finalizer the delete added (R38) ...
    assert!(
        text(&out.stderr).contains("held by finalizers foregroundDeletion"),
        "{}",
        text(&out.stderr)
    );
    // ... and the garbage collector, with no dependents to wait for,
    // removes it: the deletion finishes (R45).
    wait_for("the object is gone", Duration::from_secs(5), || {
        get_json(dir.path(), "cm").is_none()
    });
}

#[test]
fn r37_cascade_orphan_on_a_running_pod_finishes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(dir.path(), &[]);
    let pid = dir.path().join("o.pid");
    apply(dir.path(), "o.json", &pod("o", 2, &pid, false, ""));
    wait_for("the workload starts", Duration::from_secs(5), || {
        alive(&pid)
    });
    let out = grace(dir.path(), &["delete", "o", "--cascade", "orphan", "-v"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("held by finalizers orphan"),
        "{}",
        text(&out.stderr)
    );
    wait_for("the object is gone", Duration::from_secs(10), || {
        get_json(dir.path(), "o").is_none()
    });
    assert!(!alive(&pid), "the workload was stopped");
}

#[test]
fn r39_gc_leaves_other_finalizers_and_r45_removing_the_last_completes_the_deletion() {
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(dir.path(), &[]);
    apply(
        dir.path(),
        "cm.json",
        r#"{"kind":"Object","metadata":{"name":"cm","finalizers":["example.com/keep"]}}"#,
    );
    // --wait=false: its own finalizer holds the object until the patch below.
    let out = grace(
        dir.path(),
        &["delete", "cm", "--cascade", "foreground", "--wait=false"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stored = get_json(dir.path(), "cm").expect("held by its finalizer");
    assert_eq!(
        stored["object"]["meta"]["finalizers"],
        serde_json::json!(["example.com/keep"]),
        "foregroundDeletion was collected, the other stays"
    );
    // The kill state is stored compact and shown decoded.
    let lifecycle = &stored["object"]["agent"]["lifecycle"];
    assert_eq!(lifecycle["phase"], "Terminating", "{stored}");
    let out = grace(dir.path(), &["get", "cm"]);
    assert!(text(&out.stdout).contains("Terminating"));

    let out = grace(
        dir.path(),
        &["patch", "cm", "--remove-finalizer", "example.com/keep"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    wait_for("the object is gone", Duration::from_secs(5), || {
        get_json(dir.path(), "cm").is_none()
    });
}

#[test]
fn malformed_object_files_are_refused_naming_the_field_and_store_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(dir.path(), &[]);
    let revision = store_revision(dir.path());
    let cases = [
        (
            "truncated.json",
            "{\"metadata\": {\"name\": \"a\"",
            "line 1",
        ),
        ("not-json.json", "metadata: a", "line 1"),
        (
            "bad-name.json",
            r#"{"metadata":{"name":"Web_1"}}"#,
            "metadata.name",
        ),
        (
            "unknown-field.json",
            r#"{"metadata":{"name":"a"},"spec":{"nodename":"x"}}"#,
            "spec.nodename",
        ),
        (
            "negative-grace.json",
            r#"{"metadata":{"name":"a"},"spec":{"terminationGracePeriodSeconds":-5}}"#,
            "spec.terminationGracePeriodSeconds",
        ),
        (
            "grace-type.json",
            r#"{"metadata":{"name":"a"},"spec":{"terminationGracePeriodSeconds":"30"}}"#,
            "spec.terminationGracePeriodSeconds",
        ),
        (
            "empty-command.json",
            r#"{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","command":[]}]}}"#,
            "spec.containers[0].command",
        ),
        ("no-name.json", r#"{"metadata":{}}"#, "metadata"),
    ];
    for (file, contents, field) in cases {
        let path = write(dir.path(), file, contents);
        let out = grace(dir.path(), &["apply", "-f", path.to_str().expect("utf-8")]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{file}: {err}");
        assert!(err.contains(field), "{file}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(out.stdout.is_empty());
    }
    let out = grace(dir.path(), &["apply", "-f", "/nonexistent/object.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("cannot read"));
    assert_eq!(store_revision(dir.path()), revision, "nothing was stored");
}

#[test]
fn unknown_flags_and_bad_values_are_usage_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    for args in [
        &["delete", "x", "--gracePeriod", "3"][..],
        &["delete", "x", "--cascade", "sideways"],
        &["get", "-o", "yamlz"],
        &["delete", "x", "--grace-period", "soon"],
        &["apply"],
    ] {
        let out = grace(dir.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty());
    }
    // Nothing was created by refused commands.
    assert!(!dir.path().join("grace.redb").exists());
}

#[test]
fn a_locked_store_is_read_from_a_snapshot_and_refuses_a_second_agent() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("grace.redb");
    let holder = RedbStore::open(&db).expect("open");
    // `get` takes no lock: it reads a snapshot of the file.
    let out = grace(dir.path(), &["get"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    assert_eq!(
        text(&out.stderr).trim(),
        "No resources found",
        "as kubectl, on stderr"
    );
    let out = grace(dir.path(), &["agent"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("grace agent:"),
        "{}",
        text(&out.stderr)
    );
    assert!(!grace_agent::is_serving(dir.path()));
    use grace_std::Store;
    assert_eq!(
        holder.revision().expect("revision").get(),
        0,
        "store unchanged"
    );
}

#[test]
fn changes_without_an_agent_say_how_to_start_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = write(dir.path(), "a.json", r#"{"metadata":{"name":"a"}}"#);
    let out = grace(dir.path(), &["apply", "-f", file.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("grace agent --data-dir"));
    // Neither an agent nor a store: get, describe and logs say which data
    // dir they tried and how to start an agent (not "No resources found").
    for args in [&["get"][..], &["describe", "a"], &["logs", "a"]] {
        let out = grace(dir.path(), args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(out.stdout.is_empty());
        let said = text(&out.stderr);
        assert!(
            said.contains(&format!("no agent is serving {}", dir.path().display()))
                && said.contains("grace agent --data-dir"),
            "{args:?}: {said}"
        );
    }
}

#[test]
fn stopping_the_agent_leaves_its_workloads_running_and_a_restart_adopts_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let agent = Agent::start(dir.path(), &[]);
    let pid = dir.path().join("k.pid");
    apply(dir.path(), "k.json", &pod("k", 2, &pid, true, ""));
    wait_for("the workload starts", Duration::from_secs(5), || {
        alive(&pid)
    });
    let log = agent.stop();
    assert!(log.contains("1 workload(s) left running"), "{log}");
    // What is tested: nothing happens for a while (no readiness signal
    // can show that something does not happen).
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        alive(&pid),
        "SIGTERM to the agent leaves its workload alone"
    );
    // Read directly from the store, with no agent.
    assert!(get_json(dir.path(), "k").is_some(), "the object stays");

    // A restarted agent adopts the workload and carries out its deletion:
    // the workload ignores SIGTERM, so it goes at the end of its grace.
    let agent = Agent::start(dir.path(), &[]);
    let started = Instant::now();
    assert!(
        grace(dir.path(), &["delete", "k", "--wait=false"])
            .status
            .success()
    );
    // What is tested: nothing happens before the grace is spent.
    std::thread::sleep(Duration::from_millis(1_000));
    assert!(alive(&pid), "not killed before its grace is spent");
    assert!(get_json(dir.path(), "k").is_some());
    wait_for("the object is gone", Duration::from_secs(10), || {
        get_json(dir.path(), "k").is_none()
    });
    assert!(started.elapsed() >= Duration::from_secs(2));
    assert!(!alive(&pid), "the record went after its workload");
    let log = agent.stop();
    assert!(log.contains("adopted k container 0"), "{log}");
    assert!(log.contains("container 0: SIGKILL"), "{log}");
}

#[test]
fn r19_an_unscheduled_pod_is_removed_at_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(dir.path(), &[]);
    apply(
        dir.path(),
        "u.json",
        r#"{"metadata":{"name":"u"},"spec":{"terminationGracePeriodSeconds":30}}"#,
    );
    let out = grace(dir.path(), &["delete", "u"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        get_json(dir.path(), "u").is_none(),
        "gone with the delete itself"
    );
}

/// `/proc/PID/status`'s `PPid`, or `None` once the process is reaped.
fn parent_of(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|p| p.trim().parse().ok())
}

fn read_pid(file: &Path) -> u32 {
    std::fs::read_to_string(file)
        .expect("pid file")
        .trim()
        .parse()
        .expect("a pid")
}

/// A workload whose shell is gone leaves its orphans to the agent (a
/// subreaper), not to PID 1; once they end it reaps them at once: a
/// zombie still counts as a member of the workload's process group, and
/// one left to a PID 1 that reaps late (or never, when the agent is PID 1
/// of a container) would hold the deletion.
#[test]
fn orphans_of_a_workload_come_to_the_agent_and_are_reaped_so_the_deletion_ends() {
    let dir = tempfile::tempdir().expect("temp dir");
    let agent = Agent::start(dir.path(), &[]);
    let orphan = dir.path().join("orphan.pid");
    let ready = dir.path().join("ready");
    // The subshell starts a `sleep` (which ignores SIGTERM, as its shell
    // does) and exits at once: the `sleep` is an orphan in the workload's
    // group, and when SIGKILL ends it, nobody but its new parent reaps it.
    let command = format!(
        "trap '' TERM; (sleep 1000 & echo $! > {orphan}); touch {ready}; while :; do sleep 0.05; done",
        orphan = orphan.display(),
        ready = ready.display(),
    );
    let object = serde_json::json!({
        "metadata": {"name": "parent"},
        "spec": {"nodeName": "local", "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "app", "command": ["sh", "-c", command]}]},
    });
    apply(dir.path(), "parent.json", &object.to_string());
    wait_for("the orphan is made", Duration::from_secs(5), || {
        ready.exists()
    });
    let orphan_pid = read_pid(&orphan);
    assert_eq!(
        parent_of(orphan_pid),
        Some(agent.id()),
        "the orphan's parent is the agent"
    );

    let out = grace(dir.path(), &["delete", "parent", "--timeout=20s"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        parent_of(orphan_pid),
        None,
        "the orphan is reaped, not a zombie"
    );
}

/// A process that left its workload's group (`setsid`) and outlives its
/// parent also comes to the agent; whenever it ends, the agent reaps it
/// rather than keep a zombie for its whole life.
#[test]
fn an_orphan_that_left_its_group_is_reaped_by_the_agent_when_it_ends() {
    let dir = tempfile::tempdir().expect("temp dir");
    let agent = Agent::start(dir.path(), &[]);
    let escapee = dir.path().join("escapee.pid");
    let command = format!(
        "(setsid sh -c 'echo $$ > {escapee}; exec sleep 1000' &); while :; do sleep 0.05; done",
        escapee = escapee.display(),
    );
    let object = serde_json::json!({
        "metadata": {"name": "leaver"},
        "spec": {"nodeName": "local", "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "app", "command": ["sh", "-c", command]}]},
    });
    apply(dir.path(), "leaver.json", &object.to_string());
    wait_for("the escapee runs", Duration::from_secs(5), || {
        std::fs::read_to_string(&escapee).is_ok_and(|s| s.ends_with('\n'))
    });
    let pid = read_pid(&escapee);
    wait_for("the escapee runs `sleep`", Duration::from_secs(5), || {
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
    });
    assert_eq!(parent_of(pid), Some(agent.id()), "its parent is the agent");
    // With a cgroup each, the deletion kills it with its pod; with process
    // groups only, it escaped the deletion and is ended here.
    let out = grace(dir.path(), &["delete", "leaver", "--timeout=20s"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let _ = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
    wait_for("the escapee is reaped", Duration::from_secs(10), || {
        parent_of(pid).is_none()
    });
}

/// What each of the agent's descriptors points at.
fn fd_targets(pid: u32) -> Vec<String> {
    let mut targets: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the agent's fds")
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .map(|t| t.to_string_lossy().into_owned())
        .collect();
    targets.sort();
    targets
}

/// The agent's open descriptors that are pidfds, and all of them.
fn pidfds_and_fds(pid: u32) -> (usize, usize) {
    let fds: Vec<_> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the agent's fds")
        .flatten()
        .collect();
    let pidfds = fds
        .iter()
        .filter(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|target| target.to_string_lossy().contains("pidfd"))
        })
        .count();
    (pidfds, fds.len())
}

/// A subreaper learns of its own children's exits without a pidfd each:
/// a running workload costs the agent one descriptor (its log pipe), so
/// 10 000 fit a hard limit of 20 000. The exit status still reaches the
/// store.
#[test]
fn the_agent_holds_one_descriptor_per_running_workload_and_no_pidfd_for_its_children() {
    const N: usize = 12;
    let dir = tempfile::tempdir().expect("temp dir");
    let agent = Agent::start(dir.path(), &[]);
    let (_, idle) = pidfds_and_fds(agent.id());
    let pids: Vec<PathBuf> = (0..N)
        .map(|i| dir.path().join(format!("w{i}.pid")))
        .collect();
    for (i, pid) in pids.iter().enumerate() {
        apply(
            dir.path(),
            &format!("w{i}.json"),
            // Never: the exit below stays an exit (R92).
            &pod(&format!("w{i}"), 5, pid, false, "")
                .replace(r#""spec":{"#, r#""spec":{"restartPolicy":"Never","#),
        );
    }
    wait_for("every workload runs", Duration::from_secs(20), || {
        pids.iter()
            .all(|p| std::fs::read_to_string(p).is_ok_and(|s| s.ends_with('\n')))
    });
    // The connections of the applies above are closed by the agent a
    // moment after each client hangs up: the count settles, it is not
    // read at one instant.
    let mut loaded = usize::MAX;
    let settled = Instant::now() + Duration::from_secs(10);
    while loaded > idle + N + 2 && Instant::now() < settled {
        let (pidfds, fds) = pidfds_and_fds(agent.id());
        assert_eq!(pidfds, 0, "no pidfd for the agent's own children");
        loaded = fds;
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        loaded <= idle + N + 2,
        "about one descriptor per workload: {idle} idle, {loaded} with {N} workloads: {:?}",
        fd_targets(agent.id())
    );

    // An exit is still seen, with its status: 0 from its SIGTERM trap (an
    // exit without a status would read as 137, an Error).
    let first = read_pid(&pids[0]);
    let _ = Command::new("kill")
        .args(["-TERM", &first.to_string()])
        .status();
    wait_for("w0 is Completed", Duration::from_secs(10), || {
        let table = text(&grace(dir.path(), &["get", "w0", "--no-headers"]).stdout);
        cells(table.trim()).get(2) == Some(&"Completed")
    });
}

/// The cells of a table row (`get`'s columns never hold spaces).
fn cells(row: &str) -> Vec<&str> {
    row.split_whitespace().collect()
}

#[test]
fn a_pod_no_agent_has_started_is_pending_and_zero_of_one_ready() {
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(dir.path(), &[]);
    // Bound to a node whose agent never comes: nothing starts it.
    apply(
        dir.path(),
        "p.json",
        r#"{"metadata":{"name":"p"},"spec":{"nodeName":"elsewhere",
            "containers":[{"name":"app","command":["sleep","1000"]}]}}"#,
    );
    let out = grace(dir.path(), &["get", "--no-headers"]);
    let table = text(&out.stdout);
    let row = cells(table.trim());
    assert_eq!(row.get(..3), Some(&["p", "0/1", "Pending"][..]), "{table}");

    // Once its agent reports it running, it is ready.
    let pid = dir.path().join("r.pid");
    apply(dir.path(), "r.json", &pod("r", 30, &pid, false, ""));
    wait_for("r is ready", Duration::from_secs(10), || {
        let table = text(&grace(dir.path(), &["get", "r", "--no-headers"]).stdout);
        cells(table.trim()).get(..3) == Some(&["r", "1/1", "Running"][..])
    });
}

#[test]
fn get_watch_keeps_status_and_age_apart_when_a_status_is_wider_than_the_listing_s() {
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(dir.path(), &[]);
    // An empty listing: STATUS is as wide as its header, "Terminating" wider.
    let mut watch = Command::new(GRACE)
        .env_remove("GRACE_ETCD_ENDPOINTS")
        .args(["get", "-w", "--data-dir"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .expect("watch starts");
    let lines = Lines::of(watch.stdout.take().expect("stdout"));
    let header = lines.next();
    assert_eq!(
        cells(&header),
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    );
    let pid = dir.path().join("w.pid");
    apply(dir.path(), "w.json", &pod("w", 5, &pid, true, ""));
    lines.until(|l| l.contains("Running"));
    assert!(
        grace(dir.path(), &["delete", "w", "--wait=false"])
            .status
            .success()
    );
    let seen = lines.until(|l| l.contains("Terminating"));
    let _ = watch.kill();
    let _ = watch.wait();
    let terminating = seen.last().expect("a line");
    assert_eq!(cells(terminating).len(), 5, "{terminating:?}");
    assert_eq!(cells(terminating)[2], "Terminating", "{terminating:?}");
    assert!(
        terminating.contains("Terminating   "),
        "the tab-writer's padding: {terminating:?}"
    );
}

#[test]
fn patch_answers_in_kubectls_words_and_says_when_nothing_changed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(dir.path(), &[]);
    apply(
        dir.path(),
        "held.json",
        r#"{"kind":"Object","metadata":{"name":"held","finalizers":["example.com/keep"]}}"#,
    );
    let patch = |name: &str, finalizer: &str| {
        grace(
            dir.path(),
            &["patch", name, "--remove-finalizer", finalizer],
        )
    };
    let out = patch("nope", "example.com/keep");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr).trim(),
        "grace patch: Error from server (NotFound): pods \"nope\" not found"
    );
    let out = patch("held", "example.com/other");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "object/held patched (no change)\n");
    let out = patch("held", "example.com/keep");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "object/held patched\n");
    let finalizers =
        get_json(dir.path(), "held").expect("still there")["object"]["meta"]["finalizers"].clone();
    assert_eq!(finalizers, serde_json::json!([]), "the finalizer is gone");
}

#[test]
fn wait_for_create_a_condition_and_a_jsonpath_as_kubectl_waits() {
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(dir.path(), &[]);
    let d = dir.path().to_path_buf();
    // --for=create, started before the pod exists.
    let creating = std::thread::spawn(move || {
        grace(&d, &["wait", "--for=create", "pod/late", "--timeout=30s"])
    });
    // The wait polls the store: give it a moment to be waiting.
    std::thread::sleep(Duration::from_millis(300));
    let pid = dir.path().join("late.pid");
    apply(dir.path(), "late.json", &pod("late", 1, &pid, false, ""));
    let out = creating.join().expect("the wait ends");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "pod/late condition met\n");

    let wait = |condition: &str, timeout: &str| {
        grace(
            dir.path(),
            &[
                "wait",
                &format!("--for={condition}"),
                "pod/late",
                &format!("--timeout={timeout}"),
            ],
        )
    };
    for condition in [
        "condition=Ready",
        "condition=containersready=true",
        "jsonpath={.status.phase}=Running",
        "jsonpath={.status.startTime}",
    ] {
        let out = wait(condition, "30s");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{condition}: {}",
            text(&out.stderr)
        );
        assert_eq!(text(&out.stdout), "pod/late condition met\n", "{condition}");
    }
    let out = wait("condition=Ready=False", "1s");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("timed out waiting for the condition on pods/late"),
        "{}",
        text(&out.stderr)
    );
    let out = grace(
        dir.path(),
        &["wait", "--for=condition=Ready", "pod/nope", "--timeout=1s"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("pods \"nope\" not found"),
        "{}",
        text(&out.stderr)
    );
    let out = grace(dir.path(), &["wait", "--for=ready", "pod/late"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}
