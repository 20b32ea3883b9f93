//! Memory budgets, asserted so that a change that grows the state fails a
//! test rather than only a number in a document. "Timing state" is
//! everything a lifecycle keeps besides the record (the object's metadata,
//! dominated by its 64-byte names): the agent's state, each container's
//! kill state, the action order, the strategy. A table adds its own
//! bookkeeping per object: the slot's generation and marks, a heap entry
//! and a ready-FIFO entry. An action is handed out on every output: it is
//! kept to one machine word.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use core::mem::size_of;

use grace_core::{
    Action, Container, InlineName, Lifecycle, NAME_CAPACITY, Name, Record, SMALL_NAME_CAPACITY,
    Table,
};

/// Timing state of one object with `C` containers.
fn timing_state<const C: usize>() -> usize {
    size_of::<Lifecycle<0, C>>() - size_of::<Record<0>>()
}

/// Bytes per object in a table of `Lifecycle<0, C>`, without the record.
fn tracked_object<const C: usize>() -> usize {
    const N: usize = 64;
    size_of::<Table<N, 0, C>>() / N - size_of::<Record<0>>()
}

#[test]
fn one_container_object_keeps_at_most_48_bytes_of_timing_state() {
    assert!(timing_state::<1>() <= 48, "{} bytes", timing_state::<1>());
}

#[test]
fn each_further_container_costs_at_most_32_bytes() {
    assert!(
        size_of::<Container>() <= 32,
        "{} bytes",
        size_of::<Container>()
    );
    assert!(timing_state::<4>() - timing_state::<1>() <= 3 * 32);
}

#[test]
fn a_table_tracks_a_one_container_object_in_at_most_64_bytes() {
    // Timing state plus the table's bookkeeping, the record aside.
    assert!(
        tracked_object::<1>() <= 64,
        "{} bytes",
        tracked_object::<1>()
    );
    assert!(tracked_object::<1>() - timing_state::<1>() <= 16);
}

#[test]
fn names_are_inline_their_capacity_and_a_two_byte_length() {
    // Every Kubernetes-legal name by default; 64 bytes for short ones.
    assert_eq!(size_of::<Name>(), NAME_CAPACITY + 2);
    assert_eq!(size_of::<InlineName<SMALL_NAME_CAPACITY>>(), 64);
}

#[test]
fn a_small_name_configuration_keeps_its_records_small() {
    // A record with room for one finalizer: uid and finalizer inline.
    assert!(size_of::<Record<1, SMALL_NAME_CAPACITY>>() <= 2 * 64 + 80);
    assert!(size_of::<Record<1>>() <= 2 * (NAME_CAPACITY + 2) + 88);
}

// One 64-bit word, so that `poll_action` returns it in a register and a
// caller's copy of it is one load (checked at compile time as well).
const _: () = assert!(size_of::<Option<Action>>() <= 8);

#[test]
fn an_action_fits_one_word_even_as_an_option() {
    assert_eq!(size_of::<Action>(), 8);
    assert_eq!(size_of::<Option<Action>>(), 8);
}
