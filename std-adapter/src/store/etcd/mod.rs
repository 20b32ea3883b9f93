//! The etcd backend: the [`Store`] contract on an etcd v3 server, for
//! several machines sharing one store (what Kubernetes itself uses).
//!
//! The design is in the docs of [`EtcdStore`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, KeyValue, Txn, TxnOp, TxnOpResponse,
    TxnResponse,
};

use super::{
    BatchError, DEFAULT_LOG_RETENTION, Listing, Revision, Store, StoreError, StoredObject, Watch,
    Write,
};

mod batch;
mod feed;
mod keys;
mod liveness;

use self::keys::Keys;
pub use self::liveness::{EpochBump, Lease};

/// The prefix an [`EtcdStore`] keeps its keys under unless told otherwise.
pub const DEFAULT_ETCD_PREFIX: &str = "/grace/";

/// etcd's default `--max-txn-ops`: the most operations one transaction may
/// hold on a server started without that flag.
pub const DEFAULT_MAX_TXN_OPS: usize = 128;

/// At most this many objects are read per request by [`Store::list`].
const LIST_PAGE: i64 = 500;

/// How an [`EtcdStore`] connects and where it keeps its keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdOptions {
    /// The etcd client URLs, such as `http://127.0.0.1:2379`. Requests are
    /// balanced over them.
    pub endpoints: Vec<String>,
    /// Every key of the store starts with this (default
    /// [`DEFAULT_ETCD_PREFIX`]). A `/` is added if it does not end with
    /// one, so that `/a` and `/ab` cannot overlap. Two stores on one
    /// prefix are one store; stores on different prefixes are independent,
    /// each with its own revisions (tests use a prefix each).
    pub prefix: String,
    /// How many of the latest changes the log keeps for watches (at least
    /// 1), as [`RedbOptions::log_retention`](super::RedbOptions::log_retention).
    /// Every client of one prefix should use the same value.
    pub log_retention: u64,
    /// How long a connection attempt may take.
    pub connect_timeout: Duration,
    /// How long any one request may take before it fails with
    /// [`StoreError::Unavailable`].
    pub request_timeout: Duration,
    /// The server's `--max-txn-ops`: the most operations one etcd
    /// transaction may hold (etcd's default is 128). It bounds
    /// [`Store::max_batch`]: a batch of `n` writes is one transaction of
    /// `2 n + 3` operations. Set it to the server's value if the server was
    /// started with another one.
    pub max_txn_ops: usize,
    /// TLS: the CA that signed the server's certificate and, if the server
    /// asks for one (`--client-cert-auth`), the client's certificate. Needs
    /// `https://` endpoints; `None` needs `http://` ones.
    pub tls: Option<EtcdTls>,
    /// A user and password for etcd's authentication (`etcdctl auth
    /// enable`); the client takes a token with them and renews it when it
    /// expires.
    pub auth: Option<EtcdAuth>,
}

/// TLS to etcd, from PEM files as etcd's own `--cacert`, `--cert` and
/// `--key` take them.
#[derive(Clone, PartialEq, Eq)]
pub struct EtcdTls {
    /// The CA certificate(s) the server's certificate must chain to (PEM).
    pub ca_cert: Vec<u8>,
    /// The client's certificate and private key (PEM), for a server that
    /// checks client certificates.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl EtcdTls {
    /// Reads the CA certificate and, if given, the client's certificate
    /// and key from PEM files; the error names the file.
    pub fn from_files(
        ca_cert: &std::path::Path,
        identity: Option<(&std::path::Path, &std::path::Path)>,
    ) -> Result<EtcdTls, StoreError> {
        let read = |path: &std::path::Path| {
            std::fs::read(path).map_err(|e| {
                StoreError::Io(crate::store::BackendError::with_context(path.display(), e))
            })
        };
        let identity = match identity {
            Some((cert, key)) => Some((read(cert)?, read(key)?)),
            None => None,
        };
        Ok(EtcdTls {
            ca_cert: read(ca_cert)?,
            identity,
        })
    }
}

impl std::fmt::Debug for EtcdTls {
    /// The key is left out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdTls")
            .field("ca_cert", &format_args!("{} bytes", self.ca_cert.len()))
            .field("client_certificate", &self.identity.is_some())
            .finish()
    }
}

/// A user and password for etcd's authentication.
#[derive(Clone, PartialEq, Eq)]
pub struct EtcdAuth {
    /// The etcd user.
    pub user: String,
    /// Its password.
    pub password: String,
}

