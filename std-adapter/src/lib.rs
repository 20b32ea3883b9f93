//! # grace-std
//!
//! grace on `std`: what turns the `grace-core` state machine into a working
//! system. This release holds the scenario format and the simulator behind
//! `grace simulate`; clocks, storage, the runtime and process control follow.
#![deny(missing_docs)]

pub mod clock;
pub mod demo;
pub mod process;
pub mod run;
pub mod runtime;
pub mod scenario;
pub mod simulate;
pub mod store;
pub mod svg;
pub mod timeline;

pub use clock::{Clock, ManualClock, SystemClock};
pub use runtime::{Actuator, Change, DeleteAnswer, Recovery, Runtime, RuntimeError, Transition};
pub use scenario::{Scenario, ScenarioError, parse};
pub use simulate::{SimulateError, simulate};
pub use store::{MemoryStore, RedbStore, Revision, Store, StoreError, StoredObject};
pub use timeline::Timeline;

// The README's Rust examples are compiled and run as doctests (here, where
// both crates are in scope).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
