//! A stored pod's status as the kubelet reports it for a pod without
//! probes: the phase (the kubelet's `getPhase`, [`phase`]) and the
//! conditions `Initialized`, `Ready`, `ContainersReady` and `PodScheduled`
//! ([`conditions`]), from the container states its agent reported
//! ([`StoredObject::status`]).
//!
//! Without probes a running container is ready and started, as the kubelet
//! counts it; grace also counts none ready once the pod is being deleted
//! (it has left the endpoints then, R85).

use grace_core::{
    ContainerState as CoreState, ContainerStatus as CoreStatus, Kind, PodPhase, RestartPolicy,
    Timestamp, keep_terminal_phase, pod_phase,
};
use k8s_openapi::api::core::v1::PodCondition;

use grace_std::store::{ContainerStatus, StoredObject};

/// Why a pod that names no node waits.
pub(crate) const UNSCHEDULED: &str =
    "no spec.nodeName: waiting for an agent to bind it to its node";

/// The phase to show for `object`: `Pending` for a pod bound to no node (no
/// agent runs it); else the kubelet's phase from its containers' states
/// ([`pod_phase`], [R98]–[R100]), a pod being deleted counting as one whose
/// containers will not start again, and once `Succeeded` or `Failed`, that
/// for good ([R101]: the record's phase if it says so). An object that is
/// not a pod shows the record's phase.
///
/// [R98]: grace_core::rules#r98
/// [R100]: grace_core::rules#r100
/// [R101]: grace_core::rules#r101
pub fn phase(object: &StoredObject) -> PodPhase {
    let record = &object.record;
    if object.strategy.kind == Kind::Generic {
        return record.phase;
    }
    if object.node.is_none() {
        return keep_terminal_phase(record.phase, PodPhase::Pending);
    }
    let states: Vec<CoreStatus> = (0..object.containers.len())
        .map(|i| core_status(object, i))
        .collect();
    let deleting = record.deletion_timestamp.is_some();
    keep_terminal_phase(
        record.phase,
        pod_phase(
            &states,
            object.restart_policy.unwrap_or(RestartPolicy::Always),
            deleting,
        ),
    )
}

/// Container `i` as [`pod_phase`] counts it: one waiting out its
/// back-off waits after a run (R98).
fn core_status(object: &StoredObject, i: usize) -> CoreStatus {
    let pending = object
        .restarts
        .get(i)
        .is_some_and(|r| r.restart_at_ms.is_some())
        && object.record.deletion_timestamp.is_none();
    let state = match object.status.get(i) {
        Some(ContainerStatus::Terminated { exit_code, .. }) if pending => CoreState::Waiting {
            last_exit: Some(exit_code.unwrap_or(137)),
        },
        None => CoreState::NoStatus,
        Some(ContainerStatus::Running { .. }) => CoreState::Running { started: true },
        Some(ContainerStatus::Terminated { exit_code, .. }) => CoreState::Terminated {
            // The kubelet's code for an exit it cannot know.
            exit_code: exit_code.unwrap_or(137),
        },
        // Waiting, or a state this version does not know.
        Some(_) => CoreState::Waiting { last_exit: None },
    };
    let sidecar = object.containers.get(i).is_some_and(|c| c.sidecar);
    CoreStatus { sidecar, state }
}

/// Whether container `i` of `object` is ready: it runs, on a node, and
/// the pod is not being deleted.
pub fn container_ready(object: &StoredObject, i: usize) -> bool {
    object.node.is_some()
        && object.record.deletion_timestamp.is_none()
        && object
            .status
            .get(i)
            .is_some_and(ContainerStatus::is_running)
}

/// The pod's conditions as the kubelet sets them without probes or
/// readiness gates, in its order: `Initialized` (its native sidecars have
/// started, or a regular container has), `Ready` and `ContainersReady`
/// (every container ready; `PodCompleted` once the pod has succeeded,
/// else `ContainersNotReady` naming the others), `PodScheduled` (bound to
/// a node). A pod bound to no node has only `PodScheduled`, false, as no
/// kubelet has seen it. `lastTransitionTime` where grace knows it: the
/// creation for `PodScheduled`, the agent's start of the pod for
/// `Initialized`, the last start or exit of a container for readiness.
pub fn conditions(object: &StoredObject) -> Vec<PodCondition> {
    let time = |t: Option<Timestamp>| t.and_then(crate::time);
    if object.node.is_none() {
        return vec![condition(
            "PodScheduled",
            false,
            Some("Unschedulable".into()),
            Some(UNSCHEDULED.into()),
            None,
        )];
    }
    let names = |pick: &dyn Fn(usize) -> bool| -> Vec<&str> {
        object
            .containers
            .iter()
            .enumerate()
            .filter(|(i, _)| pick(*i))
            .map(|(_, c)| c.name.as_str())
            .collect()
    };
    let has_run = |i: usize| {
        matches!(
            object.status.get(i),
            Some(ContainerStatus::Running { .. } | ContainerStatus::Terminated { .. })
        )
    };
    let sidecar = |i: usize| object.containers.get(i).is_some_and(|c| c.sidecar);
    let regular_ran = !names(&|i| !sidecar(i) && has_run(i)).is_empty();
    let waiting_sidecars = names(&|i| {
        sidecar(i)
            && !object
                .status
                .get(i)
                .is_some_and(ContainerStatus::is_running)
    });
    let initialized = regular_ran || waiting_sidecars.is_empty();
    let mut list = vec![condition(
        "Initialized",
        initialized,
        (!initialized).then(|| "ContainersNotInitialized".into()),
        (!initialized).then(|| {
            format!(
                "containers with incomplete status: [{}]",
                waiting_sidecars.join(" ")
            )
        }),
        time(object.started),
    )];
    let unready = names(&|i| !container_ready(object, i));
    let ready = unready.is_empty();
    let completed = phase(object) == PodPhase::Succeeded;
    let reason = match (ready, completed) {
        (true, _) => None,
        (false, true) => Some("PodCompleted".to_owned()),
        (false, false) => Some("ContainersNotReady".to_owned()),
    };
    let message = (!ready && !completed)
        .then(|| format!("containers with unready status: [{}]", unready.join(" ")));
    let changed = time(last_change(object, ready));
    for kind in ["Ready", "ContainersReady"] {
        list.push(condition(
            kind,
            ready,
            reason.clone(),
            message.clone(),
            changed.clone(),
        ));
    }
    list.push(condition(
        "PodScheduled",
        true,
        None,
        None,
        time(object.created),
    ));
    list
}

/// When readiness last changed, as far as the statuses tell: the last
/// start of a container when all are ready, else its last exit.
fn last_change(object: &StoredObject, ready: bool) -> Option<Timestamp> {
    object
        .status
        .iter()
        .filter_map(|s| match s {
            ContainerStatus::Running { started_at } if ready => *started_at,
            ContainerStatus::Terminated { finished_at, .. } if !ready => *finished_at,
            _ => None,
        })
        .max()
}

fn condition(
    kind: &str,
    status: bool,
    reason: Option<String>,
    message: Option<String>,
    last_transition_time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
) -> PodCondition {
    PodCondition {
        type_: kind.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason,
        message,
        last_transition_time,
        ..PodCondition::default()
    }
}
