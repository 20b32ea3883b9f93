//! # grace-std
//!
//! grace on `std`: what turns the `grace-core` state machine into a working
//! system — clocks ([`clock`]), storage ([`store`]), the write-ahead
//! [`runtime`], real process control ([`process`]), requests decided
//! against a shared store as an API server decides them ([`api_server`]),
//! and the protocol of a node agent's socket ([`api`]).
//!
//! The `grace` command line is a crate of its own (`grace-cli`), built on
//! this library; nothing of it is in this crate's API or dependencies.
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod api;
pub mod api_server;
pub mod clock;
pub mod process;
pub mod runtime;
pub mod store;

pub use clock::{Clock, ManualClock, SystemClock};
pub use runtime::{Actuator, Change, DeleteAnswer, Recovery, Runtime, RuntimeError, Transition};
pub use store::{MemoryStore, RedbStore, Revision, Store, StoreError, StoredObject};

// The Rust examples of the READMEs and of docs/ are compiled and run as
// doctests (here, where both crates are in scope).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctests;
#[cfg(doctest)]
#[doc = include_str!("../../docs/core.md")]
pub struct CoreDocDoctests;
#[cfg(doctest)]
#[doc = include_str!("../../docs/runtime.md")]
pub struct RuntimeDocDoctests;
#[cfg(doctest)]
#[doc = include_str!("../../docs/etcd.md")]
pub struct EtcdDocDoctests;
