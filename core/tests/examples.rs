//! The examples are programs a user would write; each one runs here.

#[path = "../examples/pod_and_table.rs"]
mod pod_and_table;

#[test]
fn the_pod_and_table_example_runs_to_the_end() {
    pod_and_table::main().expect("the example runs");
}