impl std::fmt::Debug for EtcdAuth {
    /// The password is left out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdAuth")
            .field("user", &self.user)
            .field("password", &"<hidden>")
            .finish()
    }
}

impl EtcdOptions {
    /// Options for `endpoints`, everything else by default.
    pub fn new<S: Into<String>>(endpoints: impl IntoIterator<Item = S>) -> Self {
        EtcdOptions {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            ..EtcdOptions::default()
        }
    }
}

impl Default for EtcdOptions {
    /// etcd's default client URL on this machine, the default prefix and
    /// retention, a 5 s connect and a 10 s request timeout, etcd's
    /// default `--max-txn-ops` ([`DEFAULT_MAX_TXN_OPS`]), no TLS and no
    /// authentication.
    fn default() -> Self {
        EtcdOptions {
            endpoints: vec!["http://127.0.0.1:2379".into()],
            prefix: DEFAULT_ETCD_PREFIX.into(),
            log_retention: DEFAULT_LOG_RETENTION,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            max_txn_ops: DEFAULT_MAX_TXN_OPS,
            tls: None,
            auth: None,
        }
    }
}

/// A [`Store`] on an etcd v3 server, under one key prefix.
///
/// - Revisions are the store's own, kept in etcd (see below for why and
///   how); writes are compare-and-swap transactions on `mod_revision` /
///   `create_revision`.
/// - Durable as etcd is: a write returns after etcd has committed it (a
///   majority of the cluster has it in its fsynced write-ahead log).
/// - Any number of processes and machines may use one prefix at once:
///   they see each other's writes, and their writes conflict as those of
///   threads of one process do.
/// - Besides the contract: [leases](EtcdStore::grant_lease), per-node
///   [liveness keys](EtcdStore::register_node) bound to a lease, and
///   per-node [fencing epochs](EtcdStore::bump_fencing_epoch).
///
/// A batch is one etcd transaction of up to `2 × writes + 3` operations
/// (objects, log entries, the counter, log trimming), and etcd refuses
/// transactions of more than `--max-txn-ops` (128 by default) operations,
/// so a batch holds at most 62 writes on a default server; a larger one
/// fails whole with [`StoreError::Unavailable`] saying so.
/// [`Store::max_batch`] says how many (from
/// [`EtcdOptions::max_txn_ops`]), for whoever groups writes to keep within.
///
/// Clones share the connection and the runtime.
///
/// ```no_run
/// use grace_core::{Name, Record};
/// use grace_std::store::{EtcdOptions, EtcdStore, Store, StoredObject};
/// use std::time::Duration;
///
/// let store = EtcdStore::connect_with(EtcdOptions {
///     prefix: "/grace/".into(), // the default; one prefix = one store
///     ..EtcdOptions::new(["http://127.0.0.1:2379"])
/// })?;
/// let uid = Name::try_from("uid-1").unwrap();
/// store.create("web-0", StoredObject::unscheduled(Record::new(uid)))?;
///
/// // An agent's liveness: its node key lives as long as its lease.
/// let lease = store.grant_lease(Duration::from_secs(10))?;
/// store.register_node("node-a", lease)?;
/// store.keep_alive(lease)?; // every TTL / 3
/// assert!(store.alive_nodes()?.contains(&"node-a".to_owned()));
/// # Ok::<(), grace_std::store::StoreError>(())
/// ```
///
/// # Revisions
///
/// etcd's own revision cannot be the contract's [`Revision`]: it is
/// cluster-wide (other prefixes, other programs advance it), a transaction
/// of several writes takes one etcd revision where the contract wants one
/// per write, and it is known only after the commit, while the contract
/// stores it in the object's `record.resource_version`. So the store keeps its
/// own counter in etcd, in the key `<prefix>meta/revision`, and every
/// [`batch`](Store::batch) (every single write is a batch of one) is:
///
/// 1. one read transaction: the counter, the log's compaction mark and every
///    object the batch names, all at one etcd revision;
/// 2. the checks of the contract (name free, expected revision, uid and
///    revision preconditions) against that snapshot, in batch order;
/// 3. one write transaction that commits only if nothing it read has
///    changed: `mod_revision` equal to the one read for the counter and for
///    every object key it touches, `create_revision == 0` for each key that
///    must still be absent (a create). It writes the objects (with their
///    new revisions), one change-log entry per write, and the new counter.
///    If a comparison fails (another client wrote in between), its `else`
///    branch reads the same keys again and the batch is checked anew
///    against them: a write that has become stale fails with the same
///    [`StoreError::Conflict`] as on the other backends.
///
/// The counter key makes every write of one prefix go through one
/// compare-and-swap, which is what "one revision counter, every write takes
/// the next" means; different prefixes are independent stores.
///
/// # Watch
///
/// The change log lives in etcd too (`<prefix>log/<revision>`), trimmed to
/// the last `log_retention` changes in the same transactions that write.
/// A [`Watch`] reads the log from the revision after the last one it handed
/// out, and once it has caught up, waits on an etcd watch of the log keys
/// from the etcd revision of that read. If the connection drops, the etcd
/// watch is cancelled or etcd compacts its history, the next read starts
/// again from the log, at the last revision handed out + 1: nothing is
/// missed or repeated across a reconnect. Only the trimming of the store's
/// own log loses changes, and that is reported as [`StoreError::Compacted`].
///
/// # Keys
///
/// | key | value |
/// |---|---|
/// | `<prefix>meta/revision` | the store's revision, decimal |
/// | `<prefix>meta/compacted` | every change up to this revision has left the log |
/// | `<prefix>objects/<name>` | `{"revision": r, "object": {..}}` (JSON) |
/// | `<prefix>log/<revision, 20 digits>` | the change as a JSON [`Event`](super::Event) |
/// | `<prefix>nodes/<node>` | the lease id; the key is bound to that lease |
/// | `<prefix>fencing/<node>` | the node's fencing epoch, decimal |
///
/// # Leases, liveness and fencing
///
/// For several agents sharing one etcd (node lost, R80; fencing, D7):
///
/// - An agent [grants](EtcdStore::grant_lease) itself a lease and
///   [keeps it alive](EtcdStore::keep_alive) well within its TTL (every
///   TTL / 3, as etcd's own clients do).
/// - It [registers](EtcdStore::register_node) its node under that lease:
///   the node's key exists as long as the lease does, so
///   [`alive_nodes`](EtcdStore::alive_nodes) lists the nodes whose agent
///   keeps its lease alive. A crashed or partitioned agent's node drops
///   out by itself once its TTL runs out.
/// - Each node has a fencing epoch, moved only forward by
///   [compare-and-swap](EtcdStore::bump_fencing_epoch). Whoever declares a
///   node lost bumps it; an agent that finds the epoch moved past the one
///   it started with knows it has been fenced off. Its runtime writes
///   through a store [guarded](EtcdStore::with_fencing) by that epoch:
///   every batch's transaction compares it, so nothing it writes lands
///   after the fencing.
///
/// # Blocking
///
/// etcd-client is async (tonic); the `Store` contract is synchronous. Each
/// `EtcdStore` owns a small tokio runtime (one worker thread, which drives
/// the gRPC connection in the background) and every method blocks the
/// calling thread on it with `block_on`, bounded by the request timeout.
/// Any number of threads may call at once. The methods MUST NOT be called
/// from inside an async runtime (tokio panics on a nested `block_on`); call
/// them from `spawn_blocking` there.
#[derive(Clone)]
pub struct EtcdStore {
    inner: Arc<Inner>,
    /// Writes only while this node's fencing epoch is unchanged
    /// ([`EtcdStore::with_fencing`]).
    fence: Option<Fence>,
}

