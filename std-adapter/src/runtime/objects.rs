//! The objects a runtime tracks: entries in a slab under dense ids, a
//! name → id map, and each lifecycle packed while nothing works on it.
//!
//! An `ObjectLifecycle` is 5 776 bytes (room for 16 finalizer names of up
//! to 316 bytes and 8 containers); packed (see [`persisted`](super::persisted))
//! a terminating pod with one container and a 36-byte uid takes 87. An
//! input [`open`](Objects::open)s the lifecycles it works on, and the
//! runtime [`close`](Objects::close)s them when it is done; a round of
//! timeouts closes each object as soon as its write is built
//! ([`close_one`](Objects::close_one)) and opens it again to act, so that
//! the next object is decoded into the box just freed, still in the cache,
//! rather than a round's worth of boxes (5.8 MB) being written and read
//! again. While packed, an entry keeps what the deadline queue and the
//! phase reports need ([`Summary`]), so those do not decode it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use grace_core::{Instant, Phase, Stage};

use super::persisted::{Codec, KillStateError, unpack, unpack_into};
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
    /// What the lifecycle says, as of its packing (valid while packed).
    summary: Summary,
    /// The packed lifecycle's `resource_version` is older than `revision`
    /// (it was packed before the write that stored it): opened, it takes
    /// `revision`'s.
    stale_version: bool,
}

/// What the runtime reads of a lifecycle besides its inputs: kept with a
/// packed one, so that rescheduling and reporting phases decode nothing.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct Summary {
    /// [`phase`](grace_core::Lifecycle::phase).
    pub(super) phase: Phase,
    /// [`poll_timeout`](grace_core::Lifecycle::poll_timeout).
    pub(super) next: Option<Instant>,
    /// Every container is stopped.
    pub(super) stopped: bool,
    /// [`has_action`](grace_core::Lifecycle::has_action).
    pub(super) acts: bool,
}

impl Summary {
    fn of(lifecycle: &ObjectLifecycle) -> Summary {
        Summary {
            phase: lifecycle.phase(),
            next: lifecycle.poll_timeout(),
            stopped: lifecycle
                .containers()
                .iter()
                .all(|c| c.stage() == Stage::Stopped),
            acts: lifecycle.has_action(),
        }
    }
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
    /// The signals sent to objects' containers, kept until the object is
    /// forgotten: the store may not hold them (their record's write
    /// failed), and a signal that went out must neither be sent again nor
    /// count from later (see [`Runtime::stop_signal_sent`](super::Runtime)).
    /// Empty for objects that were never signalled.
    signals: HashMap<Id, Signals>,
    /// An object with owner references may be tracked: set when one is
    /// inserted or given some, cleared by [`recount_owners`](Self::recount_owners)
    /// (so that objects without any cost the garbage collector no scan).
    owners_seen: bool,
}

