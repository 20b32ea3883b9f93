//! Starting exited containers again, as the kubelet does: which exit is
//! followed by a start ([`restarts_after_exit`], R92–R94), after which
//! CrashLoopBackOff (10 s doubling up to 300 s, counted from the exit,
//! R95–R97, D9).
//!
//! One timer table for every container (`due`, ordered by instant), read
//! by the agent's one loop: no thread sleeps per container, whatever the
//! number of workloads. What a restart needs is written to the store
//! before the agent acts on it ([`ContainerRestarts`]): the pending
//! restart and its instant when the container exits, then the core's
//! [`Input::ContainerStarted`] (a delete from then on stops the new
//! process) before the process is started. A restarted agent finds the
//! pending restarts in the store and keeps their instants ([`recover`]).
//!
//! [`recover`]: Restarts::recover

use std::collections::BTreeSet;
use std::time::Duration as StdDuration;

use grace_core::{Input, RestartPolicy, Stage, restarts_after_exit};

use crate::clock::Clock;
use crate::process::logs::ContainerLogs;
use crate::process::{LaunchError, ProcessActuator};
use crate::runtime::Runtime;
use crate::store::{ContainerRestarts, ContainerStatus, Store, StoredObject};

/// The kubelet's exit code for a run whose end it could not read.
const UNKNOWN_EXIT: i32 = 137;

/// The pending restarts of the containers this agent runs: (when, in unix
/// milliseconds of the agent's wall clock; object; container).
#[derive(Default)]
pub(crate) struct Restarts {
    due: BTreeSet<(u64, String, usize)>,
}

/// The agent's wall clock in unix milliseconds (0 before 1970).
fn now_ms<S: Store, C: Clock>(rt: &Runtime<S, C, ProcessActuator>) -> u64 {
    u64::try_from(rt.clock().now().wall.as_unix_millis()).unwrap_or(0)
}

/// Whether nothing of `name` may start again: it is being deleted or
/// evicted, or its phase is terminal (R94).
fn stopping<S: Store, C: Clock>(
    rt: &Runtime<S, C, ProcessActuator>,
    name: &str,
    object: &StoredObject,
) -> bool {
    let agent = rt.lifecycle(name).map(|l| l.agent());
    object.record.deletion_timestamp.is_some()
        || object.record.phase.is_terminal()
        || agent.is_none_or(|a| a.killing || a.deletion_seen || a.evicted)
}

/// Whether a regular container of `object` runs or waits to start again:
/// native sidecars do not keep a pod whose main containers are done
/// alive (the kubelet's `computePodActions`).
fn regular_alive(object: &StoredObject) -> bool {
    object.containers.iter().enumerate().any(|(i, c)| {
        !c.sidecar
            && (object
                .status
                .get(i)
                .is_some_and(ContainerStatus::is_running)
                || object
                    .restarts
                    .get(i)
                    .is_some_and(|r| r.restart_at_ms.is_some()))
    })
}

/// `object`'s restarts with container `i`'s replaced by `r`.
fn with(object: &StoredObject, i: usize, r: ContainerRestarts) -> Vec<ContainerRestarts> {
    let mut all = object.restarts.clone();
    all.resize(
        object.containers.len().max(i.saturating_add(1)),
        ContainerRestarts::default(),
    );
    if let Some(slot) = all.get_mut(i) {
        *slot = r;
    }
    all
}

impl Restarts {
    /// How long the agent's loop may wait before the next restart is due
    /// (`None`: none is pending).
    pub(crate) fn wait<S: Store, C: Clock>(
        &self,
        rt: &Runtime<S, C, ProcessActuator>,
    ) -> Option<StdDuration> {
        let (at, ..) = self.due.first()?;
        Some(StdDuration::from_millis(at.saturating_sub(now_ms(rt))))
    }

    /// At the agent's start: the restarts an earlier agent left pending
    /// keep their instants; one it had carried out when it stopped (its
    /// process runs: it was adopted) is recorded as done.
    pub(crate) fn recover<S: Store, C: Clock>(
        &mut self,
        rt: &mut Runtime<S, C, ProcessActuator>,
        node: &str,
    ) {
        let names: Vec<String> = rt.names().map(str::to_owned).collect();
        for name in names {
            let Some(object) = rt.object(&name).filter(|o| o.node.as_deref() == Some(node)) else {
                continue;
            };
            for (i, r) in object.restarts.iter().enumerate() {
                let Some(at) = r.restart_at_ms else {
                    continue;
                };
                if rt.actuator().is_running(&name, i) {
                    let mut done = r.clone();
                    done.restarted(now_ms(rt));
                    let _ = rt.set_container_status(&name, i, ContainerStatus::RUNNING);
                    if let Err(e) = rt.update_restarts(&name, with(&object, i, done)) {
                        tracing::warn!(object = %name, "grace agent: {name} container {i}: its restart cannot be recorded: {e}");
                    }
                } else {
                    self.due.insert((at, name.clone(), i));
                }
            }
        }
    }

