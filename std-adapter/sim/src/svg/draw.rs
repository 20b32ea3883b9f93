//! Rendering: the lanes, marks, axis and legend written as SVG text.

use std::fmt::Write as _;

use super::*;

pub(super) fn render(
    t: &Timeline,
    axis: &Axis,
    record: &Lane,
    containers: &[Lane],
    marks: &[Mark],
) -> String {
    let labels = place_labels(marks, axis);
    let label_rows = labels
        .iter()
        .map(|l| l.row.saturating_add(1))
        .max()
        .unwrap_or(1);
    let lanes_top = 58.0 + label_rows as f64 * LABEL_ROW_H + 8.0;
    let ids = lane_ids(record, containers);
    let lanes: Vec<(&Lane, &str, f64)> = std::iter::once(record)
        .chain(containers)
        .zip(&ids)
        .enumerate()
        .map(|(i, (lane, id))| (lane, id.as_str(), lanes_top + i as f64 * LANE_H))
        .collect();
    let lanes_bottom = lanes_top + lanes.len() as f64 * LANE_H;
    let axis_y = lanes_bottom + 6.0;
    let legend_top = axis_y + 48.0;
    let mut legend = String::new();
    let legend_h = render_legend(&mut legend, legend_top);
    let height = legend_top + legend_h + 10.0;

    let mut out = String::new();
    render_heading(&mut out, t, axis, height);
    render_backgrounds(&mut out, &lanes);
    let _ = writeln!(out, "</g>\n<g id=\"guides\">");
    for (m, l) in marks.iter().zip(&labels) {
        render_guide(&mut out, axis, m, l, lanes_top, axis_y);
    }
    let _ = writeln!(out, "</g>\n<g id=\"lanes\">");
    for (i, (lane, id, y)) in lanes.iter().enumerate() {
        render_lane(&mut out, axis, lane, id, i == 0, *y);
    }
    // Labels last, on a white halo, so no line crosses their text.
    let _ = writeln!(out, "</g>\n<g id=\"marks\">");
    for (m, l) in marks.iter().zip(&labels) {
        render_mark_label(&mut out, axis, m, l, lanes_top);
    }
    let _ = writeln!(out, "</g>");
    render_axis(&mut out, axis, axis_y);
    out.push_str(&legend);
    out.push_str("</svg>\n");
    out
}

/// Lane ids: the record first, then the containers, all distinct.
pub(super) fn lane_ids(record: &Lane, containers: &[Lane]) -> Vec<String> {
    let mut ids = vec![record.id.clone()];
    for (i, lane) in containers.iter().enumerate() {
        let id = lane_id(&lane.name, i, &ids);
        ids.push(id);
    }
    ids
}

/// The `<svg>` element, its background, the title and the subtitle.
pub(super) fn render_heading(out: &mut String, t: &Timeline, axis: &Axis, height: f64) {
    let (width, height) = (num(WIDTH), num(height));
    let tip = title(&format!("{}: graceful deletion timeline", t.name));
    let _ = writeln!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" font-size="11">{tip}"##
    );
    let _ = writeln!(
        out,
        r##"<rect class="background" width="{width}" height="{height}" fill="#ffffff"/>"##
    );
    let heading = esc(&format!("{} — graceful deletion", truncate(&t.name, 80)));
    let _ = writeln!(
        out,
        r##"<text id="title" x="16" y="26" font-size="16" font-weight="bold" fill="#1a1a1a">{heading}</text>"##
    );
    let containers_list = if t.containers.is_empty() {
        "none".to_string()
    } else {
        t.containers.join(", ")
    };
    let mut subtitle = format!(
        "node {} · containers: {containers_list} · t = 0 is unix {} · starts {}",
        t.node.as_deref().unwrap_or("none"),
        plain_seconds(t.start_ms),
        t.initial_phase
    );
    if let Some(u) = axis.clipped_until_ms {
        let _ = write!(subtitle, " · until {} (axis clipped)", relative_label(u));
    }
    let subtitle = esc(&truncate(&subtitle, 150));
    let _ = writeln!(
        out,
        r##"<text id="subtitle" x="16" y="44" fill="#555555">{subtitle}</text>"##
    );
}

