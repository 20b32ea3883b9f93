//! The controller driven through kube's real client against an API server
//! in this process (no cluster here): a tower service that keeps Workers
//! in memory and answers GET, PATCH (JSON patch and merge patch) and
//! DELETE as the API server does for a custom resource — a DELETE of a
//! Worker held by a finalizer sets its deletionTimestamp (grace 0, R11),
//! and the Worker goes when its last finalizer does. The test calls
//! `reconcile` as the Controller would, on a clock of its own, and checks
//! each step's time against the pod rules.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use grace_k8s_controller::{Context, Error, FINALIZER, Worker, WorkerSpec, Workload, reconcile};
use http::{Request, Response, StatusCode};
use kube::api::{Api, DeleteParams, PostParams};
use kube::client::Body;
use kube::{Client, ResourceExt};

/// The fake API server's store: Worker JSON by name.
type Objects = Arc<Mutex<BTreeMap<String, serde_json::Value>>>;

fn status(code: StatusCode, reason: &str, message: &str) -> Response<Body> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16(),
    });
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string().into_bytes()))
        .expect("response")
}

fn object(value: &serde_json::Value) -> Response<Body> {
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from(value.to_string().into_bytes()))
        .expect("response")
}

/// One request, as the API server answers it.
async fn serve(objects: Objects, now: Arc<Mutex<i64>>, request: Request<Body>) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let bytes = body.collect_bytes().await.expect("body");
    let path = parts.uri.path().to_owned();
    let prefix = "/apis/grace.example/v1/namespaces/default/workers";
    let Some(rest) = path.strip_prefix(prefix) else {
        return status(StatusCode::NOT_FOUND, "NotFound", &path);
    };
    let name = rest.trim_start_matches('/').to_owned();
    let mut objects = objects.lock().expect("lock");
    let bump = |o: &mut serde_json::Value| {
        let rv: u64 = o["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        o["metadata"]["resourceVersion"] = (rv + 1).to_string().into();
    };
    match (parts.method.as_str(), name.is_empty()) {
        ("POST", true) => {
            let mut o: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
            let name = o["metadata"]["name"].as_str().expect("name").to_owned();
            o["metadata"]["uid"] = format!("uid-{name}").into();
            o["metadata"]["namespace"] = "default".into();
            o["metadata"]["generation"] = 1.into();
            bump(&mut o);
            objects.insert(name, o.clone());
            object(&o)
        }
        ("GET", false) => match objects.get(&name) {
            Some(o) => object(o),
            None => status(StatusCode::NOT_FOUND, "NotFound", &name),
        },
        ("PATCH", false) => {
            let Some(o) = objects.get_mut(&name) else {
                return status(StatusCode::NOT_FOUND, "NotFound", &name);
            };
            let kind = parts
                .headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let patch: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
            if kind.starts_with("application/json-patch") {
                let patch: json_patch::Patch = serde_json::from_value(patch).expect("a JSON patch");
                // As the API server's JSON patch does, an absent field
                // tests equal to null.
                let absent = o["metadata"].get("finalizers").is_none();
                if absent {
                    o["metadata"]["finalizers"] = serde_json::Value::Null;
                }
                let done = json_patch::patch(o, &patch);
                if let Some(meta) = o["metadata"].as_object_mut()
                    && meta
                        .get("finalizers")
                        .is_some_and(serde_json::Value::is_null)
                {
                    meta.remove("finalizers");
                }
                if let Err(e) = done {
                    return status(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", &e.to_string());
                }
            } else {
                json_patch::merge(o, &patch);
            }
            bump(o);
            let o = o.clone();
            // The last finalizer of a deleted object removes it.
            let deleting = !o["metadata"]["deletionTimestamp"].is_null();
            let held = o["metadata"]["finalizers"]
                .as_array()
                .is_some_and(|f| !f.is_empty());
            if deleting && !held {
                objects.remove(&name);
            }
            object(&o)
        }
        ("DELETE", false) => {
            let Some(o) = objects.get_mut(&name) else {
                return status(StatusCode::NOT_FOUND, "NotFound", &name);
            };
            let held = o["metadata"]["finalizers"]
                .as_array()
                .is_some_and(|f| !f.is_empty());
            if !held {
                let o = objects.remove(&name).expect("there");
                return object(&o);
            }
            // A custom resource is not graceful (R11): a timestamp of now,
            // grace 0, kept by its finalizers (R30, R31).
            let seconds = *now.lock().expect("lock") / 1000;
            let ts = k8s_openapi::jiff::Timestamp::from_second(seconds).expect("time");
            o["metadata"]["deletionTimestamp"] =
                ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string().into();
            o["metadata"]["deletionGracePeriodSeconds"] = 0.into();
            bump(o);
            object(o)
        }
        (method, _) => status(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", method),
    }
}

/// A workload that ignores its stop signal and stops only when killed,
/// whose pre-stop step takes `hook_ms`; it records each step and when.
#[derive(Default)]
struct Recorded {
    now: Arc<Mutex<i64>>,
    hook_ms: i64,
    steps: Mutex<Vec<(String, i64)>>,
    hook_started: Mutex<Option<i64>>,
    killed: Mutex<bool>,
}

impl Recorded {
    fn note(&self, step: &str) {
        let now = *self.now.lock().expect("lock");
        self.steps
            .lock()
            .expect("lock")
            .push((step.to_owned(), now));
    }
}

impl Workload for Recorded {
    fn pre_stop(&self, _: &str, budget_seconds: i64) {
        self.note(&format!("pre-stop (budget {budget_seconds} s)"));
        *self.hook_started.lock().expect("lock") = Some(*self.now.lock().expect("lock"));
    }
    fn pre_stop_done(&self, _: &str) -> bool {
        let now = *self.now.lock().expect("lock");
        self.hook_started
            .lock()
            .expect("lock")
            .is_some_and(|t| now >= t + self.hook_ms)
    }
    fn stop(&self, _: &str) {
        self.note("stop signal");
    }
    fn kill(&self, _: &str) {
        self.note("SIGKILL");
        *self.killed.lock().expect("lock") = true;
    }
    fn stopped(&self, _: &str) -> bool {
        *self.killed.lock().expect("lock")
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_deleted_worker_gets_a_pods_graceful_deletion_and_goes_when_its_workload_has_stopped() {
    const T0: i64 = 1_700_000_000_000;
    let now = Arc::new(Mutex::new(T0));
    let objects: Objects = Arc::default();
    let service = {
        let (objects, now) = (objects.clone(), now.clone());
        tower::service_fn(move |request: Request<Body>| {
            let (objects, now) = (objects.clone(), now.clone());
            async move { Ok::<_, Infallible>(serve(objects, now, request).await) }
        })
    };
    let client = Client::new(service, "default");
    let workload = Arc::new(Recorded {
        now: now.clone(),
        hook_ms: 1_500,
        ..Recorded::default()
    });
    let clock = now.clone();
    let ctx = Arc::new(Context {
        client: client.clone(),
        workload: workload.clone(),
        now_millis: Box::new(move || *clock.lock().expect("lock")),
    });
    let api: Api<Worker> = Api::namespaced(client, "default");
    let worker = Worker::new(
        "w",
        WorkerSpec {
            termination_grace_period_seconds: Some(4),
            pre_stop: true,
        },
    );
    api.create(&PostParams::default(), &worker)
        .await
        .expect("created");

    // A live Worker gets the controller's finalizer.
    let live = Arc::new(api.get("w").await.expect("there"));
    reconcile(live, ctx.clone()).await.expect("finalizer added");
    assert_eq!(api.get("w").await.expect("there").finalizers(), [FINALIZER]);

    // Deleted: Kubernetes keeps it for the finalizer, and the controller
    // runs the pod's deletion, requeued at each deadline.
    api.delete("w", &DeleteParams::default())
        .await
        .expect("deleted");
    let mut requeues = Vec::new();
    for _ in 0..50 {
        let Ok(worker) = api.get("w").await else {
            break;
        };
        match reconcile(Arc::new(worker), ctx.clone()).await {
            Err(Error::Pending(after)) => {
                requeues.push(after);
                // The controller's requeue, or sooner: the workload's own
                // changes are seen at the next reconcile.
                let step = after.min(Duration::from_millis(500));
                *now.lock().expect("lock") += i64::try_from(step.as_millis()).expect("ms");
            }
            Ok(_) => {}
            Err(e) => panic!("reconcile: {e}"),
        }
    }
    assert!(api.get("w").await.is_err(), "the Worker is gone");
    let steps: Vec<(String, i64)> = workload
        .steps
        .lock()
        .expect("lock")
        .iter()
        .map(|(s, t)| (s.clone(), t - T0))
        .collect();
    // Grace 4 s from the spec (R18); the hook ran 1.5 s, truncated to 1 s
    // (R61): 3 s left, so SIGKILL 3 s after the stop signal (R62: >= 2).
    assert_eq!(
        steps,
        [
            ("pre-stop (budget 4 s)".to_owned(), 0),
            ("stop signal".to_owned(), 1_500),
            ("SIGKILL".to_owned(), 4_500),
        ]
    );
    assert!(
        requeues.iter().all(|d| *d <= Duration::from_secs(1)),
        "{requeues:?}"
    );
}
