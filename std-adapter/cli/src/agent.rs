//! `grace agent`: the node agent and API server of one data directory.
//!
//! It owns the embedded store (redb allows one process), serves the CLI's
//! requests on `<data-dir>/grace.sock` (see [`crate::api`]), starts the
//! containers of objects bound to its node, and carries out their
//! deletions: pre-stop, stop signal, SIGKILL when the grace is spent,
//! removal once finalizers allow. Objects bound to another node are stored
//! and their deletions decided, but nobody here runs them: they wait for
//! their own agent, as pods on a lost node do (R80).
//!
//! One thread runs the [`Runtime`]; every connection has a thread of its
//! own that reads straight from the store and hands changes to the runtime
//! thread. Each run of the agent is an epoch of its own: workloads do not
//! outlive the agent (it SIGKILLs them when it stops), so a restarted agent
//! finds them gone — their objects stay, and a deletion in progress
//! completes at once (restart policy `Never`: nothing is restarted).

use std::io::{BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::Duration as StdDuration;

use grace_core::{DeleteError, FinalizerChange, Name, Now};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::api::{
    ApiError, DATABASE, DeleteReport, ErrorKind, Item, Reply, Request, read_request, socket_path,
    write_reply,
};
use crate::clock::{Clock, SystemClock};
use crate::process::{ProcessActuator, WorldEvent};
use crate::runtime::{Recovery, Runtime, RuntimeError, Transition};
use crate::store::{RedbStore, Store, StoreError};

mod batched;
pub use batched::GROUP_COMMIT_ENV;

/// How to run an agent.
#[derive(Clone, Debug)]
pub struct AgentOptions {
    /// The data directory: the store and the socket live here.
    pub data_dir: PathBuf,
    /// The node this agent runs objects for.
    pub node: String,
    /// What a restart does with a kill in progress (D6).
    pub recovery: Recovery,
}

/// The clock of one agent run: the machine's clocks, with an epoch that is
/// this run's own (the workloads of an earlier run are gone).
pub(crate) struct RunClock {
    system: SystemClock,
    epoch: String,
}

impl RunClock {
    /// The machine's clocks, with an epoch of this process's own.
    pub(crate) fn new() -> Self {
        let system = SystemClock::new();
        let epoch = format!(
            "{}/agent:{}:{}",
            system.epoch(),
            std::process::id(),
            system.now().wall.as_unix_millis()
        );
        RunClock { system, epoch }
    }
}

impl Clock for RunClock {
    fn now(&self) -> Now {
        self.system.now()
    }

    fn epoch(&self) -> String {
        self.epoch.clone()
    }
}

enum Input {
    Request(Request, mpsc::Sender<Reply>),
    World(WorldEvent),
    Stop,
}

type AgentRuntime = Runtime<Arc<RedbStore>, RunClock, ProcessActuator>;

/// Sends `stop` to `tx` on the first SIGTERM or SIGINT (from a thread of
/// its own).
pub(crate) fn stop_on_signal<I: Send + 'static>(
    tx: mpsc::Sender<I>,
    stop: I,
) -> Result<(), RuntimeError> {
    let mut signals = Signals::new([SIGTERM, SIGINT])
        .map_err(|e| RuntimeError::Object(format!("signals: {e}")))?;
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

/// Runs the agent until SIGTERM or SIGINT, logging every transition to
/// `log`. Fails if the store cannot be opened (locked by another process,
/// unreadable) or the socket cannot be bound.
pub fn run(options: &AgentOptions, log: &mut impl Write) -> Result<(), RuntimeError> {
    let dir = &options.data_dir;
    std::fs::create_dir_all(dir)
        .map_err(|e| RuntimeError::Object(format!("{}: {e}", dir.display())))?;
    let store = Arc::new(RedbStore::open(dir.join(DATABASE))?);

    let (tx, inputs) = mpsc::channel::<Input>();
    stop_on_signal(tx.clone(), Input::Stop)?;

    let (actuator, world) = ProcessActuator::new();
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
    let socket = socket_path(dir);
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket)
        .map_err(|e| RuntimeError::Object(format!("{}: {e}", socket.display())))?;
    let served = Arc::clone(&store);
    std::thread::spawn(move || accept(listener, served, tx));

    let _ = writeln!(
        log,
        "grace agent: node {}, store {}, socket {}",
        options.node,
        dir.join(DATABASE).display(),
        socket.display()
    );
    // Pick up deletions accepted before a restart.
    let names: Vec<String> = rt.names().map(str::to_owned).collect();
    for name in names {
        if bound_here(&rt, &name, &options.node) {
            let _ = rt.agent_sync(&name)?;
        }
    }
    let batching = batched::group_commit();
    let result = serve(&mut rt, &inputs, &transitions, &options.node, batching, log);
    rt.actuator().kill_all();
    let _ = std::fs::remove_file(&socket);
    let _ = writeln!(log, "grace agent: stopped");
    result
}

