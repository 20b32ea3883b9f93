//! Object names in file names. A path component holds at most 255 bytes,
//! and an object's name up to 253 (a Kubernetes pod name), before the
//! container, kind or uid a file name adds. An encoded name that fits its
//! share is written whole (readable, and as earlier versions wrote it:
//! their names were at most 63 bytes); a longer one as its first bytes,
//! `~` and a hash of the whole, the same on every run.

/// The hash of a long name: FNV-1a, 64 bits, fixed by its definition (a
/// file name must not change with the Rust release, as std's hashers may).
pub(super) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// `encoded` if it is at most `max` bytes, else its first `max - 17`
/// bytes, `~` and the 16 hex digits of its hash. `encoded` is ASCII
/// without `~` (hex, or path-safe with `~` escaped), so a cut form never
/// equals a whole one.
pub(super) fn fit(encoded: String, max: usize) -> String {
    if encoded.len() <= max {
        return encoded;
    }
    let keep = max.saturating_sub(17);
    let mut cut = keep.min(encoded.len());
    while !encoded.is_char_boundary(cut) {
        cut = cut.saturating_sub(1);
    }
    let hash = fnv1a(encoded.as_bytes());
    format!("{}~{hash:016x}", encoded.get(..cut).unwrap_or_default())
}

/// Whether `part` of a file name is a cut name ([`fit`]): one that cannot
/// be read back.
pub(super) fn is_cut(part: &str) -> bool {
    part.contains('~')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name that fits is kept whole; a longer one becomes exactly `max`
    /// bytes, stable, and different for different names.
    #[test]
    fn long_names_are_cut_with_a_stable_hash() {
        assert_eq!(fit("web-0".into(), 10), "web-0");
        let a = fit("a".repeat(300), 128);
        assert_eq!(a.len(), 128);
        assert!(is_cut(&a) && a.starts_with(&"a".repeat(111)));
        assert_eq!(a, fit("a".repeat(300), 128));
        assert_ne!(a, fit(format!("{}b", "a".repeat(299)), 128));
        // Fixed by definition: a file written by one build is found by the next.
        assert_eq!(fnv1a(b"web"), 0x5ea0_e119_4872_1ef1);
    }
}
