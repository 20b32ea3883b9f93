//! The runtime on the in-memory store with faults between any write and
//! its action. See `grace_fuzz::store_recovery`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: grace_fuzz::store_recovery::Input| {
    grace_fuzz::store_recovery::run(&input);
});
