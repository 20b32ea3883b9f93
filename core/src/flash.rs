//! Deletions that survive a reboot (feature `flash`): each lifecycle that
//! changes is written to NOR flash, through the `embedded-storage-async`
//! traits, as one item of a wear-levelled key-value map
//! (`sequential-storage`), keyed by the object's uid, in postcard.
//!
//! Write-ahead, as on std: [`FlashStore::store`] is called with the new
//! state before any of its actions is taken (the embassy driver's
//! [`Firmware::persist`](crate::driver::Firmware::persist) is the place),
//! and [`FlashStore::erase`] once the object is finished. A power cut in
//! the middle of a write leaves the previous item (sequential-storage
//! checks each item's CRC and repairs a half-written page on the next
//! operation), so what is restored is the state before or after that
//! write, never a mix.
//!
//! After a reset, [`FlashStore::restore`] puts every stored lifecycle back
//! into a table. What was running before the reset is gone (D6's "another
//! boot": on a board the workloads died with it), so every kill that was
//! under way, or a deletion not yet acted on, finds its containers stopped:
//! the kill finishes (the final delete follows, R75, once the agent has
//! seen the deletion), and a record held by finalizers stays. No deadline
//! of the old boot's clock survives, so none can be later than before.
//! Live objects come back as they were; their workloads are the firmware's
//! to start again.

use core::fmt;

use embedded_storage_async::nor_flash::MultiwriteNorFlash;
use sequential_storage::cache::CacheImpl;
use sequential_storage::map::{Key, MapStorage, SerializationError};

use crate::input::Input;
use crate::kill::Stage;
use crate::lifecycle::Lifecycle;
use crate::name::{InlineName, NAME_CAPACITY};
use crate::shared::{Busy, TableAccess};
use crate::time::Now;

/// An object's key on flash: its uid (one length byte, then the bytes), a
/// name of capacity `L` (the table's: [`NAME_CAPACITY`] by default,
/// [`SMALL_NAME_CAPACITY`](crate::SMALL_NAME_CAPACITY) on a
/// microcontroller). It takes `1 + len` bytes, at most `1 + min(L, 255)`:
/// a uid longer than 255 bytes cannot be stored
/// ([`SerializationError::InvalidData`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UidKey<const L: usize = NAME_CAPACITY>(pub InlineName<L>);

impl<const L: usize> Key for UidKey<L> {
    fn serialize_into(&self, buffer: &mut [u8]) -> Result<usize, SerializationError> {
        let bytes = self.0.as_str().as_bytes();
        let len = u8::try_from(bytes.len()).map_err(|_| SerializationError::InvalidData)?;
        let (head, rest) = buffer
            .split_first_mut()
            .ok_or(SerializationError::BufferTooSmall)?;
        *head = len;
        rest.get_mut(..bytes.len())
            .ok_or(SerializationError::BufferTooSmall)?
            .copy_from_slice(bytes);
        Ok(bytes.len().saturating_add(1))
    }

    fn deserialize_from(buffer: &[u8]) -> Result<(Self, usize), SerializationError> {
        let (len, rest) = buffer
            .split_first()
            .ok_or(SerializationError::InvalidFormat)?;
        let len = usize::from(*len);
        if len > L {
            return Err(SerializationError::InvalidFormat);
        }
        let bytes = rest.get(..len).ok_or(SerializationError::InvalidFormat)?;
        let text = core::str::from_utf8(bytes).map_err(|_| SerializationError::InvalidFormat)?;
        let name = InlineName::try_from_str(text).map_err(|_| SerializationError::InvalidFormat)?;
        Ok((UidKey(name), len.saturating_add(1)))
    }
}

/// Why a flash operation failed. Nothing in the table was changed by it.
#[derive(Debug)]
#[non_exhaustive]
pub enum FlashError<E> {
    /// The flash or the map failed (full, corrupted, a driver error).
    Storage(sequential_storage::Error<E>),
    /// A lifecycle does not fit the store's buffer (`B` bytes).
    TooLarge,
    /// A stored item does not read back as a lifecycle of this type.
    Corrupt,
    /// The table is full: more objects on flash than it holds.
    TableFull,
    /// The shared table was borrowed by an enclosing call.
    Busy,
}

