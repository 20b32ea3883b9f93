//! The agent's one start-up, the same for the local agent and for a node
//! agent on a shared store: the workloads an earlier agent left are
//! adopted ([`open`]), the runtime opened on the store, then what was
//! running and the steps left undone are picked up ([`pick_up`]).
//!
//! Between the two, each kind of agent opens where its inputs come from:
//! the socket (the local agent), the store's watch (a node agent).

use std::path::Path;
use std::sync::mpsc;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::clock::{Clock, SystemClock};
use crate::containers::start;
use crate::error::AgentError;
use crate::input::Input;
use crate::process::logs::ContainerLogs;
use crate::process::{Containment, Environment, Output, ProcessActuator, WorldEvent};
use crate::runtime::{Recovery, Runtime, RuntimeError, Transition};
use crate::store::Store;

/// The agent's clock: the machine's, whose epoch is the boot. Deadlines
/// written by an agent are honoured by the next one on the same boot (its
/// workloads are still there); after a reboot they have no meaning.
pub(crate) type RunClock = SystemClock;

/// Whether `name`'s object is bound to `node` (this agent runs it).
pub(crate) fn bound_here<S: Store>(
    rt: &Runtime<S, RunClock, ProcessActuator>,
    name: &str,
    node: &str,
) -> bool {
    rt.object(name)
        .and_then(|o| o.node)
        .is_some_and(|n| n == node)
}

/// What an agent opens on `store`, before its inputs are connected.
pub(crate) struct Opened<S: Store> {
    pub(crate) rt: Runtime<S, RunClock, ProcessActuator>,
    /// The runtime's transitions, for the log.
    pub(crate) transitions: mpsc::Receiver<Transition>,
    /// The workloads reported gone, or of unreadable records (see
    /// [`reconcile`]).
    pub(crate) gone: Vec<Workload>,
}

/// Opens an agent's runtime on `store`: takes over the output of the
/// containers an earlier agent left ([`adopt_logs`]), adopts its
/// workloads from the table in `state_dir` ([`open_actuator`]), and
/// forwards every process event to `tx`.
pub(crate) fn open<S: Store>(
    store: S,
    state_dir: &Path,
    subreaper: bool,
    logs: &ContainerLogs,
    recovery: Recovery,
    tx: &mpsc::Sender<Input>,
) -> Result<Opened<S>, AgentError> {
    adopt_logs(logs);
    let (actuator, world, gone) = open_actuator(state_dir, subreaper)?;
    let actuator = actuator.with_output(Output::Logs(logs.clone()));
    let mut rt = Runtime::open(store, RunClock::new(), actuator, recovery)?;
    let transitions = rt.subscribe();
    forward(world, tx.clone(), Input::World)?;
    Ok(Opened {
        rt,
        transitions,
        gone,
    })
}

/// Picks up what was running, deletions accepted before a restart, and
/// the garbage collector's steps left undone; stops the orphans (see
/// [`log_orphans`]); removes the logs of records removed while no agent
/// was running.
pub(crate) fn pick_up<S: Store>(
    rt: &mut Runtime<S, RunClock, ProcessActuator>,
    node: &str,
    gone: &[Workload],
    logs: &ContainerLogs,
) -> Result<(), AgentError> {
    let names: Vec<String> = rt.names().map(str::to_owned).collect();
    for name in names {
        if bound_here(rt, &name, node) {
            reconcile(rt, &name, gone)?;
            let _ = rt.handle(&name, grace_core::Input::AgentSync)?;
        }
        if let Err(e) = crate::collect::collect(rt, node, Some(&name)) {
            tracing::warn!(
                object = %name,
                "grace agent: {name}: garbage collection: {e} (retried at the next start)"
            );
        }
    }
    log_orphans(rt)?;
    let stored: Vec<(String, String)> = rt
        .names()
        .filter_map(|name| Some((name.to_owned(), rt.object(name)?.uid().to_owned())))
        .collect();
    logs.retain(
        stored
            .iter()
            .map(|(name, uid)| (name.as_str(), uid.as_str())),
    );
    Ok(())
}

