//! `grace agent --etcd ENDPOINTS --node NODE`: one node's agent on a store
//! shared with the agents of other nodes ([`run`]; [`NodeAgent::start`]
//! in a program). It runs the local agent's start-up and event loop; its
//! inputs are the store's watch, not a socket.
//!
//! - Pods that name no node are bound by the agents, least loaded first
//!   (see `bind`: a wait proportional to the pods bound here, then a
//!   compare-and-swap on the pod's revision; exactly one agent wins).
//! - It runs the garbage collector over the whole store when its watch
//!   shows a removal or a GC finalizer on an object being deleted (see
//!   `shared_gc`): dependents go with their owner, across nodes.
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

use std::sync::mpsc;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use crate::clock::Clock;
use crate::error::AgentError;
use crate::input::Input;
use crate::on_exit::OnExit;
use crate::outage::SharedStatus;
use crate::process::ProcessActuator;
use crate::process::logs::ContainerLogs;
use crate::run_loop::{self, Running, Serving, fenced};
use crate::runtime::{Recovery, Runtime, RuntimeError, Transition};
use crate::startup::{self, RunClock, stop_on_signal};
use crate::store::{EtcdStore, EventKind, Lease, NodeScoped, Revision, Store, StoreError};

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
    /// Whether the agent makes its process a child subreaper, as `grace
    /// agent --etcd` does: see [`crate::AgentOptions::subreaper`] (off in
    /// a program that waits for children of its own).
    pub subreaper: bool,
}

type SharedRuntime = Runtime<NodeScoped<EtcdStore>, RunClock, ProcessActuator>;

/// Runs the agent of `options.node` on `store` on the calling thread until
/// SIGTERM or SIGINT (`Ok`), or until its node is fenced (an error), as
/// `grace agent --etcd` does. Logs every transition (see [its
/// log](crate#its-log)). To run one
/// inside a program that owns its signals, see [`NodeAgent::start`].
pub fn run(store: EtcdStore, options: &SharedAgentOptions) -> Result<(), AgentError> {
    let (started, _stop) = start(store, options, true)?;
    started.serve()
}

/// A node agent on a shared store running inside this process, on a
/// thread of its own: the handle [`NodeAgent::start`] returns, as
/// [`crate::Agent`] is for the local agent.
///
/// It runs the objects bound to its node until [`NodeAgent::shutdown`] or
/// until its node is fenced; it installs no signal handler. Its workloads
/// outlive it: the next agent of the node adopts them. Dropping the
/// handle stops the agent and waits for it, as [`NodeAgent::join`] does.
///
/// ```no_run
/// use grace_agent::node_agent::{NodeAgent, SharedAgentOptions};
/// use grace_agent::container_logs;
/// use grace_std::process::logs::LogLimits;
/// use grace_std::runtime::Recovery;
/// use grace_std::store::EtcdStore;
///
/// let dir = std::path::Path::new("/var/lib/my-orchestrator/grace");
/// let store = EtcdStore::connect(&["http://127.0.0.1:2379"])?;
/// let options = SharedAgentOptions {
///     node: "node-a".to_owned(),
///     recovery: Recovery::HonourOriginalDeadline,
///     lease_ttl: std::time::Duration::from_secs(10),
///     state_dir: dir.join("workloads-node-a"),
///     logs: container_logs(dir, Some("node-a"), LogLimits::default()),
///     subreaper: false,
/// };
/// let agent = NodeAgent::start(store, options)?;
/// // ... objects bound to node-a are run until:
/// agent.shutdown();
/// agent.join()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct NodeAgent {
    running: Running,
    node: String,
}

impl NodeAgent {
    /// Starts the agent of `options.node` on `store`, logging every
    /// transition (see [its log](crate#its-log)): its fencing epoch read, its lease taken and its
    /// node registered, the workloads an earlier agent of the node left
    /// adopted when this returns; the agent then runs on a thread of its
    /// own.
    pub fn start(store: EtcdStore, options: SharedAgentOptions) -> Result<NodeAgent, AgentError> {
        let (started, stop) = start(store, &options, false)?;
        let name = format!("grace-agent {}", options.node);
        let running = Running::spawn(name, stop, move || started.serve())?;
        Ok(NodeAgent {
            running,
            node: options.node,
        })
    }

