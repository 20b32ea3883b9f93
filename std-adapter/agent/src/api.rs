//! The agent's API: what `grace apply`, `grace delete` and `grace get` ask
//! a running `grace agent`, over the unix socket in its data directory.
//!
//! The embedded store takes an exclusive lock, so while an agent runs it is
//! the one process that writes it, as kube-apiserver is for etcd: every
//! change goes through the agent, which decides it with grace-core, makes
//! it durable, and acts on it. The protocol is one JSON line per request
//! and one per reply; a watch is answered with one line per change until
//! the client hangs up.
//!
//! The serving side reads a request with [`read_request`], which stops at
//! a limit ([`MAX_REQUEST_BYTES`] for the agent) instead of buffering
//! whatever a client sends, and tells a line that is too long, malformed
//! or too slow apart ([`BadRequest`]). Who may connect at all is the
//! agent's business (its data directory is private and it checks each
//! peer's credentials).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use grace_core::{DeleteOptions, DeleteOutcome, FinalizerChange, Input, Name, Record};
use serde::{Deserialize, Serialize};

use crate::store::{Event, FINALIZERS, Store, StoredObject};

/// The socket's file name in the data directory.
pub const SOCKET: &str = "grace.sock";

/// The embedded store's file name in the data directory.
pub const DATABASE: &str = "grace.redb";

/// The socket of the agent serving `data_dir`.
pub fn socket_path(data_dir: &Path) -> PathBuf {
    data_dir.join(SOCKET)
}

/// A request to the agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[allow(
    clippy::large_enum_variant,
    reason = "one request per socket round trip; a delete's options hold a uid of any Kubernetes length inline"
)]
pub enum Request {
    /// Store a new object (and start it, if it is bound to the agent's node).
    Apply {
        /// The name to store it under.
        name: String,
        /// The object.
        object: Box<StoredObject>,
    },
    /// Create the object, or update the one stored under `name` (kubectl's
    /// apply): an update may change labels and finalizers (R45, R46) and
    /// nothing of the spec. An empty uid is assigned on create and matches
    /// any on update.
    Put {
        /// The name to store it under.
        name: String,
        /// The object as the manifest gives it.
        object: Box<StoredObject>,
        /// How its labels and annotations meet the stored ones (absent:
        /// [`Merge::ThreeWay`], as `kubectl apply`).
        #[serde(default, skip_serializing_if = "Merge::is_three_way")]
        merge: Merge,
    },
    /// A delete request, decided by grace-core (R1–R44).
    Delete {
        /// The object.
        name: String,
        /// The request's options: grace-core's form, or the body of a
        /// Kubernetes DELETE (its body, as a Kubernetes API server reads it).
        #[serde(deserialize_with = "either_delete_options")]
        options: DeleteOptions,
    },
    /// Remove one finalizer (R45: may complete a deletion).
    RemoveFinalizer {
        /// The object.
        name: String,
        /// The finalizer to remove.
        finalizer: String,
    },
    /// One object (`name`) or all of them.
    Get {
        /// The object, or `None` for every object.
        name: Option<String>,
    },
    /// Every object, then every change after that listing.
    Watch,
    /// The agent's own state ([`AgentStatus`]), which `grace describe`
    /// shows beside the objects.
    Status,
}

impl Request {
    /// The object this request is about and the lifecycle input it is, for
    /// the requests that are one ([`Request::Delete`],
    /// [`Request::RemoveFinalizer`]): the one place where the protocol's
    /// requests become grace-core's [`Input`]s, so that a new input needs
    /// only its request here. `None` for the others, which are not an
    /// object's input (a create, an update made of several inputs, the
    /// reads); a finalizer name longer than the core holds is an error.
    pub fn input(&self) -> Option<Result<(&str, Input), FinalizerTooLong>> {
        match self {
            Request::Delete { name, options } => Some(Ok((name, Input::Delete(options.clone())))),
            Request::RemoveFinalizer { name, finalizer } => Some(
                Name::try_from(finalizer.as_str())
                    .map(|f| {
                        (
                            name.as_str(),
                            Input::FinalizerUpdate(FinalizerChange::Remove(f)),
                        )
                    })
                    .map_err(|_| FinalizerTooLong(finalizer.clone())),
            ),
            Request::Apply { .. }
            | Request::Put { .. }
            | Request::Get { .. }
            | Request::Watch
            | Request::Status => None,
        }
    }
}

