//! A kube-runtime controller that gives a custom resource, `Worker`
//! (`grace.example/v1`), the graceful deletion Kubernetes gives Pods and
//! no custom resource: a grace period, a pre-stop step, a stop signal,
//! SIGKILL when the grace is spent — decided by grace-core.
//!
//! Kubernetes deletes a custom resource at once unless a finalizer holds
//! it (R11: only Pods are graceful). This controller holds each Worker
//! with its finalizer (kube-runtime's `finalizer()`); when the Worker is
//! deleted it runs a pod's lifecycle for it: a deletion with the spec's
//! grace (R18), the kill started by the controller as a kubelet starts it
//! (R57), the pre-stop step within the budget (R59–R61), the stop signal,
//! SIGKILL no sooner than 2 s later (R62) — and removes its finalizer only
//! when the workload has stopped. Between steps it requeues itself at the
//! lifecycle's next deadline (`poll_timeout`); the lifecycle is kept in an
//! annotation of the Worker, so a restarted controller carries on.
//!
//! What the workload is, is the [`Workload`] trait's: the example in
//! `main.rs` only logs; the tests use one that records what was done and
//! when. Time is the wall clock, used as the lifecycle's monotonic clock
//! too (so that it survives a controller restart).

use std::sync::Arc;
use std::time::Duration;

use grace_core::{
    Action as GraceAction, ContainerSpec, DeleteOptions, Instant, Lifecycle, Now, Phase, PodPhase,
    Stage, Strategy, WallTime,
};
use grace_core::{DeleteError, Input};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{self, Event, finalizer};
use kube::{Client, CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The controller's finalizer on every Worker.
pub const FINALIZER: &str = "grace.example/graceful-deletion";
/// The annotation that keeps a deleting Worker's lifecycle.
pub const LIFECYCLE: &str = "grace.example/lifecycle";

/// One Worker's lifecycle: up to 4 finalizers (the record's own; the
/// Worker's finalizers stay on the Worker), one container.
pub type WorkerLifecycle = Lifecycle<4, 1>;

/// A Worker: a workload deleted as a Pod is.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(group = "grace.example", version = "v1", kind = "Worker", namespaced)]
#[serde(rename_all = "camelCase")]
pub struct WorkerSpec {
    /// The grace period (seconds, default 30, as a Pod's).
    pub termination_grace_period_seconds: Option<i64>,
    /// Whether the workload has a pre-stop step.
    #[serde(default)]
    pub pre_stop: bool,
}

/// The workload a Worker stands for, as the controller drives it. Every
/// method must be idempotent (a reconcile may run again).
pub trait Workload: Send + Sync + 'static {
    /// Start the pre-stop step (it has `budget_seconds`).
    fn pre_stop(&self, worker: &str, budget_seconds: i64);
    /// Whether the pre-stop step has returned.
    fn pre_stop_done(&self, worker: &str) -> bool;
    /// Send the stop signal.
    fn stop(&self, worker: &str);
    /// Kill it.
    fn kill(&self, worker: &str);
    /// Whether it has stopped.
    fn stopped(&self, worker: &str) -> bool;
}

/// A shared workload is a workload.
impl<W: Workload> Workload for Arc<W> {
    fn pre_stop(&self, worker: &str, budget_seconds: i64) {
        W::pre_stop(self, worker, budget_seconds);
    }
    fn pre_stop_done(&self, worker: &str) -> bool {
        W::pre_stop_done(self, worker)
    }
    fn stop(&self, worker: &str) {
        W::stop(self, worker);
    }
    fn kill(&self, worker: &str) {
        W::kill(self, worker);
    }
    fn stopped(&self, worker: &str) -> bool {
        W::stopped(self, worker)
    }
}

/// What every reconcile shares.
pub struct Context<W> {
    /// The API client.
    pub client: Client,
    /// The workloads.
    pub workload: W,
    /// The wall clock, in milliseconds since 1970 (a test's own clock).
    pub now_millis: Box<dyn Fn() -> i64 + Send + Sync>,
}

/// Why a reconcile did not finish.
#[derive(Debug)]
pub enum Error {
    /// The deletion is in progress: reconcile again after this long (the
    /// lifecycle's next deadline). The finalizer stays.
    Pending(Duration),
    /// The API failed.
    Kube(kube::Error),
    /// The Worker cannot be converted (see grace-k8s).
    Bridge(grace_k8s::BridgeError),
    /// The lifecycle could not be built, read or written.
    Lifecycle(String),
    /// kube-runtime's finalizer helper failed.
    Finalizer(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Pending(d) => write!(f, "deletion in progress; next step in {d:?}"),
            Error::Kube(e) => write!(f, "api: {e}"),
            Error::Bridge(e) => write!(f, "{e}"),
            Error::Lifecycle(e) => write!(f, "lifecycle: {e}"),
            Error::Finalizer(e) => write!(f, "finalizer: {e}"),
        }
    }
}

impl std::error::Error for Error {}

fn now_of(millis: i64) -> Now {
    Now::new(
        WallTime::from_unix_millis(millis),
        Instant::from_millis(u64::try_from(millis).unwrap_or(0)),
    )
}

