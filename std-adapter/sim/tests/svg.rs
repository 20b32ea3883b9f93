//! The picture of a timeline (`grace simulate --format svg`), parsed back
//! as XML. Positions are checked against the axis the picture itself draws:
//! the tick labelled `+0 s` and the last tick give the transform from
//! seconds to x, and every bar and mark must sit where its time says.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use std::path::{Path, PathBuf};

use grace_sim::svg::SvgOptions;
use roxmltree::{Document, Node};

const SVG_NS: &str = "http://www.w3.org/2000/svg";
/// Half a hundredth of a pixel: coordinates are written with two decimals.
const EPSILON: f64 = 0.011;

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scenarios")
}

fn render_text(text: &str) -> String {
    let scenario = grace_sim::parse(text).expect("scenario parses");
    let timeline = grace_sim::simulate(&scenario).expect("scenario simulates");
    timeline.to_svg_with(&SvgOptions::of(&scenario))
}

fn render(name: &str) -> String {
    let path = scenarios_dir().join(format!("{name}.json"));
    render_text(&std::fs::read_to_string(&path).expect("scenario readable"))
}

fn parse(svg: &str) -> Document<'_> {
    let doc = Document::parse(svg).unwrap_or_else(|e| panic!("not well-formed XML: {e}\n{svg}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(root.tag_name().namespace(), Some(SVG_NS));
    doc
}

fn attr(node: Node<'_, '_>, name: &str) -> f64 {
    let value = node
        .attribute(name)
        .unwrap_or_else(|| panic!("<{}> has no {name}", node.tag_name().name()));
    value
        .parse()
        .unwrap_or_else(|_| panic!("{name}={value:?} is not a number"))
}

fn has_class(node: Node<'_, '_>, class: &str) -> bool {
    node.attribute("class")
        .is_some_and(|c| c.split_whitespace().any(|c| c == class))
}

fn by_id<'a, 'i>(doc: &'a Document<'i>, id: &str) -> Node<'a, 'i> {
    doc.descendants()
        .find(|n| n.attribute("id") == Some(id))
        .unwrap_or_else(|| panic!("no element with id {id}"))
}

fn with_class<'a, 'i>(node: Node<'a, 'i>, class: &str) -> Vec<Node<'a, 'i>> {
    node.descendants()
        .filter(|n| has_class(*n, class))
        .collect()
}

/// The picture's own axis: seconds to x, from its tick labels.
struct Scale {
    x0: f64,
    per_second: f64,
    last_tick_seconds: f64,
}

impl Scale {
    fn of(doc: &Document<'_>) -> Scale {
        let ticks: Vec<(f64, f64)> = with_class(by_id(doc, "axis"), "tick")
            .into_iter()
            .map(|tick| {
                let line = tick
                    .children()
                    .find(|n| n.has_tag_name("line"))
                    .expect("a tick has a line");
                let label = tick
                    .children()
                    .find(|n| n.has_tag_name("text"))
                    .and_then(|t| t.text())
                    .expect("a tick has a label");
                let seconds: f64 = label
                    .trim_start_matches('+')
                    .trim_end_matches(" s")
                    .parse()
                    .unwrap_or_else(|_| panic!("tick label {label:?}"));
                (seconds, attr(line, "x1"))
            })
            .collect();
        assert!(ticks.len() >= 2, "an axis has at least two ticks");
        let (first, last) = (ticks[0], ticks[ticks.len() - 1]);
        assert_eq!(first.0, 0.0, "the axis starts at +0 s");
        let per_second = (last.1 - first.1) / (last.0 - first.0);
        assert!(per_second.is_finite() && per_second > 0.0);
        let scale = Scale {
            x0: first.1,
            per_second,
            last_tick_seconds: last.0,
        };
        for (seconds, x) in &ticks {
            scale.assert_at(*x, *seconds, "tick");
        }
        scale
    }

    fn x(&self, seconds: f64) -> f64 {
        self.x0 + seconds * self.per_second
    }

    fn assert_at(&self, x: f64, seconds: f64, what: &str) {
        let expected = self.x(seconds);
        assert!(
            (x - expected).abs() <= EPSILON,
            "{what}: x = {x}, expected {expected} (+{seconds} s)"
        );
    }
}

/// A bar's start and end, in x.
fn span(bar: Node<'_, '_>) -> (f64, f64) {
    let x = attr(bar, "x");
    (x, x + attr(bar, "width"))
}

fn bars<'a, 'i>(lane: Node<'a, 'i>, kind: &str) -> Vec<Node<'a, 'i>> {
    with_class(lane, kind)
        .into_iter()
        .filter(|n| has_class(*n, "bar"))
        .collect()
}

fn only<'a, 'i>(nodes: Vec<Node<'a, 'i>>, what: &str) -> Node<'a, 'i> {
    assert_eq!(nodes.len(), 1, "exactly one {what}");
    nodes[0]
}

/// Asserts a bar of `kind` in `lane` spans `from`..`to` seconds.
fn assert_bar(scale: &Scale, lane: Node<'_, '_>, kind: &str, from: f64, to: f64) {
    let bars = bars(lane, kind);
    let found = bars.iter().any(|b| {
        let (x, end) = span(*b);
        (x - scale.x(from)).abs() <= EPSILON && (end - scale.x(to)).abs() <= 2.0 * EPSILON
    });
    let spans: Vec<_> = bars.iter().map(|b| span(*b)).collect();
    assert!(
        found,
        "{kind} bar +{from} s → +{to} s (x {} → {}) in {:?}; bars: {spans:?}",
        scale.x(from),
        scale.x(to),
        lane.attribute("id")
    );
}

fn kill_xs(lane: Node<'_, '_>) -> Vec<f64> {
    with_class(lane, "kill")
        .into_iter()
        .filter(|n| n.has_tag_name("line"))
        .map(|n| {
            assert_eq!(attr(n, "x1"), attr(n, "x2"), "a kill mark is vertical");
            attr(n, "x1")
        })
        .collect()
}

fn container_lanes<'a, 'i>(doc: &'a Document<'i>) -> Vec<Node<'a, 'i>> {
    doc.descendants()
        .filter(|n| has_class(*n, "lane") && has_class(*n, "container"))
        .collect()
}

fn mark_labels(doc: &Document<'_>) -> Vec<String> {
    with_class(by_id(doc, "marks"), "mark")
        .into_iter()
        .filter_map(|n| n.text().map(str::to_string))
        .collect()
}

const NUMERIC: [&str; 17] = [
    "x",
    "y",
    "width",
    "height",
    "x1",
    "y1",
    "x2",
    "y2",
    "rx",
    "opacity",
    "font-size",
    "stroke-width",
    "data-ms",
    "data-start-ms",
    "data-edge-ms",
    "points",
    "viewBox",
];

/// Every coordinate is a finite number; no attribute says NaN or inf.
fn assert_all_finite(doc: &Document<'_>) {
    let width = attr(doc.root_element(), "width");
    for node in doc.descendants().filter(|n| n.is_element()) {
        for a in node.attributes() {
            let value = a.value();
            assert!(
                !value.contains("NaN") && !value.contains("inf"),
                "{}={value:?}",
                a.name()
            );
            if !NUMERIC.contains(&a.name()) {
                continue;
            }
            for part in value.split([' ', ',']).filter(|p| !p.is_empty()) {
                let v: f64 = part
                    .parse()
                    .unwrap_or_else(|_| panic!("{}={value:?} is not numeric", a.name()));
                assert!(v.is_finite(), "{}={value:?}", a.name());
                if matches!(a.name(), "x" | "x1" | "x2") {
                    assert!(
                        (-1.0..=width + 1.0).contains(&v),
                        "{}={v} is off the picture",
                        a.name()
                    );
                }
            }
        }
        if node.has_tag_name("path") {
            let d = node.attribute("d").unwrap_or_default();
            for part in d
                .split(|c: char| c.is_ascii_alphabetic() || c == ' ')
                .filter(|p| !p.is_empty())
            {
                let v: f64 = part.parse().expect("path coordinates are numbers");
                assert!(v.is_finite(), "d={d:?}");
            }
        }
    }
}

#[test]
fn every_golden_scenario_is_well_formed_svg_with_a_lane_per_container_and_no_nan() {
    let mut names: Vec<String> = std::fs::read_dir(scenarios_dir())
        .expect("examples/scenarios exists")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 5);
    for name in names {
        let svg = render(&name);
        let doc = parse(&svg);
        assert_all_finite(&doc);
        let scenario = grace_sim::parse(
            &std::fs::read_to_string(scenarios_dir().join(format!("{name}.json"))).unwrap(),
        )
        .unwrap();
        let lanes = container_lanes(&doc);
        assert_eq!(lanes.len(), scenario.containers.len(), "{name}");
        for (lane, container) in lanes.iter().zip(&scenario.containers) {
            assert_eq!(lane.attribute("data-container"), Some(&*container.name));
        }
        assert!(has_class(by_id(&doc, "lane-record"), "record"), "{name}");
        by_id(&doc, "legend");
        let title = by_id(&doc, "title").text().unwrap_or_default();
        assert!(title.contains(&scenario.name), "{name}: title {title:?}");
        Scale::of(&doc);
    }
}

