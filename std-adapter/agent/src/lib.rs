//! # grace-agent
//!
//! grace's node agent as a library: the node agent and API server of one
//! data directory, which the `grace agent` command runs and which a
//! program can run inside its own process ([`Agent`]).
//!
//! With the `etcd` feature, `node_agent` runs instead the agent of one
//! node among several on a shared etcd store (`grace agent --etcd`;
//! `node_agent::NodeAgent` in a program). Both run one start-up and one
//! event loop; they differ in where their inputs come from.
//!
//! It owns the embedded store (redb allows one process), serves the CLI's
//! requests on `<data-dir>/grace.sock` (see [`crate::api`]), starts the
//! containers of objects bound to its node, and carries out their
//! deletions: pre-stop, stop signal, SIGKILL when the grace is spent,
//! removal once finalizers allow. Objects bound to another node are stored
//! and their deletions decided, but nobody here runs them: they wait for
//! their own agent, as pods on a lost node do (R80). An update of a stored
//! object follows Kubernetes' rules for a Pod ([`update`],
//! [`pod_update`]).
//!
//! Each container's stdout and stderr go to a log file of its own under
//! `<data-dir>/logs` (see [`ContainerLogs`]), rotated by size, kept until
//! the object's record is removed; `grace logs` reads them.
//!
//! One thread runs the [`Runtime`]; one reaper thread watches every
//! workload ([`grace_std::process`]); every connection has a thread of its
//! own (at most [`MAX_CONNECTIONS`] at once, with a share for each user of
//! the allowed group: see [`quota`]) that reads straight from the store and
//! hands changes to the runtime thread.
//!
//! Workloads outlive the agent, as containers outlive the kubelet: each is
//! written to the workload table in `<data-dir>/workloads` before it runs,
//! and stopping the agent (SIGTERM, SIGINT) leaves them running. The next
//! agent on the same boot adopts every one still there (same pid and start
//! time) and carries on with its deletion on the persisted deadlines (D6);
//! one that ended meanwhile is reported stopped. After a reboot nothing
//! survived: a deletion in progress completes at once (restart policy
//! `Never`: nothing is restarted).
//!
//! # Its log
//!
//! The agent logs through [`tracing`]: every transition of an object
//! (info), its start and stop and what it adopted (info), a step refused or
//! retried (warn), an action that failed or a store outage (error), and
//! start-up details (debug), with the object's name and container as fields
//! where there is one. The targets are this crate's modules
//! (`grace_agent::run_loop`, `grace_agent::startup`, ...). The library
//! installs no subscriber: without one, nothing is printed. A program
//! installs its own, e.g. `tracing-subscriber`'s `fmt` (as `grace agent`
//! does, filtered by `RUST_LOG`):
//!
//! ```no_run
//! use tracing_subscriber::filter::Targets;
//! use tracing_subscriber::prelude::*;
//!
//! let filter: Targets = "grace_agent=info,warn".parse()?;
//! tracing_subscriber::registry()
//!     .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
//!     .with(filter)
//!     .init();
//! let agent = grace_agent::Agent::start(grace_agent::AgentOptions::new("/tmp/grace"))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};

use crate::api::{DATABASE, socket_path};
use crate::input::Input;
use crate::process::ProcessActuator;
use crate::process::logs::{ContainerLogs, LogLimits};
use crate::run_loop::{Running, Serving};
use crate::runtime::{Recovery, Runtime, Transition};
use crate::startup::{RunClock, stop_on_signal};
use crate::store::{RedbStore, StoreError};
use grace_std::{clock, process, runtime, store};

pub mod access;
pub mod api;
mod batched;
#[cfg(feature = "etcd")]
mod bind;
mod collect;
mod containers;
mod error;
mod input;
#[cfg(feature = "k8s-api")]
#[cfg_attr(docsrs, doc(cfg(feature = "k8s-api")))]
pub mod k8s_api;
#[cfg(feature = "etcd")]
#[cfg_attr(docsrs, doc(cfg(feature = "etcd")))]
pub mod node_agent;
mod on_exit;
mod outage;
pub mod patch;
pub mod pod_update;
pub mod quota;
mod restarts;
mod run_loop;
mod serve;
#[cfg(feature = "etcd")]
mod shared_gc;
mod startup;
pub mod update;
pub mod validate;

pub use access::{Access, AllowGroup, AllowGroupError, Refused};
pub use batched::GROUP_COMMIT_ENV;
pub use error::AgentError;
pub use on_exit::{OnExit, UnknownOnExit};
pub use outage::{FIRST_RETRY, LAST_RETRY};
pub use quota::{
    API_CONNECTIONS, API_OTHERS_CONNECTIONS, GROUP_CONNECTIONS, GROUP_WATCHES, MAX_CONNECTIONS,
    MAX_WATCHES, RESERVED, USER_CONNECTIONS, USER_WATCHES,
};
pub use serve::{HANGUP_CHECK, REQUEST_TIMEOUT};

