//! One reaper for every process: a single thread waits on one `epoll` set
//! that holds a pidfd per watched process (`pidfd_open` works for any
//! process), reaps children's exit statuses with `waitid`, kills what is
//! left of the group, and reports the exit once the group (or cgroup) is
//! empty. No thread per child.
//!
//! In a subreaper ([`orphans::become_subreaper`]), its own children need
//! no pidfd: their exits come from `child_exits`, which reaps every child
//! of the process as it ends, so a workload costs no file descriptor here.
//! Adopted processes (not children) keep their pidfd.
//!
//! Each pidfd is registered once, when the watch is taken up, and leaves
//! the set when its process exits: the thread sleeps until a process
//! exits or a new watch comes (an `eventfd` wakes it), so its work is per
//! exit, not per watched process — with 10 000 workloads, a wait is not a
//! scan of 10 000 descriptors. Only the groups of exited leaders that
//! still have members are looked at again, every 10 ms.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, mpsc};
use std::time::Duration as StdDuration;

use rustix::buffer::spare_capacity;
use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec, epoll, eventfd, poll};
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, WaitId, WaitIdOptions, pidfd_open, waitid};

use super::WorldEvent;
use super::child_exits::{self, Exit, Notify};
use super::group::Group;
use super::orphans;
use super::table;

/// How often the groups of exited leaders are checked for leftovers (and
/// a pidfd the epoll set refused is polled).
const DRAIN_EVERY: StdDuration = StdDuration::from_millis(10);

/// How long a new watch may wait to be taken up where no `eventfd` could
/// be made to announce it (an exit meanwhile is not missed: the pidfd
/// stays readable).
const TAKE_EVERY: StdDuration = StdDuration::from_millis(50);

/// The most readiness events taken from one wait (more wait for the next).
const EVENTS_PER_WAIT: usize = 1024;

/// The epoll token of the wake-up `eventfd` (a watch's token is its
/// sequence number, from 1).
const WAKE: u64 = 0;

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
    /// For an adopted process: its start marker, where its waiter writes
    /// the command's status as it ends ([`table::exit_status`]), read once
    /// it is gone (this process is not its parent: it cannot reap it).
    pub exit_file: Option<PathBuf>,
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
    /// A child whose exit [`child_exits`] reports (no pidfd).
    Child(WatchedProcess),
    /// A child's exit, from [`child_exits`].
    Exited(Exit),
}

/// The handle to the reaper thread; dropping it ends the thread.
pub struct Reaper {
    add: mpsc::Sender<Msg>,
    /// Wakes the thread for a new watch (`None`: it looks every
    /// [`TAKE_EVERY`] instead).
    wake: Option<Arc<OwnedFd>>,
    /// Hands the thread a child's exit, from [`child_exits`].
    notify: Notify,
}

impl Reaper {
    /// Starts the reaper thread, which reports to `events`; fails when no
    /// thread can be started.
    pub fn spawn(events: mpsc::Sender<WorldEvent>) -> std::io::Result<Reaper> {
        let (add, added) = mpsc::channel();
        let wake = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
            .ok()
            .map(Arc::new);
        let woken = wake.clone();
        std::thread::Builder::new()
            .name("grace-reaper".into())
            .spawn(move || run(&added, &events, woken.as_deref()))?;
        let notify: Notify = {
            let (add, wake) = (add.clone(), wake.clone());
            Arc::new(move |exit| send(&add, wake.as_deref(), Msg::Exited(exit)))
        };
        Ok(Reaper { add, wake, notify })
    }

    /// Watches a process. One that is already gone is reported at once.
    pub fn watch(&mut self, watch: WatchedProcess) {
        if watch.child && orphans::is_subreaper() {
            let pid = watch.pid;
            let (add, wake) = (&self.add, self.wake.as_deref());
            child_exits::watch(pid, &self.notify, || {
                send(add, wake, Msg::Child(watch));
            });
            return;
        }
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
        send(&self.add, self.wake.as_deref(), msg);
    }
}

