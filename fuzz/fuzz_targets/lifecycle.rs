//! One object, any sequence of inputs and time jumps; the
//! invariants of core/RULES.md checked after every step. See `grace_fuzz::lifecycle`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: grace_fuzz::lifecycle::Input| {
    grace_fuzz::lifecycle::run(&input);
});