/// The signals sent to one object's containers (see [`Objects::signals`]).
struct Signals {
    /// The object they went to: a name may hold another object later.
    uid: Box<str>,
    /// `(container, when its stop signal went out if that was under this
    /// runtime, whether SIGKILL went out while its write-ahead could not
    /// be written)`.
    sent: Vec<(u8, Option<Instant>, bool)>,
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
        let summary = Summary::of(&lifecycle);
        let boxed = boxed(&mut self.spare, lifecycle);
        let id = match self.id(name) {
            Some(id) => id,
            None => {
                let id = self.free.pop().unwrap_or_else(|| {
                    self.slots.push(None);
                    // Just pushed: the slots are not empty.
                    Id::try_from(self.slots.len().saturating_sub(1)).unwrap_or(Id::MAX)
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
                        summary,
                        stale_version: false,
                    });
                }
                id
            }
        };
        let uid = boxed.record().uid.as_str();
        if self.signals.get(&id).is_some_and(|s| *s.uid != *uid) {
            self.signals.remove(&id);
        }
        self.owners_seen |= !spec.owners.is_empty();
        if let Some(entry) = self.get_mut(id) {
            entry.held = Held::Open(boxed);
            entry.spec = spec;
            entry.revision = revision;
            entry.deadline = None;
            entry.summary = summary;
            entry.stale_version = false;
        }
        self.opened.push(id);
        id
    }

    /// Whether a stored object may hold owner references (see
    /// `owners_seen`).
    pub(super) fn owners_seen(&self) -> bool {
        self.owners_seen
    }

    /// Notes that an object was given owner references.
    pub(super) fn saw_owners(&mut self) {
        self.owners_seen = true;
    }

    /// Looks again whether a stored object holds owner references.
    pub(super) fn recount_owners(&mut self) {
        self.owners_seen = self
            .slots
            .iter()
            .flatten()
            .any(|e| e.revision.is_some() && !e.spec.owners.is_empty());
    }

    /// What the object's lifecycle says (see [`Summary`]).
    pub(super) fn summary(&self, id: Id) -> Option<Summary> {
        let entry = self.get(id)?;
        Some(match &entry.held {
            Held::Open(lifecycle) => Summary::of(lifecycle),
            Held::Packed(_) => entry.summary,
        })
    }

    /// Notes that the object's lifecycle was stored at `revision`, which
    /// its record's `resource_version` now says (a packed one, once
    /// opened).
    pub(super) fn stored(&mut self, id: Id, revision: Revision) {
        let Some(entry) = self.get_mut(id) else {
            return;
        };
        entry.revision = Some(revision);
        match &mut entry.held {
            Held::Open(lifecycle) => lifecycle.set_resource_version(revision.get()),
            Held::Packed(_) => entry.stale_version = true,
        }
    }

    /// Forgets the object. The caller has taken its deadline out of the
    /// queue.
    pub(super) fn remove(&mut self, id: Id) {
        let Some(entry) = self.slots.get_mut(id as usize).and_then(Option::take) else {
            return;
        };
        self.ids.remove(&entry.name);
        self.signals.remove(&id);
        if let Held::Open(b) = entry.held
            && self.spare.len() < SPARE
        {
            self.spare.push(b);
        }
        self.free.push(id);
    }

    /// Keeps that the stop signal of the object's `container` went out at
    /// `at` (its first one: a later report changes nothing).
    pub(super) fn signal_sent(&mut self, id: Id, uid: &str, container: u8, at: Instant) {
        if let Some(sent) = self.sent(id, uid, container) {
            sent.1.get_or_insert(at);
        }
    }

    /// The signals sent to the object's `container`, kept from now on.
    fn sent(
        &mut self,
        id: Id,
        uid: &str,
        container: u8,
    ) -> Option<&mut (u8, Option<Instant>, bool)> {
        let signals = self.signals.entry(id).or_insert_with(|| Signals {
            uid: uid.into(),
            sent: Vec::new(),
        });
        if *signals.uid != *uid {
            *signals = Signals {
                uid: uid.into(),
                sent: Vec::new(),
            };
        }
        if !signals.sent.iter().any(|&(c, _, _)| c == container) {
            signals.sent.push((container, None, false));
        }
        signals.sent.iter_mut().find(|(c, _, _)| *c == container)
    }

    /// `(container, when its stop signal went out)` for each container of
    /// the object signalled under this runtime.
    pub(super) fn signals_sent(&self, id: Id) -> Vec<(u8, Instant)> {
        self.signals.get(&id).map_or_else(Vec::new, |signals| {
            signals
                .sent
                .iter()
                .filter_map(|&(c, at, _)| Some((c, at?)))
                .collect()
        })
    }

    /// Marks that SIGKILL went out to the object's `container` though its
    /// write-ahead could not be written; whether it had not been marked
    /// before (it is sent, and reported, once).
    pub(super) fn killed_unwritten(&mut self, id: Id, uid: &str, container: u8) -> bool {
        self.sent(id, uid, container)
            .is_some_and(|sent| !std::mem::replace(&mut sent.2, true))
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
            Held::Packed(bytes) => {
                let mut lifecycle = unpack(bytes).map_err(|e| broken(entry, &e))?;
                fix_version(entry, &mut lifecycle);
                f(entry, &lifecycle)
            }
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
            let lifecycle = unpacked(&mut self.spare, entry, bytes)?;
            entry.held = Held::Open(lifecycle);
            entry.stale_version = false;
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
        let (summary, stale_version) = (entry.summary, entry.stale_version);
        let before = match &entry.held {
            Held::Packed(bytes) => {
                let open = Held::Open(unpacked(&mut self.spare, entry, bytes)?);
                self.opened.push(id);
                let packed = match std::mem::replace(&mut entry.held, open) {
                    Held::Packed(bytes) => bytes,
                    Held::Open(_) => Box::default(),
                };
                Before {
                    packed,
                    summary,
                    stale_version,
                }
            }
            Held::Open(lifecycle) => Before {
                packed: self.codec.pack(lifecycle).map_err(|e| broken(entry, &e))?,
                summary: Summary::of(lifecycle),
                stale_version: false,
            },
        };
        Ok(match &mut entry.held {
            Held::Open(lifecycle) => Some((&mut **lifecycle, before)),
            Held::Packed(_) => None,
        })
    }

    /// Puts back the packed form [`open_keeping`](Self::open_keeping)
    /// handed out, dropping what was done to the lifecycle since (packed
    /// since or not).
    pub(super) fn revert(&mut self, id: Id, before: Before) {
        let Some(entry) = self.slots.get_mut(id as usize).and_then(Option::as_mut) else {
            return;
        };
        let Before {
            packed,
            summary,
            stale_version,
        } = before;
        entry.summary = summary;
        entry.stale_version = stale_version;
        if let Held::Open(b) = std::mem::replace(&mut entry.held, Held::Packed(packed))
            && self.spare.len() < SPARE
        {
            self.spare.push(b);
        }
    }

    /// Packs every lifecycle opened since the last call.
    pub(super) fn close(&mut self) {
        for id in std::mem::take(&mut self.opened) {
            self.pack(id, None);
        }
    }

    /// Packs the object's lifecycle now, if it is open: as `packed` if
    /// given (the caller has just encoded it so, see
    /// [`Codec::last_packed`](super::persisted::Codec::last_packed)),
    /// else encoded here.
    pub(super) fn close_one(&mut self, id: Id, packed: Option<&[u8]>) {
        // Left in `opened`: `close` passes over what is packed already.
        self.pack(id, packed);
    }

    fn pack(&mut self, id: Id, packed: Option<&[u8]>) {
        let Some(entry) = self.slots.get_mut(id as usize).and_then(Option::as_mut) else {
            return;
        };
        let Held::Open(l) = &entry.held else {
            return;
        };
        let bytes = match packed {
            Some(bytes) => Box::from(bytes),
            // A lifecycle that cannot be packed stays open (it never fails).
            None => match self.codec.pack(l) {
                Ok(bytes) => bytes,
                Err(_) => return,
            },
        };
        entry.summary = Summary::of(l);
        entry.stale_version = false;
        if let Held::Open(b) = std::mem::replace(&mut entry.held, Held::Packed(bytes))
            && self.spare.len() < SPARE
        {
            self.spare.push(b);
        }
    }
}

