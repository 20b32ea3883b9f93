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
//! Recovery (D6): with [`Recovery::HonourOriginalDeadline`] (the default) a
//! restarted runtime keeps every persisted deadline, so a restart never
//! extends one, a SIGKILL is never early, and a stop signal is never
//! skipped (the core keeps SIGTERM ≥ 2 s before SIGKILL). With
//! [`Recovery::ResetFullGrace`] the kill starts again with the full grace,
//! as the kubelet does after a restart ("at least grace").

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::mpsc;

use grace_core::{
    Action, ContainerSpec, DeleteError, DeleteOptions, DeleteResponse, FinalizerChange, Handled,
    Instant, Lifecycle, Now, Phase, Record, UpdateError, UpdateOutcome, decide_delete,
};
use serde::{Deserialize, Serialize};

use crate::clock::Clock;
use crate::store::{FINALIZERS, Preconditions, Revision, Store, StoreError, StoredObject};

/// The most containers an object may have.
pub const CONTAINERS: usize = 8;

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

/// What a restarted runtime does with a kill that was in progress (D6).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Recovery {
    /// Keep every persisted deadline: a restart never extends one.
    #[default]
    HonourOriginalDeadline,
    /// Start the kill again with the full grace, as the kubelet does.
    ResetFullGrace,
}

/// Carries out what the machine decides. The runtime calls it only after
/// the decision is durable.
///
/// Contract:
/// - Every method MUST be idempotent: after a crash the runtime repeats
///   the actions that were owed when it stopped, which may have been done.
/// - It MUST NOT block for long: a pre-stop hook is *started* here; its end
///   is reported with [`Runtime::pre_stop_finished`], a process's exit with
///   [`Runtime::container_exited`].
/// - An error is reported as a transition and the action is not retried by
///   the runtime (the next input or restart may owe it again).
pub trait Actuator: Send {
    /// Performs `action` for `object` (`stored` holds its containers'
    /// commands). `Action::Remove` is the runtime's own (a store delete)
    /// and is never passed here.
    fn perform(
        &mut self,
        object: &str,
        stored: &StoredObject,
        action: &Action,
    ) -> Result<(), String>;
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
    /// The object was loaded from the store at start.
    Recovered {
        /// Whether its kill was restarted in full (`ResetFullGrace`) or the
        /// workload was found gone (another boot).
        reset: bool,
    },
}

