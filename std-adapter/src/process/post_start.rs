//! A container's post-start hook (`lifecycle.postStart.exec`): run right
//! after its process started, beside it, inside the container's process
//! group (and cgroup), so that stopping or killing the container reaches
//! it, as the kubelet runs the hook inside the container. If the hook
//! fails (a non-zero exit, or it cannot be started), the container is
//! killed with its grace, as the kubelet does: its stop signal, then
//! SIGKILL once the pod's grace has passed if it still runs. grace does
//! not restart containers, so the container then stays terminated.

use std::process::{Command, Stdio};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use rustix::process::Signal;

use super::child_exits::{self, Exit, Notify};
use super::group::Group;
use super::identity::ProcessIdentity;
use super::launch::Launch;
use super::{cgroup, orphans};

/// How the container is killed if its hook fails.
pub(crate) struct OnFailure {
    /// The container's processes.
    pub(crate) group: Group,
    /// Its stop signal.
    pub(crate) signal: Signal,
    /// The pod's grace, before SIGKILL.
    pub(crate) grace: Duration,
}

/// Starts the hook `launch` in the container's group; a thread waits for
/// it and kills the container if it fails.
pub(crate) fn run(launch: &Launch, on_failure: OnFailure) {
    let leader = ProcessIdentity::of(on_failure.group.pgid);
    let Some((program, args)) = launch.argv.split_first() else {
        // Nothing to run is a hook that cannot start.
        beside(on_failure, move |on_failure| {
            failed(on_failure, leader.as_ref())
        });
        return;
    };
    let mut command = Command::new(program);
    command.args(args);
    launch.apply(&mut command);
    // Its output is not kept (the kubelet keeps it only to report a
    // failure).
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    {
        use std::os::unix::process::CommandExt;
        command.process_group(i32::try_from(on_failure.group.pgid).unwrap_or(0));
    }
    let child = match command.spawn() {
        Ok(child) => child,
        Err(_) => {
            beside(on_failure, move |on_failure| {
                failed(on_failure, leader.as_ref())
            });
            return;
        }
    };
    if let Some(cgroup) = &on_failure.group.cgroup {
        let _ = cgroup::add(cgroup, child.id());
    }
    let pid = child.id();
    if orphans::is_subreaper() {
        // Every child is reaped by one thread: its exit comes from there.
        let (tx, rx) = mpsc::channel();
        let tx = std::sync::Mutex::new(tx);
        let notify: Notify = Arc::new(move |exit: Exit| {
            if let Ok(tx) = tx.lock() {
                let _ = tx.send(exit.code);
            }
        });
        child_exits::watch(pid, &notify, || {});
        drop(child);
        beside(on_failure, move |on_failure| {
            if let Ok(code) = rx.recv() {
                ended(code, on_failure, leader.as_ref());
            }
        });
    } else {
        let mut child = child;
        beside(on_failure, move |on_failure| {
            let code = child.wait().ok().and_then(|status| {
                use std::os::unix::process::ExitStatusExt;
                status
                    .code()
                    .or_else(|| status.signal().map(|s| s.saturating_add(128)))
            });
            ended(code, on_failure, leader.as_ref());
        });
    }
}

/// Runs `wait` (which waits for the hook, or for the grace of a container
/// whose hook failed) on a thread of its own. When no thread can be
/// started (the machine is out of processes or threads) the hook's outcome
/// cannot be known: the container is stopped at once with its stop
/// signal, as for a hook that failed, without the SIGKILL after the grace
/// that nothing is left to send.
fn beside(on_failure: OnFailure, wait: impl FnOnce(&OnFailure) + Send + 'static) {
    let (group, signal) = (on_failure.group.clone(), on_failure.signal);
    let started = std::thread::Builder::new()
        .name("grace-post-start".into())
        .spawn(move || wait(&on_failure));
    if started.is_err() {
        group.signal(signal);
        group.signal(Signal::CONT);
    }
}

/// The hook ended with `code` (`None`: unknown, as when another thread
/// reaped it: nothing is done).
fn ended(code: Option<i32>, on_failure: &OnFailure, leader: Option<&ProcessIdentity>) {
    if code.is_some_and(|c| c != 0) {
        failed(on_failure, leader);
    }
}

/// Kills the container whose hook failed: its stop signal now, SIGKILL
/// after the grace if its leader still runs (never a pid reused since).
fn failed(on_failure: &OnFailure, leader: Option<&ProcessIdentity>) {
    let Some(leader) = leader.filter(|l| l.is_alive()) else {
        return;
    };
    on_failure.group.signal(on_failure.signal);
    on_failure.group.signal(Signal::CONT);
    let due = std::time::Instant::now().checked_add(on_failure.grace);
    // Looked at every 100 ms: a container that stops at its signal ends
    // the wait. A grace too long for the clock never ends.
    while due.is_none_or(|due| std::time::Instant::now() < due) {
        if !leader.is_alive() && on_failure.group.is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if leader.is_alive() {
        on_failure.group.kill();
    }
}
