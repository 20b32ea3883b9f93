//! `grace simulate` as a user runs it: the real binary, real files, exit
//! codes and messages (docs/scenarios.md: 0 when the scenario ran, 2 for a file
//! that cannot be read or parsed, with a message naming the field and line).
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
use std::process::{Command, Output};

fn grace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_grace"))
        .args(args)
        .output()
        .expect("the grace binary starts")
}

/// Writes `text` to a file of its own under cargo's per-target temp dir.
fn scenario_file(name: &str, text: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-scenarios");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("scenario written");
    path
}

fn simulate_err(name: &str, text: &str) -> (i32, String) {
    let path = scenario_file(name, text);
    let out = grace(&["simulate", path.to_str().expect("utf-8 path")]);
    assert!(
        out.stdout.is_empty(),
        "nothing printed on stdout for a bad file"
    );
    (
        out.status.code().expect("exit code"),
        String::from_utf8(out.stderr).expect("utf-8 stderr"),
    )
}

#[test]
fn simulate_prints_a_text_timeline_by_default() {
    let out = grace(&["simulate", "../../examples/scenarios/prestop_hangs.json"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(text.contains("+30s    · app: SIGTERM"), "{text}");
    assert!(text.contains("+32s    · app: SIGKILL"), "{text}");
    assert!(text.contains("▶ Deleted"), "{text}");
}

#[test]
fn simulate_json_prints_one_json_object_a_line_with_at_first() {
    let out = grace(&[
        "simulate",
        "--format",
        "json",
        "../../examples/scenarios/default_delete.json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(!text.is_empty());
    for line in text.lines() {
        assert!(line.starts_with("{\"at\":"), "{line}");
        let value: serde_json::Value = serde_json::from_str(line).expect("valid JSON");
        assert!(value.is_object());
    }
}

#[test]
fn unreadable_file_exits_2_naming_the_file() {
    let out = grace(&["simulate", "no/such/scenario.json"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).expect("utf-8");
    assert!(err.contains("no/such/scenario.json"), "{err}");
}

#[test]
fn wrong_type_names_the_field_and_line() {
    let (code, err) = simulate_err(
        "wrong_type.json",
        "{\"object\": {\"name\": \"a\"},\n \"events\": [\n  {\"at\": 5, \"delete\": {\"grace_period_seconds\": \"ten\"}}\n]}",
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("events[0].delete.grace_period_seconds"),
        "{err}"
    );
    assert!(err.contains("line 3"), "{err}");
}

#[test]
fn unknown_field_names_the_field_and_line() {
    let (code, err) = simulate_err(
        "unknown_field.json",
        "{\n\"object\": {\"name\": \"a\", \"grace\": 3},\n\"events\": []}",
    );
    assert_eq!(code, 2);
    assert!(err.contains("object.grace"), "{err}");
    assert!(err.contains("line 2"), "{err}");
}

#[test]
fn unknown_kind_names_the_field() {
    let (code, err) = simulate_err(
        "unknown_kind.json",
        "{\"object\": {\"name\": \"a\", \"kind\": \"Pood\"}, \"events\": []}",
    );
    assert_eq!(code, 2);
    assert!(err.contains("object.kind"), "{err}");
    assert!(err.contains("Pood"), "{err}");
}

#[test]
fn missing_name_names_the_field() {
    let (code, err) = simulate_err("no_name.json", "{\"object\": {}, \"events\": []}");
    assert_eq!(code, 2);
    assert!(err.contains("name"), "{err}");
}

#[test]
fn event_without_a_kind_names_its_index_and_line() {
    let (code, err) = simulate_err(
        "no_event_kind.json",
        "{\"object\": {\"name\": \"a\"},\n\"events\": [\n  {\"at\": 1, \"get\": {}},\n  {\"at\": 2}\n]}",
    );
    assert_eq!(code, 2);
    assert!(err.contains("events[1]"), "{err}");
    assert!(err.contains("line 4"), "{err}");
}

#[test]
fn events_out_of_time_order_name_the_offending_event() {
    let (code, err) = simulate_err(
        "out_of_order.json",
        "{\"object\": {\"name\": \"a\"},\n\"events\": [\n  {\"at\": 5, \"delete\": null},\n  {\"at\": 4, \"agent_sync\": {}}\n]}",
    );
    assert_eq!(code, 2);
    assert!(err.contains("events[1].at"), "{err}");
    assert!(err.contains("line 4"), "{err}");
}

#[test]
fn truncated_json_is_a_parse_error_not_a_panic() {
    let (code, err) = simulate_err("truncated.json", "{\"object\": {\"name\": ");
    assert_eq!(code, 2);
    assert!(err.contains("line 1"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn extreme_integers_are_accepted_not_rejected() {
    let path = scenario_file(
        "extremes.json",
        "{\"object\": {\"name\": \"a\", \"node\": \"n\", \"termination_grace_period_seconds\": -9223372036854775808},\n\"events\": [{\"at\": 1, \"delete\": {\"grace_period_seconds\": -9223372036854775808}}, {\"at\": 2, \"agent_sync\": {}}]}",
    );
    let out = grace(&[
        "simulate",
        "--format",
        "json",
        path.to_str().expect("utf-8"),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    // R9: a negative request grace is treated as 1.
    assert!(
        text.contains("\"deletion_grace_period_seconds\":1"),
        "{text}"
    );
}

#[test]
fn unknown_format_is_a_usage_error() {
    let out = grace(&[
        "simulate",
        "--format",
        "yaml",
        "../../examples/scenarios/default_delete.json",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn d2_a_deadline_at_the_end_of_time_ends_the_simulation_quietly() {
    // A process that ignores SIGTERM, with a grace no clock can count: the
    // SIGKILL deadline saturates at the end of time and never comes.
    let path = scenario_file(
        "forever.json",
        "{\"object\": {\"name\": \"a\", \"node\": \"n\", \"containers\": [{\"name\": \"app\"}]},\n\"events\": [{\"at\": 1, \"delete\": {\"grace_period_seconds\": 9223372036854775807}}, {\"at\": 2, \"agent_sync\": {}}]}",
    );
    let out = grace(&[
        "simulate",
        "--format",
        "json",
        path.to_str().expect("utf-8"),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(text.contains("\"action\":\"sigterm\""), "{text}");
    assert!(!text.contains("sigkill"), "{text}");
}

#[test]
fn simulate_format_svg_exits_0_and_prints_what_the_library_draws() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scenarios/sidecars.json");
    let out = grace(&[
        "simulate",
        "--format",
        "svg",
        path.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let svg = String::from_utf8(out.stdout).expect("utf-8");
    assert!(svg.starts_with("<svg "), "{svg}");
    roxmltree::Document::parse(&svg).expect("well-formed SVG");
    let text = std::fs::read_to_string(&path).expect("scenario readable");
    let scenario = grace_sim::parse(&text).expect("scenario parses");
    let timeline = grace_sim::simulate(&scenario).expect("scenario simulates");
    let drawn = timeline.to_svg_with(&grace_sim::svg::SvgOptions::of(&scenario));
    assert_eq!(svg, drawn, "the CLI draws what the library draws");
}

#[test]
fn the_etcd_options_are_grouped_under_one_heading_in_each_help() {
    for (command, count) in [("get", 7), ("delete", 7), ("apply", 7), ("agent", 8)] {
        let out = grace(&[command, "--help"]);
        let help = String::from_utf8_lossy(&out.stdout);
        let (before, after) = help
            .split_once("A store shared by several nodes (etcd):")
            .unwrap_or_else(|| panic!("grace {command} --help has the heading: {help}"));
        assert!(
            !before.lines().any(|l| {
                let l = l.trim_start();
                l.starts_with("--etcd") || l.starts_with("--lease-ttl")
            }),
            "grace {command}: {before}"
        );
        let options = after
            .lines()
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .filter(|l| l.trim_start().starts_with("--"))
            .count();
        assert_eq!(options, count, "grace {command}: {after}");
    }
    if !cfg!(feature = "etcd") {
        let out = grace(&["get", "--etcd", "http://127.0.0.1:1"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains("cargo install --path std-adapter/cli --features etcd"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
