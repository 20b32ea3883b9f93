//! Short bounded strings for uids and finalizer names, stored inline.

use core::{fmt, ops::Deref};

/// The longest uid or finalizer name the core stores, in bytes. Kubernetes
/// uids are 36 bytes and common finalizer names (`kubernetes.io/pv-protection`,
/// `foregroundDeletion`) are well under this; a longer one is a typed error.
pub const NAME_CAPACITY: usize = 63;

/// A uid or finalizer name of at most [`NAME_CAPACITY`] bytes.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
// A one-byte length: 63 bytes of text and the length fill 64 bytes exactly.
pub struct Name(heapless::String<NAME_CAPACITY, u8>);

/// A name longer than [`NAME_CAPACITY`] bytes was given.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NameTooLong;

impl fmt::Display for NameTooLong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "name longer than {NAME_CAPACITY} bytes")
    }
}

impl core::error::Error for NameTooLong {}

impl Name {
    /// The empty name.
    pub const fn new() -> Self {
        Name(heapless::String::new())
    }

    /// Copies `s`, or fails if it is longer than [`NAME_CAPACITY`] bytes.
    pub fn try_from_str(s: &str) -> Result<Self, NameTooLong> {
        let mut out = heapless::String::new();
        out.push_str(s).map_err(|_| NameTooLong)?;
        Ok(Name(out))
    }

    /// The name as a string slice.
    #[inline]
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl Deref for Name {
    type Target = str;
    #[inline]
    fn deref(&self) -> &str {
        self.0.as_str()
    }
}

impl TryFrom<&str> for Name {
    type Error = NameTooLong;
    fn try_from(s: &str) -> Result<Self, NameTooLong> {
        Name::try_from_str(s)
    }
}

impl PartialEq<str> for Name {
    #[inline]
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(all(feature = "arbitrary", not(target_os = "none")))]
impl<'a> arbitrary::Arbitrary<'a> for Name {
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        // Pick from a few meaningful names most of the time, so that fuzzers
        // reach the GC finalizer rules; otherwise any short string.
        let pick: u8 = u.int_in_range(0..=3)?;
        let s: &str = match pick {
            0 => crate::record::FINALIZER_ORPHAN,
            1 => crate::record::FINALIZER_FOREGROUND,
            2 => "example.com/backup",
            _ => {
                let len = u.int_in_range(0..=NAME_CAPACITY)?;
                let bytes = u.bytes(len)?;
                return Ok(core::str::from_utf8(bytes)
                    .ok()
                    .and_then(|s| Name::try_from_str(s).ok())
                    .unwrap_or_default());
            }
        };
        Name::try_from_str(s).map_err(|_| arbitrary::Error::IncorrectFormat)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_longer_than_capacity_are_a_typed_error() {
        let long = [b'a'; NAME_CAPACITY + 1];
        let long = core::str::from_utf8(&long).unwrap_or("");
        assert_eq!(Name::try_from_str(long), Err(NameTooLong));
        let fits = &long[..NAME_CAPACITY];
        assert_eq!(Name::try_from_str(fits).map(|n| n.len()), Ok(NAME_CAPACITY));
    }
}
