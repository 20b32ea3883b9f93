//! How many connections the agent's Kubernetes API serves: its own count,
//! apart from the socket's, so that a hundred watches fit; and each user
//! other than the agent's own holds at most its share. A real agent,
//! HTTPS clients with the kubeconfigs' certificates.
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
use std::process::Stdio;
use std::time::Duration;

use support::https::{Endpoint, Https, Watch};
use support::kube_api::Api;
use support::pids::PidsLimit;
use support::{grace, text};

/// One pod, applied through the socket.
fn one_pod(api: &Api) {
    let path = api.path().join("web.yaml");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: main\n    image: busybox\n    command: [\"sleep\", \"300\"]\n",
    )
    .unwrap();
    let out = grace(api.path(), &["apply", "-f", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// A kubeconfig for `user` in `group`, from `grace kubeconfig`.
fn kubeconfig_for(api: &Api, user: &str, group: &str) -> Endpoint {
    Endpoint::from_kubeconfig(&api.user_kubeconfig(user, group))
        .expect("a kubeconfig with a server")
}

fn endpoint(kubeconfig: &Path) -> Endpoint {
    Endpoint::from_kubeconfig(kubeconfig).expect("the agent's kubeconfig")
}

/// A hundred watches at once (more than the socket's 64 connections):
/// every one is served, and every one sees the same change. The socket
/// serves on beside them.
#[test]
fn a_hundred_api_watches_are_served_at_once_and_each_sees_the_change() {
    let api = Api::start(&[]);
    one_pod(&api);
    let owner = endpoint(&api.kubeconfig);
    let mut watches: Vec<Watch> = (0..100)
        .map(|i| {
            Watch::open(&owner, 1)
                .unwrap_or_else(|status| panic!("watch {i}: {status}\n{}", api.agent.log()))
        })
        .collect();
    assert!(watches.len() > grace_agent::MAX_CONNECTIONS);

    let out = grace(api.path(), &["get", "pods", "-o", "name"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "pod/web");

    let mut https = Https::connect(&owner);
    let (status, body) = https.request("DELETE", "/api/v1/namespaces/default/pods/web");
    assert_eq!(status, 200, "{}", text(&body));
    for (i, watch) in watches.iter_mut().enumerate() {
        let event = watch
            .next_event()
            .unwrap_or_else(|| panic!("watch {i} ended"));
        assert!(
            event.contains("\"MODIFIED\"") && event.contains("deletionTimestamp"),
            "watch {i}: {event}"
        );
    }
}

/// A user other than the agent's own holds `USER_CONNECTIONS` (8)
/// connections of the API: the ninth is answered 429 TooManyRequests,
/// and one closed gives its place back. The agent's own user is not held
/// to that share.
#[test]
fn another_user_holds_eight_api_connections_and_the_ninth_gets_429() {
    let api = Api::start(&["--allow-group", "nogroup:ro"]);
    one_pod(&api);
    let alice = kubeconfig_for(&api, "alice", "nogroup");
    let mut held: Vec<Watch> = (0..grace_agent::USER_CONNECTIONS)
        .map(|i| Watch::open(&alice, 1).unwrap_or_else(|status| panic!("watch {i}: {status}")))
        .collect();

    let mut ninth = Https::connect(&alice);
    let (status, body) = ninth.request("GET", "/api/v1/namespaces/default/pods");
    assert_eq!(status, 429, "{}", text(&body));
    let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status["reason"], "TooManyRequests", "{status}");
    assert_eq!(
        status["message"], "too many connections for user \"alice\"",
        "{status}"
    );
    drop(ninth);

    // The agent's own user is not held to alice's share.
    let owner = endpoint(&api.kubeconfig);
    let (status, _) = Https::connect(&owner).request("GET", "/api/v1/namespaces/default/pods");
    assert_eq!(status, 200);

    // A closed connection gives its place back (the server sees the
    // hang-up, then counts it out).
    drop(held.pop());
    support::common::wait_for(
        "alice's closed watch to be counted out",
        std::time::Duration::from_secs(10),
        || {
            let (status, _) =
                Https::connect(&alice).request("GET", "/api/v1/namespaces/default/pods");
            status == 200
        },
    );
}

#[test]
fn a_watch_the_agent_has_no_thread_for_is_refused_with_503_and_served_once_it_has() {
    let api = Api::start(&[]);
    api.ok(&["get", "pods"]);
    let name = format!("grace-test-k8s-threads-{}", std::process::id());
    let Some(limit) = PidsLimit::around(api.agent.id(), &name) else {
        eprintln!("skipped: no pids cgroup can be made here (needs root and a pids controller)");
        return;
    };
    limit.full();
    let out = api.kubectl(&["get", "pods", "-w", "--request-timeout=20s"]);
    assert!(!out.status.success(), "refused: {out:?}");
    let err = text(&out.stderr);
    assert!(
        err.contains("(ServiceUnavailable)") && err.contains("out of threads"),
        "{err}"
    );
    // What needs no thread of its own is still served.
    api.ok(&["get", "pods"]);

    limit.lift();
    let mut watch = api
        .command(&["get", "pods", "-w"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl runs");
    std::thread::sleep(Duration::from_secs(3));
    let ended = watch.try_wait().expect("waitable");
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(
        ended.is_none(),
        "the watch is served and goes on: {ended:?}"
    );
    drop(limit);
}