/// How an update's labels and annotations meet the stored ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Merge {
    /// `kubectl apply`'s three-way merge against the last-applied
    /// annotation: what the last apply set and this one leaves out goes;
    /// what others added (`kubectl label`, a controller) stays.
    #[default]
    ThreeWay,
    /// The object is the whole desired state (the Kubernetes API's PUT
    /// and PATCH, `grace patch`): its labels and annotations replace the
    /// stored ones, so a label taken out is gone.
    Replace,
}

impl Merge {
    /// Whether this is the default, [`Merge::ThreeWay`].
    pub fn is_three_way(&self) -> bool {
        *self == Merge::ThreeWay
    }
}

/// A request names a finalizer longer than grace-core's names hold (the
/// name, as given).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinalizerTooLong(pub String);

impl std::fmt::Display for FinalizerTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "finalizer `{}`: name too long", self.0)
    }
}

impl std::error::Error for FinalizerTooLong {}

/// The agent's own state, beside its objects' (a [`Reply::Status`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentStatus {
    /// Set while the agent cannot write its own steps (a deadline's, a
    /// process exit's) to the store: they wait, retried with back-off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_unwritable: Option<StoreUnwritable>,
}

/// The agent's own writes fail (a full disk, say): what it waits for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreUnwritable {
    /// Why the last attempt failed, as the store said it.
    pub error: String,
    /// When the first write failed (Unix milliseconds).
    pub since_unix_millis: u64,
    /// The attempts that failed so far.
    pub attempts: u32,
}

/// An object as `get` returns it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// Its name.
    pub name: String,
    /// The store revision of its last write.
    pub revision: u64,
    /// The object.
    pub object: StoredObject,
}

/// What a delete did, as the API answers it (R33).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeleteReport {
    /// Graceful, pending, or deleted now.
    pub outcome: DeleteOutcome,
    /// The record as written (or as it would be, for a dry run).
    pub record: Record<FINALIZERS>,
    /// Nothing was written (R42).
    pub dry_run: bool,
    /// The record is removed while its workload may still run (D4).
    pub force: bool,
}

/// Why a request failed, in the words a person can act on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorKind {
    /// No such object (404).
    NotFound,
    /// An object of that name exists (409).
    AlreadyExists,
    /// A precondition failed (409).
    Conflict,
    /// The request is invalid (422).
    Invalid,
    /// The store or the agent failed.
    Internal,
    /// The client may not do this: its user is not allowed to talk to the
    /// agent, or only to read (403).
    Forbidden,
    /// The request could not be read: too long, not JSON, too slow.
    BadRequest,
}

/// A failed request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// One line saying what happened.
    pub message: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ApiError {}

/// The agent's answer to one request (or one line of a watch).
// Two variants carry a whole object (its record is about 5 KB); they differ
// by a few hundred bytes, and a reply lives only until it is written.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// The object was stored at this revision.
    Applied {
        /// The revision of the write.
        revision: u64,
    },
    /// The object was updated.
    Updated,
    /// A [`Request::Put`] found the object stored and updated it
    /// (`changed`) or found nothing to change.
    Configured {
        /// Whether anything was written.
        changed: bool,
    },
    /// The delete was decided (and, unless a dry run, written).
    Deleted(DeleteReport),
    /// Objects, as of a store revision.
    Objects {
        /// The store's revision when they were read.
        revision: u64,
        /// The objects, in name order.
        items: Vec<Item>,
    },
    /// One change, during a watch.
    Event(Event),
    /// The agent's own state (an answer to [`Request::Status`]).
    Status(AgentStatus),
    /// The request failed; nothing was changed.
    Error(ApiError),
}

