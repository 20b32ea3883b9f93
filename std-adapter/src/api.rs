//! The agent's API: what `grace apply`, `grace delete` and `grace get` ask
//! a running `grace agent`, over the unix socket in its data directory.
//!
//! The embedded store takes an exclusive lock, so while an agent runs it is
//! the one process that writes it, as kube-apiserver is for etcd: every
//! change goes through the agent, which decides it with grace-core, makes
//! it durable, and acts on it. The protocol is one JSON line per request
//! and one per reply; a watch is answered with one line per change until
//! the client hangs up.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use grace_core::{DeleteOptions, DeleteOutcome, Record};
use serde::{Deserialize, Serialize};

use crate::store::{Event, FINALIZERS, StoredObject};

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
pub enum Request {
    /// Store a new object (and start it, if it is bound to the agent's node).
    Apply {
        /// The name to store it under.
        name: String,
        /// The object.
        object: Box<StoredObject>,
    },
    /// A delete request, decided by grace-core (R1–R44).
    Delete {
        /// The object.
        name: String,
        /// The request's options.
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
    /// The request failed; nothing was changed.
    Error(ApiError),
}

/// Why talking to the agent failed.
#[derive(Debug)]
pub enum ClientError {
    /// No agent is serving the data directory.
    NoAgent(PathBuf),
    /// The connection failed or the agent's answer could not be read.
    Io(String),
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
            ClientError::Io(e) => write!(f, "talking to the agent: {e}"),
            ClientError::Api(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ClientError {}

/// A connection to the agent serving a data directory.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    /// Connects to the agent serving `data_dir`; [`ClientError::NoAgent`]
    /// if there is none (no socket, or a socket left by an agent that is
    /// gone).
    pub fn connect(data_dir: &Path) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(socket_path(data_dir))
            .map_err(|_| ClientError::NoAgent(data_dir.to_path_buf()))?;
        let writer = stream.try_clone().map_err(io)?;
        Ok(Client {
            reader: BufReader::new(stream),
            writer,
        })
    }

    /// Sends one request and reads its answer; an [`Reply::Error`] becomes
    /// [`ClientError::Api`].
    pub fn call(&mut self, request: &Request) -> Result<Reply, ClientError> {
        self.send(request)?;
        self.next_reply()
    }

    /// Pipelines `requests`: sends them all (one write), then reads their
    /// answers, which come in the same order; a refused request is an
    /// `Err` in its place and does not stop the rest. The agent handles a
    /// connection's requests one after another, each seeing the ones
    /// before it, so this saves a round trip per request; requests that
    /// other connections send meanwhile are committed with them.
    pub fn pipeline(
        &mut self,
        requests: &[Request],
    ) -> Result<Vec<Result<Reply, ApiError>>, ClientError> {
        let mut lines = String::new();
        for request in requests {
            lines.push_str(&serde_json::to_string(request).map_err(io)?);
            lines.push('\n');
        }
        self.writer.write_all(lines.as_bytes()).map_err(io)?;
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
        let mut line = serde_json::to_string(request).map_err(io)?;
        line.push('\n');
        self.writer.write_all(line.as_bytes()).map_err(io)
    }

    /// Reads the next reply line (during a watch: the next change).
    pub fn next_reply(&mut self) -> Result<Reply, ClientError> {
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).map_err(io)?;
        if n == 0 {
            return Err(ClientError::Io("the agent closed the connection".into()));
        }
        match serde_json::from_str(&line).map_err(io)? {
            Reply::Error(e) => Err(ClientError::Api(e)),
            reply => Ok(reply),
        }
    }
}

fn io(e: impl std::fmt::Display) -> ClientError {
    ClientError::Io(e.to_string())
}

/// Reads one request line from a client (the serving side of the
/// protocol); `None` at the end of the stream.
pub fn read_request(reader: &mut impl BufRead) -> Option<Result<Request, String>> {
    let mut line = String::new();
    match reader.read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(serde_json::from_str(&line).map_err(|e| format!("bad request: {e}"))),
    }
}

/// Writes one reply line (the serving side of the protocol).
pub fn write_reply(writer: &mut impl Write, reply: &Reply) -> std::io::Result<()> {
    let mut line = serde_json::to_string(reply).map_err(std::io::Error::other)?;
    line.push('\n');
    writer.write_all(line.as_bytes())?;
    writer.flush()
}
