//! Agents on several nodes sharing one etcd, as a user runs them: real
//! `grace agent --etcd` processes for two node names, real workloads, and
//! the CLI deciding requests against etcd. A node is lost by freezing its
//! agent (SIGSTOP: its lease expires, as on a partition) and returns with
//! SIGCONT.
//!
//! Needs a running etcd: `GRACE_ETCD_ENDPOINTS=http://127.0.0.1:23790`
//! (`.ci/etcd` starts one). Each test keeps its keys under a prefix of its
//! own.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]
#![cfg(feature = "etcd")]

#[path = "../../tests/common/mod.rs"]
mod common;

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Lines, alive, wait_for};
use grace_std::store::{EtcdOptions, EtcdStore, Store};

const GRACE: &str = env!("CARGO_BIN_EXE_grace");
const IGNORED: &str = "needs etcd: set GRACE_ETCD_ENDPOINTS (e.g. http://127.0.0.1:23790)";
/// The agents' lease TTL, in seconds: a frozen agent's node is lost after it.
const TTL: u64 = 2;

fn endpoints() -> String {
    std::env::var("GRACE_ETCD_ENDPOINTS").expect("GRACE_ETCD_ENDPOINTS is set")
}

/// One test's store: its own key prefix and a temp dir for files.
struct Cluster {
    prefix: String,
    dir: tempfile::TempDir,
}

