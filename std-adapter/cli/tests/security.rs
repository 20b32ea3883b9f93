//! Who may talk to the agent, as a user meets it: the real `grace agent`
//! on a temporary data directory, clients as separate processes — some
//! run as user `nobody` (tests that need that run only as root, and say so
//! when they are skipped) — and raw connections that misbehave.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use grace_std::api::{MAX_REQUEST_BYTES, Reply, socket_path};
use support::{Agent, GRACE, grace, text};

/// `nobody` and `nogroup` on Debian.
const NOBODY: u32 = 65534;

/// Starts `grace agent --data-dir dir` with `extra` arguments, under
/// `umask`, and waits until it serves.
fn start_agent(dir: &Path, extra: &[&str], umask: &str) -> Agent {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("umask {umask}; exec \"$0\" \"$@\""))
        .arg(GRACE)
        .args(["agent", "--data-dir"])
        .arg(dir)
        .args(extra);
    Agent::spawn(dir, command)
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("exists").mode() & 0o7777
}

/// `grace ARGS --data-dir DIR` as `nobody:nogroup`.
fn grace_as_nobody(dir: &Path, args: &[&str]) -> Output {
    Command::new(GRACE)
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .uid(NOBODY)
        .gid(NOBODY)
        .current_dir("/")
        .output()
        .expect("grace runs as nobody")
}

/// Whether this test runs as root; says why the test is skipped if not.
fn root(test: &str) -> bool {
    let root = rustix::process::geteuid().is_root();
    if !root {
        eprintln!("{test}: skipped: it runs a client as another user, which needs root");
    }
    root
}

/// Whether this test can run `grace` as `nobody` (root, and the binary
/// reachable by others); says why the test is skipped if not.
fn as_nobody(test: &str) -> bool {
    if !root(test) {
        return false;
    }
    let runs = Command::new(GRACE)
        .arg("--version")
        .uid(NOBODY)
        .gid(NOBODY)
        .current_dir("/")
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        eprintln!(
            "{test}: skipped: user nobody cannot run {GRACE} (a private directory on the way?)"
        );
    }
    runs
}

/// A temporary directory every user can traverse (not write), for a data
/// directory `nobody` must reach.
fn reachable_tempdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dir
}

/// Stores an unscheduled object `name` through the agent.
fn apply(dir: &Path, name: &str) {
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, format!(r#"{{"metadata":{{"name":"{name}"}}}}"#)).expect("written");
    let out = grace(dir, &["apply", "-f", file.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

fn exists(dir: &Path, name: &str) -> bool {
    grace(dir, &["get", name, "-o", "json"]).status.success()
}

#[test]
fn under_umask_000_the_agent_creates_nothing_group_or_world_accessible() {
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path().join("parent/data");
    let agent = start_agent(&dir, &[], "000");
    // The socket accepts as soon as it is bound, before its mode is set
    // (in a directory nobody else can reach): its mode is final once the
    // agent answers.
    support::common::wait_for("the agent answers", Duration::from_secs(20), || {
        support::common::runtime_answers(&dir)
    });
    assert_eq!(mode(&root.path().join("parent")), 0o700, "a created parent");
    assert_eq!(mode(&dir), 0o700, "the data directory");
    assert_eq!(mode(&dir.join("grace.redb")), 0o600, "the store");
    assert_eq!(mode(&socket_path(&dir)), 0o600, "the socket");

    // A workload's output goes to a log file in the data directory.
    let file = root.path().join("web.json");
    std::fs::write(
        &file,
        r#"{"metadata":{"name":"web"},
            "spec":{"nodeName":"local","containers":[{"name":"app","command":["sh","-c","echo hello; sleep 30"]}]}}"#,
    )
    .expect("written");
    let out = grace(&dir, &["apply", "-f", file.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !everything_under(&dir)
        .iter()
        .any(|p| p.extension().is_some_and(|e| e == "log"))
    {
        assert!(Instant::now() < deadline, "a container log within 10 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    for path in everything_under(&dir) {
        assert_eq!(mode(&path) & 0o077, 0, "{} is private", path.display());
    }
    drop(agent);
}

/// Every file and directory under `dir`.
fn everything_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path.clone());
            }
            found.push(path);
        }
    }
    found
}

#[test]
fn a_store_left_readable_by_an_older_agent_is_made_private() {
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path().join("data");
    drop(start_agent(&dir, &[], "022"));
    let store = dir.join("grace.redb");
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let agent = start_agent(&dir, &[], "022");
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&store), 0o600);
    drop(agent);
}

/// Starts the agent on `dir`, which must fail at once: its exit code and
/// message.
fn refused_start(dir: &Path) -> (Option<i32>, String) {
    let out = grace(dir, &["agent"]);
    (out.status.code(), text(&out.stderr))
}

