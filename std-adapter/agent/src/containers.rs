//! Starting an object's containers and writing what came of it.

use crate::clock::Clock;
use crate::process::{LaunchError, ProcessActuator};
use crate::runtime::Runtime;
use crate::store::{ContainerStatus, Store, StoreError, StoredObject};

/// Binds a pod that names no node (no `spec.nodeName`) to `node`, as the
/// scheduler would: the lone agent of a local store runs every pod it is
/// given. An object with no containers has nothing to run and stays
/// unbound (a delete removes it at once, R19).
pub(crate) fn bind_unbound(object: &mut StoredObject, node: &str) {
    if wants_binding(object) {
        object.node = Some(node.to_owned());
        object.record.scheduled = true;
    }
}

/// Binds every stored pod that names no node to `node`, each written to
/// the store before anything acts on it: what a lone agent does when it
/// starts, for pods stored unbound while no agent bound them (by a
/// version that bound them only when it ran them). Returns their names.
pub(crate) fn bind_stored<S: Store>(store: &S, node: &str) -> Result<Vec<String>, StoreError> {
    let mut bound = Vec::new();
    for (name, mut object, revision) in store.list()?.objects {
        if wants_binding(&object) {
            bind_unbound(&mut object, node);
            store.update(&name, object, revision)?;
            bound.push(name);
        }
    }
    Ok(bound)
}

/// Whether `object` is a pod waiting to be bound to a node: it names no
/// node, has containers to run, and is not being deleted.
pub(crate) fn wants_binding(object: &StoredObject) -> bool {
    object.node.is_none()
        && !object.containers.is_empty()
        && object.record.deletion_timestamp.is_none()
}
use grace_core::Input;

/// Starts an object's containers that are not running and reports each
/// one's status: `Running`, `ContainerCannotRun` with the reason, or
/// waiting with `CreateContainerConfigError` (the pod asks for what the
/// agent must not do: it is not started); either failure counts as exited,
/// as no process of it runs.
pub(crate) fn start<S: Store, C: Clock>(rt: &mut Runtime<S, C, ProcessActuator>, name: &str) {
    start_all(rt, [name]);
}

/// [`start`] for many objects, their statuses written with one commit per
/// batch rather than one per container.
pub(crate) fn start_all<'a, S: Store, C: Clock>(
    rt: &mut Runtime<S, C, ProcessActuator>,
    names: impl IntoIterator<Item = &'a str>,
) {
    // (name, running containers, containers that could not start)
    let mut started = Vec::new();
    for name in names {
        let Some(object) = rt.object(name) else {
            continue;
        };
        let failed = rt.actuator().start_each(name, &object);
        let running: Vec<usize> = (0..object.containers.len())
            .filter(|&i| rt.actuator().is_running(name, i))
            .collect();
        started.push((name, running, failed));
    }
    let mut batch = rt.open_batch();
    for (name, running, failed) in started {
        if batch.is_full() {
            let _ = batch.commit();
            batch = rt.open_batch();
        }
        for i in running {
            let _ = batch.set_container_status(name, i, ContainerStatus::RUNNING);
        }
        for (i, error) in failed {
            let status = match error {
                LaunchError::Config(message) => ContainerStatus::config_error(message),
                other => ContainerStatus::cannot_run(other.message().to_owned()),
            };
            let _ = batch.set_container_status(name, i, status);
            let _ = batch.handle(name, Input::container_exited(i));
        }
    }
    let _ = batch.commit();
}
