//! Real processes under the `ProcessActuator`: shell scripts that trap or
//! ignore SIGTERM and leave marker files. What is checked is what a process
//! can observe: which signal reached whom, that a hook is cut off, that
//! nothing is left running.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

mod common;

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use common::workloads::{ProcessIdentity, WorkloadRecord};
use grace_core::{Action, Input, Name, Record};
use grace_std::process::{OrphanStop, ProcessActuator, WorldEvent};
use grace_std::runtime::Actuator;
use grace_std::store::{StoredContainer, StoredObject};

fn object(command: &str, pre_stop: Option<&str>) -> StoredObject {
    let mut o = StoredObject::on_node(
        Record::new(Name::try_from("uid-1").expect("short")),
        "node-a",
    );
    o.containers = vec![
        StoredContainer::new("main", ["sh", "-c", command])
            .with_pre_stop_hook(pre_stop.map(str::to_owned)),
    ];
    o
}

/// Waits until `cond` holds, up to 10 s (a slow machine), polling.
fn eventually(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(10), "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Alive and not a zombie.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[test]
fn stop_signal_reaches_the_whole_group_including_grandchildren() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path().display();
    let script = format!(
        "sh -c 'trap \"touch {d}/grandchild-term; exit 0\" TERM; echo $$ > {d}/gc; while :; do sleep 0.05; done' &
         trap 'touch {d}/main-term; wait; exit 0' TERM
         touch {d}/up
         while :; do sleep 0.05; done"
    );
    let stored = object(&script, None);
    let (mut actuator, events) = ProcessActuator::new();
    actuator.start("p", &stored).expect("started");
    // Each shell writes its marker once its trap is installed.
    eventually("the grandchild runs", || {
        read_pid(&dir.path().join("gc")).is_some()
    });
    eventually("main's trap is installed", || {
        dir.path().join("up").exists()
    });

    actuator
        .perform("p", &stored, &Action::SendStopSignal { container: 0 })
        .expect("signalled");
    eventually("main got SIGTERM", || dir.path().join("main-term").exists());
    eventually("grandchild got SIGTERM", || {
        dir.path().join("grandchild-term").exists()
    });
    let event = events
        .recv_timeout(Duration::from_secs(10))
        .expect("exit reported");
    assert_eq!(event, WorldEvent::exited("p", 0, Some(0)));
}

#[test]
fn sigkill_reaches_a_grandchild_that_ignores_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path().display();
    let script = format!(
        "sh -c 'trap \"\" TERM; echo $$ > {d}/gc; while :; do sleep 0.05; done' &
         trap '' TERM
         touch {d}/up
         while :; do sleep 0.05; done"
    );
    let stored = object(&script, None);
    let (mut actuator, events) = ProcessActuator::new();
    actuator.start("p", &stored).expect("started");
    eventually("the grandchild runs", || {
        read_pid(&dir.path().join("gc")).is_some()
    });
    let gc = read_pid(&dir.path().join("gc")).expect("pid");
    // Each shell writes its marker once its trap is installed.
    eventually("main's trap is installed", || {
        dir.path().join("up").exists()
    });

    actuator
        .perform("p", &stored, &Action::SendStopSignal { container: 0 })
        .expect("signalled");
    // What is tested: nothing happens for a while (no readiness signal
    // can show that something does not happen).
    std::thread::sleep(Duration::from_millis(300));
    assert!(alive(gc), "SIGTERM is ignored: still running");
    assert!(events.try_recv().is_err(), "main ignores SIGTERM too");

    actuator
        .perform("p", &stored, &Action::SendKill { container: 0 })
        .expect("killed");
    let event = events
        .recv_timeout(Duration::from_secs(10))
        .expect("exit reported");
    assert!(event.exit() == Some((0, Some(137))), "{event:?}");
    eventually("the grandchild is gone", || !alive(gc));
}