impl std::fmt::Debug for Reaper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reaper")
            .field("wake", &self.wake)
            .finish_non_exhaustive()
    }
}

/// Hands the thread `msg` and wakes it.
fn send(add: &mpsc::Sender<Msg>, wake: Option<&OwnedFd>, msg: Msg) {
    if add.send(msg).is_ok()
        && let Some(wake) = wake
    {
        let _ = rustix::io::write(wake, &1_u64.to_ne_bytes());
    }
}

impl Drop for Reaper {
    /// Closes the channel and wakes the thread, which finds it closed and
    /// ends.
    fn drop(&mut self) {
        drop(std::mem::replace(&mut self.add, mpsc::channel().0));
        if let Some(wake) = &self.wake {
            let _ = rustix::io::write(wake.as_fd(), &1_u64.to_ne_bytes());
        }
    }
}

/// The watched processes, as the thread holds them.
#[derive(Debug, Default)]
struct Watched {
    /// Registered in the epoll set, by token.
    registered: HashMap<u64, Live>,
    /// Ones the epoll set refused (out of kernel memory for watches):
    /// polled every [`DRAIN_EVERY`] instead.
    polled: Vec<Live>,
    /// Children whose exits come from [`child_exits`], by pid.
    children: HashMap<u32, WatchedProcess>,
    /// The next token.
    next: u64,
}

fn run(added: &mpsc::Receiver<Msg>, events: &mpsc::Sender<WorldEvent>, wake: Option<&OwnedFd>) {
    // Made here, retried until it can be (out of descriptors at start):
    // exits meanwhile are not missed, the pidfds stay readable.
    let epoll = loop {
        match epoll::create(epoll::CreateFlags::CLOEXEC) {
            Ok(epoll) => break epoll,
            Err(_) => std::thread::sleep(DRAIN_EVERY),
        }
    };
    let wake = wake.filter(|wake| {
        epoll::add(
            &epoll,
            wake,
            epoll::EventData::new_u64(WAKE),
            epoll::EventFlags::IN,
        )
        .is_ok()
    });
    let mut watched = Watched {
        next: WAKE.saturating_add(1),
        ..Watched::default()
    };
    // Exited leaders whose group is awaited: the exit status, and whether
    // what is left of the group is SIGKILLed when looked at.
    let mut draining: Vec<(WatchedProcess, Option<i32>, bool)> = Vec::new();
    let mut ready: Vec<epoll::Event> = Vec::with_capacity(EVENTS_PER_WAIT);
    let timespec = |d: StdDuration| Timespec {
        tv_sec: 0,
        tv_nsec: i64::from(d.subsec_nanos()),
    };
    let (drain_tick, take_tick) = (timespec(DRAIN_EVERY), timespec(TAKE_EVERY));
    loop {
        let timeout = if !draining.is_empty() || !watched.polled.is_empty() {
            Some(&drain_tick)
        } else if wake.is_none() {
            Some(&take_tick)
        } else {
            None // until an exit or a new watch
        };
        ready.clear();
        match epoll::wait(&epoll, spare_capacity(&mut ready), timeout) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(_) => std::thread::sleep(DRAIN_EVERY),
        }
        let mut exited = Vec::new();
        for event in &ready {
            let token = event.data.u64();
            if token == WAKE {
                if let Some(wake) = wake {
                    let mut count = [0_u8; 8];
                    let _ = rustix::io::read(wake, &mut count);
                }
            } else if let Some(live) = watched.registered.remove(&token) {
                let _ = epoll::delete(&epoll, &live.pidfd);
                exited.push(live);
            }
        }
        exited.extend(take_polled(&mut watched.polled));
        loop {
            match added.try_recv() {
                Ok(Msg::Live(live)) => watched.register(&epoll, live),
                Ok(Msg::Gone(watch)) => {
                    watch.group.kill();
                    draining.push((watch, None, true));
                }
                Ok(Msg::Child(watch)) => {
                    watched.children.insert(watch.pid, watch);
                }
                // Reaped already: what is left of its group is looked at
                // like any exited leader's (below).
                Ok(Msg::Exited(exit)) => {
                    if let Some(watch) = watched.children.remove(&exit.pid) {
                        draining.push((watch, exit.code, false));
                    }
                }
                Err(mpsc::TryRecvError::Empty) => break,
                // The actuator is gone: so is whoever would hear of exits.
                Err(mpsc::TryRecvError::Disconnected) => return,
            }
        }
        for gone in exited {
            let code = if gone.watch.child {
                // Reaped by `child_exits` if the process became a
                // subreaper since the watch began.
                exit_code(&gone.pidfd).or_else(|| child_exits::claim(gone.watch.pid))
            } else {
                None
            };
            // The leader is gone: nothing of the workload may outlive it.
            // What is left of the group is SIGKILLed if it is still there
            // at the next look (every 10 ms): the rest of a group that
            // got the stop signal with its leader is usually ending
            // already, and gets no SIGKILL then. (An empty group gains no
            // member: it needs none, and a cgroup's takes the kernel's
            // cgroup lock.)
            draining.push((gone.watch, code, false));
        }
        draining.retain_mut(|(watch, code, due)| {
            // Its leader is reaped (or not our child): what ended of the
            // rest and came to us is reaped, or it would count as running;
            // the workload is stopped once none of it is left and none of
            // our children in its group is still to be reaped.
            let children_left = watch.group.reap_exited_members();
            if children_left || !watch.group.is_empty() {
                if *due {
                    watch.group.kill();
                }
                *due = true;
                return true;
            }
            watch.group.release_soon();
            let _ = events.send(event(watch, *code));
            false
        });
    }
}