    /// The node this agent runs objects for.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Asks the agent to stop, as SIGTERM stops `grace agent --etcd`;
    /// returns at once. [`NodeAgent::join`] waits for it.
    pub fn shutdown(&self) {
        self.running.shutdown();
    }

    /// Waits until the agent has stopped: its lease revoked (its node is
    /// lost for the others at once), its workloads left running. The
    /// error is why it stopped, if not because it was asked to (its node
    /// fenced: its processes were killed).
    pub fn join(mut self) -> Result<(), AgentError> {
        self.running.wait()
    }
}

impl Drop for NodeAgent {
    /// Stops the agent and waits for it.
    fn drop(&mut self) {
        self.running.shutdown();
        let _ = self.running.wait();
    }
}

/// A node agent whose start went through: what its runtime thread serves.
struct Started {
    rt: SharedRuntime,
    inputs: mpsc::Receiver<Input>,
    transitions: mpsc::Receiver<Transition>,
    logs: ContainerLogs,
    store: EtcdStore,
    node: String,
    epoch: u64,
    lease_ttl: StdDuration,
    heartbeat: Heartbeat,
}

/// Starts the agent of `options.node`: reads its fencing epoch, registers
/// its node under a lease kept alive, opens the runtime on the node's view
/// of the store (every write conditional on the epoch), follows the
/// store's watch and picks up what an earlier agent left; with `signals`,
/// the first SIGTERM or SIGINT stops it. Returns it with the sender of its
/// inputs (an [`Input::Stop`] stops it).
fn start(
    store: EtcdStore,
    options: &SharedAgentOptions,
    signals: bool,
) -> Result<(Started, mpsc::Sender<Input>), AgentError> {
    let node = options.node.clone();
    let epoch = store.fencing_epoch(&node)?;
    let lease = store.grant_lease(options.lease_ttl)?;
    store.register_node(&node, lease)?;

    let (tx, inputs) = mpsc::channel::<Input>();
    if signals {
        stop_on_signal(tx.clone(), Input::Stop)?;
    }
    let heartbeat = Heartbeat::spawn(store.clone(), node.clone(), epoch, lease, options.lease_ttl)?;

    // Changes after this revision reach the runtime through the watch.
    let from = store.revision()?;
    // Every write of the runtime is conditional on the epoch read above.
    let startup::Opened {
        mut rt,
        transitions,
        gone,
    } = startup::open(
        NodeScoped::new(store.with_fencing(&node, epoch), node.clone()),
        &options.state_dir,
        options.subreaper,
        &options.logs,
        options.recovery,
        &tx,
    )?;
    // Unbound pods are offered to this node's binder (see `bind`), whose
    // writes carry the node's fencing token too.
    let binder = crate::bind::spawn(store.with_fencing(&node, epoch), node.clone())?;
    // So is the garbage collector (owner references), over the whole
    // store: its runtime sees its own node's objects only.
    let collector = crate::shared_gc::spawn(store.with_fencing(&node, epoch))?;
    // What was left undone while no agent ran (a crash between a delete
    // and its collection).
    let _ = collector.send(());
    spawn_watch(store.clone(), from, tx.clone(), binder, collector)?;

    tracing::info!(
        "grace agent: node {node}, etcd store {store:?}, fencing epoch {epoch}, lease {} s",
        options.lease_ttl.as_secs()
    );
    startup::pick_up(&mut rt, &node, &gone, &options.logs)?;
    let started = Started {
        rt,
        inputs,
        transitions,
        logs: options.logs.clone(),
        store,
        node,
        epoch,
        lease_ttl: options.lease_ttl,
        heartbeat,
    };
    Ok((started, tx))
}

