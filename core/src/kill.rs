//! The kill sequence of each container (kubelet `killContainer`, R56–R72):
//! pre-stop within the budget, the sidecar ordering wait, the stop signal,
//! SIGKILL when the budget is spent but never sooner than 2 s after it, and
//! shortening at once (D5): never later than before, no hook run again.

use crate::time::{Duration, Instant};

/// The least time between the stop signal and SIGKILL ([R62],
/// `minimumGracePeriodInSeconds`).
///
/// [R62]: crate::rules#r62
pub const MIN_STOP_SECONDS: i64 = 2;

/// A container's index, as every input naming a container takes it: an
/// [`Action`](crate::Action)'s one-byte `container`, a `usize` position in
/// [`Lifecycle::containers`](crate::Lifecycle::containers), or an integer
/// literal (a negative one names no container).
///
/// ```
/// use grace_core::ContainerIndex;
///
/// let from_action: u8 = 1;
/// assert_eq!(ContainerIndex::from(from_action), ContainerIndex::from(1usize));
/// assert_eq!(ContainerIndex::from(1).get(), 1);
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    all(feature = "arbitrary", not(target_os = "none")),
    derive(arbitrary::Arbitrary)
)]
pub struct ContainerIndex(usize);

impl ContainerIndex {
    /// The index as a `usize` (`usize::MAX` for a negative literal: no
    /// container has it).
    pub const fn get(self) -> usize {
        self.0
    }
}

impl From<u8> for ContainerIndex {
    fn from(i: u8) -> Self {
        ContainerIndex(usize::from(i))
    }
}

impl From<u16> for ContainerIndex {
    fn from(i: u16) -> Self {
        ContainerIndex(usize::from(i))
    }
}

impl From<usize> for ContainerIndex {
    fn from(i: usize) -> Self {
        ContainerIndex(i)
    }
}

/// For integer literals, which are `i32` unless told otherwise.
impl From<i32> for ContainerIndex {
    fn from(i: i32) -> Self {
        ContainerIndex(usize::try_from(i).unwrap_or(usize::MAX))
    }
}

impl From<ContainerIndex> for usize {
    fn from(i: ContainerIndex) -> Self {
        i.0
    }
}

/// What the agent knows of one container before it stops it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    all(feature = "arbitrary", not(target_os = "none")),
    derive(arbitrary::Arbitrary)
)]
pub struct ContainerSpec {
    /// The container has a pre-stop hook.
    pub pre_stop: bool,
    /// A sidecar (restartable init container): stopped after the main
    /// containers, in reverse declaration order ([R69]).
    ///
    /// [R69]: crate::rules#r69
    pub sidecar: bool,
    /// The container is not running (already exited, or the pod finished).
    pub stopped: bool,
}

impl ContainerSpec {
    /// A running main container with no pre-stop hook: the default, and
    /// the start of the other specs (`app().with_pre_stop()`).
    pub const fn app() -> Self {
        ContainerSpec {
            pre_stop: false,
            sidecar: false,
            stopped: false,
        }
    }

    /// A running sidecar (a restartable init container): stopped after
    /// the main containers, in reverse declaration order (R69).
    pub const fn sidecar() -> Self {
        ContainerSpec {
            sidecar: true,
            ..Self::app()
        }
    }

    /// The same container with a pre-stop hook.
    ///
    /// ```
    /// use grace_core::ContainerSpec;
    ///
    /// let proxy = ContainerSpec::sidecar().with_pre_stop();
    /// assert!(proxy.sidecar && proxy.pre_stop && !proxy.stopped);
    /// ```
    pub const fn with_pre_stop(self) -> Self {
        ContainerSpec {
            pre_stop: true,
            ..self
        }
    }

    /// The same container, already stopped (it exited before the kill).
    pub const fn already_stopped(self) -> Self {
        ContainerSpec {
            stopped: true,
            ..self
        }
    }
}

/// Where one container is in its kill sequence.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Stage {
    /// Running; not asked to stop.
    Running,
    /// The pre-stop hook runs; the agent stops waiting for it at `cutoff` ([R60]).
    ///
    /// [R60]: crate::rules#r60
    PreStop {
        /// When the hook's budget is spent.
        cutoff: Instant,
    },
    /// A sidecar waits for its turn ([R69], [R70]), at most until `cutoff`.
    ///
    /// [R69]: crate::rules#r69
    /// [R70]: crate::rules#r70
    AwaitingTurn {
        /// When the remaining budget is spent.
        cutoff: Instant,
    },
    /// The stop signal was sent; SIGKILL is due at `kill_at` unless the
    /// process exits first.
    Stopping {
        /// When SIGKILL is due.
        kill_at: Instant,
    },
    /// SIGKILL was sent; the exit is awaited.
    Killed,
    /// The process has exited.
    Stopped,
}