impl Watched {
    /// Adds `live` to the epoll set (or, refused, to those polled).
    fn register(&mut self, epoll: &OwnedFd, live: Live) {
        let token = self.next;
        self.next = self.next.saturating_add(1);
        match epoll::add(
            epoll,
            &live.pidfd,
            epoll::EventData::new_u64(token),
            epoll::EventFlags::IN,
        ) {
            Ok(()) => {
                self.registered.insert(token, live);
            }
            Err(_) => self.polled.push(live),
        }
    }
}

/// Takes out of `polled` the processes that exited.
fn take_polled(polled: &mut Vec<Live>) -> Vec<Live> {
    if polled.is_empty() {
        return Vec::new();
    }
    let gone: Vec<bool> = {
        let mut fds: Vec<PollFd<'_>> = polled
            .iter()
            .map(|l| PollFd::new(&l.pidfd, PollFlags::IN))
            .collect();
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        if poll(&mut fds, Some(&now)).is_err() {
            return Vec::new();
        }
        fds.iter().map(|fd| !fd.revents().is_empty()).collect()
    };
    let mut exited = Vec::new();
    let mut i = 0;
    for is_gone in gone {
        if is_gone {
            exited.push(polled.remove(i));
        } else {
            i = i.saturating_add(1);
        }
    }
    exited
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
        return WorldEvent::pre_stop_finished(watch.object.clone(), watch.container);
    }
    // Not our child (adopted): its waiter wrote the status, and when.
    let written = match code {
        Some(_) => None,
        None => watch.exit_file.as_deref().and_then(table::exit_status),
    };
    match written {
        Some((code, at)) => WorldEvent::exited(watch.object.clone(), watch.container, Some(code))
            .with_finished_at(unix_seconds(at)),
        None => WorldEvent::exited(watch.object.clone(), watch.container, code),
    }
}

/// `at` in whole seconds since the epoch, as statuses keep times.
fn unix_seconds(at: std::time::SystemTime) -> grace_core::Timestamp {
    let seconds = at
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    grace_core::Timestamp::from_unix_seconds(seconds)
}