impl<E: fmt::Debug> fmt::Display for FlashError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlashError::Storage(e) => write!(f, "flash storage: {e:?}"),
            FlashError::TooLarge => f.write_str("lifecycle larger than the flash buffer"),
            FlashError::Corrupt => f.write_str("stored item is not a lifecycle"),
            FlashError::TableFull => f.write_str("more objects on flash than the table holds"),
            FlashError::Busy => f.write_str("shared table already in use"),
        }
    }
}

impl<E: fmt::Debug> core::error::Error for FlashError<E> {}

impl<E> From<sequential_storage::Error<E>> for FlashError<E> {
    fn from(e: sequential_storage::Error<E>) -> Self {
        FlashError::Storage(e)
    }
}

impl<E> From<Busy> for FlashError<E> {
    fn from(_: Busy) -> Self {
        FlashError::Busy
    }
}

/// What [`FlashStore::restore`] found.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Restored {
    /// Lifecycles put back into the table.
    pub objects: usize,
    /// Of those, the ones whose deletion was under way: their containers,
    /// gone with the reset, now count as stopped.
    pub deleting: usize,
}

/// A key-value map on NOR flash holding one item per object, for
/// lifecycles whose names hold `L` bytes (the table's `L`:
/// [`NAME_CAPACITY`] by default, or
/// [`SMALL_NAME_CAPACITY`](crate::SMALL_NAME_CAPACITY), as the docs
/// recommend on a microcontroller).
///
/// `B` bytes of buffer (two of them) must hold the largest serialized
/// lifecycle plus its key ([`UidKey`]: one length byte and the uid, so at
/// most `1 + min(L, 255)` bytes: 63 with small names, 256 with the
/// default), rounded up to the flash's word size.
///
/// Removal marks an item erased in place, so the flash must allow a word to
/// be written twice ([`MultiwriteNorFlash`], as most NOR flash does).
pub struct FlashStore<
    S: MultiwriteNorFlash,
    K: CacheImpl<UidKey<L>>,
    const B: usize,
    const L: usize = NAME_CAPACITY,
> {
    map: MapStorage<UidKey<L>, S, K>,
    buffer: Aligned<B>,
    value: Aligned<B>,
}

/// A buffer aligned for any flash word (up to 32 bytes): some flash
/// controllers write only from aligned RAM.
#[repr(align(32))]
struct Aligned<const B: usize>([u8; B]);

// The buffer size; the map's flash and cache print nothing useful.
impl<S: MultiwriteNorFlash, K: CacheImpl<UidKey<L>>, const B: usize, const L: usize> fmt::Debug
    for FlashStore<S, K, B, L>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlashStore")
            .field("buffer", &B)
            .finish_non_exhaustive()
    }
}

