//! # grace-core
//!
//! Kubernetes-grade graceful deletion as a pure state machine: `#![no_std]`,
//! no allocation, no panics, no I/O. It decides every step of deleting an
//! object the way the Kubernetes API server and kubelet do — deletion
//! timestamp and grace, which grace wins, the pre-stop budget, when SIGTERM
//! and SIGKILL are due, what finalizers hold back — and leaves doing it to
//! the caller.
//!
//! ```text
//! Live ──delete──▶ GracefulPending ──agent starts──▶ Terminating ──stopped & no finalizers──▶ Deleted
//!   └──────────── delete with nothing to wait for (grace 0, unscheduled, finished) ────────────▶ Deleted
//! ```
//!
//! It is not a Kubernetes client, a container runtime or a scheduler; clocks,
//! storage and processes live in `grace-std` or in your own adapter.
//!
//! ## Shape
//!
//! Time is always an argument ([`Now`]); the machine never reads a clock.
//! Inputs are one enum, [`Input`], fed to [`Lifecycle::handle`] (and to
//! [`Table::handle`], the embassy driver and grace-std's runtime); outputs
//! are [`Lifecycle::poll_action`] (what to do now) and
//! [`Lifecycle::poll_timeout`] (when to feed [`Input::Timeout`]).
//! The pure decisions underneath are public too: [`decide_delete`] (the API
//! server), [`effective_grace`] (the kubelet's budget), and, for container
//! restarts, which the lifecycle does not carry out yet,
//! [`restarts_after_exit`], [`BackOff`] (CrashLoopBackOff) and
//! [`pod_phase`].
//!
//! ## Example
//!
//! A pod with one container that ignores SIGTERM, deleted with 5 s of grace:
//!
//! ```
//! use grace_core::{Action, ContainerSpec, DeleteOptions, Input, Lifecycle, Name, Now, Phase, Record, Strategy};
//!
//! let record = Record::<4>::new(Name::try_from("uid-1").unwrap());
//! let mut pod = Lifecycle::<4, 2>::new(Strategy::POD, record, &[ContainerSpec::default()]).unwrap();
//! let at = |ms: i64| Now::from_unix_millis(ms);
//!
//! pod.handle(at(0), Input::Delete(DeleteOptions::with_grace(5))).delete().unwrap().unwrap();
//! let _ = pod.handle(at(0), Input::AgentSync);
//! assert_eq!(pod.poll_action(), Some(Action::RemoveEndpoints));
//! assert_eq!(pod.poll_action(), Some(Action::SendStopSignal { container: 0 }));
//!
//! // Nothing to do until the grace is spent; then SIGKILL.
//! assert_eq!(pod.poll_action(), None);
//! assert_eq!(pod.poll_timeout().unwrap().as_millis(), 5_000);
//! let _ = pod.handle(at(5_000), Input::Timeout);
//! assert_eq!(pod.poll_action(), Some(Action::SendKill { container: 0 }));
//!
//! // The agent reports the process gone: the record is removed.
//! pod.handle(at(5_010), Input::container_exited(0)).container().unwrap();
//! assert_eq!(pod.poll_action(), Some(Action::ContainerStopped { container: 0 }));
//! assert_eq!(pod.poll_action(), Some(Action::Remove { force: false }));
//! assert_eq!(pod.phase(), Phase::Deleted);
//! ```
//!
//! Many objects go in a [`Table`] (one deadline heap for all of them) or a
//! [`SharedTable`] (a table in a `static`, behind a critical section).
//!
//! ## The rules
//!
//! Every decision follows a rule of the module [`rules`]: R1–R101 state what
//! Kubernetes does, each with its source, and D1–D9 where grace chooses
//! otherwise. Tests are named after them and the docs cite them by id.
//!
//! ## Contracts
//!
//! - Nothing wraps, nothing panics, for any input ([D2]): grace values of any
//!   `i64`, instants at the end of time, full collections (typed errors).
//! - A deletion timestamp never moves later; the grace only shrinks.
//! - SIGKILL is never before its deadline and always ≥ 2 s after the stop
//!   signal ([R62]).
//! - A record with finalizers is never removed.
//!
//! ## Features
//!
//! All off by default, none turns on `std` or `alloc`: `serde` (derives on
//! public data), `defmt` (`defmt::Format`), `embassy-time` (conversions of
//! [`Instant`] and [`Duration`]), `embassy` (an async driver for embassy
//! firmware, `driver`), `flash` (lifecycles kept on NOR flash across
//! reboots, `flash`), `arbitrary` (for fuzzers).
//!
//! [D2]: crate::rules#d2
//! [R62]: crate::rules#r62
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
// Examples compile without warnings, as a user copying them would see them.
#![doc(test(attr(deny(warnings))))]
#![deny(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]
#![cfg_attr(
    test,
    allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects
    )
)]

// `derive(Arbitrary)` expands to paths under `::std`; arbitrary itself
// needs std, and fuzzers run on hosts, so only that feature links it.
#[cfg(all(feature = "arbitrary", not(target_os = "none")))]
extern crate std;

#[cfg(feature = "embassy")]
#[cfg_attr(docsrs, doc(cfg(feature = "embassy")))]
pub mod driver;
#[cfg(feature = "flash")]
#[cfg_attr(docsrs, doc(cfg(feature = "flash")))]
pub mod flash;
#[doc = include_str!("../RULES.md")]
pub mod rules {}

mod error;
mod grace;
mod hint;
mod input;
mod kill;
mod lifecycle;
mod name;
mod options;
mod record;
mod registry;
mod restart;
mod shared;
mod table;
mod time;
mod wire;

pub use error::Error;
pub use grace::{EffectiveGrace, effective_grace};
pub use input::{Input, Reply};
pub use kill::{Container, ContainerIndex, ContainerSpec, Due, DueKind, MIN_STOP_SECONDS, Stage};
pub use lifecycle::{
    Action, AgentState, DeleteResponse, Handled, Lifecycle, Link, OtherObject, Phase,
    TooManyContainers, UnknownContainer, UpdateOutcome,
};
pub use name::{InlineName, NAME_CAPACITY, Name, NameTooLong, SMALL_NAME_CAPACITY};
pub use options::{DeleteOptions, InvalidOptions, Preconditions, Propagation};
pub use record::{
    FINALIZER_FOREGROUND, FINALIZER_ORPHAN, FinalizerListError, Finalizers, GcPolicy, Kind,
    PodPhase, Record, RecordBuilder, Strategy, TooManyFinalizers, UnknownPodPhase,
};
pub use registry::{
    Conflict, DeleteDecision, DeleteError, DeleteOutcome, FinalizerChange, UpdateDecision,
    UpdateError, decide_delete, decide_finalizer_update, gc_finalizers, pod_grace_period,
};
pub use restart::{
    BACK_OFF_INITIAL, BACK_OFF_MAX, BACK_OFF_RESET, BackOff, CRASH_LOOP_BACK_OFF, ContainerState,
    ContainerStatus, RestartPolicy, UnknownRestartPolicy, keep_terminal_phase, pod_phase,
    restarts_after_exit,
};
pub use shared::{Busy, SharedTable, TableAccess};
pub use table::{Id, Table, TableFull, UnknownId};
pub use time::{Duration, Instant, MAX_TIMESTAMP_SECONDS, Now, Timestamp, WallTime};
pub use wire::{WireDeleteOptions, WireOptionsError};

// The crate README's example is compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
