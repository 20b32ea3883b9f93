//! What grace-core's tests and the fuzz targets check against, in one
//! place (not published; a dev-dependency of grace-core, a dependency of
//! `fuzz/`):
//!
//! - [`checker`]: the invariants of core/RULES.md, checked after every step
//!   of one lifecycle (the `invariants` property tests and the `lifecycle`
//!   fuzz target drive it);
//! - [`reference`](mod@reference): the API-level rules and the kubelet's arithmetic,
//!   restated with no code of the core ([`convert`] maps the core's types
//!   onto it);
//! - [`table_model`]: a `Table` restated as a list of lifecycles (the
//!   `table` property test and the `table` fuzz target compare with it).
// The test kit serves tests, which report by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

pub mod checker;
pub mod convert;
pub mod reference;
pub mod table_model;
