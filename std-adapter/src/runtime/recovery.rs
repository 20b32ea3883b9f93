//! Opening a runtime: the [`RuntimeBuilder`], and the recovery of every
//! stored object (D6), at the start or when an object is read back.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::mpsc;

use grace_core::Input;
use grace_core::{Now, Stage};

use super::objects::Objects;
use super::persisted::Codec;
use super::stored::{Spec, fresh};
use super::writes::Writes;
use super::{Actuator, Change, KillRecord, ObjectLifecycle, Runtime, RuntimeError, Transition};
use crate::clock::Clock;
use crate::store::{Revision, Store, StoredObject};

/// What a restarted runtime does with a kill that was in progress (D6).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Recovery {
    /// Keep every persisted deadline: a restart never extends one.
    #[default]
    HonourOriginalDeadline,
    /// Start the kill again with the full grace, as the kubelet does.
    ResetFullGrace,
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
            writes: Writes::default(),
            removals: None,
            // What an earlier run left is looked at by the first collection.
            gc_waiting: true,
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

    /// Rebuilds an object's lifecycle from the store (D6).
    pub(super) fn restore(
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
            lifecycle.set_resource_version(revision.get());
            return Ok((lifecycle, false));
        };
        let mut lifecycle = saved.lifecycle;
        lifecycle.set_resource_version(revision.get());
        let mut meta = object.record.clone();
        meta.resource_version = revision.get();
        // Another process may have written the record since (a shared
        // store): the stored record is the truth, taken once the
        // containers are as they are.
        let written_elsewhere = lifecycle.record() != &meta;
        if written_elsewhere && lifecycle.record().uid != meta.uid {
            let mut lifecycle = fresh(object, &[])?;
            lifecycle.set_resource_version(revision.get());
            return Ok((lifecycle, false));
        }
        if saved.epoch != self.epoch {
            // Another boot: the workload did not survive it, and the old
            // deadlines have no meaning on this clock.
            for i in 0..lifecycle.containers().len() {
                let _ = lifecycle
                    .handle(now, Input::container_exited(i))
                    .container();
            }
            if written_elsewhere {
                let _ = lifecycle.observe_record(now, Some(&meta));
            }
            return Ok((lifecycle, true));
        }
        if written_elsewhere {
            let _ = lifecycle.observe_record(now, Some(&meta));
        }
        if recovery == Recovery::ResetFullGrace
            && lifecycle.agent().killing
            && lifecycle.is_stored()
        {
            return Ok((restart_kill(object, &lifecycle, revision, now)?, true));
        }
        Ok((lifecycle, false))
    }
}

/// [`Recovery::ResetFullGrace`]: the kill of `lifecycle` started again at
/// `now` with the full grace (the containers stopped stay stopped).
fn restart_kill(
    object: &StoredObject,
    lifecycle: &ObjectLifecycle,
    revision: Revision,
    now: Now,
) -> Result<ObjectLifecycle, RuntimeError> {
    let stopped: Vec<bool> = lifecycle
        .containers()
        .iter()
        .map(|c| c.stage() == Stage::Stopped)
        .collect();
    let agent = lifecycle.agent();
    let mut again = fresh(object, &stopped)?;
    again.set_resource_version(revision.get());
    let _ = again.handle(now, Input::AgentSync).handled();
    if agent.evicted {
        // An eviction's kill starts again too, with the budget it had (the
        // record alone does not say it was ordered).
        let _ = again
            .handle(now, Input::evict(agent.remembered_grace))
            .handled();
    }
    Ok(again)
}