/// Why talking to the agent failed.
#[derive(Debug)]
pub enum ClientError {
    /// No agent is serving the data directory.
    NoAgent(PathBuf),
    /// The agent's socket is there, but this user may not connect to it.
    Denied(PathBuf),
    /// The connection failed, or closed before the answer came.
    Io(std::io::Error),
    /// A request could not be written as JSON, or the agent's answer is
    /// not a reply of this protocol.
    Json(serde_json::Error),
    /// The agent refused the request.
    Api(ApiError),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::NoAgent(dir) => write!(
                f,
                "no agent is serving {}: start one with `grace agent --data-dir {}`",
                dir.display(),
                dir.display()
            ),
            ClientError::Denied(socket) => write!(
                f,
                "permission denied on {}: the agent serves its own user and root only; \
                 run this as that user, or have the agent started with \
                 `--allow-group GROUP[:ro|:rw]` for a group of yours",
                socket.display()
            ),
            ClientError::Io(e) => write!(f, "talking to the agent: {e}"),
            ClientError::Json(e) => write!(f, "talking to the agent: {e}"),
            ClientError::Api(e) => e.fmt(f),
        }
    }
}

/// Each cause is in the message: none is returned as a source.
impl std::error::Error for ClientError {}

/// A connection to the agent serving a data directory.
///
/// The agent drops a connection on which no request arrives within
/// [`REQUEST_TIMEOUT`](crate::REQUEST_TIMEOUT), so that silent clients do
/// not hold its connection slots. A `Client` kept idle longer than half
/// of that, or whose connection the agent has dropped meanwhile,
/// connects again before its next request (an agent gone meanwhile is
/// then [`ClientError::Io`], as a connection it closed); a connection
/// with answers still owed (a watch, a pipeline read only in part), or
/// not answered on yet (a refusal is read as the first answer), is never
/// replaced.
#[derive(Debug)]
pub struct Client {
    data_dir: PathBuf,
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    /// Requests sent whose answers are not read yet (a watch stays at 1).
    owed: usize,
    /// Since when nothing was owed: the agent's clock for dropping the
    /// connection runs from about then.
    idle_since: Instant,
    /// Whether the agent has answered on this connection: until then, a
    /// line it sends unasked is its refusal of the connection, which the
    /// first request's answer reads.
    answered: bool,
}

/// How long a [`Client`] trusts an idle connection: half the agent's
/// [`REQUEST_TIMEOUT`](crate::REQUEST_TIMEOUT), so that a request is never
/// sent just as the agent drops the connection.
const IDLE_REUSE: Duration = Duration::from_secs(5);

impl Client {
    /// Connects to the agent serving `data_dir`; [`ClientError::NoAgent`]
    /// if there is none (no socket, or a socket left by an agent that is
    /// gone), [`ClientError::Denied`] if this user may not reach it.
    pub fn connect(data_dir: &Path) -> Result<Client, ClientError> {
        let (reader, writer) = open(data_dir)?;
        Ok(Client {
            data_dir: data_dir.to_path_buf(),
            reader,
            writer,
            owed: 0,
            idle_since: Instant::now(),
            answered: false,
        })
    }

    /// Connects again if the connection has been idle too long or the
    /// agent has dropped it, unless answers are still owed on it.
    fn fresh(&mut self) -> Result<(), ClientError> {
        if self.owed > 0 || !self.answered {
            return Ok(());
        }
        if self.idle_since.elapsed() < IDLE_REUSE && !self.dropped() {
            return Ok(());
        }
        let (reader, writer) = open(&self.data_dir).map_err(|e| match e {
            // The agent is gone meanwhile: as on a connection it closed.
            ClientError::NoAgent(_) => closed(),
            other => other,
        })?;
        self.reader = reader;
        self.writer = writer;
        self.idle_since = Instant::now();
        self.answered = false;
        Ok(())
    }

