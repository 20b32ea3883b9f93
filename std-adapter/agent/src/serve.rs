//! The agent's socket: its private data directory, the listener, and one
//! thread per connection, bounded.
//!
//! - The data directory is made private before the store is opened
//!   ([`prepare`]): `0700`, the store `0600`, whatever the umask; a
//!   directory, store or socket another user owns or others may write
//!   stops the agent ([`grace_std::private`]).
//! - Every connection's peer is checked first ([`super::access`]); a
//!   refused peer gets one error line and is dropped, and the refusal is
//!   logged (on standard error).
//! - At most [`MAX_CONNECTIONS`](super::MAX_CONNECTIONS) are served at
//!   once, of which at most [`MAX_WATCHES`](super::MAX_WATCHES) watches;
//!   the members of the allowed group, each of them and all together, have
//!   a share of both, and a few connections always stay for the agent's
//!   own user and root ([`super::quota`]). A connection over a quota gets
//!   an error line; a watch over one gets an error line and the connection
//!   goes on. A client that hangs up frees its connection at once, a watch
//!   too (within [`HANGUP_CHECK`], without waiting for the next change). A
//!   request line is at most [`MAX_REQUEST_BYTES`] and must
//!   arrive within [`REQUEST_TIMEOUT`] of the agent's waiting for it; a
//!   line that is not a request gets an error and the connection goes on,
//!   a line too long or too slow ends the connection. Each connection has
//!   its own thread, so none of this holds up another client.

use std::collections::{HashMap, VecDeque};
use std::io::{BufReader, Read};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant};

use grace_std::private::{self, PrivateError};

use super::access::{Access, AllowGroup, Policy, peer};
use super::outage::SharedStatus;
use super::quota::{Connection, Holder, Quotas};
use crate::api::items;
use crate::api::{
    ApiError, BadRequest, DATABASE, ErrorKind, MAX_REQUEST_BYTES, Reply, Request, read_request,
    socket_path, write_reply,
};
use crate::error::AgentError;
use crate::input::Input;
use crate::store::{RedbStore, Store, StoreError};

/// How long a request line may take to arrive, from when the agent starts
/// waiting for it.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a reply may wait for a client that does not read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the agent waits before accepting again after a failed accept.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// How often a watch with no change to send checks whether its client has
/// hung up: a watch interrupted (Ctrl-C on `grace get -w`) gives its
/// connection back within this, with no change in the store.
pub const HANGUP_CHECK: Duration = Duration::from_millis(100);

fn refused(e: PrivateError) -> AgentError {
    AgentError::Private(e)
}

/// The data directory's mode: `0700`, or `0710` (its group may reach the
/// socket, not list the directory) when a group is let in.
fn dir_mode(group: Option<&AllowGroup>) -> u32 {
    if group.is_some() { 0o710 } else { 0o700 }
}

/// Makes `dir` private, its store file private, and checks a socket left
/// by an earlier agent, before anything is opened; with a group let in,
/// the directory's group becomes that group.
pub(super) fn prepare(dir: &Path, group: Option<&AllowGroup>) -> Result<(), AgentError> {
    // The store marks a directory an agent made: only such a one has its
    // mode (and group) changed.
    let ours =
        private::private_dir_marked(dir, dir_mode(group), Some(DATABASE)).map_err(refused)?;
    if let Some(group) = group {
        if ours {
            private::set_mode(dir, dir_mode(Some(group)), Some(group.gid)).map_err(refused)?;
        } else {
            group_may_pass(dir, group)?;
        }
    }
    private::private_file(&dir.join(DATABASE)).map_err(refused)?;
    private::check_socket(&socket_path(dir)).map_err(refused)
}

/// Checks that the members of `group` may pass through `dir`, a
/// directory the agent did not make (whose mode it does not change).
fn group_may_pass(dir: &Path, group: &AllowGroup) -> Result<(), AgentError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir).map_err(|e| AgentError::io(dir.display().to_string(), e))?;
    let mode = meta.mode();
    if mode & 0o001 != 0 || (meta.gid() == group.gid && mode & 0o010 != 0) {
        return Ok(());
    }
    Err(refused(PrivateError::NotMade {
        path: dir.to_path_buf(),
        mode,
        wanted: dir_mode(Some(group)),
    }))
}