/// Takes over the log pipes of the containers an earlier agent left
/// running ([`ContainerLogs::adopt`]), before any container is started;
/// a failure is logged (those containers' output waits in their pipes).
fn adopt_logs(logs: &ContainerLogs) {
    if let Err(e) = logs.adopt() {
        tracing::error!("grace agent: cannot take over the output of earlier containers: {e}");
    }
}

/// `(object, container, hook)`: one workload or pre-stop hook.
pub(crate) type Workload = (String, usize, bool);

/// Opens the process actuator on the workload table in `dir`, adopting
/// what an earlier agent left running, and logs what it found and how
/// workloads are contained.
fn open_actuator(
    dir: &Path,
    subreaper: bool,
) -> Result<(ProcessActuator, mpsc::Receiver<WorldEvent>, Vec<Workload>), AgentError> {
    // One pidfd per workload: thousands of them need more than the usual
    // soft limit of open files.
    match crate::process::raise_open_files_limit() {
        Ok((soft, _)) => {
            let soft = soft.map_or_else(|| "unlimited".to_owned(), |n| n.to_string());
            tracing::debug!("grace agent: open files limit {soft}");
        }
        Err(e) => {
            tracing::warn!("grace agent: the open files limit stays as it is: {e}");
        }
    }
    // Orphans of the workloads come to the agent, which reaps them at once
    // (a zombie left to a slow or absent PID 1 would hold its deletion).
    if !subreaper {
        tracing::info!(
            "grace agent: orphans go to PID 1 (not a subreaper: AgentOptions::subreaper is off)"
        );
    } else if let Err(e) = crate::process::become_subreaper() {
        tracing::warn!("grace agent: orphans go to PID 1 (not a subreaper: {e})");
    }
    let (actuator, world, adoption) = ProcessActuator::with_state_dir(dir)
        .map_err(|e| AgentError::io(format!("the workload table {}", dir.display()), e))?;
    // A pod's processes get their own environment, none of the agent's.
    let actuator = actuator.with_environment(Environment::Container);
    let containment = match (actuator.containment(), actuator.cgroup_root()) {
        (Containment::Cgroups, Some(root)) => format!("a cgroup v2 each, under {}", root.display()),
        _ => "a process group each (no writable cgroup v2 hierarchy)".to_owned(),
    };
    tracing::info!("grace agent: workloads run in {containment}");
    for (object, container, hook) in &adoption.adopted {
        let what = if *hook { "pre-stop hook" } else { "container" };
        tracing::info!(
            %object,
            container,
            hook,
            "grace agent: adopted {object} {what} {container}"
        );
    }
    for (object, container, hook) in &adoption.gone {
        let what = if *hook { "pre-stop hook" } else { "container" };
        tracing::info!(
            %object,
            container,
            hook,
            "grace agent: {object} {what} {container} ended while no agent ran"
        );
    }
    for (object, container) in &adoption.never_ran {
        tracing::info!(
            %object,
            container,
            "grace agent: {object} container {container} never ran (an agent stopped before its start)"
        );
    }
    // A record that cannot be read may stand for a process that still
    // runs: its container is not reported stopped (it stays as it is).
    let mut unknown = adoption.gone;
    for path in &adoption.unreadable {
        tracing::warn!(
            record = %path.display(),
            "grace agent: unreadable workload record {}: its container is left as it is",
            path.display()
        );
        unknown.extend(crate::process::workload_of_record(path));
    }
    Ok((actuator, world, unknown))
}