    /// Whether the agent has said something unasked on an idle connection
    /// (its "not received in time", or its hang-up).
    fn dropped(&self) -> bool {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        if !self.reader.buffer().is_empty() {
            return true;
        }
        let mut fds = [PollFd::new(self.reader.get_ref(), PollFlags::IN)];
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        poll(&mut fds, Some(&now)).is_ok_and(|n| n > 0)
    }

    /// Sends one request and reads its answer; an [`Reply::Error`] becomes
    /// [`ClientError::Api`].
    pub fn call(&mut self, request: &Request) -> Result<Reply, ClientError> {
        if let Err(e) = self.send(request) {
            // An agent that refuses a connection says why, then hangs up:
            // its reason beats "broken pipe".
            return match self.next_reply() {
                Err(refused @ ClientError::Api(_)) => Err(refused),
                _ => Err(e),
            };
        }
        self.next_reply()
    }

    /// Pipelines `requests`: sends them all (one write), then reads their
    /// answers, which come in the same order; a refused request is an
    /// `Err` in its place and does not stop the rest. The agent handles a
    /// connection's requests in order, each seeing the ones before it;
    /// the change requests it finds waiting together (and those other
    /// connections send meanwhile) are committed with one store
    /// transaction. The answers are read only once every request is
    /// written, so send at most a few hundred at once (the socket's
    /// buffers hold what is not read yet).
    pub fn pipeline(
        &mut self,
        requests: &[Request],
    ) -> Result<Vec<Result<Reply, ApiError>>, ClientError> {
        let mut lines = String::new();
        for request in requests {
            lines.push_str(&serde_json::to_string(request).map_err(ClientError::Json)?);
            lines.push('\n');
        }
        self.fresh()?;
        self.writer.write_all(lines.as_bytes()).map_err(io)?;
        self.owed = self.owed.saturating_add(requests.len());
        requests
            .iter()
            .map(|_| match self.next_reply() {
                Ok(reply) => Ok(Ok(reply)),
                Err(ClientError::Api(e)) => Ok(Err(e)),
                Err(e) => Err(e),
            })
            .collect()
    }

    /// Sends one request without reading the answer (see [`next_reply`]).
    ///
    /// [`next_reply`]: Client::next_reply
    pub fn send(&mut self, request: &Request) -> Result<(), ClientError> {
        let mut line = serde_json::to_string(request).map_err(ClientError::Json)?;
        line.push('\n');
        self.fresh()?;
        self.writer.write_all(line.as_bytes()).map_err(io)?;
        self.owed = self.owed.saturating_add(1);
        Ok(())
    }

    /// Reads the next reply line (during a watch: the next change).
    pub fn next_reply(&mut self) -> Result<Reply, ClientError> {
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).map_err(io)?;
        if n > 0 && self.owed > 0 {
            self.answered = true;
            self.owed = self.owed.saturating_sub(1);
            if self.owed == 0 {
                self.idle_since = Instant::now();
            }
        }
        if n == 0 {
            return Err(closed());
        }
        match serde_json::from_str(&line).map_err(ClientError::Json)? {
            Reply::Error(e) => Err(ClientError::Api(e)),
            reply => Ok(reply),
        }
    }
}

/// Connects to the socket of the agent serving `data_dir`.
fn open(data_dir: &Path) -> Result<(BufReader<UnixStream>, UnixStream), ClientError> {
    let socket = socket_path(data_dir);
    let stream = UnixStream::connect(&socket).map_err(|e| match e.kind() {
        std::io::ErrorKind::PermissionDenied => ClientError::Denied(socket.clone()),
        _ => ClientError::NoAgent(data_dir.to_path_buf()),
    })?;
    let writer = stream.try_clone().map_err(io)?;
    Ok((BufReader::new(stream), writer))
}

