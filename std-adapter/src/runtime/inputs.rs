//! The inputs a runtime takes one at a time: each decided on the object's
//! lifecycle, made durable, then acted on ([`Runtime::commit`]).

use std::collections::BTreeMap;

use grace_core::{
    DeleteError, DeleteResponse, FinalizerChange, Handled, Input, Name, Now, Record, Reply,
    Timestamp, UpdateError, UpdateOutcome, decide_delete,
};

use super::objects::Entry;
use super::stored::{Spec, fresh};
use super::{Actuator, ObjectLifecycle, Runtime, RuntimeError};
use crate::clock::Clock;
use crate::store::{
    ContainerRestarts, ContainerStatus, FINALIZERS, KillState, Manifest, OwnerReference, Store,
    StoreError, StoredObject,
};

/// The answer to a delete request (the REST response, R33). Made by the
/// runtime and the API server only; fields may be added.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeleteAnswer {
    /// Graceful, pending or deleted; dry run; force.
    pub response: DeleteResponse,
    /// The object as written (when removed, the last state written before
    /// removal), or for a dry run as the same decision would write it.
    pub record: Record<FINALIZERS>,
}

/// What [`Runtime::collect_all_garbage`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Collected {
    /// The dependents it deleted (their owners gone): a node agent starts
    /// the kills of those bound to its node.
    pub deleted: Vec<String>,
    /// The GC finalizers it removed, with the object they were removed
    /// from.
    pub finalizers_removed: Vec<(String, Name)>,
}

/// The runtime's answer to an [`Input`] ([`Runtime::handle`],
/// [`Batch::handle`](super::Batch::handle)): the core's [`Reply`] once the
/// input is durable, its refusal being the call's [`RuntimeError`]. Which
/// variant comes back depends on the input, as for the core's reply.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[allow(
    clippy::large_enum_variant,
    reason = "one per input, which costs a store write; a delete's record is as large as a `Result<DeleteAnswer, _>` was"
)]
pub enum Answer {
    /// To [`Input::Delete`]: the REST response and the record (R33).
    Delete(DeleteAnswer),
    /// To [`Input::FinalizerUpdate`].
    Update(UpdateOutcome),
    /// To every other input.
    Handled(Handled),
}

impl Answer {
    /// The answer to a delete; `None` for the answer to another input.
    pub fn delete(self) -> Option<DeleteAnswer> {
        match self {
            Answer::Delete(answer) => Some(answer),
            Answer::Update(_) | Answer::Handled(_) => None,
        }
    }

    /// The answer to a finalizer update; `None` for the answer to another
    /// input.
    pub fn update(self) -> Option<UpdateOutcome> {
        match self {
            Answer::Update(outcome) => Some(outcome),
            Answer::Delete(_) | Answer::Handled(_) => None,
        }
    }

    /// Whether the input changed the object ([`Handled::Applied`]; a dry
    /// run did not), as [`Reply::handled`] says it.
    pub fn handled(&self) -> Handled {
        match self {
            Answer::Delete(answer) if answer.response.dry_run => Handled::Ignored,
            Answer::Delete(_) | Answer::Update(_) => Handled::Applied,
            Answer::Handled(handled) => *handled,
        }
    }
}

impl<S: Store, C: Clock, A: Actuator> Runtime<S, C, A> {
    /// Stores and tracks a new object.
    pub fn create(&mut self, name: &str, object: StoredObject) -> Result<(), RuntimeError> {
        let done = self.create_open(name, object);
        self.objects.close();
        done
    }

    fn create_open(&mut self, name: &str, object: StoredObject) -> Result<(), RuntimeError> {
        let (lifecycle, state) = self.new_lifecycle(name, &object)?;
        let spec = Spec::of(object);
        let written = spec.object(&lifecycle, Some(state));
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
        lifecycle.set_resource_version(revision.get());
        self.objects.insert(name, lifecycle, spec, Some(revision));
        Ok(())
    }

    /// The lifecycle of a new object `name` and its kill state, refused as
    /// [`create`](Self::create) refuses it: the name is taken, the object
    /// has too many containers, or its kill state cannot be written.
    pub(super) fn new_lifecycle(
        &mut self,
        name: &str,
        object: &StoredObject,
    ) -> Result<(ObjectLifecycle, KillState), RuntimeError> {
        self.settle(name)?;
        if self.objects.id(name).is_some() {
            return Err(RuntimeError::AlreadyExists(name.to_owned()));
        }
        let lifecycle = fresh(object, &[])?;
        let state = self.agent_record(&lifecycle)?;
        Ok((lifecycle, state))
    }