#[test]
fn prestop_hangs_sigterm_at_30_s_and_sigkill_at_32_s() {
    let svg = render("prestop_hangs");
    let doc = parse(&svg);
    let scale = Scale::of(&doc);
    let app = by_id(&doc, "lane-app");
    // The hook outlives its 30 s budget: cut at +30 s, SIGTERM, SIGKILL 2 s later.
    assert_bar(&scale, app, "pre-stop", 0.0, 30.0);
    assert_bar(&scale, app, "sigterm", 30.0, 32.0);
    let kills = kill_xs(app);
    assert_eq!(kills.len(), 1);
    scale.assert_at(kills[0], 32.0, "SIGKILL");
    // The guide lines at the labelled marks.
    let guide = |class: &str| {
        only(
            with_class(by_id(&doc, "guides"), class),
            &format!("{class} guide"),
        )
    };
    scale.assert_at(attr(guide("sigterm"), "x1"), 30.0, "SIGTERM mark");
    scale.assert_at(attr(guide("sigkill"), "x1"), 32.0, "SIGKILL mark");
    scale.assert_at(attr(guide("removed"), "x1"), 32.0, "removal mark");
    scale.assert_at(attr(guide("delete"), "x1"), 0.0, "delete mark");
    let labels = mark_labels(&doc);
    for expected in [
        "app: SIGTERM +30 s",
        "app: SIGKILL +32 s",
        "removed +32 s",
        "delete (grace 30 s) +0 s",
    ] {
        assert!(
            labels.iter().any(|l| l == expected),
            "{expected}: {labels:?}"
        );
    }
    // The record: Terminating from the agent's start to the removal.
    let record = by_id(&doc, "lane-record");
    assert_bar(&scale, record, "terminating", 0.0, 32.0);
    let removed = only(with_class(record, "removed"), "removal");
    scale.assert_at(
        attr(removed, "x") + attr(removed, "width") / 2.0,
        32.0,
        "removal",
    );
    assert!(bars(record, "pending").is_empty(), "pending lasted 0 s");
    // The right edge: past the last entry, on a tick.
    assert!(scale.last_tick_seconds >= 32.0 && scale.last_tick_seconds <= 40.0);
}