/// How to run an agent: [`AgentOptions::new`] gives `grace agent`'s
/// defaults, each field may then be changed.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct AgentOptions {
    /// The data directory: the store and the socket live here.
    pub data_dir: PathBuf,
    /// The node this agent runs objects for.
    pub node: String,
    /// What a restart does with a kill in progress (D6).
    pub recovery: Recovery,
    /// A group whose members may talk to the agent besides its own user
    /// and root (`--allow-group`), and how much.
    pub allow_group: Option<AllowGroup>,
    /// How big each container's log may grow.
    pub log_limits: LogLimits,
    /// What stopping the agent does with the workloads.
    pub on_exit: OnExit,
    /// Whether the agent makes its process a child subreaper, as `grace
    /// agent` does: orphans of the workloads then come to this process and
    /// are reaped at once, so a deletion ends only once they are gone, and
    /// the agent learns of its children's exits without a descriptor each
    /// (one per workload instead of two: 10 000 workloads fit a 20 000
    /// descriptor limit).
    ///
    /// Off by default in a library: a subreaper reaps **every** child of its
    /// process as it ends, so a program that waits for children of its own
    /// (`std::process::Command::output`, `Child::wait`) would find them
    /// already reaped (`ECHILD`). Turn it on where the agent is the
    /// process's only user of children. docs/agent.md, "Orphans".
    pub subreaper: bool,
    /// Where to serve the Kubernetes API for Pods over HTTPS (`grace
    /// agent --k8s-api ADDR:PORT`); `None`, the default: nothing listens.
    /// At start the agent writes `<data-dir>/kubeconfig` for its own
    /// user (see [`k8s_api`] and docs/kubernetes-api.md).
    pub k8s_api: Option<std::net::SocketAddr>,
}

impl AgentOptions {
    /// An agent on `data_dir` for the node `local`, as `grace agent` runs
    /// by default: a kill in progress keeps its deadline over a restart
    /// (D6), only its own user and root may connect, container logs of
    /// [`LogLimits::default`], workloads left running when it stops.
    pub fn new(data_dir: impl Into<PathBuf>) -> AgentOptions {
        AgentOptions {
            data_dir: data_dir.into(),
            node: "local".to_owned(),
            recovery: Recovery::HonourOriginalDeadline,
            allow_group: None,
            log_limits: LogLimits::default(),
            on_exit: OnExit::Leave,
            subreaper: false,
            k8s_api: None,
        }
    }

    /// The same options, serving the Kubernetes API on `addr`
    /// ([`AgentOptions::k8s_api`]).
    #[must_use]
    pub fn with_k8s_api(mut self, addr: std::net::SocketAddr) -> AgentOptions {
        self.k8s_api = Some(addr);
        self
    }
}

/// The directory of the container logs in a data directory.
pub const LOGS: &str = "logs";

/// Where the container logs of an agent on `data_dir` are:
/// `<data-dir>/logs`, or for the agent of `node` on a shared store,
/// `<data-dir>/logs/nodes/<node>` (agents of several nodes may share a
/// machine and a data directory).
pub fn container_logs(
    data_dir: &Path,
    shared_node: Option<&str>,
    limits: LogLimits,
) -> ContainerLogs {
    let dir = data_dir.join(LOGS);
    match shared_node {
        None => ContainerLogs::new(dir, limits),
        Some(node) => ContainerLogs::new(dir.join("nodes").join(node), limits),
    }
}

/// Where an agent keeps its workload table, in its data directory.
pub fn workloads_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("workloads")
}

/// Runs the agent on the calling thread until SIGTERM or SIGINT (what
/// `grace agent` does), logging every transition (see [its
/// log](crate#its-log)). Fails if the
/// data directory, the store or an old socket is not private (another
/// user owns it, others may write it: see [`grace_std::private`]), if the
/// store cannot be opened (locked by another process, unreadable) or the
/// socket cannot be bound. To run an agent inside a program that owns its
/// signals, see [`Agent::start`].
pub fn run(options: &AgentOptions) -> Result<(), AgentError> {
    let (started, _stop) = start_agent(options, true)?;
    started.serve()
}

