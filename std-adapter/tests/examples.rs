//! The examples are programs a user would write; each one runs here.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

#[path = "../examples/runtime_on_redb.rs"]
mod runtime_on_redb;

#[test]
fn the_runtime_on_redb_example_runs_to_the_end() {
    runtime_on_redb::main().expect("the example runs");
}
