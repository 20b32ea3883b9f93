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
//! - At most [`MAX_CONNECTIONS`] are served at once; the next one gets an
//!   error line. A request line is at most [`MAX_REQUEST_BYTES`] and must
//!   arrive within [`REQUEST_TIMEOUT`] of the agent's waiting for it; a
//!   line that is not a request gets an error and the connection goes on,
//!   a line too long or too slow ends the connection. Each connection has
//!   its own thread, so none of this holds up another client.

use std::collections::VecDeque;
use std::io::{BufReader, Read};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use grace_std::private::{self, PrivateError};

use super::access::{Access, AllowGroup, Policy, peer};
use super::{Input, items};
use crate::api::{
    ApiError, BadRequest, DATABASE, ErrorKind, MAX_REQUEST_BYTES, Reply, Request, read_request,
    socket_path, write_reply,
};
use crate::runtime::RuntimeError;
use crate::store::{RedbStore, Store, StoreError};

/// The most connections served at once (a watch holds one).
pub const MAX_CONNECTIONS: usize = 64;

/// How long a request line may take to arrive, from when the agent starts
/// waiting for it.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a reply may wait for a client that does not read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

fn refused(e: PrivateError) -> RuntimeError {
    RuntimeError::Private(e)
}

/// The data directory's mode: `0700`, or `0710` (its group may reach the
/// socket, not list the directory) when a group is let in.
fn dir_mode(group: Option<&AllowGroup>) -> u32 {
    if group.is_some() { 0o710 } else { 0o700 }
}

/// Makes `dir` private, its store file private, and checks a socket left
/// by an earlier agent, before anything is opened; with a group let in,
/// the directory's group becomes that group.
pub(super) fn prepare(dir: &Path, group: Option<&AllowGroup>) -> Result<(), RuntimeError> {
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
fn group_may_pass(dir: &Path, group: &AllowGroup) -> Result<(), RuntimeError> {
    use std::os::unix::fs::MetadataExt;
    let meta =
        std::fs::metadata(dir).map_err(|e| RuntimeError::io(dir.display().to_string(), e))?;
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
pub(super) fn bind(dir: &Path, group: Option<&AllowGroup>) -> Result<UnixListener, RuntimeError> {
    let socket = socket_path(dir);
    private::check_socket(&socket).map_err(refused)?;
    let _ = std::fs::remove_file(&socket);
    // Inside a private directory: nobody else can reach it before its mode
    // is set.
    let listener = UnixListener::bind(&socket)
        .map_err(|e| RuntimeError::io(socket.display().to_string(), e))?;
    let (mode, gid) = match group {
        Some(g) => (0o660, Some(g.gid)),
        None => (0o600, None),
    };
    private::set_mode(&socket, mode, gid).map_err(refused)?;
    Ok(listener)
}

/// Accepts connections for as long as the listener lives.
pub(super) fn accept(
    listener: UnixListener,
    store: Arc<RedbStore>,
    changes: mpsc::Sender<Input>,
    policy: Policy,
) {
    let open = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
        let access = match peer(&stream) {
            Ok(peer) => match policy.admit(&peer) {
                Ok(access) => access,
                Err(message) => {
                    eprintln!("grace agent: refused a connection from {peer}: {message}");
                    refuse(stream, ErrorKind::Forbidden, message);
                    continue;
                }
            },
            Err(e) => {
                eprintln!("grace agent: refused a connection: no peer credentials: {e}");
                continue;
            }
        };
        let Some(slot) = Slot::take(&open) else {
            refuse(
                stream,
                ErrorKind::Internal,
                format!("the agent serves {MAX_CONNECTIONS} connections already; try again"),
            );
            continue;
        };
        let store = Arc::clone(&store);
        let changes = changes.clone();
        std::thread::spawn(move || {
            connection(stream, access, &store, &changes);
            drop(slot);
        });
    }
}

/// One of the [`MAX_CONNECTIONS`], given back when dropped.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(open: &Arc<AtomicUsize>) -> Option<Slot> {
        open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < MAX_CONNECTIONS).then(|| n.saturating_add(1))
        })
        .ok()
        .map(|_| Slot(Arc::clone(open)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
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
    store: &RedbStore,
    changes: &mpsc::Sender<Input>,
) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::with_capacity(
        READ_BUFFER,
        Deadline {
            stream,
            until: Instant::now() + REQUEST_TIMEOUT,
        },
    );
    let mut pending: VecDeque<Pending> = VecDeque::new();
    loop {
        reader.get_mut().until = Instant::now() + REQUEST_TIMEOUT;
        let Some(request) = read_request(&mut reader, MAX_REQUEST_BYTES) else {
            let _ = answer(&mut writer, &mut pending);
            return;
        };
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
            Ok(Request::Get { name }) => {
                // After the changes before it.
                if !answer(&mut writer, &mut pending) {
                    return;
                }
                read(store, name.as_deref())
            }
            Ok(Request::Watch) => {
                if answer(&mut writer, &mut pending) {
                    watch(store, &mut writer);
                }
                return;
            }
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