#[test]
fn a_pre_stop_hook_is_cut_off_when_the_stop_signal_is_due() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path().display();
    let hook = format!("echo $$ > {d}/hook; sleep 1000");
    let stored = object(
        &format!("trap 'exit 0' TERM; touch {d}/up; while :; do sleep 0.05; done"),
        Some(&hook),
    );
    let (mut actuator, events) = ProcessActuator::new();
    actuator.start("p", &stored).expect("started");
    eventually("the trap is installed", || dir.path().join("up").exists());

    actuator
        .perform(
            "p",
            &stored,
            &Action::RunPreStop {
                container: 0,
                budget_seconds: 1,
            },
        )
        .expect("hook started");
    eventually("the hook runs", || {
        read_pid(&dir.path().join("hook")).is_some()
    });
    let hook_pid = read_pid(&dir.path().join("hook")).expect("pid");
    assert!(alive(hook_pid));

    // The runtime sends the stop signal when the budget is spent; the
    // hook's group is killed then.
    actuator
        .perform("p", &stored, &Action::SendStopSignal { container: 0 })
        .expect("signalled");
    eventually("the hook is cut off", || !alive(hook_pid));
    // Both the hook's end and the workload's exit are reported.
    let mut seen = Vec::new();
    while seen.len() < 2 {
        seen.push(
            events
                .recv_timeout(Duration::from_secs(10))
                .expect("reported"),
        );
    }
    assert!(seen.contains(&WorldEvent::exited("p", 0, Some(0))));
}

#[test]
fn a_stopped_container_leaves_nothing_behind_before_its_exit_is_reported() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path().display();
    // The main process exits on SIGTERM; its child ignores SIGTERM and
    // would outlive it.
    let script = format!(
        "sh -c 'trap \"\" TERM; echo $$ > {d}/gc; while :; do sleep 0.05; done' &
         trap 'exit 0' TERM
         touch {d}/up
         while :; do sleep 0.05; done"
    );
    let stored = object(&script, None);
    let (mut actuator, events) = ProcessActuator::new();
    actuator.start("p", &stored).expect("started");
    eventually("the grandchild runs", || {
        read_pid(&dir.path().join("gc")).is_some()
    });
    let gc = read_pid(&dir.path().join("gc")).expect("pid");
    // Each shell writes its marker once its trap is installed.
    eventually("main's trap is installed", || {
        dir.path().join("up").exists()
    });

    actuator
        .perform("p", &stored, &Action::SendStopSignal { container: 0 })
        .expect("signalled");
    let _ = events
        .recv_timeout(Duration::from_secs(10))
        .expect("main exited");
    // The exit counts once the whole group is gone: the orphan with it.
    assert!(
        !alive(gc),
        "the orphan was killed before the exit was reported"
    );
    actuator
        .perform("p", &stored, &Action::ContainerStopped { container: 0 })
        .expect("cleaned up");
    assert!(!actuator.is_running("p", 0));
}

#[test]
fn actions_are_idempotent_after_the_process_is_gone() {
    let stored = object("exit 3", None);
    let (mut actuator, events) = ProcessActuator::new();
    actuator.start("p", &stored).expect("started");
    let event = events
        .recv_timeout(Duration::from_secs(10))
        .expect("exit reported");
    assert_eq!(event, WorldEvent::exited("p", 0, Some(3)));
    actuator.reaped("p", 0);
    // Repeated after a restart: nothing to signal, no error.
    for action in [
        Action::SendStopSignal { container: 0 },
        Action::SendKill { container: 0 },
        Action::ContainerStopped { container: 0 },
        Action::SendKill { container: 0 },
    ] {
        let done = actuator.perform("p", &stored, &action);
        assert!(done.is_ok(), "{action}: {done:?}");
    }
}

