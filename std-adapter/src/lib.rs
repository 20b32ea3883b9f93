//! # grace-std
//!
//! grace on `std`: what turns the `grace-core` state machine into a working
//! system — clocks ([`clock`]), storage ([`store`]), the write-ahead
//! [`runtime`], real process control ([`process`]), requests decided
//! against a shared store as an API server decides them ([`api_server`]),
//! the garbage collector's step: owner references and GC finalizers ([`gc`])
//! and files and directories private to this user ([`private`]: the
//! process actuator's state directory is checked with it, as programs on
//! top check their own data directories).
//!
//! The node agent (its socket protocol, request dispatch, access control)
//! is a crate of its own, `grace-agent`, and the `grace` command line
//! another (`grace-cli`), both built on this library; nothing of them is
//! in this crate's API or dependencies.
//!
//! ## Example
//!
//! A pod deleted through the write-ahead [`Runtime`] on the durable redb
//! store; an [`Actuator`] carries out what the machine decides.
//!
//! ```
//! use grace_core::{Action, DeleteOptions, Input, Record};
//! use grace_std::clock::SystemClock;
//! use grace_std::runtime::{ActionError, Actuator, Runtime};
//! use grace_std::store::{RedbStore, StoredContainer, StoredObject};
//!
//! /// Carries out what the machine decides; here it only prints it.
//! struct Print;
//! impl Actuator for Print {
//!     fn perform(&mut self, object: &str, _: &StoredObject, action: &Action) -> Result<(), ActionError> {
//!         println!("{object}: {action}");
//!         Ok(())
//!     }
//! }
//!
//! let dir = tempfile::tempdir()?;
//! let store = RedbStore::open(dir.path().join("grace.redb"))?;
//! let mut builder = Runtime::builder(store, SystemClock::new(), Print);
//! let transitions = builder.subscribe(); // sees recovery too
//! let mut runtime = builder.open()?;
//!
//! let mut web = StoredObject::on_node(Record::builder("uid-web-0").build()?, "node-a");
//! web.containers.push(StoredContainer::new("app", ["sleep", "1000"]));
//! runtime.create("web-0", web)?;
//!
//! runtime.handle("web-0", Input::Delete(DeleteOptions::with_grace(30)))?; // durable, then endpoints removed
//! runtime.handle("web-0", Input::AgentSync)?;                              // SIGTERM; SIGKILL due in 30 s
//! runtime.handle("web-0", Input::container_exited(0))?;                    // exited: final delete, removed
//! assert!(runtime.lifecycle("web-0").is_none());
//! assert!(transitions.try_iter().count() >= 5);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The rules the machine follows, each with its Kubernetes source, are in
//! [`grace_core::rules`].
#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Examples (and the README's) compile without warnings, as a user copying
// them would see them.
#![doc(test(attr(deny(warnings))))]

pub mod api_server;
pub mod clock;
pub mod gc;
pub mod private;
pub mod process;
pub mod runtime;
pub mod store;

pub use clock::{Clock, ManualClock, SystemClock};
pub use runtime::{
    ActionError, Actuator, Answer, Change, DeleteAnswer, Recovery, Runtime, RuntimeBuilder,
    RuntimeError, Transition, WorldEvent,
};
pub use store::{MemoryStore, RedbStore, Revision, Store, StoreError, StoredObject};

// The Rust examples of the READMEs and of docs/ are compiled and run as
// doctests (here, where both crates are in scope). The repository's README
// and docs/ are outside the package: only a checkout has them (build.rs
// sets `grace_repository_docs`), so the published .crate tests its own
// README only.
#[cfg(all(doctest, grace_repository_docs))]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctests;
#[cfg(all(doctest, grace_repository_docs))]
#[doc = include_str!("../../docs/core.md")]
pub struct CoreDocDoctests;
#[cfg(all(doctest, grace_repository_docs))]
#[doc = include_str!("../../docs/runtime.md")]
pub struct RuntimeDocDoctests;
#[cfg(all(doctest, grace_repository_docs))]
#[doc = include_str!("../../docs/etcd.md")]
pub struct EtcdDocDoctests;