/// Reconciles one Worker: adds the finalizer to a live one; runs the
/// deletion of a deleted one, step by step.
pub async fn reconcile<W: Workload>(
    worker: Arc<Worker>,
    ctx: Arc<Context<W>>,
) -> Result<Action, Error> {
    let namespace = worker.namespace().unwrap_or_else(|| "default".into());
    let api: Api<Worker> = Api::namespaced(ctx.client.clone(), &namespace);
    finalizer(&api, FINALIZER, worker, |event| async {
        match event {
            Event::Apply(_) => Ok(Action::await_change()),
            Event::Cleanup(worker) => cleanup(&api, &worker, &ctx).await,
        }
    })
    .await
    .map_err(|e| match e {
        finalizer::Error::CleanupFailed(inner) | finalizer::Error::ApplyFailed(inner) => inner,
        other => Error::Finalizer(other.to_string()),
    })
}

/// The requeue of a reconcile that did not finish.
pub fn error_policy<W: Workload>(_: Arc<Worker>, error: &Error, _: Arc<Context<W>>) -> Action {
    match error {
        Error::Pending(after) => Action::requeue(*after),
        _ => Action::requeue(Duration::from_secs(5)),
    }
}

/// One step of a deleted Worker's graceful deletion.
async fn cleanup<W: Workload>(
    api: &Api<Worker>,
    worker: &Worker,
    ctx: &Context<W>,
) -> Result<Action, Error> {
    let name = worker.name_any();
    let now = now_of((ctx.now_millis)());
    let mut lifecycle = match worker.annotations().get(LIFECYCLE) {
        Some(json) => serde_json::from_str::<WorkerLifecycle>(json)
            .map_err(|e| Error::Lifecycle(e.to_string()))?,
        None => start(worker, now)?,
    };
    let _ = lifecycle.handle(now, Input::Timeout);
    let stage = lifecycle.containers().first().map(|c| c.stage());
    if matches!(stage, Some(Stage::PreStop { .. })) && ctx.workload.pre_stop_done(&name) {
        let _ = lifecycle
            .handle(now, Input::pre_stop_finished(0))
            .container();
    }
    if !matches!(stage, Some(Stage::Stopped)) && ctx.workload.stopped(&name) {
        let _ = lifecycle
            .handle(now, Input::container_exited(0))
            .container();
    }
    let mut removed = false;
    while let Some(action) = lifecycle.poll_action() {
        match action {
            GraceAction::RunPreStop { budget_seconds, .. } => {
                ctx.workload.pre_stop(&name, i64::from(budget_seconds));
            }
            GraceAction::SendStopSignal { .. } => ctx.workload.stop(&name),
            GraceAction::SendKill { .. } => ctx.workload.kill(&name),
            GraceAction::Remove { .. } => removed = true,
            GraceAction::RemoveEndpoints | GraceAction::ContainerStopped { .. } => {}
            // An action a later grace-core adds: nothing for a Worker.
            _ => {}
        }
    }
    if removed || lifecycle.phase() == Phase::Deleted {
        // finalizer() removes ours: Kubernetes deletes the Worker.
        return Ok(Action::await_change());
    }
    let json = serde_json::to_string(&lifecycle).map_err(|e| Error::Lifecycle(e.to_string()))?;
    let patch = serde_json::json!({ "metadata": { "annotations": { LIFECYCLE: json } } });
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(Error::Kube)?;
    // Until the next deadline; the workload's own exit is looked at
    // every second meanwhile.
    let next = lifecycle
        .poll_timeout()
        .map(|t| t.saturating_duration_since(now.mono))
        .map_or(Duration::from_secs(1), |d| {
            Duration::from_millis(d.as_millis().min(1_000))
        });
    Err(Error::Pending(next))
}

/// The lifecycle of a Worker whose deletion the controller sees first:
/// a live pod's record with the spec's grace, deleted with no grace given
/// (R18: the spec's), its kill started at once (R57).
fn start(worker: &Worker, now: Now) -> Result<WorkerLifecycle, Error> {
    let mut record = grace_k8s::record_from_meta::<4>(&worker.metadata).map_err(Error::Bridge)?;
    // The API server's own deletion of a custom resource (a timestamp,
    // grace 0, R11) only says the Worker was asked to go; its finalizers
    // are the Worker's, held until this deletion ends.
    record.deletion_timestamp = None;
    record.deletion_grace_period_seconds = None;
    record.finalizers = Default::default();
    record.scheduled = true;
    record.phase = PodPhase::Running;
    record.termination_grace_period_seconds =
        Some(worker.spec.termination_grace_period_seconds.unwrap_or(30));
    let container = ContainerSpec {
        pre_stop: worker.spec.pre_stop,
        sidecar: false,
        stopped: false,
    };
    let mut lifecycle = WorkerLifecycle::new(Strategy::POD, record, &[container])
        .map_err(|e| Error::Lifecycle(format!("{e:?}")))?;
    let _ = lifecycle
        .handle(now, Input::Delete(DeleteOptions::default()))
        .delete()
        .unwrap_or(Err(DeleteError::NotFound))
        .map_err(|e| Error::Lifecycle(e.to_string()))?;
    let _ = lifecycle.handle(now, Input::AgentSync).handled();
    Ok(lifecycle)
}