/// Lane backgrounds (the record's tinted, the containers' alternating),
/// drawn first so the guide lines and bars sit on them.
pub(super) fn render_backgrounds(out: &mut String, lanes: &[(&Lane, &str, f64)]) {
    let _ = writeln!(out, "<g id=\"lane-backgrounds\">");
    let (w, h) = (num(X1 + 2.0), num(LANE_H));
    for (i, (_, _, y)) in lanes.iter().enumerate() {
        let fill = match i {
            0 => "#eef2f8",
            i if i % 2 == 1 => "#f7f7f7",
            _ => "#fdfdfd",
        };
        let y = num(*y);
        let _ = writeln!(
            out,
            r#"<rect x="8" y="{y}" width="{w}" height="{h}" fill="{fill}"/>"#
        );
    }
}

/// A marked time's dashed line, from its label's row down to the axis.
pub(super) fn render_guide(
    out: &mut String,
    axis: &Axis,
    m: &Mark,
    l: &PlacedLabel,
    lanes_top: f64,
    axis_y: f64,
) {
    let x = num(axis.x(m.at_ms));
    let ms = m.at_ms.saturating_sub(axis.start_ms).max(0);
    let top = num(lanes_top - 4.0 - l.row as f64 * LABEL_ROW_H);
    let bottom = num(axis_y);
    let (class, colour) = m.kind.style();
    let _ = writeln!(
        out,
        r#"<line class="guide {class}" data-ms="{ms}" x1="{x}" y1="{top}" x2="{x}" y2="{bottom}" stroke="{colour}" stroke-dasharray="3 3" opacity="0.7"/>"#
    );
}

/// A marked time's label, in the row and on the side placed for it.
pub(super) fn render_mark_label(
    out: &mut String,
    axis: &Axis,
    m: &Mark,
    l: &PlacedLabel,
    lanes_top: f64,
) {
    let x = axis.x(m.at_ms);
    let (tx, anchor) = match l.anchor_end {
        true => (num(x - 3.0), "end"),
        false => (num(x + 3.0), "start"),
    };
    let y = num(lanes_top - 6.0 - l.row as f64 * LABEL_ROW_H);
    let ms = m.at_ms.saturating_sub(axis.start_ms).max(0);
    let ((class, colour), text) = (m.kind.style(), esc(&l.text));
    let _ = writeln!(
        out,
        r##"<text class="mark {class}" data-ms="{ms}" x="{tx}" y="{y}" text-anchor="{anchor}" fill="{colour}" stroke="#ffffff" stroke-width="3" paint-order="stroke">{text}</text>"##
    );
}

/// Where a lane sits: its top, its middle and its bars' top.
#[derive(Clone, Copy)]
pub(super) struct LaneY {
    pub(super) top: f64,
    pub(super) mid: f64,
    pub(super) bar: f64,
}

pub(super) fn render_lane(
    out: &mut String,
    axis: &Axis,
    lane: &Lane,
    id: &str,
    is_record: bool,
    y: f64,
) {
    let mid = y + LANE_H / 2.0;
    let at = LaneY {
        top: y,
        mid,
        bar: mid - BAR_H / 2.0,
    };
    render_lane_label(out, lane, id, is_record, at);
    render_running(out, axis, lane, is_record, at);
    for bar in &lane.bars {
        render_bar(out, axis, bar, at);
    }
    render_stops(out, axis, &lane.stops, at);
    render_kills(out, axis, &lane.kills, at);
    render_removals(out, axis, &lane.removals, at);
    render_inputs(out, axis, &lane.inputs, at);
    let _ = writeln!(out, "</g>");
}

/// `at` relative to the axis's start (`+4 s`).
pub(super) fn rel(axis: &Axis, at: i64) -> String {
    relative_label(at.saturating_sub(axis.start_ms))
}

