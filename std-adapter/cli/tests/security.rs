//! Who may talk to the agent, as a user meets it: the real `grace agent`
//! on a temporary data directory, clients as separate processes — some
//! run as user `nobody` (tests that need that run only as root, and say so
//! when they are skipped) — and raw connections that misbehave.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use grace_agent::api::{MAX_REQUEST_BYTES, Reply, socket_path};
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
        support::probe::runtime_answers(&dir)
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
        let silent: Vec<_> = (0..grace_agent::MAX_CONNECTIONS)
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
    assert!(started.elapsed() >= grace_agent::REQUEST_TIMEOUT - Duration::from_secs(1));
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

/// The agent's cgroup directory, from what it said at start; `None`
/// (and why, for the test's output) where workloads run in process
/// groups.
fn cgroup_root(test: &str, agent: &Agent) -> Option<std::path::PathBuf> {
    let log = agent.log();
    let root = log
        .lines()
        .find_map(|l| l.split_once("grace agent: workloads run in a cgroup v2 each, under "))
        .map(|(_, root)| std::path::PathBuf::from(root));
    if root.is_none() {
        eprintln!("{test}: skipped: no writable cgroup v2 hierarchy here\n{log}");
    }
    root
}

/// Stores `name`, one container running `script` on the local node.
fn apply_workload(dir: &Path, name: &str, script: &str) {
    let file = dir.parent().expect("a parent").join(format!("{name}.json"));
    let pod = serde_json::json!({
        "metadata": {"name": name},
        "spec": {"nodeName": "local", "containers": [{"name": "app", "command": ["sh", "-c", script]}]}
    });
    std::fs::write(&file, pod.to_string()).expect("written");
    let out = grace(dir, &["apply", "-f", file.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// Polls `check` every 20 ms until it holds, for at most `limit`.
fn wait_until(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `grace agent` on `dir`, which must refuse to start: its exit code and
/// message (an agent that starts instead is stopped after 20 s, exit
/// code 124).
fn refused_agent(dir: &Path) -> (Option<i32>, String) {
    let out = Command::new("timeout")
        .args(["20", GRACE, "agent", "--data-dir"])
        .arg(dir)
        .env_remove("GRACE_ETCD_ENDPOINTS")
        .output()
        .expect("timeout runs");
    (out.status.code(), text(&out.stderr))
}

#[test]
fn under_umask_000_the_agents_cgroups_are_0755() {
    let test = "under_umask_000_the_agents_cgroups_are_0755";
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path().join("data");
    let agent = start_agent(&dir, &[], "000");
    let Some(cgroups) = cgroup_root(test, &agent) else {
        return;
    };
    assert_eq!(mode(&cgroups), 0o755, "the agent's cgroup directory");
    apply_workload(&dir, "web", "sleep 30");
    let cgroup = cgroups.join(support::common::workloads::file_name("web", 0, false));
    wait_until("the workload's cgroup", Duration::from_secs(10), || {
        cgroup.exists()
    });
    assert_eq!(mode(&cgroup), 0o755, "the workload's cgroup");
    drop(agent);
}

/// Removes a cgroup the test made, when the test ends (failed too).
struct RemoveCgroup(std::path::PathBuf);

impl Drop for RemoveCgroup {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("cgroup.kill"), "1");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::remove_dir(&self.0).is_err() && self.0.exists() {
            if Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `sh -c script` as `nobody:nogroup` with no other group, through
/// setpriv; `None` (and why) if there is no setpriv.
fn sh_as_nobody(test: &str, script: &str) -> Option<Output> {
    let Some(setpriv) = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        eprintln!("{test}: skipped: needs setpriv (util-linux) to act as nobody");
        return None;
    };
    Some(
        Command::new(setpriv)
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--",
                "sh",
                "-c",
                script,
            ])
            .current_dir("/")
            .output()
            .expect("setpriv runs"),
    )
}

#[test]
fn a_workload_cgroup_another_user_made_first_is_refused_and_left_alone() {
    let test = "a_workload_cgroup_another_user_made_first_is_refused_and_left_alone";
    if !root(test) {
        return;
    }
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path().join("data");
    let agent = start_agent(&dir, &[], "022");
    let Some(cgroups) = cgroup_root(test, &agent) else {
        return;
    };
    // nobody gets to write the directory for a moment (as an agent under
    // umask 000 let it) and makes the cgroup the workload will want.
    let cgroup = cgroups.join(support::common::workloads::file_name("web", 0, false));
    std::fs::set_permissions(&cgroups, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let made = sh_as_nobody(test, &format!("mkdir '{}'", cgroup.display()));
    std::fs::set_permissions(&cgroups, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let Some(made) = made else {
        return;
    };
    assert!(made.status.success(), "{}", text(&made.stderr));
    let _remove = RemoveCgroup(cgroup.clone());
    assert_eq!(std::fs::metadata(&cgroup).expect("made").uid(), NOBODY);
    // A process already in it: the agent must not kill it (nor use the
    // cgroup for its own workload).
    let mut victim = Command::new("sleep").arg("60").spawn().expect("sleep");
    std::fs::write(cgroup.join("cgroup.procs"), victim.id().to_string()).expect("moved in");

    apply_workload(&dir, "web", "sleep 30");
    let mut status = String::new();
    wait_until("the container's status", Duration::from_secs(10), || {
        status = text(&grace(&dir, &["get", "web", "-o", "json"]).stdout);
        status.contains("ContainerCannotRun") || status.contains("\"running\"")
    });
    let still_there = victim.try_wait().expect("waitable").is_none();
    let procs = std::fs::read_to_string(cgroup.join("cgroup.procs")).unwrap_or_default();
    let _ = victim.kill();
    let _ = victim.wait();
    drop(agent);
    assert!(status.contains("ContainerCannotRun"), "{status}");
    assert!(status.contains("refusing the cgroup"), "{status}");
    assert!(still_there, "what ran in the cgroup was left alone");
    assert_eq!(
        procs.trim(),
        victim.id().to_string(),
        "nothing of the agent's ran in it"
    );
}

#[test]
fn an_agent_cgroup_directory_that_is_not_the_agents_stops_it() {
    let test = "an_agent_cgroup_directory_that_is_not_the_agents_stops_it";
    if !root(test) {
        return;
    }
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path().join("data");
    let agent = start_agent(&dir, &[], "022");
    let Some(cgroups) = cgroup_root(test, &agent) else {
        return;
    };
    // A crash leaves it, as it was made: the next agent takes it.
    agent.crash();
    assert!(cgroups.exists());
    drop(start_agent(&dir, &[], "022"));
    // Another user's, or one others may write: refused, left as it is.
    let _ = std::fs::remove_dir(&cgroups);
    std::fs::create_dir(&cgroups).expect("made");
    let _remove = RemoveCgroup(cgroups.clone());
    for (owner, bits) in [(NOBODY, 0o755), (0, 0o777)] {
        std::os::unix::fs::chown(&cgroups, Some(owner), Some(owner)).expect("chown");
        std::fs::set_permissions(&cgroups, std::fs::Permissions::from_mode(bits)).expect("chmod");
        let (code, err) = refused_agent(&dir);
        assert_eq!(code, Some(1), "uid {owner} mode {bits:o}: {err}");
        assert!(err.contains("refusing the cgroup"), "{err}");
        assert!(err.contains(&format!("owner uid {owner}")), "{err}");
        assert_eq!(mode(&cgroups), bits, "left as it was");
    }
}

#[test]
fn a_data_dir_reached_through_another_users_link_is_refused_and_its_target_left_alone() {
    let test = "a_data_dir_reached_through_another_users_link_is_refused_and_its_target_left_alone";
    if !root(test) {
        return;
    }
    // A shared temporary directory (sticky, like /tmp), nobody's link in
    // it to a directory of root's (a system directory, say).
    let root = tempfile::tempdir().expect("temp dir");
    let shared = root.path().join("shared");
    std::fs::create_dir(&shared).expect("made");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let target = root.path().join("system");
    std::fs::create_dir(&target).expect("made");
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::write(target.join("config"), b"x").expect("written");
    let link = shared.join("grace");
    std::os::unix::fs::symlink(&target, &link).expect("linked");
    std::os::unix::fs::lchown(&link, Some(NOBODY), Some(NOBODY)).expect("lchown");

    for data_dir in [link.clone(), link.join("sub")] {
        let (code, err) = refused_agent(&data_dir);
        assert_eq!(code, Some(1), "{}: {err}", data_dir.display());
        assert!(err.contains("refusing to start"), "{err}");
        assert!(
            err.contains(&format!("is a symbolic link owned by uid {NOBODY}")),
            "{err}"
        );
        assert_eq!(mode(&target), 0o755, "the target's mode is unchanged");
        let entries: Vec<_> = std::fs::read_dir(&target)
            .expect("listed")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(entries, ["config"], "nothing created in the target");
    }

    // The agent's own link is followed.
    let mine = root.path().join("mine");
    std::fs::create_dir(&mine).expect("made");
    std::os::unix::fs::symlink(&mine, shared.join("own")).expect("linked");
    drop(start_agent(&shared.join("own/data"), &[], "022"));
    assert_eq!(mode(&mine.join("data")), 0o700);
}

#[test]
fn an_existing_directory_grace_did_not_make_is_never_chmoded() {
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path().join("system");
    std::fs::create_dir(&dir).expect("made");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::write(dir.join("config"), b"x").expect("written");
    // Used as it is: nobody else may write it, and what the agent keeps
    // in it is private itself.
    let agent = start_agent(&dir, &[], "022");
    assert_eq!(mode(&dir), 0o755, "left as it was");
    assert_eq!(mode(&dir.join("grace.redb")), 0o600, "the store");
    assert_eq!(mode(&socket_path(&dir)), 0o600, "the socket");
    drop(agent);
    // Likewise with a group let in (others may pass already): the store
    // marks a directory an agent made, not one it uses.
    std::fs::remove_file(dir.join("grace.redb")).expect("removed");
    drop(start_agent(&dir, &["--allow-group", "nogroup:ro"], "022"));
    assert_eq!(mode(&dir), 0o755, "left as it was");
    assert_eq!(
        std::fs::metadata(&dir).expect("dir").gid(),
        0,
        "its group too"
    );
}

#[test]
fn logs_refused_for_a_permission_say_so() {
    if !as_nobody("logs_refused_for_a_permission_say_so") {
        return;
    }
    let root = reachable_tempdir();
    let dir = root.path().join("data");
    let agent = start_agent(&dir, &["--allow-group", "nogroup:ro"], "022");
    apply_workload(&dir, "web", "echo hello; sleep 30");
    wait_until("the output", Duration::from_secs(10), || {
        text(&grace(&dir, &["logs", "web"]).stdout).contains("hello")
    });
    let out = grace_as_nobody(&dir, &["logs", "web"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("permission denied"), "{err}");
    assert!(!err.contains("no output kept"), "{err}");
    drop(agent);
}

#[test]
fn control_characters_and_bidi_overrides_in_names_are_escaped_in_errors() {
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path().join("data");
    let _agent = start_agent(&dir, &[], "022");
    let evil = "we\u{1b}[31mb\u{202e}x\ny\u{7}";
    let escaped = "we\\u{1b}[31mb\\u{202e}x\\ny\\u{7}";
    let file = root.path().join("evil.json");
    let pod = serde_json::json!({"metadata": {"name": evil}});
    std::fs::write(&file, pod.to_string()).expect("written");
    let runs: [&[&str]; 5] = [
        &["get", evil],
        &["delete", evil],
        &["describe", evil],
        &["logs", evil],
        &["apply", "-f", file.to_str().expect("utf-8")],
    ];
    for args in runs {
        let out = grace(&dir, args);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        let err = text(&out.stderr);
        assert!(
            !err.contains('\u{1b}') && !err.contains('\u{202e}') && !err.contains('\u{7}'),
            "{args:?}: {err:?}"
        );
        assert!(err.contains(escaped), "{args:?}: {err:?}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err:?}");
    }
}
