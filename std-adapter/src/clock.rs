//! Clocks: wall time for deletion timestamps, monotonic time for deadlines.
//!
//! grace-core never reads a clock; the runtime asks a [`Clock`] for
//! [`Now`] and hands it in. Two clocks, because they answer different
//! questions: the wall clock says *when* (it is what `deletionTimestamp`
//! records, R24, R48) and may jump; the monotonic clock says *how long* (every
//! pre-stop budget and SIGKILL deadline is measured on it) and never does.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use grace_core::{Duration, Instant, Now, WallTime};
use rustix::time::{ClockId, clock_gettime};

/// A source of the current time.
///
/// Contract: the clock contract of [`grace_core::Now`], which the embassy
/// driver's `Firmware::now` keeps too; on a host it reads:
/// - `now().wall` MUST be the current wall-clock time in unix milliseconds.
///   It is used only for deletion timestamps and MAY jump (NTP, an operator).
/// - `now().mono` MUST never decrease between two calls on the same clock,
///   and MUST advance at the rate of real time (or of the simulation).
/// - Monotonic instants from clocks with the same [`epoch`](Clock::epoch)
///   MUST be comparable: a deadline persisted by one process can be
///   honoured by the next (D6). Clocks whose epochs differ (a reboot, a
///   different machine) share no monotonic origin; the runtime then
///   recovers deadlines through the wall clock.
/// - `now` MUST be cheap and MUST NOT block.
pub trait Clock: Send + Sync {
    /// The current time, both clocks read together.
    fn now(&self) -> Now;

    /// Identifies the origin of `now().mono`; equal epochs mean comparable
    /// instants.
    fn epoch(&self) -> String;
}

/// A shared clock: the runtime and whoever moves a [`ManualClock`] (a test,
/// a simulation, the runtime opened again after a restart on the same
/// "boot") read the same one.
impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now(&self) -> Now {
        (**self).now()
    }

    fn epoch(&self) -> String {
        (**self).epoch()
    }
}

/// The machine's clocks: `CLOCK_REALTIME` and `CLOCK_BOOTTIME`.
///
/// `CLOCK_BOOTTIME` is monotonic, keeps counting while the machine is
/// suspended (a grace period spent asleep is still spent), and is shared
/// by every process of one boot, so a restarted runtime reads deadlines its
/// predecessor wrote on the same scale. The epoch is the kernel's boot id.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl SystemClock {
    /// The machine's clocks.
    pub fn new() -> Self {
        SystemClock
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Now {
        let wall = match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(since) => i64::try_from(since.as_millis()).unwrap_or(i64::MAX),
            // Before 1970: a negative unix time, not an error.
            Err(e) => i64::try_from(e.duration().as_millis()).map_or(i64::MIN, i64::saturating_neg),
        };
        let boot = clock_gettime(ClockId::Boottime);
        let secs = u64::try_from(boot.tv_sec).unwrap_or(0);
        let millis = u64::try_from(boot.tv_nsec / 1_000_000).unwrap_or(0);
        let mono = secs.saturating_mul(1000).saturating_add(millis);
        Now::new(WallTime::from_unix_millis(wall), Instant::from_millis(mono))
    }

    fn epoch(&self) -> String {
        match std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
            Ok(id) => format!("boot:{}", id.trim()),
            // Without a boot id no two processes can be assumed to share an
            // origin: a unique epoch makes the runtime use the wall clock.
            Err(_) => format!("process:{}", std::process::id()),
        }
    }
}

/// A clock that moves only when told to: for tests and simulation.
///
/// Both clocks move together by [`advance`](ManualClock::advance); the wall
/// clock alone can be set with [`set_wall`](ManualClock::set_wall) to test a
/// jump.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<Now>,
    epoch: String,
}

impl ManualClock {
    /// A clock reading `start`, with its own epoch name.
    pub fn new(start: Now, epoch: impl Into<String>) -> Self {
        ManualClock {
            now: Mutex::new(start),
            epoch: epoch.into(),
        }
    }

