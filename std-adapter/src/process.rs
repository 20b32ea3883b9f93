//! Real process control: the [`Actuator`] that runs workloads as child
//! processes.
//!
//! Each container's command runs in a process group of its own, so that a
//! signal reaches everything it started (grandchildren included); where a
//! writable cgroup v2 hierarchy exists and a state directory is given, each
//! also runs in a cgroup of its own, which holds even what
//! left the group. The stop signal goes to the whole group together with
//! SIGCONT (a stopped process could not act on it otherwise); SIGKILL goes
//! to the whole group and cgroup. A pre-stop hook runs as `sh -c CMD` in a
//! group (and cgroup) of its own and is killed when its budget is spent
//! (when the stop signal is due). One thread watches every
//! process through a pidfd, reaps children, kills what is left of a group
//! whose leader exited and reports the exit as a [`WorldEvent`] once the
//! group is empty, which the caller feeds back to the runtime
//! ([`Runtime::handle_world_event`](crate::runtime::Runtime::handle_world_event),
//! as for any actuator): nothing is orphaned, and a container counts as
//! stopped only when all of it is.
//!
//! With a state directory ([`ProcessActuator::with_state_dir`]) every
//! workload and hook is written to a table in that directory before it may run
//! its command: it is started behind a gate (`sh` waiting for one line on
//! its stdin, which it gets once the record is durable; if the agent dies
//! first it reads end of file and exits without running anything). A
//! restarted agent adopts from the table every process still there on
//! this boot with the same pid *and* start time, and goes
//! on watching it; a record is removed only once its process group (or
//! cgroup) is empty. The gate's `sh` stays as the command's waiter: it
//! writes the command's exit status into the workload's start marker when
//! it ends, so that a later agent, which is not its parent, reports the
//! real status of a workload that ended while no agent ran.
//!
//! Each container's process (and its hooks) runs with the environment,
//! working directory and user its stored container says
//! ([`Environment`]: only the container's, for a node agent, or the
//! actuator's own with the container's entries added); a container the
//! agent must not or cannot start as asked is a [`LaunchError`]. A
//! post-start hook runs beside the process, in its group.
//!
//! Where the processes' standard streams go is [`Output`]: discarded,
//! passed through (`grace run`), or kept in per-container log files
//! ([`logs`]).
//!
//! Only the runtime decides when to kill, from its persisted deadlines; a
//! caller that is cancelled or crashes never turns into an early SIGKILL
//! (containerd cri#1098).

// What the actuator is made of: private to it. Its public surface is
// `ProcessActuator`, what it reports and is configured with, the logs
// (`logs`), and the few process-wide calls below.
mod cgroup;
mod child_exits;
mod file_name;
mod group;
mod identity;
mod launch;
pub mod logs;
mod orphans;
mod output;
mod post_start;
mod reaper;
mod removal;
mod table;

/// What the processes did, for the runtime: the runtime's [`WorldEvent`]
/// (an exit's `code` is `None` for a process adopted after a restart whose
/// waiter left no status: see the module docs).
pub use crate::runtime::WorldEvent;
pub use launch::{DEFAULT_PATH, Environment, LaunchError};
pub use orphans::become_subreaper;
pub use output::Output;

/// The workload table's format, for tests that read and write the table
/// from outside as a later agent would, through the definitions the agent
/// itself uses. Not part of the API: hidden, it changes with the table.
#[doc(hidden)]
pub mod table_format {
    pub use super::identity::{ProcessIdentity, is_zombie};
    pub use super::table::{WorkloadRecord, WorkloadTable};
}

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use grace_core::{Action, Instant};
use rustix::process::Signal;

use crate::runtime::{ActionError, Actuator, OwedKill};
use crate::store::StoredObject;
use cgroup::Cgroups;
use group::Group;
use identity::ProcessIdentity;
use launch::Launch;
use reaper::{Reaper, WatchedProcess};
use table::{WorkloadRecord, WorkloadTable};

/// Waits until every file and directory this process queued for removal
/// in the background is gone (workload records, logs of removed objects,
/// cgroups of exited workloads): for a program about to exit. One that
/// does not wait loses nothing: the next start finds what is left.
pub fn flush_removals() {
    removal::flush();
}

/// The `(object, container, hook)` a workload table file stands for, read
/// from its name alone: what an unreadable record
/// ([`Adoption::unreadable`]) was about.
pub fn workload_of_record(path: &Path) -> Option<(String, usize, bool)> {
    let name = path.file_name()?.to_str()?;
    WorkloadRecord::parse_file_name(name)
}

/// How workloads are contained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Containment {
    /// A process group each (what leaves its group escapes).
    ProcessGroups,
    /// A cgroup v2 each (and a process group, for the stop signal).
    Cgroups,
}

/// What a restart found in the workload table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Adoption {
    /// `(object, container, hook)` of every process still running, now
    /// watched again.
    pub adopted: Vec<(String, usize, bool)>,
    /// `(object, container, hook)` of every process that is gone (exited
    /// while no agent ran, or from another boot): reported as exited.
    pub gone: Vec<(String, usize, bool)>,
    /// Table files that could not be read.
    pub unreadable: Vec<PathBuf>,
    /// `(object, container)` of every workload whose record was written
    /// but whose command never ran (the agent died before it opened the
    /// gate): its record is dropped, nothing is reported, and the
    /// container may be started.
    pub never_ran: Vec<(String, usize)>,
}

