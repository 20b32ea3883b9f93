//! The runtime: many objects' lifecycles driven from a clock and a store.
//!
//! Write-ahead: after every input the object's whole lifecycle — record,
//! agent state, kill stages, deadlines and the actions it now owes — is
//! written to the store *before* any of those actions is carried out, and
//! written again once they are done. A crash at any point therefore loses
//! no accepted deletion, and after a restart the owed actions are carried
//! out again (at least once: every [`Actuator`] action must be idempotent).
//! Deadlines live in one ordered queue, not a timer per object.
//!
//! A failed write may have been applied all the same (a lost
//! acknowledgement: a timeout after the commit, an I/O error reported after
//! the data went out), so the runtime never assumes it was not: it reads the
//! object back and takes the store's state as its own, as a restart would,
//! carrying out again whatever that state still owes. An input answered
//! with [`RuntimeError::Store`] may therefore have taken effect. While the
//! store cannot answer, the object is read back before its next input, and
//! [`Runtime::poll_timeout`] asks for a retry every [`RETRY`].
//!
//! Recovery (D6): with [`Recovery::HonourOriginalDeadline`] (the default) a
//! restarted runtime keeps every persisted deadline, so a restart never
//! extends one, a SIGKILL is never early, and a stop signal is never
//! skipped (the core keeps SIGTERM ≥ 2 s before SIGKILL). With
//! [`Recovery::ResetFullGrace`] the kill starts again with the full grace,
//! as the kubelet does after a restart ("at least grace").

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, mpsc};

use grace_core::{
    Action, ContainerIndex, ContainerSpec, DeleteError, DeleteOptions, DeleteResponse, Duration,
    FinalizerChange, Handled, Instant, Lifecycle, Name, Now, OtherObject, Phase, Record, Strategy,
    Timestamp, UpdateError, UpdateOutcome, decide_delete,
};

use crate::clock::Clock;
use crate::store::{
    BatchError, ContainerStatus, FINALIZERS, KillState, Revision, Store, StoreError,
    StorePreconditions, StoredContainer, StoredObject, Write,
};

mod actuator;
mod batch;
mod objects;
mod persisted;

pub use actuator::{ActionError, Actuator, WorldEvent};
pub use batch::Batch;
use objects::{Id, Objects};
use persisted::Codec;
pub use persisted::{KillRecord, KillStateError};

/// The most containers an object may have.
pub const CONTAINERS: usize = 8;

/// How long the runtime waits before reading an object back again when the
/// store could not answer.
pub const RETRY: Duration = Duration::from_millis(1_000);

/// One object's lifecycle as the runtime keeps it.
pub type ObjectLifecycle = Lifecycle<FINALIZERS, CONTAINERS>;

/// The answer to a delete request (the REST response, R33).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeleteAnswer {
    /// Graceful, pending or deleted; dry run; force.
    pub response: DeleteResponse,
    /// The object as written (when removed, the last state written before
    /// removal), or for a dry run as the same decision would write it.
    pub record: Record<FINALIZERS>,
}

/// What [`Runtime::observe`] found in the store.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Observed {
    /// Nothing newer than the runtime's own last write.
    Unchanged,
    /// A tracked object was changed or removed by another process; its
    /// lifecycle took the change.
    Changed,
    /// An object the runtime did not track: it tracks it now (its
    /// containers, if any, are for the caller to start).
    New,
    /// The name now holds another object (a new uid): the old one was
    /// handled as removed and is still being stopped; observe the name
    /// again once the runtime no longer tracks it to take the new one.
    Replaced,
}

/// What a restarted runtime does with a kill that was in progress (D6).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Recovery {
    /// Keep every persisted deadline: a restart never extends one.
    #[default]
    HonourOriginalDeadline,
    /// Start the kill again with the full grace, as the kubelet does.
    ResetFullGrace,
}

/// Something that happened to an object, as the runtime reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    /// When.
    pub at: Now,
    /// Which object.
    pub object: String,
    /// What.
    pub change: Change,
}

/// The kinds of [`Transition`].
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// The phase changed.
    Phase {
        /// Before.
        from: Phase,
        /// After.
        to: Phase,
    },
    /// An action was carried out (for `Remove`: the record was deleted).
    Action(Action),
    /// An action failed; the message is the actuator's or the store's.
    ActionFailed(Action, String),
    /// The object was loaded from the store: at start, or after a write
    /// whose outcome was unknown.
    Recovered {
        /// Whether its kill was restarted in full (`ResetFullGrace`) or the
        /// workload was found gone (another boot).
        reset: bool,
    },
    /// Another process wrote the object in the store (a request decided
    /// by another API server, a removal, a new object): the runtime took
    /// it (see [`Runtime::observe`]).
    Observed,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Phase { from, to } => write!(f, "{} → {}", from.as_str(), to.as_str()),
            Change::Action(action) => action.fmt(f),
            Change::ActionFailed(action, e) => write!(f, "{action} FAILED: {e}"),
            Change::Recovered { reset: false } => f.write_str("recovered from the store"),
            Change::Recovered { reset: true } => {
                f.write_str("recovered from the store (kill restarted, or workload gone)")
            }
            Change::Observed => f.write_str("written by another process: taken from the store"),
        }
    }
}

/// Why an input was refused. Nothing was changed.
///
/// Each variant carries what went wrong as data; [`source`](std::error::Error::source)
/// is the underlying error where there is one. More variants may come.
#[derive(Debug)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The store failed.
    Store(StoreError),
    /// No object of that name is tracked.
    NotFound(String),
    /// An object of that name exists.
    AlreadyExists(String),
    /// The delete was refused (invalid options, a failed precondition).
    Delete(DeleteError),
    /// The update was refused.
    Update(UpdateError),
    /// An input named a container the object does not have.
    UnknownContainer {
        /// The object's name.
        object: String,
        /// The index given.
        container: usize,
    },
    /// The object has more containers than the runtime tracks
    /// ([`CONTAINERS`]).
    TooManyContainers {
        /// The object's uid.
        uid: String,
        /// How many it has.
        containers: usize,
    },
    /// A name is not valid where it is used (a DNS-1123 label for an
    /// object's name, see [`check_name`](crate::api_server::check_name)).
    InvalidName {
        /// The field, e.g. `metadata.name`.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A kill state could not be encoded, or the runtime's own packed
    /// lifecycle did not decode (a bug).
    KillState {
        /// The object's name (or uid, where the name is not known).
        object: String,
        /// Why.
        error: KillStateError,
    },
    /// An input the caller gave is invalid (an option of a program built
    /// on the runtime); the message names the field.
    InvalidInput(String),
    /// Fencing was refused: the node is alive (its agent holds its lease),
    /// so there is no proof that it is gone (D7).
    NodeAlive {
        /// The node.
        node: String,
    },
    /// A file or directory that must be private to this user is not, or
    /// cannot be made so: a program built on the runtime refuses to start.
    Private(crate::private::PrivateError),
    /// An operating-system operation around the runtime failed: a
    /// directory, a socket, a signal handler, a process to start.
    Io {
        /// What was being done.
        context: String,
        /// The error.
        error: std::io::Error,
    },
}