#[test]
fn a_data_dir_store_or_socket_others_can_write_is_refused_saying_how_to_fix_it() {
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path().join("data");
    std::fs::create_dir(&dir).expect("made");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let (code, err) = refused_start(&dir);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("refusing to start"), "{err}");
    assert!(err.contains("writable by group or others"), "{err}");
    assert!(err.contains("chmod go-w"), "{err}");
    assert!(!dir.join("grace.redb").exists(), "nothing created");
    assert_eq!(mode(&dir), 0o777, "left as it was");

    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let store = dir.join("grace.redb");
    std::fs::write(&store, b"").expect("written");
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let (code, err) = refused_start(&dir);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("grace.redb is writable by group or others"),
        "{err}"
    );

    std::fs::remove_file(&store).expect("removed");
    let socket = socket_path(&dir);
    let listener = std::os::unix::net::UnixListener::bind(&socket).expect("bound");
    drop(listener);
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let (code, err) = refused_start(&dir);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("grace.sock is writable by group or others"),
        "{err}"
    );
}

#[cfg(feature = "etcd")]
#[test]
fn the_agent_of_a_shared_store_refuses_a_data_dir_others_can_write_too() {
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path().join("data");
    std::fs::create_dir(&dir).expect("made");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    // Refused before it connects: nothing listens there.
    let out = grace(
        &dir,
        &["agent", "--etcd", "http://127.0.0.1:9", "--node", "n"],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("refusing to start"), "{err}");
    assert!(err.contains("writable by group or others"), "{err}");
}

#[test]
fn a_data_dir_another_user_owns_is_refused() {
    if !root("a_data_dir_another_user_owns_is_refused") {
        return;
    }
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path().join("data");
    std::fs::create_dir(&dir).expect("made");
    std::os::unix::fs::chown(&dir, Some(NOBODY), Some(NOBODY)).expect("chown");
    let (code, err) = refused_start(&dir);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&format!("owned by uid {NOBODY}")), "{err}");
}

