//! `grace agent --etcd ENDPOINTS --node NODE`: one node's agent on a store
//! shared with the agents of other nodes.
//!
//! - It runs only the objects bound to its node: its runtime is opened on
//!   the node's view of the store ([`NodeScoped`]). Requests are decided
//!   by whoever makes them ([`grace_std::api_server`]: the CLI); the agent
//!   follows the store's watch and takes every change to its objects
//!   ([`Runtime::observe`]): a new object is started, a deletion carried
//!   out, a removal stops the workload.
//! - Liveness: it holds a lease and keeps its node's liveness key bound to
//!   it ([`EtcdStore::register_node`]). If it stops reporting (crashed,
//!   frozen, cut off) the lease expires and the node is lost for everyone
//!   else: its objects stay as they are (R80) until it returns, a force
//!   delete (D4), or fencing (D7). A returning agent whose lease expired
//!   takes a new one and registers again; its runtime carries on, taking
//!   whatever was written meanwhile.
//! - Fencing: it reads its node's fencing epoch at start, and again before
//!   it handles anything after a pause of a third of its lease's TTL or
//!   more (and at least that often). Once the epoch has moved (`grace
//!   fence`), the node was declared gone and its objects removed: the
//!   agent takes no further step for them — it SIGKILLs the processes it
//!   still runs (orphans now) and exits with an error. Its writes cannot
//!   land in any case: the epoch read at start is a fencing token
//!   ([`EtcdStore::with_fencing`]) that every transaction of its runtime
//!   compares, so a write made after the fencing, even by an agent paused
//!   between its check and its write, is refused
//!   ([`StoreError::Fenced`]), and the agent stops there.
//! - Workloads outlive the agent, as with [`crate::run`]: SIGTERM or
//!   SIGINT stop it and leave them running, and the next agent of the node
//!   adopts them from its workload table (`<data-dir>/workloads-<node>`,
//!   node-local: it holds pids).
//! - A store outage is waited out: failed steps are logged and retried
//!   (the runtime reads back what it could not confirm, see
//!   [`crate::runtime::RETRY`]); the watch reopens where it stopped.

use std::io::Write;
use std::sync::mpsc;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use crate::clock::Clock;
use crate::error::AgentError;
use crate::process::Output;
use crate::process::logs::ContainerLogs;
use crate::process::{ProcessActuator, WorldEvent};
use crate::runtime::{Observed, Recovery, Runtime, RuntimeError, Transition};
use crate::store::{EtcdStore, NodeScoped, Revision, Store, StoreError};
use crate::{
    RunClock, adopt_logs, forward, log_orphans, log_transitions, open_actuator, reconcile,
    remove_logs, start, stop_on_signal, wait_for_next,
};

/// How to run an agent on a shared store.
#[derive(Clone, Debug)]
pub struct SharedAgentOptions {
    /// The node this agent runs objects for.
    pub node: String,
    /// What a restart does with a kill in progress (D6).
    pub recovery: Recovery,
    /// The TTL of the agent's lease: how long after its last sign of life
    /// its node counts as lost.
    pub lease_ttl: StdDuration,
    /// Where the workload table lives (node-local: the workloads' pids).
    pub state_dir: std::path::PathBuf,
    /// Where its containers' output goes (on this machine).
    pub logs: ContainerLogs,
}

enum Input {
    /// A change event named this object.
    Changed(String),
    /// Changes may have been missed (the store's log was trimmed): look
    /// at every object again.
    Resync,
    World(WorldEvent),
    Stop,
}

type SharedRuntime = Runtime<NodeScoped<EtcdStore>, RunClock, ProcessActuator>;