#[test]
fn sidecars_three_lanes_in_declaration_order_stopped_after_the_main_container() {
    let svg = render("sidecars");
    let doc = parse(&svg);
    let scale = Scale::of(&doc);
    let lanes = container_lanes(&doc);
    let names: Vec<_> = lanes
        .iter()
        .map(|l| l.attribute("data-container").unwrap())
        .collect();
    assert_eq!(names, ["proxy", "logs", "app"]);
    let ids: Vec<_> = lanes.iter().map(|l| l.attribute("id").unwrap()).collect();
    assert_eq!(ids, ["lane-proxy", "lane-logs", "lane-app"]);
    // The record lane comes first, then the containers, top to bottom.
    let all: Vec<_> = doc
        .descendants()
        .filter(|n| has_class(*n, "lane"))
        .map(|n| n.attribute("id").unwrap())
        .collect();
    assert_eq!(all, ["lane-record", "lane-proxy", "lane-logs", "lane-app"]);
    let y_of = |id: &str| {
        let label = with_class(by_id(&doc, id), "lane-label")[0];
        attr(label, "y")
    };
    assert!(y_of("lane-record") < y_of("lane-proxy"));
    assert!(y_of("lane-proxy") < y_of("lane-logs"));
    assert!(y_of("lane-logs") < y_of("lane-app"));

    let (proxy, logs, app) = (lanes[0], lanes[1], lanes[2]);
    assert_bar(&scale, app, "pre-stop", 0.0, 3.0);
    assert_bar(&scale, app, "sigterm", 3.0, 8.0);
    assert!(bars(logs, "pre-stop").is_empty(), "logs has no hook");
    assert_bar(&scale, logs, "sigterm", 8.0, 9.0);
    // The proxy's 1 s hook returns at +1 s; its SIGTERM waits for app and logs.
    assert_bar(&scale, proxy, "pre-stop", 0.0, 1.0);
    assert_bar(&scale, proxy, "sigterm", 9.0, 10.0);
    for lane in lanes {
        assert!(kill_xs(lane).is_empty(), "every process exits in time");
    }
}