/// An agent running inside this process, on a thread of its own: the
/// handle [`Agent::start`] returns.
///
/// The agent serves its socket ([`Agent::socket`], the protocol of
/// [`api`], e.g. through [`api::Client`]) until [`Agent::shutdown`]; it
/// installs no signal handler (the program owns its signals). Its
/// workloads outlive it as they outlive `grace agent` (with
/// [`OnExit::Leave`]): the next agent on the same data directory adopts
/// them. Dropping the handle stops the agent and waits for it, as
/// [`Agent::join`] does.
///
/// ```no_run
/// use grace_agent::api::{Client, Reply, Request};
/// use grace_agent::{Agent, AgentOptions};
///
/// let options = AgentOptions::new("/var/lib/my-orchestrator/grace");
/// let agent = Agent::start(options)?;
/// let mut client = Client::connect(agent.data_dir())?;
/// let reply = client.call(&Request::Get { name: None })?;
/// assert!(matches!(reply, Reply::Objects { .. }));
/// agent.shutdown();
/// agent.join()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Agent {
    running: Running,
    data_dir: PathBuf,
}

impl Agent {
    /// Starts an agent on `options.data_dir`, logging every transition
    /// (see [its log](crate#its-log)): everything that can fail at start (see [`run`]) has been
    /// checked, the store opened, the workloads an earlier agent left
    /// adopted and the socket bound when this returns; the agent then
    /// serves on a thread of its own.
    pub fn start(options: AgentOptions) -> Result<Agent, AgentError> {
        let (started, stop) = start_agent(&options, false)?;
        let name = format!("grace-agent {}", options.node);
        let running = Running::spawn(name, stop, move || started.serve())?;
        Ok(Agent {
            running,
            data_dir: options.data_dir,
        })
    }

    /// The agent's data directory: what [`api::Client::connect`] takes.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The agent's socket, `<data-dir>/grace.sock`.
    pub fn socket(&self) -> PathBuf {
        socket_path(&self.data_dir)
    }

    /// Asks the agent to stop, as SIGTERM stops `grace agent` (with
    /// [`OnExit::Stop`], once its workloads have stopped); returns at
    /// once. [`Agent::join`] waits for it.
    pub fn shutdown(&self) {
        self.running.shutdown();
    }

    /// Waits until the agent has stopped: its socket removed, its
    /// connections closed, its store closed (another agent may open it).
    /// The error is why it stopped, if not because it was asked to.
    pub fn join(mut self) -> Result<(), AgentError> {
        self.running.wait()
    }
}

impl Drop for Agent {
    /// Stops the agent and waits for it.
    fn drop(&mut self) {
        self.running.shutdown();
        let _ = self.running.wait();
    }
}

/// An agent whose start went through: what its runtime thread serves.
struct Started {
    rt: Runtime<Arc<RedbStore>, RunClock, ProcessActuator>,
    inputs: mpsc::Receiver<Input>,
    transitions: mpsc::Receiver<Transition>,
    logs: ContainerLogs,
    node: String,
    on_exit: OnExit,
    status: outage::SharedStatus,
    socket: PathBuf,
    connections: serve::Connections,
    accepting: std::thread::JoinHandle<()>,
    k8s_api: Option<ApiServer>,
}

/// The Kubernetes API's server while it runs (never one without the
/// `k8s-api` feature).
#[cfg(feature = "k8s-api")]
type ApiServer = k8s_api::K8sApi;
#[cfg(not(feature = "k8s-api"))]
type ApiServer = std::convert::Infallible;