/// A node and the fencing epoch its agent holds: the token every write of
/// a [guarded](EtcdStore::with_fencing) store is conditional on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Fence {
    node: String,
    epoch: u64,
}

struct Inner {
    /// `None` only while dropping.
    runtime: Option<tokio::runtime::Runtime>,
    client: Client,
    keys: Keys,
    retention: u64,
    request_timeout: Duration,
    endpoints: Vec<String>,
    /// The most writes of one batch (one transaction).
    max_batch: usize,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Dropping a runtime blocks until its tasks end, which panics when
        // the last handle is dropped inside an async context.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.inner.endpoints)
            .field("prefix", &self.inner.keys.prefix())
            .field("log_retention", &self.inner.retention)
            .field("max_batch", &self.inner.max_batch)
            .field("fence", &self.fence)
            .finish_non_exhaustive()
    }
}

impl EtcdStore {
    /// Connects to etcd at `endpoints` (such as `["http://127.0.0.1:2379"]`)
    /// with the default [`EtcdOptions`]: keys under
    /// [`DEFAULT_ETCD_PREFIX`].
    pub fn connect<S: AsRef<str>>(endpoints: &[S]) -> Result<Self, StoreError> {
        EtcdStore::connect_with(EtcdOptions::new(endpoints.iter().map(|e| e.as_ref())))
    }

