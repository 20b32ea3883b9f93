//! CrashLoopBackOff: how long an exited container waits before it starts
//! again.

use crate::time::{Duration, Instant};

/// The first wait after an exit: 10 s ([R95]).
///
/// [R95]: crate::rules#r95
pub const BACK_OFF_INITIAL: Duration = Duration::from_secs(10);
/// The longest wait: 300 s; each restart doubles the wait up to it ([R95]).
///
/// [R95]: crate::rules#r95
pub const BACK_OFF_MAX: Duration = Duration::from_secs(300);
/// An exit more than this long (600 s, twice [`BACK_OFF_MAX`]) after the
/// last restart starts the waits again from [`BACK_OFF_INITIAL`] ([R96]).
///
/// [R96]: crate::rules#r96
pub const BACK_OFF_RESET: Duration = Duration::from_secs(600);
/// The reason a container shows while it waits (`state.waiting.reason`).
pub const CRASH_LOOP_BACK_OFF: &str = "CrashLoopBackOff";

/// The CrashLoopBackOff of one container: the waits 10, 20, 40, 80, 160,
/// 300, 300 … s between an exit and the next start, counted from the exit
/// ([R95]), back to 10 s after an exit more than 600 s after the last
/// restart ([R96]).
///
/// grace's one difference ([D9]): the kubelet starts a container again at
/// once after its first exit (it has no back-off for it yet, [R97]) and
/// waits 10 s only from the second; grace waits 10 s after the first exit
/// too.
///
/// Sixteen bytes, `Copy`, no clock: the caller passes the instants. On an
/// exit, [`restart_at`](BackOff::restart_at) says when the container may
/// start again; when it is started, [`restarted`](BackOff::restarted)
/// records it.
///
/// ```
/// use grace_core::{BackOff, Duration, Instant};
///
/// let s = |n: u64| Instant::from_millis(n * 1_000);
/// let mut back_off = BackOff::new();
/// // It exits at 5 s: it may start again 10 s later.
/// assert_eq!(back_off.restart_at(s(5)), s(15));
/// back_off.restarted(s(5), s(15));
/// // It exits again at 17 s: now it waits 20 s.
/// assert_eq!(back_off.delay(s(17)), Duration::from_secs(20));
/// assert_eq!(back_off.restart_at(s(17)), s(37));
/// ```
///
/// [R95]: crate::rules#r95
/// [R96]: crate::rules#r96
/// [R97]: crate::rules#r97
/// [D9]: crate::rules#d9
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    all(feature = "arbitrary", not(target_os = "none")),
    derive(arbitrary::Arbitrary)
)]
pub struct BackOff {
    /// When the container was last started again; meaningless while
    /// `next_secs` is 0.
    last_restart: Instant,
    /// The wait after the next exit, in seconds (at most 300, so `u16`);
    /// 0 until the first restart.
    next_secs: u16,
}

impl BackOff {
    /// A container that has not been restarted yet.
    pub const fn new() -> Self {
        BackOff {
            last_restart: Instant::ZERO,
            next_secs: 0,
        }
    }

    /// How long a container that exited at `finished` waits before it
    /// starts again: 10 s before its first restart, or after an exit more
    /// than 600 s after the last restart; else the wait doubled at each
    /// restart, at most 300 s. It is the duration of the kubelet's message
    /// "back-off 20s restarting failed container".
    pub const fn delay(&self, finished: Instant) -> Duration {
        if self.next_secs == 0 || self.is_reset_by(finished) {
            return BACK_OFF_INITIAL;
        }
        // A deserialised or fuzzed value may pass the cap; the cap holds.
        let max = BACK_OFF_MAX.whole_seconds();
        let next = self.next_secs as u64;
        Duration::from_secs(if next < max { next } else { max })
    }

    /// The instant from which a container that exited at `finished` may
    /// start again: `finished` plus [`delay`](BackOff::delay) (saturating
    /// at the end of time).
    pub const fn restart_at(&self, finished: Instant) -> Instant {
        finished.saturating_add(self.delay(finished))
    }

    /// Records that the container, which had exited at `finished`, was
    /// started again at `at`: the next exit waits twice this one's wait, at
    /// most 300 s, unless it comes more than 600 s after `at`.
    pub fn restarted(&mut self, finished: Instant, at: Instant) {
        let waited = self.delay(finished).whole_seconds();
        let doubled = waited.saturating_mul(2);
        let max = BACK_OFF_MAX.whole_seconds();
        let next = if doubled < max { doubled } else { max };
        // At most 300: the conversion cannot fail; the fallback is the cap.
        self.next_secs = u16::try_from(next).unwrap_or(300);
        self.last_restart = at;
    }

    /// The container ran long enough (or is started anew): the next exit
    /// waits 10 s again.
    pub fn reset(&mut self) {
        *self = BackOff::new();
    }

    /// Whether an exit at `finished` came more than [`BACK_OFF_RESET`]
    /// after the last restart (strictly more, [R96]).
    ///
    /// [R96]: crate::rules#r96
    const fn is_reset_by(&self, finished: Instant) -> bool {
        finished
            .saturating_duration_since(self.last_restart)
            .as_millis()
            > BACK_OFF_RESET.as_millis()
    }
}
