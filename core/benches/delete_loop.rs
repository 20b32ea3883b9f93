//! A fixed loop of deletes, for counting instructions (`valgrind
//! --tool=cachegrind --cache-sim=no`), which the machine's load does not
//! move as it moves timings. See BENCHMARKS.md ("One input type").
//!
//! `delete_loop MODE`: each round refreshes 1 024 lifecycles from a live
//! template; mode 0 stops there (the baseline to subtract), mode 1 deletes
//! each with one options value cloned into the input, mode 2 with options
//! built for the call. 2 000 000 deletes in all; then `poll_action`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use std::hint::black_box;

use grace_core::{ContainerSpec, DeleteOptions, Input, Lifecycle, Name, Now, Record, Strategy};

type Lc = Lifecycle<4, 1>;

const DELETES: usize = 2_000_000;
const ROUND: usize = 1_024;

fn main() {
    // `cargo bench` passes `--bench`; the mode is the first number.
    let mode: u32 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2);
    let template: Lc = Lifecycle::new(
        Strategy::POD,
        Record::new(Name::try_from("0123456789abcdef0123456789abcdef").unwrap()),
        &[ContainerSpec::default()],
    )
    .unwrap();
    let options = DeleteOptions::default();
    let now = Now::from_unix_millis(1_000_000);
    let mut states: Vec<Lc> = black_box((0..ROUND).map(|_| template.clone()).collect());
    let mut actions = 0usize;
    for _ in 0..DELETES / ROUND {
        for pod in states.iter_mut() {
            *pod = template.clone();
        }
        black_box(&mut states);
        if mode == 0 {
            continue;
        }
        for pod in states.iter_mut() {
            let input = if mode == 1 {
                Input::Delete(black_box(&options).clone())
            } else {
                Input::Delete(DeleteOptions::default())
            };
            let reply = pod.handle(black_box(now), input).delete().unwrap();
            black_box(&reply);
            actions += usize::from(black_box(pod.poll_action()).is_some());
        }
    }
    println!(
        "{actions} actions after {} deletes",
        DELETES / ROUND * ROUND
    );
}
