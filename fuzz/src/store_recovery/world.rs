//! The world the runtime runs in during a `store_recovery` input: an
//! in-memory store behind a wrapper that fails writes on demand, an
//! actuator that records what it is asked to do, a clock shared across
//! restarts, and one ordered log of what really took effect (the writes the
//! store applied and the actions carried out).
//!
//! A fault is either one failing write — refused before it is applied, or
//! applied with its acknowledgement lost (the classic crash) — or the
//! death of the process after a number of effects: from then on nothing it
//! does takes effect (no write is applied, no action carried out, no read
//! answered) until the harness restarts it on the same store.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use grace_core::{Action, Name, Now, Timestamp};
use grace_std::clock::{Clock, ManualClock};
use grace_std::runtime::{ActionError, Actuator};
use grace_std::store::{
    BatchError, KillState, Listing, MemoryStore, Revision, Store, StoreError, StoredObject, Watch,
    Write,
};

/// Something that took effect, in the order it did.
#[derive(Clone, Debug)]
pub enum Event {
    /// The store applied this write (whatever the runtime was told).
    Wrote(Written),
    /// The actuator carried out `action` for `object`, whose uid (in the
    /// stored object the runtime handed over) is `uid`.
    Acted {
        object: Name,
        uid: Name,
        action: Action,
    },
}

/// What the checks read of a write the store applied, taken from the write
/// before the store consumes it: logging a write copies neither its record
/// (kilobytes of inline finalizer capacity) nor its containers.
#[derive(Clone, Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "one per applied write, kept inline: a box would be an allocation per write"
)]
pub enum Written {
    /// A create or an update.
    Stored {
        name: Name,
        created: bool,
        uid: Name,
        deletion_timestamp: Option<Timestamp>,
        deletion_grace_period_seconds: Option<i64>,
        /// The runtime's kill state (shared with the write, not copied).
        agent: Option<KillState>,
    },
    /// A removal, with its uid precondition.
    Removed { name: Name, uid: Option<String> },
}

impl Written {
    fn of(write: &Write) -> Self {
        match write {
            Write::Create { name, object } | Write::Update { name, object, .. } => {
                Written::Stored {
                    name: object_name(name),
                    created: matches!(write, Write::Create { .. }),
                    uid: object.record.uid.clone(),
                    deletion_timestamp: object.record.deletion_timestamp,
                    deletion_grace_period_seconds: object.record.deletion_grace_period_seconds,
                    agent: object.agent.clone(),
                }
            }
            Write::Delete {
                name,
                preconditions,
            } => Written::Removed {
                name: object_name(name),
                uid: preconditions.uid.clone(),
            },
            other => panic!("harness: a write it does not know: {other:?}"),
        }
    }
}

/// An object name as the log keeps it. The harness's names are short
/// (`obj-N`), so one that does not fit is a harness bug.
fn object_name(name: &str) -> Name {
    Name::try_from(name).unwrap_or_else(|_| panic!("harness: object name {name:?} too long"))
}

/// One write to fail: the `skip + 1`-th write from now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteFault {
    /// Writes let through first.
    pub skip: u32,
    /// Applied before failing (acknowledgement lost) or refused.
    pub applied: bool,
}

/// The faults armed and the log, shared by the store, the actuator and the
/// harness.
#[derive(Debug, Default)]
pub struct World {
    /// The next write to fail.
    pub fault: Option<WriteFault>,
    /// The process dies after this many more effects.
    pub dies_after: Option<u32>,
    /// The process has died: nothing it does takes effect until restarted.
    pub dead: bool,
    /// Faults that fired (a failed write, the death) since last reset.
    pub fired: u32,
    /// What took effect since the harness last drained it.
    pub events: Vec<Event>,
    /// What a batch being applied writes (kept for its capacity).
    staged: Vec<Written>,
}

impl World {
    /// Whether the process may take one more effect; it dies here if its
    /// count of effects is spent.
    fn alive(&mut self) -> bool {
        if self.dead {
            return false;
        }
        if self.dies_after == Some(0) {
            self.dead = true;
            self.dies_after = None;
            self.fired += 1;
            return false;
        }
        true
    }

    fn took_effect(&mut self) {
        if let Some(n) = &mut self.dies_after {
            *n = n.saturating_sub(1);
        }
    }