/// A connection the agent closed.
fn closed() -> ClientError {
    ClientError::Io(std::io::Error::new(
        std::io::ErrorKind::UnexpectedEof,
        "the agent closed the connection",
    ))
}

fn io(e: std::io::Error) -> ClientError {
    ClientError::Io(e)
}

/// The longest request line the agent reads, in bytes (an object with its
/// commands and hooks is a few kilobytes).
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// Why a request line could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadRequest {
    /// The line is longer than the limit: the rest of the stream cannot be
    /// trusted to start a new request, so the connection ends.
    TooLong {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The line is not a request (not UTF-8, not JSON, unknown fields).
    Malformed(String),
    /// The line did not arrive in time.
    TimedOut,
}

impl std::fmt::Display for BadRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadRequest::TooLong { limit } => {
                write!(f, "bad request: longer than {limit} bytes")
            }
            BadRequest::Malformed(e) => write!(f, "bad request: {e}"),
            BadRequest::TimedOut => f.write_str("bad request: not received in time"),
        }
    }
}

impl std::error::Error for BadRequest {}

/// Reads one request line of at most `limit` bytes from a client (the
/// serving side of the protocol); `None` at the end of the stream or on a
/// broken connection. A line that is too long is not read further
/// ([`BadRequest::TooLong`]); a read that times out (the stream's read
/// timeout) is [`BadRequest::TimedOut`].
pub fn read_request(
    reader: &mut impl BufRead,
    limit: usize,
) -> Option<Result<Request, BadRequest>> {
    let mut line: Vec<u8> = Vec::new();
    loop {
        let available = match reader.fill_buf() {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Some(Err(BadRequest::TimedOut));
            }
            Err(_) => return None,
        };
        if available.is_empty() {
            // The end of the stream: a last line without its newline
            // still counts.
            if line.is_empty() {
                return None;
            }
            break;
        }
        // `content`: the bytes of the line taken so far, its newline not
        // counted.
        let (taken, content, done) = match available.iter().position(|&b| b == b'\n') {
            Some(end) => (end.saturating_add(1), end, true),
            None => (available.len(), available.len(), false),
        };
        if line.len().saturating_add(content) > limit {
            return Some(Err(BadRequest::TooLong { limit }));
        }
        line.extend_from_slice(available.get(..taken).unwrap_or_default());
        reader.consume(taken);
        if done {
            break;
        }
    }
    Some(parse_request(&line))
}

/// Parses one request line (with or without its newline).
pub fn parse_request(line: &[u8]) -> Result<Request, BadRequest> {
    serde_json::from_slice(line).map_err(|e| BadRequest::Malformed(e.to_string()))
}

/// Writes one reply line (the serving side of the protocol).
pub fn write_reply(writer: &mut impl Write, reply: &Reply) -> std::io::Result<()> {
    let mut line = serde_json::to_string(reply).map_err(std::io::Error::other)?;
    line.push('\n');
    writer.write_all(line.as_bytes())?;
    writer.flush()
}

/// `DeleteOptions` as Kubernetes sends them (`meta/v1`): camelCase,
/// `resourceVersion` a string, `dryRun` a list.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WireDeleteOptions {
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    grace_period_seconds: Option<i64>,
    #[serde(default)]
    preconditions: Option<WirePreconditions>,
    #[serde(default)]
    propagation_policy: Option<String>,
    #[serde(default)]
    orphan_dependents: Option<bool>,
    #[serde(default)]
    dry_run: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WirePreconditions {
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
}

