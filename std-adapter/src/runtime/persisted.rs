//! The runtime's part of a stored object ([`StoredObject::agent`]): the
//! clock epoch its instants belong to and the whole lifecycle (record,
//! agent state, kill stages, deadlines, owed actions), in a compact binary
//! encoding.
//!
//! Format 1: one byte `1`, then [postcard](https://docs.rs/postcard) of
//! `(epoch, lifecycle)`: the epoch as a length-prefixed UTF-8 string, the
//! lifecycle in its serde form (grace-core's persisted proxy: strategy,
//! record, stored flag, phase, agent state, the containers' kill states,
//! the places of owed outputs, force) with variable-length integers and
//! only the finalizers and containers the object has. A terminating pod
//! with one container, a 36-byte uid and no finalizer takes 130 bytes with
//! a boot-id epoch (178 as base64 in JSON); the JSON tree it replaces took
//! about 800.
//!
//! The runtime keeps each lifecycle it is not working on as the same
//! encoding without the header and epoch ([`Codec::pack`], [`unpack`]).
//!
//! [`StoredObject::agent`]: crate::store::StoredObject::agent

use std::fmt;

use serde::Serialize;

use super::ObjectLifecycle;
use crate::store::KillState;

/// The version byte that opens every encoded kill state.
const FORMAT: u8 = 1;

/// The runtime's kill state of one object, decoded: what
/// [`StoredObject::agent`](crate::store::StoredObject::agent) holds, in a
/// form to read (it serializes as `{"epoch": …, "lifecycle": {…}}`, as
/// `grace get -o json` shows it).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KillRecord {
    /// The clock epoch the lifecycle's instants belong to (the boot id for
    /// the system clock).
    pub epoch: String,
    /// The lifecycle as the runtime wrote it.
    pub lifecycle: ObjectLifecycle,
}

/// Bytes that are not an encoded kill state (another format, a truncated
/// or damaged record).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KillStateError(String);

impl fmt::Display for KillStateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not a kill state: {}", self.0)
    }
}

impl std::error::Error for KillStateError {}

impl KillRecord {
    /// Encodes the record (format 1).
    pub fn encode(&self) -> Result<KillState, KillStateError> {
        Self::encode_with(&mut Vec::new(), &self.epoch, &self.lifecycle)
    }

    /// Encodes `lifecycle` on the clock `epoch` as the runtime does, through
    /// `buf` (cleared first): reusing one buffer saves an allocation per
    /// call.
    pub fn encode_with(
        buf: &mut Vec<u8>,
        epoch: &str,
        lifecycle: &ObjectLifecycle,
    ) -> Result<KillState, KillStateError> {
        encode(buf, &[FORMAT], &(epoch, lifecycle))?;
        Ok(KillState::from_bytes(buf))
    }

    /// Decodes what [`encode`](Self::encode) (or the runtime) wrote.
    pub fn decode(state: &KillState) -> Result<KillRecord, KillStateError> {
        let (epoch, body) = split(state.as_bytes())?;
        Ok(KillRecord {
            epoch: epoch.to_owned(),
            lifecycle: unpack(body)?,
        })
    }
}

/// The epoch and the packed lifecycle of an encoded kill state.
pub(super) fn split(bytes: &[u8]) -> Result<(&str, &[u8]), KillStateError> {
    let Some((&format, rest)) = bytes.split_first() else {
        return Err(KillStateError("empty".into()));
    };
    if format != FORMAT {
        return Err(KillStateError(format!("format {format}, not {FORMAT}")));
    }
    postcard::take_from_bytes::<&str>(rest).map_err(|e| KillStateError(e.to_string()))
}

/// A lifecycle from its packed form ([`Codec::pack`]).
pub(super) fn unpack(body: &[u8]) -> Result<ObjectLifecycle, KillStateError> {
    postcard::from_bytes(body).map_err(|e| KillStateError(e.to_string()))
}

/// Encodes kill states and packed lifecycles through one reused buffer.
#[derive(Default)]
pub(super) struct Codec {
    buf: Vec<u8>,
}

impl Codec {
    /// The kill state for `lifecycle` on the clock `epoch`.
    pub(super) fn state(
        &mut self,
        epoch: &str,
        lifecycle: &ObjectLifecycle,
    ) -> Result<KillState, KillStateError> {
        KillRecord::encode_with(&mut self.buf, epoch, lifecycle)
    }

    /// The lifecycle alone, as the runtime keeps it between inputs.
    pub(super) fn pack(
        &mut self,
        lifecycle: &ObjectLifecycle,
    ) -> Result<Box<[u8]>, KillStateError> {
        encode(&mut self.buf, &[], lifecycle)?;
        Ok(Box::from(self.buf.as_slice()))
    }
}

/// `head` and then `value` into `buf` (cleared first).
fn encode<T: Serialize + ?Sized>(
    buf: &mut Vec<u8>,
    head: &[u8],
    value: &T,
) -> Result<(), KillStateError> {
    let mut out = std::mem::take(buf);
    out.clear();
    out.extend_from_slice(head);
    // Writing to a vector fails only for values serde cannot write.
    *buf = postcard::to_extend(value, out).map_err(|e| KillStateError(e.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use grace_core::{ContainerSpec, DeleteOptions, Name, Now, Record, Strategy};

    use super::*;

    fn terminating() -> ObjectLifecycle {
        let record = Record::new(Name::try_from("uid-1").expect("short"));
        let mut l =
            ObjectLifecycle::new(Strategy::POD, record, &[ContainerSpec::default()]).expect("fits");
        let now = Now::from_unix_millis(1_700_000_000_000);
        let _ = l.handle_delete(now, &DeleteOptions::with_grace(30));
        let _ = l.handle_agent_sync(now);
        l
    }

    #[test]
    fn a_kill_state_decodes_to_what_was_encoded() {
        let record = KillRecord {
            epoch: "boot:4b2c6a1e-0f1d-4a57-9d7e-5c3b2f1a0e9d".into(),
            lifecycle: terminating(),
        };
        let state = record.encode().expect("encodes");
        assert!(
            state.as_bytes().len() < 128,
            "{} bytes",
            state.as_bytes().len()
        );
        assert_eq!(KillRecord::decode(&state), Ok(record));
    }

    #[test]
    fn the_packed_lifecycle_is_the_kill_state_after_its_epoch() {
        let lifecycle = terminating();
        let mut codec = Codec::default();
        let state = codec.state("e", &lifecycle).expect("encodes");
        let packed = codec.pack(&lifecycle).expect("packs");
        assert_eq!(split(state.as_bytes()), Ok(("e", &packed[..])));
        assert_eq!(unpack(&packed), Ok(lifecycle));
    }

    #[test]
    fn other_bytes_are_an_error_not_a_panic() {
        let state = KillRecord {
            epoch: "e".into(),
            lifecycle: terminating(),
        }
        .encode()
        .expect("encodes");
        let bytes = state.as_bytes();
        for cut in 0..bytes.len() {
            assert!(KillRecord::decode(&KillState::from_bytes(&bytes[..cut])).is_err());
        }
        let mut other = bytes.to_vec();
        other[0] = 2;
        assert!(KillRecord::decode(&KillState::from_bytes(&other)).is_err());
    }
}
