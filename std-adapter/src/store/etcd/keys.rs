//! Where an [`EtcdStore`](super::EtcdStore) keeps things under its prefix,
//! and how the stored values are encoded.
//!
//! The layout is in the docs of [`EtcdStore`](super::EtcdStore).
//!
//! Log keys are zero-padded so that etcd's bytewise key order is revision
//! order, and a range read of the log returns the changes in order.

use serde::{Deserialize, Serialize};

use crate::store::{Event, Revision, StoreError, StoredObject};

/// The key layout under one prefix.
#[derive(Clone, Debug)]
pub(super) struct Keys {
    prefix: String,
}

impl Keys {
    /// The layout under `prefix`, which ends with `/`.
    pub(super) fn new(prefix: String) -> Self {
        Keys { prefix }
    }

    pub(super) fn prefix(&self) -> &str {
        &self.prefix
    }

    fn key(&self, parts: &[&str]) -> String {
        let mut key = self.prefix.clone();
        for part in parts {
            key.push_str(part);
        }
        key
    }

    /// The store's revision counter.
    pub(super) fn revision(&self) -> String {
        self.key(&["meta/revision"])
    }

    /// The end of the compacted part of the log.
    pub(super) fn compacted(&self) -> String {
        self.key(&["meta/compacted"])
    }

    /// Where the object `name` is stored.
    pub(super) fn object(&self, name: &str) -> String {
        self.key(&["objects/", name])
    }

    /// The common prefix of every object key.
    pub(super) fn objects(&self) -> String {
        self.key(&["objects/"])
    }

    /// The change of `revision`.
    pub(super) fn log(&self, revision: u64) -> String {
        self.key(&["log/", &format!("{revision:020}")])
    }

    /// The common prefix of every log key.
    pub(super) fn logs(&self) -> String {
        self.key(&["log/"])
    }

    /// The liveness key of `node`.
    pub(super) fn node(&self, node: &str) -> String {
        self.key(&["nodes/", node])
    }

    /// The common prefix of every liveness key.
    pub(super) fn nodes(&self) -> String {
        self.key(&["nodes/"])
    }

    /// The fencing epoch of `node`.
    pub(super) fn fencing(&self, node: &str) -> String {
        self.key(&["fencing/", node])
    }
}

/// The end of the key range of every key starting with `prefix` (etcd's
/// `range_end` convention): the prefix with its last byte below 0xff
/// incremented and what follows dropped.
pub(super) fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last.saturating_add(1)); // last < 0xff
            return end;
        }
    }
    // Only 0xff bytes (never the case for a UTF-8 prefix): to the end of
    // the key space.
    vec![0]
}

/// An object as written: its revision beside it, so that a write can
/// check the revision of an object that no longer decodes.
#[derive(Serialize)]
struct StoredRef<'a> {
    revision: u64,
    object: &'a StoredObject,
}

/// An object as read.
#[derive(Deserialize)]
struct Stored {
    revision: u64,
    object: StoredObject,
}

/// Only the revision of a stored object (the object is skipped).
#[derive(Deserialize)]
struct StoredHead {
    revision: u64,
}

pub(super) fn encode_object(
    revision: Revision,
    object: &StoredObject,
) -> Result<Vec<u8>, StoreError> {
    encode(&StoredRef {
        revision: revision.get(),
        object,
    })
}

pub(super) fn decode_object(
    name: &str,
    bytes: &[u8],
) -> Result<(StoredObject, Revision), StoreError> {
    let stored: Stored = serde_json::from_slice(bytes).map_err(|e| {
        StoreError::Corrupt(crate::store::BackendError::with_context(
            format!("object {name:?}"),
            e,
        ))
    })?;
    Ok((stored.object, Revision(stored.revision)))
}

pub(super) fn decode_revision(name: &str, bytes: &[u8]) -> Result<Revision, StoreError> {
    let head: StoredHead = serde_json::from_slice(bytes).map_err(|e| {
        StoreError::Corrupt(crate::store::BackendError::with_context(
            format!("object {name:?}"),
            e,
        ))
    })?;
    Ok(Revision(head.revision))
}

pub(super) fn encode_event(event: &Event) -> Result<Vec<u8>, StoreError> {
    encode(event)
}

pub(super) fn decode_event(key: &[u8], bytes: &[u8]) -> Result<Event, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| {
        StoreError::Corrupt(crate::store::BackendError::from(format!(
            "change log entry {}: {e}",
            String::from_utf8_lossy(key)
        )))
    })
}

/// A decimal counter (a revision, an epoch); an absent key is 0.
pub(super) fn decode_counter(key: &str, bytes: Option<&[u8]>) -> Result<u64, StoreError> {
    let Some(bytes) = bytes else {
        return Ok(0);
    };
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            StoreError::Corrupt(crate::store::BackendError::from(format!(
                "{key}: not a decimal number: {:?}",
                String::from_utf8_lossy(bytes)
            )))
        })
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(|e| {
        StoreError::Corrupt(crate::store::BackendError::with_context("cannot encode", e))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_keys_sort_in_revision_order() {
        let keys = Keys::new("/g/".into());
        assert!(keys.log(9) < keys.log(10));
        assert!(keys.log(99_999) < keys.log(100_000));
        assert!(keys.log(u64::MAX).starts_with(&keys.logs()));
    }

    #[test]
    fn prefix_end_is_the_next_key_after_every_key_with_the_prefix() {
        assert_eq!(prefix_end("/g/"), b"/g0".to_vec());
        assert_eq!(prefix_end("a\u{7f}"), b"a\x80".to_vec());
        assert!(b"/g/\xff\xff".as_slice() < prefix_end("/g/").as_slice());
    }
}