/// An opened lifecycle and what it was before ([`Before`]).
pub(super) type Kept<'a> = (&'a mut ObjectLifecycle, Before);

/// An entry's lifecycle as [`open_keeping`](Objects::open_keeping) found
/// it, for [`revert`](Objects::revert): packed, with what the entry kept
/// beside it.
pub(super) struct Before {
    packed: Box<[u8]>,
    summary: Summary,
    stale_version: bool,
}

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

/// The entry's packed lifecycle decoded into a box (a spare one if there
/// is one, in place), with the `resource_version` of the entry's revision
/// if it is stale.
#[allow(clippy::vec_box)]
fn unpacked(
    spare: &mut Vec<Box<ObjectLifecycle>>,
    entry: &Entry,
    bytes: &[u8],
) -> Result<Box<ObjectLifecycle>, RuntimeError> {
    let mut lifecycle = match spare.pop() {
        // A box that fails to decode into is dropped: it is partly written.
        Some(mut b) => {
            unpack_into(bytes, &mut b).map_err(|e| broken(entry, &e))?;
            b
        }
        None => Box::new(unpack(bytes).map_err(|e| broken(entry, &e))?),
    };
    fix_version(entry, &mut lifecycle);
    Ok(lifecycle)
}

/// A packed lifecycle of `entry`, decoded: its `resource_version` is the
/// entry's revision if it is stale.
fn fix_version(entry: &Entry, lifecycle: &mut ObjectLifecycle) {
    if entry.stale_version
        && let Some(revision) = entry.revision
    {
        lifecycle.set_resource_version(revision.get());
    }
}

/// Our own packed bytes did not decode: a bug, reported as an error.
fn broken(entry: &Entry, e: &KillStateError) -> RuntimeError {
    RuntimeError::KillState {
        object: entry.name.to_string(),
        error: e.clone(),
    }
}
