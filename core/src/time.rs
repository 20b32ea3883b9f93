//! Time as plain values: monotonic instants and durations in milliseconds for
//! the agent's deadlines, unix time for the API's deletion timestamps.
//!
//! All arithmetic is checked or saturating; nothing here can panic or wrap
//! (D2). The core never reads a clock: the caller passes [`Now`] in.

use core::fmt;

/// The latest instant RFC 3339 can write, 9999-12-31T23:59:59Z, in unix
/// seconds. Deletion timestamps saturate here ([D2]).
///
/// [D2]: crate::rules#d2
pub const MAX_TIMESTAMP_SECONDS: i64 = 253_402_300_799;

/// A point on the agent's monotonic clock, in milliseconds since an epoch of
/// the caller's choosing (boot, process start, the unix epoch in a
/// simulation). Deadlines ([`poll_timeout`](crate::Lifecycle::poll_timeout))
/// are instants on this clock.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    all(feature = "arbitrary", not(target_os = "none")),
    derive(arbitrary::Arbitrary)
)]
pub struct Instant(u64);

impl Instant {
    /// The epoch of the caller's clock.
    pub const ZERO: Instant = Instant(0);
    /// The end of time: every saturating addition stops here.
    pub const MAX: Instant = Instant(u64::MAX);

    /// An instant `ms` milliseconds after the epoch.
    #[inline]
    pub const fn from_millis(ms: u64) -> Self {
        Instant(ms)
    }

    /// Milliseconds since the epoch.
    #[inline]
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// `self + d`, or `None` past the end of time.
    #[inline]
    pub const fn checked_add(self, d: Duration) -> Option<Instant> {
        match self.0.checked_add(d.0) {
            Some(ms) => Some(Instant(ms)),
            None => None,
        }
    }

    /// `self + d`, stopping at [`Instant::MAX`].
    #[inline]
    pub const fn saturating_add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }

    /// Time elapsed from `earlier` to `self`, zero if `earlier` is later.
    #[inline]
    pub const fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

/// A span of time in milliseconds.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    all(feature = "arbitrary", not(target_os = "none")),
    derive(arbitrary::Arbitrary)
)]
pub struct Duration(u64);

impl Duration {
    /// No time at all.
    pub const ZERO: Duration = Duration(0);
    /// The longest span; saturating arithmetic stops here.
    pub const MAX: Duration = Duration(u64::MAX);

    /// A span of `ms` milliseconds.
    #[inline]
    pub const fn from_millis(ms: u64) -> Self {
        Duration(ms)
    }

    /// A span of whole seconds given as a grace value: negative counts as
    /// zero, and a span too long to hold in milliseconds saturates.
    #[inline]
    pub const fn from_grace_seconds(seconds: i64) -> Self {
        if seconds <= 0 {
            Duration(0)
        } else {
            // `seconds` is positive here, so the cast is lossless.
            Duration((seconds as u64).saturating_mul(1000))
        }
    }

    /// The span in milliseconds.
    #[inline]
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// Whole seconds in the span, the fraction cut off (kubelet's
    /// `int64(elapsed.Seconds())`, [R61]).
    ///
    /// [R61]: crate::rules#r61
    #[inline]
    pub const fn whole_seconds(self) -> u64 {
        div_1000(self.0)
    }

    /// `self + other`, stopping at [`Duration::MAX`].
    #[inline]
    pub const fn saturating_add(self, other: Duration) -> Duration {
        Duration(self.0.saturating_add(other.0))
    }
}