/// What [`ProcessActuator::stop_orphans`] does with an adopted workload
/// whose object is gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OrphanStop {
    /// A pre-stop hook: cut off (SIGKILL) at once.
    HookCutOff {
        /// The object.
        object: String,
        /// The container.
        container: usize,
    },
    /// A container: its stop signal went out (now, or before), SIGKILL
    /// follows at `sigkill_at` (the runtime clock's instant) unless it
    /// exits first.
    Stopping {
        /// The object.
        object: String,
        /// The container.
        container: usize,
        /// Whether the stop signal went out now (it had not before).
        signalled_now: bool,
        /// When SIGKILL is due.
        sigkill_at: Instant,
    },
}

/// The command that runs a workload behind the gate: `sh` reads one line
/// from its stdin (the agent sends it once the workload's record is
/// durable), then runs the command with stdin from `/dev/null`. On end
/// of file (the agent died first) it exits 125 and runs nothing.
/// Once opened it creates its start marker (its `$0`, see
/// [`WorkloadTable::marker`]) before the command runs, so that a later
/// agent can tell a command that never ran from one that ended; it exits
/// 125 without running anything if it cannot.
///
/// The `sh` stays as the command's waiter (its parent, the leader of its
/// group, the recorded process): when the command ends it writes the
/// status (`$?`: the exit code, or 128 + the signal) into the marker and
/// exits with it. A workload that ends while no agent runs is reaped by
/// whoever inherited the `sh`, not by the agent; the marker keeps its
/// status for the next agent ([`table::exit_status`]). The waiter sits out every
/// signal that would end it ([`TRAPS`]: its group gets the stop signal
/// with the command), with a handler that does nothing, which the command
/// does not inherit (an `exec` resets handlers, not ignored signals). The
/// handlers are set first, so that a stop signal that comes as soon as
/// the gate opens (a failing post-start hook) finds them.
///
/// The marker is made private (`umask 077`, as every file of the table);
/// the command runs with the agent's own umask ([`gate`]).
///
/// The waiter's own standard error goes to `/dev/null` before the
/// command starts, in a subshell that takes the real one back and `exec`s
/// the command (no extra process): a shell reports a command ended by a
/// signal ("Terminated") while it waits, and that line is not the
/// container's output.
const GATE: &str = "TRAPS read -r _ || exit 125; umask 077; : >\"$0\" || exit 125; umask UMASK; exec 3>&2 2>/dev/null; (exec </dev/null 2>&3 3>&-; exec \"$@\"); c=$?; echo $c >\"$0\"; exit $c";

/// The signals the waiter (see [`GATE`]) catches and ignores: every one
/// whose default action ends a process, but SIGKILL, which nothing
/// catches. The real-time ones by number (`sh` has no names for them; a
/// shell that refuses them leaves them untrapped: only a stop signal
/// among them would end the waiter, and SIGKILL then the rest).
const TRAPS: &str = "trap : HUP INT QUIT ILL TRAP ABRT BUS FPE USR1 SEGV USR2 PIPE ALRM TERM XCPU XFSZ VTALRM PROF IO PWR SYS; \
     trap : 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 2>/dev/null;";

/// [`GATE`] with this process's umask (from `/proc/self/status`, read
/// once) for the command; without one, the umask is left as it is
/// throughout.
fn gate() -> &'static str {
    static GATE_WITH_UMASK: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    GATE_WITH_UMASK.get_or_init(gate_with_umask)
}

/// [`gate`], built once.
fn gate_with_umask() -> String {
    let umask = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("Umask:"))?;
            let value = line.trim_start_matches("Umask:").trim();
            value
                .bytes()
                .all(|b| (b'0'..=b'7').contains(&b))
                .then(|| value.to_owned())
        });
    let gate = GATE.replace("TRAPS", TRAPS);
    match umask {
        Some(umask) => gate.replace("UMASK", &umask),
        None => gate.replace("umask 077; ", "").replace("umask UMASK; ", ""),
    }
}

/// Runs containers as process groups and carries out the runtime's actions
/// on them.
#[derive(Debug)]
pub struct ProcessActuator {
    /// Each running container's workload.
    workloads: HashMap<(String, usize), Group>,
    /// Each running pre-stop hook.
    hooks: HashMap<(String, usize), Group>,
    /// Containers whose processes are all gone while their pre-stop hook
    /// still ran (cut off now), with their exit (its status and time):
    /// they count as stopped once the hook is gone too.
    held_exits: HashMap<(String, usize), WorldEvent>,
    stop_signal: Signal,
    reaper: Reaper,
    /// The workload table, with a state directory.
    table: Option<WorkloadTable>,
    /// The cgroups, where contained in cgroups.
    cgroups: Option<Cgroups>,
    output: Output,
    /// A command prefix every process is started through
    /// ([`with_launcher`](Self::with_launcher)); empty: none.
    launcher: Vec<String>,
    /// The records of the workloads adopted at the start (not hooks), for
    /// what an earlier agent owed them.
    adopted: HashMap<(String, usize), WorkloadRecord>,
    /// Which environment processes get.
    environment: Environment,
}

