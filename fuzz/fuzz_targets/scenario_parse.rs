//! `grace_std::parse` on arbitrary bytes, then `simulate`. See
//! `grace_fuzz::scenario`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    grace_fuzz::scenario(data);
});
