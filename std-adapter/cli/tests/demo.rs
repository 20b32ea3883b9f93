//! `grace demo` end to end: real processes, the embedded store, the
//! timeline a newcomer sees. Checks the order of events and that no SIGKILL
//! comes before its grace is spent (never "within" a tolerance: only the
//! lower bounds are the rules; upper bounds are generous for a busy machine).
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

#[path = "../../tests/common/mod.rs"]
mod common;

use std::process::Command;

/// Seconds of the first timeline line matching `object` and `what`.
fn at(out: &str, object: &str, what: &str) -> Option<f64> {
    out.lines().find_map(|l| {
        let mut words = l.split_whitespace();
        let t = words.next()?.strip_suffix('s')?.parse::<f64>().ok()?;
        let o = words.next()?;
        (o == object && l.contains(what)).then_some(t)
    })
}

#[test]
fn demo_runs_three_real_deletions_to_the_end() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_grace"))
        .args(["demo", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("grace demo runs");
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // web exits on SIGTERM: no SIGKILL.
    let web_term = at(&text, "web", "SIGTERM").expect("web SIGTERM");
    assert!(at(&text, "web", "SIGKILL").is_none(), "{text}");
    assert!(at(&text, "web", "record removed").expect("web removed") >= web_term);

    // stubborn ignores SIGTERM: SIGKILL when its 3 s grace is spent (R63).
    let term = at(&text, "stubborn", "SIGTERM").expect("stubborn SIGTERM");
    let kill = at(&text, "stubborn", "SIGKILL").expect("stubborn SIGKILL");
    assert!(kill - term >= 2.99, "{text}");
    assert!(kill - term < 10.0, "{text}");

    // hooked: the hook is cut at the grace, SIGTERM then, SIGKILL 2 s later
    // (R60, R62, R64: grace + 2 s).
    let hook = at(&text, "hooked", "pre-stop hook started").expect("hook");
    let term = at(&text, "hooked", "SIGTERM").expect("hooked SIGTERM");
    let kill = at(&text, "hooked", "SIGKILL").expect("hooked SIGKILL");
    assert!(term - hook >= 2.99, "{text}");
    assert!(kill - term >= 1.99, "{text}");
    assert!(kill - hook >= 4.99, "{text}");

    for object in ["web", "stubborn", "hooked"] {
        assert!(at(&text, object, "→ Deleted").is_some(), "{object}: {text}");
    }
    assert!(text.contains("summary"), "{text}");
    // Nothing left behind in the store.
    let store = grace_std::store::RedbStore::open(dir.path().join("grace.redb")).expect("opens");
    use grace_std::store::Store;
    assert!(store.list().expect("lists").objects.is_empty());
}

/// Live processes (not zombies) whose environment holds `marker`.
fn marked_processes(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(env) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(entry.path().join("stat")).map_or(true, |s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        });
        if !zombie && env.split(|b| *b == 0).any(|v| v == marker.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

/// Starts `grace demo` on a temp dir of its own, interrupts it with
/// `signal` once it and its workloads run, and checks that it cleaned up.
fn interrupted_demo_cleans_up(signal: &str, code: i32) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let marker = format!("GRACE_DEMO_TEST={}-{signal}", std::process::id());
    let (key, value) = marker.split_once('=').expect("marker");
    let child = Command::new(env!("CARGO_BIN_EXE_grace"))
        .arg("demo")
        .env("TMPDIR", tmp.path())
        .env(key, value)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("grace demo runs");
    // grace sets up its signal handling before it starts the workloads.
    common::wait_for(
        "grace and its workloads run",
        std::time::Duration::from_secs(20),
        || marked_processes(&marker).len() >= 4,
    );
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let out = child.wait_with_output().expect("grace demo exits");
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // SIGKILL is delivered at once, but a process takes a moment to go.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !marked_processes(&marker).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "processes left behind: {:?}",
            marked_processes(&marker)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("readable")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "temporary files left behind: {left:?}");
}

#[test]
fn demo_interrupted_by_sigint_leaves_no_process_and_no_temp_dir() {
    interrupted_demo_cleans_up("INT", 130);
}

#[test]
fn demo_interrupted_by_sigterm_leaves_no_process_and_no_temp_dir() {
    interrupted_demo_cleans_up("TERM", 143);
}
