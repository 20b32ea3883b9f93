//! A node agent on etcd run from library code ([`NodeAgent::start`]),
//! inside this test's process: it registers its node, runs a real `sleep`
//! bound to it, deletes it the graceful way (R1: the stop signal first)
//! when the store says so, and once shut down its node is no longer alive
//! (its lease revoked, its heartbeat stopped).
//!
//! Needs a running etcd: `GRACE_ETCD_ENDPOINTS=http://127.0.0.1:23790`
//! (`.ci/etcd` starts one). The test keeps its keys under a prefix of its
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

use std::time::{Duration, Instant};

use grace_agent::container_logs;
use grace_agent::node_agent::{NodeAgent, SharedAgentOptions};
use grace_core::{DeleteOptions, Record};
use grace_std::clock::{Clock, SystemClock};
use grace_std::process::logs::LogLimits;
use grace_std::runtime::Recovery;
use grace_std::store::{
    ContainerStatus, EtcdOptions, EtcdStore, Store, StoredContainer, StoredObject,
};

const NODE: &str = "node-a";

/// Waits until `done`, polling; fails the test after `timeout`.
fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The pids of the processes whose command line is exactly `args`.
fn processes(args: &[&str]) -> Vec<u32> {
    let wanted: Vec<u8> = args
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted))
        .collect()
}

/// Whether `pid` is gone (or a zombie not reaped yet).
fn gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z "))
}

fn alive(store: &EtcdStore) -> bool {
    store
        .alive_nodes()
        .expect("etcd readable")
        .iter()
        .any(|n| n == NODE)
}

#[test]
#[ignore = "needs etcd: set GRACE_ETCD_ENDPOINTS (e.g. http://127.0.0.1:23790)"]
fn r1_a_node_agent_run_from_library_code_runs_and_deletes_a_real_sleep() {
    let endpoints = std::env::var("GRACE_ETCD_ENDPOINTS").expect("GRACE_ETCD_ENDPOINTS is set");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let store = EtcdStore::connect_with(EtcdOptions {
        prefix: format!("/grace-test/node-agent-lib-{}-{nanos}/", std::process::id()),
        ..EtcdOptions::new([endpoints])
    })
    .expect("etcd reachable");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let options = SharedAgentOptions {
        node: NODE.to_owned(),
        recovery: Recovery::HonourOriginalDeadline,
        lease_ttl: Duration::from_secs(2),
        state_dir: dir.path().join(format!("workloads-{NODE}")),
        logs: container_logs(dir.path(), Some(NODE), LogLimits::default()),
        // The test harness waits for children of its own.
        subreaper: false,
    };
    let agent = NodeAgent::start(store.clone(), options).expect("started");
    assert_eq!(agent.node(), NODE);
    assert!(alive(&store), "its node is registered once start returns");

    // A command line no other process has.
    let seconds = format!("602.{}", std::process::id());
    let command = ["sleep", seconds.as_str()];
    let mut pod = StoredObject::on_node(
        Record::builder("")
            .grace_period_seconds(30)
            .build()
            .expect("a record"),
        NODE,
    );
    pod.containers
        .push(StoredContainer::new("app", command.iter().copied()));
    grace_std::api_server::create(&store, "web", pod).expect("created");
    wait_for("web running", Duration::from_secs(20), || {
        store
            .get("web")
            .expect("readable")
            .is_some_and(|(o, _)| matches!(o.status.as_slice(), [ContainerStatus::Running { .. }]))
    });
    let running = processes(&command);
    assert_eq!(running.len(), 1, "one real `sleep` runs: {running:?}");

    let now = SystemClock::new().now();
    grace_std::api_server::delete(&store, now, "web", &DeleteOptions::with_grace(30))
        .expect("deleted");
    wait_for("web removed", Duration::from_secs(20), || {
        store.get("web").expect("readable").is_none()
    });
    assert!(gone(running[0]), "the `sleep` is gone once its pod is");

    agent.shutdown();
    agent.join().expect("stopped as asked");
    assert!(
        !alive(&store),
        "a stopped agent's node is lost at once: its lease is revoked"
    );
}
