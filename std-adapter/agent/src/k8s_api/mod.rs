//! The Kubernetes API for Pods, over HTTPS (`grace agent --k8s-api
//! ADDR:PORT`, [`AgentOptions::k8s_api`](crate::AgentOptions::k8s_api)):
//! what kubectl and kube-rs need to work with the agent's pods.
//!
//! - Every change is a request of the agent's own protocol
//!   ([`crate::api::Request`]) handed to the runtime thread, the same way
//!   the socket hands it (`Context::dispatch`): the same validation, the
//!   same decisions, the same group commit. Reads and watches read the
//!   store, as the socket's do.
//! - TLS with a client certificate required ([`tls`]): no anonymous
//!   request gets past the handshake; the certificate's user and groups
//!   have the access the socket gives them (`identity`).
//! - Bounded: at most [`API_CONNECTIONS`](crate::API_CONNECTIONS)
//!   connections (apart from the socket's), of which the users other than
//!   the agent's own hold [`API_OTHERS_CONNECTIONS`](crate::API_OTHERS_CONNECTIONS)
//!   together and [`USER_CONNECTIONS`](crate::USER_CONNECTIONS) each; a
//!   request body of at most
//!   [`MAX_REQUEST_BYTES`], its headers
//!   within [`REQUEST_TIMEOUT`](crate::REQUEST_TIMEOUT).
//!
//! docs/kubernetes-api.md lists what is served and what is refused.

mod discovery;
mod events;
mod identity;
mod logs;
mod namespace;
mod patch;
mod pods;
mod selector;
mod status;
mod table;
pub mod tls;
mod watch;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::task::{Context as TaskContext, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Method, Response};
use serde_json::Value;

use self::identity::Identity;
use self::namespace::{PodRef, Scope};
use self::pods::Query;
use self::status::Status;
use crate::access::{Access, AllowGroup};
use crate::api::{ApiError, ErrorKind, MAX_REQUEST_BYTES, Reply, Request};
use crate::error::AgentError;
use crate::input::Input;
use crate::store::RedbStore;

pub use self::tls::{CERT_DIR, KUBECONFIG, KubeconfigError, user_kubeconfig};

/// What the handlers share: the store to read, the runtime thread's
/// inputs, and who the agent serves.
pub(crate) struct Context {
    store: Arc<RedbStore>,
    changes: mpsc::Sender<Input>,
    owner: String,
    group: Option<AllowGroup>,
    logs: crate::process::logs::ContainerLogs,
    connections: Mutex<HashMap<String, usize>>,
}

/// The client of a request: who, and what it may do.
pub(crate) struct Caller {
    identity: Identity,
    access: Access,
}

impl Caller {
    /// Whether this caller may `verb` (`create`, `delete`, `patch`,
    /// `update`) the pods of `namespace` (the one `name`d): the socket's
    /// rule, read-write access; else a 403 in kube-apiserver's words.
    pub(crate) fn may_write(
        &self,
        verb: &str,
        name: Option<&str>,
        namespace: &str,
    ) -> Result<(), Status> {
        match self.access {
            Access::ReadWrite => Ok(()),
            Access::ReadOnly => Err(Status::forbidden(
                &self.identity.user,
                verb,
                "pods",
                name,
                Some(namespace),
            )),
        }
    }
}

impl Context {
    /// Hands `request` to the runtime thread and waits for its reply: the
    /// path every change takes, from the socket or from here. The access
    /// check and validation are the socket's.
    pub(crate) fn dispatch(&self, caller: &Caller, request: Request) -> Reply {
        if !caller.access.allows(&request) {
            // The handlers check first, with kubectl's verb; this is the
            // socket's own check, kept as the last word.
            let (verb, key) = match &request {
                Request::Apply { name, .. } => ("create", Some(name)),
                Request::Put { name, .. } => ("update", Some(name)),
                Request::Delete { name, .. } => ("delete", Some(name)),
                Request::RemoveFinalizer { name, .. } => ("patch", Some(name)),
                Request::Get { .. } | Request::Watch | Request::Status => ("get", None),
            };
            let (namespace, name) = key.map(|k| crate::store::split_key(k)).unzip();
            let user = &caller.identity.user;
            return Reply::Error(ApiError {
                kind: ErrorKind::Forbidden,
                message: Status::forbidden(user, verb, "pods", name, namespace).message,
            });
        }
        if let Err(e) = crate::validate::request(&request) {
            return Reply::Error(ApiError {
                kind: ErrorKind::Invalid,
                message: e.to_string(),
            });
        }
        let (tx, rx) = mpsc::sync_channel(1);
        if self.changes.send(Input::Request(request, tx)).is_err() {
            return stopping();
        }
        rx.recv().unwrap_or_else(|_| stopping())
    }

