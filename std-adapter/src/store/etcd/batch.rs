//! A batch of writes as one etcd transaction: read a snapshot, check every
//! write against it, commit only if nothing read has changed, else check
//! again against what the failed commit read back. A guarded store's
//! fencing epoch is one of the things read: a batch whose writer's node was
//! fenced is refused, whenever the fencing happened.

use std::collections::HashMap;

use etcd_client::{DeleteOptions, KeyValue, Txn, TxnOp};

use super::keys::{self, Keys, decode_counter};
use super::{Fence, Inner, TOO_MANY_OPS, gets, unchanged};
use crate::store::{
    BatchError, Event, EventKind, Revision, StoreError, StoredObject, Write, check,
};

/// A batch whose commit keeps failing because other clients keep writing
/// first gives up after this many snapshots. Every round, one of the
/// competing writers succeeds, so this is reached only under a flood.
const MAX_ATTEMPTS: usize = 1000;

/// Applies `writes` (not empty) as one transaction; with a `fence`, only
/// while the node's fencing epoch is the one it holds.
pub(super) fn write(
    inner: &Inner,
    fence: Option<&Fence>,
    writes: Vec<Write>,
) -> Result<Vec<Revision>, BatchError> {
    let mut names: Vec<&str> = Vec::new();
    for write in &writes {
        if !names.contains(&write.name()) {
            names.push(write.name());
        }
    }
    let reads = read_ops(inner, fence, &names);
    let response = inner
        .txn("batch: read", Txn::new().and_then(reads.clone()))
        .map_err(BatchError::backend)?;
    let mut snapshot = Snapshot::parse(fence, &names, &response).map_err(BatchError::backend)?;
    for _ in 0..MAX_ATTEMPTS {
        let plan = plan(inner, fence, &writes, &snapshot)?;
        let txn = Txn::new()
            .when(plan.compares)
            .and_then(plan.ops)
            .or_else(reads.clone());
        let response = inner.txn("batch", txn).map_err(|e| {
            BatchError::backend(match e {
                // etcd refuses a transaction that is too long before
                // applying any of it.
                StoreError::Unavailable(msg) if msg.message().contains(TOO_MANY_OPS) => {
                    StoreError::Unavailable(msg)
                }
                StoreError::Unavailable(msg) => {
                    StoreError::Unavailable(crate::store::BackendError::from(format!(
                        "{msg} (the batch may or may not have been applied)"
                    )))
                }
                other => other,
            })
        })?;
        if response.succeeded() {
            return Ok(plan.revisions);
        }
        // Someone wrote in between (or fenced the node): check again
        // against what is there now.
        snapshot = Snapshot::parse(fence, &names, &response).map_err(BatchError::backend)?;
    }
    Err(BatchError::backend(StoreError::Unavailable(
        crate::store::BackendError::from(format!(
            "batch: other writers committed first {MAX_ATTEMPTS} times in a row"
        )),
    )))
}

/// The reads a batch's checks need: the counter, the compaction mark, the
/// fencing epoch (guarded stores only) and each named object, in this
/// order.
fn read_ops(inner: &Inner, fence: Option<&Fence>, names: &[&str]) -> Vec<TxnOp> {
    let mut ops = vec![
        TxnOp::get(inner.keys.revision(), None),
        TxnOp::get(inner.keys.compacted(), None),
    ];
    if let Some(fence) = fence {
        ops.push(TxnOp::get(inner.keys.fencing(&fence.node), None));
    }
    ops.extend(
        names
            .iter()
            .map(|name| TxnOp::get(inner.keys.object(name), None)),
    );
    ops
}

/// What the reads found, at one etcd revision.
struct Snapshot {
    counter: Option<KeyValue>,
    compacted: Option<KeyValue>,
    /// The fencing epoch's key, read for guarded stores only.
    epoch: Option<KeyValue>,
    objects: HashMap<String, Option<KeyValue>>,
}