/// Binds the socket (after removing one an earlier agent left: the store
/// is ours, its lock is held) and makes it `0600`, or `0660` in the
/// allowed group.
pub(super) fn bind(dir: &Path, group: Option<&AllowGroup>) -> Result<UnixListener, AgentError> {
    let socket = socket_path(dir);
    private::check_socket(&socket).map_err(refused)?;
    let _ = std::fs::remove_file(&socket);
    // Inside a private directory: nobody else can reach it before its mode
    // is set.
    let listener =
        UnixListener::bind(&socket).map_err(|e| AgentError::io(socket.display().to_string(), e))?;
    let (mode, gid) = match group {
        Some(g) => (0o660, Some(g.gid)),
        None => (0o600, None),
    };
    private::set_mode(&socket, mode, gid).map_err(refused)?;
    Ok(listener)
}

/// The connections an agent serves, closed together when it stops (an
/// agent inside a program must give its store back: every connection
/// holds it).
#[derive(Clone, Default)]
pub(super) struct Connections(Arc<Open>);

#[derive(Default)]
struct Open {
    /// Set when the agent stops: the accepting thread takes nothing more.
    stopping: AtomicBool,
    /// Each open connection's stream, by a number of its own.
    streams: Mutex<(u64, HashMap<u64, UnixStream>)>,
    /// Signalled as each connection ends.
    ended: Condvar,
}

/// Why a connection could not be registered.
enum Closed {
    /// The agent is stopping: it takes no more connections.
    Stopping,
    /// The copy of the stream kept to shut it down could not be made.
    NoDescriptor(std::io::Error),
}

/// How long a stopping agent waits for its connections to end once their
/// streams are shut down (each ends at its next read, write or hang-up
/// check).
const CLOSE_WAIT: Duration = Duration::from_secs(5);

impl Connections {
    /// Registers a connection's stream, unless the agent is stopping or
    /// has no descriptor left for its copy.
    fn open(&self, stream: &UnixStream) -> Result<u64, Closed> {
        let copy = stream.try_clone().map_err(Closed::NoDescriptor)?;
        let mut streams = self
            .0
            .streams
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if self.0.stopping.load(Ordering::Acquire) {
            return Err(Closed::Stopping);
        }
        let id = streams.0;
        streams.0 = id.wrapping_add(1);
        streams.1.insert(id, copy);
        Ok(id)
    }

    /// A connection has ended.
    fn close(&self, id: u64) {
        let mut streams = self
            .0
            .streams
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        streams.1.remove(&id);
        self.0.ended.notify_all();
    }

