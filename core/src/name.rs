//! Short bounded strings for uids and finalizer names, stored inline.

use core::{borrow::Borrow, cmp::Ordering, fmt, hash, ops::Deref, str::FromStr};

/// The longest uid or finalizer name the core stores, in bytes. Kubernetes
/// uids are 36 bytes and common finalizer names (`kubernetes.io/pv-protection`,
/// `foregroundDeletion`) are well under this; a longer one is a typed error.
pub const NAME_CAPACITY: usize = 63;

/// A uid or finalizer name of at most [`NAME_CAPACITY`] bytes, stored
/// inline.
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
#[derive(Clone)]
// A one-byte length: 63 bytes of text and the length fill 64 bytes exactly.
// Bytes past `len` are always zero, so that a free table slot is all zero
// bits.
pub struct Name {
    len: u8,
    bytes: [u8; NAME_CAPACITY],
}

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

/// Compile-time checks on the capacity: the length is one byte.
const _: () = assert!(NAME_CAPACITY <= u8::MAX as usize);

impl Name {
    /// The empty name.
    pub const fn new() -> Self {
        Name {
            len: 0,
            bytes: [0; NAME_CAPACITY],
        }
    }

    /// Copies `s`, or fails if it is longer than [`NAME_CAPACITY`] bytes.
    /// `const`: a name can be built in a `const` item (see
    /// [`name!`](crate::name!) for literals checked at compile time).
    pub const fn try_from_str(s: &str) -> Result<Self, NameTooLong> {
        let src = s.as_bytes();
        let mut bytes = [0; NAME_CAPACITY];
        let Some((head, _)) = bytes.split_at_mut_checked(src.len()) else {
            return Err(NameTooLong);
        };
        head.copy_from_slice(src);
        // At most NAME_CAPACITY, which fits one byte (checked above).
        #[allow(clippy::cast_possible_truncation)]
        let len = src.len() as u8;
        Ok(Name { len, bytes })
    }

    /// The name as bytes (valid UTF-8).
    #[inline]
    pub const fn as_bytes(&self) -> &[u8] {
        match self.bytes.split_at_checked(self.len as usize) {
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
/// longer than [`NAME_CAPACITY`] bytes does not compile (the check runs in
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
/// // 64 bytes: one too many.
/// let too_long: grace_core::Name =
///     grace_core::name!("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
/// ```
#[macro_export]
macro_rules! name {
    ($s:expr) => {
        const {
            match $crate::Name::try_from_str($s) {
                ::core::result::Result::Ok(name) => name,
                ::core::result::Result::Err(_) => {
                    ::core::panic!("name longer than grace_core::NAME_CAPACITY bytes")
                }
            }
        }
    };
}

impl Default for Name {
    fn default() -> Self {
        Name::new()
    }
}

impl Deref for Name {
    type Target = str;
    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Name {
    #[inline]
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<[u8]> for Name {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

// Eq, Ord and Hash are those of the text, so `Borrow<str>` holds.
impl Borrow<str> for Name {
    #[inline]
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl TryFrom<&str> for Name {
    type Error = NameTooLong;
    fn try_from(s: &str) -> Result<Self, NameTooLong> {
        Name::try_from_str(s)
    }
}

impl TryFrom<&Name> for Name {
    type Error = NameTooLong;
    fn try_from(name: &Name) -> Result<Self, NameTooLong> {
        Ok(name.clone())
    }
}

impl FromStr for Name {
    type Err = NameTooLong;
    fn from_str(s: &str) -> Result<Self, NameTooLong> {
        Name::try_from_str(s)
    }
}

impl PartialEq for Name {
    #[inline]
    fn eq(&self, other: &Name) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Name {}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Name) -> Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl hash::Hash for Name {
    fn hash<H: hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialEq<str> for Name {
    #[inline]
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<&str> for Name {
    #[inline]
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<Name> for str {
    #[inline]
    fn eq(&self, other: &Name) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<Name> for &str {
    #[inline]
    fn eq(&self, other: &Name) -> bool {
        self.as_bytes() == other.as_bytes()
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

#[cfg(feature = "defmt")]
impl defmt::Format for Name {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "{=str}", self.as_str());
    }
}

// A name is its text in every serde format.
#[cfg(feature = "serde")]
impl serde::Serialize for Name {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Name {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = Name;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a string of at most {NAME_CAPACITY} bytes")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Name, E> {
                Name::try_from_str(s).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Text)
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

    #[test]
    fn names_compare_and_order_as_their_text() {
        let a = Name::try_from_str("a").unwrap();
        let a_nul = Name::try_from_str("a\0").unwrap();
        let b = Name::try_from_str("b").unwrap();
        assert!(a < a_nul && a_nul < b);
        assert_ne!(a, a_nul);
        assert_eq!(a.cmp(&b), "a".cmp("b"));
        assert_eq!(a, "a");
        assert_eq!("a", a);
    }

    #[test]
    fn a_const_name_is_built_at_compile_time() {
        const UID: Name = crate::name!("uid-1");
        assert_eq!(UID.as_str(), "uid-1");
        assert_eq!("uid-1".parse::<Name>(), Ok(UID));
    }
}