    /// A clock at unix time `ms` on both scales, epoch `"manual"`.
    pub fn at_unix_millis(ms: i64) -> Self {
        Self::new(Now::from_unix_millis(ms), "manual")
    }

    /// Moves both clocks forward by `by` (saturating).
    pub fn advance(&self, by: Duration) {
        let mut now = self.lock();
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        *now = Now::new(
            WallTime::from_unix_millis(now.wall.as_unix_millis().saturating_add(ms)),
            now.mono.saturating_add(by),
        );
    }

    /// Moves the monotonic clock to `to` if that is later (it never goes
    /// back), and the wall clock by the same amount.
    pub fn advance_to(&self, to: Instant) {
        let by = to.saturating_duration_since(self.now().mono);
        self.advance(by);
    }

    /// Sets the wall clock alone (a jump); the monotonic clock is untouched.
    pub fn set_wall(&self, wall: WallTime) {
        let mut now = self.lock();
        *now = Now::new(wall, now.mono);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Now> {
        // A panic while holding this lock cannot leave a torn `Now` (it is
        // Copy and assigned whole), so a poisoned lock is still good.
        self.now.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Now {
        *self.lock()
    }

    fn epoch(&self) -> String {
        self.epoch.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_manual_clock_moves_for_every_holder() {
        let clock = std::sync::Arc::new(ManualClock::at_unix_millis(5_000));
        let held: Box<dyn Clock> = Box::new(std::sync::Arc::clone(&clock));
        clock.advance(Duration::from_millis(1_500));
        assert_eq!(held.now(), clock.now());
        assert_eq!(held.now().wall.as_unix_millis(), 6_500);
        assert_eq!(held.epoch(), "manual");
    }

    #[test]
    fn system_clock_monotonic_never_decreases_and_wall_is_now() {
        let clock = SystemClock::new();
        let mut last = clock.now();
        for _ in 0..1000 {
            let now = clock.now();
            assert!(now.mono >= last.mono);
            last = now;
        }
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_millis() as i64;
        assert!((last.wall.as_unix_millis() - wall).abs() < 1_000);
    }

    #[test]
    fn system_clock_monotonic_advances_with_real_time() {
        let clock = SystemClock::new();
        let before = clock.now().mono;
        std::thread::sleep(std::time::Duration::from_millis(30));
        let elapsed = clock.now().mono.saturating_duration_since(before);
        assert!(elapsed.as_millis() >= 29, "{elapsed:?}");
        assert!(elapsed.as_millis() < 5_000, "{elapsed:?}");
    }

    #[test]
    fn system_clock_epoch_is_shared_by_processes_of_one_boot() {
        let ours = SystemClock::new().epoch();
        let again = SystemClock::new().epoch();
        assert_eq!(ours, again);
        if std::path::Path::new("/proc/sys/kernel/random/boot_id").exists() {
            assert!(ours.starts_with("boot:"), "{ours}");
        }
    }

    #[test]
    fn manual_clock_moves_only_when_told_and_never_back() {
        let clock = ManualClock::at_unix_millis(1_000_000);
        assert_eq!(clock.now(), clock.now());
        clock.advance(Duration::from_millis(1_500));
        assert_eq!(clock.now().wall.as_unix_millis(), 1_001_500);
        assert_eq!(clock.now().mono.as_millis(), 1_001_500);
        clock.advance_to(Instant::from_millis(10));
        assert_eq!(clock.now().mono.as_millis(), 1_001_500, "never back");
        clock.set_wall(WallTime::from_unix_millis(5));
        assert_eq!(clock.now().wall.as_unix_millis(), 5);
        assert_eq!(
            clock.now().mono.as_millis(),
            1_001_500,
            "a wall jump leaves mono"
        );
        clock.advance(Duration::MAX);
        assert_eq!(clock.now().mono, Instant::MAX, "saturates");
    }
}