impl ProcessActuator {
    /// An actuator whose processes report to the returned receiver, with no
    /// state directory: its workloads are not adopted by a later process.
    /// The stop signal is SIGTERM unless set with [`with_stop_signal`].
    ///
    /// [`with_stop_signal`]: ProcessActuator::with_stop_signal
    ///
    /// # Panics
    ///
    /// If the thread that reaps its processes cannot be started (the
    /// machine is out of processes or threads); [`try_new`] says so
    /// instead.
    ///
    /// [`try_new`]: ProcessActuator::try_new
    pub fn new() -> (Self, mpsc::Receiver<WorldEvent>) {
        #[allow(clippy::expect_used)] // documented: `try_new` does not panic
        Self::try_new().expect("the reaper's thread starts")
    }

    /// [`new`](ProcessActuator::new), failing when the thread that reaps
    /// its processes cannot be started.
    pub fn try_new() -> std::io::Result<(Self, mpsc::Receiver<WorldEvent>)> {
        let (events, rx) = mpsc::channel();
        let actuator = ProcessActuator {
            workloads: HashMap::new(),
            hooks: HashMap::new(),
            held_exits: HashMap::new(),
            stop_signal: Signal::TERM,
            reaper: Reaper::spawn(events)?,
            table: None,
            cgroups: None,
            output: Output::Discard,
            launcher: Vec::new(),
            adopted: HashMap::new(),
            environment: Environment::Inherit,
        };
        Ok((actuator, rx))
    }