/// A memory store that counts its commits (batches and single writes).
#[derive(Clone, Default)]
struct Counting {
    inner: std::sync::Arc<grace_std::store::MemoryStore>,
    commits: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl grace_std::store::Store for Counting {
    fn get(
        &self,
        name: &str,
    ) -> Result<Option<(StoredObject, grace_std::store::Revision)>, grace_std::store::StoreError>
    {
        self.inner.get(name)
    }
    fn list(&self) -> Result<grace_std::store::Listing, grace_std::store::StoreError> {
        self.inner.list()
    }
    fn revision(&self) -> Result<grace_std::store::Revision, grace_std::store::StoreError> {
        self.inner.revision()
    }
    fn batch(
        &self,
        writes: Vec<grace_std::store::Write>,
    ) -> Result<Vec<grace_std::store::Revision>, grace_std::store::BatchError> {
        self.commits
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.batch(writes)
    }
    fn watch(
        &self,
        from: grace_std::store::Revision,
    ) -> Result<grace_std::store::Watch, grace_std::store::StoreError> {
        self.inner.watch(from)
    }
}

#[test]
fn exits_that_wait_together_are_reported_with_one_commit_and_complete_each_deletion() {
    use grace_std::clock::ManualClock;
    use grace_std::runtime::{Recovery, Runtime};
    use grace_std::store::Store as _;

    const PODS: usize = 5;
    let store = Counting::default();
    let (actuator, events) = ProcessActuator::new();
    let clock = std::sync::Arc::new(ManualClock::at_unix_millis(1_000_000));
    let mut rt = Runtime::open(store.clone(), clock, actuator, Recovery::default()).expect("opens");
    let names: Vec<String> = (0..PODS).map(|i| format!("p{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        let mut pod = object("exec sleep 100", None);
        pod.record.uid = Name::try_from(format!("uid-{i}").as_str()).expect("short");
        rt.create(name, pod.clone()).expect("created");
        rt.actuator().start(name, &pod).expect("started");
        let _ = rt
            .handle(
                name,
                Input::Delete(grace_core::DeleteOptions::with_grace(30)),
            )
            .expect("deleted");
        let _ = rt.handle(name, Input::AgentSync).expect("SIGTERM sent");
    }
    // `sleep` ends at its SIGTERM: every exit is reported.
    let exits: Vec<WorldEvent> = (0..PODS)
        .map(|_| {
            events
                .recv_timeout(Duration::from_secs(10))
                .expect("exited")
        })
        .collect();
    let before = store.commits.load(std::sync::atomic::Ordering::SeqCst);
    rt.handle_world_events(exits).expect("handled");
    let commits = store.commits.load(std::sync::atomic::Ordering::SeqCst) - before;
    // One before the actions, one after (the removals): not two or three
    // per exit.
    assert!(commits <= 2, "{commits} commits for {PODS} exits");
    for name in &names {
        assert!(rt.lifecycle(name).is_none(), "{name} is still tracked");
        assert!(
            store.get(name).expect("readable").is_none(),
            "{name} is stored"
        );
        assert!(!rt.actuator().is_running(name, 0), "{name} runs");
    }
    // An exit of an object no longer tracked changes nothing.
    rt.handle_world_events([WorldEvent::exited("gone", 0, Some(0))])
        .expect("nothing to do");
}

/// The reaper waits on one epoll set: every exit of many real processes
/// is reported once, with its status, in whatever order they end; and a
/// process watched once the reaper has nothing left to do (asleep with no
/// timeout) is still taken up and reported.
#[test]
fn the_reaper_reports_each_exit_of_many_real_processes_once_and_wakes_for_a_new_watch() {
    const N: usize = 300;
    let (mut actuator, events) = ProcessActuator::new();
    let names: Vec<String> = (0..N).map(|i| format!("w{i}")).collect();
    let stored = object("exec sleep 100", None);
    for name in &names {
        actuator.start(name, &stored).expect("started");
    }
    // Stopped in reverse order of their start, half of them by SIGKILL.
    for (i, name) in names.iter().enumerate().rev() {
        let action = if i % 2 == 0 {
            Action::SendStopSignal { container: 0 }
        } else {
            Action::SendKill { container: 0 }
        };
        actuator.perform(name, &stored, &action).expect("signalled");
    }
    let mut seen = std::collections::BTreeMap::new();
    while seen.len() < N {
        let event = events
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("only {} of {N} exits reported", seen.len()));
        let Some((_, code)) = event.exit() else {
            panic!("not an exit: {event:?}");
        };
        let object = event.object;
        assert!(
            seen.insert(object.clone(), code).is_none(),
            "{object} twice"
        );
    }
    for (i, name) in names.iter().enumerate() {
        let expected = if i % 2 == 0 { 128 + 15 } else { 128 + 9 };
        assert_eq!(seen.get(name), Some(&Some(expected)), "{name}");
    }
    assert!(
        events.recv_timeout(Duration::from_millis(200)).is_err(),
        "nothing more"
    );
    // Nothing is watched any more: the reaper sleeps until woken.
    actuator
        .start("late", &object("exit 3", None))
        .expect("started");
    match events.recv_timeout(Duration::from_secs(10)) {
        Ok(event) if event.exit().is_some() => {
            assert_eq!(event, WorldEvent::exited("late", 0, Some(3)));
        }
        other => panic!("the late exit: {other:?}"),
    }
}

/// Whether this process may raise its hard limits (`CAP_SYS_RESOURCE`,
/// bit 24 of the effective capabilities; root in a container may lack it).
fn may_raise_hard_limits() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let caps = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
            u64::from_str_radix(caps.trim(), 16).ok()
        })
        .is_some_and(|caps| caps & (1 << 24) != 0)
}

