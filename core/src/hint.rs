//! Branch hints on stable Rust: a call to a `#[cold]` function marks its
//! path unlikely, so that the compiler lays the likely path out straight
//! (the way `hashbrown` does). Used where the documented driving protocol
//! makes one side the usual one, never to change what the code does.

/// Marks the path that calls it as rarely taken.
#[cold]
#[inline]
fn cold() {}

/// `b`, expected to be true.
#[inline(always)]
pub(crate) fn likely(b: bool) -> bool {
    if !b {
        cold();
    }
    b
}