/// Stops the adopted workloads whose object is gone (force-deleted while
/// their kill was still owed, or removed while no agent ran) as a force
/// delete does, carrying on a kill an earlier agent owed on its deadline
/// ([`ProcessActuator::stop_orphans`]), and logs each.
fn log_orphans<S: Store, C: Clock>(
    rt: &mut Runtime<S, C, ProcessActuator>,
) -> Result<(), AgentError> {
    let tracked: std::collections::BTreeSet<String> = rt.names().map(str::to_owned).collect();
    let now = rt.clock().now().mono;
    let stops = rt
        .actuator()
        .stop_orphans(|object| tracked.contains(object), now)
        .map_err(|e| AgentError::io("the thread that SIGKILLs orphaned workloads", e))?;
    for stop in stops {
        match stop {
            crate::process::OrphanStop::HookCutOff { object, container } => tracing::info!(
                %object,
                container,
                hook = true,
                "grace agent: {object} pre-stop hook {container}: its object is gone: cut off"
            ),
            crate::process::OrphanStop::Stopping {
                object,
                container,
                signalled_now,
                sigkill_at,
            } => {
                let ms = sigkill_at.saturating_duration_since(now).as_millis();
                let signal = if signalled_now {
                    "stop signal sent now"
                } else {
                    "stop signal sent before"
                };
                tracing::info!(
                    %object,
                    container,
                    "grace agent: {object} container {container} runs but its object is gone: {signal}, SIGKILL in {ms} ms unless it exits"
                );
            }
        }
    }
    Ok(())
}

/// After a restart: a container the runtime still counts as running, or a
/// hook it still waits for, that is neither adopted nor about to be
/// reported gone by the reaper nor of an unreadable record (`gone`) never
/// ran: it is reported stopped (it was started by no one, or its start
/// failed).
fn reconcile<S: Store, C: Clock>(
    rt: &mut Runtime<S, C, ProcessActuator>,
    name: &str,
    gone: &[Workload],
) -> Result<(), RuntimeError> {
    let Some(lifecycle) = rt.lifecycle(name) else {
        return Ok(());
    };
    // Created but never started (the agent stopped in between): started
    // now, unless its deletion has begun.
    let never_started = rt.object(name).is_some_and(|o| {
        o.status.is_empty() && !o.containers.is_empty() && o.record.deletion_timestamp.is_none()
    });
    if never_started
        && lifecycle
            .containers()
            .iter()
            .all(|c| c.stage() == grace_core::Stage::Running)
    {
        start(rt, name);
        return Ok(());
    }
    let reported = |c: usize, hook: bool| {
        gone.iter()
            .any(|(o, i, h)| o == name && *i == c && *h == hook)
    };
    for (i, c) in lifecycle.containers().iter().enumerate() {
        match c.stage() {
            grace_core::Stage::Stopped => {}
            grace_core::Stage::PreStop { .. } => {
                if !rt.actuator().hook_running(name, i) && !reported(i, true) {
                    let _ = rt.handle(name, grace_core::Input::pre_stop_finished(i))?;
                }
                if !rt.actuator().is_running(name, i) && !reported(i, false) {
                    let _ = rt.handle(name, grace_core::Input::container_exited(i))?;
                }
            }
            _ => {
                if !rt.actuator().is_running(name, i) && !reported(i, false) {
                    let _ = rt.handle(name, grace_core::Input::container_exited(i))?;
                }
            }
        }
    }
    Ok(())
}

/// Sends `stop` to `tx` on the first SIGTERM or SIGINT (from a thread of
/// its own).
pub(crate) fn stop_on_signal<I: Send + 'static>(
    tx: mpsc::Sender<I>,
    stop: I,
) -> Result<(), AgentError> {
    let mut signals = Signals::new([SIGTERM, SIGINT]).map_err(|e| AgentError::io("signals", e))?;
    std::thread::Builder::new()
        .name("grace-signals".into())
        .spawn(move || {
            if signals.forever().next().is_some() {
                let _ = tx.send(stop);
            }
        })
        .map_err(|e| AgentError::io("the agent's signal thread", e))?;
    Ok(())
}

/// Forwards every event of `events` to `tx` as an input (from a thread of
/// its own), until either side is gone.
fn forward<T: Send + 'static, I: Send + 'static>(
    events: mpsc::Receiver<T>,
    tx: mpsc::Sender<I>,
    input: fn(T) -> I,
) -> Result<(), AgentError> {
    std::thread::Builder::new()
        .name("grace-events".into())
        .spawn(move || {
            for event in events {
                if tx.send(input(event)).is_err() {
                    break;
                }
            }
        })
        .map(drop)
        .map_err(|e| AgentError::io("the agent's event thread", e))
}
