//! # grace-std
//!
//! grace on `std`: what turns the `grace-core` state machine into a working
//! system — clocks ([`clock`]), storage ([`store`]), the write-ahead
//! [`runtime`], real process control ([`process`]), and the `grace` CLI:
//! [`demo`], [`run`], the node [`agent`] and its [`api`], the store commands
//! ([`kubectl`], object files in [`manifest`]), and `grace simulate`
//! ([`scenario`], [`mod@simulate`], [`timeline`], [`svg`]).
#![deny(missing_docs)]

pub mod agent;
pub mod api;
pub mod api_server;
pub mod clock;
pub mod demo;
pub mod kubectl;
pub mod manifest;
#[cfg(feature = "etcd")]
pub mod node_agent;
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
