//! `grace simulate --format svg`: a [`Timeline`] as a picture, written by
//! hand as SVG text.
//!
//! One lane for the record (the API level) and one per container, in
//! declaration order; bars for the phases (pending, Terminating, finalizer
//! wait; pre-stop hook, SIGTERM window), a distinct mark at each SIGKILL,
//! labelled guide lines at the delete requests, SIGTERMs, SIGKILLs and the
//! removal, and an axis in seconds since the first event.
//!
//! The output is deterministic (same timeline, same bytes) and every
//! coordinate is finite: times are clamped to the axis, which is at least
//! one second long, and a scenario `until` far past the last entry is
//! clipped rather than squashing the picture.
//!
//! Elements carry ids and classes a program can find: lanes are
//! `<g id="lane-record" class="lane record">` and
//! `<g id="lane-NAME" class="lane container" data-container="NAME">`; bars
//! are `<rect class="bar KIND">` with `KIND` one of `pending`,
//! `terminating`, `finalizer-wait`, `pre-stop`, `sigterm`; a SIGKILL is a
//! `<line class="kill">` at its time; the axis is `<g id="axis">` with one
//! `<g class="tick" data-ms="..">` per tick.

mod axis;
mod draw;
mod lanes;
mod marks;
mod text;

use axis::*;
use draw::*;
use lanes::*;
use marks::*;
use text::*;

use crate::scenario::Scenario;
use crate::timeline::Timeline;

/// What the picture may know beyond the timeline itself (the scenario's
/// world model). [`SvgOptions::default`] knows nothing more.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SvgOptions {
    /// The scenario's `until`, unix milliseconds. When later than the last
    /// entry it becomes the right edge, clipped at four times the entries'
    /// span (at least 10 s past the last entry).
    pub until_ms: Option<i64>,
    /// How long each container's pre-stop hook runs (by index), in
    /// milliseconds. With it, a pre-stop bar ends where the hook returned;
    /// without it, at the container's next signal.
    pub hook_ms: Vec<Option<i64>>,
}

impl SvgOptions {
    /// The options a scenario gives: its `until` and its hooks' durations.
    pub fn of(scenario: &Scenario) -> Self {
        SvgOptions {
            until_ms: scenario.until_ms,
            hook_ms: scenario.containers.iter().map(|c| c.pre_stop_ms).collect(),
        }
    }
}

impl Timeline {
    /// The timeline as an SVG picture, from the timeline alone.
    pub fn to_svg(&self) -> String {
        self.to_svg_with(&SvgOptions::default())
    }

    /// The timeline as an SVG picture, using what `options` add.
    pub fn to_svg_with(&self, options: &SvgOptions) -> String {
        let axis = Axis::new(self, options);
        let record = record_lane(self);
        let containers: Vec<Lane> = (0..self.containers.len())
            .map(|i| container_lane(self, i, options))
            .collect();
        let marks = marks(self);
        render(self, &axis, &record, &containers, &marks)
    }
}

// ---------------------------------------------------------------------------
// Layout and colours.

const WIDTH: f64 = 960.0;
/// The plot's left and right edges.
const X0: f64 = 160.0;
const X1: f64 = 930.0;
const LANE_H: f64 = 36.0;
const BAR_H: f64 = 16.0;
const LABEL_ROW_H: f64 = 15.0;
const MAX_LABEL_ROWS: usize = 6;
/// Approximate advance of one character at the 11 px label size.
const CHAR_W: f64 = 6.3;
/// Most steps between ticks on the axis.
const MAX_STEPS: f64 = 10.0;
/// The longest lane name shown in full.
const MAX_LANE_LABEL: usize = 20;

const PENDING: &str = "#f5b83d";
const TERMINATING: &str = "#a9c4e8";
const FINALIZER: &str = "#7e57c2";
const PRE_STOP: &str = "#26a69a";
const SIGTERM: &str = "#ef6c00";
const KILL: &str = "#c62828";
const RUNNING: &str = "#8d8d8d";
const REMOVED: &str = "#212121";
const DELETE: &str = "#1565c0";
const INPUT: &str = "#616161";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_short_and_finite() {
        assert_eq!(num(-0.0), "0");
        assert_eq!(num(f64::NAN), "0");
        assert_eq!(num(f64::INFINITY), "0");
        assert_eq!(num(12.5), "12.5");
        assert_eq!(num(3.0), "3");
        assert_eq!(sci(9.223372036854776e18), "9.2e18");
        assert_eq!(count_label(i64::MAX), "9.2e18 s");
        assert_eq!(seconds_label(11_500), "11.5 s");
        assert_eq!(seconds_label(30_000), "30 s");
    }

    #[test]
    fn steps_are_one_two_five() {
        assert_eq!(nice_step(3_360.0), 5_000.0);
        assert_eq!(nice_step(1_100.0), 2_000.0);
        assert_eq!(nice_step(50.0), 100.0);
        assert!(nice_step(f64::MAX).is_finite());
    }

    #[test]
    fn escaping_removes_what_xml_forbids() {
        assert_eq!(esc("a<b>&\"'\u{1}"), "a&lt;b&gt;&amp;&quot;&apos;\u{fffd}");
    }
}
