//! What an agent keeps of a container's restarts: how many, the run that
//! ended last, and its CrashLoopBackOff (R92–R97, D9), stored with the
//! object so that a restarted agent waits out the same back-off.

use grace_core::{BackOff, Duration, Instant};
use serde::{Deserialize, Serialize};

use super::object::ContainerStatus;

/// One container's restarts, as the kubelet reports them
/// (`restartCount`, `lastState.terminated`) and as the agent needs them
/// to start it again: its back-off, and, while it waits, when it exited
/// and when it starts again. Times are the agent's wall clock in unix
/// milliseconds, so they mean the same to the next agent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ContainerRestarts {
    /// `restartCount`: how many times the container was started again.
    #[serde(default)]
    pub count: u32,
    /// `lastState.terminated`: how its last finished run ended; `None`
    /// before its first exit that is followed by a restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_state: Option<ContainerStatus>,
    /// Its CrashLoopBackOff (its instants are unix milliseconds).
    #[serde(default)]
    pub back_off: BackOff,
    /// While a restart is pending: when the run ended (unix ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exited_at_ms: Option<u64>,
    /// While a restart is pending: when the container starts again (unix
    /// ms); `None` when none is pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_at_ms: Option<u64>,
}

impl ContainerRestarts {
    /// A container whose run ended at `exited_ms` with `last` waits: its
    /// restart is due after the back-off ([`BackOff::restart_at`]).
    /// Returns when.
    pub fn exited(&mut self, last: ContainerStatus, exited_ms: u64) -> u64 {
        let at = self.back_off.restart_at(Instant::from_millis(exited_ms));
        self.last_state = Some(last);
        self.exited_at_ms = Some(exited_ms);
        self.restart_at_ms = Some(at.as_millis());
        at.as_millis()
    }

    /// The container was started again at `now_ms`: one more restart, the
    /// back-off doubled for the next exit, nothing pending.
    pub fn restarted(&mut self, now_ms: u64) {
        let exited = self.exited_at_ms.unwrap_or(now_ms);
        self.back_off
            .restarted(Instant::from_millis(exited), Instant::from_millis(now_ms));
        self.count = self.count.saturating_add(1);
        self.exited_at_ms = None;
        self.restart_at_ms = None;
    }

    /// The pending restart is dropped (the pod is being deleted, R94).
    pub fn cancel(&mut self) {
        self.exited_at_ms = None;
        self.restart_at_ms = None;
    }

    /// While a restart is pending, the back-off it waits out (the
    /// duration of the kubelet's "back-off 20s restarting failed
    /// container" message).
    pub fn waiting(&self) -> Option<Duration> {
        self.restart_at_ms?;
        let exited = self.exited_at_ms?;
        Some(self.back_off.delay(Instant::from_millis(exited)))
    }
}