    /// Connects with `options`, and reads the store's revision once, so
    /// that an unreachable server, or one that refuses the client's
    /// certificate or credentials, fails here, with
    /// [`StoreError::Unavailable`], rather than at the first write.
    /// Endpoints must all be `https://` with [`EtcdOptions::tls`], all
    /// `http://` without it ([`StoreError::Io`] otherwise).
    pub fn connect_with(options: EtcdOptions) -> Result<Self, StoreError> {
        check_schemes(&options)?;
        let tls = options.tls.is_some();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("grace-etcd")
            .enable_all()
            .build()
            .map_err(|e| {
                StoreError::Io(crate::store::BackendError::with_context(
                    "cannot start the etcd client runtime",
                    e,
                ))
            })?;
        let connect = ConnectOptions::new()
            .with_connect_timeout(options.connect_timeout)
            // Finds a dead connection under an idle watch (etcd refuses
            // pings more often than every 5 s).
            .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5))
            .with_keep_alive_while_idle(true);
        let connect = match &options.tls {
            Some(tls) => {
                let mut config = etcd_client::TlsOptions::new()
                    .ca_certificate(etcd_client::Certificate::from_pem(&tls.ca_cert));
                if let Some((cert, key)) = &tls.identity {
                    config = config.identity(etcd_client::Identity::from_pem(cert, key));
                }
                connect.with_tls(config)
            }
            None => connect,
        };
        let connect = match &options.auth {
            // etcd's tokens expire (`--auth-token-ttl`, 5 min by default,
            // after their last use): a fresh one is taken with the password.
            Some(auth) => connect
                .with_user(auth.user.clone(), auth.password.clone())
                .with_auto_token_refresh(true),
            None => connect,
        };
        let client = runtime
            .block_on(async {
                tokio::time::timeout(
                    options.connect_timeout,
                    Client::connect(&options.endpoints, Some(connect)),
                )
                .await
            })
            .map_err(|_| {
                StoreError::Unavailable(crate::store::BackendError::from(format!(
                    "no connection to etcd at {:?} within {:?}",
                    options.endpoints, options.connect_timeout
                )))
            })?
            .map_err(etcd_error)?;
        let mut prefix = options.prefix;
        if !prefix.ends_with('/') {
            prefix.push('/');
        }
        let store = EtcdStore {
            inner: Arc::new(Inner {
                runtime: Some(runtime),
                client,
                keys: Keys::new(prefix),
                retention: options.log_retention.max(1),
                request_timeout: options.request_timeout,
                endpoints: options.endpoints,
                max_batch: (options.max_txn_ops.saturating_sub(3) / 2).max(1),
            }),
            fence: None,
        };
        store.revision().map_err(|e| match e {
            // A refused handshake shows only as a broken transport.
            StoreError::Unavailable(m) if m.message().contains("transport error") => {
                StoreError::Unavailable(if tls {
                    m.with_note(
                        "with TLS: does the server's certificate chain to the CA given, \
                         and does the server accept the client certificate given?",
                    )
                } else {
                    m.with_note("does the server speak TLS? then its endpoints are https://")
                })
            }
            other => other,
        })?;
        Ok(store)
    }

    /// The prefix every key of the store starts with (ending with `/`).
    pub fn prefix(&self) -> &str {
        self.inner.keys.prefix()
    }

    /// This store (the same connection), writing only while `node`'s
    /// fencing epoch is still `epoch`: the epoch is a fencing token. Each
    /// batch reads the epoch with the objects it checks and its
    /// transaction compares it, so a batch committed after the node was
    /// fenced writes nothing and fails with [`StoreError::Fenced`],
    /// however long its writer was paused between reading and writing.
    /// An agent's runtime writes through such a store.
    pub fn with_fencing(&self, node: &str, epoch: u64) -> EtcdStore {
        EtcdStore {
            inner: Arc::clone(&self.inner),
            fence: Some(Fence {
                node: node.to_owned(),
                epoch,
            }),
        }
    }
}