/// Outputs owed for one container, as bits so that they stay bounded and
/// come out in the order they happen within an instant.
pub(crate) mod owed {
    pub const PRE_STOP: u8 = 1;
    pub const STOP_SIGNAL: u8 = 1 << 1;
    pub const KILL: u8 = 1 << 2;
    pub const STOPPED: u8 = 1 << 3;
}

/// [`Stage`] without its instant, which [`Container`] keeps beside it so
/// that the whole kill state packs into 32 bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
enum StageKind {
    Running,
    PreStop,
    AwaitingTurn,
    Stopping,
    Killed,
    Stopped,
}

/// A [`Container`] as a persisted lifecycle spells it out: its fields and,
/// as `owed_since`, its place in the lifecycle's order of owed outputs
/// (1 for the oldest; 0 while it owes nothing). The same fields, in the
/// same order, as the container itself was once serialized.
#[cfg(feature = "serde")]
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename = "Container")]
pub(crate) struct PersistedContainer {
    spec: ContainerSpec,
    stage: StageKind,
    at: Instant,
    budget: i64,
    since: Instant,
    owed: u8,
    owed_since: u16,
}

#[cfg(feature = "serde")]
impl PersistedContainer {
    /// `container` at `place` in the order of owed outputs.
    pub(crate) fn new(container: &Container, place: u16) -> Self {
        PersistedContainer {
            spec: container.spec,
            stage: container.stage,
            at: container.at,
            budget: container.budget,
            since: container.since,
            owed: container.owed,
            owed_since: place,
        }
    }

    /// The container, unqueued, and its place.
    pub(crate) fn into_parts(self) -> (Container, u16) {
        let container = Container {
            spec: self.spec,
            stage: self.stage,
            at: self.at,
            budget: self.budget,
            since: self.since,
            owed: self.owed,
            next: 0,
        };
        (container, self.owed_since)
    }
}

/// A stage deadline that has passed (see [`Container::expired`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// The pre-stop hook's budget is spent ([R60]).
    ///
    /// [R60]: crate::rules#r60
    HookCutOff,
    /// A sidecar's wait for its turn is over ([R70]).
    ///
    /// [R70]: crate::rules#r70
    TurnOver,
    /// SIGKILL is due ([R63]).
    ///
    /// [R63]: crate::rules#r63
    KillDue,
}

/// What comes due at a deadline ([`Due`]): what
/// [`Input::Timeout`](crate::Input::Timeout) does then.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DueKind {
    /// The pre-stop hook's budget is spent: the agent stops waiting for it
    /// and sends the stop signal ([R60]).
    ///
    /// [R60]: crate::rules#r60
    HookCutOff,
    /// A sidecar's wait for the main containers is over: its stop signal
    /// goes out ([R70]).
    ///
    /// [R70]: crate::rules#r70
    TurnOver,
    /// The grace is spent: SIGKILL ([R63]).
    ///
    /// [R63]: crate::rules#r63
    Kill,
}

/// A lifecycle's next deadline and what comes due at it
/// ([`Lifecycle::poll_due`](crate::Lifecycle::poll_due)).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Due {
    /// The deadline, on the monotonic clock (what
    /// [`poll_timeout`](crate::Lifecycle::poll_timeout) returns).
    pub at: Instant,
    /// The container whose stage ends then (an [`Action`](crate::Action)'s
    /// one-byte index).
    pub container: u8,
    /// What happens then.
    pub kind: DueKind,
}

/// One container's kill state. Kept small: it is per object, per container.
/// It is persisted as part of its [`Lifecycle`](crate::Lifecycle), which
/// also records its place in the order of owed outputs.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Container {
    pub(crate) spec: ContainerSpec,
    stage: StageKind,
    /// The stage's instant: the hook's cut-off, the end of the sidecar's
    /// wait, or when SIGKILL is due.
    at: Instant,
    /// Whole seconds of budget left, counted from `since` (kubelet's `G`).
    pub(crate) budget: i64,
    /// When the current budget segment started: the kill's start, the hook's
    /// end, a shortening, or (once stopping) the stop signal.
    pub(crate) since: Instant,
    pub(crate) owed: u8,
    /// The entry after this one in the lifecycle's queue of owed outputs
    /// while this one is queued and not last; 0 otherwise.
    pub(crate) next: u8,
}

impl Container {
    /// An unused entry of a lifecycle's container array: all zero bits, so
    /// that a `static` table of empty slots needs no initial image.
    pub(crate) const VACANT: Container = Container::new(ContainerSpec {
        pre_stop: false,
        sidecar: false,
        stopped: false,
    });

