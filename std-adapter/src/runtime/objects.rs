//! The objects a runtime tracks: entries in a slab under dense ids, a
//! name → id map, and each lifecycle packed while nothing works on it.
//!
//! An `ObjectLifecycle` is 1 440 bytes (room for 16 finalizer names of 64
//! bytes and 8 containers); packed (see [`persisted`](super::persisted)) a
//! terminating pod with one container and a 36-byte uid takes 87. An input or a round of timeouts
//! [`open`](Objects::open)s the lifecycles it works on, and the runtime
//! [`close`](Objects::close)s them when it is done, so at most a round's
//! worth are ever held whole.

use std::collections::BTreeMap;
use std::sync::Arc;

use grace_core::Instant;

use super::persisted::{Codec, KillStateError, unpack};
use super::{ObjectLifecycle, RuntimeError, Spec};
use crate::store::Revision;

/// An object's place in the slab: its deadline-queue key. A removed
/// object's id is reused for the next new one.
pub(super) type Id = u32;

/// What the runtime keeps per object.
pub(super) struct Entry {
    /// The object's name (shared with the name map).
    pub(super) name: Arc<str>,
    held: Held,
    /// The parts of the stored object that its lifecycle does not hold.
    pub(super) spec: Spec,
    /// The store revision of our last write; `None` once removed.
    pub(super) revision: Option<Revision>,
    /// The deadline the object is queued under.
    pub(super) deadline: Option<Instant>,
}

/// The lifecycle, the one copy of the object's record and kill state.
enum Held {
    /// Packed: nothing works on it.
    Packed(Box<[u8]>),
    /// Decoded while an input or a round works on it.
    Open(Box<ObjectLifecycle>),
}

/// The slab and the name map (see the module docs).
#[derive(Default)]
pub(super) struct Objects {
    slots: Vec<Option<Entry>>,
    /// Free slots, reused last-freed first.
    free: Vec<Id>,
    ids: BTreeMap<Arc<str>, Id>,
    /// The entries opened since the last `close`.
    opened: Vec<Id>,
    /// Boxes of closed lifecycles, for the next ones opened (kept as
    /// boxes: they are handed out again as they are).
    #[allow(clippy::vec_box)]
    spare: Vec<Box<ObjectLifecycle>>,
    codec: Codec,
}

/// How many boxes [`Objects::close`] keeps for reuse (a round's worth).
const SPARE: usize = super::ROUND;

impl Objects {
    /// The id of the object named `name`.
    pub(super) fn id(&self, name: &str) -> Option<Id> {
        self.ids.get(name).copied()
    }

    pub(super) fn get(&self, id: Id) -> Option<&Entry> {
        self.slots.get(id as usize).and_then(Option::as_ref)
    }

    pub(super) fn get_mut(&mut self, id: Id) -> Option<&mut Entry> {
        self.slots.get_mut(id as usize).and_then(Option::as_mut)
    }

    /// The entry named `name`.
    pub(super) fn named_mut(&mut self, name: &str) -> Option<&mut Entry> {
        self.id(name).and_then(|id| self.get_mut(id))
    }

    /// The names, in bytewise order.
    pub(super) fn names(&self) -> impl Iterator<Item = &str> {
        self.ids.keys().map(|name| &**name)
    }

    /// Tracks `lifecycle` under `name` (opened), replacing any entry of
    /// that name, whose id it takes. The caller has taken the old entry's
    /// deadline out of the queue.
    pub(super) fn insert(
        &mut self,
        name: &str,
        lifecycle: ObjectLifecycle,
        spec: Spec,
        revision: Option<Revision>,
    ) -> Id {
        let boxed = boxed(&mut self.spare, lifecycle);
        let id = match self.id(name) {
            Some(id) => id,
            None => {
                let id = self.free.pop().unwrap_or_else(|| {
                    self.slots.push(None);
                    Id::try_from(self.slots.len() - 1).unwrap_or(Id::MAX)
                });
                let name: Arc<str> = Arc::from(name);
                self.ids.insert(Arc::clone(&name), id);
                if let Some(slot) = self.slots.get_mut(id as usize) {
                    *slot = Some(Entry {
                        name,
                        held: Held::Packed(Box::default()),
                        spec: Spec::default(),
                        revision: None,
                        deadline: None,
                    });
                }
                id
            }
        };
        if let Some(entry) = self.get_mut(id) {
            entry.held = Held::Open(boxed);
            entry.spec = spec;
            entry.revision = revision;
            entry.deadline = None;
        }
        self.opened.push(id);
        id
    }

    /// Forgets the object. The caller has taken its deadline out of the
    /// queue.
    pub(super) fn remove(&mut self, id: Id) {
        let Some(entry) = self.slots.get_mut(id as usize).and_then(Option::take) else {
            return;
        };
        self.ids.remove(&entry.name);
        if let Held::Open(b) = entry.held
            && self.spare.len() < SPARE
        {
            self.spare.push(b);
        }
        self.free.push(id);
    }