    /// An actuator that keeps its workload table in `dir` and adopts every
    /// workload and hook of an earlier process found there still running
    /// (see the module docs). Workloads are contained in cgroups where a
    /// writable cgroup v2 hierarchy exists ([`Containment`]). Those
    /// found gone are reported on the receiver as exited, after every
    /// adoption.
    pub fn with_state_dir(
        dir: &Path,
    ) -> std::io::Result<(Self, mpsc::Receiver<WorldEvent>, Adoption)> {
        let (mut actuator, rx) = Self::try_new()?;
        let table = WorkloadTable::open(dir)?;
        actuator.cgroups = Cgroups::detect(dir)?;
        let (records, unreadable) = table.load()?;
        let mut adoption = Adoption {
            unreadable,
            ..Adoption::default()
        };
        let mut owned = Vec::new();
        for record in records {
            let key = (record.object.clone(), record.container);
            let group = Group {
                pgid: record.process.pid,
                cgroup: record.cgroup.clone(),
            };
            owned.extend(record.cgroup.clone());
            let mut alive = record.process.is_alive();
            let never_ran = |record: &WorkloadRecord| {
                record.marks_start
                    && !record.hook
                    && !table.ran(&record.object, record.container, false)
            };
            if alive && never_ran(&record) {
                // A gate that never opened (it reads end of file now that
                // its agent is gone, or is already a zombie), or one that
                // got its line and has not yet left its marker: either way
                // its command has not run. It is ended, and counts as
                // never run unless its marker appeared meanwhile.
                group.kill();
                let pid = record.process.pid;
                let ended = || !record.process.is_alive() || identity::is_zombie(pid);
                let since = std::time::Instant::now();
                while !ended() && since.elapsed() < std::time::Duration::from_secs(2) {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                alive = !ended();
            }
            let map = if record.hook {
                &mut actuator.hooks
            } else {
                &mut actuator.workloads
            };
            let who = (record.object.clone(), record.container, record.hook);
            // The reaper checks the start time again once the pidfd is
            // open; a process gone by then is reported like the others.
            if !alive && never_ran(&record) {
                // Its gate never opened: nothing ran. The record goes and
                // the container may be started.
                if let Some(cgroup) = &record.cgroup {
                    let _ = cgroup::kill(cgroup);
                    cgroup::remove(cgroup);
                }
                let _ = table.remove(&record.object, record.container, false);
                adoption.never_ran.push(key);
                continue;
            }
            if alive {
                map.insert(key.clone(), group.clone());
                adoption.adopted.push(who);
                if !record.hook {
                    actuator.adopted.insert(key, record.clone());
                }
            } else {
                if record.hook {
                    // What is left in its cgroup is being killed: until it
                    // is gone, the hook counts as running (its container
                    // is not stopped before it), signalled through its
                    // cgroup only (its process group may be another's).
                    map.insert(
                        key,
                        Group {
                            pgid: 0,
                            ..group.clone()
                        },
                    );
                }
                adoption.gone.push(who);
            }
            let exit_file = record
                .marks_start
                .then(|| table.marker(&record.object, record.container, record.hook));
            actuator.reaper.watch(WatchedProcess {
                object: record.object,
                container: record.container,
                hook: record.hook,
                pid: record.process.pid,
                child: false,
                start_time: Some(record.process.start_time),
                group,
                exit_file,
            });
        }
        // A cgroup no record owns is a spawn cut short before its record
        // was written: its gate exits on its own; nothing there ran. (One
        // whose record cannot be read is left alone: it may run.)
        owned.extend(
            adoption
                .unreadable
                .iter()
                .filter_map(|p| Some(actuator.cgroups.as_ref()?.root().join(p.file_name()?))),
        );
        if let Some(cgroups) = &actuator.cgroups {
            for orphan in cgroups.children() {
                if !owned.contains(&orphan) {
                    let _ = cgroup::kill(&orphan);
                    cgroup::remove(&orphan);
                }
            }
        }
        actuator.table = Some(table);
        Ok((actuator, rx, adoption))
    }

    /// Uses `signal` instead of SIGTERM as the stop signal of containers
    /// that do not name their own ([`StoredContainer::stop_signal`]).
    ///
    /// [`StoredContainer::stop_signal`]: crate::store::StoredContainer::stop_signal
    pub fn with_stop_signal(mut self, signal: Signal) -> Self {
        self.stop_signal = signal;
        self
    }

    /// Sends the standard streams of the processes started from now on to
    /// `output` (they are discarded unless set).
    pub fn with_output(mut self, output: Output) -> Self {
        self.output = output;
        self
    }

    /// Starts every process (workload or hook) through `launcher`: as
    /// `launcher... command...`, the launcher `exec`ing the command in the
    /// same process. `grace run` starts its command through itself so that
    /// the command dies with it (a parent-death signal, set by the launcher
    /// before its `exec`). The command is checked ([`start`](Self::start))
    /// before the launcher runs.
    pub fn with_launcher(mut self, launcher: Vec<String>) -> Self {
        self.launcher = launcher;
        self
    }

    /// Gives the processes started from now on `environment`: the
    /// actuator's own with the containers' entries added (the default), or
    /// the containers' only (the [module docs](self) say what they get).
    pub fn with_environment(mut self, environment: Environment) -> Self {
        self.environment = environment;
        self
    }

    /// Sends `signal` to the process group of container `container`'s
    /// workload; false if no workload of it runs.
    pub fn signal(&self, object: &str, container: usize, signal: Signal) -> bool {
        match self.workloads.get(&(object.to_owned(), container)) {
            Some(group) => {
                group.signal(signal);
                true
            }
            None => false,
        }
    }

    /// How workloads are contained.
    pub fn containment(&self) -> Containment {
        if self.cgroups.is_some() {
            Containment::Cgroups
        } else {
            Containment::ProcessGroups
        }
    }

    /// The cgroup directory of this actuator's workloads, if contained in
    /// cgroups.
    pub fn cgroup_root(&self) -> Option<&Path> {
        self.cgroups.as_ref().map(Cgroups::root)
    }

    /// Starts every container of `object` (`command`, run directly, in a
    /// new process group each); the first that cannot start is an error
    /// (the others start all the same).
    pub fn start(&mut self, object: &str, stored: &StoredObject) -> std::io::Result<()> {
        match self.start_each(object, stored).into_iter().next() {
            Some((_, error)) => Err(std::io::Error::other(error)),
            None => Ok(()),
        }
    }

    /// Starts every container of `object` that is not running yet
    /// (`command`, run directly, in a new process group each). A container
    /// that cannot be started is skipped: it is returned with the reason
    /// (as the kubelet or a container runtime gives it); the others start.
    /// Each runs in the environment, directory and user its container
    /// says ([`with_environment`](Self::with_environment)).
    pub fn start_each(&mut self, object: &str, stored: &StoredObject) -> Vec<(usize, LaunchError)> {
        let mut failed = Vec::new();
        for i in 0..stored.containers.len() {
            if self.is_running(object, i) {
                continue;
            }
            if let Err(e) = self.start_container(object, stored, i) {
                failed.push((i, e));
            }
        }
        failed
    }

    /// Starts container `i` of `object` as [`start_each`](Self::start_each)
    /// does, unless it runs already or has no command: an agent starts a
    /// container again this way after it exited (R92, R93), with the same
    /// spec (environment, user, directory, post-start hook).
    pub fn start_container(
        &mut self,
        object: &str,
        stored: &StoredObject,
        i: usize,
    ) -> Result<(), LaunchError> {
        let Some(container) = stored.containers.get(i) else {
            return Ok(());
        };
        if self.is_running(object, i) || container.command.is_empty() {
            return Ok(());
        }
        let launch = launch::container(object, stored, i, None, self.environment)?;
        // A relative path with a `/` is the working directory's.
        let program = match &launch.cwd {
            Some(dir) if launch.program.contains('/') && !launch.program.starts_with('/') => {
                dir.join(&launch.program).display().to_string()
            }
            _ => launch.program.clone(),
        };
        runnable(&program, launch.path()).map_err(LaunchError::CannotRun)?;
        let group = self
            .spawn(object, i, Some(stored), &launch)
            .map_err(|e| LaunchError::CannotRun(e.to_string()))?;
        if let Some(hook) = &container.post_start {
            self.post_start(object, stored, i, hook, &group);
        }
        self.workloads.insert((object.to_owned(), i), group);
        Ok(())
    }

    /// Runs container `i`'s post-start hook beside its process `group`
    /// ([`post_start`]): in the container's environment, directory and
    /// user; a failure kills the container with the pod's grace.
    fn post_start(&self, object: &str, stored: &StoredObject, i: usize, hook: &str, group: &Group) {
        let signal = stored
            .containers
            .get(i)
            .and_then(|c| c.stop_signal)
            .and_then(Signal::from_named_raw)
            .unwrap_or(self.stop_signal);
        let seconds = stored.record.termination_grace_period_seconds.unwrap_or(30);
        let on_failure = post_start::OnFailure {
            group: group.clone(),
            signal,
            grace: std::time::Duration::from_secs(seconds.max(0).unsigned_abs()),
        };
        let launch = launch::container(object, stored, i, Some(hook), self.environment)
            // Its container's launch was worked out a moment ago: this one
            // differs only by its command, so it fails only as a hook that
            // cannot start, which kills the container all the same.
            .unwrap_or_default();
        post_start::run(&launch, on_failure);
    }

    /// Whether a container's workload is still running (not yet reported
    /// stopped).
    pub fn is_running(&self, object: &str, container: usize) -> bool {
        self.workloads.contains_key(&(object.to_owned(), container))
    }

    /// Whether a container's pre-stop hook is running.
    pub fn hook_running(&self, object: &str, container: usize) -> bool {
        self.hooks.contains_key(&(object.to_owned(), container))
    }

    /// Whether any process of `object` (a container's or a hook's) is
    /// still running, as far as the actuator knows.
    pub fn holds(&self, object: &str) -> bool {
        self.workloads
            .keys()
            .chain(self.hooks.keys())
            .any(|(o, _)| o == object)
    }

    /// Forgets a workload whose processes are all gone (its record with
    /// it).
    pub fn reaped(&mut self, object: &str, container: usize) {
        if let Some(group) = self.workloads.remove(&(object.to_owned(), container))
            && !group.is_empty()
        {
            // Told to forget a workload that still runs (the reaper reports
            // an exit only once its group is empty): it is killed, and its
            // record stays until the reaper has seen it gone.
            group.kill();
            return;
        }
        self.forget(object, container, false);
    }

    /// Forgets a hook that returned (its record with it).
    pub fn hook_returned(&mut self, object: &str, container: usize) {
        self.hooks.remove(&(object.to_owned(), container));
        self.forget(object, container, true);
    }

    /// SIGKILLs every workload and hook still running, with no stop signal
    /// first: only for processes no deletion will ever handle (a fenced
    /// node's orphans, `grace run`'s own command when it must go at once).
    pub fn kill_all(&mut self) {
        for group in self.hooks.values().chain(self.workloads.values()) {
            group.kill();
        }
    }

    /// The workloads (object, container) running now.
    pub fn running(&self) -> impl Iterator<Item = (&str, usize)> {
        self.workloads.keys().map(|(o, c)| (o.as_str(), *c))
    }

    /// Stops every adopted workload and hook whose object is gone
    /// (`tracked` says which objects are not), the way a force delete
    /// does (D4): a hook is cut off at once; a container whose stop
    /// signal went out before keeps the SIGKILL deadline it was given (no
    /// sooner than 2 s after that signal); one whose stop signal never
    /// went out gets it now and SIGKILL 2 s later. `now` is the runtime
    /// clock's instant; the SIGKILLs are sent when due by a thread of
    /// their own, which ends once they are all sent. Returns what was
    /// done, in the table's order; fails, having signalled nothing, when
    /// that thread cannot be started (the machine is out of processes or
    /// threads: a stop signal without its SIGKILL would break the grace's
    /// promise).
    pub fn stop_orphans(
        &mut self,
        tracked: impl Fn(&str) -> bool,
        now: Instant,
    ) -> std::io::Result<Vec<OrphanStop>> {
        // The thread that sends the SIGKILLs first, before any signal.
        let killer = if self.adopted.keys().any(|(o, _)| !tracked(o)) {
            let (tx, rx) = mpsc::channel::<Vec<(std::time::Instant, Group, ProcessIdentity)>>();
            std::thread::Builder::new()
                .name("grace-orphan-kills".into())
                .spawn(move || {
                    for (due, group, process) in rx.into_iter().flatten() {
                        let wait = due.saturating_duration_since(std::time::Instant::now());
                        std::thread::sleep(wait);
                        // Never a pid reused by another process; a cgroup
                        // is this workload's whatever its leader became.
                        if process.is_alive() {
                            group.kill();
                        } else if group.cgroup.is_some() {
                            Group { pgid: 0, ..group }.kill();
                        }
                    }
                })?;
            Some(tx)
        } else {
            None
        };
        let mut done = Vec::new();
        for ((object, container), hook) in &self.hooks {
            if !tracked(object) {
                hook.kill();
                done.push(OrphanStop::HookCutOff {
                    object: object.clone(),
                    container: *container,
                });
            }
        }
        let floor = grace_core::Duration::from_grace_seconds(2);
        let mut kills = Vec::new();
        let mut orphans: Vec<(String, usize)> = self
            .adopted
            .keys()
            .filter(|(o, _)| !tracked(o))
            .cloned()
            .collect();
        orphans.sort();
        for key in orphans {
            let (Some(record), Some(group)) = (
                self.adopted.get(&key).cloned(),
                self.workloads.get(&key).cloned(),
            ) else {
                continue;
            };
            let (object, container) = key.clone();
            let (sent, signalled_now) = match record.stop_signal_sent {
                Some(ms) => (Instant::from_millis(ms), false),
                None => {
                    group.signal(self.stop_signal);
                    group.signal(Signal::CONT);
                    // Rounded up, as the runtime does (R62 counts from
                    // after the signal).
                    (
                        now.saturating_add(grace_core::Duration::from_millis(1)),
                        true,
                    )
                }
            };
            let floored = sent.saturating_add(floor);
            let sigkill_at = record
                .sigkill_at
                .map_or(floored, |ms| Instant::from_millis(ms).max(floored));
            if signalled_now {
                self.kill_owed(
                    &object,
                    container,
                    OwedKill {
                        stop_signal_sent: Some(sent),
                        sigkill_at: Some(sigkill_at),
                    },
                );
            }
            // A deadline beyond what the clock can hold never comes (D2):
            // no SIGKILL is scheduled for it.
            let wait = sigkill_at.saturating_duration_since(now).as_millis();
            let due = std::time::Instant::now().checked_add(std::time::Duration::from_millis(wait));
            if let Some(due) = due {
                kills.push((due, group.clone(), record.process.clone()));
            }
            done.push(OrphanStop::Stopping {
                object,
                container,
                signalled_now,
                sigkill_at,
            });
        }
        kills.sort_by_key(|(due, _, _)| *due);
        if let Some(killer) = killer {
            // Dropped unsent (no kill owed), the thread ends at once.
            let _ = killer.send(kills);
        }
        Ok(done)
    }

    fn forget(&mut self, object: &str, container: usize, hook: bool) {
        if let Some(table) = &self.table {
            table.remove_soon(object, container, hook);
        }
    }

    /// Starts `command` (program and arguments) as the leader of a new
    /// process group (and cgroup), recorded in the table before it may run,
    /// and watched by the reaper: container `container`'s workload of
    /// `stored`, or (`None`) its pre-stop hook. Its streams are set by
    /// [`Output`].
    fn spawn(
        &mut self,
        object: &str,
        container: usize,
        workload_of: Option<&StoredObject>,
        launch: &Launch,
    ) -> std::io::Result<Group> {
        let command = &launch.argv;
        let hook = workload_of.is_none();
        // A workload's log pipe comes with a keeper, which the workload
        // inherits: held until it is started.
        let streams = |cmd: &mut Command, output: &Output| match workload_of {
            Some(stored) => output.workload(cmd, object, stored, container),
            None => {
                output.hook(cmd);
                Ok(None)
            }
        };
        let Some(table) = &self.table else {
            let Some((program, args)) = command.split_first() else {
                return Err(std::io::Error::other("no command"));
            };
            let mut cmd = match self.launcher.split_first() {
                Some((launcher, launcher_args)) => {
                    let mut cmd = Command::new(launcher);
                    cmd.args(launcher_args).arg(program);
                    cmd
                }
                None => Command::new(program),
            };
            cmd.args(args);
            launch.apply(&mut cmd);
            let keeper = streams(&mut cmd, &self.output)?;
            let child = spawn_group(cmd)?;
            drop(keeper);
            let group = Group {
                pgid: child.id(),
                cgroup: None,
            };
            self.watch(object, container, hook, &child, &group, None);
            return Ok(group);
        };
        let name = WorkloadRecord::file_name(object, container, hook);
        let cgroup = match &self.cgroups {
            Some(cgroups) => Some(cgroups.create(&name)?),
            None => None,
        };
        let mut cmd = Command::new(launch::shell());
        cmd.arg("-c")
            .arg(gate())
            .arg(table.marker(object, container, hook))
            .args(&self.launcher)
            .args(command);
        launch.apply(&mut cmd);
        let keeper = streams(&mut cmd, &self.output)?;
        // The gate's stdin (the command's is `/dev/null`).
        cmd.stdin(Stdio::piped());
        let mut child = spawn_group(cmd)?;
        drop(keeper);
        let group = Group {
            pgid: child.id(),
            cgroup: cgroup.clone(),
        };
        let recorded = (|| {
            if let Some(cgroup) = &cgroup {
                cgroup::add(cgroup, child.id())?;
            }
            let process = ProcessIdentity::of(child.id())
                .ok_or_else(|| std::io::Error::other("the process vanished at its start"))?;
            table.write_new(&WorkloadRecord {
                object: object.to_owned(),
                container,
                hook,
                process,
                cgroup: cgroup.clone(),
                stop_signal_sent: None,
                sigkill_at: None,
                marks_start: true,
            })
        })();
        if let Err(e) = recorded {
            // Nothing ran: the gate is still closed. Closing its stdin ends it.
            drop(child.stdin.take());
            let _ = child.wait();
            if let Some(cgroup) = &cgroup {
                cgroup::remove(cgroup);
            }
            return Err(e);
        }
        self.watch(object, container, hook, &child, &group, None);
        // Open the gate.
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(b"go\n");
        }
        Ok(group)
    }

