//! The agent's connections as clients use and misuse them: the real
//! `grace agent`, `grace get -w` processes interrupted as Ctrl-C does, a
//! member of the allowed group flooding it with watches (this test binary
//! run again as user `nobody`; tests that need that run only as root, and
//! say so when they are skipped), and raw requests the CLI would never
//! send.
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

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use grace_agent::api::{ErrorKind, Reply, Request, socket_path};
use grace_core::Record;
use grace_std::store::{ContainerStatus, StoredContainer, StoredObject};
use support::common::wait_for;
use support::pids::PidsLimit;
use support::{Agent, GRACE, grace, text};

/// `nobody` and `nogroup` on Debian.
const NOBODY: u32 = 65534;

/// The quotas docs/security.md states (`grace_agent::USER_WATCHES`,
/// `USER_CONNECTIONS`).
const USER_WATCHES: usize = 4;
const USER_CONNECTIONS: usize = 8;

/// Set when this test binary is run again as another user: the socket
/// [`watch_flood_as_another_user`] floods.
const FLOOD_SOCKET: &str = "GRACE_TEST_FLOOD_SOCKET";

/// A temporary directory every user can traverse (not write), for a data
/// directory `nobody` must reach.
fn reachable_tempdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dir
}

/// `program ARGS` as `nobody:nogroup` (no supplementary groups).
fn as_nobody(program: &Path) -> Command {
    let mut command = Command::new(program);
    command.uid(NOBODY).gid(NOBODY).current_dir("/");
    command
}

/// Whether this test can run `grace` and this test binary as `nobody`
/// (root, both reachable by others); says why the test is skipped if not.
fn nobody_runs_us(test: &str) -> bool {
    if !rustix::process::geteuid().is_root() {
        eprintln!("{test}: skipped: it runs a client as another user, which needs root");
        return false;
    }
    let me = std::env::current_exe().expect("this test binary");
    let runs = |program: &Path, arg: &str| {
        as_nobody(program)
            .arg(arg)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !runs(Path::new(GRACE), "--version") || !runs(&me, "--list") {
        eprintln!(
            "{test}: skipped: user nobody cannot run {GRACE} or {}",
            me.display()
        );
        return false;
    }
    true
}

const WATCH: &[u8] = b"{\"op\":\"watch\"}\n";

/// Not a test of its own: run again as another user with
/// [`FLOOD_SOCKET`] set, it opens `GRACE_TEST_FLOOD_COUNT` watches on that
/// socket, prints how many the agent served and why it refused the rest,
/// and holds every connection until its standard input is closed. Run
/// plainly, it does nothing.
#[test]
fn watch_flood_as_another_user() {
    let Ok(socket) = std::env::var(FLOOD_SOCKET) else {
        return;
    };
    let count: usize = std::env::var("GRACE_TEST_FLOOD_COUNT")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100);
    let mut held = Vec::new();
    let mut watching = 0;
    let mut refusals: Vec<String> = Vec::new();
    for _ in 0..count {
        let Ok(mut stream) = UnixStream::connect(&socket) else {
            refusals.push("cannot connect".into());
            continue;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(20)));
        let _ = stream.write_all(WATCH);
        let mut reader = BufReader::new(stream.try_clone().expect("clone"));
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(n) if n > 0 => match serde_json::from_str::<Reply>(&line) {
                Ok(Reply::Objects { .. }) => watching += 1,
                Ok(Reply::Error(e)) => refusals.push(e.message),
                other => refusals.push(format!("{other:?}")),
            },
            other => refusals.push(format!("no answer: {other:?}")),
        }
        held.push((stream, reader));
    }
    refusals.sort();
    refusals.dedup();
    println!("FLOOD watching={watching}");
    for r in &refusals {
        println!("FLOOD refused: {r}");
    }
    println!("FLOOD done");
    let _ = std::io::stdout().flush();
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(held);
}

