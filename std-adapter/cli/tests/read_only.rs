//! Read-only commands read: `grace get` without an agent never changes the
//! store file, works on a read-only directory, and never keeps an agent
//! from starting; a data directory that is a file, or a path an agent
//! cannot use, is refused with nothing written.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::disallowed_methods,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use support::{Agent, GRACE, grace, terminate, text};

/// SIGTERM to an agent started by hand; it must exit successfully.
fn stop(mut agent: Child) {
    terminate(&agent);
    let status = agent.wait().expect("exits");
    assert!(status.success(), "{status:?}");
}

/// A data directory holding one object (`cm`), its agent stopped.
fn store_with_an_object(dir: &Path) {
    let agent = Agent::start(dir, &[]);
    let file = dir.join("cm.json");
    std::fs::write(&file, r#"{"kind":"Object","metadata":{"name":"cm"}}"#).expect("written");
    let out = grace(dir, &["apply", "-f", file.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    agent.stop();
}

/// The store file's bytes and modification time.
fn fingerprint(path: &Path) -> (Vec<u8>, SystemTime) {
    let bytes = std::fs::read(path).expect("read");
    let modified = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .expect("mtime");
    (bytes, modified)
}

fn gets(dir: &Path) {
    for args in [&["get"][..], &["get", "-o", "json"], &["get", "cm"]] {
        let out = grace(dir, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        assert!(text(&out.stdout).contains("cm"), "{}", text(&out.stdout));
    }
}

#[test]
fn get_without_an_agent_never_changes_the_store_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    store_with_an_object(dir.path());
    let db = dir.path().join("grace.redb");
    let before = fingerprint(&db);
    // Not a wait: a write within the mtime's granularity would not move it.
    std::thread::sleep(Duration::from_millis(20));
    gets(dir.path());
    gets(dir.path());
    assert!(fingerprint(&db) == before, "the store file is unchanged");
}

#[test]
fn get_reads_a_store_left_by_a_crashed_agent_without_repairing_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    store_with_an_object(dir.path());
    // SIGKILL: the file is left as a crash leaves it.
    Agent::start(dir.path(), &[]).crash();
    let db = dir.path().join("grace.redb");
    let before = fingerprint(&db);
    gets(dir.path());
    assert!(fingerprint(&db) == before, "repaired in memory only");
    // The next agent repairs it, as before.
    Agent::start(dir.path(), &[]).stop();
}

#[test]
fn get_works_on_a_read_only_data_directory() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    store_with_an_object(&data);
    let _ = std::fs::remove_file(data.join("grace.sock"));
    let before = fingerprint(&data.join("grace.redb"));
    let root = rustix::process::geteuid().is_root();
    if root {
        // root writes through permissions: a read-only bind mount instead.
        let ro = dir.path().join("ro");
        std::fs::create_dir(&ro).expect("mount point");
        let bind = Command::new("mount")
            .args(["--bind", "-o", "ro"])
            .arg(&data)
            .arg(&ro)
            .output();
        let mounted = bind.as_ref().is_ok_and(|o| o.status.success());
        if !mounted {
            eprintln!("skipped: cannot make a read-only bind mount here ({bind:?})");
            return;
        }
        // Older mount(8) ignores `ro` on the first bind: make sure.
        let _ = Command::new("mount")
            .args(["-o", "remount,bind,ro"])
            .arg(&ro)
            .status();
        let writable = std::fs::write(ro.join("probe"), b"x").is_ok();
        if !writable {
            gets(&ro);
        }
        let _ = Command::new("umount").arg(&ro).status();
        assert!(!writable, "the bind mount is read-only");
    } else {
        let mode = |p: &Path, m: u32| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod");
        };
        mode(&data.join("grace.redb"), 0o444);
        mode(&data, 0o555);
        gets(&data);
        mode(&data, 0o755);
    }
    assert!(fingerprint(&data.join("grace.redb")) == before);
}

