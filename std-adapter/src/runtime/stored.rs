//! A stored object and the lifecycle that keeps it: the parts of it the
//! lifecycle does not hold ([`Spec`]), a lifecycle for an object as it
//! stands ([`fresh`]), and what its kill state says ([`stopped_containers`]).

use std::collections::BTreeMap;

use grace_core::{ContainerSpec, Lifecycle, RestartPolicy, Stage, Strategy, Timestamp};

use super::{KillRecord, ObjectLifecycle, RuntimeError};
use crate::store::{
    ContainerRestarts, ContainerStatus, KillState, Manifest, OwnerReference, StoredContainer,
    StoredObject,
};

/// The parts of a stored object that its lifecycle does not hold. The
/// lifecycle is the one copy of the record and the kill state: the stored
/// object is rebuilt from it and the spec when it is written (with its kill
/// state) or asked for.
#[derive(Default)]
pub(super) struct Spec {
    pub(super) strategy: Strategy,
    pub(super) node: Option<String>,
    pub(super) containers: Vec<StoredContainer>,
    pub(super) status: Vec<ContainerStatus>,
    pub(super) labels: BTreeMap<String, String>,
    pub(super) created: Option<Timestamp>,
    pub(super) started: Option<Timestamp>,
    pub(super) owners: Vec<OwnerReference>,
    pub(super) manifest: Option<Manifest>,
    pub(super) restart_policy: Option<RestartPolicy>,
    pub(super) restarts: Vec<ContainerRestarts>,
}

impl Spec {
    pub(super) fn of(object: StoredObject) -> Spec {
        Spec {
            strategy: object.strategy,
            node: object.node,
            containers: object.containers,
            status: object.status,
            labels: object.labels,
            created: object.created,
            started: object.started,
            owners: object.owners,
            manifest: object.manifest,
            restart_policy: object.restart_policy,
            restarts: object.restarts,
        }
    }

    /// Makes `object` the stored object for `lifecycle` but for its kill
    /// state (left as it is), in place: its strings and collections keep
    /// their allocations, and of the record only what it holds is copied
    /// (`Record::clone_from`). A batch's slots are filled so.
    pub(super) fn fill(&self, lifecycle: &ObjectLifecycle, object: &mut StoredObject) {
        let StoredObject {
            record,
            strategy,
            node,
            containers,
            labels,
            created,
            agent: _,
            status,
            started,
            owners,
            manifest,
            restart_policy,
            restarts,
        } = object;
        record.clone_from(lifecycle.record());
        *strategy = self.strategy;
        // Compared first: a slot written again for the same object is left
        // as it is.
        if *node != self.node {
            node.clone_from(&self.node);
        }
        if *containers != self.containers {
            containers.clone_from(&self.containers);
        }
        if *labels != self.labels {
            labels.clone_from(&self.labels);
        }
        *created = self.created;
        *started = self.started;
        if *status != self.status {
            status.clone_from(&self.status);
        }
        if *owners != self.owners {
            owners.clone_from(&self.owners);
        }
        // A reference count, whether or not it changed.
        manifest.clone_from(&self.manifest);
        *restart_policy = self.restart_policy;
        if *restarts != self.restarts {
            restarts.clone_from(&self.restarts);
        }
    }

    /// The stored object for `lifecycle`, with the kill state `agent`.
    pub(super) fn object(
        &self,
        lifecycle: &ObjectLifecycle,
        agent: Option<KillState>,
    ) -> StoredObject {
        StoredObject {
            record: lifecycle.record().clone(),
            strategy: self.strategy,
            node: self.node.clone(),
            containers: self.containers.clone(),
            labels: self.labels.clone(),
            created: self.created,
            agent,
            status: self.status.clone(),
            started: self.started,
            owners: self.owners.clone(),
            manifest: self.manifest.clone(),
            restart_policy: self.restart_policy,
            restarts: self.restarts.clone(),
        }
    }
}

/// A lifecycle for a stored object as it stands (its containers running,
/// except those marked in `stopped`).
pub(crate) fn fresh(
    object: &StoredObject,
    stopped: &[bool],
) -> Result<ObjectLifecycle, RuntimeError> {
    let specs: Vec<ContainerSpec> = object
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| ContainerSpec {
            stopped: stopped.get(i).copied().unwrap_or(false),
            ..c.core_spec()
        })
        .collect();
    let mut meta = object.record.clone();
    meta.scheduled = object.node.is_some();
    Lifecycle::new(object.strategy, meta, &specs).map_err(|_| RuntimeError::TooManyContainers {
        uid: object.uid().to_owned(),
        containers: specs.len(),
    })
}

/// Which of a stored object's containers its agent has reported stopped
/// (from its kill state; none if it has none or it cannot be read): what
/// the pod's status tells an API server.
pub(crate) fn stopped_containers(object: &StoredObject) -> Vec<bool> {
    object
        .agent
        .as_ref()
        .and_then(|state| KillRecord::decode(state).ok())
        .map(|saved| {
            saved
                .lifecycle
                .containers()
                .iter()
                .map(|c| c.stage() == Stage::Stopped)
                .collect()
        })
        .unwrap_or_default()
}
