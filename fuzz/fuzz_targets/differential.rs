//! The core's decisions against the reference model. See
//! `grace_fuzz::differential` and `grace_fuzz::reference`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: grace_fuzz::differential::Input| {
    grace_fuzz::differential::run(&input);
});
