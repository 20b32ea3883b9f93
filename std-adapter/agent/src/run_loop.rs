//! The agent's one event loop, the same for the local agent (requests
//! from its socket) and for a node agent on a shared store (changes from
//! the store's watch): one thread runs the [`Runtime`] on the [`Input`]s
//! of one channel, whatever the store.
//!
//! What differs between the two is where inputs come from (the socket's
//! connection threads, or the watch thread) and one check before each
//! step, which only a node agent makes: is its node still its own (not
//! fenced, D7)?

use std::sync::mpsc;
use std::time::Duration as StdDuration;

use crate::api::{ApiError, ErrorKind, Reply, Request};
use crate::clock::Clock;
use crate::error::AgentError;
use crate::outage::{Outage, SharedStatus};
use crate::process::ProcessActuator;
use crate::process::logs::ContainerLogs;
use crate::runtime::{Observed, Runtime, RuntimeError, Transition};
use crate::store::{Store, StoreError};
use grace_core::Action;

use crate::batched;
use crate::containers::start;
use crate::input::Input;
use crate::on_exit::OnExit;
use crate::restarts::Restarts;
use crate::runtime::Change;
use crate::startup::{RunClock, bound_here};

/// How the runtime thread serves.
pub(crate) struct Serving<'a> {
    /// The node whose objects this agent runs.
    pub(crate) node: &'a str,
    pub(crate) logs: &'a ContainerLogs,
    /// Change requests that wait together are committed together (see
    /// [`batched`]).
    pub(crate) batching: bool,
    pub(crate) on_exit: OnExit,
    /// What the connection threads tell `grace describe` of the agent.
    pub(crate) status: SharedStatus,
}

/// What [`log_transitions`] saw: the objects whose records were removed,
/// and the containers reported stopped (object, container).
#[derive(Default)]
pub(crate) struct Logged {
    pub(crate) removed: Vec<String>,
    pub(crate) stopped: Vec<(String, usize)>,
}

/// Logs the transitions reported since the last call, an info event each
/// (the object's name padded, as a column, and the change; the object and
/// the transition's wall-clock time, Unix seconds, as fields); returns the
/// objects whose records were removed and the containers that stopped.
pub(crate) fn log_transitions(transitions: &mpsc::Receiver<Transition>) -> Logged {
    let mut logged = Logged::default();
    for t in transitions.try_iter() {
        match t.change {
            Change::Action(Action::Remove { .. }) => logged.removed.push(t.object.clone()),
            Change::Action(Action::ContainerStopped { container }) => logged
                .stopped
                .push((t.object.clone(), usize::from(container))),
            _ => {}
        }
        let millis = t.at.wall.as_unix_millis();
        tracing::info!(
            object = %t.object,
            at = %format_args!("{}.{:03}", millis / 1000, millis % 1000),
            "{:<20} {}",
            t.object,
            t.change
        );
    }
    logged
}

/// Removes the logs of the objects whose records were removed (but not
/// those of a new object under the same name).
pub(crate) fn remove_logs<S: Store, C: Clock>(
    rt: &Runtime<S, C, ProcessActuator>,
    logs: &ContainerLogs,
    removed: &[String],
) {
    let current: Vec<Option<String>> = removed
        .iter()
        .map(|name| rt.object(name).map(|o| o.uid().to_owned()))
        .collect();
    logs.remove_objects(
        removed
            .iter()
            .zip(&current)
            .map(|(name, uid)| (name.as_str(), uid.as_deref())),
    );
}

/// Once the loop has ended: the transitions still queued are logged,
/// the logs of removed records removed, and the workload records and logs
/// still queued for removal go before the agent does (one left by a crash
/// is found at the next start).
pub(crate) fn wind_down<S: Store>(
    rt: &Runtime<S, RunClock, ProcessActuator>,
    transitions: &mpsc::Receiver<Transition>,
    logs: &ContainerLogs,
) {
    let removed = log_transitions(transitions).removed;
    remove_logs(rt, logs, &removed);
    crate::process::flush_removals();
}

/// How long an agent loop may wait for input: until the runtime's next
/// deadline, at most 500 ms.
pub(crate) fn wait_for_next<S: Store, C: Clock, A: crate::runtime::Actuator>(
    rt: &Runtime<S, C, A>,
) -> StdDuration {
    rt.poll_timeout()
        .map(|t| t.saturating_duration_since(rt.clock().now().mono))
        .map_or(StdDuration::from_millis(500), |d| {
            StdDuration::from_millis(d.as_millis().min(500))
        })
}