impl RuntimeError {
    /// An [`Io`](RuntimeError::Io) error while doing `context`.
    pub fn io(context: impl Into<String>, error: std::io::Error) -> Self {
        RuntimeError::Io {
            context: context.into(),
            error,
        }
    }
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::Store(e) => write!(f, "store: {e}"),
            RuntimeError::NotFound(name) => write!(f, "{name}: not found"),
            RuntimeError::AlreadyExists(name) => write!(f, "{name}: already exists"),
            RuntimeError::Delete(e) => write!(f, "delete refused: {e}"),
            RuntimeError::Update(e) => write!(f, "update refused: {e}"),
            RuntimeError::UnknownContainer { object, container } => {
                write!(f, "{object}: no container {container}")
            }
            RuntimeError::TooManyContainers { uid, containers } => {
                write!(f, "{uid}: {containers} containers, more than {CONTAINERS}")
            }
            RuntimeError::InvalidName { field, reason } => write!(f, "{field}: {reason}"),
            RuntimeError::InvalidInput(message) => f.write_str(message),
            RuntimeError::KillState { object, error } => write!(f, "{object}: {error}"),
            RuntimeError::NodeAlive { node } => write!(
                f,
                "node {node} is alive (its agent holds its lease): fencing needs proof that it is gone"
            ),
            RuntimeError::Private(e) => write!(f, "refusing to start: {e}"),
            RuntimeError::Io { context, error } => write!(f, "{context}: {error}"),
        }
    }
}

impl std::error::Error for RuntimeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RuntimeError::Store(e) => Some(e),
            RuntimeError::Delete(e) => Some(e),
            RuntimeError::Update(e) => Some(e),
            RuntimeError::KillState { error, .. } => Some(error),
            RuntimeError::Io { error, .. } => Some(error),
            RuntimeError::Private(e) => Some(e),
            RuntimeError::NotFound(_)
            | RuntimeError::AlreadyExists(_)
            | RuntimeError::UnknownContainer { .. }
            | RuntimeError::TooManyContainers { .. }
            | RuntimeError::InvalidName { .. }
            | RuntimeError::InvalidInput(_)
            | RuntimeError::NodeAlive { .. } => None,
        }
    }
}

impl From<StoreError> for RuntimeError {
    fn from(e: StoreError) -> Self {
        RuntimeError::Store(e)
    }
}

impl From<DeleteError> for RuntimeError {
    fn from(e: DeleteError) -> Self {
        RuntimeError::Delete(e)
    }
}

impl From<UpdateError> for RuntimeError {
    fn from(e: UpdateError) -> Self {
        RuntimeError::Update(e)
    }
}

/// Why a round's batch failed: `index` is set when one object's write was
/// refused (the rest could go through without it).
struct RoundFailure {
    index: Option<usize>,
    error: RuntimeError,
}

/// The most objects one group commit ([`Runtime::handle_timeouts`],
/// recovery at [`Runtime::open`]) writes with one store batch; fewer if
/// the store's batches hold fewer ([`Store::max_batch`]: 62 on etcd with
/// its default `--max-txn-ops`).
pub const ROUND: usize = 1024;

/// The parts of a stored object that its lifecycle does not hold. The
/// lifecycle is the one copy of the record and the kill state: the stored
/// object is rebuilt from it and the spec when it is written (with its kill
/// state) or asked for.
#[derive(Default)]
struct Spec {
    strategy: Strategy,
    node: Option<String>,
    containers: Vec<StoredContainer>,
    status: Vec<ContainerStatus>,
    labels: BTreeMap<String, String>,
    created: Option<Timestamp>,
}

impl Spec {
    fn of(object: StoredObject) -> Spec {
        Spec {
            strategy: object.strategy,
            node: object.node,
            containers: object.containers,
            status: object.status,
            labels: object.labels,
            created: object.created,
        }
    }

    /// The stored object for `lifecycle`, with the kill state `agent`.
    fn object(&self, lifecycle: &ObjectLifecycle, agent: Option<KillState>) -> StoredObject {
        StoredObject {
            record: lifecycle.record().clone(),
            strategy: self.strategy,
            node: self.node.clone(),
            containers: self.containers.clone(),
            labels: self.labels.clone(),
            created: self.created,
            agent,
            status: self.status.clone(),
        }
    }
}

/// Drives every object of a store (see the module docs).
pub struct Runtime<S, C, A> {
    store: S,
    clock: C,
    actuator: A,
    recovery: Recovery,
    epoch: String,
    /// Every tracked object, its lifecycle packed between inputs.
    objects: Objects,
    /// Each queued object's deadline and id.
    deadlines: BTreeSet<(Instant, Id)>,
    /// Encodes the kill states written.
    codec: Codec,
    /// Names whose stored state is unknown (a write failed and the store
    /// could not be read since): read back before their next use.
    unsure: BTreeSet<String>,
    /// When to try reading the `unsure` names back again.
    retry_at: Option<Instant>,
    subscribers: Vec<mpsc::Sender<Transition>>,
    /// A round's writes, gathered for one batch; empty between batches,
    /// its capacity kept ([`Store::batch_from`]).
    writes: Vec<Write>,
    /// While a [`Batch`] commits: the removals its actions owe, written
    /// with the batch after the actions instead of one store delete each.
    removals: Option<Vec<Write>>,
}

impl<S: fmt::Debug, C: fmt::Debug, A: fmt::Debug> fmt::Debug for Runtime<S, C, A> {
    /// The store, clock and actuator, and how many objects are tracked.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("store", &self.store)
            .field("clock", &self.clock)
            .field("actuator", &self.actuator)
            .field("recovery", &self.recovery)
            .field("objects", &self.objects.names().count())
            .field("next_deadline", &self.deadlines.first().map(|&(t, _)| t))
            .finish_non_exhaustive()
    }
}

/// Opens a [`Runtime`] with subscribers that see its recovery: the
/// [`Change::Recovered`] of every stored object and what each one owes is
/// carried out while [`open`](RuntimeBuilder::open) runs, before a
/// [`Runtime::subscribe`] on the opened runtime could be called.
///
/// ```
/// use grace_std::clock::ManualClock;
/// use grace_std::runtime::{Change, Recovery, Runtime};
/// use grace_std::store::MemoryStore;
/// # use grace_std::runtime::Actuator;
/// # use grace_std::store::StoredObject;
/// # struct Nothing;
/// # impl Actuator for Nothing {
/// #     fn perform(&mut self, _: &str, _: &StoredObject, _: &grace_core::Action) -> Result<(), grace_std::runtime::ActionError> { Ok(()) }
/// # }
/// # let store = MemoryStore::new();
/// # grace_std::api_server::create(&store, "web-0", StoredObject::unscheduled(grace_core::Record::builder("u").build()?))?;
///
/// let clock = ManualClock::new(grace_core::Now::from_unix_millis(0), "boot-1");
/// let mut builder = Runtime::builder(store, clock, Nothing)
///     .recovery(Recovery::HonourOriginalDeadline);
/// let transitions = builder.subscribe();
/// let runtime = builder.open()?;
/// let recovered: Vec<_> = transitions.try_iter().map(|t| t.change).collect();
/// assert_eq!(recovered, [Change::Recovered { reset: false }]);
/// # drop(runtime);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a builder does nothing until `open` is called"]
pub struct RuntimeBuilder<S, C, A> {
    store: S,
    clock: C,
    actuator: A,
    recovery: Recovery,
    subscribers: Vec<mpsc::Sender<Transition>>,
}

