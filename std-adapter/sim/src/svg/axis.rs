//! The axis: unix milliseconds to x, with a tick step of 1, 2 or 5 × a
//! power of ten.

use super::*;

pub(super) struct Axis {
    /// t = 0, unix ms.
    pub(super) start_ms: i64,
    /// The right edge, ms after `start_ms` (≥ 1000).
    pub(super) edge_ms: f64,
    /// Tick spacing, ms (1, 2 or 5 × a power of ten, ≥ 100).
    pub(super) step_ms: f64,
    /// The scenario's `until`, relative, when it lies past the right edge.
    pub(super) clipped_until_ms: Option<i64>,
}

impl Axis {
    pub(super) fn new(timeline: &Timeline, options: &SvgOptions) -> Self {
        let start_ms = timeline.start_ms;
        let last = timeline
            .entries
            .iter()
            .map(|e| e.at_ms.saturating_sub(start_ms).max(0))
            .max()
            .unwrap_or(0);
        let until = options.until_ms.map(|u| u.saturating_sub(start_ms));
        let mut clipped_until_ms = None;
        let end = match until {
            Some(u) if u > last => {
                let cap = last.saturating_mul(4).max(last.saturating_add(10_000));
                if u > cap {
                    clipped_until_ms = Some(u);
                }
                // The requested edge: no padding.
                u.min(cap) as f64
            }
            _ => {
                let end = last as f64;
                end + (end * 0.05).max(1000.0)
            }
        };
        let end = end.max(1000.0);
        let step_ms = nice_step(end / MAX_STEPS);
        let edge_ms = (end / step_ms).ceil() * step_ms;
        Axis {
            start_ms,
            edge_ms: if edge_ms.is_finite() && edge_ms >= 1000.0 {
                edge_ms
            } else {
                end
            },
            step_ms,
            clipped_until_ms,
        }
    }

    /// Milliseconds after t = 0, clamped to the axis.
    pub(super) fn rel(&self, at_ms: i64) -> f64 {
        (at_ms.saturating_sub(self.start_ms).max(0) as f64).min(self.edge_ms)
    }

    /// The x of an absolute time.
    pub(super) fn x(&self, at_ms: i64) -> f64 {
        self.x_rel(self.rel(at_ms))
    }

    /// The x of a time relative to t = 0.
    pub(super) fn x_rel(&self, rel_ms: f64) -> f64 {
        X0 + rel_ms.clamp(0.0, self.edge_ms) / self.edge_ms * (X1 - X0)
    }

    /// The right edge as a unix time (saturating).
    pub(super) fn edge_unix_ms(&self) -> i64 {
        // `as` saturates; the edge is finite and non-negative.
        self.start_ms.saturating_add(self.edge_ms as i64)
    }
}

/// The smallest 1, 2 or 5 × 10^k milliseconds (≥ 100 ms) at least `raw`.
pub(super) fn nice_step(raw: f64) -> f64 {
    let mut magnitude = 100.0;
    // 10^2 .. 10^21 ms covers every i64 span.
    for _ in 0..20 {
        for m in [1.0, 2.0, 5.0] {
            if m * magnitude >= raw {
                return m * magnitude;
            }
        }
        magnitude *= 10.0;
    }
    magnitude
}
