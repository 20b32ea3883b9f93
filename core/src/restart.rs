//! Container restarts as the kubelet does them: which exited container
//! starts again ([`restarts_after_exit`], [R92]–[R94]), how long it waits
//! first ([`BackOff`], CrashLoopBackOff, [R95]–[R97], [D9]) and the pod
//! phase that follows from its containers' states ([`pod_phase`],
//! [R98]–[R101]).
//!
//! These are pure functions and a few bytes of state per container; they
//! read no clock and start nothing. The [`Lifecycle`](crate::Lifecycle)
//! does not call them: the agent does, and tells the lifecycle of a
//! restart with [`Input::ContainerStarted`](crate::Input::ContainerStarted),
//! which it refuses once the pod is being deleted or evicted ([R94]).
//!
//! [R92]: crate::rules#r92
//! [R94]: crate::rules#r94
//! [R95]: crate::rules#r95
//! [R97]: crate::rules#r97
//! [R98]: crate::rules#r98
//! [R101]: crate::rules#r101
//! [D9]: crate::rules#d9

mod backoff;
mod phase;
mod policy;

pub use backoff::{BACK_OFF_INITIAL, BACK_OFF_MAX, BACK_OFF_RESET, BackOff, CRASH_LOOP_BACK_OFF};
pub use phase::{ContainerState, ContainerStatus, keep_terminal_phase, pod_phase};
pub use policy::{RestartPolicy, UnknownRestartPolicy, restarts_after_exit};