/// Runs the agent of `options.node` on `store` until SIGTERM or SIGINT
/// (`Ok`), or until its node is fenced (an error). Logs every transition
/// to `log`.
pub fn run(
    store: EtcdStore,
    options: &SharedAgentOptions,
    log: &mut impl Write,
) -> Result<(), AgentError> {
    let node = options.node.clone();
    let epoch = store.fencing_epoch(&node)?;
    let lease = store.grant_lease(options.lease_ttl)?;
    store.register_node(&node, lease)?;

    let (tx, inputs) = mpsc::channel::<Input>();
    stop_on_signal(tx.clone(), Input::Stop)?;
    spawn_heartbeat(store.clone(), node.clone(), epoch, lease, options.lease_ttl);

    // Changes after this revision reach the runtime through the watch.
    let from = store.revision()?;
    // This agent owns its process (it takes SIGTERM and SIGINT): the
    // process's children are all its workloads, so it is their subreaper.
    let (actuator, world, gone) = open_actuator(&options.state_dir, true, log)?;
    adopt_logs(&options.logs, log);
    let actuator = actuator.with_output(Output::Logs(options.logs.clone()));
    // Every write of the runtime is conditional on the epoch read above.
    let mut rt: SharedRuntime = Runtime::open(
        NodeScoped::new(store.with_fencing(&node, epoch), node.clone()),
        RunClock::new(),
        actuator,
        options.recovery,
    )?;
    let transitions = rt.subscribe();
    forward(world, tx.clone(), Input::World);
    spawn_watch(store.clone(), from, tx);

    let _ = writeln!(
        log,
        "grace agent: node {node}, etcd store {store:?}, fencing epoch {epoch}, lease {} s",
        options.lease_ttl.as_secs()
    );
    let names: Vec<String> = rt.names().map(str::to_owned).collect();
    for name in names {
        reconcile(&mut rt, &name, &gone)?;
        let _ = rt.handle_agent_sync(&name)?;
        if let Err(e) = rt.collect_garbage(&name) {
            let _ = writeln!(
                log,
                "grace agent: {name}: garbage collection: {e} (retried at the next start)"
            );
        }
    }
    log_orphans(&mut rt, log);
    options
        .logs
        .remove_unless(|name, uid| rt.object(name).is_some_and(|o| o.uid() == uid));
    let check_every = options.lease_ttl.checked_div(3).unwrap_or_default();
    let logs = &options.logs;
    let result = serve(&mut rt, &inputs, &transitions, logs, log, |since_check| {
        if since_check < check_every {
            return Ok(());
        }
        match store.fencing_epoch(&node) {
            Ok(now) if now != epoch => Err(RuntimeError::Store(StoreError::Fenced {
                node: node.clone(),
                epoch: now,
            })),
            Ok(_) => Ok(()),
            // Unknown: no step is taken until the epoch can be read.
            Err(e) => Err(RuntimeError::Store(e)),
        }
    });
    log_transitions(&transitions, log);
    crate::process::flush_removals();
    if result.as_ref().is_err_and(fenced) {
        // Orphans now: no deletion will ever stop them.
        rt.actuator().kill_all();
    } else {
        let _ = store.revoke_lease(lease);
    }
    let _ = writeln!(log, "grace agent: stopped");
    result.map_err(AgentError::from)
}

/// Keeps the lease alive every TTL / 3; once it has expired (the agent
/// was cut off or frozen for longer than the TTL), takes a new one and
/// registers the node again — unless the node was fenced meanwhile.
fn spawn_heartbeat(
    store: EtcdStore,
    node: String,
    epoch: u64,
    lease: crate::store::Lease,
    ttl: StdDuration,
) {
    std::thread::spawn(move || {
        let mut lease = lease;
        loop {
            std::thread::sleep(ttl.checked_div(3).unwrap_or_default());
            match store.keep_alive(lease) {
                Ok(()) => {}
                Err(StoreError::NotFound { .. }) => {
                    if store.fencing_epoch(&node).is_ok_and(|e| e != epoch) {
                        return;
                    }
                    if let Ok(fresh) = store.grant_lease(ttl)
                        && store.register_node(&node, fresh).is_ok()
                    {
                        lease = fresh;
                    }
                }
                // The store is away: try again next beat.
                Err(_) => {}
            }
        }
    });
}

/// Follows the store's change log from `from`, naming each changed object
/// to the runtime thread; reopens the watch where it stopped after an
/// outage.
fn spawn_watch(store: EtcdStore, from: Revision, tx: mpsc::Sender<Input>) {
    std::thread::spawn(move || {
        let mut after = from;
        loop {
            let watch = match store.watch(after) {
                Ok(w) => w,
                Err(StoreError::Compacted { .. }) => {
                    match store.revision() {
                        Ok(now) => after = now,
                        Err(_) => std::thread::sleep(StdDuration::from_secs(1)),
                    }
                    if tx.send(Input::Resync).is_err() {
                        return;
                    }
                    continue;
                }
                Err(_) => {
                    std::thread::sleep(StdDuration::from_secs(1));
                    continue;
                }
            };
            for event in watch {
                match event {
                    Ok(event) => {
                        after = event.revision;
                        if tx.send(Input::Changed(event.name)).is_err() {
                            return;
                        }
                    }
                    Err(_) => break,
                }
            }
            std::thread::sleep(StdDuration::from_millis(200));
        }
    });
}

