//! The pod's `restartPolicy` and whether an exited container starts again.

use core::fmt;

/// A pod's `spec.restartPolicy`: which of its regular containers start
/// again after they exit ([R92]). Kubernetes' set is closed, hence no
/// `#[non_exhaustive]`.
///
/// [R92]: crate::rules#r92
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    all(feature = "arbitrary", not(target_os = "none")),
    derive(arbitrary::Arbitrary)
)]
pub enum RestartPolicy {
    /// Every exit is followed by a start, whatever the exit code (the
    /// API server's default).
    #[default]
    Always,
    /// Only an exit with a non-zero code is followed by a start.
    OnFailure,
    /// No exit is followed by a start.
    Never,
}

impl RestartPolicy {
    /// Kubernetes' word for the policy, as `spec.restartPolicy` spells it;
    /// [`FromStr`](core::str::FromStr) reads it back.
    ///
    /// ```
    /// use grace_core::RestartPolicy;
    ///
    /// assert_eq!(RestartPolicy::OnFailure.as_str(), "OnFailure");
    /// assert_eq!("Never".parse(), Ok(RestartPolicy::Never));
    /// assert!("always".parse::<RestartPolicy>().is_err());
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            RestartPolicy::Always => "Always",
            RestartPolicy::OnFailure => "OnFailure",
            RestartPolicy::Never => "Never",
        }
    }
}

impl fmt::Display for RestartPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `restartPolicy` that is none of Kubernetes' words (they are
/// case-sensitive); see [`RestartPolicy::as_str`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UnknownRestartPolicy;

impl fmt::Display for UnknownRestartPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a restart policy (Always, OnFailure or Never)")
    }
}

impl core::error::Error for UnknownRestartPolicy {}

impl core::str::FromStr for RestartPolicy {
    type Err = UnknownRestartPolicy;

    /// The policy [`as_str`](RestartPolicy::as_str) spells `s`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "Always" => RestartPolicy::Always,
            "OnFailure" => RestartPolicy::OnFailure,
            "Never" => RestartPolicy::Never,
            _ => return Err(UnknownRestartPolicy),
        })
    }
}

/// Whether a container that exited with `exit_code` is started again: a
/// native sidecar (an init container with its own `restartPolicy: Always`)
/// always ([R93]), a regular container as the pod's `policy` says ([R92]),
/// and nothing once the pod is being deleted ([R94]). When it may start is
/// [`BackOff`](crate::BackOff)'s answer.
///
/// ```
/// use grace_core::{RestartPolicy, restarts_after_exit};
///
/// assert!(restarts_after_exit(RestartPolicy::OnFailure, false, 1, false));
/// assert!(!restarts_after_exit(RestartPolicy::OnFailure, false, 0, false));
/// assert!(restarts_after_exit(RestartPolicy::Never, true, 0, false));
/// assert!(!restarts_after_exit(RestartPolicy::Always, true, 1, true));
/// ```
///
/// [R92]: crate::rules#r92
/// [R93]: crate::rules#r93
/// [R94]: crate::rules#r94
pub const fn restarts_after_exit(
    policy: RestartPolicy,
    sidecar: bool,
    exit_code: i32,
    pod_is_deleting: bool,
) -> bool {
    if pod_is_deleting {
        return false;
    }
    if sidecar {
        return true;
    }
    match policy {
        RestartPolicy::Always => true,
        RestartPolicy::OnFailure => exit_code != 0,
        RestartPolicy::Never => false,
    }
}
