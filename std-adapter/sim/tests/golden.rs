//! Golden scenarios: every `examples/scenarios/*.json` is replayed and its
//! JSON lines compared with the `.expected.jsonl` beside it. The expected
//! files were checked by hand against core/RULES.md; when a deliberate change
//! alters them, regenerate with `GRACE_BLESS=1 cargo test -p grace-sim
//! --test golden` and review the diff.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use std::fs;
use std::path::{Path, PathBuf};

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scenarios")
}

fn scenario_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(scenarios_dir())
        .expect("examples/scenarios exists")
        .map(|e| e.expect("readable directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

fn replay(path: &Path) -> String {
    let text = fs::read_to_string(path).expect("scenario readable");
    let scenario = grace_sim::parse(&text)
        .unwrap_or_else(|e| panic!("{}: does not parse: {e}", path.display()));
    let timeline = grace_sim::simulate(&scenario)
        .unwrap_or_else(|e| panic!("{}: does not simulate: {e}", path.display()));
    timeline.to_json_lines()
}

#[test]
fn golden_scenarios_match_their_expected_json_lines() {
    let bless = std::env::var_os("GRACE_BLESS").is_some();
    let mut mismatched = Vec::new();
    for path in scenario_files() {
        let expected_path = path.with_extension("expected.jsonl");
        let actual = replay(&path);
        if bless {
            fs::write(&expected_path, &actual).expect("expected file writable");
            continue;
        }
        let expected = fs::read_to_string(&expected_path).unwrap_or_else(|_| {
            panic!(
                "{} has no expected output; run with GRACE_BLESS=1",
                path.display()
            )
        });
        if expected != actual {
            mismatched.push(format!(
                "{}:\n--- expected\n{expected}+++ actual\n{actual}",
                path.display()
            ));
        }
    }
    assert!(mismatched.is_empty(), "{}", mismatched.join("\n"));
}

/// The issue names the situations the golden files must cover; a file lost
/// in a rename must not silently shrink the suite.
#[test]
fn golden_scenarios_cover_the_required_situations() {
    let names: Vec<String> = scenario_files()
        .iter()
        .filter_map(|p| p.file_stem()?.to_str().map(str::to_owned))
        .collect();
    for required in [
        "default_delete",
        "prestop_hangs",
        "force_delete",
        "shorten",
        "finalizers",
        "node_lost_force",
        "node_lost_fenced",
        "unscheduled",
        "finished",
        "dry_run",
        "precondition_conflict",
        "sidecars",
        "huge_grace",
    ] {
        assert!(
            names.iter().any(|n| n == required),
            "missing scenario {required}"
        );
    }
}

fn lines_of(name: &str) -> Vec<serde_json::Value> {
    replay(&scenarios_dir().join(format!("{name}.json")))
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

fn action_at(lines: &[serde_json::Value], action: &str) -> Vec<f64> {
    lines
        .iter()
        .filter(|l| l["action"] == action)
        .map(|l| l["at"].as_f64().expect("at is a number"))
        .collect()
}

/// Seed 003's "32 seconds": a hook that never returns is cut at the grace
/// (30 s), SIGTERM follows, SIGKILL 2 s later (R60, R62, R64).
#[test]
fn r64_hung_pre_stop_scenario_kills_at_grace_plus_two() {
    let lines = lines_of("prestop_hangs");
    assert_eq!(action_at(&lines, "pre_stop"), [1000.0]);
    assert_eq!(action_at(&lines, "sigterm"), [1030.0]);
    assert_eq!(action_at(&lines, "sigkill"), [1032.0]);
    assert_eq!(action_at(&lines, "remove"), [1032.0]);
}

/// Worked timeline 5 (R15, R16) followed by D5: the 30 → 5 shortening at
/// +10 s lands in the past, so the timestamp is clamped to now with grace 1.
#[test]
fn r16_shorten_scenario_clamps_to_now_with_grace_one() {
    let lines = lines_of("shorten");
    let shortened = lines
        .iter()
        .find(|l| l["event"] == "delete" && l["at"] == 1010)
        .expect("the shortening delete is reported");
    assert_eq!(shortened["outcome"], "graceful");
    assert_eq!(shortened["deletion_timestamp"], 1010);
    assert_eq!(shortened["deletion_grace_period_seconds"], 1);
}

/// D5 with R62: the agent sees grace 1 at +10.5 s, SIGTERM having gone at
/// +0 s; no second SIGTERM, and SIGKILL at now + max(1, 2) s = +12.5 s, as
/// Kubernetes' restarted kill gives (not +11.5 s).
#[test]
fn d5_r62_shorten_scenario_kills_two_seconds_after_the_agent_sees_grace_one() {
    let lines = lines_of("shorten");
    assert_eq!(action_at(&lines, "sigterm"), [1000.0]);
    assert_eq!(action_at(&lines, "sigkill"), [1012.5]);
    assert_eq!(action_at(&lines, "remove"), [1012.5]);
}

/// D2: a grace beyond any representable time saturates the timestamp at
/// 9999-12-31T23:59:59Z instead of wrapping into the past (R89, R90).
#[test]
fn d2_huge_grace_scenario_saturates_the_timestamp() {
    let lines = lines_of("huge_grace");
    let first = lines
        .iter()
        .find(|l| l["event"] == "delete")
        .expect("a delete is reported");
    assert_eq!(first["deletion_timestamp"], 253_402_300_799_i64);
}

/// D4: a force delete is flagged in the output.
#[test]
fn d4_force_delete_scenario_is_flagged() {
    let lines = lines_of("force_delete");
    assert!(
        lines
            .iter()
            .any(|l| l["event"] == "delete" && l["force"] == true && l["outcome"] == "deleted")
    );
}

/// A scenario with `restart_policy`: each exit the policy restarts waits
/// out its back-off, 10 s then 20 s from the exit (R92, R95, D9); an exit
/// with 0 under `OnFailure` stays an exit.
#[test]
fn r92_r95_d9_restarts_scenario_backs_off_10_then_20_seconds() {
    let lines = lines_of("restarts");
    let back_offs: Vec<(f64, i64)> = lines
        .iter()
        .filter(|l| l["action"] == "back_off")
        .map(|l| {
            (
                l["at"].as_f64().expect("at"),
                l["back_off_seconds"].as_i64().expect("seconds"),
            )
        })
        .collect();
    assert_eq!(back_offs, [(1000.0, 10), (1012.0, 20)]);
    let restarts: Vec<(f64, i64)> = lines
        .iter()
        .filter(|l| l["action"] == "restart")
        .map(|l| {
            (
                l["at"].as_f64().expect("at"),
                l["restart_count"].as_i64().expect("count"),
            )
        })
        .collect();
    assert_eq!(restarts, [(1010.0, 1), (1032.0, 2)]);
}

/// A delete during a back-off: nothing runs, so no hook and no signal,
/// the record goes at the agent's sync, and nothing starts again (R94).
#[test]
fn r94_a_delete_during_the_back_off_signals_nothing_and_restarts_nothing() {
    let lines = lines_of("restart_delete_in_back_off");
    assert_eq!(action_at(&lines, "back_off"), [1000.0]);
    assert!(action_at(&lines, "pre_stop").is_empty());
    assert!(action_at(&lines, "sigterm").is_empty());
    assert!(action_at(&lines, "restart").is_empty());
    assert_eq!(action_at(&lines, "remove"), [1006.0]);
}
