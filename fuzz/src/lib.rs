//! Shared code of grace's fuzz targets: input generation ([`input`]) and
//! one harness per target. The reference model ([`reference`]), the
//! invariant checker and the reference table come from grace-testkit,
//! which grace-core's tests use too. Each target
//! in `fuzz_targets/` is a thin `fuzz_target!` around a `run` here, so the
//! harnesses can also be unit-tested and replayed with `cargo test`.

pub mod differential;
pub mod input;
pub mod lifecycle;
pub mod math;
pub mod request;
pub mod store_recovery;
pub mod table;

pub use grace_testkit::reference;

/// The `scenario_parse` target: `grace_sim::parse` on any text must not
/// panic; a scenario it accepts must simulate without panicking, and the
/// timeline must print in both formats.
pub fn scenario(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(scenario) = grace_sim::parse(text) else {
        return;
    };
    if let Ok(timeline) = grace_sim::simulate(&scenario) {
        let _ = timeline.to_json_lines();
        let _ = timeline.to_text();
    }
}
