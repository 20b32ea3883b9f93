//! The pod phase the kubelet reports, from its containers' states.

use crate::record::PodPhase;
use crate::restart::policy::RestartPolicy;

/// What the kubelet knows of one container, as `status.containerStatuses`
/// (or `initContainerStatuses`) shows it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    all(feature = "arbitrary", not(target_os = "none")),
    derive(arbitrary::Arbitrary)
)]
pub enum ContainerState {
    /// No status yet: the container was never created.
    #[default]
    NoStatus,
    /// Not running: being created, or waiting out its back-off.
    Waiting {
        /// The exit code of its last run, if it ran before (the status's
        /// `lastState.terminated`).
        last_exit: Option<i32>,
    },
    /// Running.
    Running {
        /// Its startup probe passed (or it has none): `started: true`.
        started: bool,
    },
    /// Exited and not (yet) started again.
    Terminated {
        /// The exit code (0 is success).
        exit_code: i32,
    },
}

/// One container of the pod, for [`pod_phase`].
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    all(feature = "arbitrary", not(target_os = "none")),
    derive(arbitrary::Arbitrary)
)]
pub struct ContainerStatus {
    /// A native sidecar (an init container with `restartPolicy: Always`);
    /// else a regular container.
    pub sidecar: bool,
    /// Its state.
    pub state: ContainerState,
}

impl ContainerStatus {
    /// A regular container in `state`.
    pub const fn regular(state: ContainerState) -> Self {
        ContainerStatus {
            sidecar: false,
            state,
        }
    }

    /// A native sidecar in `state`.
    pub const fn sidecar(state: ContainerState) -> Self {
        ContainerStatus {
            sidecar: true,
            state,
        }
    }
}

/// The kubelet's counts over the containers.
#[derive(Default)]
struct Counts {
    unknown: usize,
    running: usize,
    waiting: usize,
    stopped: usize,
    succeeded: usize,
    /// A sidecar waiting for its first start, or running and not started,
    /// holds the pod Pending until a regular container runs or has exited
    /// ([R99]).
    ///
    /// [R99]: crate::rules#r99
    pending_sidecars: usize,
    /// A regular container is running or has exited.
    regular_started: bool,
}

impl Counts {
    fn of(containers: &[ContainerStatus]) -> Counts {
        let mut c = Counts::default();
        for container in containers {
            if container.sidecar {
                c.count_sidecar(container.state);
            } else {
                c.count_regular(container.state);
            }
        }
        c
    }

    /// A sidecar counts only while it runs or has not run yet: an exited
    /// one is left out of the phase ([R99]).
    ///
    /// [R99]: crate::rules#r99
    fn count_sidecar(&mut self, state: ContainerState) {
        match state {
            ContainerState::NoStatus => self.unknown = self.unknown.saturating_add(1),
            ContainerState::Waiting { last_exit: None } => {
                self.waiting = self.waiting.saturating_add(1);
                self.pending_sidecars = self.pending_sidecars.saturating_add(1);
            }
            ContainerState::Waiting { last_exit: Some(_) } | ContainerState::Terminated { .. } => {}
            ContainerState::Running { started } => {
                self.running = self.running.saturating_add(1);
                if !started {
                    self.pending_sidecars = self.pending_sidecars.saturating_add(1);
                }
            }
        }
    }

    /// A regular container waiting after a run counts as stopped, without
    /// counting as a success whatever its last exit code ([R98]).
    ///
    /// [R98]: crate::rules#r98
    fn count_regular(&mut self, state: ContainerState) {
        match state {
            ContainerState::NoStatus => self.unknown = self.unknown.saturating_add(1),
            ContainerState::Waiting { last_exit: None } => {
                self.waiting = self.waiting.saturating_add(1);
            }
            // Waiting again does not count as started for R99: only a
            // status that runs or has exited does.
            ContainerState::Waiting { last_exit: Some(_) } => {
                self.stopped = self.stopped.saturating_add(1);
            }
            ContainerState::Running { .. } => {
                self.running = self.running.saturating_add(1);
                self.regular_started = true;
            }
            ContainerState::Terminated { exit_code } => {
                self.stopped = self.stopped.saturating_add(1);
                if exit_code == 0 {
                    self.succeeded = self.succeeded.saturating_add(1);
                }
                self.regular_started = true;
            }
        }
    }
}

