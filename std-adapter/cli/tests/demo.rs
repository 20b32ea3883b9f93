//! `grace demo` end to end: real processes, the embedded store, the
//! timeline a newcomer sees. Checks the order of events and that no SIGKILL
//! comes before its grace is spent (never "within" a tolerance: only the
//! lower bounds are the rules; upper bounds are generous for a busy machine).

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
