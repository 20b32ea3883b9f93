//! # grace-agent
//!
//! grace's node agent as a library: the node agent and API server of one
//! data directory, which the `grace agent` command runs and which a
//! program can run inside its own process ([`Agent`]).
//!
//! It owns the embedded store (redb allows one process), serves the CLI's
//! requests on `<data-dir>/grace.sock` (see [`crate::api`]), starts the
//! containers of objects bound to its node, and carries out their
//! deletions: pre-stop, stop signal, SIGKILL when the grace is spent,
//! removal once finalizers allow. Objects bound to another node are stored
//! and their deletions decided, but nobody here runs them: they wait for
//! their own agent, as pods on a lost node do (R80).
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

#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::Duration as StdDuration;

use grace_core::{Action, DeleteError};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::api::{ApiError, DATABASE, ErrorKind, Reply, Request, socket_path};
use crate::clock::{Clock, SystemClock};
use crate::process::logs::{ContainerLogs, LogLimits};
use crate::process::{Containment, Output, ProcessActuator, WorldEvent};
use crate::runtime::{Change, Recovery, Runtime, RuntimeError, Transition};
use crate::store::{ContainerStatus, RedbStore, Store, StoreError};
use grace_std::{clock, process, runtime, store};
use outage::Outage;

pub mod access;
pub mod api;
mod batched;
mod error;
#[cfg(feature = "etcd")]
#[cfg_attr(docsrs, doc(cfg(feature = "etcd")))]
pub mod node_agent;
mod outage;
pub mod quota;
mod serve;
pub mod update;
pub mod validate;

pub use access::{Access, AllowGroup, AllowGroupError};
pub use batched::GROUP_COMMIT_ENV;
pub use error::AgentError;
pub use outage::{FIRST_RETRY, LAST_RETRY};
pub use quota::{
    GROUP_CONNECTIONS, GROUP_WATCHES, MAX_CONNECTIONS, MAX_WATCHES, RESERVED, USER_CONNECTIONS,
    USER_WATCHES,
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
        }
    }
}

/// What the agent does with its workloads when SIGTERM or SIGINT stops it
/// (`--on-exit`), or [`Agent::shutdown`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnExit {
    /// Leave them running, their records as they are: the next agent
    /// adopts them (as the kubelet leaves its containers).
    #[default]
    Leave,
    /// Stop each one the Kubernetes way first, as the kubelet's graceful
    /// node shutdown does (R84): every object bound here that runs and is
    /// not being deleted yet is evicted with its own grace (pre-stop hook,
    /// stop signal, SIGKILL when the grace is spent and never sooner than
    /// 2 s after the stop signal); deletions in progress go on as they
    /// are. The agent exits once none of their processes is left. The
    /// objects stay, their containers stopped; workloads whose object is
    /// gone are left running.
    Stop,
}

impl std::str::FromStr for OnExit {
    type Err = UnknownOnExit;

    /// `leave` or `stop`.
    fn from_str(arg: &str) -> Result<Self, UnknownOnExit> {
        match arg {
            "leave" => Ok(OnExit::Leave),
            "stop" => Ok(OnExit::Stop),
            other => Err(UnknownOnExit(other.to_owned())),
        }
    }
}

/// A value of `--on-exit` that is neither `leave` nor `stop` (the value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownOnExit(pub String);