impl Snapshot {
    fn parse(
        fence: Option<&Fence>,
        names: &[&str],
        response: &etcd_client::TxnResponse,
    ) -> Result<Self, StoreError> {
        let mut found = gets(response).into_iter().map(|g| g.kvs.into_iter().next());
        let mut next = || {
            found.next().ok_or_else(|| {
                StoreError::Unavailable("etcd answered fewer reads than were asked".into())
            })
        };
        let counter = next()?;
        let compacted = next()?;
        let epoch = match fence {
            Some(_) => next()?,
            None => None,
        };
        let mut objects = HashMap::new();
        for name in names {
            objects.insert((*name).to_owned(), next()?);
        }
        Ok(Snapshot {
            counter,
            compacted,
            epoch,
            objects,
        })
    }
}

/// A batch turned into one transaction.
struct Plan {
    compares: Vec<etcd_client::Compare>,
    ops: Vec<TxnOp>,
    revisions: Vec<Revision>,
}

/// What a name holds as the batch goes.
enum Current<'a> {
    /// As read (decoded only as far as a write needs).
    Stored(&'a KeyValue),
    /// As an earlier write of the batch left it.
    Written(Revision, Box<StoredObject>),
}

/// Checks the fence and every write against `snapshot` (each write as the
/// earlier writes of the batch leave it), and builds the transaction that
/// applies them all.
fn plan(
    inner: &Inner,
    fence: Option<&Fence>,
    writes: &[Write],
    snapshot: &Snapshot,
) -> Result<Plan, BatchError> {
    let keys = &inner.keys;
    let mut compares = Vec::with_capacity(snapshot.objects.len().saturating_add(2));
    if let Some(fence) = fence {
        compares.push(check_fence(keys, fence, snapshot)?);
    }
    let counter_key = keys.revision();
    let counter = decode_counter(&counter_key, snapshot.counter.as_ref().map(KeyValue::value))
        .map_err(BatchError::backend)?;
    let compacted = decode_counter(
        &keys.compacted(),
        snapshot.compacted.as_ref().map(KeyValue::value),
    )
    .map_err(BatchError::backend)?;

    let staged = stage(writes, snapshot, counter)?;

    compares.push(unchanged(&counter_key, snapshot.counter.as_ref()));
    let mut ops = Vec::with_capacity(writes.len().saturating_mul(2).saturating_add(3));
    object_ops(keys, &staged.objects, snapshot, &mut compares, &mut ops)?;
    // Keep the last `retention` changes: drop older log entries, and do
    // not write those of this batch that would be dropped at once (a
    // transaction may not write a key twice).
    let next = staged.next;
    let cutoff = next.saturating_sub(inner.retention);
    for event in staged.events.iter().filter(|e| e.revision.get() > cutoff) {
        let value = keys::encode_event(event).map_err(BatchError::backend)?;
        ops.push(TxnOp::put(keys.log(event.revision.get()), value, None));
    }
    ops.push(TxnOp::put(counter_key, next.to_string(), None));
    if cutoff > compacted {
        let last_stored = cutoff.min(counter);
        if last_stored > compacted {
            // compacted < last_stored <= counter: neither overflows.
            let range = DeleteOptions::new().with_range(keys.log(last_stored.saturating_add(1)));
            ops.push(TxnOp::delete(
                keys.log(compacted.saturating_add(1)),
                Some(range),
            ));
        }
        ops.push(TxnOp::put(keys.compacted(), cutoff.to_string(), None));
    }
    Ok(Plan {
        compares,
        ops,
        revisions: staged.events.iter().map(|e| e.revision).collect(),
    })
}

/// The node's fencing epoch as read must be the one it writes under; the
/// transaction then compares it unchanged.
fn check_fence(
    keys: &Keys,
    fence: &Fence,
    snapshot: &Snapshot,
) -> Result<etcd_client::Compare, BatchError> {
    let key = keys.fencing(&fence.node);
    let epoch = decode_counter(&key, snapshot.epoch.as_ref().map(KeyValue::value))
        .map_err(BatchError::backend)?;
    if epoch != fence.epoch {
        return Err(BatchError::backend(StoreError::Fenced {
            node: fence.node.clone(),
            epoch,
        }));
    }
    Ok(unchanged(&key, snapshot.epoch.as_ref()))
}

/// The batch's writes applied in order to what was read.
struct Staged<'a> {
    /// What each name holds after the batch (`None`: absent).
    objects: HashMap<&'a str, Option<Current<'a>>>,
    /// One event per write, in order.
    events: Vec<Event>,
    /// The revision of the last write.
    next: u64,
}