    fn watch(
        &mut self,
        object: &str,
        container: usize,
        hook: bool,
        child: &Child,
        group: &Group,
        start_time: Option<u64>,
    ) {
        self.reaper.watch(WatchedProcess {
            object: object.to_owned(),
            container,
            hook,
            pid: child.id(),
            child: true,
            start_time,
            group: group.clone(),
            // Our child: its status is read when it is reaped.
            exit_file: None,
        });
    }
}

impl Drop for ProcessActuator {
    /// Removes the agent's cgroup directory if no workload is left in it
    /// (one with workloads stays for the next agent), after the workload
    /// records still queued for removal ([`flush_removals`]).
    fn drop(&mut self) {
        if self.table.is_some() || self.cgroups.is_some() {
            removal::flush();
        }
        if let Some(cgroups) = &self.cgroups {
            cgroup::remove(cgroups.root());
        }
    }
}

impl Actuator for ProcessActuator {
    fn perform(
        &mut self,
        object: &str,
        stored: &StoredObject,
        action: &Action,
    ) -> Result<(), ActionError> {
        let key = |c: usize| (object.to_owned(), c);
        match *action {
            // No load balancer here: leaving endpoints is the record's
            // deletion timestamp itself (R85).
            Action::RemoveEndpoints | Action::Remove { .. } => Ok(()),
            Action::RunPreStop { container, .. } => {
                let container = usize::from(container);
                if self.hooks.contains_key(&key(container)) {
                    return Ok(()); // already running: idempotent
                }
                let Some(hook) = stored
                    .containers
                    .get(container)
                    .and_then(|c| c.pre_stop.clone())
                else {
                    return Ok(());
                };
                // In the container's environment, directory and user, as
                // the kubelet runs a hook inside the container.
                let launch =
                    launch::container(object, stored, container, Some(&hook), self.environment)
                        .map_err(|e| ActionError::new(action, std::io::Error::other(e)))?;
                let group = self
                    .spawn(object, container, None, &launch)
                    .map_err(|e| ActionError::new(action, e))?;
                self.hooks.insert(key(container), group);
                Ok(())
            }
            Action::SendStopSignal { container } => {
                let container = usize::from(container);
                // The hook's budget is spent (or it returned): cut it off.
                // Its record goes once the reaper saw it gone.
                if let Some(group) = self.hooks.get(&key(container)) {
                    group.kill();
                }
                // The container's own stop signal (lifecycle.stopSignal),
                // else the actuator's.
                let signal = stored
                    .containers
                    .get(container)
                    .and_then(|c| c.stop_signal)
                    .and_then(Signal::from_named_raw)
                    .unwrap_or(self.stop_signal);
                if let Some(group) = self.workloads.get(&key(container)) {
                    group.signal(signal);
                    group.signal(Signal::CONT);
                }
                Ok(())
            }
            Action::SendKill { container } => {
                let container = usize::from(container);
                if let Some(group) = self.workloads.get(&key(container)) {
                    group.kill();
                }
                Ok(())
            }
            Action::ContainerStopped { container } => {
                let container = usize::from(container);
                if let Some(group) = self.hooks.get(&key(container)) {
                    group.kill();
                }
                self.reaped(object, container);
                Ok(())
            }
            // An action added to the core later: nothing a process needs.
            _ => Ok(()),
        }
    }