    /// Stops accepting (the accepting thread is woken by a connection to
    /// `socket`), shuts every open connection down and waits, at most
    /// [`CLOSE_WAIT`], until their threads have ended. Returns whether the
    /// accepting thread was woken (if not, it ends at its next
    /// connection: nobody should wait for it).
    pub(super) fn stop(&self, socket: &Path) -> bool {
        self.0.stopping.store(true, Ordering::Release);
        let woken = UnixStream::connect(socket).is_ok();
        let streams = self
            .0
            .streams
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for stream in streams.1.values() {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
        let _ = self
            .0
            .ended
            .wait_timeout_while(streams, CLOSE_WAIT, |s| !s.1.is_empty());
        woken
    }
}

/// Accepts connections until the agent stops ([`Connections::stop`]).
pub(super) fn accept(
    listener: UnixListener,
    store: Arc<RedbStore>,
    changes: mpsc::Sender<Input>,
    policy: Policy,
    status: SharedStatus,
    connections: Connections,
) {
    let quotas = Arc::new(Quotas::default());
    let group: Arc<str> = policy
        .group
        .as_ref()
        .map_or_else(|| Arc::from(""), |g| Arc::from(g.name.as_str()));
    for stream in listener.incoming() {
        if connections.0.stopping.load(Ordering::Acquire) {
            return;
        }
        let stream = match stream {
            Ok(stream) => stream,
            Err(e) => {
                // Out of descriptors (`EMFILE`), the connection stays
                // pending: accepting again at once would spin.
                tracing::warn!("grace agent: cannot accept a connection: {e}");
                std::thread::sleep(ACCEPT_RETRY);
                continue;
            }
        };
        let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
        let (access, holder) = match peer(&stream) {
            Ok(peer) => match policy.admit(&peer) {
                Ok(access) => {
                    let holder = if policy.trusted(&peer) {
                        Holder::Trusted
                    } else {
                        Holder::Member(peer.uid)
                    };
                    (access, holder)
                }
                Err(message) => {
                    tracing::warn!("grace agent: refused a connection from {peer}: {message}");
                    refuse(stream, ErrorKind::Forbidden, message.to_string());
                    continue;
                }
            },
            Err(e) => {
                tracing::warn!("grace agent: refused a connection: no peer credentials: {e}");
                continue;
            }
        };
        let slot = match Quotas::connect(&quotas, holder, &group) {
            Ok(slot) => slot,
            Err(message) => {
                refuse(stream, ErrorKind::Internal, message);
                continue;
            }
        };
        let id = match connections.open(&stream) {
            Ok(id) => id,
            Err(Closed::Stopping) => return,
            Err(Closed::NoDescriptor(e)) => {
                refuse(stream, ErrorKind::Internal, out_of(&e, "file descriptors"));
                continue;
            }
        };
        let writer = stream.try_clone();
        let served = {
            let store = Arc::clone(&store);
            let changes = changes.clone();
            let status = Arc::clone(&status);
            let group = Arc::clone(&group);
            let connections = connections.clone();
            std::thread::Builder::new()
                .name("grace-connection".into())
                .spawn(move || {
                    let mut slot = slot;
                    connection(stream, access, &mut slot, &group, &store, &changes, &status);
                    drop(slot);
                    drop(store);
                    connections.close(id);
                })
        };
        if let Err(e) = served {
            // The machine is out of processes or threads (`pid_max`, a
            // pids cgroup): this client is told so and the agent goes on
            // accepting; the stream and its quota slot went with the
            // closure the thread did not take.
            tracing::warn!("grace agent: cannot serve a connection: {e}");
            if let Ok(writer) = writer {
                refuse(writer, ErrorKind::Internal, out_of(&e, "threads"));
            }
            connections.close(id);
        }
    }
}

/// What a client is told when the agent cannot take its connection.
fn out_of(e: &std::io::Error, what: &str) -> String {
    format!(
        "the agent cannot serve this connection now: it is out of {what} ({e}); \
         nothing was changed, try again"
    )
}

/// Answers one error line and hangs up.
fn refuse(mut stream: UnixStream, kind: ErrorKind, message: String) {
    let _ = write_reply(&mut stream, &Reply::Error(ApiError { kind, message }));
}

/// A stream whose reads fail with `TimedOut` once its deadline has passed.
struct Deadline {
    stream: UnixStream,
    until: Instant,
}

impl Read for Deadline {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

/// Serves one client until it hangs up, sends a line too long or too
/// slowly.
///
/// A client may pipeline: while more of its requests are already waiting
/// on the socket, change requests are handed to the runtime thread
/// without waiting for the answers of the ones before (at most
/// [`PIPELINED`]), so that they can be committed together; the answers
/// are written in the order of the requests. The runtime thread takes
/// inputs in the order they came, so each request still sees the ones
/// before it; a read waits for every earlier answer first.
fn connection(
    stream: UnixStream,
    access: Access,
    slot: &mut Connection,
    group: &str,
    store: &RedbStore,
    changes: &mpsc::Sender<Input>,
    status: &SharedStatus,
) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::with_capacity(
        READ_BUFFER,
        Deadline {
            stream,
            until: request_deadline(),
        },
    );
    let mut pending: VecDeque<Pending> = VecDeque::new();
    loop {
        reader.get_mut().until = request_deadline();
        let Some(request) = read_request(&mut reader, MAX_REQUEST_BYTES) else {
            let _ = answer(&mut writer, &mut pending);
            return;
        };
        // The one check of what a request holds, whoever sent it.
        let mut invalid = request
            .as_ref()
            .ok()
            .and_then(|r| crate::validate::request(r).err());
        let reply = match request {
            Err(e @ BadRequest::Malformed(_)) => bad_request(&e),
            Err(e) => {
                // Too long or too slow: the stream is not trusted further.
                if answer(&mut writer, &mut pending) {
                    let _ = write_reply(&mut writer, &bad_request(&e));
                }
                return;
            }
            Ok(request) if !access.allows(&request) => Reply::Error(ApiError {
                kind: ErrorKind::Forbidden,
                message: "permission denied: this user may get and watch only \
                          (--allow-group GROUP:ro); nothing was changed"
                    .into(),
            }),
            Ok(_) if invalid.is_some() => Reply::Error(ApiError {
                kind: ErrorKind::Invalid,
                message: invalid.take().map(|e| e.to_string()).unwrap_or_default(),
            }),
            Ok(Request::Get { name }) => {
                // After the changes before it.
                if !answer(&mut writer, &mut pending) {
                    return;
                }
                read(store, name.as_deref())
            }
            Ok(Request::Status) => Reply::Status(
                status
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone(),
            ),
            Ok(Request::Watch) => match slot.watch(group) {
                Ok(()) => {
                    if answer(&mut writer, &mut pending) {
                        watch(store, &mut writer);
                    }
                    return;
                }
                Err(message) => Reply::Error(ApiError {
                    kind: ErrorKind::Internal,
                    message,
                }),
            },
            Ok(change) => {
                // One slot: an unbounded channel would allocate room for
                // 31 replies of kilobytes each per request.
                let (tx, rx) = mpsc::sync_channel(1);
                if changes.send(Input::Request(change, tx)).is_err() {
                    return;
                }
                pending.push_back(Pending::Waiting(rx));
                if pending.len() < PIPELINED && more_waiting(&reader) {
                    continue;
                }
                if !answer(&mut writer, &mut pending) {
                    return;
                }
                continue;
            }
        };
        pending.push_back(Pending::Ready(Box::new(reply)));
        if pending.len() < PIPELINED && more_waiting(&reader) {
            continue;
        }
        if !answer(&mut writer, &mut pending) {
            return;
        }
    }
}

/// How much of a client's requests the agent reads at once.
const READ_BUFFER: usize = 64 * 1024;

/// The most requests of one connection waiting for their answers.
const PIPELINED: usize = 1024;

/// An answer owed to a client, in the order of its requests.
enum Pending {
    /// From the runtime thread.
    Waiting(mpsc::Receiver<Reply>),
    /// Known already (boxed: a reply holds a record inline).
    Ready(Box<Reply>),
}

/// Whether more of the client's bytes are already here: buffered, or
/// waiting on the socket.
fn more_waiting(reader: &BufReader<Deadline>) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    if !reader.buffer().is_empty() {
        return true;
    }
    let mut fds = [PollFd::new(&reader.get_ref().stream, PollFlags::IN)];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    poll(&mut fds, Some(&now)).is_ok_and(|n| n > 0)
}