/// Starts an agent: checks, opens the store, adopts the workloads, binds
/// the socket and picks up what an earlier agent left; with `signals`,
/// the first SIGTERM or SIGINT stops it. Returns it with the sender of
/// its inputs (an [`Input::Stop`] stops it).
fn start_agent(
    options: &AgentOptions,
    signals: bool,
) -> Result<(Started, mpsc::Sender<Input>), AgentError> {
    let dir = &options.data_dir;
    // Everything that can be checked before anything is written.
    check_data_dir(dir)?;
    options.log_limits.check().map_err(AgentError::LogLimits)?;
    let socket = socket_path(dir);
    std::os::unix::net::SocketAddr::from_pathname(&socket).map_err(|error| {
        AgentError::SocketPath {
            path: socket.clone(),
            error,
        }
    })?;
    let created_dir = !dir.exists();
    let db = dir.join(DATABASE);
    let created_db = !db.exists();
    // Private whatever the umask; refused if another user could have
    // changed it.
    let group = options.allow_group.as_ref();
    serve::prepare(dir, group)?;
    // A start that fails leaves nothing it created behind.
    let undo = || {
        if created_db {
            let _ = std::fs::remove_file(&db);
        }
        if created_dir {
            let _ = std::fs::remove_dir(dir);
        }
    };
    let store = match RedbStore::open(&db) {
        Ok(store) => Arc::new(store),
        Err(e) => {
            if !matches!(e, StoreError::AlreadyOpen { .. }) {
                undo();
            }
            return Err(e.into());
        }
    };

    // Pods stored with no node while no agent ran are this lone agent's
    // to run: bound (durably) before the runtime opens and starts them.
    match containers::bind_stored(&*store, &options.node) {
        Ok(bound) => {
            for name in bound {
                tracing::info!(object = %name, "grace agent: {name}: bound to node {}", options.node);
            }
        }
        Err(e) => return Err(e.into()),
    }

    let (tx, inputs) = mpsc::channel::<Input>();
    if signals {
        stop_on_signal(tx.clone(), Input::Stop)?;
    }

    let logs = container_logs(dir, None, options.log_limits);
    let startup::Opened {
        mut rt,
        transitions,
        gone,
    } = startup::open(
        Arc::clone(&store),
        &workloads_dir(dir),
        options.subreaper,
        &logs,
        options.recovery,
        &tx,
    )?;

    // The store is ours (its lock is held), so a socket left here is an
    // earlier agent's.
    let listener = match serve::bind(dir, group) {
        Ok(l) => l,
        Err(e) => {
            drop(rt);
            drop(store);
            undo();
            return Err(e);
        }
    };
    let policy = access::Policy::new(options.allow_group.clone());
    let status = outage::SharedStatus::default();
    let connections = serve::Connections::default();
    let accepting = {
        let (store, tx, status, connections) = (
            Arc::clone(&store),
            tx.clone(),
            Arc::clone(&status),
            connections.clone(),
        );
        let spawned = std::thread::Builder::new()
            .name("grace-accept".into())
            .spawn(move || serve::accept(listener, store, tx, policy, status, connections));
        match spawned {
            Ok(thread) => thread,
            Err(e) => {
                let _ = std::fs::remove_file(&socket);
                return Err(AgentError::io("the agent's accepting thread", e));
            }
        }
    };

    // The Kubernetes API hands its changes to the same runtime thread.
    #[cfg(not(feature = "k8s-api"))]
    let k8s_api: Option<ApiServer> = match options.k8s_api {
        Some(_) => {
            connections.stop(&socket);
            let _ = std::fs::remove_file(&socket);
            return Err(AgentError::io(
                "the Kubernetes API",
                std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "this agent was built without its `k8s-api` feature",
                ),
            ));
        }
        None => None,
    };
    #[cfg(feature = "k8s-api")]
    let k8s_api = match options.k8s_api {
        Some(addr) => {
            let api = k8s_api::start(
                addr,
                dir,
                Arc::clone(&store),
                tx.clone(),
                options.allow_group.clone(),
                logs.clone(),
            );
            match api {
                Ok(api) => Some(api),
                Err(e) => {
                    connections.stop(&socket);
                    let _ = std::fs::remove_file(&socket);
                    return Err(e);
                }
            }
        }
        None => None,
    };
    tracing::info!(
        "grace agent: node {}, store {}, socket {}",
        options.node,
        dir.join(DATABASE).display(),
        socket.display()
    );
    startup::pick_up(&mut rt, &options.node, &gone, &logs)?;
    let started = Started {
        rt,
        inputs,
        transitions,
        logs,
        node: options.node.clone(),
        on_exit: options.on_exit,
        status,
        socket,
        connections,
        accepting,
        k8s_api,
    };
    Ok((started, tx))
}

impl Started {
    /// Serves until stopped, then closes the socket and every connection.
    fn serve(self) -> Result<(), AgentError> {
        let Started {
            mut rt,
            inputs,
            transitions,
            logs,
            node,
            on_exit,
            status,
            socket,
            connections,
            accepting,
            k8s_api,
        } = self;
        let result = run_loop::serve(
            &mut rt,
            &inputs,
            &transitions,
            Serving {
                node: &node,
                logs: &logs,
                batching: batched::group_commit(),
                on_exit,
                status,
            },
            // The local store is this agent's own: no one fences it.
            || Ok(()),
        );
        run_loop::wind_down(&rt, &transitions, &logs);
        #[cfg(feature = "k8s-api")]
        if let Some(mut api) = k8s_api {
            api.stop();
        }
        #[cfg(not(feature = "k8s-api"))]
        let _ = k8s_api;
        // No new connection, and those open are closed: the store is
        // closed once the runtime is dropped.
        if connections.stop(&socket) {
            let _ = accepting.join();
        }
        let _ = std::fs::remove_file(&socket);
        let left = rt.actuator().running().count();
        tracing::info!(
            "grace agent: stopped; {left} workload(s) left running for the next agent to adopt"
        );
        result.map_err(AgentError::from)
    }
}

/// Checks that `data_dir` is a directory or does not exist yet; the
/// error says what it is instead.
pub fn check_data_dir(data_dir: &Path) -> Result<(), AgentError> {
    match std::fs::metadata(data_dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(AgentError::NotADirectory(data_dir.to_path_buf())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(AgentError::DataDir {
            path: data_dir.to_path_buf(),
            error,
        }),
    }
}

/// Whether a data directory has a live agent (its socket answers).
pub fn is_serving(data_dir: &Path) -> bool {
    UnixStream::connect(socket_path(data_dir)).is_ok()
}