#[test]
fn finalizers_the_record_waits_from_the_stop_to_the_removal() {
    let svg = render("finalizers");
    let doc = parse(&svg);
    let scale = Scale::of(&doc);
    let record = by_id(&doc, "lane-record");
    assert_bar(&scale, record, "pending", 0.0, 1.0);
    assert_bar(&scale, record, "terminating", 1.0, 9.0);
    assert_bar(&scale, record, "finalizer-wait", 9.0, 30.0);
    let wait = only(bars(record, "finalizer-wait"), "finalizer wait");
    let tooltip = wait
        .children()
        .find(|n| n.has_tag_name("title"))
        .and_then(|t| t.text())
        .unwrap_or_default();
    assert!(tooltip.contains("example.com/backup"), "{tooltip}");
    let labels: Vec<_> = with_class(record, "bar-label")
        .into_iter()
        .filter_map(|n| n.text())
        .collect();
    assert!(
        labels.iter().any(|l| l.starts_with("finalizers")),
        "{labels:?}"
    );
    assert!(!has_class(wait, "open"));
    let app = by_id(&doc, "lane-app");
    assert_bar(&scale, app, "pre-stop", 1.0, 6.0);
    assert_bar(&scale, app, "sigterm", 6.0, 9.0);
    // `until` (+100 s) is the right edge.
    assert_eq!(scale.last_tick_seconds, 100.0);
}

#[test]
fn force_delete_removes_the_record_at_once_and_the_agent_still_kills() {
    let svg = render("force_delete");
    let doc = parse(&svg);
    let scale = Scale::of(&doc);
    let record = by_id(&doc, "lane-record");
    let removed = only(with_class(record, "removed"), "removal");
    assert!(has_class(removed, "force"));
    scale.assert_at(
        attr(removed, "x") + attr(removed, "width") / 2.0,
        0.0,
        "removal",
    );
    assert!(record.descendants().all(|n| !has_class(n, "bar")));
    let app = by_id(&doc, "lane-app");
    // The hook gets a budget of 1 s (the timeline says so): +2 s → +3 s.
    assert_bar(&scale, app, "pre-stop", 2.0, 3.0);
    assert_bar(&scale, app, "sigterm", 3.0, 5.0);
    let kills = kill_xs(app);
    assert_eq!(kills.len(), 1);
    scale.assert_at(kills[0], 5.0, "SIGKILL");
    assert!(
        mark_labels(&doc)
            .iter()
            .any(|l| l == "force delete (grace 0 s) +0 s")
    );
}

#[test]
fn huge_grace_stays_on_a_seconds_scale() {
    let svg = render("huge_grace");
    let doc = parse(&svg);
    assert_all_finite(&doc);
    let scale = Scale::of(&doc);
    assert!(
        scale.last_tick_seconds <= 10.0,
        "{}",
        scale.last_tick_seconds
    );
    let record = by_id(&doc, "lane-record");
    assert_bar(&scale, record, "pending", 0.0, 1.0);
    // Grace 1 seen at +4 s, SIGTERM at +1 s: SIGKILL at +4 + max(1, 2) s (D5).
    assert_bar(&scale, record, "terminating", 1.0, 6.0);
    let app = by_id(&doc, "lane-app");
    assert_bar(&scale, app, "sigterm", 1.0, 6.0);
    scale.assert_at(kill_xs(app)[0], 6.0, "SIGKILL");
    let labels = mark_labels(&doc);
    assert!(
        labels.iter().any(|l| l == "delete (grace 9.2e18 s) +0 s"),
        "{labels:?}"
    );
}