impl Inner {
    // Only `Drop` takes the runtime, and nothing runs on the store after.
    #[allow(clippy::expect_used)]
    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime
            .as_ref()
            .expect("the runtime is taken only when the store is dropped")
    }

    /// Runs one request to completion on the store's runtime, within the
    /// request timeout.
    fn call<T, F>(&self, what: &str, request: F) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, etcd_client::Error>>,
    {
        self.call_with(what, request, etcd_error)
    }

    /// [`Inner::call`] with its own translation of etcd's errors.
    fn call_with<T, F>(
        &self,
        what: &str,
        request: F,
        error: impl FnOnce(etcd_client::Error) -> StoreError,
    ) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, etcd_client::Error>>,
    {
        let timeout = self.request_timeout;
        self.runtime()
            .block_on(async { tokio::time::timeout(timeout, request).await })
            .map_err(|_| {
                StoreError::Unavailable(crate::store::BackendError::from(format!(
                    "{what}: no answer from etcd at {:?} within {timeout:?}",
                    self.endpoints
                )))
            })?
            .map_err(error)
    }

    /// One transaction.
    fn txn(&self, what: &str, txn: Txn) -> Result<TxnResponse, StoreError> {
        let mut kv = self.client.kv_client();
        self.call(what, async move { kv.txn(txn).await })
    }

    /// The value of one key, if there is one.
    fn get(&self, what: &str, key: String) -> Result<Option<KeyValue>, StoreError> {
        let mut kv = self.client.kv_client();
        let mut response = self.call(what, async move { kv.get(key, None).await })?;
        Ok(response.take_kvs().into_iter().next())
    }

    /// One page of objects in `[from, end)` at etcd revision `at` (0:
    /// now), with the counter alongside when `at` is 0.
    fn list_page(&self, from: Vec<u8>, at: i64) -> Result<ListPage, StoreError> {
        let end = keys::prefix_end(&self.keys.objects());
        let range = GetOptions::new()
            .with_range(end)
            .with_limit(LIST_PAGE)
            .with_revision(at);
        let mut ops = vec![TxnOp::get(from, Some(range))];
        if at == 0 {
            ops.push(TxnOp::get(self.keys.revision(), None));
        }
        let response = self.txn("list", Txn::new().and_then(ops))?;
        let header = header_revision(&response);
        let mut gets = gets(&response).into_iter();
        let page = gets.next().unwrap_or_default();
        let counter = match gets.next() {
            Some(counter) => Some(keys::decode_counter(
                &self.keys.revision(),
                counter.kvs.first().map(KeyValue::value),
            )?),
            None => None,
        };
        Ok(ListPage {
            header,
            more: page.more,
            kvs: page.kvs,
            counter,
        })
    }
}

/// One page of a listing.
struct ListPage {
    header: i64,
    more: bool,
    kvs: Vec<KeyValue>,
    counter: Option<u64>,
}

impl Store for EtcdStore {
    fn get(&self, name: &str) -> Result<Option<(StoredObject, Revision)>, StoreError> {
        match self.inner.get("get", self.inner.keys.object(name))? {
            Some(kv) => keys::decode_object(name, kv.value()).map(Some),
            None => Ok(None),
        }
    }

    fn list(&self) -> Result<Listing, StoreError> {
        let objects = self.inner.keys.objects();
        let first = self.inner.list_page(objects.clone().into_bytes(), 0)?;
        let mut listing = Listing {
            revision: Revision(first.counter.unwrap_or(0)),
            objects: Vec::new(),
        };
        let at = first.header;
        let mut page = first;
        loop {
            let mut last = None;
            for kv in &page.kvs {
                let key = kv
                    .key_str()
                    .map_err(|e| StoreError::Corrupt(crate::store::BackendError::from_error(e)))?;
                let name = key.strip_prefix(objects.as_str()).unwrap_or(key);
                let (object, revision) = keys::decode_object(name, kv.value())?;
                listing.objects.push((name.to_owned(), object, revision));
                last = Some(kv.key().to_vec());
            }
            match (page.more, last) {
                // The rest, at the etcd revision of the first page: one
                // snapshot.
                (true, Some(mut after)) => {
                    after.push(0);
                    page = self.inner.list_page(after, at)?;
                }
                _ => return Ok(listing),
            }
        }
    }

    fn revision(&self) -> Result<Revision, StoreError> {
        let key = self.inner.keys.revision();
        let kv = self.inner.get("revision", key.clone())?;
        match kv {
            Some(kv) => decode_counter_kv(&key, &kv).map(Revision),
            None => Ok(Revision::ZERO),
        }
    }

    fn batch(&self, writes: Vec<Write>) -> Result<Vec<Revision>, BatchError> {
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        batch::write(&self.inner, self.fence.as_ref(), writes)
    }

    /// `(max_txn_ops - 3) / 2`: 62 writes with etcd's default
    /// `--max-txn-ops` of 128.
    fn max_batch(&self) -> usize {
        self.inner.max_batch
    }

