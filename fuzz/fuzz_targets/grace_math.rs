//! Grace arithmetic and time conversions on extreme values. See
//! `grace_fuzz::math`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|cases: Vec<grace_fuzz::math::Case>| {
    grace_fuzz::math::run(&cases);
});
