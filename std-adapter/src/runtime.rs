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

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, mpsc};

use grace_core::{Duration, Instant, Lifecycle, Now, Phase};

use crate::clock::Clock;
use crate::store::{FINALIZERS, Store, StoredObject, Write};

// Where things are: the inputs one at a time (`inputs`) or in a `batch`;
// the write-ahead (`commit`) and the actions after it (`act`); deadlines
// and group-committed rounds (`deadlines`); opening and recovery
// (`recovery`); reading an object back after an unknown outcome
// (`resync`); another process's writes (`observe`); the tracked objects
// (`objects`), their stored parts (`stored`) and kill states
// (`persisted`); the world (`actuator`).
mod act;
mod actuator;
mod batch;
mod commit;
mod deadlines;
mod error;
mod inputs;
mod objects;
mod observe;
mod persisted;
mod recovery;
mod resync;
mod stored;
mod transition;
mod writes;

pub use actuator::{ActionError, Actuator, OwedKill, WorldEvent};
pub use batch::Batch;
pub use error::RuntimeError;
use error::{cannot_encode, store_down};
pub use inputs::{Answer, Collected, DeleteAnswer};
use objects::{Id, Objects};
pub use observe::Observed;
use persisted::Codec;
pub use persisted::{KillRecord, KillStateError};
pub use recovery::{Recovery, RuntimeBuilder};
use stored::Spec;
pub(crate) use stored::{fresh, stopped_containers};
pub use transition::{Change, Transition};
use writes::Writes;

/// The most containers an object may have.
pub const CONTAINERS: usize = 8;

/// How long the runtime waits before reading an object back again when the
/// store could not answer.
pub const RETRY: Duration = Duration::from_millis(1_000);

/// One object's lifecycle as the runtime keeps it.
pub type ObjectLifecycle = Lifecycle<FINALIZERS, CONTAINERS>;

/// The most objects one group commit ([`Runtime::handle_timeouts`],
/// recovery at [`Runtime::open`]) writes with one store batch; fewer if
/// the store's batches hold fewer ([`Store::max_batch`]: 62 on etcd with
/// its default `--max-txn-ops`).
pub const ROUND: usize = 1024;

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
    /// The slots a round's writes are built in, kept from round to round
    /// ([`Store::batch_ref`]).
    writes: Writes,
    /// While a [`Batch`] commits: the removals its actions owe, written
    /// with the batch after the actions instead of one store delete each.
    removals: Option<Vec<Write>>,
    /// An owner marked for deletion still held by a GC finalizer after the
    /// last collection (or none has run yet): a removal may release it.
    gc_waiting: bool,
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

impl<S: Store, C: Clock, A: Actuator> Runtime<S, C, A> {
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

    /// The object's name.
    fn name(&self, id: Id) -> Option<Arc<str>> {
        self.objects.get(id).map(|e| Arc::clone(&e.name))
    }

    /// The object's phase.
    fn phase(&self, id: Id) -> Option<Phase> {
        self.objects.summary(id).map(|s| s.phase)
    }

    /// [`emit`](Self::emit) for the object `id` (named only if someone
    /// listens).
    fn emit_id(&mut self, at: Now, id: Id, change: Change) {
        if self.subscribers.is_empty() {
            return;
        }
        if let Some(name) = self.name(id) {
            self.emit(at, &name, change);
        }
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