    /// A container as the agent finds it.
    pub const fn new(spec: ContainerSpec) -> Self {
        Container {
            spec,
            stage: if spec.stopped {
                StageKind::Stopped
            } else {
                StageKind::Running
            },
            at: Instant::ZERO,
            budget: 0,
            since: Instant::ZERO,
            owed: 0,
            next: 0,
        }
    }

    /// What the agent knows of it.
    pub fn spec(&self) -> ContainerSpec {
        self.spec
    }

    /// Where it is in its kill sequence.
    #[inline]
    pub fn stage(&self) -> Stage {
        match self.stage {
            StageKind::Running => Stage::Running,
            StageKind::PreStop => Stage::PreStop { cutoff: self.at },
            StageKind::AwaitingTurn => Stage::AwaitingTurn { cutoff: self.at },
            StageKind::Stopping => Stage::Stopping { kill_at: self.at },
            StageKind::Killed => Stage::Killed,
            StageKind::Stopped => Stage::Stopped,
        }
    }

    #[inline]
    fn set_stage(&mut self, stage: Stage) {
        let (kind, at) = match stage {
            Stage::Running => (StageKind::Running, self.at),
            Stage::PreStop { cutoff } => (StageKind::PreStop, cutoff),
            Stage::AwaitingTurn { cutoff } => (StageKind::AwaitingTurn, cutoff),
            Stage::Stopping { kill_at } => (StageKind::Stopping, kill_at),
            Stage::Killed => (StageKind::Killed, self.at),
            Stage::Stopped => (StageKind::Stopped, self.at),
        };
        self.stage = kind;
        self.at = at;
    }

    /// When the stop signal was sent, once it has been.
    pub fn stop_signal_sent_at(&self) -> Option<Instant> {
        match self.stage() {
            Stage::Stopping { .. } => Some(self.since),
            Stage::Running
            | Stage::PreStop { .. }
            | Stage::AwaitingTurn { .. }
            | Stage::Killed
            | Stage::Stopped => None,
        }
    }

    /// The whole seconds of budget left, counted from the segment start.
    pub fn budget_seconds(&self) -> i64 {
        self.budget
    }

    /// The next instant at which this container needs attention.
    #[inline]
    pub fn deadline(&self) -> Option<Instant> {
        match self.stage {
            StageKind::PreStop | StageKind::AwaitingTurn | StageKind::Stopping => Some(self.at),
            StageKind::Running | StageKind::Killed | StageKind::Stopped => None,
        }
    }

    /// The current stage's deadline and what comes due at it.
    #[inline]
    pub(crate) fn due_kind(&self) -> Option<(Instant, DueKind)> {
        let kind = match self.stage {
            StageKind::PreStop => DueKind::HookCutOff,
            StageKind::AwaitingTurn => DueKind::TurnOver,
            StageKind::Stopping => DueKind::Kill,
            StageKind::Running | StageKind::Killed | StageKind::Stopped => return None,
        };
        Some((self.at, kind))
    }

    /// The deadline of the current stage, if it has one and it has passed
    /// at `now`.
    #[inline]
    pub(crate) fn expired(&self, now: Instant) -> Option<Expiry> {
        let expiry = match self.stage {
            StageKind::PreStop => Expiry::HookCutOff,
            StageKind::AwaitingTurn => Expiry::TurnOver,
            StageKind::Stopping => Expiry::KillDue,
            StageKind::Running | StageKind::Killed | StageKind::Stopped => return None,
        };
        (self.at <= now).then_some(expiry)
    }

    #[inline]
    pub(crate) fn is_stopped(&self) -> bool {
        self.stage == StageKind::Stopped
    }

    /// Charges the time since `since` to the budget, whole seconds only (R61).
    #[inline]
    fn charge(&mut self, now: Instant) {
        let spent = now.saturating_duration_since(self.since).whole_seconds();
        let spent = i64::try_from(spent).unwrap_or(i64::MAX);
        self.budget = self.budget.saturating_sub(spent).max(0);
        self.since = now;
    }

    /// `now + budget`, saturating at the end of time.
    #[inline]
    fn budget_end(&self) -> Instant {
        self.since
            .saturating_add(Duration::from_grace_seconds(self.budget))
    }

    /// Begins the kill with budget `grace` (R56, R59): the hook if there is
    /// one, otherwise straight to the signal (or the sidecar's wait).
    #[inline]
    pub(crate) fn start(&mut self, now: Instant, grace: i64) -> bool {
        if self.stage != StageKind::Running {
            return false;
        }
        self.budget = grace;
        self.since = now;
        if self.spec.pre_stop && grace > 0 {
            self.set_stage(Stage::PreStop {
                cutoff: self.budget_end(),
            });
            self.owed |= owed::PRE_STOP;
            false
        } else {
            true
        }
    }