    fn watch(&self, from: Revision) -> Result<Watch, StoreError> {
        let key = self.inner.keys.compacted();
        let compacted = match self.inner.get("watch", key.clone())? {
            Some(kv) => Revision(decode_counter_kv(&key, &kv)?),
            None => Revision::ZERO,
        };
        if from < compacted {
            return Err(StoreError::Compacted {
                requested: from,
                compacted,
            });
        }
        Ok(Watch::new(
            from,
            Box::new(feed::EtcdFeed::new(Arc::clone(&self.inner))),
        ))
    }
}

/// The result of one range read of a transaction.
#[derive(Default)]
struct Got {
    kvs: Vec<KeyValue>,
    more: bool,
}

/// The range reads of a transaction's response, in order.
fn gets(response: &TxnResponse) -> Vec<Got> {
    response
        .op_responses()
        .into_iter()
        .filter_map(|op| match op {
            TxnOpResponse::Get(mut get) => Some(Got {
                more: get.more(),
                kvs: get.take_kvs(),
            }),
            TxnOpResponse::Put(_) | TxnOpResponse::Delete(_) | TxnOpResponse::Txn(_) => None,
        })
        .collect()
}

/// The etcd revision a response was served at.
fn header_revision(response: &TxnResponse) -> i64 {
    response.header().map_or(0, |h| h.revision())
}

/// A decimal counter stored in `kv`.
fn decode_counter_kv(key: &str, kv: &KeyValue) -> Result<u64, StoreError> {
    keys::decode_counter(key, Some(kv.value()))
}

/// `key` holds exactly `kv` (by `mod_revision`), or is absent if `kv` is
/// `None`.
fn unchanged(key: &str, kv: Option<&KeyValue>) -> Compare {
    match kv {
        Some(kv) => Compare::mod_revision(key, CompareOp::Equal, kv.mod_revision()),
        None => Compare::create_revision(key, CompareOp::Equal, 0),
    }
}

/// What etcd says when a transaction holds more operations than its
/// `--max-txn-ops` allows (it applies none of them).
const TOO_MANY_OPS: &str = "too many operations in txn";

/// An etcd client error as a [`StoreError`].
/// `https://` endpoints with TLS options, `http://` ones without: a
/// mismatch would send credentials in clear or fail with a puzzling
/// transport error.
fn check_schemes(options: &EtcdOptions) -> Result<(), StoreError> {
    let scheme = if options.tls.is_some() {
        "https://"
    } else {
        "http://"
    };
    match options.endpoints.iter().find(|e| !e.starts_with(scheme)) {
        Some(endpoint) if options.tls.is_some() => Err(StoreError::Io(
            format!(
                "etcd endpoint {endpoint}: TLS is configured, so every endpoint must be {scheme}"
            )
            .into(),
        )),
        Some(endpoint) => Err(StoreError::Io(
            format!(
                "etcd endpoint {endpoint}: every endpoint must be {scheme} without TLS \
                 (an https:// endpoint needs the CA certificate: --etcd-cacert)"
            )
            .into(),
        )),
        None => Ok(()),
    }
}

/// What etcd answers a client whose credentials it refuses.
const AUTH_REFUSALS: [&str; 5] = [
    "permission denied",
    "authentication failed",
    "user name is empty",
    "user name not found",
    "invalid auth token",
];

fn etcd_error(e: etcd_client::Error) -> StoreError {
    use etcd_client::Error;
    match e {
        Error::GRpcStatus(status) if AUTH_REFUSALS.iter().any(|m| status.message().contains(m)) => {
            StoreError::Unavailable(crate::store::BackendError::with_context(
                "etcd refused the request",
                Error::GRpcStatus(status),
            )
            .with_note("check the etcd user and password, and that the user's role may use this prefix"))
        }
        Error::GRpcStatus(status) if status.message().contains(TOO_MANY_OPS) => {
            StoreError::Unavailable(crate::store::BackendError::from(format!(
                "etcd: {}: a batch takes 2 operations per write + 3, and the server allows \
                 --max-txn-ops (128 by default); write fewer at a time",
                status.message()
            )))
        }
        Error::IoError(e) => StoreError::Io(crate::store::BackendError::from_error(e)),
        Error::Utf8Error(e) => StoreError::Corrupt(crate::store::BackendError::with_context(
            "etcd: a key is not UTF-8",
            e,
        )),
        other => StoreError::Unavailable(crate::store::BackendError::with_context("etcd", other)),
    }
}