impl<S: fmt::Debug, C: fmt::Debug, A: fmt::Debug> fmt::Debug for RuntimeBuilder<S, C, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeBuilder")
            .field("store", &self.store)
            .field("clock", &self.clock)
            .field("actuator", &self.actuator)
            .field("recovery", &self.recovery)
            .field("subscribers", &self.subscribers.len())
            .finish()
    }
}

impl<S: Store, C: Clock, A: Actuator> RuntimeBuilder<S, C, A> {
    /// What a restarted runtime does with a kill in progress (D6);
    /// [`Recovery::HonourOriginalDeadline`] unless set.
    pub fn recovery(mut self, recovery: Recovery) -> Self {
        self.recovery = recovery;
        self
    }

    /// A stream of every transition from the start of recovery on.
    pub fn subscribe(&mut self) -> mpsc::Receiver<Transition> {
        let (tx, rx) = mpsc::channel();
        self.subscribers.push(tx);
        rx
    }

    /// Opens the runtime on the store, recovering every stored object, and
    /// carries out what each one owes; the subscribers see all of it.
    pub fn open(self) -> Result<Runtime<S, C, A>, RuntimeError> {
        Runtime::open_with(self)
    }
}

impl<S: Store, C: Clock, A: Actuator> Runtime<S, C, A> {
    /// A [`RuntimeBuilder`]: to subscribe before recovery, or to choose
    /// the [`Recovery`].
    pub fn builder(store: S, clock: C, actuator: A) -> RuntimeBuilder<S, C, A> {
        RuntimeBuilder {
            store,
            clock,
            actuator,
            recovery: Recovery::default(),
            subscribers: Vec::new(),
        }
    }

    /// Opens the runtime on `store`, recovering every stored object, and
    /// carries out what each one owes. Nobody is subscribed yet, so the
    /// recovery's transitions are seen by no one: use
    /// [`Runtime::builder`] to see them.
    pub fn open(store: S, clock: C, actuator: A, recovery: Recovery) -> Result<Self, RuntimeError> {
        Runtime::builder(store, clock, actuator)
            .recovery(recovery)
            .open()
    }

    fn open_with(builder: RuntimeBuilder<S, C, A>) -> Result<Self, RuntimeError> {
        let RuntimeBuilder {
            store,
            clock,
            actuator,
            recovery,
            subscribers,
        } = builder;
        let epoch = clock.epoch();
        let mut runtime = Runtime {
            store,
            clock,
            actuator,
            recovery,
            epoch,
            objects: Objects::default(),
            deadlines: BTreeSet::new(),
            codec: Codec::default(),
            unsure: BTreeSet::new(),
            retry_at: None,
            subscribers,
            writes: Vec::new(),
            removals: None,
        };
        let listing = runtime.store.list()?;
        let now = runtime.clock.now();
        let round_size = runtime.round_size();
        let mut round = Vec::new();
        for (name, object, revision) in listing.objects {
            let (lifecycle, reset) = runtime.restore(&object, revision, now, runtime.recovery)?;
            let id = runtime
                .objects
                .insert(&name, lifecycle, Spec::of(object), Some(revision));
            runtime.emit(now, &name, Change::Recovered { reset });
            round.push((id, None));
            if round.len() == round_size {
                let done = runtime.commit_round(now, std::mem::take(&mut round));
                runtime.objects.close();
                done?;
            }
        }
        let done = runtime.commit_round(now, round);
        runtime.objects.close();
        done?;
        Ok(runtime)
    }

    /// A stream of every transition from now on.
    pub fn subscribe(&mut self) -> mpsc::Receiver<Transition> {
        let (tx, rx) = mpsc::channel();
        self.subscribers.push(tx);
        rx
    }

    /// The store, for reads.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The actuator.
    pub fn actuator(&mut self) -> &mut A {
        &mut self.actuator
    }

    /// The lifecycle of a tracked object: decoded on each call from the
    /// compact form the runtime keeps it in.
    pub fn lifecycle(&self, name: &str) -> Option<ObjectLifecycle> {
        let id = self.objects.id(name)?;
        self.objects.read(id, |_, l| l.clone()).ok().flatten()
    }

    /// The stored object as last written by the runtime (its containers,
    /// node and metadata), while it is tracked. Built on each call from the
    /// lifecycle, which is the runtime's only copy of the record; `agent`
    /// is `None` (the kill state is [`lifecycle`](Self::lifecycle)).
    pub fn object(&self, name: &str) -> Option<StoredObject> {
        let id = self.objects.id(name)?;
        self.objects
            .read(id, |entry, l| entry.spec.object(l, None))
            .ok()
            .flatten()
    }