/// The phase the kubelet computes for a pod whose containers are
/// `containers` (regular containers and native sidecars, in any order),
/// under `policy` ([R98]–[R100]).
///
/// - Pending while a container has not started: one is waiting for its
///   first start, or a sidecar has not started and no regular container
///   has run yet.
/// - Running once every container has a status and one runs.
/// - When no container runs and every regular one has exited: Succeeded if
///   all exited with 0 and Failed otherwise, when `pod_is_terminal` (no
///   container will start again: the pod is being deleted, or evicted) or
///   the policy lets none of them restart; else Running (they are being
///   restarted).
/// - Pending otherwise (a container without status).
///
/// Exited sidecars do not count. Regular init containers are not modelled
/// (grace refuses them): a pod here has run its init containers, if any.
/// A pod's phase never leaves Succeeded or Failed: pass the result through
/// [`keep_terminal_phase`].
///
/// ```
/// use grace_core::{ContainerState, ContainerStatus, PodPhase, RestartPolicy, pod_phase};
///
/// let failed = ContainerStatus::regular(ContainerState::Terminated { exit_code: 1 });
/// let running = ContainerStatus::regular(ContainerState::Running { started: true });
/// assert_eq!(pod_phase(&[failed, failed], RestartPolicy::Never, false), PodPhase::Failed);
/// assert_eq!(pod_phase(&[failed, failed], RestartPolicy::OnFailure, false), PodPhase::Running);
/// assert_eq!(pod_phase(&[failed, running], RestartPolicy::Never, false), PodPhase::Running);
/// ```
///
/// [R98]: crate::rules#r98
/// [R100]: crate::rules#r100
pub fn pod_phase(
    containers: &[ContainerStatus],
    policy: RestartPolicy,
    pod_is_terminal: bool,
) -> PodPhase {
    let c = Counts::of(containers);
    let all_succeeded = c.stopped == c.succeeded;
    if (c.pending_sidecars > 0 && !c.regular_started) || c.waiting > 0 {
        // A container has not started yet.
        PodPhase::Pending
    } else if c.running > 0 && c.unknown == 0 {
        PodPhase::Running
    } else if c.running == 0 && c.stopped > 0 && c.unknown == 0 {
        // Every regular container has exited; who restarts decides.
        match (pod_is_terminal, policy) {
            (true, _) | (false, RestartPolicy::Never) if all_succeeded => PodPhase::Succeeded,
            (true, _) | (false, RestartPolicy::Never) => PodPhase::Failed,
            (false, RestartPolicy::Always) => PodPhase::Running,
            (false, RestartPolicy::OnFailure) if all_succeeded => PodPhase::Succeeded,
            (false, RestartPolicy::OnFailure) => PodPhase::Running,
        }
    } else {
        PodPhase::Pending
    }
}

/// The phase to report, given the one reported before: once Succeeded or
/// Failed, a pod's phase never changes again ([R101]); otherwise the
/// `computed` one (from [`pod_phase`]).
///
/// ```
/// use grace_core::{PodPhase, keep_terminal_phase};
///
/// assert_eq!(keep_terminal_phase(PodPhase::Failed, PodPhase::Running), PodPhase::Failed);
/// assert_eq!(keep_terminal_phase(PodPhase::Pending, PodPhase::Running), PodPhase::Running);
/// ```
///
/// [R101]: crate::rules#r101
pub const fn keep_terminal_phase(previous: PodPhase, computed: PodPhase) -> PodPhase {
    if previous.is_terminal() {
        previous
    } else {
        computed
    }
}