    /// Kept in the workload's record (rewritten at once, not synced: it
    /// only means something on this boot), so that a later agent neither
    /// sends the stop signal again nor leaves the workload running once
    /// its object is gone ([`ProcessActuator::stop_orphans`]).
    fn kill_owed(&mut self, object: &str, container: usize, owed: OwedKill) {
        let Some(table) = &self.table else {
            return;
        };
        if !self.workloads.contains_key(&(object.to_owned(), container)) {
            return;
        }
        let Some(mut record) = table.read(object, container, false) else {
            return;
        };
        if let Some(sent) = owed.stop_signal_sent {
            record.stop_signal_sent.get_or_insert(sent.as_millis());
        }
        if let Some(at) = owed.sigkill_at {
            record.sigkill_at = Some(at.as_millis());
        }
        // Not written: a later agent counts from its own stop signal, as
        // before (a failure here loses no deletion).
        let _ = table.write(&record);
    }

    /// What the adopted workload's record says, once: its stop signal
    /// went out before this agent started.
    fn stop_signal_sent_before(&mut self, object: &str, container: usize) -> Option<Instant> {
        let record = self.adopted.get_mut(&(object.to_owned(), container))?;
        record.stop_signal_sent.take().map(Instant::from_millis)
    }

    /// A returned hook is forgotten before the runtime takes the event
    /// (the stop signal it then owes must not cut off a group that is
    /// gone), and a container exit held back while the hook ran goes with
    /// it. A container whose processes are all gone while its pre-stop
    /// hook still runs does not count as stopped yet — stopping it may end
    /// the object's deletion, which must never happen while any of its
    /// processes runs: the hook is cut off and the exit is held until the
    /// hook is gone too.
    fn world_event(&mut self, event: WorldEvent) -> Vec<WorldEvent> {
        match event.input {
            grace_core::Input::PreStopFinished(container) => {
                let (object, container) = (event.object.clone(), container.get());
                self.hook_returned(&object, container);
                let held = self.held_exits.remove(&(object, container));
                let mut take = vec![event];
                take.extend(held);
                take
            }
            grace_core::Input::ContainerExited(container) => {
                let key = (event.object.clone(), container.get());
                if let Some(hook) = self.hooks.get(&key) {
                    hook.kill();
                    // Its leader is reaped: its pid, and so its process
                    // group id, may be another's by now.
                    if let Some(group) = self.workloads.get_mut(&key) {
                        group.pgid = 0;
                    }
                    self.held_exits.insert(key, event);
                    return Vec::new();
                }
                vec![event]
            }
            // The world's other inputs are taken as they come.
            _ => vec![event],
        }
    }