/// Seconds, with the milliseconds as a fraction when there are any, or
/// milliseconds alone below a second: `0s`, `250ms`, `5s`, `1.5s`,
/// `2.025s`.
///
/// ```
/// use grace_core::Duration;
///
/// assert_eq!(Duration::from_millis(1_500).to_string(), "1.5s");
/// assert_eq!(Duration::from_millis(250).to_string(), "250ms");
/// assert_eq!(Duration::from_secs(30).to_string(), "30s");
/// ```
impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = div_1000(self.0);
        // `secs * 1000 <= self.0`: neither wraps.
        let millis = self.0.wrapping_sub(secs.wrapping_mul(1000));
        if millis == 0 {
            return write!(f, "{secs}s");
        }
        if secs == 0 {
            return write!(f, "{millis}ms");
        }
        // The fraction without its trailing zeros.
        let (mut fraction, mut digits) = (millis, 3usize);
        while fraction.checked_rem(10) == Some(0) {
            fraction = fraction.checked_div(10).unwrap_or(0);
            digits = digits.saturating_sub(1);
        }
        write!(f, "{secs}.{fraction:0digits$}s")
    }
}

/// A deletion timestamp as the API stores it: whole unix seconds (R48).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    all(feature = "arbitrary", not(target_os = "none")),
    derive(arbitrary::Arbitrary)
)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The timestamp `seconds` after 1970-01-01T00:00:00Z.
    #[inline]
    pub const fn from_unix_seconds(seconds: i64) -> Self {
        Timestamp(seconds)
    }

    /// Seconds since 1970-01-01T00:00:00Z.
    #[inline]
    pub const fn as_unix_seconds(self) -> i64 {
        self.0
    }

    /// The same instant in milliseconds, widened so that it cannot overflow.
    #[inline]
    pub(crate) const fn as_millis_wide(self) -> i128 {
        (self.0 as i128).saturating_mul(1000)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The API server's wall clock, in unix milliseconds. Sub-second precision
/// matters for R16 (a timestamp equal to the current second but before the
/// current instant is "in the past") and disappears when stored (R48).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    all(feature = "arbitrary", not(target_os = "none")),
    derive(arbitrary::Arbitrary)
)]
pub struct WallTime(i64);

impl WallTime {
    /// The wall-clock instant `ms` milliseconds after the unix epoch.
    #[inline]
    pub const fn from_unix_millis(ms: i64) -> Self {
        WallTime(ms)
    }

    /// Milliseconds since the unix epoch.
    #[inline]
    pub const fn as_unix_millis(self) -> i64 {
        self.0
    }

    /// The whole second this instant falls in, as the API would store it
    /// (floor, [R48]).
    ///
    /// [R48]: crate::rules#r48
    #[inline]
    pub const fn floor_to_timestamp(self) -> Timestamp {
        // Floor division by 1000 as `div_euclid(1000)`, through `div_1000`
        // on 32-bit targets: for a negative `x`, `!x` is `-x - 1 >= 0` and
        // the floor of `x / 1000` is `!(!x / 1000)`.
        let seconds = if cfg!(target_pointer_width = "64") {
            self.0.div_euclid(1000)
        } else if self.0 >= 0 {
            div_1000(self.0 as u64) as i64
        } else {
            !(div_1000((!self.0) as u64) as i64)
        };
        Timestamp(seconds)
    }

    #[inline]
    pub(crate) const fn as_millis_wide(self) -> i128 {
        self.0 as i128
    }
}

/// The current time on both clocks, passed to every `handle_*` method.
///
/// `wall` stamps the record (deletion timestamps are wall-clock unix time);
/// `mono` times the agent's deadlines, which must not jump with the wall
/// clock. In a simulation both can come from one number
/// ([`Now::from_unix_millis`]).
///
/// # The clock contract
///
/// Whatever reads the clocks for the machine — grace-std's `Clock`, the
/// embassy driver's `driver::Firmware::now` (feature `embassy`), your
/// own adapter — gives a `Now` that keeps this contract:
///
/// - Both clocks are read together, once per input: every decision of one
///   input sees one instant.
/// - `mono` never decreases between two readings of the same clock, and
///   advances at the rate of real time (or of the simulation). It counts
///   whole milliseconds, rounded down: an event read at `t` happened in
///   `[t, t + 1)`, so an event that must not be early is reported at
///   `t + 1` (as the stop signal is, R62).
/// - Instants are comparable only on one clock's scale: a deadline persisted
///   under one epoch (one boot, one process of a machine that has no boot
///   id) means nothing under another; a store restoring under a new epoch
///   does not carry it over (D6).
/// - `wall` is unix time in milliseconds and may jump (NTP, an operator):
///   it is used only for deletion timestamps, never for a deadline. A
///   device without a real-time clock may give the time since boot on
///   both clocks; its deletion timestamps then count from boot.
/// - Reading the clock is cheap and does not block.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    all(feature = "arbitrary", not(target_os = "none")),
    derive(arbitrary::Arbitrary)
)]
pub struct Now {
    /// Wall-clock time, for the API level.
    pub wall: WallTime,
    /// Monotonic time, for the agent level.
    pub mono: Instant,
}