/// Why an input was refused. Nothing was changed.
#[derive(Debug)]
pub enum RuntimeError {
    /// The store failed.
    Store(StoreError),
    /// No such object.
    NotFound(String),
    /// An object of that name exists.
    AlreadyExists(String),
    /// The delete was refused (invalid options, a failed precondition).
    Delete(DeleteError),
    /// The update was refused.
    Update(UpdateError),
    /// The object cannot be tracked (too many containers, bad state).
    Object(String),
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::Store(e) => write!(f, "store: {e}"),
            RuntimeError::NotFound(name) => write!(f, "{name}: not found"),
            RuntimeError::AlreadyExists(name) => write!(f, "{name}: already exists"),
            RuntimeError::Delete(e) => write!(f, "delete refused: {e}"),
            RuntimeError::Update(e) => write!(f, "update refused: {e}"),
            RuntimeError::Object(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for RuntimeError {}

impl From<StoreError> for RuntimeError {
    fn from(e: StoreError) -> Self {
        RuntimeError::Store(e)
    }
}

/// The runtime's part of a stored object (`StoredObject::agent`).
#[derive(Serialize, Deserialize)]
struct AgentRecord {
    /// The clock epoch the lifecycle's instants belong to.
    epoch: String,
    lifecycle: ObjectLifecycle,
}

struct Entry {
    lifecycle: ObjectLifecycle,
    object: StoredObject,
    /// The store revision of our last write; `None` once removed.
    revision: Option<Revision>,
    deadline: Option<Instant>,
}

/// Drives every object of a store (see the module docs).
pub struct Runtime<S, C, A> {
    store: S,
    clock: C,
    actuator: A,
    recovery: Recovery,
    epoch: String,
    objects: BTreeMap<String, Entry>,
    deadlines: BTreeSet<(Instant, String)>,
    subscribers: Vec<mpsc::Sender<Transition>>,
}

impl<S: Store, C: Clock, A: Actuator> Runtime<S, C, A> {
    /// Opens the runtime on `store`, recovering every stored object, and
    /// carries out what each one owes.
    pub fn open(store: S, clock: C, actuator: A, recovery: Recovery) -> Result<Self, RuntimeError> {
        let epoch = clock.epoch();
        let mut runtime = Runtime {
            store,
            clock,
            actuator,
            recovery,
            epoch,
            objects: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            subscribers: Vec::new(),
        };
        let listing = runtime.store.list()?;
        let now = runtime.clock.now();
        for (name, object, revision) in listing.objects {
            let (lifecycle, reset) = runtime.restore(&object, revision, now)?;
            runtime.objects.insert(
                name.clone(),
                Entry {
                    lifecycle,
                    object,
                    revision: Some(revision),
                    deadline: None,
                },
            );
            runtime.emit(now, &name, Change::Recovered { reset });
            runtime.commit(&name, now, None)?;
        }
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

    /// The lifecycle of a tracked object.
    pub fn lifecycle(&self, name: &str) -> Option<&ObjectLifecycle> {
        self.objects.get(name).map(|e| &e.lifecycle)
    }

    /// Names of the objects tracked (stored, or removed with a workload
    /// still being stopped).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.objects.keys().map(String::as_str)
    }

    /// Stores and tracks a new object.
    pub fn create(&mut self, name: &str, object: StoredObject) -> Result<(), RuntimeError> {
        if self.objects.contains_key(name) {
            return Err(RuntimeError::AlreadyExists(name.to_owned()));
        }
        let lifecycle = fresh(&object, &[])?;
        let mut object = object;
        object.meta = lifecycle.record().clone();
        object.agent = Some(self.agent_record(&lifecycle)?);
        let revision = match self.store.create(name, object.clone()) {
            Ok(r) => r,
            Err(StoreError::AlreadyExists { .. }) => {
                return Err(RuntimeError::AlreadyExists(name.to_owned()));
            }
            Err(e) => return Err(e.into()),
        };
        let mut lifecycle = lifecycle;
        lifecycle.stored_at(revision.get());
        object.meta.resource_version = revision.get();
        self.objects.insert(
            name.to_owned(),
            Entry {
                lifecycle,
                object,
                revision: Some(revision),
                deadline: None,
            },
        );
        Ok(())
    }

    /// A delete request (R1–R44, D4).
    pub fn delete(
        &mut self,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<DeleteAnswer, RuntimeError> {
        self.input(name, |l, now| {
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
        })
    }

    /// An update of the finalizer list (R45, R46).
    pub fn update_finalizers(
        &mut self,
        name: &str,
        change: &FinalizerChange,
    ) -> Result<UpdateOutcome, RuntimeError> {
        self.input(name, |l, now| {
            l.handle_finalizer_update(now, change)
                .map_err(RuntimeError::Update)
        })
    }

    /// The agent observes the object (and starts or shortens its kill).
    pub fn agent_sync(&mut self, name: &str) -> Result<Handled, RuntimeError> {
        self.input(name, |l, now| Ok(l.handle_agent_sync(now)))
    }

    /// An eviction override (R52, R73, R74).
    pub fn evict(
        &mut self,
        name: &str,
        grace_period_seconds: i64,
    ) -> Result<Handled, RuntimeError> {
        self.input(name, |l, now| Ok(l.handle_evict(now, grace_period_seconds)))
    }

    /// A container's pre-stop hook returned.
    pub fn pre_stop_finished(
        &mut self,
        name: &str,
        container: usize,
    ) -> Result<Handled, RuntimeError> {
        self.input(name, |l, now| {
            l.handle_pre_stop_finished(now, container)
                .map_err(|_| RuntimeError::Object(format!("{name}: no container {container}")))
        })
    }

    /// A container's process exited.
    pub fn container_exited(
        &mut self,
        name: &str,
        container: usize,
    ) -> Result<Handled, RuntimeError> {
        self.input(name, |l, now| {
            l.handle_container_exited(now, container)
                .map_err(|_| RuntimeError::Object(format!("{name}: no container {container}")))
        })
    }

    /// The earliest deadline of all objects.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadlines.first().map(|(t, _)| *t)
    }

    /// Handles every object whose deadline has passed, earliest first.
    pub fn handle_timeouts(&mut self) -> Result<(), RuntimeError> {
        let now = self.clock.now();
        while let Some((due, name)) = self.deadlines.first().cloned() {
            if due > now.mono {
                break;
            }
            self.input(&name, |l, now| {
                l.handle_timeout(now);
                Ok(())
            })?;
            // A lifecycle always moves a handled deadline past now; if one
            // did not, stop rather than spin.
            if self
                .deadlines
                .first()
                .is_some_and(|(t, n)| *t == due && *n == name)
            {
                break;
            }
        }
        Ok(())
    }

    /// Runs one input on one object, then makes it durable and acts on it.
    fn input<R>(
        &mut self,
        name: &str,
        f: impl FnOnce(&mut ObjectLifecycle, Now) -> Result<R, RuntimeError>,
    ) -> Result<R, RuntimeError> {
        let now = self.clock.now();
        let entry = self
            .objects
            .get_mut(name)
            .ok_or_else(|| RuntimeError::NotFound(name.to_owned()))?;
        let before = entry.lifecycle.clone();
        let result = f(&mut entry.lifecycle, now);
        if result.is_err() || entry.lifecycle == before {
            entry.lifecycle = before;
            return result;
        }
        let from = before.phase();
        if let Err(e) = self.commit(name, now, Some(from)) {
            // Not durable: the input did not happen.
            if let Some(entry) = self.objects.get_mut(name) {
                entry.lifecycle = before;
            }
            return Err(e);
        }
        result
    }

    /// Write-ahead: persist, act, persist again.
    fn commit(&mut self, name: &str, now: Now, from: Option<Phase>) -> Result<(), RuntimeError> {
        self.persist(name)?;
        let to = self.objects.get(name).map(|e| e.lifecycle.phase());
        let mut acted = false;
        while let Some(entry) = self.objects.get_mut(name) {
            let Some(action) = entry.lifecycle.poll_action() else {
                break;
            };
            acted = true;
            let outcome = match action {
                Action::Remove { .. } => {
                    let preconditions = Preconditions {
                        uid: Some(entry.object.uid().to_owned()),
                        revision: None,
                    };
                    let result = match self.store.delete(name, preconditions) {
                        // Done before a crash, or by someone else: the same end.
                        Ok(_) | Err(StoreError::NotFound { .. }) => Ok(()),
                        Err(e) => Err(e.to_string()),
                    };
                    if result.is_ok() {
                        entry.revision = None;
                    }
                    result
                }
                _ => self.actuator.perform(name, &entry.object, &action),
            };
            match outcome {
                Ok(()) => self.emit(now, name, Change::Action(action)),
                Err(e) => self.emit(now, name, Change::ActionFailed(action, e)),
            }
        }
        if acted {
            self.persist(name)?;
        }
        // Reported after the actions it follows from (the removal, say).
        if let (Some(from), Some(to)) = (from, to)
            && from != to
        {
            self.emit(now, name, Change::Phase { from, to });
        }
        self.reschedule(name);
        Ok(())
    }

    /// Writes the object's lifecycle (if its record is still stored).
    fn persist(&mut self, name: &str) -> Result<(), RuntimeError> {
        let agent = match self.objects.get(name) {
            Some(entry) if entry.revision.is_some() => self.agent_record(&entry.lifecycle)?,
            _ => return Ok(()),
        };
        let Some(entry) = self.objects.get_mut(name) else {
            return Ok(());
        };
        let Some(expected) = entry.revision else {
            return Ok(());
        };
        let mut object = entry.object.clone();
        object.meta = entry.lifecycle.record().clone();
        object.agent = Some(agent);
        let revision = self.store.update(name, object.clone(), expected)?;
        entry.lifecycle.stored_at(revision.get());
        object.meta.resource_version = revision.get();
        entry.object = object;
        entry.revision = Some(revision);
        Ok(())
    }

    /// Brings the deadline queue up to date; forgets a finished object.
    fn reschedule(&mut self, name: &str) {
        let Some(entry) = self.objects.get_mut(name) else {
            return;
        };
        if let Some(old) = entry.deadline.take() {
            self.deadlines.remove(&(old, name.to_owned()));
        }
        let next = entry.lifecycle.poll_timeout();
        let finished = entry.revision.is_none()
            && next.is_none()
            && entry
                .lifecycle
                .containers()
                .iter()
                .all(|c| c.stage() == grace_core::Stage::Stopped);
        if finished {
            self.objects.remove(name);
            return;
        }
        entry.deadline = next;
        if let Some(t) = next {
            self.deadlines.insert((t, name.to_owned()));
        }
    }

    /// Rebuilds an object's lifecycle from the store (D6).
    fn restore(
        &self,
        object: &StoredObject,
        revision: Revision,
        now: Now,
    ) -> Result<(ObjectLifecycle, bool), RuntimeError> {
        let saved = object
            .agent
            .clone()
            .and_then(|v| serde_json::from_value::<AgentRecord>(v).ok());
        let Some(saved) = saved else {
            let mut lifecycle = fresh(object, &[])?;
            lifecycle.stored_at(revision.get());
            return Ok((lifecycle, false));
        };
        let mut lifecycle = saved.lifecycle;
        lifecycle.stored_at(revision.get());
        if saved.epoch != self.epoch {
            // Another boot: the workload did not survive it, and the old
            // deadlines have no meaning on this clock.
            for i in 0..lifecycle.containers().len() {
                let _ = lifecycle.handle_container_exited(now, i);
            }
            return Ok((lifecycle, true));
        }
        if self.recovery == Recovery::ResetFullGrace
            && lifecycle.agent().killing
            && lifecycle.is_stored()
        {
            let stopped: Vec<bool> = lifecycle
                .containers()
                .iter()
                .map(|c| c.stage() == grace_core::Stage::Stopped)
                .collect();
            let mut again = fresh(object, &stopped)?;
            again.stored_at(revision.get());
            let _ = again.handle_agent_sync(now);
            return Ok((again, true));
        }
        Ok((lifecycle, false))
    }

    fn agent_record(&self, lifecycle: &ObjectLifecycle) -> Result<serde_json::Value, RuntimeError> {
        serde_json::to_value(AgentRecord {
            epoch: self.epoch.clone(),
            lifecycle: lifecycle.clone(),
        })
        .map_err(|e| RuntimeError::Object(format!("cannot encode the kill state: {e}")))
    }

    fn emit(&mut self, at: Now, object: &str, change: Change) {
        let transition = Transition {
            at,
            object: object.to_owned(),
            change,
        };
        self.subscribers
            .retain(|tx| tx.send(transition.clone()).is_ok());
    }
}

/// A lifecycle for a stored object as it stands (its containers running,
/// except those marked in `stopped`).
fn fresh(object: &StoredObject, stopped: &[bool]) -> Result<ObjectLifecycle, RuntimeError> {
    let specs: Vec<ContainerSpec> = object
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| ContainerSpec {
            stopped: stopped.get(i).copied().unwrap_or(false),
            ..c.core_spec()
        })
        .collect();
    let mut meta = object.meta.clone();
    meta.scheduled = object.node.is_some();
    Lifecycle::new(object.strategy, meta, &specs).map_err(|_| {
        RuntimeError::Object(format!(
            "{}: more than {CONTAINERS} containers",
            object.uid()
        ))
    })
}