    /// An exit, once durable: the workload's record in the workload table
    /// goes (after the runtime's input, so a crash in between leaves the
    /// record for the next agent to find gone and report).
    fn world_event_taken(&mut self, event: &WorldEvent) {
        if let Some((container, _)) = event.exit() {
            self.reaped(&event.object, container);
        }
    }
}

/// The hard limit of open files [`raise_open_files_limit`] asks for where
/// it may raise it (as root): an agent holds a descriptor per running
/// workload (its output pipe) and, for a workload it adopted rather than
/// started, a pidfd too, so the usual hard limits of 4 096 to 20 000 end
/// at a few thousand workloads.
pub const WANTED_OPEN_FILES: u64 = 65_536;

/// Raises this process's limit of open files (`RLIMIT_NOFILE`): the hard
/// limit to [`WANTED_OPEN_FILES`] where it is lower and this process may
/// raise it (root; refused otherwise, and then left as it is), and the
/// soft limit to the hard one, as the Go runtime does at start. Returns
/// the limits as they now are (`soft`, `hard`; `None`: unlimited). The
/// reaper holds one pidfd per watched process and the log pump one pipe
/// per container, so an agent with thousands of workloads needs more
/// than the usual soft limit of 1 024; processes started afterwards
/// inherit the raised limit.
pub fn raise_open_files_limit() -> std::io::Result<(Option<u64>, Option<u64>)> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.maximum.is_some_and(|hard| hard < WANTED_OPEN_FILES) {
        let wanted = Rlimit {
            current: Some(WANTED_OPEN_FILES),
            maximum: Some(WANTED_OPEN_FILES),
        };
        // Refused without the privilege: the soft limit is raised below.
        let _ = setrlimit(Resource::Nofile, wanted);
    }
    let limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        let raised = Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        setrlimit(Resource::Nofile, raised)?;
    }
    let now = getrlimit(Resource::Nofile);
    Ok((now.current, now.maximum))
}