impl<S: MultiwriteNorFlash, K: CacheImpl<UidKey<L>>, const B: usize, const L: usize>
    FlashStore<S, K, B, L>
{
    /// A store over `map`, made with `MapStorage::new(flash, config, cache)`.
    pub fn new(map: MapStorage<UidKey<L>, S, K>) -> Self {
        FlashStore {
            map,
            buffer: Aligned([0; B]),
            value: Aligned([0; B]),
        }
    }

    /// The map (and through it the flash), e.g. for its statistics.
    pub fn map(&mut self) -> &mut MapStorage<UidKey<L>, S, K> {
        &mut self.map
    }

    /// Hands back the map (and through it the flash).
    pub fn into_inner(self) -> MapStorage<UidKey<L>, S, K> {
        self.map
    }

    /// Writes `lifecycle` under its uid, replacing the previous item.
    pub async fn store<const F: usize, const C: usize>(
        &mut self,
        lifecycle: &Lifecycle<F, C, L>,
    ) -> Result<(), FlashError<S::Error>> {
        let len = postcard::to_slice(lifecycle, &mut self.value.0)
            .map_err(|_| FlashError::TooLarge)?
            .len();
        let value = self.value.0.get(..len).ok_or(FlashError::TooLarge)?;
        let key = UidKey(lifecycle.record().uid.clone());
        self.map
            .store_item(&mut self.buffer.0, &key, &value)
            .await?;
        Ok(())
    }

    /// Removes the object with this uid: it is finished.
    pub async fn erase(&mut self, uid: &InlineName<L>) -> Result<(), FlashError<S::Error>> {
        let key = UidKey(uid.clone());
        self.map.remove_item(&mut self.buffer.0, &key).await?;
        Ok(())
    }

    /// Puts every stored lifecycle into `table` after a reset, as another
    /// boot sees it (see the module's documentation), at `now` of the new
    /// boot. Objects already in the table under the same uid are replaced.
    pub async fn restore<const N: usize, const F: usize, const C: usize>(
        &mut self,
        now: Now,
        mut table: impl TableAccess<N, F, C, L>,
    ) -> Result<Restored, FlashError<S::Error>> {
        let mut restored = Restored::default();
        // A power cut inside a page erase leaves a page that reads as
        // corrupted. `fetch_all_items` (sequential-storage 8.0.2) does not
        // repair it (the error leaves it before its repair step), while a
        // lookup does: look up a key never stored first (an empty uid).
        let _: Option<&[u8]> = self
            .map
            .fetch_item(&mut self.buffer.0, &UidKey(InlineName::new()))
            .await?;
        let mut items = self.map.fetch_all_items(&mut self.buffer.0).await?;
        // The iterator yields every live item, older ones of a key first:
        // the last one read wins.
        while let Some((UidKey(uid), bytes)) = items.next::<&[u8]>(&mut self.value.0).await? {
            let lifecycle: Lifecycle<F, C, L> =
                postcard::from_bytes(bytes).map_err(|_| FlashError::Corrupt)?;
            let mut lifecycle = lifecycle;
            let deleting = another_boot(now, &mut lifecycle);
            // The object's place, and whether what it replaces was deleting.
            let placed = table.access(|t| {
                let existing = t
                    .iter()
                    .find(|(_, l)| l.record().uid == uid)
                    .map(|(id, _)| id);
                match existing {
                    Some(id) => t
                        .with(id, |l| {
                            let was = is_deleting(l);
                            *l = lifecycle;
                            Some(was)
                        })
                        .ok(),
                    None => t.insert(lifecycle).ok().map(|_| None),
                }
            })?;
            let replaced = placed.ok_or(FlashError::TableFull)?;
            match replaced {
                None => restored.objects = restored.objects.saturating_add(1),
                Some(true) => restored.deleting = restored.deleting.saturating_sub(1),
                Some(false) => {}
            }
            if deleting {
                restored.deleting = restored.deleting.saturating_add(1);
            }
        }
        Ok(restored)
    }
}

/// D6 "another boot": whatever ran before the reset is gone. A lifecycle
/// whose deletion was under way (a deletion timestamp, a removed record,
/// a kill started) finds its containers stopped; returns whether it was.
fn another_boot<const F: usize, const C: usize, const L: usize>(
    now: Now,
    lifecycle: &mut Lifecycle<F, C, L>,
) -> bool {
    let deleting = is_deleting(lifecycle);
    if deleting {
        for i in 0..lifecycle.containers().len() {
            let running = lifecycle
                .containers()
                .get(i)
                .is_some_and(|c| c.stage() != Stage::Stopped);
            if running {
                // Ignored when nothing runs there (no agent, fenced).
                let _ = lifecycle
                    .handle(now, Input::container_exited(i))
                    .container();
            }
        }
    }
    deleting
}

/// A deletion timestamp, a removed record, or a kill started.
fn is_deleting<const F: usize, const C: usize, const L: usize>(
    lifecycle: &Lifecycle<F, C, L>,
) -> bool {
    lifecycle.record().deletion_timestamp.is_some()
        || !lifecycle.is_stored()
        || lifecycle.agent().killing
}