    /// One input on the object `name`: decided by its lifecycle
    /// ([`Lifecycle::handle`](grace_core::Lifecycle::handle)), made durable,
    /// then acted on ([`Actuator`]), before this returns. The answer is the
    /// core's [`Reply`] ([`Answer`]); a refusal (a delete's or an update's
    /// error, a container the object does not have, no object of that
    /// name, the store) is the [`RuntimeError`], and changes nothing.
    ///
    /// A delete ([`Input::Delete`], R1–R44, D4) is the API server's half,
    /// as in Kubernetes: a pod bound to a node is marked for deletion (and
    /// taken out of endpoints), and its kill does not start (no stop
    /// signal, no SIGKILL deadline) until the node's agent observes it,
    /// which is [`Input::AgentSync`]. A program that is itself the node's
    /// agent feeds that right after (as `grace agent` does); otherwise the
    /// agent holding the same store feeds it when it sees the change. What
    /// needs no kill (an unscheduled pod, R19; an object that is not a pod)
    /// does not wait for one.
    ///
    /// The deadlines of every object are [`handle_timeouts`](Self::handle_timeouts)'s
    /// (the runtime's timer, as [`Table::handle_timeouts`](grace_core::Table::handle_timeouts)
    /// is the table's), and the stop signals the runtime sends are reported
    /// by the runtime itself; [`Input::Timeout`] and [`Input::StopSignalSent`]
    /// are taken here all the same, for one object.
    ///
    /// ```
    /// use grace_core::{Action, DeleteOptions, Input, Record};
    /// use grace_std::clock::ManualClock;
    /// use grace_std::runtime::{ActionError, Actuator, Runtime};
    /// use grace_std::store::{MemoryStore, StoredContainer, StoredObject};
    /// # struct Nothing;
    /// # impl Actuator for Nothing {
    /// #     fn perform(&mut self, _: &str, _: &StoredObject, _: &Action) -> Result<(), ActionError> {
    /// #         Ok(())
    /// #     }
    /// # }
    ///
    /// let clock = ManualClock::at_unix_millis(1_700_000_000_000);
    /// let mut runtime = Runtime::builder(MemoryStore::new(), clock, Nothing).open()?;
    /// let mut web = StoredObject::on_node(Record::builder("uid-web-0").build()?, "node-a");
    /// web.containers.push(StoredContainer::new("app", ["sleep", "1000"]));
    /// runtime.create("web-0", web)?;
    ///
    /// let deleted = runtime.handle("web-0", Input::Delete(DeleteOptions::with_grace(30)))?;
    /// assert!(deleted.delete().is_some_and(|a| a.record.deletion_timestamp.is_some()));
    /// runtime.handle("web-0", Input::AgentSync)?; // the stop signal; SIGKILL due in 30 s
    /// runtime.handle("web-0", Input::container_exited(0))?; // stopped: removed
    /// assert!(runtime.lifecycle("web-0").is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn handle(&mut self, name: &str, input: Input) -> Result<Answer, RuntimeError> {
        self.input(name, apply(name, input))
    }

    /// The garbage collector's step ([`crate::gc`]) after a change to
    /// `name`: with no owner reference stored, it removes the `orphan` and
    /// `foregroundDeletion` finalizers of `name` if it is marked for
    /// deletion (one finalizer update each; R45: the last one may remove
    /// the object); otherwise it is [`collect_all_garbage`]. Returns the
    /// finalizers removed from `name`.
    ///
    /// [`collect_all_garbage`]: Self::collect_all_garbage
    pub fn collect_garbage(&mut self, name: &str) -> Result<Vec<Name>, RuntimeError> {
        if self.garbage_pending() {
            let collected = self.collect_all_garbage()?;
            return Ok(collected
                .finalizers_removed
                .into_iter()
                .filter(|(n, _)| n == name)
                .map(|(_, f)| f)
                .collect());
        }
        let Some(lifecycle) = self.lifecycle(name) else {
            return Ok(Vec::new());
        };
        let due = crate::gc::finalizers_to_remove(lifecycle.record());
        let mut removed = Vec::with_capacity(due.len());
        for finalizer in due {
            let change = FinalizerChange::Remove(finalizer.clone());
            match self.handle(name, Input::FinalizerUpdate(change)) {
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

    /// Whether the garbage collector has more to do than remove the GC
    /// finalizers of the object just deleted: a stored object holds an
    /// owner reference, or an owner is waiting for its dependents (then a
    /// removal calls for [`collect_all_garbage`](Self::collect_all_garbage)).
    /// Never on a store that shows some objects only
    /// ([`Store::shows_every_object`]): there an owner out of view would
    /// look gone.
    pub fn garbage_pending(&self) -> bool {
        self.store.shows_every_object() && (self.gc_waiting || self.has_owner_references())
    }

    /// Whether a stored object may hold an owner reference (kept as a
    /// flag: a delete asks, and a scan of every object each time would
    /// cost a mass delete dearly).
    fn has_owner_references(&self) -> bool {
        self.objects.owners_seen()
    }

    /// The garbage collector's steps over every stored object
    /// ([`crate::gc::plan`]), taken in order: dependents whose owners are
    /// gone deleted, references to orphaning owners dropped, and the
    /// `orphan` and `foregroundDeletion` finalizers removed once their
    /// owner's dependents allow it. A step that fails ends the collection
    /// with its error (what was done stays done; the rest is planned again
    /// the next time). The caller starts the kills of the dependents
    /// deleted ([`Collected::deleted`]).
    pub fn collect_all_garbage(&mut self) -> Result<Collected, RuntimeError> {
        let mut collected = Collected::default();
        // A step may make another possible (a dependent removed at once
        // frees its foreground owner): planned again until nothing is new.
        for _ in 0..8 {
            let steps = crate::gc::plan(&self.gc_view());
            let mut progressed = false;
            for step in steps {
                progressed |= self.gc_step(step, &mut collected)?;
            }
            if !progressed {
                break;
            }
        }
        let view = self.gc_view();
        self.gc_waiting = view
            .iter()
            .any(|o| o.deleting && (o.orphan || o.foreground));
        self.objects.recount_owners();
        Ok(collected)
    }

    /// What the garbage collector reads of every stored object.
    fn gc_view(&self) -> Vec<crate::gc::GcObject> {
        self.objects
            .names()
            .filter_map(|n| {
                let id = self.objects.id(n)?;
                self.objects
                    .read(id, |entry, l| {
                        (entry.revision.is_some() && l.is_stored())
                            .then(|| crate::gc::GcObject::of(n, l.record(), &entry.spec.owners))
                    })
                    .ok()
                    .flatten()
                    .flatten()
            })
            .collect()
    }

    /// Takes one step of the garbage collector; whether it changed
    /// anything. An object gone or replaced meanwhile is left alone.
    fn gc_step(
        &mut self,
        step: crate::gc::GcStep,
        collected: &mut Collected,
    ) -> Result<bool, RuntimeError> {
        use crate::gc::GcStep;
        let gone = |e: &RuntimeError| {
            matches!(
                e,
                RuntimeError::NotFound(_)
                    | RuntimeError::Update(UpdateError::NotFound)
                    | RuntimeError::Delete(DeleteError::NotFound | DeleteError::Conflict(_))
            )
        };
        let result = match step {
            GcStep::DropOwners { name, uid, owners } => {
                let Some(object) = self.object(&name).filter(|o| o.uid() == uid) else {
                    return Ok(false);
                };
                let kept: Vec<OwnerReference> = object
                    .owners
                    .iter()
                    .filter(|r| !owners.contains(&r.uid))
                    .cloned()
                    .collect();
                if kept.len() == object.owners.len() {
                    return Ok(false);
                }
                self.update_owners(&name, kept)
            }
            GcStep::Delete {
                name,
                uid,
                foreground,
            } => {
                let options = crate::gc::dependent_delete_options(&uid, foreground);
                let deleted = self.handle(&name, Input::Delete(options));
                if deleted.is_ok() {
                    collected.deleted.push(name);
                }
                deleted.map(|_| ())
            }
            GcStep::RemoveFinalizer { name, finalizer } => {
                let Ok(finalizer) = Name::try_from(finalizer) else {
                    return Ok(false);
                };
                let change = FinalizerChange::Remove(finalizer.clone());
                let removed = self.handle(&name, Input::FinalizerUpdate(change));
                if removed.is_ok() {
                    collected.finalizers_removed.push((name, finalizer));
                }
                removed.map(|_| ())
            }
        };
        match result {
            Ok(()) => Ok(true),
            Err(e) if gone(&e) => Ok(false),
            Err(e) => Err(e),
        }
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
        self.replace_in_spec(name, labels, |spec| &mut spec.labels)
    }

    /// Replaces the object's `metadata.ownerReferences` (allowed at any
    /// time, as Kubernetes allows: the garbage collector removes those of
    /// an orphaned owner). Writes nothing if they are unchanged.
    pub fn update_owners(
        &mut self,
        name: &str,
        owners: Vec<OwnerReference>,
    ) -> Result<(), RuntimeError> {
        if !owners.is_empty() {
            self.objects.saw_owners();
        }
        let done = self.replace_in_spec(name, owners, |spec| &mut spec.owners);
        self.objects.close();
        done
    }

    /// Replaces the whole object as it was applied
    /// ([`StoredObject::manifest`]): what an update that Kubernetes allows
    /// changes beside labels and finalizers (an image, an annotation).
    /// Nothing is started or stopped for it. Writes nothing if it is
    /// unchanged.
    pub fn update_manifest(
        &mut self,
        name: &str,
        manifest: Option<Manifest>,
    ) -> Result<(), RuntimeError> {
        let done = self.replace_in_spec(name, manifest, |spec| &mut spec.manifest);
        self.objects.close();
        done
    }

    /// Replaces what the agent keeps of the object's containers' restarts
    /// (restart counts, last states, back-offs: [`ContainerRestarts`],
    /// R92–R97), written at once, before the agent acts on them. Writes
    /// nothing if they are unchanged.
    pub fn update_restarts(
        &mut self,
        name: &str,
        restarts: Vec<ContainerRestarts>,
    ) -> Result<(), RuntimeError> {
        let done = self.replace_in_spec(name, restarts, |spec| &mut spec.restarts);
        self.objects.close();
        done
    }

    /// Makes `value` the field of the object's spec that `field` picks,
    /// and writes the object; on a failed write, the store's state is
    /// taken again (or else the old value kept).
    fn replace_in_spec<T: PartialEq>(
        &mut self,
        name: &str,
        value: T,
        field: fn(&mut Spec) -> &mut T,
    ) -> Result<(), RuntimeError> {
        self.settle(name)?;
        let now = self.clock.now();
        let entry = self
            .objects
            .named_mut(name)
            .filter(|e| e.revision.is_some())
            .ok_or_else(|| RuntimeError::NotFound(name.to_owned()))?;
        if *field(&mut entry.spec) == value {
            return Ok(());
        }
        let before = std::mem::replace(field(&mut entry.spec), value);
        if let Err(e) = self.commit(name, now, None) {
            // As for any input: take the store's state, or else show the
            // last state known to be stored.
            if self.resync(name).is_err()
                && let Some(entry) = self.objects.named_mut(name)
            {
                *field(&mut entry.spec) = before;
            }
            return Err(e);
        }
        Ok(())
    }

    /// Records what the agent sees of a container (running, exited with a
    /// code, could not start): written to the store at once, as the
    /// kubelet updates a pod's status. Times `status` leaves `None` are
    /// filled in from the clock and the status before
    /// ([`ContainerStatus`]); the first status also sets the pod's
    /// [`started`](StoredObject::started). Nothing happens if the object is
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
        let now = self.clock.now().wall.floor_to_timestamp();
        let Some(entry) = self.objects.get_mut(id) else {
            return Ok(());
        };
        let status = status.stamped(entry.spec.status.get(container), now);
        if !status_changes(entry, name, container, &status)? {
            return Ok(());
        }
        set_status(entry, container, status, now);
        let done = self.persist(id);
        self.objects.close();
        done.map(|_| ())
    }

    /// Runs one input on one object, then makes it durable and acts on it.
    pub(super) fn input<R>(
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
        self.settle(name)?;
        let now = self.clock.now();
        let lifecycle = self
            .lifecycle_mut(name)?
            .ok_or_else(|| RuntimeError::NotFound(name.to_owned()))?;
        let (answer, before) = decide(lifecycle, now, f)?;
        let Some(before) = before else {
            return Ok(answer);
        };
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
        Ok(answer)
    }

    /// The lifecycle of `name`, opened to work on.
    fn lifecycle_mut(&mut self, name: &str) -> Result<Option<&mut ObjectLifecycle>, RuntimeError> {
        match self.objects.id(name) {
            Some(id) => self.objects.open(id),
            None => Ok(None),
        }
    }
}

/// Runs the input `f` on `lifecycle` at `now`. A refused input, or one
/// that changes nothing, leaves the lifecycle as it was; one that changes
/// it also returns the lifecycle from before, to go back to.
pub(super) fn decide<R>(
    lifecycle: &mut ObjectLifecycle,
    now: Now,
    f: impl FnOnce(&mut ObjectLifecycle, Now) -> Result<R, RuntimeError>,
) -> Result<(R, Option<ObjectLifecycle>), RuntimeError> {
    let before = lifecycle.clone();
    match f(lifecycle, now) {
        Err(e) => {
            *lifecycle = before;
            Err(e)
        }
        Ok(answer) if *lifecycle == before => Ok((answer, None)),
        Ok(answer) => Ok((answer, Some(before))),
    }
}

/// `input` on one lifecycle, and the answer to it (`object` names it in an
/// error): for [`Runtime::handle`] and a batch's.
pub(super) fn apply(
    object: &str,
    input: Input,
) -> impl FnOnce(&mut ObjectLifecycle, Now) -> Result<Answer, RuntimeError> + '_ {
    move |l, now| {
        // What the reply does not say again: a dry run's options (its
        // record is the decision not applied, R42), the container named.
        let dry_run = match &input {
            Input::Delete(options) if options.dry_run => Some(options.clone()),
            _ => None,
        };
        let container = match &input {
            Input::PreStopFinished(c)
            | Input::ContainerExited(c)
            | Input::ContainerStarted(c)
            | Input::StopSignalSent(c) => c.get(),
            _ => usize::MAX,
        };
        match l.handle(now, input) {
            Reply::Delete(response) => {
                let response = response.map_err(RuntimeError::Delete)?;
                let record = match dry_run {
                    Some(options) => {
                        decide_delete(l.record(), &l.strategy(), &options, now.wall)
                            .map_err(RuntimeError::Delete)?
                            .record
                    }
                    None => l.record().clone(),
                };
                Ok(Answer::Delete(DeleteAnswer { response, record }))
            }
            Reply::Update(outcome) => outcome.map(Answer::Update).map_err(RuntimeError::Update),
            Reply::Handled(Err(_)) => Err(unknown_container(object, container)),
            other => Ok(Answer::Handled(other.handled())),
        }
    }
}