impl Now {
    /// Both clocks at once.
    #[inline]
    pub const fn new(wall: WallTime, mono: Instant) -> Self {
        Now { wall, mono }
    }

    /// A simulation's single clock: unix milliseconds on both the wall and
    /// the monotonic clock (a negative time reads as the monotonic epoch).
    #[inline]
    pub const fn from_unix_millis(ms: i64) -> Self {
        let mono = if ms < 0 { 0 } else { ms as u64 };
        Now {
            wall: WallTime(ms),
            mono: Instant(mono),
        }
    }
}

impl Timestamp {
    /// `self + seconds`, clamped as [`saturate_timestamp`] clamps it with
    /// `self` as the floor: never past [`MAX_TIMESTAMP_SECONDS`] unless
    /// `self` already is, never below `i64::MIN` (D2). In `i64` alone: the
    /// saturating sum is clamped to `i64`'s range, which holds the ceiling.
    #[inline]
    pub(crate) const fn saturating_add_seconds(self, seconds: i64) -> Timestamp {
        let ceiling = if self.0 > MAX_TIMESTAMP_SECONDS {
            self.0
        } else {
            MAX_TIMESTAMP_SECONDS
        };
        let sum = self.0.saturating_add(seconds);
        Timestamp(if sum > ceiling { ceiling } else { sum })
    }
}

/// `seconds_wide` clamped into the stored timestamp range: never past
/// [`MAX_TIMESTAMP_SECONDS`] unless `floor` (the current second) is already
/// later, never below `i64::MIN` (D2).
#[inline]
pub(crate) fn saturate_timestamp(seconds_wide: i128, floor: Timestamp) -> Timestamp {
    let ceiling = if floor.0 > MAX_TIMESTAMP_SECONDS {
        floor.0
    } else {
        MAX_TIMESTAMP_SECONDS
    };
    if seconds_wide > ceiling as i128 {
        Timestamp(ceiling)
    } else if seconds_wide < i64::MIN as i128 {
        Timestamp(i64::MIN)
    } else {
        // In range by the two checks above.
        Timestamp(seconds_wide as i64)
    }
}

/// `x / 1000`. On 32-bit targets (Cortex-M) a 64-bit division is a call
/// into about 1 KiB of compiler builtins, most of a small firmware's
/// arithmetic; the multiply-and-shift that compilers emit for 64-bit targets
/// does it with four 32-bit multiplications. On 64-bit targets the compiler
/// does that by itself.
#[inline]
const fn div_1000(x: u64) -> u64 {
    if cfg!(target_pointer_width = "64") {
        x / 1000
    } else {
        div_1000_by_multiply(x)
    }
}

/// `x / 1000` for every `u64`, exactly: the high 64 bits of
/// `(x >> 3) * ceil(2^68 / 125)`, shifted right by 4.
#[inline]
const fn div_1000_by_multiply(x: u64) -> u64 {
    const MAGIC: u64 = 0x20C4_9BA5_E353_F7CF;
    mul_high(x >> 3, MAGIC) >> 4
}

