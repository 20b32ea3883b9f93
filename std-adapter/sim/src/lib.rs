//! # grace-sim
//!
//! The simulator of grace's deletion semantics. A scenario ([`Scenario`]:
//! one object and a list of timed inputs, read by [`parse`] from the
//! format in [`scenario_format`]) is replayed on grace-core with simulated
//! time by [`simulate()`], and the [`Timeline`] of what happened prints as
//! text, as JSON lines (a stable format) or as an SVG picture ([`svg`]).
//!
//! It needs only grace-core: no processes, no store, no clock. The
//! `grace simulate` command of the `grace` binary is its front end.
//!
//! ```
//! let text = r#"{"object": {"name": "web-0", "node": "node-a",
//!                           "containers": [{"name": "app", "exits_after_sigterm_seconds": 4}]},
//!                "events": [{"at": 1000, "delete": null}, {"at": 1001, "agent_sync": {}}]}"#;
//! let scenario = grace_sim::parse(text)?;
//! let timeline = grace_sim::simulate(&scenario)?;
//! assert!(timeline.to_text().contains("SIGTERM"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub mod scenario;
pub mod simulate;
pub mod svg;
pub mod timeline;

pub use scenario::{Scenario, ScenarioError, parse};
pub use simulate::{SimulateError, simulate};
pub use timeline::Timeline;

/// The scenario file format that [`parse`] reads, and the JSON lines
/// [`Timeline::to_json_lines`] writes: a public contract, as the
/// repository's `docs/scenarios.md` states it (the page is outside the
/// published package, so only a build from a checkout shows it here).
#[cfg_attr(grace_repository_docs, doc = include_str!("../../../docs/scenarios.md"))]
pub mod scenario_format {}

// The crate README's example is compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