/// The agent's open-files limit: the soft limit ends equal to the hard
/// one, and where it may (`CAP_SYS_RESOURCE`) a hard limit below
/// `WANTED_OPEN_FILES` is raised to it (up to two descriptors per
/// workload, for adopted ones: 10 000 of them need over 20 000).
#[test]
fn the_open_files_limit_is_raised_for_thousands_of_workloads() {
    let (soft, hard) = grace_std::process::raise_open_files_limit().expect("limits raised");
    assert_eq!(soft, hard, "the soft limit is the hard one");
    if may_raise_hard_limits() {
        assert!(
            hard.is_none_or(|h| h >= grace_std::process::WANTED_OPEN_FILES),
            "with CAP_SYS_RESOURCE the hard limit is raised to at least {}: {hard:?}",
            grace_std::process::WANTED_OPEN_FILES
        );
    }
}

/// D2 (huge values saturate): the largest SIGKILL deadline a workload
/// record can hold. The adopted workload's object is gone; stopping it
/// keeps that deadline and waits (no overflow, no early SIGKILL): the
/// workload, a real process, still runs afterwards.
#[test]
fn d2_the_largest_sigkill_deadline_of_an_adopted_record_waits_without_overflow() {
    let tmp = tempfile::tempdir().expect("tmp");
    let table = tmp.path().join("workloads");
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .process_group(0)
        .spawn()
        .expect("sleep");
    let process = ProcessIdentity::of(child.id()).expect("running");
    common::workloads::write_record(
        &table,
        &WorkloadRecord {
            object: "gone".into(),
            container: 0,
            hook: false,
            process,
            cgroup: None,
            stop_signal_sent: Some(1),
            sigkill_at: Some(u64::MAX),
            marks_start: false,
        },
    );
    let (mut actuator, _events, adoption) =
        ProcessActuator::with_state_dir(&table).expect("the table opens");
    assert_eq!(adoption.adopted, vec![("gone".to_owned(), 0, false)]);
    let done = actuator
        .stop_orphans(|_| false, grace_core::Instant::from_millis(5))
        .expect("its thread starts");
    assert!(
        matches!(
            done.as_slice(),
            [OrphanStop::Stopping {
                signalled_now: false,
                ..
            }]
        ),
        "{done:?}"
    );
    assert!(child.try_wait().expect("waits").is_none(), "not killed");
    let _ = child.kill();
    let _ = child.wait();
}