    /// Takes a connection for `user`; `None` over the quota.
    fn connect(&self, user: &str) -> Option<()> {
        let mut open = self
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let total: usize = open.values().sum();
        let mine = open.get(user).copied().unwrap_or(0);
        if total >= crate::API_CONNECTIONS {
            return None;
        }
        if user != self.owner {
            let others = total.saturating_sub(open.get(&self.owner).copied().unwrap_or(0));
            if others >= crate::API_OTHERS_CONNECTIONS || mine >= crate::USER_CONNECTIONS {
                return None;
            }
        }
        open.insert(user.to_owned(), mine.saturating_add(1));
        Some(())
    }

    fn disconnect(&self, user: &str) {
        let mut open = self
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = open.get_mut(user) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(user);
            }
        }
    }
}

fn stopping() -> Reply {
    Reply::Error(ApiError {
        kind: ErrorKind::Internal,
        message: "the agent is stopping".into(),
    })
}

/// A handler's answer.
pub(crate) enum Answer {
    /// A JSON body with this code, and `Warning` headers.
    Json(u16, Value, Vec<String>),
    /// A failure, as a Status.
    Failed(Status),
    /// A stream of bytes (a watch, a log), with its content type.
    Stream(tokio::sync::mpsc::Receiver<Bytes>, &'static str),
}

impl Answer {
    fn ok(value: Value) -> Answer {
        Answer::Json(200, value, Vec::new())
    }
}

/// The body of every answer: whole, or streamed from a channel.
enum AnswerBody {
    Whole(Full<Bytes>),
    Stream(tokio::sync::mpsc::Receiver<Bytes>),
}

impl Body for AnswerBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            AnswerBody::Whole(full) => Pin::new(full).poll_frame(cx),
            AnswerBody::Stream(rx) => rx.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b)))),
        }
    }
}

/// The running API server: stopped with the agent.
#[derive(Debug)]
pub struct K8sApi {
    addr: SocketAddr,
    stopping: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl K8sApi {
    /// The address it listens on (with the port the system chose, for
    /// port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, drops every connection and waits for the server's
    /// thread.
    pub fn stop(&mut self) {
        self.stopping.store(true, Ordering::Release);
        // Wakes the accepting task.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(if wake.is_ipv4() {
                std::net::Ipv4Addr::LOCALHOST.into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            });
        }
        let _ = std::net::TcpStream::connect_timeout(&wake, std::time::Duration::from_secs(1));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for K8sApi {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Binds `addr`, prepares the certificates and the kubeconfig, and serves
/// on a thread of its own.
pub(crate) fn start(
    addr: SocketAddr,
    data_dir: &Path,
    store: Arc<RedbStore>,
    changes: mpsc::Sender<Input>,
    group: Option<AllowGroup>,
    logs: crate::process::logs::ContainerLogs,
) -> Result<K8sApi, AgentError> {
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|e| AgentError::io(format!("--k8s-api {addr}"), e))?;
    let bound = listener
        .local_addr()
        .map_err(|e| AgentError::io(format!("--k8s-api {addr}"), e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| AgentError::io(format!("--k8s-api {addr}"), e))?;
    let owner = identity::own_user();
    let certs = tls::prepare(data_dir, bound, &owner)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| AgentError::io("--k8s-api runtime", e))?;
    let ctx = Arc::new(Context {
        store,
        changes,
        owner,
        group,
        logs,
        connections: Mutex::new(HashMap::new()),
    });
    let stopping = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stopping);
    let acceptor = tokio_rustls::TlsAcceptor::from(certs.server);
    tracing::info!(
        "grace agent: Kubernetes API on https://{bound}, kubeconfig {}",
        certs.kubeconfig.display()
    );
    let thread = std::thread::Builder::new()
        .name("grace-k8s-api".into())
        .spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                accept(listener, acceptor, ctx, flag).await;
            });
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
        })
        .map_err(|e| AgentError::io("--k8s-api thread", e))?;
    Ok(K8sApi {
        addr: bound,
        stopping,
        thread: Some(thread),
    })
}