impl Cluster {
    fn new(test: &str) -> Cluster {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Cluster {
            prefix: format!("/grace-test/{test}-{}-{nanos}/", std::process::id()),
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn store(&self) -> EtcdStore {
        EtcdStore::connect_with(EtcdOptions {
            prefix: self.prefix.clone(),
            ..EtcdOptions::new([endpoints()])
        })
        .expect("etcd reachable")
    }

    fn grace(&self, args: &[&str]) -> Output {
        Command::new(GRACE)
            .args(args)
            .args(["--etcd", &endpoints(), "--etcd-prefix", &self.prefix])
            .output()
            .expect("grace runs")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.grace(args);
        assert!(
            out.status.success(),
            "grace {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn agent(&self, node: &str) -> Agent {
        let log = self.dir.path().join(format!("{node}.log"));
        let child = Command::new(GRACE)
            .args(["agent", "--node", node, "--lease-ttl", &TTL.to_string()])
            .args(["--etcd", &endpoints(), "--etcd-prefix", &self.prefix])
            .arg("--data-dir")
            .arg(self.dir.path())
            .env_remove("RUST_LOG")
            .stdout(std::fs::File::create(&log).expect("log file"))
            .stderr(Stdio::piped())
            .spawn()
            .expect("agent starts");
        let store = self.store();
        wait_for(
            &format!("{node} registered"),
            Duration::from_secs(10),
            || {
                store
                    .alive_nodes()
                    .expect("readable")
                    .iter()
                    .any(|n| n == node)
            },
        );
        Agent { child, log }
    }

    fn pid_file(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.pid"))
    }

    /// Applies a pod on `node` whose workload ignores SIGTERM (so only
    /// SIGKILL ends it) and writes its pid; waits until it runs.
    fn pod(&self, name: &str, node: &str, grace: i64) {
        let pid = self.pid_file(name);
        let file = self.dir.path().join(format!("{name}.json"));
        std::fs::write(
            &file,
            format!(
                r#"{{"metadata":{{"name":"{name}"}},
                    "spec":{{"nodeName":"{node}","terminationGracePeriodSeconds":{grace},
                            "containers":[{{"name":"app","command":["sh","-c","trap '' TERM; echo $$ > {pid}; while :; do sleep 0.05; done"]}}]}}}}"#,
                pid = pid.display()
            ),
        )
        .expect("file written");
        let _ = self.ok(&["apply", "-f", file.to_str().expect("utf-8")]);
        wait_for(&format!("{name} running"), Duration::from_secs(10), || {
            alive(&pid)
        });
    }

    fn status(&self, name: &str) -> Option<String> {
        let out = self.grace(&["get", name]);
        if !out.status.success() {
            return None;
        }
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines()
            .nth(1)
            // NAME READY STATUS AGE
            .and_then(|row| row.split_whitespace().nth(2))
            .map(str::to_owned)
    }
}

/// An agent process; stopped when dropped (after a SIGCONT, should it be
/// frozen), its workloads left to the [`Cluster`]'s clean-up.
struct Agent {
    child: Child,
    log: PathBuf,
}

impl Agent {
    fn signal(&self, signal: &str) {
        let _ = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status();
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for the agent to exit by itself; its status and stderr.
    fn exit(mut self, limit: Duration) -> (std::process::ExitStatus, String) {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("waitable") {
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                return (status, err);
            }
            assert!(
                Instant::now() < deadline,
                "agent exits within {limit:?}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM (the agent leaves its workloads running) and a clean exit.
    fn stop(self) {
        self.signal("-TERM");
        let (status, err) = self.exit(Duration::from_secs(10));
        assert!(status.success(), "agent exit {status:?}: {err}");
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.signal("-CONT");
        self.signal("-TERM");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Cluster {
    /// The workloads outlive their agents: the test is done with them.
    fn drop(&mut self) {
        let Ok(entries) = std::fs::read_dir(self.dir.path()) else {
            return;
        };
        for entry in entries.flatten() {
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with("workloads-")
            {
                common::kill_left_workloads(&entry.path());
            }
        }
    }
}

fn lost(store: &EtcdStore, node: &str) {
    wait_for(
        &format!("{node}'s lease expired"),
        Duration::from_secs(TTL + 5),
        || {
            !store
                .alive_nodes()
                .expect("readable")
                .iter()
                .any(|n| n == node)
        },
    );
}

#[test]
#[ignore = "needs etcd: set GRACE_ETCD_ENDPOINTS (e.g. http://127.0.0.1:23790)"]
fn etcd_r80_lost_node_waits_while_the_other_finishes_then_d4_force_delete_and_its_return() {
    let _ = IGNORED;
    let c = Cluster::new("lost");
    let store = c.store();
    let a = c.agent("node-a");
    let b = c.agent("node-b");
    c.pod("web-a", "node-a", 30);
    c.pod("web-b", "node-b", 30);
    c.pod("db-b", "node-b", 30);

    // node-b is cut off: its lease runs out, nobody acts for it (R80).
    b.signal("-STOP");
    lost(&store, "node-b");
    let asked = Instant::now();
    let _ = c.ok(&["delete", "--wait=false", "web-a", "--grace-period", "2"]);
    let _ = c.ok(&["delete", "--wait=false", "web-b", "--grace-period", "2"]);
    let _ = c.ok(&["delete", "--wait=false", "db-b", "--grace-period", "2"]);
    // node-a's agent: SIGTERM ignored, SIGKILL after the 2 s, record gone.
    wait_for("web-a deleted", Duration::from_secs(10), || {
        c.status("web-a").is_none()
    });
    assert!(
        asked.elapsed() >= Duration::from_secs(2),
        "not before its grace"
    );
    assert!(!alive(&c.pid_file("web-a")));
    // node-b's objects stay Terminating, their workloads untouched: what
    // is tested is that nothing happens for a while.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(c.status("web-b").as_deref(), Some("Terminating"));
    assert_eq!(c.status("db-b").as_deref(), Some("Terminating"));
    assert!(alive(&c.pid_file("web-b")) && alive(&c.pid_file("db-b")));

    // D4: a force delete removes the record at once, flagged.
    let out = c.grace(&[
        "delete",
        "--wait=false",
        "web-b",
        "--force",
        "--grace-period",
        "0",
        "-v",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "pod \"web-b\" force deleted\n"
    );
    let detail = String::from_utf8_lossy(&out.stderr);
    assert!(detail.contains("may still be running"), "{detail}");
    assert_eq!(c.status("web-b"), None);
    assert!(
        alive(&c.pid_file("web-b")),
        "nothing on node-b has acted yet"
    );

    // node-b returns: it registers again, stops the force-deleted
    // workload, and carries out the deletion accepted while it was away.
    b.signal("-CONT");
    wait_for("node-b registered again", Duration::from_secs(10), || {
        store
            .alive_nodes()
            .expect("readable")
            .iter()
            .any(|n| n == "node-b")
    });
    wait_for("web-b's workload stopped", Duration::from_secs(10), || {
        !alive(&c.pid_file("web-b"))
    });
    wait_for("db-b deleted", Duration::from_secs(10), || {
        c.status("db-b").is_none()
    });
    assert!(!alive(&c.pid_file("db-b")));
    let log = b.log();
    assert!(log.contains("SIGKILL"), "{log}");
    a.stop();
    b.stop();
}

#[test]
#[ignore = "needs etcd: set GRACE_ETCD_ENDPOINTS (e.g. http://127.0.0.1:23790)"]
fn etcd_d7_fenced_node_objects_are_removed_and_its_returning_agent_does_not_act() {
    let c = Cluster::new("fence");
    let store = c.store();
    let a = c.agent("node-a");
    let b = c.agent("node-b");
    c.pod("web-a", "node-a", 30);
    c.pod("web-b", "node-b", 30);
    let _ = c.ok(&["delete", "--wait=false", "web-b", "--grace-period", "20"]);

    // Refused while node-b's agent is alive.
    let out = c.grace(&["fence", "node-b"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("alive"));

    b.signal("-STOP");
    lost(&store, "node-b");
    let out = c.ok(&["fence", "node-b"]);
    assert!(out.contains("web-b"), "{out}");
    assert_eq!(c.status("web-b"), None, "R82: deleted with grace 0");
    assert_eq!(c.status("web-a").as_deref(), Some("Running"));
    let revision = store.list().expect("readable").revision;

    // node-b comes back: it finds its epoch moved, writes nothing, stops
    // the processes it still ran and exits with an error.
    b.signal("-CONT");
    let (status, err) = b.exit(Duration::from_secs(15));
    assert!(!status.success());
    assert!(err.contains("fenced"), "{err}");
    assert!(!alive(&c.pid_file("web-b")));
    assert_eq!(
        store.list().expect("readable").revision,
        revision,
        "the fenced agent wrote nothing"
    );
    assert!(alive(&c.pid_file("web-a")));
    a.stop();
}

#[test]
#[ignore = "needs etcd: set GRACE_ETCD_ENDPOINTS (e.g. http://127.0.0.1:23790)"]
fn etcd_restarted_agent_adopts_its_workload_and_finishes_its_deletion_on_time() {
    let c = Cluster::new("restart");
    let a = c.agent("node-a");
    c.pod("web-a", "node-a", 30);
    let asked = Instant::now();
    let _ = c.ok(&["delete", "--wait=false", "web-a", "--grace-period", "4"]);
    wait_for("web-a terminating", Duration::from_secs(5), || {
        c.status("web-a").as_deref() == Some("Terminating")
    });
    // The agent stops in the middle of the grace; its workload runs on.
    a.stop();
    assert!(alive(&c.pid_file("web-a")), "stopping the agent leaves it");
    assert_eq!(c.status("web-a").as_deref(), Some("Terminating"));
    // Restarted, it adopts the workload and SIGKILLs it when the grace
    // is spent (it ignores SIGTERM), not before.
    let again = c.agent("node-a");
    wait_for("web-a deleted", Duration::from_secs(15), || {
        c.status("web-a").is_none()
    });
    assert!(
        asked.elapsed() >= Duration::from_secs(4),
        "not before its grace"
    );
    assert!(!alive(&c.pid_file("web-a")));
    assert!(
        again.log().contains("adopted web-a container 0"),
        "{}",
        again.log()
    );
    again.stop();
}

#[test]
#[ignore = "needs etcd: set GRACE_ETCD_ENDPOINTS (e.g. http://127.0.0.1:23790)"]
fn etcd_get_w_follows_a_deletion_to_its_end() {
    let c = Cluster::new("watch");
    let a = c.agent("node-a");
    c.pod("web-w", "node-a", 2);
    let mut watch = Command::new(GRACE)
        .args(["get", "web-w", "-w"])
        .args(["--etcd", &endpoints(), "--etcd-prefix", &c.prefix])
        .stdout(Stdio::piped())
        .spawn()
        .expect("watch starts");
    let lines = Lines::of(watch.stdout.take().expect("stdout"));
    assert!(lines.next().starts_with("NAME"));
    let first = lines.next();
    assert!(
        first.starts_with("web-w ") && first.contains("Running"),
        "{first}"
    );

    let _ = c.ok(&["delete", "--wait=false", "web-w"]);
    let seen = lines.until(|l| l.contains("Deleted"));
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(seen.iter().any(|l| l.contains("Terminating")), "{seen:?}");
    assert!(!alive(&c.pid_file("web-w")), "killed before the removal");
    for pair in seen.windows(2) {
        assert_ne!(pair[0], pair[1], "rows that say nothing new: {seen:?}");
    }
    a.stop();
}

#[test]
#[ignore = "needs etcd: set GRACE_ETCD_ENDPOINTS (e.g. http://127.0.0.1:23790)"]
fn etcd_r37_cascade_orphan_finishes_and_the_node_agent_keeps_the_logs() {
    let cluster = Cluster::new("cascade");
    let _a = cluster.agent("node-a");
    cluster.pod("web", "node-a", 1);
    // The workload's output, kept by node-a's agent on this machine.
    wait_for("output kept", Duration::from_secs(5), || {
        cluster
            .grace(&[
                "logs",
                "web",
                "--data-dir",
                &cluster.dir.path().display().to_string(),
            ])
            .status
            .success()
    });
    // --wait=false: the store is read below while the deletion goes on.
    let out = cluster.grace(&["delete", "web", "--cascade", "orphan", "--wait=false", "-v"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let detail = String::from_utf8_lossy(&out.stderr);
    assert!(detail.contains("held by finalizers orphan"), "{detail}");
    // The CLI ran the garbage collector's step: the finalizer is gone at
    // once, and the deletion finishes on its own.
    let (object, _) = cluster
        .store()
        .get("web")
        .expect("readable")
        .expect("still terminating");
    assert!(object.record.finalizers.is_empty(), "{:?}", object.record);
    wait_for("web removed", Duration::from_secs(10), || {
        cluster.status("web").is_none()
    });
    assert!(!alive(&cluster.pid_file("web")));
}

/// Pods that name no node are bound by the agents (least loaded first,
/// a compare-and-swap on the revision): each exactly once, each run once,
/// and both agents get some.
#[test]
#[ignore = "needs etcd: set GRACE_ETCD_ENDPOINTS (e.g. http://127.0.0.1:23790)"]
fn etcd_unbound_pods_are_each_bound_once_by_the_least_loaded_agent_and_run() {
    const N: usize = 8;
    let cluster = Cluster::new("bind");
    let a = cluster.agent("node-a");
    let b = cluster.agent("node-b");
    for i in 0..N {
        let name = format!("u{i}");
        let pid = cluster.pid_file(&name);
        let file = cluster.dir.path().join(format!("{name}.json"));
        // `echo $$ >>`: a second start would leave a second line.
        std::fs::write(
            &file,
            format!(
                r#"{{"metadata":{{"name":"{name}"}},
                    "spec":{{"terminationGracePeriodSeconds":1,
                            "containers":[{{"name":"app","command":["sh","-c","echo $$ >> {pid}; while :; do sleep 0.05; done"]}}]}}}}"#,
                pid = pid.display()
            ),
        )
        .expect("file written");
        let _ = cluster.ok(&["apply", "-f", file.to_str().expect("utf-8")]);
    }
    wait_for("every pod runs", Duration::from_secs(20), || {
        (0..N).all(|i| alive(&cluster.pid_file(&format!("u{i}"))))
    });
    let store = cluster.store();
    let mut on = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..N {
        let name = format!("u{i}");
        let (object, _) = store.get(&name).expect("readable").expect("stored");
        let node = object.node.expect("bound");
        *on.entry(node).or_default() += 1;
        let starts = std::fs::read_to_string(cluster.pid_file(&name)).expect("pid file");
        assert_eq!(starts.lines().count(), 1, "{name} started once");
    }
    assert_eq!(on.values().sum::<usize>(), N, "{on:?}");
    assert!(
        on.get("node-a").is_some_and(|&n| n > 0) && on.get("node-b").is_some_and(|&n| n > 0),
        "both agents take some: {on:?}"
    );
    // `get -o wide` shows where each runs.
    let wide = cluster.ok(&["get", "-o", "wide"]);
    assert!(wide.contains("node-a") && wide.contains("node-b"), "{wide}");
    for i in 0..N {
        let _ = cluster.ok(&["delete", &format!("u{i}"), "--wait=false"]);
    }
    wait_for("all gone", Duration::from_secs(20), || {
        (0..N).all(|i| !alive(&cluster.pid_file(&format!("u{i}"))))
    });
    a.stop();
    b.stop();
}

/// A pod on `node` (`None`: no nodeName) whose workload exits on SIGTERM
/// (or ignores it) and writes its pid, with these owner references (JSON).
fn owned_pod(cluster: &Cluster, name: &str, node: Option<&str>, ignore_term: bool, owners: &str) {
    let pid = cluster.pid_file(name);
    let file = cluster.dir.path().join(format!("{name}.json"));
    let node = node.map_or(String::new(), |n| format!(r#""nodeName":"{n}","#));
    let trap = if ignore_term { "''" } else { "'exit 0'" };
    // One that ignores SIGTERM lingers for its grace.
    let grace = if ignore_term { 5 } else { 2 };
    std::fs::write(
        &file,
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","ownerReferences":[{owners}]}},
                "spec":{{{node}"terminationGracePeriodSeconds":{grace},
                        "containers":[{{"name":"app","command":["sh","-c","echo $$$$ > {pid}; trap {trap} TERM; while :; do sleep 0.05; done"]}}]}}}}"#,
            pid = pid.display()
        ),
    )
    .expect("file written");
    let _ = cluster.ok(&["apply", "-f", file.to_str().expect("utf-8")]);
    wait_for(&format!("{name} running"), Duration::from_secs(15), || {
        alive(&pid)
    });
}

/// An owner on node-a, a blocking dependent on node-b that ignores
/// SIGTERM and an unbound one; returns the owner's uid.
fn owner_across_nodes(cluster: &Cluster) -> String {
    owned_pod(cluster, "owner", Some("node-a"), false, "");
    let pod: serde_json::Value =
        serde_json::from_str(&cluster.ok(&["get", "owner", "-o", "json"])).expect("JSON");
    let uid = pod["metadata"]["uid"].as_str().expect("uid").to_owned();
    let reference = |block: bool| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","name":"owner","uid":"{uid}","blockOwnerDeletion":{block}}}"#
        )
    };
    owned_pod(cluster, "d1", Some("node-b"), true, &reference(true));
    owned_pod(cluster, "d2", None, false, &reference(false));
    uid
}

#[test]
#[ignore = "needs etcd: set GRACE_ETCD_ENDPOINTS (e.g. http://127.0.0.1:23790)"]
fn etcd_r38_background_delete_of_an_owner_deletes_its_dependents_on_other_nodes() {
    let cluster = Cluster::new("owners-bg");
    let a = cluster.agent("node-a");
    let b = cluster.agent("node-b");
    owner_across_nodes(&cluster);
    let _ = cluster.ok(&["delete", "owner", "--wait=false"]);
    wait_for("the dependents are gone", Duration::from_secs(20), || {
        cluster.status("d1").is_none() && cluster.status("d2").is_none()
    });
    assert!(cluster.status("owner").is_none());
    assert!(!alive(&cluster.pid_file("d1")) && !alive(&cluster.pid_file("d2")));
    a.stop();
    b.stop();
}

#[test]
#[ignore = "needs etcd: set GRACE_ETCD_ENDPOINTS (e.g. http://127.0.0.1:23790)"]
fn etcd_r38_foreground_delete_keeps_the_owner_until_its_blocking_dependent_on_another_node_is_gone()
{
    let cluster = Cluster::new("owners-fg");
    let a = cluster.agent("node-a");
    let b = cluster.agent("node-b");
    owner_across_nodes(&cluster);
    let _ = cluster.ok(&["delete", "owner", "--cascade=foreground", "--wait=false"]);
    wait_for(
        "the owner's workload stopped",
        Duration::from_secs(10),
        || !alive(&cluster.pid_file("owner")),
    );
    wait_for("d1 is being deleted", Duration::from_secs(10), || {
        cluster.status("d1").as_deref() == Some("Terminating")
    });
    // d1 ignores SIGTERM for its grace (5 s): the owner waits for it.
    assert!(alive(&cluster.pid_file("d1")), "d1 still runs");
    assert_eq!(cluster.status("owner").as_deref(), Some("Terminating"));
    wait_for("d1 and d2 are gone", Duration::from_secs(20), || {
        cluster.status("d1").is_none() && cluster.status("d2").is_none()
    });
    wait_for("then the owner", Duration::from_secs(10), || {
        cluster.status("owner").is_none()
    });
    a.stop();
    b.stop();
}

#[test]
#[ignore = "needs etcd: set GRACE_ETCD_ENDPOINTS (e.g. http://127.0.0.1:23790)"]
fn etcd_r37_orphan_delete_of_an_owner_leaves_its_dependents_without_the_reference_for_good() {
    let cluster = Cluster::new("owners-orphan");
    let a = cluster.agent("node-a");
    let b = cluster.agent("node-b");
    owner_across_nodes(&cluster);
    let _ = cluster.ok(&["delete", "owner", "--cascade=orphan"]);
    assert!(cluster.status("owner").is_none());
    let store = cluster.store();
    let references = |name: &str| {
        store
            .get(name)
            .expect("readable")
            .map(|(o, _)| (o.owners.len(), o.record.deletion_timestamp.is_some()))
    };
    assert_eq!(references("d1"), Some((0, false)));
    assert_eq!(references("d2"), Some((0, false)));
    assert!(alive(&cluster.pid_file("d1")) && alive(&cluster.pid_file("d2")));
    // d1's agent writes d1 again (its exit): the reference stays gone,
    // and d1 stays (no owner to go with).
    let pid = std::fs::read_to_string(cluster.pid_file("d1")).expect("pid");
    let _ = Command::new("kill").args(["-KILL", pid.trim()]).status();
    wait_for("d1's exit is written", Duration::from_secs(10), || {
        store.get("d1").expect("readable").is_some_and(|(o, _)| {
            !o.status.is_empty()
                && o.status
                    .iter()
                    .all(|s| !matches!(s, grace_std::store::ContainerStatus::Running { .. }))
        })
    });
    assert_eq!(references("d1"), Some((0, false)));
    for name in ["d1", "d2"] {
        let _ = cluster.ok(&["delete", name, "--grace-period=0", "--force"]);
    }
    a.stop();
    b.stop();
}
