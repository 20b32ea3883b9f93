//! Where a big table goes (see `Table`'s docs): a `static`, all zero bits
//! in `.bss`, never built on the stack.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use std::sync::Mutex;

use grace_core::{ContainerSpec, Lifecycle, Record, Strategy, Table};

/// About 36.8 MB: more than a test thread's stack (2 MiB) and the main
/// thread's (8 MiB), so building it there would overflow in a debug build.
static BIG: Mutex<Table<20_000>> = Mutex::new(Table::new());

#[test]
fn a_table_of_20_000_lives_in_a_static_and_fills_up() {
    // 36 800 024 bytes (1 840 per object) with the default capacities, as
    // `Table`'s docs say: far more than a thread's stack.
    let size = size_of::<Table<20_000>>();
    assert!(size > 8 << 20);
    assert_eq!(size / 100_000, 368, "{size} bytes: update Table's docs");
    let mut table = BIG.lock().unwrap_or_else(|e| e.into_inner());
    let record = Record::builder("uid").build().expect("short uid");
    let pod =
        Lifecycle::new(Strategy::POD, record, &[ContainerSpec::app()]).expect("one container");
    for _ in 0..20_000 {
        table.insert(pod.clone()).expect("room left");
    }
    assert_eq!(table.len(), 20_000);
    assert!(table.insert(pod).is_err(), "the 20 001st is handed back");
}