/// Reads the body of a Kubernetes DELETE (a `meta/v1` `DeleteOptions` in
/// JSON: `{"gracePeriodSeconds": 30, "preconditions": {"uid": "…",
/// "resourceVersion": "12"}, "propagationPolicy": "Foreground",
/// "dryRun": ["All"]}`) into grace-core's options. An empty body (`{}`)
/// is "nothing given" (R1). Values Kubernetes' validation refuses (a
/// propagation policy or dry-run value it does not know, R6) and values
/// grace cannot hold (a resource version that is not a whole number) are
/// errors naming the field.
#[cfg(test)]
fn delete_options_from_wire(json: &str) -> Result<DeleteOptions, String> {
    let wire: WireDeleteOptions = serde_json::from_str(json).map_err(|e| e.to_string())?;
    from_wire(wire)
}

fn from_wire(wire: WireDeleteOptions) -> Result<DeleteOptions, String> {
    if let Some(kind) = wire.kind.as_deref().filter(|k| *k != "DeleteOptions") {
        return Err(format!(
            "kind: Unsupported value: \"{kind}\" (DeleteOptions)"
        ));
    }
    let _ = wire.api_version;
    // The fields' meaning is grace-core's, shared with grace-k8s.
    let p = wire.preconditions.as_ref();
    DeleteOptions::from_wire(grace_core::WireDeleteOptions {
        grace_period_seconds: wire.grace_period_seconds,
        uid: p.and_then(|p| p.uid.as_deref()),
        resource_version: p.and_then(|p| p.resource_version.as_deref()),
        propagation_policy: wire.propagation_policy.as_deref(),
        orphan_dependents: wire.orphan_dependents,
        dry_run: wire.dry_run.iter().map(String::as_str),
    })
    .map_err(|e| e.to_string())
}

/// grace-core's serde form of the options, or else Kubernetes' wire form.
fn either_delete_options<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<DeleteOptions, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    if let Ok(options) = DeleteOptions::deserialize(&value) {
        return Ok(options);
    }
    WireDeleteOptions::deserialize(&value)
        .map_err(|e| e.to_string())
        .and_then(from_wire)
        .map_err(serde::de::Error::custom)
}