/// Starts `command` (its streams set by [`Output`]) as the leader of a
/// new process group.
fn spawn_group(mut command: Command) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    command.process_group(0).spawn()
}

/// Why `program` cannot be run, if it cannot: as the container runtime
/// says it when it cannot start a container.
fn runnable(program: &str, path: Option<std::ffi::OsString>) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let found = if program.contains('/') {
        executable(Path::new(program))
    } else {
        path.is_some_and(|path| {
            std::env::split_paths(&path).any(|dir| executable(&dir.join(program)))
        })
    };
    if found {
        Ok(())
    } else if program.contains('/') && Path::new(program).exists() {
        Err(format!("exec: \"{program}\": permission denied"))
    } else if program.contains('/') {
        Err(format!("exec: \"{program}\": no such file or directory"))
    } else {
        Err(format!(
            "exec: \"{program}\": executable file not found in $PATH"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `command` behind the gate, opened, leading a group of its own; and
    /// its start marker.
    fn gated(dir: &Path, command: &[&str]) -> (Child, PathBuf) {
        let marker = dir.join("w.ran");
        let mut cmd = Command::new(launch::shell());
        cmd.arg("-c").arg(gate()).arg(&marker).args(command);
        cmd.stdin(Stdio::piped());
        let mut child = spawn_group(cmd).expect("spawned");
        let mut stdin = child.stdin.take().expect("its stdin");
        stdin.write_all(b"go\n").expect("the gate opens");
        (child, marker)
    }

    /// Waits until `file` exists (the command's readiness signal).
    fn ready(file: &Path) {
        let since = std::time::Instant::now();
        while !file.exists() {
            assert!(
                since.elapsed().as_secs() < 10,
                "{} within 10 s",
                file.display()
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// The waiter (issue 29 item 6) exits with its command's status and
    /// keeps it in the start marker; a stop signal to the whole group
    /// (SIGTERM, SIGUSR1) ends the command, not the waiter, which reports
    /// it as a shell does (128 + the signal).
    #[test]
    fn the_waiter_keeps_the_commands_status_and_outlives_a_stop_signal_to_the_group() {
        let dir = tempfile::tempdir().expect("tmp");
        let (mut child, marker) = gated(dir.path(), &["sh", "-c", "exit 3"]);
        assert_eq!(child.wait().expect("waited").code(), Some(3));
        assert_eq!(table::exit_status(&marker).map(|(c, _)| c), Some(3));

        for (signal, code) in [(Signal::TERM, 143), (Signal::USR1, 138)] {
            let up = dir.path().join(format!("up{code}"));
            let script = format!(": > {}; while :; do sleep 0.02; done", up.display());
            let (mut child, marker) = gated(dir.path(), &["sh", "-c", &script]);
            ready(&up);
            let group = Group {
                pgid: child.id(),
                cgroup: None,
            };
            group.signal(signal);
            assert_eq!(
                child.wait().expect("waited").code(),
                Some(code),
                "{signal:?}"
            );
            assert_eq!(table::exit_status(&marker).map(|(c, _)| c), Some(code));
            // What is left of the group (the loop's last `sleep`) goes.
            group.kill();
        }
    }

    /// What the command writes to its standard error is the container's;
    /// the waiter's own report of a command ended by a signal
    /// ("Terminated") is not.
    #[test]
    fn the_waiter_adds_nothing_to_the_commands_output() {
        use std::io::Read;
        let dir = tempfile::tempdir().expect("tmp");
        let up = dir.path().join("up");
        let script = format!(
            "echo out; echo err >&2; : > {}; while :; do sleep 0.02; done",
            up.display()
        );
        let marker = dir.path().join("w.ran");
        let mut cmd = Command::new(launch::shell());
        cmd.arg("-c")
            .arg(gate())
            .arg(&marker)
            .args(["sh", "-c", &script]);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = spawn_group(cmd).expect("spawned");
        let mut stdin = child.stdin.take().expect("its stdin");
        stdin.write_all(b"go\n").expect("the gate opens");
        ready(&up);
        let group = Group {
            pgid: child.id(),
            cgroup: None,
        };
        group.signal(Signal::TERM);
        assert_eq!(child.wait().expect("waited").code(), Some(143));
        group.kill();
        let (mut out, mut err) = (String::new(), String::new());
        child
            .stdout
            .take()
            .expect("out")
            .read_to_string(&mut out)
            .expect("read");
        child
            .stderr
            .take()
            .expect("err")
            .read_to_string(&mut err)
            .expect("read");
        assert_eq!(out, "out\n");
        assert_eq!(err, "err\n", "only the command's own error output");
    }
}