#[test]
fn get_polling_never_keeps_an_agent_from_starting() {
    let dir = tempfile::tempdir().expect("temp dir");
    store_with_an_object(dir.path());
    let polling = Arc::new(AtomicBool::new(true));
    let failed_gets = Arc::new(std::sync::Mutex::new(Vec::new()));
    let poller = {
        let polling = polling.clone();
        let failed_gets = failed_gets.clone();
        let dir = dir.path().to_path_buf();
        std::thread::spawn(move || {
            let mut n = 0;
            while polling.load(Ordering::Relaxed) {
                let out = grace(&dir, &["get"]);
                if !out.status.success() {
                    failed_gets
                        .lock()
                        .expect("not poisoned")
                        .push(text(&out.stderr));
                }
                n += 1;
            }
            n
        })
    };
    let mut failed_starts = Vec::new();
    for attempt in 0..20 {
        let agent = Command::new(GRACE)
            .args(["agent", "--data-dir"])
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("agent starts");
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut agent = agent;
        loop {
            if grace_agent::is_serving(dir.path()) {
                stop(agent);
                break;
            }
            if let Some(status) = agent.try_wait().expect("waitable") {
                let mut err = String::new();
                if let Some(mut e) = agent.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                failed_starts.push(format!("attempt {attempt}: {status:?} {err}"));
                break;
            }
            assert!(Instant::now() < deadline, "attempt {attempt}: no answer");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    polling.store(false, Ordering::Relaxed);
    let polls = poller.join().expect("poller");
    assert!(failed_starts.is_empty(), "{failed_starts:?}");
    let failed_gets = failed_gets.lock().expect("not poisoned");
    assert!(failed_gets.is_empty(), "of {polls} gets: {failed_gets:?}");
    assert!(polls >= 20, "get polled throughout: {polls}");
}

#[test]
fn a_data_dir_that_is_a_file_is_named_as_such_and_left_alone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"mine").expect("written");
    for args in [&["get"][..], &["agent"], &["delete", "x"], &["logs", "x"]] {
        let out = grace(&file, args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("not a directory"), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    assert_eq!(std::fs::read(&file).expect("read"), b"mine");
}

#[test]
fn an_agent_on_a_path_too_long_for_its_socket_fails_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().expect("temp dir");
    let long = dir.path().join("d".repeat(120));
    let out = grace(&long, &["agent"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("shorter path"),
        "{}",
        text(&out.stderr)
    );
    assert!(!long.exists(), "no directory, no grace.redb left behind");
    // The same in a directory that exists: it stays empty.
    std::fs::create_dir(&long).expect("created");
    let out = grace(&long, &["agent"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read_dir(&long).expect("readable").count(), 0);
}

#[test]
fn a_store_file_that_is_not_a_store_fails_the_read_and_is_left_as_it_is() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("grace.redb");
    std::fs::write(&db, vec![0x5a; 4096]).expect("written");
    let out = grace(dir.path(), &["get"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("grace.redb"));
    assert_eq!(std::fs::read(&db).expect("read"), vec![0x5a; 4096]);
}

/// A tmpfs of a few MiB, unmounted when dropped (root only).
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount() -> Option<SmallDisk> {
        let dir = tempfile::tempdir().expect("temp dir");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=6m", "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        mounted.then_some(SmallDisk(dir))
    }

    /// Fills what is left of it.
    fn fill(&self) {
        let _ = std::fs::write(self.0.path().join("fill"), vec![0u8; 8 << 20]);
    }

    fn free(&self) {
        std::fs::remove_file(self.0.path().join("fill")).expect("filled");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

/// A full disk loses nothing: a delete that cannot be written fails with
/// the reason (exit code 1), nothing is done that was not written first,
/// and once there is room again the deletion completes — after a restart
/// if the agent stopped on the store's error.
#[test]
fn a_full_disk_fails_the_write_and_the_deletion_completes_once_there_is_room() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: mounting a small disk needs root");
        return;
    }
    let Some(disk) = SmallDisk::mount() else {
        eprintln!("skipped: tmpfs cannot be mounted here");
        return;
    };
    let dir = disk.0.path().join("data");
    let agent = Agent::start(&dir, &[]);
    let pid = disk.0.path().join("app.pid");
    let file = disk.0.path().join("app.json");
    let object = serde_json::json!({
        "metadata": {"name": "app"},
        "spec": {"nodeName": "local", "terminationGracePeriodSeconds": 5,
                 "containers": [{"name": "app", "command": ["sh", "-c",
                     format!("echo $$ > {}; trap 'exit 0' TERM; while :; do sleep 0.05; done", pid.display())]}]},
    });
    std::fs::write(&file, object.to_string()).expect("written");
    let out = grace(&dir, &["apply", "-f", file.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(&pid).is_err() {
        assert!(Instant::now() < deadline, "the workload starts");
        std::thread::sleep(Duration::from_millis(20));
    }

    disk.fill();
    let out = grace(&dir, &["delete", "app", "--timeout=5s"]);
    let code = out.status.code();
    assert!(
        code == Some(0) || code == Some(1),
        "done or failed, never a usage error or a crash: {code:?} {}",
        text(&out.stderr)
    );
    if code == Some(1) {
        assert!(
            text(&out.stderr).contains("No space left on device"),
            "{}",
            text(&out.stderr)
        );
    }

    disk.free();
    // Wait for the agent to settle: serving on (its runtime thread
    // answers), or gone on the error (its socket removed as it exits).
    support::common::wait_for(
        "the agent serves on or stops",
        Duration::from_secs(20),
        || !grace_agent::is_serving(&dir) || support::probe::runtime_answers(&dir),
    );
    let agent = if grace_agent::is_serving(&dir) {
        agent
    } else {
        let log = agent.log();
        assert!(
            log.contains("No space left on device") || log.contains("store"),
            "{log}"
        );
        // Its workload is left for the next agent, as after a crash.
        agent.crash();
        Agent::start(&dir, &[])
    };
    let out = grace(
        &dir,
        &["delete", "app", "--ignore-not-found", "--timeout=15s"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = grace(&dir, &["get", "app"]);
    assert_eq!(out.status.code(), Some(1), "gone: {}", text(&out.stdout));
    let workload = std::fs::read_to_string(&pid).expect("pid");
    assert!(
        !Path::new(&format!("/proc/{}", workload.trim())).exists(),
        "its workload is stopped"
    );
    drop(agent);
}