async fn accept(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    ctx: Arc<Context>,
    stopping: Arc<AtomicBool>,
) {
    loop {
        let Ok((tcp, _peer)) = listener.accept().await else {
            continue;
        };
        if stopping.load(Ordering::Acquire) {
            return;
        }
        let acceptor = acceptor.clone();
        let ctx = Arc::clone(&ctx);
        tokio::spawn(async move {
            let handshake = tokio::time::timeout(crate::REQUEST_TIMEOUT, acceptor.accept(tcp));
            let Ok(Ok(tls)) = handshake.await else {
                return;
            };
            let Some(identity) = Identity::of(tls.get_ref().1.peer_certificates()) else {
                return;
            };
            serve(tls, identity, ctx).await;
        });
    }
}

/// Serves one TLS connection of `identity`.
async fn serve(
    tls: tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    identity: Identity,
    ctx: Arc<Context>,
) {
    let io = hyper_util::rt::TokioIo::new(tls);
    let access = identity.access(&ctx.owner, ctx.group.as_ref());
    let user = identity.user.clone();
    let admitted = ctx.connect(&user).is_some();
    let caller = Arc::new((identity, access, admitted));
    let service_ctx = Arc::clone(&ctx);
    let service = hyper::service::service_fn(move |request| {
        let ctx = Arc::clone(&service_ctx);
        let caller = Arc::clone(&caller);
        async move { Ok::<_, Infallible>(respond(ctx, caller, request).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(crate::REQUEST_TIMEOUT)
        .serve_connection(io, service)
        .await;
    if admitted {
        ctx.disconnect(&user);
    }
}

/// One request: its access checked, its body read (bounded), handled on a
/// blocking thread (the store and the runtime thread are synchronous).
async fn respond(
    ctx: Arc<Context>,
    caller: Arc<(Identity, Option<Access>, bool)>,
    request: hyper::Request<Incoming>,
) -> Response<AnswerBody> {
    let (identity, access, admitted) = (&caller.0, caller.1, caller.2);
    if !admitted {
        return reply(Answer::Failed(Status::too_many(format!(
            "too many connections for user \"{}\"",
            identity.user
        ))));
    }
    let Some(access) = access else {
        return reply(Answer::Failed(Status::forbidden(
            &identity.user,
            "use",
            "pods",
            None,
            None,
        )));
    };
    let header = |name: hyper::header::HeaderName| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let accept = header(hyper::header::ACCEPT);
    let content_type = header(CONTENT_TYPE);
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let query = parse_query(request.uri().query().unwrap_or(""));
    let body = match Limited::new(request.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return reply(Answer::Failed(Status {
                code: 413,
                reason: "RequestEntityTooLarge",
                message: format!("the request is larger than {MAX_REQUEST_BYTES} bytes"),
                name: None,
                causes: Vec::new(),
                kind: "pods",
            }));
        }
    };
    let caller = Caller {
        identity: identity.clone(),
        access,
    };
    let call = Call {
        method,
        path,
        query,
        accept,
        content_type,
        body,
    };
    let answer = tokio::task::spawn_blocking(move || route(&ctx, &caller, call))
        .await
        .unwrap_or_else(|e| Answer::Failed(Status::internal(format!("handler failed: {e}"))));
    reply(answer)
}

/// A request as the handlers read it.
struct Call {
    method: Method,
    path: String,
    query: Query,
    accept: String,
    content_type: String,
    body: Bytes,
}

/// Decodes `a=b&c=d` (empty pairs skipped, `%XX` and `+` decoded).
fn parse_query(query: &str) -> Query {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (unescape(k), unescape(v))
        })
        .collect()
}

fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0usize;
    while let Some(&b) = bytes.get(i) {
        let hex = bytes
            .get(i.saturating_add(1)..i.saturating_add(3))
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b, hex) {
            (b'%', Some(decoded)) => {
                out.push(decoded);
                i = i.saturating_add(3);
            }
            (b'+', _) => {
                out.push(b' ');
                i = i.saturating_add(1);
            }
            (b, _) => {
                out.push(b);
                i = i.saturating_add(1);
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The answer as an HTTP response: JSON with `Cache-Control: no-cache`
/// (kubectl's HTTP cache must not keep `/version` or discovery).
fn reply(answer: Answer) -> Response<AnswerBody> {
    let (code, body, content_type, warnings) = match answer {
        Answer::Json(code, value, warnings) => {
            let aggregated =
                value.get("kind").and_then(Value::as_str) == Some("APIGroupDiscoveryList");
            let content_type = if aggregated {
                discovery::AGGREGATED
            } else {
                "application/json"
            };
            (
                code,
                AnswerBody::Whole(Full::new(Bytes::from(value.to_string()))),
                content_type,
                warnings,
            )
        }
        Answer::Failed(status) => (
            status.code,
            AnswerBody::Whole(Full::new(Bytes::from(status.to_json().to_string()))),
            "application/json",
            Vec::new(),
        ),
        Answer::Stream(rx, content_type) => (200, AnswerBody::Stream(rx), content_type, Vec::new()),
    };
    let mut response = Response::new(body);
    *response.status_mut() =
        hyper::StatusCode::from_u16(code).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        hyper::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    for warning in warnings {
        let text = format!("299 - {}", Value::from(warning));
        if let Ok(value) = HeaderValue::from_str(&text) {
            headers.append(hyper::header::WARNING, value);
        }
    }
    response
}

/// Routes a request to its handler.
fn route(ctx: &Arc<Context>, caller: &Caller, call: Call) -> Answer {
    let segments: Vec<&str> = call.path.trim_matches('/').split('/').collect();
    let get = call.method == Method::GET;
    match segments.as_slice() {
        ["version"] if get => Answer::ok(discovery::version()),
        ["api"] if get => Answer::ok(if discovery::wants_aggregated(&call.accept) {
            discovery::api_aggregated()
        } else {
            discovery::api_legacy()
        }),
        ["apis"] if get => Answer::ok(if discovery::wants_aggregated(&call.accept) {
            discovery::apis_aggregated()
        } else {
            discovery::apis_legacy()
        }),
        ["api", "v1"] if get => Answer::ok(discovery::api_v1()),
        ["openapi", "v3"] if get => Answer::ok(discovery::openapi_v3()),
        ["openapi", "v3", "api", "v1"] if get => Answer::ok(discovery::openapi_v3_api_v1()),
        ["api", "v1", "pods"] => collection(ctx, caller, &call, &Scope::All),
        ["api", "v1", "events"] if get => events::list(ctx, &Scope::All, &call.query),
        ["api", "v1", "namespaces", ns, "events"] if get => match namespace::served(ns) {
            Ok(()) => events::list(ctx, &Scope::In((*ns).to_owned()), &call.query),
            Err(s) => Answer::Failed(s),
        },
        ["api", "v1", "namespaces"] => namespace::route(ctx, caller, &call, None),
        ["api", "v1", "namespaces", ns] => namespace::route(ctx, caller, &call, Some(ns)),
        ["api", "v1", "namespaces", ns, "pods", rest @ ..] => {
            if let Err(s) = namespace::served(ns) {
                return Answer::Failed(s);
            }
            let at = |name| PodRef {
                namespace: ns,
                name,
            };
            match rest {
                [] => collection(ctx, caller, &call, &Scope::In((*ns).to_owned())),
                [name] => one(ctx, caller, &call, at(name)),
                [name, "status"] if get => pods::get(ctx, at(name), &call.accept),
                // The logs are the agent user's files, as on the machine.
                [name, "log"] if get && caller.identity.user == ctx.owner => {
                    logs::log(ctx, &at(name).key(), &call.query)
                }
                [name, "log"] if get => Answer::Failed(Status::forbidden(
                    &caller.identity.user,
                    "get",
                    "pods/log",
                    Some(name),
                    Some(ns),
                )),
                [name, "eviction"] if call.method == Method::POST => {
                    pods::evict(ctx, caller, at(name), &call.body)
                }
                [_, sub @ ("status" | "eviction" | "log")] => {
                    Answer::Failed(Status::method_not_allowed(call.method.as_str(), sub))
                }
                _ => Answer::Failed(Status::not_served()),
            }
        }
        ["version"] | ["api"] | ["apis"] | ["api", "v1"] | ["openapi", "v3", ..] => {
            Answer::Failed(Status::method_not_allowed(call.method.as_str(), &call.path))
        }
        _ => Answer::Failed(Status::not_served()),
    }
}

/// `…/pods`: list, watch; create and deletecollection (in a namespace).
fn collection(ctx: &Arc<Context>, caller: &Caller, call: &Call, scope: &Scope) -> Answer {
    match call.method {
        Method::GET if call.query.get("watch").map(String::as_str) == Some("true") => {
            let request = match watch::WatchRequest::parse(&call.query, &call.accept, scope.clone())
            {
                Ok(r) => r,
                Err(s) => return Answer::Failed(s),
            };
            let (tx, rx) = tokio::sync::mpsc::channel(64);
            let ctx = Arc::clone(ctx);
            match std::thread::Builder::new()
                .name("grace-k8s-watch".into())
                .spawn(move || watch::run(&ctx, &request, &tx))
            {
                Ok(_) => Answer::Stream(rx, "application/json"),
                Err(e) => Answer::Failed(no_thread(&e)),
            }
        }
        Method::GET => pods::list(ctx, scope, &call.query, &call.accept),
        Method::POST => match scope {
            Scope::In(ns) => pods::create(ctx, caller, ns, &call.query, &call.body),
            Scope::All => Answer::Failed(Status::method_not_allowed("POST", "pods")),
        },
        Method::DELETE => match scope {
            Scope::In(ns) => pods::delete_collection(ctx, caller, ns, &call.query, &call.body),
            Scope::All => Answer::Failed(Status::method_not_allowed("DELETE", "pods")),
        },
        _ => Answer::Failed(Status::method_not_allowed(call.method.as_str(), "pods")),
    }
}

/// The answer to a request whose thread could not be started.
pub(crate) fn no_thread(e: &std::io::Error) -> Status {
    tracing::warn!("grace agent: Kubernetes API: cannot start a thread: {e}");
    Status::unavailable(format!(
        "the agent cannot start a thread for this request: it is out of threads ({e}); \
         try again"
    ))
}

/// `…/pods/NAME`: get, delete, patch, update.
fn one(ctx: &Context, caller: &Caller, call: &Call, at: PodRef<'_>) -> Answer {
    match call.method {
        Method::GET => pods::get(ctx, at, &call.accept),
        Method::DELETE => match pods::delete_options(&call.query, &call.body) {
            Ok(options) => pods::delete(ctx, caller, at, options),
            Err(s) => Answer::Failed(s),
        },
        Method::PATCH => pods::patch(ctx, caller, at, &call.content_type, &call.body),
        Method::PUT => match serde_json::from_slice(&call.body) {
            Ok(pod) => pods::update(ctx, caller, at, &pod),
            Err(e) => Answer::Failed(Status::bad_request(format!("Pod: {e}"))),
        },
        _ => Answer::Failed(Status::method_not_allowed(call.method.as_str(), at.name)),
    }
}