    /// Disarms every fault and revives the process (a restart).
    pub fn restart(&mut self) {
        self.dead = false;
        self.dies_after = None;
    }

    /// Disarms every fault for good (the end of an input).
    pub fn calm(&mut self) {
        self.restart();
        self.fault = None;
    }
}

/// The world, shared.
pub type Shared = Arc<Mutex<World>>;

/// The world's lock. A harness panic is the end of the input, so a
/// poisoned lock is taken as it is.
pub fn lock(world: &Shared) -> MutexGuard<'_, World> {
    world.lock().unwrap_or_else(PoisonError::into_inner)
}

fn crashed() -> StoreError {
    StoreError::Unavailable("injected: the process has crashed".into())
}

/// A [`Store`] that forwards to the in-memory store and fails as the world
/// says. Every write goes through [`Store::batch_ref`] (the trait's
/// `create`, `update` and `delete` are batches of one, through
/// [`Store::batch`]).
pub struct FaultyStore {
    pub inner: Arc<MemoryStore>,
    pub world: Shared,
}

impl Store for FaultyStore {
    fn get(&self, name: &str) -> Result<Option<(StoredObject, Revision)>, StoreError> {
        if lock(&self.world).dead {
            return Err(crashed());
        }
        self.inner.get(name)
    }

    fn list(&self) -> Result<Listing, StoreError> {
        if lock(&self.world).dead {
            return Err(crashed());
        }
        self.inner.list()
    }

    fn revision(&self) -> Result<Revision, StoreError> {
        if lock(&self.world).dead {
            return Err(crashed());
        }
        self.inner.revision()
    }

    fn batch(&self, writes: Vec<Write>) -> Result<Vec<Revision>, BatchError> {
        self.batch_ref(&writes)
    }

    /// Forwarded as it is, as the runtime lends its writes to the real
    /// stores (the trait's default would clone them first).
    fn batch_ref(&self, writes: &[Write]) -> Result<Vec<Revision>, BatchError> {
        let mut world = lock(&self.world);
        if !world.alive() {
            return Err(BatchError::backend(crashed()));
        }
        let fires = match world.fault.as_mut() {
            Some(f) if f.skip > 0 => {
                f.skip -= 1;
                None
            }
            Some(f) => Some(f.applied),
            None => None,
        };
        if fires.is_some() {
            world.fault = None;
            world.fired += 1;
        }
        if fires == Some(false) {
            return Err(BatchError::backend(StoreError::Unavailable(
                "injected: the write failed".into(),
            )));
        }
        let mut staged = std::mem::take(&mut world.staged);
        staged.extend(writes.iter().map(Written::of));
        let result = self.inner.batch_ref(writes);
        let applied = result.is_ok();
        if applied {
            world.events.extend(staged.drain(..).map(Event::Wrote));
            world.took_effect();
        }
        staged.clear();
        world.staged = staged;
        if applied && fires == Some(true) {
            return Err(BatchError::backend(StoreError::Unavailable(
                "injected: the write was applied, its acknowledgement lost".into(),
            )));
        }
        result
    }

    fn watch(&self, from: Revision) -> Result<Watch, StoreError> {
        self.inner.watch(from)
    }
}

/// An [`Actuator`] that logs every action into the world (and does nothing
/// once the process is dead).
pub struct Recorder {
    pub world: Shared,
}

impl Actuator for Recorder {
    fn perform(
        &mut self,
        object: &str,
        stored: &StoredObject,
        action: &Action,
    ) -> Result<(), ActionError> {
        let mut world = lock(&self.world);
        if !world.alive() {
            return Err(ActionError::new(
                action,
                "injected: the process has crashed",
            ));
        }
        world.events.push(Event::Acted {
            object: object_name(object),
            uid: stored.record.uid.clone(),
            action: *action,
        });
        world.took_effect();
        Ok(())
    }
}

/// The clock of one boot, shared by the harness and every runtime started
/// during that boot.
#[derive(Clone)]
pub struct BootClock(pub Arc<ManualClock>);

impl Clock for BootClock {
    fn now(&self) -> Now {
        self.0.now()
    }

    fn epoch(&self) -> String {
        self.0.epoch()
    }
}
