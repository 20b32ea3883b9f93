//! kube-rs against a real grace agent: `grace agent --k8s-api` on a port
//! of its own, a kube `Client` from the kubeconfig it writes
//! (`Config::from_custom_kubeconfig`, TLS with its client certificate),
//! real workloads.
//!
//! - kube-runtime's `Controller` with kube's `finalizer()` helper (the
//!   machinery `reconcile` uses for Workers) over Pods: the agent serves
//!   Pods only, no custom resource, so the Worker itself needs a cluster
//!   (tests/fake_api.rs stands in for one).
//! - `Api<Pod>`: a delete with `DeleteParams` watched to its end with
//!   `kube::runtime::watcher`, to grace's second (R63); `background()`,
//!   `foreground()` and `preconditions`.
//!
//! The agent is the `grace` binary of the main workspace: `GRACE_BIN`, or
//! `../../target/debug/grace` (`cargo build -p grace-cli` at the root).
//! Without it the tests are skipped, except under `CI=true`, where they
//! fail.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::config::{Config, KubeConfigOptions, Kubeconfig};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};

/// The `grace` binary, or `None` (the test is skipped) when it is not
/// built, outside CI.
fn grace_bin() -> Option<PathBuf> {
    let path = std::env::var_os("GRACE_BIN").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/grace"),
        PathBuf::from,
    );
    if path.is_file() {
        return Some(path);
    }
    let message = format!(
        "no grace binary at {} (set GRACE_BIN, or `cargo build -p grace-cli` at the root)",
        path.display()
    );
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{message}");
    eprintln!("skipped: {message}");
    None
}

/// A `grace agent --k8s-api 127.0.0.1:0` on a data directory of its own,
/// stopped when dropped, and the workloads the test started killed with
/// it (a workload outlives its agent).
struct Agent {
    child: Child,
    dir: PathBuf,
    pids: Mutex<Vec<PathBuf>>,
}