impl Started {
    /// Serves until stopped or fenced, then revokes the lease (stopped) or
    /// kills the workloads (fenced: orphans now).
    fn serve(self) -> Result<(), AgentError> {
        let Started {
            mut rt,
            inputs,
            transitions,
            logs,
            store,
            node,
            epoch,
            lease_ttl,
            heartbeat,
        } = self;
        // The fencing epoch is read again before any step after a third
        // of the lease's TTL without a read (a pause, or just time).
        let check_every = lease_ttl.checked_div(3).unwrap_or_default();
        let mut checked = StdInstant::now();
        let still_ours = || {
            if checked.elapsed() < check_every {
                return Ok(());
            }
            match store.fencing_epoch(&node) {
                Ok(now) if now != epoch => Err(RuntimeError::Store(StoreError::Fenced {
                    node: node.clone(),
                    epoch: now,
                })),
                Ok(_) => {
                    checked = StdInstant::now();
                    Ok(())
                }
                // Unknown: no step is taken until the epoch can be read.
                Err(e) => Err(RuntimeError::Store(e)),
            }
        };
        let serving = Serving {
            node: &node,
            logs: &logs,
            // No requests come: the CLI decides them on the store.
            batching: false,
            on_exit: OnExit::Leave,
            status: SharedStatus::default(),
        };
        let result = run_loop::serve(&mut rt, &inputs, &transitions, serving, still_ours);
        run_loop::wind_down(&rt, &transitions, &logs);
        let lease = heartbeat.stop();
        if result.as_ref().is_err_and(fenced) {
            // Orphans now: no deletion will ever stop them.
            rt.actuator().kill_all();
        } else if let Some(lease) = lease {
            let _ = store.revoke_lease(lease);
        }
        tracing::info!("grace agent: stopped");
        result.map_err(AgentError::from)
    }
}

/// The thread that keeps the lease alive (see [`Heartbeat::spawn`]).
struct Heartbeat {
    stop: mpsc::Sender<()>,
    /// Returns the lease it kept last, unless the node was fenced.
    thread: std::thread::JoinHandle<Option<Lease>>,
}

impl Heartbeat {
    /// Keeps the lease alive every TTL / 3; once it has expired (the agent
    /// was cut off or frozen for longer than the TTL), takes a new one and
    /// registers the node again — unless the node was fenced meanwhile.
    fn spawn(
        store: EtcdStore,
        node: String,
        epoch: u64,
        lease: Lease,
        ttl: StdDuration,
    ) -> Result<Heartbeat, AgentError> {
        let (stop, stopped) = mpsc::channel::<()>();
        let beats = move || {
            let mut lease = lease;
            while let Err(mpsc::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(ttl.checked_div(3).unwrap_or_default())
            {
                match store.keep_alive(lease) {
                    Ok(()) => {}
                    Err(StoreError::NotFound { .. }) => {
                        if store.fencing_epoch(&node).is_ok_and(|e| e != epoch) {
                            return None;
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
            Some(lease)
        };
        let thread = std::thread::Builder::new()
            .name("grace-heartbeat".into())
            .spawn(beats)
            .map_err(|e| AgentError::io("the agent's heartbeat thread", e))?;
        Ok(Heartbeat { stop, thread })
    }

    /// Stops the beats (a stopped agent's node must not be registered
    /// again) and waits for the thread; returns the lease it kept last
    /// (a new one if the first expired), unless the node was fenced.
    fn stop(self) -> Option<Lease> {
        drop(self.stop);
        self.thread.join().ok().flatten()
    }
}

/// Follows the store's change log from `from`, naming each changed object
/// to the runtime thread; reopens the watch where it stopped after an
/// outage.
fn spawn_watch(
    store: EtcdStore,
    from: Revision,
    tx: mpsc::Sender<Input>,
    binder: mpsc::Sender<String>,
    collector: mpsc::Sender<()>,
) -> Result<(), AgentError> {
    let follow = move || {
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
                        if event.kind != EventKind::Deleted
                            && crate::containers::wants_binding(&event.object)
                        {
                            let _ = binder.send(event.name.clone());
                        }
                        if crate::shared_gc::calls_for_collection(event.kind, &event.object) {
                            let _ = collector.send(());
                        }
                        if tx.send(Input::Changed(event.name)).is_err() {
                            return;
                        }
                    }
                    Err(_) => break,
                }
            }
            std::thread::sleep(StdDuration::from_millis(200));
        }
    };
    std::thread::Builder::new()
        .name("grace-store-watch".into())
        .spawn(follow)
        .map(drop)
        .map_err(|e| AgentError::io("the agent's store watch thread", e))
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