/// Checks each write against what its name holds as the batch goes (as
/// read, or as an earlier write of the batch left it) and gives it the
/// next revision after `counter`.
fn stage<'a>(
    writes: &'a [Write],
    snapshot: &'a Snapshot,
    counter: u64,
) -> Result<Staged<'a>, BatchError> {
    let mut staged: HashMap<&str, Option<Current<'_>>> = snapshot
        .objects
        .iter()
        .map(|(name, kv)| (name.as_str(), kv.as_ref().map(Current::Stored)))
        .collect();
    let mut next = counter;
    let mut events = Vec::with_capacity(writes.len());
    for (index, write) in writes.iter().enumerate() {
        let at = |error| BatchError {
            index: Some(index),
            error,
        };
        let name = write.name();
        let Found { held, previous } =
            found(write, staged.get(name).and_then(Option::as_ref)).map_err(at)?;
        check(write, held.as_ref().map(|(uid, rev)| (uid.as_str(), *rev))).map_err(at)?;
        next = next
            .checked_add(1)
            .ok_or_else(|| at(StoreError::Unavailable("revision counter exhausted".into())))?;
        let revision = Revision(next);
        let (kind, object) = match (write, previous) {
            (Write::Create { object, .. }, _) => (EventKind::Created, object.clone()),
            (Write::Update { object, .. }, _) => (EventKind::Updated, object.clone()),
            (Write::Delete { .. }, Some(previous)) => (EventKind::Deleted, previous),
            // `check` refused a delete of a missing name.
            (Write::Delete { .. }, None) => {
                return Err(at(StoreError::NotFound {
                    name: name.to_owned(),
                }));
            }
        };
        let object = match kind {
            EventKind::Created | EventKind::Updated => {
                let mut object = object;
                object.record.resource_version = next;
                staged.insert(
                    name,
                    Some(Current::Written(revision, Box::new(object.clone()))),
                );
                object
            }
            EventKind::Deleted => {
                staged.insert(name, None);
                object
            }
        };
        events.push(Event {
            kind,
            name: name.to_owned(),
            revision,
            object,
        });
    }
    Ok(Staged {
        objects: staged,
        events,
        next,
    })
}

/// What a write's check needs from what its name holds.
struct Found {
    /// The uid and revision there (`None`: nothing; the uid is left empty
    /// where the check does not read it).
    held: Option<(String, Revision)>,
    /// For a delete: the object its event carries.
    previous: Option<StoredObject>,
}

/// What `write`'s check needs from what its name holds (`current`).
fn found(write: &Write, current: Option<&Current<'_>>) -> Result<Found, StoreError> {
    let name = write.name();
    let (held, previous) = match current {
        None => (None, None),
        Some(Current::Written(rev, object)) => (
            Some((object.uid().to_owned(), *rev)),
            Some(StoredObject::clone(object)),
        ),
        Some(Current::Stored(kv)) => match write {
            Write::Delete { .. } => {
                let (object, rev) = keys::decode_object(name, kv.value())?;
                (Some((object.uid().to_owned(), rev)), Some(object))
            }
            // An update may overwrite an object that no longer decodes.
            Write::Create { .. } | Write::Update { .. } => {
                let rev = keys::decode_revision(name, kv.value())?;
                (Some((String::new(), rev)), None)
            }
        },
    };
    Ok(Found { held, previous })
}

/// One put or delete per name the batch changed, and a compare that each
/// name the batch read is as it was read.
fn object_ops(
    keys: &Keys,
    staged: &HashMap<&str, Option<Current<'_>>>,
    snapshot: &Snapshot,
    compares: &mut Vec<etcd_client::Compare>,
    ops: &mut Vec<TxnOp>,
) -> Result<(), BatchError> {
    for (name, state) in staged {
        let key = keys.object(name);
        let before = snapshot.objects.get(*name).and_then(Option::as_ref);
        match state {
            Some(Current::Written(revision, object)) => {
                let value = keys::encode_object(*revision, object).map_err(BatchError::backend)?;
                ops.push(TxnOp::put(key.as_str(), value, None));
            }
            None if before.is_some() => ops.push(TxnOp::delete(key.as_str(), None)),
            // Created and deleted within the batch, or never written.
            None | Some(Current::Stored(_)) => {}
        }
        compares.push(unchanged(&key, before));
    }
    Ok(())
}