/// Starts [`watch_flood_as_another_user`] as `nobody` on the agent of
/// `dir`; returns it (its standard input open: it holds its connections)
/// and the lines it printed once its flood is in place.
#[allow(
    clippy::zombie_processes,
    reason = "the flood is returned to the caller, which waits for it"
)]
fn flood_as_nobody(dir: &Path, count: usize) -> (Child, Vec<String>) {
    let me = std::env::current_exe().expect("this test binary");
    let mut child = as_nobody(&me)
        .args([
            "--exact",
            "watch_flood_as_another_user",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(FLOOD_SOCKET, socket_path(dir))
        .env("GRACE_TEST_FLOOD_COUNT", count.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the flood starts");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = child.kill();
            let status = child.wait();
            panic!("the flood ended early ({status:?}): {lines:?}");
        }
        // (The test harness may have begun the line with the test's name.)
        let Some(at) = line.find("FLOOD") else {
            continue;
        };
        let line = line[at..].trim();
        if line == "FLOOD done" {
            return (child, lines);
        }
        lines.push(line.to_owned());
    }
}

/// `grace get -w` as root, ended once it has printed its first line (as
/// Ctrl-C ends it: the process goes and the kernel closes its socket);
/// panics with its error if the agent refused it.
///
/// SIGKILL rather than SIGINT: a test run started in the background of a
/// non-interactive shell inherits SIGINT ignored, and `grace get -w` (which
/// has no handler of its own, as kubectl has none) would then never end.
fn interrupted_watch(dir: &Path, i: usize) {
    let mut child = Command::new(GRACE)
        .env_remove("GRACE_ETCD_ENDPOINTS")
        .args(["get", "-w", "--data-dir"])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("grace get -w starts");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    let _ = out.read_line(&mut first);
    if first.is_empty() {
        let output = child.wait_with_output().expect("it ended");
        panic!(
            "watch {i} was refused ({}): {}",
            output.status,
            text(&output.stderr)
        );
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// `grace ARGS --data-dir DIR` as root, which must succeed.
fn ok(dir: &Path, args: &[&str]) -> String {
    let out = grace(dir, args);
    assert!(
        out.status.success(),
        "grace {args:?}: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

fn grace_as_nobody(dir: &Path, args: &[&str]) -> Output {
    as_nobody(Path::new(GRACE))
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .output()
        .expect("grace runs as nobody")
}

#[test]
fn interrupted_watches_free_their_slots_and_a_member_s_flood_leaves_root_its_requests() {
    let test = "interrupted_watches_free_their_slots_and_a_member_s_flood_leaves_root_its_requests";
    if !nobody_runs_us(test) {
        return;
    }
    let root = reachable_tempdir();
    let dir = root.path().join("data");
    let agent = Agent::start(&dir, &["--allow-group", "nogroup:ro"]);
    let web = root.path().join("web.json");
    std::fs::write(&web, r#"{"metadata":{"name":"web"}}"#).expect("written");
    ok(&dir, &["apply", "-f", web.to_str().expect("utf-8")]);

    // More interrupted watches than the agent has connections, and no
    // change in the store meanwhile: each gives its connection back as
    // its client goes, not at the next change.
    for i in 0..100 {
        interrupted_watch(&dir, i);
    }

    // A read-only member floods the agent with watches: it gets its share.
    let (mut flood, lines) = flood_as_nobody(&dir, 100);
    assert_eq!(
        lines.first().map(String::as_str),
        Some(format!("FLOOD watching={USER_WATCHES}").as_str()),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .skip(1)
            .all(|l| l.contains("each user's share")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains(&format!(
            "uid {NOBODY} holds {USER_CONNECTIONS} connections"
        ))),
        "{lines:#?}"
    );

    // Root still gets, applies, deletes and watches.
    assert!(ok(&dir, &["get"]).contains("web"));
    let other = root.path().join("other.json");
    std::fs::write(&other, r#"{"metadata":{"name":"other"}}"#).expect("written");
    ok(&dir, &["apply", "-f", other.to_str().expect("utf-8")]);
    ok(&dir, &["delete", "web"]);
    assert!(!ok(&dir, &["get"]).contains("web"), "deleted");
    interrupted_watch(&dir, 100);

    // The member hangs up: its share is free again at once.
    drop(flood.stdin.take());
    let _ = flood.wait();
    wait_for(
        "the member's connections are given back",
        Duration::from_secs(5),
        || grace_as_nobody(&dir, &["get", "other"]).status.success(),
    );
    drop(agent);
}

/// A raw connection to the agent's socket.
fn connect(dir: &Path) -> (UnixStream, BufReader<UnixStream>) {
    let stream = UnixStream::connect(socket_path(dir)).expect("connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let reader = BufReader::new(stream.try_clone().expect("clone"));
    (stream, reader)
}

/// Sends `request` as one line and reads the answer.
fn call(dir: &Path, request: &Request) -> Reply {
    let (mut w, mut r) = connect(dir);
    let mut line = serde_json::to_string(request).expect("serializes");
    line.push('\n');
    w.write_all(line.as_bytes()).expect("sent");
    let mut answer = String::new();
    r.read_line(&mut answer).expect("an answer");
    serde_json::from_str(&answer).expect("a reply")
}

/// A pod bound to the agent's node (`local`) with one container running
/// `command`.
fn pod(uid: &str, command: &[&str]) -> StoredObject {
    let record = Record::builder(uid).build().expect("a record");
    let mut object = StoredObject::on_node(record, "local");
    object
        .containers
        .push(StoredContainer::new("app", command.iter().copied()));
    object
}

fn refused_naming(reply: &Reply, field: &str) {
    match reply {
        Reply::Error(e) => {
            assert_eq!(e.kind, ErrorKind::Invalid, "{e:?}");
            assert!(e.message.contains(field), "{field}: {}", e.message);
        }
        other => panic!("{field}: refused, not {other:?}"),
    }
}

#[test]
fn a_raw_request_the_cli_would_refuse_is_refused_by_the_agent_and_stores_nothing() {
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path().join("data");
    let agent = Agent::start(&dir, &[]);

    let empty = pod("uid-empty", &[]);
    for request in [
        Request::Apply {
            name: "empty".into(),
            object: Box::new(empty.clone()),
        },
        Request::Put {
            name: "empty".into(),
            object: Box::new(empty),
            merge: Default::default(),
        },
    ] {
        refused_naming(&call(&dir, &request), "spec.containers[0].command");
    }
    let mut blank = pod("uid-blank", &["", "x"]);
    blank.containers[0].pre_stop = Some("sleep 1".into());
    let mut signal = pod("uid-signal", &["sleep", "1000"]);
    signal.containers[0].stop_signal = Some(0);
    let mut status = pod("uid-status", &["sleep", "1000"]);
    status.status.push(ContainerStatus::RUNNING);
    let mut deleting = pod("uid-deleting", &["sleep", "1000"]);
    deleting.record.deletion_timestamp = Some(grace_core::Timestamp::from_unix_seconds(1));
    let mut twice = pod("uid-twice", &["sleep", "1000"]);
    twice
        .containers
        .push(StoredContainer::new("app", ["sleep", "1"]));
    let cases = [
        ("blank", blank, "spec.containers[0].command"),
        ("signal", signal, "spec.containers[0].lifecycle.stopSignal"),
        ("status", status, "status.containerStatuses"),
        ("deleting", deleting, "metadata.deletionTimestamp"),
        ("twice", twice, "spec.containers[1].name"),
    ];
    for (name, object, field) in cases {
        let request = Request::Put {
            name: name.into(),
            object: Box::new(object),
            merge: Default::default(),
        };
        refused_naming(&call(&dir, &request), field);
    }
    let out = grace(&dir, &["get"]);
    assert_eq!(
        text(&out.stderr).trim(),
        "No resources found",
        "nothing stored"
    );

    // A valid one is served as before, deleted as before, and the next
    // agent starts.
    let reply = call(
        &dir,
        &Request::Apply {
            name: "fine".into(),
            object: Box::new(pod("uid-fine", &["sleep", "1000"])),
        },
    );
    assert!(matches!(reply, Reply::Applied { .. }), "{reply:?}");
    let started = Instant::now();
    ok(&dir, &["delete", "fine", "--grace-period", "1"]);
    assert!(started.elapsed() < Duration::from_secs(20));
    let _ = agent.stop();
    let agent = Agent::start(&dir, &[]);
    let out = grace(&dir, &["get"]);
    assert_eq!(text(&out.stderr).trim(), "No resources found");
    drop(agent);
}

/// `grace ARGS --data-dir DIR`, which must end within `limit`: a client
/// left hanging fails the test.
fn grace_within(dir: &Path, args: &[&str], limit: Duration) -> Output {
    let child = Command::new(GRACE)
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("grace runs");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("grace ends"),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("`grace {}` still waits after {limit:?}", args.join(" "));
        }
    }
}

#[test]
fn an_agent_out_of_threads_refuses_a_connection_saying_why_and_serves_again_once_it_has_some() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("data");
    let agent = Agent::start(&dir, &[]);
    let name = format!("grace-test-threads-{}", std::process::id());
    let Some(limit) = PidsLimit::around(agent.id(), &name) else {
        eprintln!("skipped: no pids cgroup can be made here (needs root and a pids controller)");
        return;
    };
    // As at `pid_max` with 10 000 workloads and their waiters: the agent
    // can start no thread for a new connection.
    limit.full();
    for _ in 0..2 {
        let out = grace_within(&dir, &["get"], Duration::from_secs(20));
        assert!(!out.status.success(), "refused: {out:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains("out of threads") && err.contains("nothing was changed"),
            "{err}"
        );
    }
    assert!(
        agent.log().contains("cannot serve a connection"),
        "logged: {}",
        agent.log()
    );
    // Threads to be had again: the agent serves again, it never stopped
    // accepting.
    limit.lift();
    let out = grace_within(&dir, &["get"], Duration::from_secs(20));
    assert!(out.status.success(), "served: {out:?}");
    let log = agent.stop();
    drop(limit);
    assert!(!log.contains("panicked"), "{log}");
}