    /// Names of the objects tracked (stored, or removed with a workload
    /// still being stopped), in bytewise order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.objects.names()
    }

    /// Stores and tracks a new object.
    pub fn create(&mut self, name: &str, object: StoredObject) -> Result<(), RuntimeError> {
        let done = self.create_open(name, object);
        self.objects.close();
        done
    }

    fn create_open(&mut self, name: &str, object: StoredObject) -> Result<(), RuntimeError> {
        if self.unsure.contains(name) {
            self.resync(name)?;
        }
        if self.objects.id(name).is_some() {
            return Err(RuntimeError::AlreadyExists(name.to_owned()));
        }
        let lifecycle = fresh(&object, &[])?;
        let spec = Spec::of(object);
        let written = spec.object(&lifecycle, Some(self.agent_record(&lifecycle)?));
        let revision = match self.store.create(name, written) {
            Ok(r) => r,
            Err(StoreError::AlreadyExists { .. }) => {
                return Err(RuntimeError::AlreadyExists(name.to_owned()));
            }
            Err(e) => {
                // Stored or not: take whatever the store holds.
                let _ = self.resync(name);
                return Err(e.into());
            }
        };
        let mut lifecycle = lifecycle;
        lifecycle.stored_at(revision.get());
        self.objects.insert(name, lifecycle, spec, Some(revision));
        Ok(())
    }

    /// A delete request (R1–R44, D4): the core's
    /// [`Lifecycle::handle_delete`] on the named object, made durable.
    pub fn handle_delete(
        &mut self,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<DeleteAnswer, RuntimeError> {
        self.input(name, |l, now| delete_input(l, now, options))
    }

    /// An update of the finalizer list (R45, R46): the core's
    /// [`Lifecycle::handle_finalizer_update`] on the named object.
    pub fn handle_finalizer_update(
        &mut self,
        name: &str,
        change: &FinalizerChange,
    ) -> Result<UpdateOutcome, RuntimeError> {
        self.input(name, |l, now| {
            l.handle_finalizer_update(now, change)
                .map_err(RuntimeError::Update)
        })
    }

    /// The garbage collector's step ([`crate::gc`]): removes the `orphan`
    /// and `foregroundDeletion` finalizers of an object marked for
    /// deletion, one finalizer update each (R45: the last one may remove
    /// the object). Returns the finalizers removed; none if the object is
    /// not being deleted, has neither, or is gone.
    pub fn collect_garbage(&mut self, name: &str) -> Result<Vec<Name>, RuntimeError> {
        let Some(lifecycle) = self.lifecycle(name) else {
            return Ok(Vec::new());
        };
        let due = crate::gc::finalizers_to_remove(lifecycle.record());
        let mut removed = Vec::with_capacity(due.len());
        for finalizer in due {
            match self.handle_finalizer_update(name, &FinalizerChange::Remove(finalizer.clone())) {
                Ok(_) => removed.push(finalizer),
                // Removed meanwhile (by the removal before): nothing left.
                Err(RuntimeError::NotFound(_) | RuntimeError::Update(UpdateError::NotFound)) => {
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(removed)
    }

    /// Replaces the object's labels (`metadata.labels`; allowed at any
    /// time, deleting or not, as Kubernetes allows). Writes nothing if they
    /// are unchanged.
    pub fn update_labels(
        &mut self,
        name: &str,
        labels: BTreeMap<String, String>,
    ) -> Result<(), RuntimeError> {
        let done = self.update_labels_open(name, labels);
        self.objects.close();
        done
    }

    fn update_labels_open(
        &mut self,
        name: &str,
        labels: BTreeMap<String, String>,
    ) -> Result<(), RuntimeError> {
        if self.unsure.contains(name) {
            self.resync(name)?;
        }
        let now = self.clock.now();
        let entry = self
            .objects
            .named_mut(name)
            .filter(|e| e.revision.is_some())
            .ok_or_else(|| RuntimeError::NotFound(name.to_owned()))?;
        if entry.spec.labels == labels {
            return Ok(());
        }
        let before = std::mem::replace(&mut entry.spec.labels, labels);
        if let Err(e) = self.commit(name, now, None) {
            // As for any input: take the store's state, or else show the
            // last state known to be stored.
            if self.resync(name).is_err()
                && let Some(entry) = self.objects.named_mut(name)
            {
                entry.spec.labels = before;
            }
            return Err(e);
        }
        Ok(())
    }

    /// The agent observes the object (and starts or shortens its kill):
    /// [`Lifecycle::handle_agent_sync`].
    pub fn handle_agent_sync(&mut self, name: &str) -> Result<Handled, RuntimeError> {
        self.input(name, |l, now| Ok(l.handle_agent_sync(now)))
    }

    /// An eviction override (R52, R73, R74): [`Lifecycle::handle_evict`].
    pub fn handle_evict(
        &mut self,
        name: &str,
        grace_period_seconds: i64,
    ) -> Result<Handled, RuntimeError> {
        self.input(name, |l, now| Ok(l.handle_evict(now, grace_period_seconds)))
    }

    /// A container's pre-stop hook returned:
    /// [`Lifecycle::handle_pre_stop_finished`].
    pub fn handle_pre_stop_finished(
        &mut self,
        name: &str,
        container: impl Into<ContainerIndex>,
    ) -> Result<Handled, RuntimeError> {
        let container = container.into().get();
        self.input(name, |l, now| {
            l.handle_pre_stop_finished(now, container)
                .map_err(|_| RuntimeError::UnknownContainer {
                    object: name.to_owned(),
                    container,
                })
        })
    }

    /// A container's process exited:
    /// [`Lifecycle::handle_container_exited`].
    pub fn handle_container_exited(
        &mut self,
        name: &str,
        container: impl Into<ContainerIndex>,
    ) -> Result<Handled, RuntimeError> {
        let container = container.into().get();
        self.input(name, |l, now| {
            l.handle_container_exited(now, container)
                .map_err(|_| RuntimeError::UnknownContainer {
                    object: name.to_owned(),
                    container,
                })
        })
    }

    /// [`handle_delete`](Self::handle_delete)'s old name.
    #[deprecated(note = "renamed handle_delete, as in the core")]
    pub fn delete(
        &mut self,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<DeleteAnswer, RuntimeError> {
        self.handle_delete(name, options)
    }

    /// [`handle_finalizer_update`](Self::handle_finalizer_update)'s old name.
    #[deprecated(note = "renamed handle_finalizer_update, as in the core")]
    pub fn update_finalizers(
        &mut self,
        name: &str,
        change: &FinalizerChange,
    ) -> Result<UpdateOutcome, RuntimeError> {
        self.handle_finalizer_update(name, change)
    }

    /// [`handle_agent_sync`](Self::handle_agent_sync)'s old name.
    #[deprecated(note = "renamed handle_agent_sync, as in the core")]
    pub fn agent_sync(&mut self, name: &str) -> Result<Handled, RuntimeError> {
        self.handle_agent_sync(name)
    }

    /// [`handle_evict`](Self::handle_evict)'s old name.
    #[deprecated(note = "renamed handle_evict, as in the core")]
    pub fn evict(
        &mut self,
        name: &str,
        grace_period_seconds: i64,
    ) -> Result<Handled, RuntimeError> {
        self.handle_evict(name, grace_period_seconds)
    }

    /// [`handle_pre_stop_finished`](Self::handle_pre_stop_finished)'s old name.
    #[deprecated(note = "renamed handle_pre_stop_finished, as in the core")]
    pub fn pre_stop_finished(
        &mut self,
        name: &str,
        container: impl Into<ContainerIndex>,
    ) -> Result<Handled, RuntimeError> {
        self.handle_pre_stop_finished(name, container)
    }

    /// [`handle_container_exited`](Self::handle_container_exited)'s old name.
    #[deprecated(note = "renamed handle_container_exited, as in the core")]
    pub fn container_exited(
        &mut self,
        name: &str,
        container: impl Into<ContainerIndex>,
    ) -> Result<Handled, RuntimeError> {
        self.handle_container_exited(name, container)
    }

    /// Records what the agent sees of a container (running, exited with a
    /// code, could not start): written to the store at once, as the
    /// kubelet updates a pod's status. Nothing happens if the object is
    /// gone (or its record removed) or the status is already `status`.
    pub fn set_container_status(
        &mut self,
        name: &str,
        container: usize,
        status: ContainerStatus,
    ) -> Result<(), RuntimeError> {
        let Some(id) = self.objects.id(name) else {
            return Ok(());
        };
        let Some(entry) = self.objects.get_mut(id) else {
            return Ok(());
        };
        if entry.revision.is_none() || entry.spec.status.get(container) == Some(&status) {
            return Ok(());
        }
        let waiting = ContainerStatus::Waiting {
            reason: "ContainerCreating".to_owned(),
        };
        let count = entry.spec.containers.len();
        if container >= count {
            return Err(RuntimeError::UnknownContainer {
                object: name.to_owned(),
                container,
            });
        }
        entry.spec.status.resize(count, waiting);
        if let Some(slot) = entry.spec.status.get_mut(container) {
            *slot = status;
        }
        let done = self.persist(id);
        self.objects.close();
        done.map(|_| ())
    }

    /// The earliest deadline of all objects, or the next attempt to read
    /// back objects the store could not answer for.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let next = self.deadlines.first().map(|&(t, _)| t);
        match (next, self.retry_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Handles every object whose deadline has passed, earliest first.
    ///
    /// Group commit: the objects due together are handled in rounds of up
    /// to [`ROUND`]. A round's write-ahead records are written with one
    /// [`Store::batch`] (one fsync on [`RedbStore`](crate::store::RedbStore))
    /// before any of its actions is carried out; the records after the
    /// actions are written with a second batch. If the first batch is
    /// refused because of one object (a conflict, say), the round is undone
    /// and handled one object at a time, so that object holds back no other.
    ///
    /// Objects whose stored state is unknown are read back first when their
    /// retry ([`RETRY`]) is due; if the store does not answer one of them,
    /// this call stops there and asks it nothing more. A failed round stops
    /// this call (its objects stay due, or are read back later) and its
    /// first error is returned.
    pub fn handle_timeouts(&mut self) -> Result<(), RuntimeError> {
        let now = self.clock.now();
        let mut failed = None;
        if self.retry_at.is_some_and(|t| t <= now.mono) {
            self.retry_at = None;
            let names: Vec<String> = self.unsure.iter().cloned().collect();
            for name in names {
                match self.resync(&name) {
                    // A store that does not answer would not answer for
                    // the others or take a round's batch either (and on
                    // etcd each request waits out a timeout): the rest
                    // waits for the next retry.
                    Err(e) if store_down(&e) => {
                        self.objects.close();
                        return Err(e);
                    }
                    Err(e) => {
                        failed.get_or_insert(e);
                    }
                    Ok(()) => {}
                }
            }
            self.objects.close();
        }
        loop {
            let Some(first) = self.deadlines.first().copied() else {
                return failed.map_or(Ok(()), Err);
            };
            if first.0 > now.mono {
                return failed.map_or(Ok(()), Err);
            }
            let due: Vec<Id> = self
                .deadlines
                .iter()
                .take_while(|&&(t, _)| t <= now.mono)
                .take(self.round_size())
                .map(|&(_, id)| id)
                .collect();
            let done = self.timeout_round(now, due);
            self.objects.close();
            if let Err(e) = done {
                return Err(failed.unwrap_or(e));
            }
            // A lifecycle always moves a handled deadline past now; if one
            // did not, stop rather than spin.
            if self.deadlines.first() == Some(&first) {
                return failed.map_or(Ok(()), Err);
            }
        }
    }

    /// One round of [`handle_timeouts`](Self::handle_timeouts).
    fn timeout_round(&mut self, now: Now, due: Vec<Id>) -> Result<(), RuntimeError> {
        // The packed lifecycles from before the round: to go back to.
        let mut befores = Vec::with_capacity(due.len());
        let mut round = Vec::with_capacity(due.len());
        for id in due {
            let Some((lifecycle, packed)) = self.objects.open_keeping(id)? else {
                continue;
            };
            // Only a deadline that has passed changes a lifecycle (an early
            // call is a no-op), and handling one always moves it on: the
            // deadline says whether anything changed, without a copy of the
            // whole lifecycle to compare with.
            if lifecycle.poll_timeout().is_none_or(|t| t > now.mono) {
                continue;
            }
            let from = lifecycle.phase();
            lifecycle.handle_timeout(now);
            round.push((id, Some(from)));
            befores.push(packed);
        }
        match self.write_ahead(&round) {
            Ok(written) => self.act_round(now, round, written),
            Err(failure) => {
                // Refused, or applied with its answer lost: take the
                // store's state (the last one known while it cannot be read).
                let one_object = failure.index.is_some();
                let mut names = Vec::with_capacity(round.len());
                for (&(id, _), before) in round.iter().zip(befores) {
                    let name = self.objects.get(id).map(|e| Arc::clone(&e.name));
                    self.objects.revert(id, before);
                    names.extend(name);
                }
                self.resync_each(&names);
                if !one_object || round.len() < 2 {
                    return Err(failure.error);
                }
                let mut first_error = None;
                for name in names {
                    let handled = self.input(&name, |l, now| {
                        l.handle_timeout(now);
                        Ok(())
                    });
                    if let Err(e) = handled {
                        first_error.get_or_insert(e);
                    }
                }
                first_error.map_or(Ok(()), Err)
            }
        }
    }

    /// Runs one input on one object, then makes it durable and acts on it.
    fn input<R>(
        &mut self,
        name: &str,
        f: impl FnOnce(&mut ObjectLifecycle, Now) -> Result<R, RuntimeError>,
    ) -> Result<R, RuntimeError> {
        let done = self.input_open(name, f);
        self.objects.close();
        done
    }

    fn input_open<R>(
        &mut self,
        name: &str,
        f: impl FnOnce(&mut ObjectLifecycle, Now) -> Result<R, RuntimeError>,
    ) -> Result<R, RuntimeError> {
        if self.unsure.contains(name) {
            self.resync(name)?;
        }
        let now = self.clock.now();
        let lifecycle = self
            .lifecycle_mut(name)?
            .ok_or_else(|| RuntimeError::NotFound(name.to_owned()))?;
        let before = lifecycle.clone();
        let result = f(lifecycle, now);
        if result.is_err() || *lifecycle == before {
            *lifecycle = before;
            return result;
        }
        let from = before.phase();
        if let Err(e) = self.commit(name, now, Some(from)) {
            // The input may be durable, its actions partly done: take the
            // store's state. Until it can be read, show the last state known
            // to be stored.
            if self.resync(name).is_err()
                && let Ok(Some(lifecycle)) = self.lifecycle_mut(name)
            {
                *lifecycle = before;
            }
            return Err(e);
        }
        result
    }

    /// The lifecycle of `name`, opened to work on.
    fn lifecycle_mut(&mut self, name: &str) -> Result<Option<&mut ObjectLifecycle>, RuntimeError> {
        match self.objects.id(name) {
            Some(id) => self.objects.open(id),
            None => Ok(None),
        }
    }

    /// Reads `name` back from the store after a write whose outcome is
    /// unknown, and takes what is stored as the object's state (as a
    /// restart does, but keeping every deadline), then carries out what
    /// that state owes. If this fails too, the name is read back before its
    /// next use, or by `handle_timeouts` after [`RETRY`].
    fn resync(&mut self, name: &str) -> Result<(), RuntimeError> {
        let result = self.read_back(name);
        if result.is_err() {
            self.mark_unsure(name);
        }
        result
    }

    /// [`resync`](Self::resync) for each of `names`, until the store does
    /// not answer: it would not answer for the rest either (and on etcd
    /// each request waits out a timeout), so they are left to the next
    /// retry unasked.
    fn resync_each(&mut self, names: &[Arc<str>]) {
        let mut names = names.iter();
        for name in names.by_ref() {
            if self.resync(name).is_err_and(|e| store_down(&e)) {
                break;
            }
        }
        for name in names {
            self.mark_unsure(name);
        }
    }

    /// Leaves `name` to be read back before its next use, or by
    /// `handle_timeouts` after [`RETRY`].
    fn mark_unsure(&mut self, name: &str) {
        self.unsure.insert(name.to_owned());
        self.unschedule(name);
        let retry = self.clock.now().mono.saturating_add(RETRY);
        self.retry_at = Some(self.retry_at.map_or(retry, |t| t.min(retry)));
    }

    fn read_back(&mut self, name: &str) -> Result<(), RuntimeError> {
        let now = self.clock.now();
        let stored = self.store.get(name)?;
        self.unsure.remove(name);
        let Some((object, revision)) = stored else {
            // Not stored: the create was not applied, or the removal was.
            if let Some(entry) = self.objects.named_mut(name) {
                entry.revision = None;
            }
            self.reschedule(name);
            return Ok(());
        };
        let (lifecycle, _) =
            self.restore(&object, revision, now, Recovery::HonourOriginalDeadline)?;
        self.unschedule(name);
        self.objects
            .insert(name, lifecycle, Spec::of(object), Some(revision));
        self.emit(now, name, Change::Recovered { reset: false });
        self.commit(name, now, None)
    }

    /// Write-ahead for one object: persist, act, persist again.
    fn commit(&mut self, name: &str, now: Now, from: Option<Phase>) -> Result<(), RuntimeError> {
        let Some(id) = self.objects.id(name) else {
            return Ok(());
        };
        let written = self.persist(id)?;
        let to = self.phase(id);
        if self.act(id, now, written)?.0 {
            self.persist(id)?;
        }
        // Reported after the actions it follows from (the removal, say).
        if let (Some(from), Some(to)) = (from, to)
            && from != to
        {
            self.emit(now, name, Change::Phase { from, to });
        }
        self.reschedule_id(id);
        Ok(())
    }

    /// Write-ahead for many objects (`(id, phase before the input)`): one
    /// batch before any action, the actions, one batch after.
    fn commit_round(
        &mut self,
        now: Now,
        round: Vec<(Id, Option<Phase>)>,
    ) -> Result<(), RuntimeError> {
        let written = self.write_ahead(&round).map_err(|f| f.error)?;
        self.act_round(now, round, written)
    }

    /// Writes the lifecycles of `round` with one batch and returns the kill
    /// state written for each (`None`: not written, its record is removed).
    /// Nothing is written if it fails; `index` then says whether one object
    /// was the cause.
    fn write_ahead(
        &mut self,
        round: &[(Id, Option<Phase>)],
    ) -> Result<Vec<Option<KillState>>, RoundFailure> {
        let mut writes = self.take_writes(round.len());
        let mut states = Vec::with_capacity(round.len());
        for &(id, _) in round {
            match self.push_write(&mut writes, id, None) {
                Ok(state) => states.push(state),
                Err(error) => {
                    self.give_back(writes);
                    return Err(RoundFailure { index: None, error });
                }
            }
        }
        let written = round
            .iter()
            .zip(&states)
            .map(|(&(id, _), s)| (id, s.is_some()));
        self.send(&mut writes, written)?;
        Ok(states)
    }

    /// Adds the write of the object's lifecycle to `writes` (see
    /// [`record_write`](Self::record_write), which `reuse` is passed to)
    /// and returns the kill state it writes; `None` adds nothing: the
    /// record is removed.
    fn push_write(
        &mut self,
        writes: &mut Vec<Write>,
        id: Id,
        reuse: Option<StoredObject>,
    ) -> Result<Option<KillState>, RuntimeError> {
        let state = self.record_write(id, reuse, |name, object, expected| {
            let state = object.agent.clone();
            writes.push(Write::Update {
                name,
                object,
                expected,
            });
            state
        })?;
        Ok(state.flatten())
    }

    /// Sends `writes` as one batch (they are the writes of the objects
    /// `written` marks, in order) and notes each object's new revision.
    fn send(
        &mut self,
        writes: &mut Vec<Write>,
        written: impl Iterator<Item = (Id, bool)>,
    ) -> Result<(), RoundFailure> {
        let sent = self.batch(writes);
        self.give_back(std::mem::take(writes));
        let revisions = sent.map_err(|e| RoundFailure {
            index: e.index,
            error: e.error.into(),
        })?;
        let mut revisions = revisions.into_iter();
        for (id, _) in written.filter(|&(_, w)| w) {
            let Some(revision) = revisions.next() else {
                break;
            };
            self.stored(id, revision);
        }
        Ok(())
    }

    /// Carries out what each object of a round owes (after
    /// [`write_ahead`](Self::write_ahead)), writes the lifecycles that
    /// acted with one batch, then reports phase changes and reschedules.
    fn act_round(
        &mut self,
        now: Now,
        round: Vec<(Id, Option<Phase>)>,
        written: Vec<Option<KillState>>,
    ) -> Result<(), RuntimeError> {
        // `(id, whether it has a write in the batch)`.
        let mut acted = Vec::with_capacity(round.len());
        // The batch after the actions, gathered as each object acts (the
        // object shown to the actuator is updated into its write), so that
        // no round's worth of shown objects is kept meanwhile.
        let mut writes = self.take_writes(round.len());
        let mut unwritable = None;
        let mut refused = None;
        let mut refused_ids = Vec::new();
        for (&(id, _), written) in round.iter().zip(written) {
            match self.act(id, now, written) {
                Ok((true, shown)) => {
                    let state = match unwritable {
                        // Nothing is sent: the rest only act.
                        Some(_) => None,
                        None => match self.push_write(&mut writes, id, shown) {
                            Ok(state) => state,
                            Err(e) => {
                                unwritable = Some(e);
                                None
                            }
                        },
                    };
                    acted.push((id, state.is_some()));
                }
                Ok((false, _)) => {}
                // Its stored state still owes what failed: not written,
                // and read back below, so that what the lifecycle in memory
                // took as done is owed again.
                Err(e) => {
                    refused.get_or_insert(e);
                    refused_ids.push(id);
                }
            }
        }
        // Deferred removals go last, after the writes `send` counts
        // revisions for; from here on removals are the store's at once.
        self.take_removals(&mut writes);
        let after = match unwritable {
            Some(e) => {
                self.give_back(writes);
                Err(e)
            }
            None => self
                .send(&mut writes, acted.iter().copied())
                .map_err(|f| f.error),
        }
        .and(refused.map_or(Ok(()), Err));
        // Named before rescheduling, which forgets finished objects.
        let unsure: Vec<Arc<str>> = match after {
            Ok(()) => Vec::new(),
            Err(_) => acted
                .iter()
                .map(|&(id, _)| id)
                .chain(refused_ids)
                .filter_map(|id| self.name(id))
                .collect(),
        };
        for (id, from) in round {
            let to = self.phase(id);
            if let (Some(from), Some(to)) = (from, to)
                && from != to
                && let Some(name) = self.name(id)
            {
                self.emit(now, &name, Change::Phase { from, to });
            }
            self.reschedule_id(id);
        }
        // The batch may have been applied with its answer lost: take the
        // store's state, as `input` does after a failed write.
        self.resync_each(&unsure);
        after
    }

    /// Carries out every action the object owes; `written` is the kill
    /// state just persisted, for the object shown to the actuator. Returns
    /// whether anything was done, and the object shown (if one was). A
    /// removal the store refuses is an error, returned before anything
    /// records it as done.
    fn act(
        &mut self,
        id: Id,
        now: Now,
        written: Option<KillState>,
    ) -> Result<(bool, Option<StoredObject>), RuntimeError> {
        let mut acted = false;
        // The object as written, for the actuator; built once, when first
        // needed (taking actions changes nothing it shows).
        let mut shown: Option<StoredObject> = None;
        while let Some(open) = self.objects.opened(id)? {
            let Some(action) = open.lifecycle.poll_action() else {
                break;
            };
            acted = true;
            let name = Arc::clone(open.name);
            let outcome = match action {
                Action::Remove { .. } => {
                    let preconditions = StorePreconditions {
                        uid: Some(open.lifecycle.record().uid.as_str().to_owned()),
                        revision: None,
                    };
                    let removed = match self.defer_removal(&name, preconditions) {
                        Some(preconditions) => self.store.delete(&name, preconditions),
                        None => Ok(Revision::ZERO),
                    };
                    match removed {
                        // Done before a crash, or by someone else (the name
                        // may even hold another object now): the same end.
                        Ok(_)
                        | Err(StoreError::NotFound { .. } | StoreError::UidMismatch { .. }) => {
                            if let Some(entry) = self.objects.get_mut(id) {
                                entry.revision = None;
                            }
                            Ok(())
                        }
                        Err(e) => {
                            // Not recorded as done: the stored state still
                            // owes the removal (and what came before it).
                            self.emit(now, &name, Change::ActionFailed(action, e.to_string()));
                            return Err(e.into());
                        }
                    }
                }
                _ => {
                    let stored = match &mut shown {
                        Some(object) => object,
                        None => shown.insert(open.spec.object(open.lifecycle, written.clone())),
                    };
                    self.actuator.perform(&name, stored, &action)
                }
            };
            // R62 counts from when the stop signal really went out, which
            // may be well after `now` (the write-ahead, a round's other
            // actions): the core hears when, and SIGKILL keeps its 2 s.
            if let (Ok(()), Action::SendStopSignal { container }) = (&outcome, action) {
                // The clock counts whole milliseconds, rounded down: one
                // more is never before the signal.
                let read = self.clock.now();
                let sent = Now::new(
                    read.wall,
                    read.mono.saturating_add(Duration::from_millis(1)),
                );
                if let Some(open) = self.objects.opened(id)? {
                    let _ = open
                        .lifecycle
                        .handle_stop_signal_sent(sent, usize::from(container));
                }
            }
            match outcome {
                Ok(()) => self.emit(now, &name, Change::Action(action)),
                Err(e) => self.emit(now, &name, Change::ActionFailed(action, e.reason())),
            }
        }
        Ok((acted, shown))
    }

    /// Writes the object's lifecycle (if its record is still stored);
    /// returns the kill state written.
    fn persist(&mut self, id: Id) -> Result<Option<KillState>, RuntimeError> {
        let write = self.record_write(id, None, |name, object, expected| (name, object, expected));
        let Some((name, object, expected)) = write? else {
            return Ok(None);
        };
        let written = object.agent.clone();
        let revision = self.store.update(&name, object, expected)?;
        self.stored(id, revision);
        Ok(written)
    }

    /// Hands `sink` the name, object and expected revision of the write of
    /// the object's lifecycle and returns what it returns; `None` once its
    /// record is removed. `reuse` is the object as last written, to update
    /// rather than build anew. (A sink, not a return value: the object is
    /// more than a kilobyte, and a batch's writes are pushed where they are
    /// built rather than returned through each caller.)
    fn record_write<R>(
        &mut self,
        id: Id,
        reuse: Option<StoredObject>,
        sink: impl FnOnce(String, StoredObject, Revision) -> R,
    ) -> Result<Option<R>, RuntimeError> {
        let (codec, epoch) = (&mut self.codec, &self.epoch);
        let write = self.objects.read(id, |entry, lifecycle| {
            let Some(expected) = entry.revision else {
                return Ok(None);
            };
            let agent = codec
                .state(epoch, lifecycle)
                .map_err(|e| cannot_encode(&entry.name, e))?;
            let object = match reuse {
                Some(mut object) => {
                    object.record.clone_from(lifecycle.record());
                    object.agent = Some(agent);
                    object
                }
                None => entry.spec.object(lifecycle, Some(agent)),
            };
            Ok(Some(sink(entry.name.to_string(), object, expected)))
        })?;
        write.unwrap_or(Ok(None))
    }

    /// Notes that the object's lifecycle was written at `revision`.
    fn stored(&mut self, id: Id, revision: Revision) {
        if let Ok(Some(open)) = self.objects.opened(id) {
            open.lifecycle.stored_at(revision.get());
            *open.revision = Some(revision);
        }
    }

    /// How many objects one round holds: [`ROUND`], or fewer if one store
    /// batch cannot take that many writes.
    fn round_size(&self) -> usize {
        ROUND.min(self.store.max_batch()).max(1)
    }

    /// One store batch of `writes`, which it leaves empty; an empty one is
    /// not sent.
    fn batch(&self, writes: &mut Vec<Write>) -> Result<Vec<Revision>, BatchError> {
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        let sent = self.store.batch_from(writes);
        writes.clear();
        sent
    }

    /// The vector to gather a batch of up to `n` writes in: the one kept
    /// from the last batch ([`give_back`](Self::give_back)), empty.
    fn take_writes(&mut self, n: usize) -> Vec<Write> {
        let mut writes = std::mem::take(&mut self.writes);
        writes.clear();
        writes.reserve(n);
        writes
    }

    /// Keeps `writes`' capacity for the next batch.
    fn give_back(&mut self, mut writes: Vec<Write>) {
        writes.clear();
        if writes.capacity() > self.writes.capacity() {
            self.writes = writes;
        }
    }

    /// The object's name.
    fn name(&self, id: Id) -> Option<Arc<str>> {
        self.objects.get(id).map(|e| Arc::clone(&e.name))
    }

    /// The object's phase.
    fn phase(&self, id: Id) -> Option<Phase> {
        self.objects.read(id, |_, l| l.phase()).ok().flatten()
    }

    /// Takes the object's deadline out of the queue.
    fn unschedule(&mut self, name: &str) {
        if let Some(id) = self.objects.id(name) {
            self.unschedule_id(id);
        }
    }

    fn unschedule_id(&mut self, id: Id) {
        if let Some(old) = self.objects.get_mut(id).and_then(|e| e.deadline.take()) {
            self.deadlines.remove(&(old, id));
        }
    }

    /// Brings the deadline queue up to date; forgets a finished object.
    fn reschedule(&mut self, name: &str) {
        if let Some(id) = self.objects.id(name) {
            self.reschedule_id(id);
        }
    }

    fn reschedule_id(&mut self, id: Id) {
        self.unschedule_id(id);
        let Ok(Some((next, finished))) = self.objects.read(id, |entry, lifecycle| {
            let next = lifecycle.poll_timeout();
            let finished = entry.revision.is_none()
                && next.is_none()
                && lifecycle
                    .containers()
                    .iter()
                    .all(|c| c.stage() == grace_core::Stage::Stopped);
            (next, finished)
        }) else {
            return;
        };
        if finished {
            self.objects.remove(id);
            return;
        }
        if let Some(entry) = self.objects.get_mut(id) {
            entry.deadline = next;
        }
        if let Some(t) = next {
            self.deadlines.insert((t, id));
        }
    }

    /// Takes what another process wrote for `name` in a shared store: a
    /// request decided by another API server, a removal, a new object.
    /// Reads the object; if it is newer than the runtime's own last write,
    /// the object's lifecycle takes it
    /// ([`Lifecycle::handle_record_observed`](grace_core::Lifecycle::handle_record_observed))
    /// or a new object is tracked, and what that owes is carried out,
    /// written ahead as always. Callers follow the store's watch and call
    /// this for every name a change event names.
    pub fn observe(&mut self, name: &str) -> Result<Observed, RuntimeError> {
        let done = self.observe_open(name);
        self.objects.close();
        done
    }

    fn observe_open(&mut self, name: &str) -> Result<Observed, RuntimeError> {
        if self.unsure.contains(name) {
            self.resync(name)?;
            return Ok(Observed::Changed);
        }
        let now = self.clock.now();
        let stored = self.store.get(name)?;
        let Some(id) = self.objects.id(name) else {
            let Some((object, revision)) = stored else {
                return Ok(Observed::Unchanged);
            };
            let (lifecycle, _) =
                self.restore(&object, revision, now, Recovery::HonourOriginalDeadline)?;
            self.objects
                .insert(name, lifecycle, Spec::of(object), Some(revision));
            self.emit(now, name, Change::Observed);
            self.commit(name, now, None)?;
            return Ok(Observed::New);
        };
        let Some(entry) = self.objects.opened(id)? else {
            return Ok(Observed::Unchanged);
        };
        let from = entry.lifecycle.phase();
        let observed = match &stored {
            None if entry.revision.is_none() => return Ok(Observed::Unchanged),
            Some((_, revision)) if entry.revision.is_some_and(|r| r >= *revision) => {
                return Ok(Observed::Unchanged);
            }
            None => {
                *entry.revision = None;
                let _ = entry.lifecycle.handle_record_observed(now, None);
                Observed::Changed
            }
            Some((object, revision)) => {
                match entry
                    .lifecycle
                    .handle_record_observed(now, Some(&object.record))
                {
                    Ok(_) => {
                        entry.lifecycle.stored_at(revision.get());
                        *entry.revision = Some(*revision);
                        Observed::Changed
                    }
                    Err(OtherObject) => {
                        // The old object is gone from the store; its
                        // workload is stopped before the new one is taken.
                        *entry.revision = None;
                        let _ = entry.lifecycle.handle_record_observed(now, None);
                        Observed::Replaced
                    }
                }
            }
        };
        self.emit(now, name, Change::Observed);
        self.commit(name, now, Some(from))?;
        Ok(observed)
    }

    /// Rebuilds an object's lifecycle from the store (D6).
    fn restore(
        &self,
        object: &StoredObject,
        revision: Revision,
        now: Now,
        recovery: Recovery,
    ) -> Result<(ObjectLifecycle, bool), RuntimeError> {
        let saved = object
            .agent
            .as_ref()
            .and_then(|state| KillRecord::decode(state).ok());
        let Some(saved) = saved else {
            let mut lifecycle = fresh(object, &[])?;
            lifecycle.stored_at(revision.get());
            return Ok((lifecycle, false));
        };
        let mut lifecycle = saved.lifecycle;
        lifecycle.stored_at(revision.get());
        let mut meta = object.record.clone();
        meta.resource_version = revision.get();
        // Another process may have written the record since (a shared
        // store): the stored record is the truth, taken once the
        // containers are as they are.
        let written_elsewhere = lifecycle.record() != &meta;
        if written_elsewhere && lifecycle.record().uid != meta.uid {
            let mut lifecycle = fresh(object, &[])?;
            lifecycle.stored_at(revision.get());
            return Ok((lifecycle, false));
        }
        if saved.epoch != self.epoch {
            // Another boot: the workload did not survive it, and the old
            // deadlines have no meaning on this clock.
            for i in 0..lifecycle.containers().len() {
                let _ = lifecycle.handle_container_exited(now, i);
            }
            if written_elsewhere {
                let _ = lifecycle.handle_record_observed(now, Some(&meta));
            }
            return Ok((lifecycle, true));
        }
        if written_elsewhere {
            let _ = lifecycle.handle_record_observed(now, Some(&meta));
        }
        if recovery == Recovery::ResetFullGrace
            && lifecycle.agent().killing
            && lifecycle.is_stored()
        {
            let stopped: Vec<bool> = lifecycle
                .containers()
                .iter()
                .map(|c| c.stage() == grace_core::Stage::Stopped)
                .collect();
            let agent = lifecycle.agent();
            let mut again = fresh(object, &stopped)?;
            again.stored_at(revision.get());
            let _ = again.handle_agent_sync(now);
            if agent.evicted {
                // An eviction's kill starts again too, with the budget it
                // had (the record alone does not say it was ordered).
                let _ = again.handle_evict(now, agent.remembered_grace);
            }
            return Ok((again, true));
        }
        Ok((lifecycle, false))
    }

    fn agent_record(&mut self, lifecycle: &ObjectLifecycle) -> Result<KillState, RuntimeError> {
        self.codec
            .state(&self.epoch, lifecycle)
            .map_err(|e| cannot_encode(lifecycle.record().uid.as_str(), e))
    }

    fn emit(&mut self, at: Now, object: &str, change: Change) {
        if self.subscribers.is_empty() {
            return;
        }
        let transition = Transition {
            at,
            object: object.to_owned(),
            change,
        };
        self.subscribers
            .retain(|tx| tx.send(transition.clone()).is_ok());
    }
}

/// Which of a stored object's containers its agent has reported stopped
/// (from its kill state; none if it has none or it cannot be read): what
/// the pod's status tells an API server.
pub(crate) fn stopped_containers(object: &StoredObject) -> Vec<bool> {
    object
        .agent
        .as_ref()
        .and_then(|state| KillRecord::decode(state).ok())
        .map(|saved| {
            saved
                .lifecycle
                .containers()
                .iter()
                .map(|c| c.stage() == grace_core::Stage::Stopped)
                .collect()
        })
        .unwrap_or_default()
}

/// A delete request on one lifecycle, and the answer to it.
fn delete_input(
    l: &mut ObjectLifecycle,
    now: Now,
    options: &DeleteOptions,
) -> Result<DeleteAnswer, RuntimeError> {
    let response = l
        .handle_delete(now, options)
        .map_err(RuntimeError::Delete)?;
    let record = if response.dry_run {
        // Nothing changed: the same decision, not applied (R42).
        decide_delete(l.record(), &l.strategy(), options, now.wall)
            .map_err(RuntimeError::Delete)?
            .record
    } else {
        l.record().clone()
    };
    Ok(DeleteAnswer { response, record })
}

/// Whether `e` says the store did not answer (rather than answering no).
fn store_down(e: &RuntimeError) -> bool {
    matches!(
        e,
        RuntimeError::Store(StoreError::Unavailable(_) | StoreError::Io(_))
    )
}

fn cannot_encode(object: &str, e: KillStateError) -> RuntimeError {
    RuntimeError::KillState {
        object: object.to_owned(),
        error: e,
    }
}

/// A lifecycle for a stored object as it stands (its containers running,
/// except those marked in `stopped`).
pub(crate) fn fresh(
    object: &StoredObject,
    stopped: &[bool],
) -> Result<ObjectLifecycle, RuntimeError> {
    let specs: Vec<ContainerSpec> = object
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| ContainerSpec {
            stopped: stopped.get(i).copied().unwrap_or(false),
            ..c.core_spec()
        })
        .collect();
    let mut meta = object.record.clone();
    meta.scheduled = object.node.is_some();
    Lifecycle::new(object.strategy, meta, &specs).map_err(|_| RuntimeError::TooManyContainers {
        uid: object.uid().to_owned(),
        containers: specs.len(),
    })
}