/// Writes every answer owed, in order; `false` if the client or the
/// runtime thread is gone.
fn answer(writer: &mut UnixStream, pending: &mut VecDeque<Pending>) -> bool {
    while let Some(next) = pending.pop_front() {
        let reply = match next {
            Pending::Ready(reply) => *reply,
            Pending::Waiting(rx) => match rx.recv() {
                Ok(reply) => reply,
                Err(_) => return false, // the agent is stopping
            },
        };
        if write_reply(writer, &reply).is_err() {
            return false;
        }
    }
    true
}

fn bad_request(e: &BadRequest) -> Reply {
    Reply::Error(ApiError {
        kind: ErrorKind::BadRequest,
        message: e.to_string(),
    })
}

fn read(store: &RedbStore, name: Option<&str>) -> Reply {
    match items(store, name) {
        Ok((revision, items)) => Reply::Objects { revision, items },
        Err(e) => store_error(name.unwrap_or(""), e),
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

/// Streams the listing, then every change, until the client hangs up
/// (found at the next change, or within [`HANGUP_CHECK`] while nothing
/// changes).
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
    let mut watch = match store.watch(crate::store::Revision(revision)) {
        Ok(w) => w,
        Err(e) => {
            let _ = write_reply(writer, &store_error("", e));
            return;
        }
    };
    loop {
        let reply = match watch.next_timeout(HANGUP_CHECK) {
            Ok(Some(event)) => Reply::Event(event),
            Ok(None) if hung_up(writer) => return,
            Ok(None) => continue,
            Err(e) => {
                // The watch ends with its error.
                let _ = write_reply(writer, &store_error("", e));
                return;
            }
        };
        if write_reply(writer, &reply).is_err() {
            return;
        }
    }
}

/// Whether the client of `stream` has closed its end (`POLLHUP`) or the
/// socket failed (`POLLERR`). A client that only shut down its writing
/// side (`POLLRDHUP`) still reads its watch: it has not hung up.
fn hung_up(stream: &UnixStream) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let mut fds = [PollFd::new(stream, PollFlags::RDHUP)];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    poll(&mut fds, Some(&now)).is_ok_and(|n| n > 0)
        && fds
            .iter()
            .any(|fd| fd.revents().intersects(PollFlags::HUP | PollFlags::ERR))
}

/// When a request begun now must have arrived ([`REQUEST_TIMEOUT`] from
/// now; now itself if the clock could not hold that, which it can).
fn request_deadline() -> Instant {
    let now = Instant::now();
    now.checked_add(REQUEST_TIMEOUT).unwrap_or(now)
}
