//! # grace-std
//!
//! grace on `std`: what turns the `grace-core` state machine into a working
//! system — clocks ([`clock`]), storage ([`store`]), the write-ahead
//! [`runtime`], real process control ([`process`]), requests decided
//! against a shared store as an API server decides them ([`api_server`]),
//! the protocol of a node agent's socket ([`api`]) and the private
//! directory it lives in ([`private`]).
//!
//! The `grace` command line is a crate of its own (`grace-cli`), built on
//! this library; nothing of it is in this crate's API or dependencies.
#![deny(missing_docs)]

pub mod api;
pub mod api_server;
pub mod clock;
pub mod private;
pub mod process;
pub mod runtime;
pub mod store;

pub use clock::{Clock, ManualClock, SystemClock};
pub use runtime::{Actuator, Change, DeleteAnswer, Recovery, Runtime, RuntimeError, Transition};
pub use store::{MemoryStore, RedbStore, Revision, Store, StoreError, StoredObject};

// The README's Rust examples are compiled and run as doctests (here, where
// both crates are in scope).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