    /// The hook is over (done or cut off) at `now`; returns whether the
    /// container may be signalled now (false: a sidecar must wait its turn).
    #[inline]
    pub(crate) fn finish_hook(&mut self, now: Instant, turn_ready: bool, ordered: bool) -> bool {
        self.charge(now);
        if ordered && self.spec.sidecar && self.budget > 0 && !turn_ready {
            // R70: wait, bounded by what is left; R72: skipped when nothing is.
            self.set_stage(Stage::AwaitingTurn {
                cutoff: self.budget_end(),
            });
            false
        } else {
            true
        }
    }

    /// Sends the stop signal at `now` (R62, R63).
    #[inline]
    pub(crate) fn signal(&mut self, now: Instant) {
        if !matches!(
            self.stage(),
            Stage::Running | Stage::PreStop { .. } | Stage::AwaitingTurn { .. }
        ) {
            return;
        }
        self.charge(now);
        let timeout = self.budget.max(MIN_STOP_SECONDS);
        // `charge` left `since` at `now`: it now records the signal's time.
        self.set_stage(Stage::Stopping {
            kill_at: now.saturating_add(Duration::from_grace_seconds(timeout)),
        });
        self.owed |= owed::STOP_SIGNAL;
    }

    /// The stop signal really went out at `now` (R62): the signal's time
    /// becomes `now` if that is later than when it was decided, and SIGKILL
    /// is due no sooner than 2 s after it. Returns whether anything moved.
    #[inline]
    pub(crate) fn signal_sent(&mut self, now: Instant) -> bool {
        if self.stage != StageKind::Stopping || now <= self.since {
            return false;
        }
        self.since = now;
        let floor = now.saturating_add(Duration::from_grace_seconds(MIN_STOP_SECONDS));
        self.at = self.at.max(floor);
        true
    }

    /// Whether the current stage has a deadline and it has passed at `now`.
    #[inline]
    pub(crate) fn due(&self, now: Instant) -> bool {
        self.deadline().is_some_and(|at| at <= now)
    }

    /// Sends SIGKILL if it is due at `now` (R63): returns whether it was.
    #[inline]
    pub(crate) fn kill_if_due(&mut self, now: Instant) -> bool {
        if self.stage != StageKind::Stopping || self.at > now {
            return false;
        }
        self.stage = StageKind::Killed;
        self.owed |= owed::KILL;
        true
    }

    /// The process exited; returns false when it had already.
    #[inline]
    pub(crate) fn exited(&mut self) -> bool {
        if self.stage == StageKind::Stopped {
            return false;
        }
        self.set_stage(Stage::Stopped);
        self.owed |= owed::STOPPED;
        true
    }

    /// Started again after it stopped (R92, R93): running, with nothing
    /// owed; `false` (unchanged) unless it had stopped and its
    /// `ContainerStopped` was handed out.
    pub(crate) fn restarted(&mut self) -> bool {
        if self.stage != StageKind::Stopped || self.owed != 0 {
            return false;
        }
        *self = Container::new(ContainerSpec {
            stopped: false,
            ..self.spec
        });
        true
    }

    /// D5: a shorter budget `grace` seen at `now` moves a deadline to the
    /// earlier of its current value and the one a kill restarted now with
    /// `grace` would give: the hook cut-off (or a sidecar's wait) to
    /// `now + grace`; once the stop signal was sent, SIGKILL to
    /// `now + max(grace, 2 s)` (R55, R62), with no second stop signal.
    #[inline]
    pub(crate) fn shorten(&mut self, now: Instant, grace: i64) {
        match self.stage {
            StageKind::PreStop | StageKind::AwaitingTurn => {
                let new_end = now.saturating_add(Duration::from_grace_seconds(grace));
                if new_end < self.budget_end() {
                    self.since = now;
                    self.budget = grace;
                }
                self.at = self.at.min(new_end);
            }
            StageKind::Stopping => {
                // `since` stays the stop signal's time.
                let timeout = grace.max(MIN_STOP_SECONDS);
                let kill_at = now.saturating_add(Duration::from_grace_seconds(timeout));
                // Never under 2 s after the stop signal really went out,
                // which may be after `now` (R62).
                let floor = self
                    .since
                    .saturating_add(Duration::from_grace_seconds(MIN_STOP_SECONDS));
                self.at = self.at.min(kill_at.max(floor));
            }
            StageKind::Running | StageKind::Killed | StageKind::Stopped => {}
        }
    }
}
