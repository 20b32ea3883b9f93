//! One reaper for every process: a single thread polls a pidfd per watched
//! process (children and adopted processes alike: `pidfd_open` works for
//! any process), reaps children's exit statuses with `waitid`, kills what
//! is left of the group, and reports the exit once the group (or cgroup)
//! is empty. No thread per child.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::mpsc;
use std::time::Duration as StdDuration;

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, PidfdFlags, WaitId, WaitIdOptions, pidfd_open, waitid};

use super::WorldEvent;
use super::group::Group;
use super::orphans::Sweep;

/// How often the groups of exited leaders are checked for leftovers.
const DRAIN_EVERY: StdDuration = StdDuration::from_millis(10);

/// How long a new watch may wait to be taken up (an exit meanwhile is not
/// missed: the pidfd stays readable).
const TAKE_EVERY: StdDuration = StdDuration::from_millis(50);

/// The old name of [`WatchedProcess`], which said the same as
/// [`store::Watch`](crate::store::Watch) (a store's change stream).
#[deprecated(note = "renamed WatchedProcess (store::Watch is a store's change stream)")]
pub type Watch = WatchedProcess;

/// One process to watch.
#[derive(Clone, Debug)]
pub struct WatchedProcess {
    /// The object.
    pub object: String,
    /// The container's index.
    pub container: usize,
    /// A pre-stop hook rather than the workload.
    pub hook: bool,
    /// The process (its group's leader).
    pub pid: u32,
    /// Our child (its exit status can be read) or an adopted process.
    pub child: bool,
    /// For an adopted process: the start time it must still have (checked
    /// after its pidfd is open, so that the pidfd cannot be another
    /// process's that took a reused pid).
    pub start_time: Option<u64>,
    /// Its processes.
    pub group: Group,
}

/// A watch and its pidfd, as the thread holds it.
#[derive(Debug)]
struct Live {
    watch: WatchedProcess,
    pidfd: OwnedFd,
}

/// What the thread is handed.
#[derive(Debug)]
enum Msg {
    /// A process to watch.
    Live(Live),
    /// A process already gone: its group is emptied and its exit reported.
    Gone(WatchedProcess),
}

/// The handle to the reaper thread; dropping it ends the thread.
#[derive(Debug)]
pub struct Reaper {
    add: mpsc::Sender<Msg>,
}

impl Reaper {
    /// Starts the reaper thread, which reports to `events`.
    pub fn spawn(events: mpsc::Sender<WorldEvent>) -> Reaper {
        let (add, added) = mpsc::channel();
        std::thread::spawn(move || run(&added, &events));
        Reaper { add }
    }

    /// Watches a process. One that is already gone is reported at once.
    pub fn watch(&mut self, watch: WatchedProcess) {
        let pidfd = i32::try_from(watch.pid)
            .ok()
            .and_then(Pid::from_raw)
            .and_then(|pid| pidfd_open(pid, PidfdFlags::empty()).ok())
            .filter(|_| {
                watch
                    .start_time
                    .is_none_or(|t| super::identity::start_time(watch.pid) == Some(t))
            });
        // Gone already (an adopted process that exited meanwhile): what
        // is left of its group is killed and awaited like any.
        // Its process group may be another's by now: only a cgroup (which
        // is ours alone) is still signalled.
        let msg = match pidfd {
            Some(pidfd) => Msg::Live(Live { watch, pidfd }),
            None => Msg::Gone(WatchedProcess {
                group: Group {
                    pgid: 0,
                    ..watch.group.clone()
                },
                ..watch
            }),
        };
        let _ = self.add.send(msg);
    }
}

fn run(added: &mpsc::Receiver<Msg>, events: &mpsc::Sender<WorldEvent>) {
    let mut live: Vec<Live> = Vec::new();
    let mut draining: Vec<(WatchedProcess, Option<i32>)> = Vec::new();
    let timespec = |d: StdDuration| Timespec {
        tv_sec: 0,
        tv_nsec: i64::from(d.subsec_nanos()),
    };
    let (drain_tick, take_tick) = (timespec(DRAIN_EVERY), timespec(TAKE_EVERY));
    let mut sweep = Sweep::new();
    loop {
        let mut ready = Vec::new();
        {
            let mut fds: Vec<PollFd<'_>> = live
                .iter()
                .map(|l| PollFd::new(&l.pidfd, PollFlags::IN))
                .collect();
            let timeout = if draining.is_empty() {
                &take_tick
            } else {
                &drain_tick
            };
            match poll(&mut fds, Some(timeout)) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => std::thread::sleep(DRAIN_EVERY),
            }
            ready.extend(
                fds.iter()
                    .enumerate()
                    .filter(|(_, fd)| !fd.revents().is_empty())
                    .map(|(i, _)| i),
            );
        }
        loop {
            match added.try_recv() {
                Ok(Msg::Live(l)) => live.push(l),
                Ok(Msg::Gone(watch)) => {
                    watch.group.kill();
                    draining.push((watch, None));
                }
                Err(mpsc::TryRecvError::Empty) => break,
                // The actuator is gone: so is whoever would hear of exits.
                Err(mpsc::TryRecvError::Disconnected) => return,
            }
        }
        // Highest index first: `swap_remove` moves only entries already seen.
        for i in ready.into_iter().rev() {
            let gone = live.swap_remove(i);
            let code = if gone.watch.child {
                exit_code(&gone.pidfd)
            } else {
                None
            };
            // The leader is gone: nothing of the workload may outlive it.
            gone.watch.group.kill();
            draining.push((gone.watch, code));
        }
        draining.retain(|(watch, code)| {
            // Its leader is reaped (or not our child): what ended of the
            // rest and came to us is reaped, or it would count as running.
            watch.group.reap_exited_members();
            if !watch.group.is_empty() {
                watch.group.kill();
                return true;
            }
            watch.group.release();
            let _ = events.send(event(watch, *code));
            false
        });
        sweep.run(|| live.iter().filter(|l| l.watch.child).map(|l| l.watch.pid));
    }
}

/// Reaps an exited child: its status as a shell reports it (the exit code,
/// or 128 + the signal that ended it).
fn exit_code(pidfd: &OwnedFd) -> Option<i32> {
    let status = waitid(
        WaitId::PidFd(pidfd.as_fd()),
        WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
    )
    .ok()??;
    status
        .exit_status()
        .or_else(|| status.terminating_signal().map(|s| s.saturating_add(128)))
}

fn event(watch: &WatchedProcess, code: Option<i32>) -> WorldEvent {
    if watch.hook {
        WorldEvent::PreStopFinished {
            object: watch.object.clone(),
            container: watch.container,
        }
    } else {
        WorldEvent::Exited {
            object: watch.object.clone(),
            container: watch.container,
            code,
        }
    }
}