    /// Containers reported stopped (`stopped`: object, container): each
    /// whose exit is followed by a start (R92–R94) waits out its back-off,
    /// written to the store first (R95, D9); one whose restart was already
    /// pending (found again after an agent restart) keeps its instant.
    pub(crate) fn exited<S: Store, C: Clock>(
        &mut self,
        rt: &mut Runtime<S, C, ProcessActuator>,
        stopped: &[(String, usize)],
    ) {
        for (name, i) in stopped {
            let i = *i;
            let Some(object) = rt.object(name) else {
                continue;
            };
            let Some(ContainerStatus::Terminated { exit_code, .. }) = object.status.get(i) else {
                // Never ran (a configuration error): nothing to restart.
                continue;
            };
            let mut r = object.restarts.get(i).cloned().unwrap_or_default();
            if let Some(at) = r.restart_at_ms {
                self.due.insert((at, name.clone(), i));
                continue;
            }
            let policy = object.restart_policy.unwrap_or(RestartPolicy::Always);
            let sidecar = object.containers.get(i).is_some_and(|c| c.sidecar);
            let code = exit_code.unwrap_or(UNKNOWN_EXIT);
            if !restarts_after_exit(policy, sidecar, code, stopping(rt, name, &object))
                || (sidecar && !regular_alive(&object))
            {
                continue;
            }
            let last = object
                .status
                .get(i)
                .cloned()
                .unwrap_or(ContainerStatus::RUNNING);
            let at = r.exited(last, now_ms(rt));
            match rt.update_restarts(name, with(&object, i, r)) {
                Ok(()) => {
                    self.due.insert((at, name.clone(), i));
                }
                Err(e) => {
                    // Not written: not acted on. The next exit of the
                    // store's outage, or the next agent, tries again.
                    tracing::warn!(object = %name, "grace agent: {name} container {i}: its restart cannot be recorded: {e}");
                }
            }
        }
    }

    /// Starts again every container whose back-off has passed.
    pub(crate) fn run_due<S: Store, C: Clock>(
        &mut self,
        rt: &mut Runtime<S, C, ProcessActuator>,
        logs: &ContainerLogs,
    ) {
        let now = now_ms(rt);
        while let Some(first) = self.due.first() {
            if first.0 > now {
                break;
            }
            let Some((at, name, i)) = self.due.pop_first() else {
                break;
            };
            restart(rt, logs, &name, i, at);
        }
    }
}

/// Starts container `i` of `name` again, its restart due at `at`: unless
/// the pod is being deleted (the pending restart is then dropped, R94) or
/// the entry is stale (another restart replaced it).
fn restart<S: Store, C: Clock>(
    rt: &mut Runtime<S, C, ProcessActuator>,
    logs: &ContainerLogs,
    name: &str,
    i: usize,
    at: u64,
) {
    let Some(object) = rt.object(name) else {
        return;
    };
    let Some(mut r) = object.restarts.get(i).cloned() else {
        return;
    };
    if r.restart_at_ms != Some(at) {
        return;
    }
    // The core first: from now on a delete stops the container.
    let _ = rt.handle(name, Input::container_started(i));
    let runs = rt
        .lifecycle(name)
        .and_then(|l| l.containers().get(i).map(|c| c.stage() == Stage::Running));
    if stopping(rt, name, &object) || runs != Some(true) {
        r.cancel();
        let _ = rt.update_restarts(name, with(&object, i, r));
        return;
    }
    // The last run's workload record goes before the new one is written.
    crate::process::flush_removals();
    if let Err(e) = logs.keep_previous(name, &object, i) {
        tracing::warn!(object = %name, "grace agent: {name} container {i}: its previous log cannot be kept: {e}");
    }
    let started = rt.actuator().start_container(name, &object, i);
    r.restarted(now_ms(rt));
    let status = match started {
        Ok(()) => ContainerStatus::RUNNING,
        Err(LaunchError::Config(message)) => ContainerStatus::config_error(message),
        Err(other) => ContainerStatus::cannot_run(other.message().to_owned()),
    };
    let failed = !status.is_running();
    let _ = rt.set_container_status(name, i, status);
    if let Err(e) = rt.update_restarts(name, with(&object, i, r)) {
        tracing::warn!(object = %name, "grace agent: {name} container {i}: its restart cannot be recorded: {e}");
    }
    tracing::info!(object = %name, container = i, "{name:<20} container {i}: restarted");
    if failed {
        // No process runs: an exit, restarted in turn after its back-off.
        let _ = rt.handle(name, Input::container_exited(i));
    }
}