fn serve(
    rt: &mut SharedRuntime,
    inputs: &mpsc::Receiver<Input>,
    transitions: &mpsc::Receiver<Transition>,
    logs: &ContainerLogs,
    log: &mut impl Write,
    mut still_ours: impl FnMut(StdDuration) -> Result<(), RuntimeError>,
) -> Result<(), RuntimeError> {
    let mut checked = StdInstant::now();
    // Names that hold a new object while the old one is being stopped.
    let mut waiting: Vec<String> = Vec::new();
    loop {
        let removed = log_transitions(transitions, log);
        remove_logs(rt, logs, &removed);
        let wait = wait_for_next(rt);
        let input = inputs.recv_timeout(wait);
        // Before any step: is the node still ours?
        match still_ours(checked.elapsed()) {
            Ok(()) => checked = StdInstant::now(),
            Err(e) if fenced(&e) => {
                let _ = writeln!(log, "grace agent: {e}");
                return Err(e);
            }
            Err(e) => {
                let _ = writeln!(log, "grace agent: cannot read the fencing epoch: {e}");
                std::thread::sleep(StdDuration::from_millis(500));
                continue;
            }
        }
        let step = match input {
            Ok(Input::Changed(name)) => observe(rt, &name, &mut waiting),
            Ok(Input::Resync) => {
                let mut names: Vec<String> = rt.names().map(str::to_owned).collect();
                match rt.store().list() {
                    Ok(listing) => names.extend(listing.objects.into_iter().map(|(n, ..)| n)),
                    Err(e) => {
                        let _ = writeln!(log, "grace agent: resync: {e}");
                    }
                }
                names.sort();
                names.dedup();
                names
                    .iter()
                    .try_for_each(|name| observe(rt, name, &mut waiting))
            }
            Ok(Input::World(event)) => rt.handle_world_event(event),
            Ok(Input::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
            Err(mpsc::RecvTimeoutError::Timeout) => Ok(()),
        };
        if let Err(e) = step {
            retry_unless_fenced(e, log)?;
        }
        if let Err(e) = rt.handle_timeouts() {
            retry_unless_fenced(e, log)?;
        }
        let free: Vec<String> = waiting
            .iter()
            .filter(|n| rt.lifecycle(n).is_none())
            .cloned()
            .collect();
        waiting.retain(|n| !free.contains(n));
        for name in free {
            if let Err(e) = observe(rt, &name, &mut waiting) {
                retry_unless_fenced(e, log)?;
            }
        }
    }
}

/// Whether `e` says this node was fenced: by the epoch check, or by a
/// write the store refused because the epoch had moved.
fn fenced(e: &RuntimeError) -> bool {
    matches!(e, RuntimeError::Store(StoreError::Fenced { .. }))
}

/// A step that failed is logged and tried again later, unless it failed
/// because the node was fenced: then the agent takes no further step.
fn retry_unless_fenced(e: RuntimeError, log: &mut impl Write) -> Result<(), RuntimeError> {
    if fenced(&e) {
        let _ = writeln!(log, "grace agent: {e}");
        return Err(e);
    }
    let _ = writeln!(log, "grace agent: {e} (retrying)");
    Ok(())
}

/// Takes what the store holds for `name`: starts a new object's
/// containers; a replaced one's new object waits for the old to stop.
fn observe(
    rt: &mut SharedRuntime,
    name: &str,
    waiting: &mut Vec<String>,
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
    let _ = rt.collect_garbage(name)?;
    Ok(())
}

/// `grace fence NODE`: declares `node` gone for good (D7). Refused while
/// the node's agent is alive (its lease unexpired) unless `even_if_alive`.
/// Moves the node's fencing epoch, then deletes its objects as PodGC does
/// (R82). Returns the names handled.
pub fn fence(
    store: &EtcdStore,
    node: &str,
    even_if_alive: bool,
) -> Result<Vec<String>, AgentError> {
    if !even_if_alive && store.alive_nodes()?.iter().any(|n| n == node) {
        return Err(AgentError::NodeAlive {
            node: node.to_owned(),
        });
    }
    // Moved by us or, concurrently, by another fencer: either way the
    // agent's epoch is behind.
    let seen = store.fencing_epoch(node)?;
    let _ = store.bump_fencing_epoch(node, seen)?;
    let now = crate::clock::SystemClock::new().now();
    Ok(grace_std::api_server::fence_node(store, now, node)?)
}
