//! `Table` against a `Vec` of lifecycles. See `grace_fuzz::table`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: grace_fuzz::table::Input| {
    grace_fuzz::table::run(&input);
});