#[test]
fn an_empty_timeline_still_has_an_axis() {
    let svg = render_text(r#"{"object": {"name": "idle-0"}, "events": []}"#);
    let doc = parse(&svg);
    assert_all_finite(&doc);
    let scale = Scale::of(&doc);
    assert!(scale.last_tick_seconds > 0.0);
    assert_eq!(container_lanes(&doc).len(), 1);
    assert!(mark_labels(&doc).is_empty());
}

#[test]
fn an_absurd_until_is_clipped_and_said() {
    let svg = render_text(
        r#"{"object": {"name": "far-0", "node": "n",
             "containers": [{"name": "app", "exits_after_sigterm_seconds": 2}]},
            "events": [{"at": 1000, "delete": {"grace_period_seconds": 5}},
                       {"at": 1000, "agent_sync": {}}],
            "until": 1000000000000}"#,
    );
    let doc = parse(&svg);
    assert_all_finite(&doc);
    let scale = Scale::of(&doc);
    assert!(
        scale.last_tick_seconds <= 20.0,
        "{}",
        scale.last_tick_seconds
    );
    let subtitle = by_id(&doc, "subtitle").text().unwrap_or_default();
    assert!(subtitle.contains("axis clipped"), "{subtitle}");
    assert_bar(&scale, by_id(&doc, "lane-app"), "sigterm", 0.0, 2.0);
}

#[test]
fn a_bar_still_running_at_the_right_edge_is_open() {
    // The agent never syncs: pending until the end of the picture.
    let svg = render("precondition_conflict");
    let doc = parse(&svg);
    let pending = only(bars(by_id(&doc, "lane-record"), "pending"), "pending bar");
    assert!(has_class(pending, "open"));
    let axis = by_id(&doc, "axis");
    let right = with_class(axis, "tick")
        .last()
        .and_then(|t| t.children().find(|n| n.has_tag_name("line")))
        .map(|l| attr(l, "x1"))
        .unwrap();
    assert!((span(pending).1 - right).abs() <= EPSILON);
}

#[test]
fn names_are_escaped_and_lane_ids_stay_unique() {
    let svg = render_text(
        r#"{"object": {"name": "a<b>&\"c\"\u0001", "node": "n",
             "containers": [{"name": "record"}, {"name": "x y"}, {"name": "x_y"}]},
            "events": [{"at": 1, "delete": {"grace_period_seconds": 3}},
                       {"at": 1, "agent_sync": {}}]}"#,
    );
    let doc = parse(&svg);
    assert_all_finite(&doc);
    let ids: Vec<_> = doc
        .descendants()
        .filter(|n| has_class(*n, "lane"))
        .map(|n| n.attribute("id").unwrap().to_string())
        .collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 4, "{ids:?}");
    assert_eq!(ids[0], "lane-record");
    let names: Vec<_> = container_lanes(&doc)
        .iter()
        .map(|l| l.attribute("data-container").unwrap())
        .collect();
    assert_eq!(names, ["record", "x y", "x_y"]);
    let title = by_id(&doc, "title").text().unwrap();
    assert!(title.starts_with("a<b>&\"c\""), "{title}");
}

#[test]
fn same_timeline_same_bytes() {
    for name in ["sidecars", "finalizers", "huge_grace"] {
        assert_eq!(render(name), render(name), "{name}");
    }
}

#[test]
fn the_timeline_alone_renders_too() {
    let text = std::fs::read_to_string(scenarios_dir().join("sidecars.json")).unwrap();
    let timeline = grace_sim::simulate(&grace_sim::parse(&text).unwrap()).unwrap();
    let svg = timeline.to_svg();
    let doc = parse(&svg);
    let scale = Scale::of(&doc);
    // Without the scenario's hook durations the proxy's pre-stop bar runs
    // to its SIGTERM.
    assert_bar(&scale, by_id(&doc, "lane-proxy"), "pre-stop", 0.0, 9.0);
}

/// The committed picture (docs/simulate-sidecars.svg) is what the library
/// (and so `grace simulate --format svg`) draws today; regenerate with `GRACE_BLESS=1`.
#[test]
fn docs_picture_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/simulate-sidecars.svg");
    let svg = render("sidecars");
    if std::env::var_os("GRACE_BLESS").is_some() {
        std::fs::write(&path, &svg).expect("docs/ writable");
        return;
    }
    let committed = std::fs::read_to_string(&path).expect("docs/simulate-sidecars.svg exists");
    assert!(
        committed == svg,
        "docs/simulate-sidecars.svg is stale: run `GRACE_BLESS=1 cargo test -p grace-sim --test svg docs_picture_is_current`"
    );
}