impl Agent {
    /// Starts the agent; ready once its kubeconfig is written (after the
    /// API's port is bound) and reads as one.
    fn start(grace: &Path, name: &str) -> Agent {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("grace-agent-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let log = std::fs::File::create(dir.join("agent.log")).unwrap();
        let child = Command::new(grace)
            .env_remove("GRACE_ETCD_ENDPOINTS")
            .env_remove("RUST_LOG")
            .args(["agent", "--k8s-api", "127.0.0.1:0", "--data-dir"])
            .arg(dir.join("data"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("grace agent starts");
        let mut agent = Agent {
            child,
            dir,
            pids: Mutex::new(Vec::new()),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Kubeconfig::read_from(agent.kubeconfig()).is_err() {
            if let Some(status) = agent.child.try_wait().unwrap() {
                panic!("the agent exited at start ({status}): {}", agent.log());
            }
            assert!(Instant::now() < deadline, "no kubeconfig: {}", agent.log());
            std::thread::sleep(Duration::from_millis(20));
        }
        agent
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.join("data/kubeconfig")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("agent.log")).unwrap_or_default()
    }

    /// A kube client for the agent, from its kubeconfig alone.
    async fn client(&self) -> Client {
        let kubeconfig = Kubeconfig::read_from(self.kubeconfig()).unwrap();
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .unwrap();
        Client::try_from(config).unwrap()
    }

    /// A pod whose shell writes its pid and then ignores SIGTERM (or
    /// exits on it), with the spec's grace of 30 s; created through `api`
    /// and running (its pid written). Returns its pid file.
    async fn pod(&self, api: &Api<Pod>, name: &str, ignore_term: bool) -> PathBuf {
        let pid = self.dir.join(format!("{name}.pid"));
        self.pids.lock().unwrap().push(pid.clone());
        let trap = if ignore_term { "''" } else { "'exit 0'" };
        // `$$$$` is the shell's `$$` once the Kubernetes `$$` escape is undone.
        let script = format!(
            "echo $$$$ > {}; trap {trap} TERM; while :; do sleep 0.05; done",
            pid.display()
        );
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": name, "labels": { "app": "kube-rs" } },
            "spec": {
                "terminationGracePeriodSeconds": 30,
                "containers": [{ "name": "main", "image": "busybox",
                                 "command": ["sh", "-c", script] }],
            },
        }))
        .unwrap();
        api.create(&PostParams::default(), &pod).await.unwrap();
        wait_until(&format!("{name} runs"), || alive(&pid)).await;
        pid
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        for pid in self.pids.lock().map(|p| p.clone()).unwrap_or_default() {
            if let Ok(pid) = std::fs::read_to_string(pid) {
                let _ = Command::new("kill").args(["-KILL", pid.trim()]).status();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether the process whose pid `pid_file` holds runs (a zombie does not).
fn alive(pid_file: &Path) -> bool {
    let Ok(pid) = std::fs::read_to_string(pid_file) else {
        return false;
    };
    std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
        .is_ok_and(|stat| !stat.contains(") Z "))
}

/// Waits (10 s at most) until `condition` holds.
async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < deadline, "{what}: not within 10 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Watches `name` with kube-runtime's watcher from now on: its list is
/// done when this returns, so no later change is missed.
async fn watch(
    api: &Api<Pod>,
    name: &str,
) -> impl futures::Stream<Item = Result<Event<Pod>, watcher::Error>> + use<> {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher::watcher(api.clone(), config).boxed();
    loop {
        match events.try_next().await.unwrap() {
            Some(Event::InitDone) => return events,
            Some(_) => {}
            None => panic!("the watch of {name} ended during its list"),
        }
    }
}

/// Waits (at most `bound`) for the `Deleted` event of `name`.
async fn deleted(
    events: &mut (impl futures::Stream<Item = Result<Event<Pod>, watcher::Error>> + Unpin),
    name: &str,
    bound: Duration,
) -> Pod {
    let wait = async {
        loop {
            match events.try_next().await.unwrap() {
                Some(Event::Delete(pod)) if pod.name_any() == name => return pod,
                Some(_) => {}
                None => panic!("the watch of {name} ended"),
            }
        }
    };
    tokio::time::timeout(bound, wait)
        .await
        .unwrap_or_else(|_| panic!("no Deleted event for {name} within {bound:?}"))
}

/// R63, through kube-rs: `Api::delete` with `grace_period_seconds: 3` on a
/// pod that ignores SIGTERM ends it with SIGKILL 3 s later, and the
/// watcher's `Deleted` event comes then, not before.
#[tokio::test(flavor = "current_thread")]
async fn r63_delete_params_grace_is_the_time_to_the_deleted_event() {
    let Some(grace) = grace_bin() else { return };
    let agent = Agent::start(&grace, "grace");
    let pods: Api<Pod> = Api::default_namespaced(agent.client().await);
    let pid = agent.pod(&pods, "stubborn", true).await;
    let mut events = watch(&pods, "stubborn").await;

    let asked = Instant::now();
    let params = DeleteParams {
        grace_period_seconds: Some(3),
        ..DeleteParams::default()
    };
    let answer = pods.delete("stubborn", &params).await.unwrap();
    let terminating = answer.left().expect("the terminating pod, not a Status");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(3));

    deleted(&mut events, "stubborn", Duration::from_secs(15)).await;
    let took = asked.elapsed();
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(8),
        "the Deleted event after {took:?}, not about 3 s: {}",
        agent.log()
    );
    assert!(!alive(&pid), "the workload outlived its pod");
    assert!(pods.get_opt("stubborn").await.unwrap().is_none());
}

/// `DeleteParams::background()` and `foreground()` (the propagation
/// policies, which a pod without dependants ignores) delete as a plain
/// delete does; `preconditions` on the uid and resourceVersion refuse a
/// delete of another incarnation (409 Conflict) and allow the current.
#[tokio::test(flavor = "current_thread")]
async fn delete_params_propagation_and_preconditions() {
    let Some(grace) = grace_bin() else { return };
    let agent = Agent::start(&grace, "params");
    let pods: Api<Pod> = Api::default_namespaced(agent.client().await);

    for (name, params) in [
        ("background", DeleteParams::background()),
        ("foreground", DeleteParams::foreground()),
    ] {
        let pid = agent.pod(&pods, name, false).await;
        let mut events = watch(&pods, name).await;
        pods.delete(name, &params).await.unwrap();
        deleted(&mut events, name, Duration::from_secs(10)).await;
        assert!(!alive(&pid), "{name}: the workload outlived its pod");
    }

    let pid = agent.pod(&pods, "guarded", false).await;
    let pod = pods.get("guarded").await.unwrap();
    let wrong = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("not-its-uid".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match pods.delete("guarded", &wrong).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 409, "{status:?}"),
        other => panic!("a delete with another uid: {other:?}"),
    }
    assert!(alive(&pid), "a refused delete stopped the workload");
    let right = DeleteParams {
        preconditions: Some(Preconditions {
            uid: pod.uid(),
            resource_version: pod.resource_version(),
        }),
        ..DeleteParams::default()
    };
    let mut events = watch(&pods, "guarded").await;
    pods.delete("guarded", &right).await.unwrap();
    deleted(&mut events, "guarded", Duration::from_secs(10)).await;
    assert!(!alive(&pid));
}

/// `Api::delete_collection` (deletecollection, which kubectl never sends)
/// with a label selector: each pod it picks is deleted with the
/// `DeleteParams` grace and its workload stopped; a pod it does not pick
/// runs on.
#[tokio::test(flavor = "current_thread")]
async fn delete_collection_deletes_the_pods_the_selector_picks() {
    let Some(grace) = grace_bin() else { return };
    let agent = Agent::start(&grace, "collection");
    let pods: Api<Pod> = Api::default_namespaced(agent.client().await);
    let first = agent.pod(&pods, "first", false).await;
    let second = agent.pod(&pods, "second", false).await;
    let other = agent.pod(&pods, "other", false).await;
    let relabel = serde_json::json!({"metadata": {"labels": {"app": "other"}}});
    pods.patch("other", &PatchParams::default(), &Patch::Merge(&relabel))
        .await
        .unwrap();

    let params = DeleteParams {
        grace_period_seconds: Some(2),
        ..DeleteParams::default()
    };
    let answer = pods
        .delete_collection(&params, &ListParams::default().labels("app=kube-rs"))
        .await
        .unwrap();
    let list = answer.left().expect("the deleted pods, not a Status");
    let mut names: Vec<String> = list.items.iter().map(|p| p.name_any()).collect();
    names.sort();
    assert_eq!(names, ["first", "second"]);
    for pod in &list.items {
        assert_eq!(pod.metadata.deletion_grace_period_seconds, Some(2));
    }
    wait_until("both workloads stop", || !alive(&first) && !alive(&second)).await;
    assert!(
        alive(&other),
        "a pod the selector does not pick was stopped"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<String> = pods
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|p| p.name_any())
            .collect();
        if left == ["other"] {
            break;
        }
        assert!(Instant::now() < deadline, "left: {left:?}\n{}", agent.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What the controller below saw: pods applied and cleaned up.
#[derive(Default)]
struct Seen {
    applied: Mutex<Vec<String>>,
    cleaned: Mutex<Vec<String>>,
    errors: Mutex<Vec<String>>,
}

const FINALIZER: &str = "grace.example/kube-runtime-test";

/// kube-runtime's `Controller` with kube's `finalizer()`, as `reconcile`
/// runs them for Workers, over the agent's Pods: the finalizer is added
/// to a live pod (a JSON patch); a deleted pod's workload is stopped by
/// the agent, its record held by the finalizer (R45) until the
/// controller's cleanup removes it, and then it goes.
#[tokio::test(flavor = "current_thread")]
async fn r45_a_kube_runtime_controller_holds_pods_with_its_finalizer() {
    let Some(grace) = grace_bin() else { return };
    let agent = Agent::start(&grace, "controller");
    let pods: Api<Pod> = Api::default_namespaced(agent.client().await);
    let pid = agent.pod(&pods, "held", false).await;

    let seen = Arc::new(Seen::default());
    let controller = Controller::new(pods.clone(), watcher::Config::default())
        .run(
            |pod: Arc<Pod>, seen: Arc<(Api<Pod>, Arc<Seen>)>| async move {
                let (api, seen) = &*seen;
                finalizer(api, FINALIZER, pod, |event| async {
                    match event {
                        Finalizer::Apply(pod) => seen.applied.lock().unwrap().push(pod.name_any()),
                        Finalizer::Cleanup(pod) => {
                            seen.cleaned.lock().unwrap().push(pod.name_any());
                        }
                    }
                    Ok::<_, Infallible>(Action::await_change())
                })
                .await
            },
            |_, _, _| Action::requeue(Duration::from_millis(200)),
            Arc::new((pods.clone(), seen.clone())),
        )
        .for_each({
            let seen = seen.clone();
            move |result| {
                if let Err(e) = result {
                    seen.errors.lock().unwrap().push(format!("{e:?}"));
                }
                async {}
            }
        });
    let controller = tokio::spawn(controller);

    // The controller's JSON patch puts the finalizer on the live pod.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pods
        .get("held")
        .await
        .unwrap()
        .finalizers()
        .contains(&FINALIZER.to_owned())
    {
        assert!(
            Instant::now() < deadline,
            "no finalizer: {:?}\n{}",
            seen.errors.lock().unwrap(),
            agent.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Then, at the next reconcile (the patch's own watch event), the
    // controller's apply runs.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !seen.applied.lock().unwrap().contains(&"held".to_owned()) {
        assert!(
            Instant::now() < deadline,
            "no apply: {:?}",
            seen.errors.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let mut events = watch(&pods, "held").await;
    let params = DeleteParams {
        grace_period_seconds: Some(1),
        ..DeleteParams::default()
    };
    pods.delete("held", &params).await.unwrap();
    deleted(&mut events, "held", Duration::from_secs(15)).await;
    assert_eq!(*seen.cleaned.lock().unwrap(), ["held"]);
    assert!(!alive(&pid), "the workload outlived its pod");
    controller.abort();
}
