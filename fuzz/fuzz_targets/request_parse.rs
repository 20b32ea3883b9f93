//! The agent's socket protocol: `grace_agent::api::read_request` on any
//! byte stream, against a model. See `grace_fuzz::request`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    grace_fuzz::request::run(data);
});