/// Writes the transitions reported since the last call, one line each.
pub(crate) fn log_transitions(transitions: &mpsc::Receiver<Transition>, log: &mut impl Write) {
    for t in transitions.try_iter() {
        let _ = writeln!(
            log,
            "{:>14.3}  {:<20} {}",
            t.at.wall.as_unix_millis() as f64 / 1000.0,
            t.object,
            t.change
        );
    }
    let _ = log.flush();
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

/// The runtime thread's loop; `batching`: change requests that wait
/// together are committed together (see [`batched`]).
fn serve(
    rt: &mut AgentRuntime,
    inputs: &mpsc::Receiver<Input>,
    transitions: &mpsc::Receiver<Transition>,
    node: &str,
    batching: bool,
    log: &mut impl Write,
) -> Result<(), RuntimeError> {
    let mut next = None;
    loop {
        log_transitions(transitions, log);
        let wait = wait_for_next(rt);
        let input = match next.take() {
            Some(input) => Ok(input),
            None => inputs.recv_timeout(wait),
        };
        match input {
            Ok(Input::Request(request, reply)) if batching => {
                next = batched::serve_batch(rt, (request, reply), inputs, node);
            }
            Ok(Input::Request(request, reply)) => {
                let _ = reply.send(handle(rt, request, node));
            }
            Ok(Input::World(event)) => rt.handle_world_event(event)?,
            Ok(Input::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        rt.handle_timeouts()?;
    }
}

fn bound_here(rt: &AgentRuntime, name: &str, node: &str) -> bool {
    rt.object(name)
        .and_then(|o| o.node)
        .is_some_and(|n| n == node)
}

/// Carries out one change request on the runtime thread.
fn handle(rt: &mut AgentRuntime, request: Request, node: &str) -> Reply {
    match request {
        Request::Apply { name, object } => {
            if let Err(e) = crate::manifest::check_name("metadata.name", &name) {
                return invalid(e.to_string());
            }
            if let Err(e) = rt.create(&name, (*object).clone()) {
                return error(&name, &e);
            }
            let revision = rt.object(&name).map_or(0, |o| o.meta.resource_version);
            if object.node.as_deref() == Some(node) {
                start(rt, &name);
            }
            Reply::Applied { revision }
        }
        Request::Delete { name, options } => {
            let answer = match rt.delete(&name, &options) {
                Ok(r) => r,
                Err(e) => return error(&name, &e),
            };
            // The agent watches its own node's objects: it sees the
            // deletion at once and starts the kill.
            if !answer.response.dry_run
                && bound_here(rt, &name, node)
                && let Err(e) = rt.agent_sync(&name)
            {
                return error(&name, &e);
            }
            Reply::Deleted(DeleteReport {
                outcome: answer.response.outcome,
                record: answer.record,
                dry_run: answer.response.dry_run,
                force: answer.response.force,
            })
        }
        Request::RemoveFinalizer { name, finalizer } => {
            let Ok(finalizer) = Name::try_from(finalizer.as_str()) else {
                return invalid(format!("finalizer `{finalizer}`: name too long"));
            };
            match rt.update_finalizers(&name, &FinalizerChange::Remove(finalizer)) {
                Ok(_) => Reply::Updated,
                Err(e) => error(&name, &e),
            }
        }
        // Reads are served by the connection threads.
        Request::Get { .. } | Request::Watch => invalid("not a change request".into()),
    }
}

/// Starts an object's containers; one that cannot start counts as exited.
pub(crate) fn start<S: Store, C: Clock>(rt: &mut Runtime<S, C, ProcessActuator>, name: &str) {
    let Some(object) = rt.object(name) else {
        return;
    };
    if rt.actuator().start(name, &object).is_err() {
        for i in 0..object.containers.len() {
            if !rt.actuator().is_running(name, i) {
                let _ = rt.container_exited(name, i);
            }
        }
    }
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
        RuntimeError::Object(m) => (ErrorKind::Invalid, m.clone()),
        RuntimeError::Store(s) => (ErrorKind::Internal, format!("store: {s}")),
    };
    Reply::Error(ApiError { kind, message })
}

fn accept(listener: UnixListener, store: Arc<RedbStore>, changes: mpsc::Sender<Input>) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let store = Arc::clone(&store);
        let changes = changes.clone();
        std::thread::spawn(move || connection(stream, &store, &changes));
    }
}