    /// Runs `f` on the entry and its lifecycle (decoded into a temporary
    /// if it is packed).
    pub(super) fn read<R>(
        &self,
        id: Id,
        f: impl FnOnce(&Entry, &ObjectLifecycle) -> R,
    ) -> Result<Option<R>, RuntimeError> {
        let Some(entry) = self.get(id) else {
            return Ok(None);
        };
        Ok(Some(match &entry.held {
            Held::Open(lifecycle) => f(entry, lifecycle),
            Held::Packed(bytes) => f(entry, &unpack(bytes).map_err(|e| broken(entry, &e))?),
        }))
    }

    /// The object's lifecycle to work on: decoded, and kept so until
    /// [`close`](Self::close).
    pub(super) fn open(&mut self, id: Id) -> Result<Option<&mut ObjectLifecycle>, RuntimeError> {
        Ok(self.opened(id)?.map(|open| open.lifecycle))
    }

    /// [`open`](Self::open), with the entry's other parts.
    pub(super) fn opened(&mut self, id: Id) -> Result<Option<Opened<'_>>, RuntimeError> {
        let Some(entry) = self.slots.get_mut(id as usize).and_then(Option::as_mut) else {
            return Ok(None);
        };
        if let Held::Packed(bytes) = &entry.held {
            let lifecycle = unpack(bytes).map_err(|e| broken(entry, &e))?;
            entry.held = Held::Open(boxed(&mut self.spare, lifecycle));
            self.opened.push(id);
        }
        let Entry {
            name,
            held,
            spec,
            revision,
            ..
        } = entry;
        Ok(match held {
            Held::Open(lifecycle) => Some(Opened {
                lifecycle,
                name,
                spec,
                revision,
            }),
            Held::Packed(_) => None,
        })
    }

    /// [`open`](Self::open), handing back the packed form it had (for
    /// [`revert`](Self::revert)).
    pub(super) fn open_keeping(&mut self, id: Id) -> Result<Option<Kept<'_>>, RuntimeError> {
        let Some(entry) = self.slots.get_mut(id as usize).and_then(Option::as_mut) else {
            return Ok(None);
        };
        let packed = match &entry.held {
            Held::Packed(bytes) => {
                let lifecycle = unpack(bytes).map_err(|e| broken(entry, &e))?;
                let open = Held::Open(boxed(&mut self.spare, lifecycle));
                self.opened.push(id);
                match std::mem::replace(&mut entry.held, open) {
                    Held::Packed(bytes) => bytes,
                    Held::Open(_) => Box::default(),
                }
            }
            Held::Open(lifecycle) => self.codec.pack(lifecycle).map_err(|e| broken(entry, &e))?,
        };
        Ok(match &mut entry.held {
            Held::Open(lifecycle) => Some((&mut **lifecycle, packed)),
            Held::Packed(_) => None,
        })
    }

    /// Puts back the packed form [`open_keeping`](Self::open_keeping)
    /// handed out, dropping what was done to the lifecycle since.
    pub(super) fn revert(&mut self, id: Id, packed: Box<[u8]>) {
        let Some(entry) = self.slots.get_mut(id as usize).and_then(Option::as_mut) else {
            return;
        };
        if let Held::Open(b) = std::mem::replace(&mut entry.held, Held::Packed(packed))
            && self.spare.len() < SPARE
        {
            self.spare.push(b);
        }
    }

    /// Packs every lifecycle opened since the last call.
    pub(super) fn close(&mut self) {
        for id in std::mem::take(&mut self.opened) {
            let Some(entry) = self.slots.get_mut(id as usize).and_then(Option::as_mut) else {
                continue;
            };
            let Held::Open(l) = &entry.held else {
                continue;
            };
            // A lifecycle that cannot be packed stays open (it never fails).
            let Ok(packed) = self.codec.pack(l) else {
                continue;
            };
            if let Held::Open(b) = std::mem::replace(&mut entry.held, Held::Packed(packed))
                && self.spare.len() < SPARE
            {
                self.spare.push(b);
            }
        }
    }
}

/// An opened lifecycle and the packed form it had.
pub(super) type Kept<'a> = (&'a mut ObjectLifecycle, Box<[u8]>);

/// An opened entry's lifecycle and its other parts.
pub(super) struct Opened<'a> {
    pub(super) lifecycle: &'a mut ObjectLifecycle,
    pub(super) name: &'a Arc<str>,
    pub(super) spec: &'a Spec,
    pub(super) revision: &'a mut Option<Revision>,
}

/// `lifecycle` in a box, a spare one if there is one.
#[allow(clippy::vec_box)]
fn boxed(
    spare: &mut Vec<Box<ObjectLifecycle>>,
    lifecycle: ObjectLifecycle,
) -> Box<ObjectLifecycle> {
    match spare.pop() {
        Some(mut b) => {
            *b = lifecycle;
            b
        }
        None => Box::new(lifecycle),
    }
}

/// Our own packed bytes did not decode: a bug, reported as an error.
fn broken(entry: &Entry, e: &KillStateError) -> RuntimeError {
    RuntimeError::KillState {
        object: entry.name.to_string(),
        error: e.clone(),
    }
}