impl std::fmt::Display for UnknownOnExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}`: expected `leave` or `stop`", self.0)
    }
}

impl std::error::Error for UnknownOnExit {}

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

/// Takes over the log pipes of the containers an earlier agent left
/// running ([`ContainerLogs::adopt`]), before any container is started;
/// a failure is logged (those containers' output waits in their pipes).
pub(crate) fn adopt_logs(logs: &ContainerLogs, log: &mut impl Write) {
    if let Err(e) = logs.adopt() {
        let _ = writeln!(
            log,
            "grace agent: cannot take over the output of earlier containers: {e}"
        );
    }
}

/// The agent's clock: the machine's, whose epoch is the boot. Deadlines
/// written by an agent are honoured by the next one on the same boot (its
/// workloads are still there); after a reboot they have no meaning.
pub(crate) type RunClock = SystemClock;

/// Where an agent keeps its workload table, in its data directory.
pub fn workloads_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("workloads")
}

/// `(object, container, hook)`: one workload or pre-stop hook.
pub(crate) type Workload = (String, usize, bool);

/// Opens the process actuator on the workload table in `dir`, adopting
/// what an earlier agent left running, and logs what it found and how
/// workloads are contained.
pub(crate) fn open_actuator(
    dir: &Path,
    subreaper: bool,
    log: &mut impl Write,
) -> Result<(ProcessActuator, mpsc::Receiver<WorldEvent>, Vec<Workload>), AgentError> {
    // One pidfd per workload: thousands of them need more than the usual
    // soft limit of open files.
    match crate::process::raise_open_files_limit() {
        Ok((soft, _)) => {
            let soft = soft.map_or_else(|| "unlimited".to_owned(), |n| n.to_string());
            let _ = writeln!(log, "grace agent: open files limit {soft}");
        }
        Err(e) => {
            let _ = writeln!(log, "grace agent: the open files limit stays as it is: {e}");
        }
    }
    // Orphans of the workloads come to the agent, which reaps them at once
    // (a zombie left to a slow or absent PID 1 would hold its deletion).
    if !subreaper {
        let _ = writeln!(
            log,
            "grace agent: orphans go to PID 1 (not a subreaper: AgentOptions::subreaper is off)"
        );
    } else if let Err(e) = crate::process::become_subreaper() {
        let _ = writeln!(
            log,
            "grace agent: orphans go to PID 1 (not a subreaper: {e})"
        );
    }
    let (actuator, world, adoption) = ProcessActuator::with_state_dir(dir)
        .map_err(|e| AgentError::io(format!("the workload table {}", dir.display()), e))?;
    let containment = match (actuator.containment(), actuator.cgroup_root()) {
        (Containment::Cgroups, Some(root)) => format!("a cgroup v2 each, under {}", root.display()),
        _ => "a process group each (no writable cgroup v2 hierarchy)".to_owned(),
    };
    let _ = writeln!(log, "grace agent: workloads run in {containment}");
    for (object, container, hook) in &adoption.adopted {
        let what = if *hook { "pre-stop hook" } else { "container" };
        let _ = writeln!(log, "grace agent: adopted {object} {what} {container}");
    }
    for (object, container, hook) in &adoption.gone {
        let what = if *hook { "pre-stop hook" } else { "container" };
        let _ = writeln!(
            log,
            "grace agent: {object} {what} {container} ended while no agent ran"
        );
    }
    for (object, container) in &adoption.never_ran {
        let _ = writeln!(
            log,
            "grace agent: {object} container {container} never ran (an agent stopped before its start)"
        );
    }
    // A record that cannot be read may stand for a process that still
    // runs: its container is not reported stopped (it stays as it is).
    let mut unknown = adoption.gone;
    for path in &adoption.unreadable {
        let _ = writeln!(
            log,
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
pub(crate) fn log_orphans<S: Store, C: Clock>(
    rt: &mut Runtime<S, C, ProcessActuator>,
    log: &mut impl Write,
) {
    let tracked: std::collections::BTreeSet<String> = rt.names().map(str::to_owned).collect();
    let now = rt.clock().now().mono;
    let stops = rt
        .actuator()
        .stop_orphans(|object| tracked.contains(object), now);
    for stop in stops {
        let _ = match stop {
            crate::process::OrphanStop::HookCutOff { object, container } => writeln!(
                log,
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
                writeln!(
                    log,
                    "grace agent: {object} container {container} runs but its object is gone: {signal}, SIGKILL in {ms} ms unless it exits"
                )
            }
        };
    }
}

/// After a restart: a container the runtime still counts as running, or a
/// hook it still waits for, that is neither adopted nor about to be
/// reported gone by the reaper nor of an unreadable record (`gone`) never
/// ran: it is reported stopped (it was started by no one, or its start
/// failed).
pub(crate) fn reconcile<S: Store, C: Clock>(
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
                    let _ = rt.handle_pre_stop_finished(name, i)?;
                }
                if !rt.actuator().is_running(name, i) && !reported(i, false) {
                    let _ = rt.handle_container_exited(name, i)?;
                }
            }
            _ => {
                if !rt.actuator().is_running(name, i) && !reported(i, false) {
                    let _ = rt.handle_container_exited(name, i)?;
                }
            }
        }
    }
    Ok(())
}

#[allow(
    clippy::large_enum_variant,
    reason = "one per request or event on a channel; a request holds a uid of any Kubernetes length inline"
)]
enum Input {
    Request(Request, mpsc::SyncSender<Reply>),
    World(WorldEvent),
    Stop,
}

type AgentRuntime = Runtime<Arc<RedbStore>, RunClock, ProcessActuator>;

/// Sends `stop` to `tx` on the first SIGTERM or SIGINT (from a thread of
/// its own).
pub(crate) fn stop_on_signal<I: Send + 'static>(
    tx: mpsc::Sender<I>,
    stop: I,
) -> Result<(), AgentError> {
    let mut signals = Signals::new([SIGTERM, SIGINT]).map_err(|e| AgentError::io("signals", e))?;
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            let _ = tx.send(stop);
        }
    });
    Ok(())
}

/// Forwards every event of `events` to `tx` as an input (from a thread of
/// its own), until either side is gone.
pub(crate) fn forward<T: Send + 'static, I: Send + 'static>(
    events: mpsc::Receiver<T>,
    tx: mpsc::Sender<I>,
    input: fn(T) -> I,
) {
    std::thread::spawn(move || {
        for event in events {
            if tx.send(input(event)).is_err() {
                break;
            }
        }
    });
}

/// Runs the agent on the calling thread until SIGTERM or SIGINT (what
/// `grace agent` does), logging every transition to `log`. Fails if the
/// data directory, the store or an old socket is not private (another
/// user owns it, others may write it: see [`grace_std::private`]), if the
/// store cannot be opened (locked by another process, unreadable) or the
/// socket cannot be bound. To run an agent inside a program that owns its
/// signals, see [`Agent::start`].
pub fn run(options: &AgentOptions, log: &mut impl Write) -> Result<(), AgentError> {
    let (started, _stop) = start_agent(options, true, log)?;
    started.serve(log)
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
/// let agent = Agent::start(options, std::io::stderr())?;
/// let mut client = Client::connect(agent.data_dir())?;
/// let reply = client.call(&Request::Get { name: None })?;
/// assert!(matches!(reply, Reply::Objects { .. }));
/// agent.shutdown();
/// agent.join()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Agent {
    stop: mpsc::Sender<Input>,
    thread: Option<std::thread::JoinHandle<Result<(), AgentError>>>,
    data_dir: PathBuf,
}

impl Agent {
    /// Starts an agent on `options.data_dir`, logging every transition to
    /// `log`: everything that can fail at start (see [`run`]) has been
    /// checked, the store opened, the workloads an earlier agent left
    /// adopted and the socket bound when this returns; the agent then
    /// serves on a thread of its own.
    pub fn start(
        options: AgentOptions,
        mut log: impl Write + Send + 'static,
    ) -> Result<Agent, AgentError> {
        let (started, stop) = start_agent(&options, false, &mut log)?;
        let thread = std::thread::Builder::new()
            .name(format!("grace-agent {}", options.node))
            .spawn(move || started.serve(&mut log))
            .map_err(|e| AgentError::io("the agent's thread", e))?;
        Ok(Agent {
            stop,
            thread: Some(thread),
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
        let _ = self.stop.send(Input::Stop);
    }

    /// Waits until the agent has stopped: its socket removed, its
    /// connections closed, its store closed (another agent may open it).
    /// The error is why it stopped, if not because it was asked to.
    pub fn join(mut self) -> Result<(), AgentError> {
        self.wait()
    }

    fn wait(&mut self) -> Result<(), AgentError> {
        match self.thread.take().map(std::thread::JoinHandle::join) {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(e),
            Some(Err(_)) => Err(AgentError::Panicked),
        }
    }
}

impl Drop for Agent {
    /// Stops the agent and waits for it.
    fn drop(&mut self) {
        self.shutdown();
        let _ = self.wait();
    }
}

/// An agent whose start went through: what its runtime thread serves.
struct Started {
    rt: AgentRuntime,
    inputs: mpsc::Receiver<Input>,
    transitions: mpsc::Receiver<Transition>,
    logs: ContainerLogs,
    node: String,
    on_exit: OnExit,
    status: outage::SharedStatus,
    socket: PathBuf,
    connections: serve::Connections,
    accepting: std::thread::JoinHandle<()>,
}

/// Starts an agent: checks, opens the store, adopts the workloads, binds
/// the socket and picks up what an earlier agent left; with `signals`,
/// the first SIGTERM or SIGINT stops it. Returns it with the sender of
/// its inputs (an [`Input::Stop`] stops it).
fn start_agent(
    options: &AgentOptions,
    signals: bool,
    log: &mut impl Write,
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

    let (tx, inputs) = mpsc::channel::<Input>();
    if signals {
        stop_on_signal(tx.clone(), Input::Stop)?;
    }

    let logs = container_logs(dir, None, options.log_limits);
    adopt_logs(&logs, log);
    let (actuator, world, gone) = open_actuator(&workloads_dir(dir), options.subreaper, log)?;
    let actuator = actuator.with_output(Output::Logs(logs.clone()));
    let mut rt: AgentRuntime = Runtime::open(
        Arc::clone(&store),
        RunClock::new(),
        actuator,
        options.recovery,
    )?;
    let transitions = rt.subscribe();
    forward(world, tx.clone(), Input::World);

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
        std::thread::spawn(move || serve::accept(listener, store, tx, policy, status, connections))
    };

    let _ = writeln!(
        log,
        "grace agent: node {}, store {}, socket {}",
        options.node,
        dir.join(DATABASE).display(),
        socket.display()
    );
    // Pick up what was running, deletions accepted before a restart, and
    // the garbage collector's steps left undone.
    let names: Vec<String> = rt.names().map(str::to_owned).collect();
    for name in names {
        if bound_here(&rt, &name, &options.node) {
            reconcile(&mut rt, &name, &gone)?;
            let _ = rt.handle_agent_sync(&name)?;
        }
        if let Err(e) = rt.collect_garbage(&name) {
            let _ = writeln!(
                log,
                "grace agent: {name}: garbage collection: {e} (retried at the next start)"
            );
        }
    }
    log_orphans(&mut rt, log);
    // Logs of records removed while no agent was running go now.
    logs.remove_unless(|name, uid| rt.object(name).is_some_and(|o| o.uid() == uid));
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
    };
    Ok((started, tx))
}

impl Started {
    /// Serves until stopped, then closes the socket and every connection.
    fn serve(self, log: &mut impl Write) -> Result<(), AgentError> {
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
        } = self;
        let result = serve(
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
            log,
        );
        let removed = log_transitions(&transitions, log);
        remove_logs(&rt, &logs, &removed);
        // The workload records and logs still queued for removal go before
        // the agent does (one left by a crash is found at the next start).
        crate::process::flush_removals();
        // No new connection, and those open are closed: the store is
        // closed once the runtime is dropped.
        if connections.stop(&socket) {
            let _ = accepting.join();
        }
        let _ = std::fs::remove_file(&socket);
        let left = rt.actuator().running().count();
        let _ = writeln!(
            log,
            "grace agent: stopped; {left} workload(s) left running for the next agent to adopt"
        );
        result.map_err(AgentError::from)
    }
}

/// Writes the transitions reported since the last call, one line each;
/// returns the names of the objects whose records were removed.
pub(crate) fn log_transitions(
    transitions: &mpsc::Receiver<Transition>,
    log: &mut impl Write,
) -> Vec<String> {
    let mut removed = Vec::new();
    // One write for them all: standard output flushes at every line, and
    // thousands of workloads stopping together make thousands of lines.
    let mut lines = Vec::new();
    for t in transitions.try_iter() {
        if matches!(t.change, Change::Action(Action::Remove { .. })) {
            removed.push(t.object.clone());
        }
        let _ = writeln!(
            lines,
            "{:>14.3}  {:<20} {}",
            t.at.wall.as_unix_millis() as f64 / 1000.0,
            t.object,
            t.change
        );
    }
    if !lines.is_empty() {
        let _ = log.write_all(&lines);
    }
    let _ = log.flush();
    removed
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

/// How the runtime thread serves.
struct Serving<'a> {
    node: &'a str,
    logs: &'a ContainerLogs,
    /// Change requests that wait together are committed together (see
    /// [`batched`]).
    batching: bool,
    on_exit: OnExit,
    /// What the connection threads tell `grace describe` of the agent.
    status: outage::SharedStatus,
}

/// The runtime thread's loop, until SIGTERM or SIGINT (with
/// [`OnExit::Stop`]: until the workloads are stopped too).
fn serve(
    rt: &mut AgentRuntime,
    inputs: &mpsc::Receiver<Input>,
    transitions: &mpsc::Receiver<Transition>,
    serving: Serving<'_>,
    log: &mut impl Write,
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
    loop {
        let removed = log_transitions(transitions, log);
        remove_logs(rt, logs, &removed);
        forget_not_run(rt, &removed, node);
        if let Some(awaited) = &mut stopping {
            awaited.retain(|name| rt.actuator().holds(name));
            if awaited.is_empty() {
                return Ok(());
            }
        }
        let wait = outage.wait(wait_for_next(rt));
        let input = match next.take() {
            Some(input) => Ok(input),
            None => inputs.recv_timeout(wait),
        };
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
                next = outage.served(served, log)?;
            }
            Ok(Input::Request(request, reply)) => {
                let _ = reply.send(batched::handle(rt, request, node));
            }
            Ok(Input::World(event)) => {
                // With the events and requests already waiting, in one
                // commit.
                let requests = batching && stopping.is_none();
                let served = batched::serve_batch(rt, Input::World(event), inputs, node, requests);
                next = outage.served(served, log)?;
            }
            Ok(Input::Stop) if on_exit == OnExit::Stop => {
                if stopping.is_none() {
                    stopping = Some(stop_workloads(rt, node, log));
                }
            }
            Ok(Input::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if outage.due() {
            own_steps(rt, &mut outage, log)?;
        }
    }
}

/// The agent's own steps: the process events whose write failed, offered
/// again, then the deadlines that have passed. A write that fails on the
/// store leaves them for the next retry ([`Outage`]); any other error
/// stops the agent.
fn own_steps(
    rt: &mut AgentRuntime,
    outage: &mut Outage,
    log: &mut impl Write,
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
                return outage.store_failed(e, log);
            }
        }
    }
    match rt.handle_timeouts() {
        Ok(()) => {
            outage.succeeded(log);
            Ok(())
        }
        Err(e) => outage.store_failed(e, log),
    }
}

/// Forgets the objects whose records were removed (`removed`) and that
/// this agent never ran (not bound here, none of their processes held):
/// nobody here will report their containers stopped, and their names are
/// free for a new object at once, as `get` says.
fn forget_not_run(rt: &mut AgentRuntime, removed: &[String], node: &str) {
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
fn stop_workloads(rt: &mut AgentRuntime, node: &str, log: &mut impl Write) -> Vec<String> {
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
        match rt.handle_evict(&name, grace) {
            Ok(grace_core::Handled::Applied) => {
                evicted = evicted.saturating_add(1);
                awaited.push(name);
            }
            Ok(_) => {}
            Err(e) => {
                let _ = writeln!(
                    log,
                    "grace agent: {name}: cannot stop it: {e} (left running)"
                );
            }
        }
    }
    let _ = writeln!(
        log,
        "grace agent: stopping: {evicted} object(s) evicted with their grace (--on-exit=stop)"
    );
    awaited
}

/// The grace of an object that names none (R18).
const DEFAULT_GRACE_SECONDS: i64 = 30;

fn bound_here(rt: &AgentRuntime, name: &str, node: &str) -> bool {
    rt.object(name)
        .and_then(|o| o.node)
        .is_some_and(|n| n == node)
}

/// Starts an object's containers that are not running and reports each
/// one's status: `Running`, or `ContainerCannotRun` with the reason, which
/// counts as exited.
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
            let _ = batch.set_container_status(name, i, ContainerStatus::Running);
        }
        for (i, reason) in failed {
            let _ = batch.set_container_status(name, i, ContainerStatus::cannot_run(reason));
            let _ = batch.handle_container_exited(name, i);
        }
    }
    let _ = batch.commit();
}

/// The name of a change request, checked as the manifest readers check it.
fn check_name(name: &str) -> Result<(), String> {
    grace_std::api_server::check_name(name).map_err(|m| format!("field `metadata.name`: {m}"))
}

fn invalid(message: String) -> Reply {
    Reply::Error(ApiError {
        kind: ErrorKind::Invalid,
        message,
    })
}

/// A runtime error as the API reports it, kubectl's words where it has them.
fn error(name: &str, e: &RuntimeError) -> Reply {
    let (kind, message) = match e {
        RuntimeError::NotFound(_) | RuntimeError::Delete(DeleteError::NotFound) => {
            (ErrorKind::NotFound, format!("object \"{name}\" not found"))
        }
        RuntimeError::AlreadyExists(_) => (
            ErrorKind::AlreadyExists,
            format!("object \"{name}\" already exists"),
        ),
        RuntimeError::Delete(DeleteError::Conflict(c)) => {
            (ErrorKind::Conflict, format!("object \"{name}\": {c}"))
        }
        RuntimeError::Delete(d) => (ErrorKind::Invalid, format!("object \"{name}\": {d}")),
        RuntimeError::Update(u) => (ErrorKind::Invalid, format!("object \"{name}\": {u}")),
        RuntimeError::Store(s) => (ErrorKind::Internal, format!("store: {s}")),
        RuntimeError::UnknownContainer { .. }
        | RuntimeError::TooManyContainers { .. }
        | RuntimeError::InvalidName { .. }
        | RuntimeError::BatchFull { .. } => (ErrorKind::Invalid, e.to_string()),
        _ => (ErrorKind::Internal, e.to_string()),
    };
    Reply::Error(ApiError { kind, message })
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
