//! Short bounded strings for uids and finalizer names, stored inline.

use core::{borrow::Borrow, cmp::Ordering, fmt, hash, ops::Deref, str::FromStr};

/// The longest uid or finalizer name the core stores by default, in bytes:
/// every name Kubernetes accepts fits. A finalizer is a qualified name, a
/// DNS subdomain prefix of up to 253 characters, `/`, and a name of up to
/// 63 (253 + 1 + 63); an object name is at most 253. A longer one is a
/// typed error.
///
/// Names are stored inline, so this is also what each one costs (plus a
/// two-byte length). A configuration that knows its names are short picks
/// a smaller capacity ([`InlineName`]), the last const parameter of
/// [`Record`](crate::Record), [`Lifecycle`](crate::Lifecycle) and
/// [`Table`](crate::Table) (on a microcontroller, say: see
/// [`SMALL_NAME_CAPACITY`]).
pub const NAME_CAPACITY: usize = 317;

/// A capacity for configurations whose names are short (a uuid is 36
/// bytes, `foregroundDeletion` 18): 62 bytes of text and the length fill 64
/// bytes.
pub const SMALL_NAME_CAPACITY: usize = 62;

/// A uid or finalizer name of at most [`NAME_CAPACITY`] bytes (317: every
/// Kubernetes-legal name), stored inline: [`InlineName`] with the default
/// capacity.
///
/// From a string: `Name::try_from("uid-1")?`, `"uid-1".parse::<Name>()?`,
/// or, for a literal checked at compile time, [`name!`](crate::name!):
///
/// ```
/// use grace_core::{Name, name};
///
/// const UID: Name = name!("uid-1");
/// let parsed: Name = "uid-1".parse().unwrap();
/// assert_eq!(UID, parsed);
/// assert_eq!(UID, "uid-1");
/// assert_eq!(UID.to_string(), "uid-1");
/// ```
pub type Name = InlineName<NAME_CAPACITY>;

/// A uid or finalizer name of at most `L` bytes, stored inline in `L + 2`
/// bytes. [`Name`] is the default capacity; a configuration with short
/// names (a microcontroller's) picks a smaller one, such as
/// `InlineName<SMALL_NAME_CAPACITY>` (64 bytes).
#[derive(Clone)]
// Bytes past `len` are always zero, so that a free table slot is all zero
// bits. Byte-aligned: a name adds no padding.
pub struct InlineName<const L: usize> {
    len: [u8; 2],
    bytes: [u8; L],
}

/// A name longer than the capacity was given.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NameTooLong;

impl fmt::Display for NameTooLong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("name longer than its capacity")
    }
}

impl core::error::Error for NameTooLong {}

impl<const L: usize> InlineName<L> {
    /// The length is two bytes.
    const CAPACITY_FITS: () = assert!(L <= u16::MAX as usize, "a name holds at most 65 535 bytes");

    /// The empty name.
    pub const fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::CAPACITY_FITS;
        InlineName {
            len: [0; 2],
            bytes: [0; L],
        }
    }

    /// The most bytes this name can hold: `L`.
    pub const fn capacity(&self) -> usize {
        L
    }

    /// Copies `s`, or fails if it is longer than `L` bytes. `const`: a
    /// name can be built in a `const` item (see [`name!`](crate::name!)
    /// for literals checked at compile time).
    pub const fn try_from_str(s: &str) -> Result<Self, NameTooLong> {
        Self::try_from_utf8(s.as_bytes())
    }

    /// Copies `src`, which must be UTF-8 (a `str`'s or another name's
    /// bytes), or fails if it is longer than `L`. Copying a name through
    /// its bytes keeps the UTF-8 check of [`as_str`](Self::as_str) out of
    /// paths that never show the text (about 400 bytes of `.text` on a
    /// Cortex-M4).
    const fn try_from_utf8(src: &[u8]) -> Result<Self, NameTooLong> {
        #[allow(clippy::let_unit_value)]
        let () = Self::CAPACITY_FITS;
        let mut bytes = [0; L];
        let Some((head, _)) = bytes.split_at_mut_checked(src.len()) else {
            return Err(NameTooLong);
        };
        head.copy_from_slice(src);
        // At most L, which fits two bytes (checked above).
        #[allow(clippy::cast_possible_truncation)]
        let len = (src.len() as u16).to_le_bytes();
        Ok(InlineName { len, bytes })
    }

    /// The length in bytes.
    #[inline]
    const fn stored_len(&self) -> usize {
        u16::from_le_bytes(self.len) as usize
    }

    /// The name as bytes (valid UTF-8).
    #[inline]
    pub const fn as_bytes(&self) -> &[u8] {
        match self.bytes.split_at_checked(self.stored_len()) {
            Some((head, _)) => head,
            None => &[],
        }
    }

    /// The name as a string slice.
    #[inline]
    pub const fn as_str(&self) -> &str {
        // Built only from `&str`s, cut at their own length: always UTF-8.
        match core::str::from_utf8(self.as_bytes()) {
            Ok(s) => s,
            Err(_) => "",
        }
    }
}

/// A [`Name`] from a string literal, checked at compile time: a literal
/// longer than the name's capacity does not compile (the check runs in
/// a `const` block, so it can never fail at run time).
///
/// ```
/// use grace_core::{FinalizerChange, Record, name};
///
/// let record = Record::<4>::new(name!("uid-1"));
/// let change = FinalizerChange::Remove(name!("example.com/backup"));
/// # let _ = (record, change);
/// ```
///
/// ```compile_fail
/// // 5 bytes in a name of 4: one too many.
/// let too_long: grace_core::InlineName<4> = grace_core::name!("abcde");
/// ```
#[macro_export]
macro_rules! name {
    ($s:expr) => {
        const {
            match $crate::InlineName::try_from_str($s) {
                ::core::result::Result::Ok(name) => name,
                ::core::result::Result::Err(_) => {
                    ::core::panic!("name longer than its capacity")
                }
            }
        }
    };
}

