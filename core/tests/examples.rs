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

#[path = "../examples/pod_and_table.rs"]
mod pod_and_table;

#[test]
fn the_pod_and_table_example_runs_to_the_end() {
    pod_and_table::main().expect("the example runs");
}
