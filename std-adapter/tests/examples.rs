//! The examples are programs a user would write; each one runs here.

#[path = "../examples/runtime_on_redb.rs"]
mod runtime_on_redb;

#[test]
fn the_runtime_on_redb_example_runs_to_the_end() {
    runtime_on_redb::main().expect("the example runs");
}
