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

use serde::{Deserialize, Serialize};

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

/// [`unpack`] into `place`, whatever it held: only what the packed form
/// holds is written, where a decoded value (5 776 bytes) would be moved
/// whole through each layer that builds it. If it fails, `place` is left
/// partly written.
pub(super) fn unpack_into(body: &[u8], place: &mut ObjectLifecycle) -> Result<(), KillStateError> {
    let mut deserializer = postcard::Deserializer::from_bytes(body);
    ObjectLifecycle::deserialize_in_place(&mut deserializer, place)
        .map_err(|e| KillStateError(e.to_string()))
}

/// Encodes kill states and packed lifecycles through one reused buffer.
#[derive(Default)]
pub(super) struct Codec {
    buf: Vec<u8>,
    /// Where the lifecycle starts in `buf` after a kill state: past the
    /// format byte and the epoch.
    body: usize,
}

impl Codec {
    /// The kill state for `lifecycle` on the clock `epoch`.
    pub(super) fn state(
        &mut self,
        epoch: &str,
        lifecycle: &ObjectLifecycle,
    ) -> Result<KillState, KillStateError> {
        self.encode_state(epoch, lifecycle)?;
        Ok(KillState::from_bytes(&self.buf))
    }

    /// [`state`](Self::state) into `state`, in the bytes it holds if
    /// nothing else holds them ([`KillState::assign`]).
    pub(super) fn state_into(
        &mut self,
        epoch: &str,
        lifecycle: &ObjectLifecycle,
        state: &mut Option<KillState>,
    ) -> Result<(), KillStateError> {
        self.encode_state(epoch, lifecycle)?;
        match state {
            Some(state) => state.assign(&self.buf),
            None => *state = Some(KillState::from_bytes(&self.buf)),
        }
        Ok(())
    }

    /// The kill state into `buf`, as [`KillRecord::encode_with`] writes it.
    fn encode_state(
        &mut self,
        epoch: &str,
        lifecycle: &ObjectLifecycle,
    ) -> Result<(), KillStateError> {
        // The tuple `(epoch, lifecycle)` in two steps (postcard writes a
        // tuple as its elements one after the other), to know where the
        // lifecycle starts.
        encode(&mut self.buf, &[FORMAT], epoch)?;
        self.body = self.buf.len();
        let buf = std::mem::take(&mut self.buf);
        self.buf =
            postcard::to_extend(lifecycle, buf).map_err(|e| KillStateError(e.to_string()))?;
        Ok(())
    }

    /// The lifecycle of the last kill state encoded, packed
    /// ([`pack`](Self::pack)) without encoding it again: the kill state
    /// after its epoch.
    pub(super) fn last_packed(&self) -> &[u8] {
        self.buf.get(self.body..).unwrap_or_default()
    }

    /// The lifecycle alone, as the runtime keeps it between inputs.
    pub(super) fn pack(
        &mut self,
        lifecycle: &ObjectLifecycle,
    ) -> Result<Box<[u8]>, KillStateError> {
        encode(&mut self.buf, &[], lifecycle)?;
        self.body = 0;
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
    use grace_core::{ContainerSpec, DeleteOptions, Input, Name, Now, Record, Strategy};

    use super::*;

    fn terminating() -> ObjectLifecycle {
        let record = Record::new(Name::try_from("uid-1").expect("short"));
        let mut l =
            ObjectLifecycle::new(Strategy::POD, record, &[ContainerSpec::default()]).expect("fits");
        let now = Now::from_unix_millis(1_700_000_000_000);
        let _ = l
            .handle(now, Input::Delete(DeleteOptions::with_grace(30)))
            .delete()
            .unwrap();
        let _ = l.handle(now, Input::AgentSync).handled();
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
    fn a_kill_state_written_into_a_slot_is_the_same_and_ends_with_the_packed_lifecycle() {
        let lifecycle = terminating();
        let mut codec = Codec::default();
        let state = codec.state("boot:1", &lifecycle).expect("encodes");
        let packed = codec.pack(&lifecycle).expect("packs");
        // Into a state held elsewhere too (a store's copy): a new one.
        let mut slot = Some(state.clone());
        codec
            .state_into("boot:1", &lifecycle, &mut slot)
            .expect("encodes");
        assert_eq!(slot.as_ref(), Some(&state));
        assert_eq!(codec.last_packed(), &packed[..]);
        // Into a state held by nobody else, of the same length: in place.
        let mut slot = Some(KillState::from_bytes(&vec![0; state.as_bytes().len()]));
        codec
            .state_into("boot:1", &lifecycle, &mut slot)
            .expect("encodes");
        assert_eq!(slot, Some(state));
    }

    #[test]
    fn a_lifecycle_unpacked_in_place_is_the_one_unpacked_whatever_the_place_held() {
        let mut codec = Codec::default();
        let mut other = terminating();
        let mut finalized = Record::new(Name::try_from("uid-2-longer").expect("short"));
        for f in ["a.example/one", "b.example/two"] {
            finalized.finalizers.push_str(f).expect("fits");
        }
        let two = ObjectLifecycle::new(
            Strategy::POD,
            finalized,
            &[ContainerSpec::default(), ContainerSpec::default()],
        )
        .expect("fits");
        for lifecycle in [terminating(), two.clone()] {
            let packed = codec.pack(&lifecycle).expect("packs");
            for place in [&mut other, &mut two.clone(), &mut terminating()] {
                unpack_into(&packed, place).expect("unpacks");
                assert_eq!(*place, lifecycle);
                assert_eq!(unpack(&packed), Ok(lifecycle.clone()));
            }
        }
        for cut in 0..codec.pack(&two).expect("packs").len() {
            let packed = codec.pack(&two).expect("packs");
            assert!(unpack_into(&packed[..cut], &mut other).is_err());
        }
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