/// Opens the lane's group and writes its name at the left.
pub(super) fn render_lane_label(
    out: &mut String,
    lane: &Lane,
    id: &str,
    is_record: bool,
    at: LaneY,
) {
    let id = esc(id);
    if is_record {
        let _ = writeln!(out, r#"<g id="{id}" class="lane record">"#);
    } else {
        let name = esc(&lane.name);
        let _ = writeln!(
            out,
            r#"<g id="{id}" class="lane container" data-container="{name}">"#
        );
    }
    let (label_x, label_y) = (num(X0 - 10.0), num(at.mid + 4.0));
    let weight = if is_record { "bold" } else { "normal" };
    let (short, tip) = (
        esc(&truncate(&lane.name, MAX_LANE_LABEL)),
        title(&lane.name),
    );
    let _ = writeln!(
        out,
        r##"<text class="lane-label" x="{label_x}" y="{label_y}" text-anchor="end" font-size="12" font-weight="{weight}" fill="#1a1a1a">{short}{tip}</text>"##
    );
}

/// The thin line of a running process, or "no action" for a container
/// the agent never acted on.
pub(super) fn render_running(
    out: &mut String,
    axis: &Axis,
    lane: &Lane,
    is_record: bool,
    at: LaneY,
) {
    let (x0, mid) = (num(X0), num(at.mid));
    match lane.running {
        Some(until) => {
            let x2 = num(axis.x(until));
            let tip = title(&match until > axis.edge_unix_ms() {
                true => "running, still at the right edge".to_string(),
                false => format!("running until {}", rel(axis, until)),
            });
            let _ = writeln!(
                out,
                r#"<line class="running" x1="{x0}" y1="{mid}" x2="{x2}" y2="{mid}" stroke="{RUNNING}" stroke-width="2">{tip}</line>"#
            );
        }
        None if !is_record => {
            let (x, label_y) = (num(X0 + 6.0), num(at.mid + 4.0));
            let _ = writeln!(
                out,
                r##"<text class="idle" x="{x}" y="{label_y}" fill="#999999" font-style="italic">no action</text>"##
            );
        }
        None => {}
    }
}

/// One bar: its rectangle with a tooltip, an arrow when it is still open
/// at the right edge, and the longest of its labels that fits.
pub(super) fn render_bar(out: &mut String, axis: &Axis, bar: &Bar, at: LaneY) {
    let (left, right) = (axis.x(bar.from_ms), axis.x(bar.to_ms));
    let width = right - left;
    if width <= 0.0 {
        return;
    }
    let open = bar.to_ms > axis.edge_unix_ms();
    let until = match open {
        true => "(still at the right edge)".to_string(),
        false => rel(axis, bar.to_ms),
    };
    let (class, fill, text_fill, describe) = bar.kind.style();
    let mut tip = format!("{describe}: {} → {until}", rel(axis, bar.from_ms));
    if let Some(first) = bar.labels.first().filter(|l| *l != describe) {
        let _ = write!(tip, " · {first}");
    }
    let tip = title(&tip);
    let open_class = if open { " open" } else { "" };
    let (x, w, bar_y, bar_h) = (num(left), num(width), num(at.bar), num(BAR_H));
    let _ = writeln!(
        out,
        r#"<rect class="bar {class}{open_class}" x="{x}" y="{bar_y}" width="{w}" height="{bar_h}" rx="2" fill="{fill}">{tip}</rect>"#
    );
    if open && width > 12.0 {
        let (a, b, mid) = (num(right - 9.0), num(right - 4.0), num(at.mid));
        let (top, bottom) = (num(at.bar + 4.0), num(at.bar + BAR_H - 4.0));
        let _ = writeln!(
            out,
            r##"<polyline class="open-end" points="{a},{top} {b},{mid} {a},{bottom}" fill="none" stroke="#ffffff" stroke-width="1.5"/>"##
        );
    }
    let room = width - if open { 18.0 } else { 8.0 };
    if let Some(label) = bar.labels.iter().find(|l| text_width(l, 5.8) <= room) {
        let (x, y, label) = (num(left + 4.0), num(at.mid + 3.5), esc(label));
        let _ = writeln!(
            out,
            r#"<text class="bar-label" x="{x}" y="{y}" font-size="10" fill="{text_fill}">{label}</text>"#
        );
    }
}

/// A short tick where the process stopped by itself.
pub(super) fn render_stops(out: &mut String, axis: &Axis, stops: &[i64], at: LaneY) {
    let (tick_top, tick_bottom) = (num(at.mid - 5.0), num(at.mid + 5.0));
    for &when in stops {
        let (x, tip) = (
            num(axis.x(when)),
            title(&format!("stopped {}", rel(axis, when))),
        );
        let _ = writeln!(
            out,
            r#"<line class="stopped" x1="{x}" y1="{tick_top}" x2="{x}" y2="{tick_bottom}" stroke="{RUNNING}" stroke-width="2">{tip}</line>"#
        );
    }
}

/// A thick red line and a cross at each SIGKILL.
pub(super) fn render_kills(out: &mut String, axis: &Axis, kills: &[i64], at: LaneY) {
    let (kill_top, kill_bottom) = (num(at.bar - 5.0), num(at.bar + BAR_H + 5.0));
    let glyph_top = num(at.bar - 11.0);
    for &when in kills {
        let xf = axis.x(when);
        let (x, l, r) = (num(xf), num(xf - 4.0), num(xf + 4.0));
        let tip = title(&format!("SIGKILL {}", rel(axis, when)));
        let _ = writeln!(
            out,
            r#"<line class="kill" x1="{x}" y1="{kill_top}" x2="{x}" y2="{kill_bottom}" stroke="{KILL}" stroke-width="4">{tip}</line>"#
        );
        let _ = writeln!(
            out,
            r#"<path class="kill-glyph" d="M{l} {glyph_top} L{r} {kill_top} M{r} {glyph_top} L{l} {kill_top}" stroke="{KILL}" stroke-width="2"/>"#
        );
    }
}

/// A narrow block where the record was removed (forced or not).
pub(super) fn render_removals(out: &mut String, axis: &Axis, removals: &[(i64, bool)], at: LaneY) {
    let (removed_y, removed_h) = (num(at.bar - 4.0), num(BAR_H + 8.0));
    for &(when, force) in removals {
        let (class, what) = match force {
            true => ("removed force", "force-removed"),
            false => ("removed", "removed"),
        };
        let (x, tip) = (
            num(axis.x(when) - 1.5),
            title(&format!("{what} {}", rel(axis, when))),
        );
        let _ = writeln!(
            out,
            r#"<rect class="{class}" x="{x}" y="{removed_y}" width="3" height="{removed_h}" fill="{REMOVED}">{tip}</rect>"#
        );
    }
}

/// A small triangle at the lane's foot for each input, its tooltip saying
/// what it was.
pub(super) fn render_inputs(out: &mut String, axis: &Axis, inputs: &[(i64, String)], at: LaneY) {
    let (tip_y, base_y) = (num(at.top + LANE_H - 7.0), num(at.top + LANE_H - 1.0));
    for (when, what) in inputs {
        let xf = axis.x(*when);
        let (l, x, r, tip) = (num(xf - 3.5), num(xf), num(xf + 3.5), title(what));
        let _ = writeln!(
            out,
            r#"<polygon class="input" points="{l},{base_y} {r},{base_y} {x},{tip_y}" fill="{INPUT}">{tip}</polygon>"#
        );
    }
}

pub(super) fn render_axis(out: &mut String, axis: &Axis, y: f64) {
    let (start, edge) = (axis.start_ms, num(axis.edge_ms));
    let (x0, x1, y0, y5, y17) = (num(X0), num(X1), num(y), num(y + 5.0), num(y + 17.0));
    let _ = writeln!(
        out,
        r##"<g id="axis" data-start-ms="{start}" data-edge-ms="{edge}">
<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="#444444"/>"##
    );
    let steps = (axis.edge_ms / axis.step_ms).round().clamp(1.0, 1000.0) as u32;
    for i in 0..=steps {
        let ms = f64::from(i) * axis.step_ms;
        let (x, data, label) = (num(axis.x_rel(ms)), num(ms), tick_label(ms, axis.step_ms));
        let _ = writeln!(
            out,
            r##"<g class="tick" data-ms="{data}"><line x1="{x}" y1="{y0}" x2="{x}" y2="{y5}" stroke="#444444"/><text x="{x}" y="{y17}" text-anchor="middle" fill="#444444">{label}</text></g>"##
        );
    }
    let (cx, cy) = (num((X0 + X1) / 2.0), num(y + 33.0));
    let _ = writeln!(
        out,
        r##"<text x="{cx}" y="{cy}" text-anchor="middle" fill="#555555">seconds since the first event</text>
</g>"##
    );
}

/// How a legend entry is drawn.
pub(super) enum Swatch {
    /// A bar of this colour.
    Bar(&'static str),
    /// A horizontal line: colour, width.
    Line(&'static str, &'static str),
    /// A vertical line: colour, width, dashes.
    Tall(&'static str, &'static str, &'static str),
    /// The input-event triangle.
    Input,
}

pub(super) const LEGEND: [(Swatch, &str); 10] = [
    (Swatch::Bar(PENDING), "pending (agent not started)"),
    (Swatch::Bar(TERMINATING), "Terminating"),
    (Swatch::Bar(FINALIZER), "finalizer wait"),
    (Swatch::Bar(PRE_STOP), "pre-stop hook"),
    (Swatch::Bar(SIGTERM), "SIGTERM window"),
    (Swatch::Tall(KILL, "4", "none"), "SIGKILL"),
    (Swatch::Line(RUNNING, "2"), "process running"),
    (Swatch::Line(REMOVED, "3"), "record removed"),
    (Swatch::Tall(DELETE, "1", "3 3"), "delete request"),
    (Swatch::Input, "input event"),
];

/// Draws the legend from `top`, wrapping; returns its height.
pub(super) fn render_legend(out: &mut String, top: f64) -> f64 {
    let _ = writeln!(out, "<g id=\"legend\">");
    let (mut x, mut y) = (16.0, top);
    for (swatch, label) in &LEGEND {
        let advance = 38.0 + text_width(label, 6.0);
        if x + advance > WIDTH - 8.0 {
            (x, y) = (16.0, y + 18.0);
        }
        let (left, right, centre) = (num(x), num(x + 16.0), num(x + 8.0));
        let (top, mid, bottom, high, low) = (
            num(y),
            num(y + 5.0),
            num(y + 9.0),
            num(y - 2.0),
            num(y + 12.0),
        );
        let _ = match swatch {
            Swatch::Bar(fill) => writeln!(
                out,
                r#"<rect x="{left}" y="{top}" width="16" height="10" rx="2" fill="{fill}"/>"#
            ),
            Swatch::Line(stroke, width) => writeln!(
                out,
                r#"<line x1="{left}" y1="{mid}" x2="{right}" y2="{mid}" stroke="{stroke}" stroke-width="{width}"/>"#
            ),
            Swatch::Tall(stroke, width, dashes) => writeln!(
                out,
                r#"<line x1="{centre}" y1="{high}" x2="{centre}" y2="{low}" stroke="{stroke}" stroke-width="{width}" stroke-dasharray="{dashes}"/>"#
            ),
            Swatch::Input => {
                let (l, r, apex) = (num(x + 4.5), num(x + 11.5), num(y + 3.0));
                writeln!(
                    out,
                    r#"<polygon points="{l},{bottom} {r},{bottom} {centre},{apex}" fill="{INPUT}"/>"#
                )
            }
        };
        let (tx, label) = (num(x + 22.0), esc(label));
        let _ = writeln!(
            out,
            r##"<text x="{tx}" y="{bottom}" fill="#333333">{label}</text>"##
        );
        x += advance;
    }
    let _ = writeln!(out, "</g>");
    y - top + 14.0
}