/// Whether setting container `container`'s status of `entry` (stored as
/// `name`) to `status` changes anything: not for an object whose record
/// is removed, nor for a status it has already; a container it does not
/// have is an error. The check of [`Runtime::set_container_status`] and of
/// the batch's.
pub(super) fn status_changes(
    entry: &Entry,
    name: &str,
    container: usize,
    status: &ContainerStatus,
) -> Result<bool, RuntimeError> {
    if entry.revision.is_none() || entry.spec.status.get(container) == Some(status) {
        return Ok(false);
    }
    if container >= entry.spec.containers.len() {
        return Err(unknown_container(name, container));
    }
    Ok(true)
}

/// An object's container statuses and start time, as they were before a
/// batch set a status.
pub(super) type StatusBefore = (Vec<ContainerStatus>, Option<Timestamp>);

/// Sets container `container`'s status of `entry` (checked by
/// [`status_changes`]) at `now`; a container with no status yet is
/// `Waiting` (`ContainerCreating`). The first status reported starts the
/// pod (`status.startTime`). Returns the statuses from before.
pub(super) fn set_status(
    entry: &mut Entry,
    container: usize,
    status: ContainerStatus,
    now: Timestamp,
) -> StatusBefore {
    let count = entry.spec.containers.len();
    let before = (entry.spec.status.clone(), entry.spec.started);
    entry.spec.started.get_or_insert(now);
    let waiting = ContainerStatus::Waiting {
        reason: "ContainerCreating".to_owned(),
        message: None,
    };
    entry.spec.status.resize(count, waiting);
    if let Some(slot) = entry.spec.status.get_mut(container) {
        *slot = status;
    }
    before
}

fn unknown_container(object: &str, container: usize) -> RuntimeError {
    RuntimeError::UnknownContainer {
        object: object.to_owned(),
        container,
    }
}