/// Serves one client until it hangs up.
fn connection(stream: UnixStream, store: &RedbStore, changes: &mpsc::Sender<Input>) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    while let Some(request) = read_request(&mut reader) {
        let reply = match request {
            Err(message) => invalid(message),
            Ok(Request::Get { name }) => read(store, name.as_deref()),
            Ok(Request::Watch) => {
                watch(store, &mut writer);
                return;
            }
            Ok(change) => {
                let (tx, rx) = mpsc::channel();
                if changes.send(Input::Request(change, tx)).is_err() {
                    return;
                }
                match rx.recv() {
                    Ok(reply) => reply,
                    Err(_) => return, // the agent is stopping
                }
            }
        };
        if write_reply(&mut writer, &reply).is_err() {
            return;
        }
    }
}

fn read(store: &RedbStore, name: Option<&str>) -> Reply {
    match items(store, name) {
        Ok((revision, items)) => Reply::Objects { revision, items },
        Err(e) => store_error(name.unwrap_or(""), e),
    }
}

/// One object or all of them, with the store revision they were read at.
pub(crate) fn items<S: Store + ?Sized>(
    store: &S,
    name: Option<&str>,
) -> Result<(u64, Vec<Item>), StoreError> {
    match name {
        Some(name) => {
            let revision = store.revision()?;
            let Some((object, r)) = store.get(name)? else {
                return Err(StoreError::NotFound {
                    name: name.to_owned(),
                });
            };
            let item = Item {
                name: name.to_owned(),
                revision: r.get(),
                object,
            };
            Ok((revision.get(), vec![item]))
        }
        None => {
            let listing = store.list()?;
            let items = listing
                .objects
                .into_iter()
                .map(|(name, object, r)| Item {
                    name,
                    revision: r.get(),
                    object,
                })
                .collect();
            Ok((listing.revision.get(), items))
        }
    }
}

fn store_error(name: &str, e: StoreError) -> Reply {
    Reply::Error(match e {
        StoreError::NotFound { .. } => ApiError {
            kind: ErrorKind::NotFound,
            message: format!("object \"{name}\" not found"),
        },
        other => ApiError {
            kind: ErrorKind::Internal,
            message: format!("store: {other}"),
        },
    })
}

/// Streams the listing, then every change, until the client hangs up.
fn watch(store: &RedbStore, writer: &mut UnixStream) {
    let listing = match items(store, None) {
        Ok(l) => l,
        Err(e) => {
            let _ = write_reply(writer, &store_error("", e));
            return;
        }
    };
    let (revision, list) = listing;
    let reply = Reply::Objects {
        revision,
        items: list,
    };
    if write_reply(writer, &reply).is_err() {
        return;
    }
    let watch = match store.watch(crate::store::Revision(revision)) {
        Ok(w) => w,
        Err(e) => {
            let _ = write_reply(writer, &store_error("", e));
            return;
        }
    };
    for event in watch {
        let reply = match event {
            Ok(event) => Reply::Event(event),
            Err(e) => store_error("", e),
        };
        if write_reply(writer, &reply).is_err() {
            return;
        }
    }
}

/// Whether a data directory has a live agent (its socket answers).
pub fn is_serving(data_dir: &Path) -> bool {
    UnixStream::connect(socket_path(data_dir)).is_ok()
}