/// The high 64 bits of the 128-bit product `a * b`, from 32-bit halves.
/// Nothing wraps: each partial product is below 2^64 - 2^33 + 2, and the
/// middle sum below 2^64.
#[inline]
const fn mul_high(a: u64, b: u64) -> u64 {
    const LOW: u64 = 0xFFFF_FFFF;
    let (a_lo, a_hi) = (a & LOW, a >> 32);
    let (b_lo, b_hi) = (b & LOW, b >> 32);
    let lo_lo = a_lo.wrapping_mul(b_lo);
    let hi_lo = a_hi.wrapping_mul(b_lo);
    let lo_hi = a_lo.wrapping_mul(b_hi);
    let hi_hi = a_hi.wrapping_mul(b_hi);
    let middle = (lo_lo >> 32).wrapping_add(hi_lo & LOW).wrapping_add(lo_hi);
    hi_hi.wrapping_add(hi_lo >> 32).wrapping_add(middle >> 32)
}

impl Instant {
    /// Time elapsed from `earlier` to `self`, or `None` if `earlier` is
    /// later.
    #[inline]
    pub const fn checked_duration_since(self, earlier: Instant) -> Option<Duration> {
        match self.0.checked_sub(earlier.0) {
            Some(ms) => Some(Duration(ms)),
            None => None,
        }
    }

    /// `self - d`, or `None` before the epoch.
    #[inline]
    pub const fn checked_sub(self, d: Duration) -> Option<Instant> {
        match self.0.checked_sub(d.0) {
            Some(ms) => Some(Instant(ms)),
            None => None,
        }
    }

    /// `self - d`, stopping at [`Instant::ZERO`].
    #[inline]
    pub const fn saturating_sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(d.0))
    }
}

impl Duration {
    /// A span of `seconds` whole seconds, saturating at [`Duration::MAX`].
    #[inline]
    pub const fn from_secs(seconds: u64) -> Self {
        Duration(seconds.saturating_mul(1000))
    }

    /// `self - other`, stopping at [`Duration::ZERO`].
    #[inline]
    pub const fn saturating_sub(self, other: Duration) -> Duration {
        Duration(self.0.saturating_sub(other.0))
    }

    /// `self + other`, or `None` past [`Duration::MAX`].
    #[inline]
    pub const fn checked_add(self, other: Duration) -> Option<Duration> {
        match self.0.checked_add(other.0) {
            Some(ms) => Some(Duration(ms)),
            None => None,
        }
    }
}

/// Saturating, like [`Instant::saturating_add`]: never panics, never wraps
/// (D2); past the end of time it is [`Instant::MAX`].
impl core::ops::Add<Duration> for Instant {
    type Output = Instant;
    #[inline]
    fn add(self, d: Duration) -> Instant {
        self.saturating_add(d)
    }
}

/// Saturating, like [`Instant::saturating_add`].
impl core::ops::AddAssign<Duration> for Instant {
    #[inline]
    fn add_assign(&mut self, d: Duration) {
        *self = self.saturating_add(d);
    }
}

/// Saturating, like [`Instant::saturating_sub`]: before the epoch it is
/// [`Instant::ZERO`].
impl core::ops::Sub<Duration> for Instant {
    type Output = Instant;
    #[inline]
    fn sub(self, d: Duration) -> Instant {
        self.saturating_sub(d)
    }
}