/// The runtime thread's loop, until [`Input::Stop`] (with
/// [`OnExit::Stop`]: until the workloads are stopped too) or an error
/// that stops the agent (its node fenced, or not a store's failure).
/// `still_ours` is asked before each step (a node agent's fencing check):
/// an error other than [`StoreError::Fenced`] means "unknown", and no step
/// is taken until it passes.
pub(crate) fn serve<S: Store>(
    rt: &mut Runtime<S, RunClock, ProcessActuator>,
    inputs: &mpsc::Receiver<Input>,
    transitions: &mpsc::Receiver<Transition>,
    serving: Serving<'_>,
    mut still_ours: impl FnMut() -> Result<(), RuntimeError>,
) -> Result<(), RuntimeError> {
    let Serving {
        node,
        logs,
        batching,
        on_exit,
        status,
    } = serving;
    // The agent's own steps that cannot be written wait, retried with
    // back-off: the agent stays up (see `outage`).
    let mut outage = Outage::new(status);
    let mut next = None;
    // With `OnExit::Stop`, once stopping: the objects whose processes are
    // awaited.
    let mut stopping: Option<Vec<String>> = None;
    // Names that hold a new object while the old one is being stopped.
    let mut waiting: Vec<String> = Vec::new();
    // Exited containers waiting out their back-off (R95).
    let mut restarts = Restarts::default();
    restarts.recover(rt, node);
    loop {
        let Logged { removed, stopped } = log_transitions(transitions);
        remove_logs(rt, logs, &removed);
        restarts.exited(rt, &stopped);
        forget_not_run(rt, &removed, node);
        // A removal may free a foreground owner or leave dependents
        // without an owner. A failure is tried again at the next one.
        if !removed.is_empty()
            && rt.garbage_pending()
            && let Err(e) = crate::collect::collect(rt, node, None)
        {
            tracing::warn!("grace agent: garbage collection: {e} (retried at the next removal)");
        }
        if let Some(awaited) = &mut stopping {
            awaited.retain(|name| rt.actuator().holds(name));
            if awaited.is_empty() {
                return Ok(());
            }
        }
        let wait = outage.wait(wait_for_next(rt));
        let wait = restarts.wait(rt).map_or(wait, |r| r.min(wait));
        let input = match next.take() {
            Some(input) => Ok(input),
            None => inputs.recv_timeout(wait),
        };
        // Before any step: is the node still ours? (Stopping takes none.)
        if !matches!(
            input,
            Ok(Input::Stop) | Err(mpsc::RecvTimeoutError::Disconnected)
        ) {
            match still_ours() {
                Ok(()) => {}
                Err(e) if fenced(&e) => {
                    tracing::error!("grace agent: {e}");
                    return Err(e);
                }
                Err(e) => {
                    tracing::warn!("grace agent: cannot read the fencing epoch: {e}");
                    // The input waits for the check to pass.
                    next = input.ok();
                    std::thread::sleep(StdDuration::from_millis(500));
                    continue;
                }
            }
        }
        match input {
            // Nothing new starts while the workloads are being stopped.
            Ok(Input::Request(request @ (Request::Apply { .. } | Request::Put { .. }), reply))
                if stopping.is_some() =>
            {
                let _ = reply.send(Reply::Error(ApiError {
                    kind: ErrorKind::Internal,
                    message: format!(
                        "the agent is stopping its workloads (--on-exit=stop): {} refused",
                        request_name(&request)
                    ),
                }));
            }
            // One at a time while stopping: each passes the check above.
            Ok(Input::Request(request, reply))
                if batching && stopping.is_none() && batched::batchable(&request) =>
            {
                let first = Input::Request(request, reply);
                let served = batched::serve_batch(rt, first, inputs, node, true);
                next = outage.served(served)?;
            }
            Ok(Input::Request(request, reply)) => {
                let _ = reply.send(batched::handle(rt, request, node));
            }
            Ok(Input::World(event)) => {
                // With the events and requests already waiting, in one
                // commit.
                let requests = batching && stopping.is_none();
                let served = batched::serve_batch(rt, Input::World(event), inputs, node, requests);
                next = outage.served(served)?;
            }
            Ok(Input::Changed(name)) => {
                if let Err(e) = observe(rt, &name, &mut waiting, node) {
                    retry_unless_fenced(e)?;
                }
            }
            Ok(Input::Resync) => resync(rt, &mut waiting, node)?,
            Ok(Input::Stop) if on_exit == OnExit::Stop => {
                if stopping.is_none() {
                    stopping = Some(stop_workloads(rt, node));
                }
            }
            Ok(Input::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if outage.due() {
            own_steps(rt, &mut outage)?;
        }
        take_freed(rt, &mut waiting, node)?;
        if stopping.is_none() {
            restarts.run_due(rt, logs);
        }
    }
}

/// The agent's own steps: the process events whose write failed, offered
/// again, then the deadlines that have passed. A write that fails on the
/// store leaves them for the next retry ([`Outage`]); any other error
/// stops the agent.
fn own_steps<S: Store>(
    rt: &mut Runtime<S, RunClock, ProcessActuator>,
    outage: &mut Outage,
) -> Result<(), RuntimeError> {
    let events = outage.take_events();
    if !events.is_empty() {
        let mut events = events.into_iter().peekable();
        while events.peek().is_some() {
            let mut batch = rt.open_batch();
            let mut failed = None;
            while let Some(event) = events.next_if(|e| batch.has_room_for(e.object())) {
                if let Err(e) = batch.handle_world_event(event) {
                    failed.get_or_insert(e);
                }
            }
            let (committed, unwritten) = batch.commit_keeping_events();
            outage.keep(unwritten);
            if let Some(e) = failed.or(committed.err()) {
                outage.keep(events.collect());
                return outage.store_failed(e);
            }
        }
    }
    match rt.handle_timeouts() {
        Ok(()) => {
            outage.succeeded();
            Ok(())
        }
        Err(e) => outage.store_failed(e),
    }
}

/// Whether `e` says this node was fenced: by the epoch check, or by a
/// write the store refused because the epoch had moved.
pub(crate) fn fenced(e: &RuntimeError) -> bool {
    matches!(e, RuntimeError::Store(StoreError::Fenced { .. }))
}

/// A step of a store's change that failed is logged and tried again
/// later, unless it failed because the node was fenced: then the agent
/// takes no further step.
fn retry_unless_fenced(e: RuntimeError) -> Result<(), RuntimeError> {
    if fenced(&e) {
        tracing::error!("grace agent: {e}");
        return Err(e);
    }
    tracing::warn!("grace agent: {e} (retrying)");
    Ok(())
}

/// Takes what the store holds for `name` (a node agent follows the
/// store's watch): starts a new object's containers; a replaced one's new
/// object waits for the old to stop.
fn observe<S: Store>(
    rt: &mut Runtime<S, RunClock, ProcessActuator>,
    name: &str,
    waiting: &mut Vec<String>,
    node: &str,
) -> Result<(), RuntimeError> {
    match rt.observe(name)? {
        Observed::New => start(rt, name),
        Observed::Replaced => {
            if !waiting.iter().any(|n| n == name) {
                waiting.push(name.to_owned());
            }
        }
        Observed::Changed | Observed::Unchanged => {}
    }
    // The garbage collector's step, should the request's maker have left
    // it undone (it runs it right after the delete).
    crate::collect::collect(rt, node, Some(name))
}

/// [`Input::Resync`]: every object known or stored is looked at again.
fn resync<S: Store>(
    rt: &mut Runtime<S, RunClock, ProcessActuator>,
    waiting: &mut Vec<String>,
    node: &str,
) -> Result<(), RuntimeError> {
    let mut names: Vec<String> = rt.names().map(str::to_owned).collect();
    match rt.store().list() {
        Ok(listing) => names.extend(listing.objects.into_iter().map(|(n, ..)| n)),
        Err(e) => {
            tracing::warn!("grace agent: resync: {e}");
        }
    }
    names.sort();
    names.dedup();
    match names
        .iter()
        .try_for_each(|name| observe(rt, name, waiting, node))
    {
        Ok(()) => Ok(()),
        Err(e) => retry_unless_fenced(e),
    }
}

/// The new objects that waited for their name's old one to be removed
/// and whose name is free now: taken.
fn take_freed<S: Store>(
    rt: &mut Runtime<S, RunClock, ProcessActuator>,
    waiting: &mut Vec<String>,
    node: &str,
) -> Result<(), RuntimeError> {
    let free: Vec<String> = waiting
        .iter()
        .filter(|n| rt.lifecycle(n).is_none())
        .cloned()
        .collect();
    waiting.retain(|n| !free.contains(n));
    for name in free {
        if let Err(e) = observe(rt, &name, waiting, node) {
            retry_unless_fenced(e)?;
        }
    }
    Ok(())
}

/// Forgets the objects whose records were removed (`removed`) and that
/// this agent never ran (not bound here, none of their processes held):
/// nobody here will report their containers stopped, and their names are
/// free for a new object at once, as `get` says.
fn forget_not_run<S: Store>(
    rt: &mut Runtime<S, RunClock, ProcessActuator>,
    removed: &[String],
    node: &str,
) {
    for name in removed {
        if !bound_here(rt, name, node) && !rt.actuator().holds(name) {
            let _ = rt.forget_removed(name);
        }
    }
}

/// The name a change request is about.
fn request_name(request: &Request) -> &str {
    match request {
        Request::Apply { name, .. }
        | Request::Put { name, .. }
        | Request::Delete { name, .. }
        | Request::RemoveFinalizer { name, .. } => name,
        Request::Get { name } => name.as_deref().unwrap_or(""),
        Request::Watch | Request::Status => "",
    }
}

/// [`OnExit::Stop`]: evicts every object bound here whose containers run
/// and whose kill has not begun, with its own grace (R84: the kubelet's
/// graceful node shutdown kills through the eviction path). Returns the
/// objects to wait for: those evicted and those being deleted already. One
/// that cannot be evicted (the store refused the write) is named in the
/// log and left running: it is not waited for.
fn stop_workloads<S: Store>(
    rt: &mut Runtime<S, RunClock, ProcessActuator>,
    node: &str,
) -> Vec<String> {
    let names: Vec<String> = rt
        .names()
        .map(str::to_owned)
        .filter(|name| bound_here(rt, name, node))
        .collect();
    let mut awaited = Vec::new();
    let mut evicted = 0_usize;
    for name in names {
        let Some(lifecycle) = rt.lifecycle(&name) else {
            continue;
        };
        if lifecycle.agent().killing {
            // Its deletion goes on as it is.
            awaited.push(name);
            continue;
        }
        let grace = lifecycle
            .record()
            .termination_grace_period_seconds
            .unwrap_or(DEFAULT_GRACE_SECONDS);
        match rt
            .handle(&name, grace_core::Input::evict(grace))
            .map(|a| a.handled())
        {
            Ok(grace_core::Handled::Applied) => {
                evicted = evicted.saturating_add(1);
                awaited.push(name);
            }
            Ok(_) => {}
            Err(e) => {
                tracing::error!(object = %name, "grace agent: {name}: cannot stop it: {e} (left running)");
            }
        }
    }
    tracing::info!(
        "grace agent: stopping: {evicted} object(s) evicted with their grace (--on-exit=stop)"
    );
    awaited
}

/// The grace of an object that names none (R18).
const DEFAULT_GRACE_SECONDS: i64 = 30;

/// An agent serving on a thread of its own: what [`crate::Agent`] and a
/// node agent's handle hold (each stops it and waits for it when dropped).
#[derive(Debug)]
pub(crate) struct Running {
    stop: mpsc::Sender<Input>,
    thread: Option<std::thread::JoinHandle<Result<(), AgentError>>>,
}

impl Running {
    /// Runs `serve` on a thread named `name`; `stop` is the sender of its
    /// inputs.
    pub(crate) fn spawn(
        name: String,
        stop: mpsc::Sender<Input>,
        serve: impl FnOnce() -> Result<(), AgentError> + Send + 'static,
    ) -> Result<Running, AgentError> {
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(serve)
            .map_err(|e| AgentError::io("the agent's thread", e))?;
        Ok(Running {
            stop,
            thread: Some(thread),
        })
    }

    /// Asks the agent to stop, as SIGTERM does; returns at once.
    pub(crate) fn shutdown(&self) {
        let _ = self.stop.send(Input::Stop);
    }

    /// Waits until the agent has stopped; the error is why it stopped, if
    /// not because it was asked to.
    pub(crate) fn wait(&mut self) -> Result<(), AgentError> {
        match self.thread.take().map(std::thread::JoinHandle::join) {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(e),
            Some(Err(_)) => Err(AgentError::Panicked),
        }
    }
}
