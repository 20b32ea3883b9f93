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
        self.0 / 1000
    }

    /// `self + other`, stopping at [`Duration::MAX`].
    #[inline]
    pub const fn saturating_add(self, other: Duration) -> Duration {
        Duration(self.0.saturating_add(other.0))
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
        Timestamp(self.0.div_euclid(1000))
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