#[test]
fn a_connection_from_another_uid_is_refused_and_logged_and_changes_nothing() {
    if !as_nobody("a_connection_from_another_uid_is_refused_and_logged_and_changes_nothing") {
        return;
    }
    let root = reachable_tempdir();
    let dir = root.path().join("data");
    let agent = start_agent(&dir, &[], "022");
    apply(&dir, "web");

    // The filesystem is the first gate: nobody cannot reach the socket.
    let out = grace_as_nobody(&dir, &["get"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("permission denied"), "{err}");
    assert!(err.contains("--allow-group"), "{err}");

    // Opened by mistake, the peer check still refuses, before any request
    // is read.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let socket = socket_path(&dir);
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let out = grace_as_nobody(&dir, &["delete", "web"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "permission denied for uid {NOBODY}: this agent serves its own user"
        )),
        "{err}"
    );
    let out = grace_as_nobody(&dir, &["get"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(exists(&dir, "web"), "nothing was done");

    let log = agent.stop();
    assert!(
        log.contains(&format!("refused a connection from uid {NOBODY}")),
        "{log}"
    );
}

#[test]
fn an_allowed_group_read_only_may_get_but_not_delete() {
    if !as_nobody("an_allowed_group_read_only_may_get_but_not_delete") {
        return;
    }
    let root = reachable_tempdir();
    let dir = root.path().join("data");
    let agent = start_agent(&dir, &["--allow-group", "nogroup:ro"], "022");
    assert_eq!(mode(&dir), 0o710);
    assert_eq!(std::fs::metadata(&dir).expect("dir").gid(), NOBODY);
    assert_eq!(mode(&socket_path(&dir)), 0o660);
    assert_eq!(
        mode(&dir.join("grace.redb")),
        0o600,
        "the store stays private"
    );
    apply(&dir, "web");

    let out = grace_as_nobody(&dir, &["get", "web"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("web"));
    let out = grace_as_nobody(&dir, &["delete", "web"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("may get and watch only"), "{err}");
    assert!(exists(&dir, "web"), "nothing was deleted");
    drop(agent);
}

#[test]
fn an_allowed_group_read_write_may_delete() {
    if !as_nobody("an_allowed_group_read_write_may_delete") {
        return;
    }
    let root = reachable_tempdir();
    let dir = root.path().join("data");
    let agent = start_agent(&dir, &["--allow-group", "nogroup:rw"], "022");
    apply(&dir, "web");
    let out = grace_as_nobody(&dir, &["delete", "web"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!exists(&dir, "web"), "deleted");
    drop(agent);
}

#[test]
fn an_allowed_group_counts_its_supplementary_members() {
    let test = "an_allowed_group_counts_its_supplementary_members";
    if !as_nobody(test) {
        return;
    }
    let Some(setpriv) = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        support::common::missing_tool("needs setpriv (util-linux) to give nobody a group");
        return;
    };
    // A group that is nobody's supplementary group only, never its primary.
    let group = "4242";
    let root = reachable_tempdir();
    let dir = root.path().join("data");
    let agent = start_agent(&dir, &["--allow-group", group], "022");
    apply(&dir, "web");
    let as_member = |groups: &str| {
        Command::new(setpriv)
            .args([
                "--reuid", "65534", "--regid", "65534", "--groups", groups, "--",
            ])
            .arg(GRACE)
            .args(["get", "web", "--data-dir"])
            .arg(&dir)
            .current_dir("/")
            .output()
            .expect("setpriv runs")
    };
    let out = as_member(group);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("web"));
    let out = as_member("4243");
    assert_eq!(out.status.code(), Some(1), "not a member");
    assert!(text(&out.stderr).contains("permission denied"));
    drop(agent);
}

#[test]
fn an_unknown_group_or_access_is_a_usage_error() {
    let root = tempfile::tempdir().expect("temp dir");
    for arg in ["no-such-group-here", "nogroup:admin"] {
        let out = grace(&root.path().join("d"), &["agent", "--allow-group", arg]);
        assert_eq!(out.status.code(), Some(2), "{arg}");
        assert!(text(&out.stderr).contains("--allow-group"), "{arg}");
    }
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

/// The next reply line; `None` once the agent has hung up.
fn reply(reader: &mut BufReader<UnixStream>) -> Option<Reply> {
    let mut line = String::new();
    match reader.read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(serde_json::from_str(&line).expect("a reply")),
    }
}

fn error_message(reply: Option<Reply>) -> String {
    match reply {
        Some(Reply::Error(e)) => e.message,
        other => panic!("an error reply, not {other:?}"),
    }
}

const GET: &[u8] = b"{\"op\":\"get\",\"name\":null}\n";

/// Whether a silent client holds a slot: nothing to read, not even the
/// hang-up. A refused one has its error line waiting: the agent accepts
/// in order, so once a later client has its answer, every refusal before
/// it has been written.
fn holds_a_slot(reader: &BufReader<UnixStream>) -> bool {
    if !reader.buffer().is_empty() {
        return false;
    }
    let stream = reader.get_ref();
    stream.set_nonblocking(true).expect("non-blocking");
    let mut byte = [0u8; 1];
    let held = matches!(
        std::io::Read::read(&mut &*stream, &mut byte),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
    );
    stream.set_nonblocking(false).expect("blocking");
    held
}

#[test]
fn garbage_huge_lines_and_silent_clients_are_answered_or_dropped_without_blocking_others() {
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path().join("data");
    let _agent = start_agent(&dir, &[], "022");

    // Garbage: an error, and the connection goes on.
    {
        let (mut w, mut r) = connect(&dir);
        w.write_all(b"\xff\xfe not json\n").expect("sent");
        assert!(error_message(reply(&mut r)).starts_with("bad request"));
        w.write_all(b"{\"op\":\"launch_missiles\"}\n")
            .expect("sent");
        assert!(error_message(reply(&mut r)).starts_with("bad request"));
        w.write_all(GET).expect("sent");
        assert!(matches!(reply(&mut r), Some(Reply::Objects { .. })));
    }

    // A line longer than the limit: an error, then the agent hangs up.
    {
        let (mut w, mut r) = connect(&dir);
        let huge = vec![b'x'; MAX_REQUEST_BYTES + 4096];
        let _ = w.write_all(&huge);
        assert!(error_message(reply(&mut r)).contains("longer than"));
        assert!(reply(&mut r).is_none(), "the connection is closed");
    }

    // Silent clients fill every slot: the next one is told so at once...
    // The connections above give their slots back a moment after they
    // hang up: until then a silent client is refused, or the next one
    // gets a slot (it asks, and is answered). Then all are dropped and
    // the slots filled again.
    let deadline = Instant::now() + Duration::from_secs(20);
    let (silent, started) = loop {
        let silent: Vec<_> = (0..grace_cli::agent::MAX_CONNECTIONS)
            .map(|_| connect(&dir))
            .collect();
        let started = Instant::now();
        let (mut w, mut r) = connect(&dir);
        let _ = w.write_all(GET);
        let next = reply(&mut r);
        if silent.iter().all(|(_, r)| holds_a_slot(r)) {
            assert!(error_message(next).contains("connections already"));
            assert!(started.elapsed() < Duration::from_secs(2));
            break (silent, started);
        }
        assert!(
            Instant::now() < deadline,
            "the slots of closed connections are given back"
        );
    };
    // ...and each silent one is dropped once its request is overdue,
    // which frees the slots.
    let (_, mut first) = silent.into_iter().next().expect("one");
    assert!(error_message(reply(&mut first)).contains("not received in time"));
    assert!(started.elapsed() >= grace_cli::agent::REQUEST_TIMEOUT - Duration::from_secs(1));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (mut w, mut r) = connect(&dir);
        w.write_all(GET).expect("sent");
        match reply(&mut r) {
            Some(Reply::Objects { .. }) => break,
            other => assert!(Instant::now() < deadline, "still refused: {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_slow_client_does_not_hold_up_another() {
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path().join("data");
    let _agent = start_agent(&dir, &[], "022");
    apply(&dir, "web");
    // Half a request, then nothing.
    let (mut slow, _slow_reader) = connect(&dir);
    slow.write_all(b"{\"op\":").expect("sent");
    let started = Instant::now();
    let out = grace(&dir, &["get", "web"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(started.elapsed() < Duration::from_secs(3));
}