/// The time from `earlier` to `self`, saturating like
/// [`Instant::saturating_duration_since`]: zero if `earlier` is later.
impl core::ops::Sub<Instant> for Instant {
    type Output = Duration;
    #[inline]
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

/// Saturating, like [`Duration::saturating_add`].
impl core::ops::Add for Duration {
    type Output = Duration;
    #[inline]
    fn add(self, other: Duration) -> Duration {
        self.saturating_add(other)
    }
}

/// Saturating, like [`Duration::saturating_sub`].
impl core::ops::Sub for Duration {
    type Output = Duration;
    #[inline]
    fn sub(self, other: Duration) -> Duration {
        self.saturating_sub(other)
    }
}

/// Whole milliseconds, the fraction cut off; a span longer than
/// [`Duration::MAX`] saturates.
impl From<core::time::Duration> for Duration {
    fn from(d: core::time::Duration) -> Self {
        Duration(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

impl From<Duration> for core::time::Duration {
    fn from(d: Duration) -> Self {
        core::time::Duration::from_millis(d.0)
    }
}

impl Now {
    /// A simulation's single clock at a monotonic instant: the wall clock
    /// reads the same milliseconds as unix time (saturating at `i64::MAX`).
    /// The counterpart of [`Now::from_unix_millis`] for the `u64` of
    /// [`Instant::as_millis`].
    ///
    /// ```
    /// use grace_core::{Duration, Instant, Now};
    ///
    /// let deadline = Instant::from_millis(5_000) + Duration::from_secs(2);
    /// let now = Now::at(deadline);
    /// assert_eq!(now.mono, deadline);
    /// assert_eq!(now, Now::from_unix_millis(7_000));
    /// ```
    #[inline]
    pub const fn at(mono: Instant) -> Self {
        let wall = if mono.0 > i64::MAX as u64 {
            i64::MAX
        } else {
            // At most i64::MAX here: lossless.
            mono.0 as i64
        };
        Now {
            wall: WallTime(wall),
            mono,
        }
    }
}

#[cfg(feature = "embassy-time")]
mod embassy {
    //! Conversions through milliseconds keep the core independent of the
    //! application's `tick-hz-*` choice.
    use super::{Duration, Instant};

    #[cfg_attr(docsrs, doc(cfg(feature = "embassy-time")))]
    impl From<embassy_time::Instant> for Instant {
        fn from(i: embassy_time::Instant) -> Self {
            Instant::from_millis(i.as_millis())
        }
    }

    #[cfg_attr(docsrs, doc(cfg(feature = "embassy-time")))]
    impl From<Instant> for embassy_time::Instant {
        fn from(i: Instant) -> Self {
            embassy_time::Instant::from_millis(i.as_millis())
        }
    }

    #[cfg_attr(docsrs, doc(cfg(feature = "embassy-time")))]
    impl From<embassy_time::Duration> for Duration {
        fn from(d: embassy_time::Duration) -> Self {
            Duration::from_millis(d.as_millis())
        }
    }

    #[cfg_attr(docsrs, doc(cfg(feature = "embassy-time")))]
    impl From<Duration> for embassy_time::Duration {
        fn from(d: Duration) -> Self {
            embassy_time::Duration::from_millis(d.as_millis())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d2_instant_addition_saturates_at_the_end_of_time() {
        let end = Instant::MAX;
        assert_eq!(end.checked_add(Duration::from_millis(1)), None);
        assert_eq!(end.saturating_add(Duration::MAX), Instant::MAX);
    }

    #[test]
    fn d2_grace_seconds_saturate_in_milliseconds() {
        assert_eq!(Duration::from_grace_seconds(i64::MAX), Duration::MAX);
        assert_eq!(Duration::from_grace_seconds(i64::MIN), Duration::ZERO);
        assert_eq!(Duration::from_grace_seconds(30).as_millis(), 30_000);
    }

    #[test]
    fn r48_wall_time_floors_to_whole_seconds() {
        assert_eq!(
            WallTime::from_unix_millis(1_999).floor_to_timestamp(),
            Timestamp::from_unix_seconds(1)
        );
        assert_eq!(
            WallTime::from_unix_millis(-1).floor_to_timestamp(),
            Timestamp::from_unix_seconds(-1)
        );
    }

    #[test]
    fn r61_elapsed_time_truncates_to_whole_seconds() {
        assert_eq!(Duration::from_millis(9_500).whole_seconds(), 9);
    }

    #[test]
    fn d2_timestamps_saturate_at_rfc3339_max() {
        let now = Timestamp::from_unix_seconds(1000);
        assert_eq!(
            saturate_timestamp(i128::MAX, now).as_unix_seconds(),
            MAX_TIMESTAMP_SECONDS
        );
        assert_eq!(
            saturate_timestamp(i128::MIN, now).as_unix_seconds(),
            i64::MIN
        );
        let late = Timestamp::from_unix_seconds(i64::MAX);
        assert_eq!(saturate_timestamp(i128::MAX, late), late);
    }

    #[test]
    fn d2_adding_seconds_saturates_like_the_wide_sum() {
        let edges = [
            i64::MIN,
            i64::MIN + 1,
            -1,
            0,
            1,
            1000,
            MAX_TIMESTAMP_SECONDS - 1,
            MAX_TIMESTAMP_SECONDS,
            MAX_TIMESTAMP_SECONDS + 1,
            i64::MAX - 1,
            i64::MAX,
        ];
        for base in edges {
            for seconds in edges {
                let base = Timestamp::from_unix_seconds(base);
                let wide = i128::from(base.as_unix_seconds()) + i128::from(seconds);
                assert_eq!(
                    base.saturating_add_seconds(seconds),
                    saturate_timestamp(wide, base),
                    "{base:?} + {seconds}"
                );
            }
        }
    }

    #[test]
    fn division_by_1000_by_multiply_is_exact() {
        let mut edges = [0, 1, 999, 1000, 1001, 7999, 8000, u64::MAX, u64::MAX - 999]
            .into_iter()
            .chain((0..64).map(|b| 1u64 << b))
            .chain((0..64).map(|b| (1u64 << b).wrapping_sub(1)))
            .collect::<heapless::Vec<u64, 160>>();
        // A deterministic spread of values (xorshift).
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            assert_eq!(div_1000_by_multiply(x), x / 1000, "{x}");
            assert_eq!(div_1000_by_multiply(x >> 20), (x >> 20) / 1000);
        }
        for x in edges.iter_mut() {
            assert_eq!(div_1000_by_multiply(*x), *x / 1000, "{x}");
        }
    }

    #[test]
    fn r48_floor_division_through_the_complement_matches_div_euclid() {
        // The 32-bit targets' form of `floor_to_timestamp`.
        let floor = |x: i64| {
            if x >= 0 {
                div_1000_by_multiply(x as u64) as i64
            } else {
                !(div_1000_by_multiply((!x) as u64) as i64)
            }
        };
        let edges = [0, 1, 999, 1000, -1, -999, -1000, -1001, i64::MIN, i64::MAX];
        for ms in edges.into_iter().chain((-5_000..5_000).map(|x| x * 7)) {
            assert_eq!(floor(ms), ms.div_euclid(1000), "{ms}");
            let timestamp = WallTime::from_unix_millis(ms).floor_to_timestamp();
            assert_eq!(timestamp.as_unix_seconds(), ms.div_euclid(1000), "{ms}");
        }
    }

    #[test]
    fn d2_operators_saturate_and_convert_with_core_durations() {
        let t = Instant::from_millis(1_000);
        assert_eq!(t + Duration::from_secs(2), Instant::from_millis(3_000));
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
        assert_eq!(t - Duration::from_secs(5), Instant::ZERO);
        assert_eq!(
            Instant::from_millis(3_500) - t,
            Duration::from_millis(2_500)
        );
        assert_eq!(t - Instant::from_millis(3_500), Duration::ZERO);
        assert_eq!(Duration::from_secs(u64::MAX), Duration::MAX);
        assert_eq!(Duration::MAX + Duration::from_millis(1), Duration::MAX);
        let std = core::time::Duration::from_micros(2_500_999);
        assert_eq!(Duration::from(std), Duration::from_millis(2_500));
        assert_eq!(
            core::time::Duration::from(Duration::from_secs(3)),
            core::time::Duration::from_secs(3)
        );
        assert_eq!(Duration::from(core::time::Duration::MAX), Duration::MAX);
        assert_eq!(Now::at(Instant::MAX).wall.as_unix_millis(), i64::MAX);
    }

    #[cfg(feature = "embassy-time")]
    #[test]
    fn embassy_conversions_round_trip_through_milliseconds() {
        let i = Instant::from_millis(12_345);
        let e: embassy_time::Instant = i.into();
        assert_eq!(Instant::from(e), i);
        let d = Duration::from_millis(2_000);
        let ed: embassy_time::Duration = d.into();
        assert_eq!(Duration::from(ed), d);
    }
}