/// One object or all of them as a [`Request::Get`] answers them, with the
/// store revision they were read at (the agent's connections, and the
/// CLI on a shared store).
pub fn items<S: Store + ?Sized>(
    store: &S,
    name: Option<&str>,
) -> Result<(u64, Vec<Item>), crate::store::StoreError> {
    match name {
        Some(name) => {
            let revision = store.revision()?;
            let Some((object, r)) = store.get(name)? else {
                return Err(crate::store::StoreError::NotFound {
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

#[cfg(test)]
mod tests {
    use super::*;
    use grace_core::Propagation;

    fn read_all(input: &[u8], limit: usize) -> Vec<Result<Request, BadRequest>> {
        let mut reader = BufReader::with_capacity(3, input);
        std::iter::from_fn(|| read_request(&mut reader, limit)).collect()
    }

    const WATCH: &[u8] = b"{\"op\":\"watch\"}";

    #[test]
    fn a_line_at_the_limit_is_read_one_byte_more_is_too_long() {
        let limit = WATCH.len();
        let line = [WATCH, b"\n"].concat();
        assert_eq!(read_all(&line, limit), vec![Ok(Request::Watch)]);
        assert_eq!(
            read_all(WATCH, limit),
            vec![Ok(Request::Watch)],
            "no newline"
        );
        // Found before the line's end; the caller then hangs up.
        let longer = [b" ", WATCH, b"\n"].concat();
        let mut reader = BufReader::with_capacity(3, longer.as_slice());
        assert_eq!(
            read_request(&mut reader, limit),
            Some(Err(BadRequest::TooLong { limit }))
        );
    }

    #[test]
    fn garbage_is_malformed_and_the_next_line_is_still_read() {
        let input = [b"\xff\xfe\n{\"op\":\"nope\"}\n", WATCH, b"\n"].concat();
        let got = read_all(&input, MAX_REQUEST_BYTES);
        assert!(matches!(got[0], Err(BadRequest::Malformed(_))));
        assert!(matches!(got[1], Err(BadRequest::Malformed(_))));
        assert_eq!(got[2], Ok(Request::Watch));
        assert_eq!(got.len(), 3);
    }

    #[test]
    fn r1_an_empty_kubernetes_body_gives_nothing() {
        let o = delete_options_from_wire("{}").expect("valid");
        assert_eq!(o.grace_period_seconds, None);
        assert_eq!(o.propagation_policy, None);
        assert!(!o.dry_run);
    }

    #[test]
    fn a_kubernetes_delete_options_body_is_read_with_its_string_resource_version() {
        let o = delete_options_from_wire(
            r#"{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":5,
                "preconditions":{"uid":"u-1","resourceVersion":"12"},
                "propagationPolicy":"Foreground","dryRun":["All"]}"#,
        )
        .expect("valid");
        assert_eq!(o.grace_period_seconds, Some(5));
        assert_eq!(o.preconditions.uid.as_deref(), Some("u-1"));
        assert_eq!(o.preconditions.resource_version, Some(12));
        assert_eq!(o.propagation_policy, Some(Propagation::Foreground));
        assert!(o.dry_run);
    }

    #[test]
    fn r6_unknown_values_are_left_to_validation_or_refused_naming_the_field() {
        let o = delete_options_from_wire(r#"{"propagationPolicy":"Sideways"}"#).expect("parsed");
        assert_eq!(o.propagation_policy, Some(Propagation::Unrecognized));
        assert!(o.validate().is_err(), "R6");
        let e = delete_options_from_wire(r#"{"dryRun":["Some"]}"#).expect_err("R6");
        assert!(e.starts_with("dryRun"), "{e}");
        let e = delete_options_from_wire(r#"{"gracePeriod":3}"#).expect_err("unknown");
        assert!(e.contains("gracePeriod"), "{e}");
    }

    #[test]
    fn the_requests_that_are_inputs_become_the_cores_inputs_and_no_other() {
        let delete: Request = serde_json::from_str(
            r#"{"op":"delete","name":"web","options":{"gracePeriodSeconds":5}}"#,
        )
        .expect("wire form");
        let five = DeleteOptions::default().with_grace_period(Some(5));
        assert_eq!(delete.input(), Some(Ok(("web", Input::Delete(five)))));
        let remove: Request = serde_json::from_str(
            r#"{"op":"remove_finalizer","name":"web","finalizer":"example.com/a"}"#,
        )
        .expect("wire form");
        let a = Name::try_from("example.com/a").expect("short");
        assert_eq!(
            remove.input(),
            Some(Ok((
                "web",
                Input::FinalizerUpdate(FinalizerChange::Remove(a))
            )))
        );
        let long = "f".repeat(grace_core::NAME_CAPACITY + 1);
        let too_long = Request::RemoveFinalizer {
            name: "web".into(),
            finalizer: long.clone(),
        };
        let refused = too_long.input().expect("an input").expect_err("too long");
        assert_eq!(
            refused.to_string(),
            format!("finalizer `{long}`: name too long")
        );
        for other in [Request::Watch, Request::Status, Request::Get { name: None }] {
            assert_eq!(other.input(), None, "{other:?}");
        }
    }

    #[test]
    fn the_agent_protocol_takes_either_form() {
        let wire: Request = serde_json::from_str(
            r#"{"op":"delete","name":"web","options":{"gracePeriodSeconds":0}}"#,
        )
        .expect("wire form");
        let core: Request = serde_json::from_str(
            &serde_json::to_string(&Request::Delete {
                name: "web".into(),
                options: DeleteOptions::default().with_grace_period(Some(0)),
            })
            .expect("serializes"),
        )
        .expect("core form");
        assert_eq!(wire, core);
    }
}