impl<const L: usize> Default for InlineName<L> {
    fn default() -> Self {
        InlineName::new()
    }
}

impl<const L: usize> Deref for InlineName<L> {
    type Target = str;
    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl<const L: usize> AsRef<str> for InlineName<L> {
    #[inline]
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl<const L: usize> AsRef<[u8]> for InlineName<L> {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

// Eq, Ord and Hash are those of the text, so `Borrow<str>` holds.
impl<const L: usize> Borrow<str> for InlineName<L> {
    #[inline]
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl<const L: usize> TryFrom<&str> for InlineName<L> {
    type Error = NameTooLong;
    fn try_from(s: &str) -> Result<Self, NameTooLong> {
        InlineName::try_from_str(s)
    }
}

impl<const L: usize, const M: usize> TryFrom<&InlineName<M>> for InlineName<L> {
    type Error = NameTooLong;
    /// A copy, in a name of another capacity if need be.
    fn try_from(name: &InlineName<M>) -> Result<Self, NameTooLong> {
        InlineName::try_from_utf8(name.as_bytes())
    }
}

impl<const L: usize> FromStr for InlineName<L> {
    type Err = NameTooLong;
    fn from_str(s: &str) -> Result<Self, NameTooLong> {
        InlineName::try_from_str(s)
    }
}

impl<const L: usize> PartialEq for InlineName<L> {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl<const L: usize> Eq for InlineName<L> {}

impl<const L: usize> PartialOrd for InlineName<L> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<const L: usize> Ord for InlineName<L> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl<const L: usize> hash::Hash for InlineName<L> {
    fn hash<H: hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl<const L: usize> PartialEq<str> for InlineName<L> {
    #[inline]
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl<const L: usize> PartialEq<&str> for InlineName<L> {
    #[inline]
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl<const L: usize> PartialEq<InlineName<L>> for str {
    #[inline]
    fn eq(&self, other: &InlineName<L>) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl<const L: usize> PartialEq<InlineName<L>> for &str {
    #[inline]
    fn eq(&self, other: &InlineName<L>) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl<const L: usize> fmt::Debug for InlineName<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl<const L: usize> fmt::Display for InlineName<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(feature = "defmt")]
impl<const L: usize> defmt::Format for InlineName<L> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "{=str}", self.as_str());
    }
}

// A name is its text in every serde format.
#[cfg(feature = "serde")]
impl<const L: usize> serde::Serialize for InlineName<L> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(feature = "serde")]
impl<'de, const L: usize> serde::Deserialize<'de> for InlineName<L> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text<const L: usize>;
        impl<const L: usize> serde::de::Visitor<'_> for Text<L> {
            type Value = InlineName<L>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a string of at most {L} bytes")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<InlineName<L>, E> {
                InlineName::try_from_str(s).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Text::<L>)
    }
}

#[cfg(all(feature = "arbitrary", not(target_os = "none")))]
impl<'a, const L: usize> arbitrary::Arbitrary<'a> for InlineName<L> {
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        // Pick from a few meaningful names most of the time, so that fuzzers
        // reach the GC finalizer rules; otherwise any short string.
        let pick: u8 = u.int_in_range(0..=3)?;
        let s: &str = match pick {
            0 => crate::record::FINALIZER_ORPHAN,
            1 => crate::record::FINALIZER_FOREGROUND,
            2 => "example.com/backup",
            _ => {
                let len = u.int_in_range(0..=L.min(80))?;
                let bytes = u.bytes(len)?;
                return Ok(core::str::from_utf8(bytes)
                    .ok()
                    .and_then(|s| InlineName::try_from_str(s).ok())
                    .unwrap_or_default());
            }
        };
        Ok(InlineName::try_from_str(s).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_longer_than_capacity_are_a_typed_error() {
        let long = [b'a'; NAME_CAPACITY + 1];
        let long = core::str::from_utf8(&long).unwrap_or("");
        assert_eq!(
            InlineName::<NAME_CAPACITY>::try_from_str(long),
            Err(NameTooLong)
        );
        let fits = &long[..NAME_CAPACITY];
        assert_eq!(
            InlineName::<NAME_CAPACITY>::try_from_str(fits).map(|n| n.len()),
            Ok(NAME_CAPACITY)
        );
        let small = &long[..SMALL_NAME_CAPACITY + 1];
        assert_eq!(
            InlineName::<SMALL_NAME_CAPACITY>::try_from_str(small),
            Err(NameTooLong)
        );
    }

    #[test]
    fn names_compare_and_order_as_their_text() {
        let a: Name = Name::try_from_str("a").unwrap();
        let a_nul: Name = Name::try_from_str("a\0").unwrap();
        let b: Name = Name::try_from_str("b").unwrap();
        assert!(a < a_nul && a_nul < b);
        assert_ne!(a, a_nul);
        assert_eq!(a.cmp(&b), "a".cmp("b"));
        assert_eq!(
            InlineName::<4>::try_from(&a),
            Ok(InlineName::<4>::try_from_str("a").unwrap())
        );
        assert_eq!(a, "a");
        assert_eq!("a", a);
    }

    #[test]
    fn a_const_name_is_built_at_compile_time() {
        const UID: Name = crate::name!("uid-1");
        assert_eq!(UID.as_str(), "uid-1");
        assert_eq!("uid-1".parse::<Name>(), Ok(UID));
        const SHORT: InlineName<8> = crate::name!("uid-1");
        assert_eq!(SHORT, UID.as_str());
    }
}
