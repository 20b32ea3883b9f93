//! Real process control: the [`Actuator`] that runs workloads as child
//! processes.
//!
//! Each container's command runs in a process group of its own, so that a
//! signal reaches everything it started (grandchildren included). The stop
//! signal goes to the whole group together with SIGCONT (a stopped process
//! could not act on it otherwise); SIGKILL goes to the whole group. A
//! pre-stop hook runs as `sh -c CMD` in a group of its own and is killed
//! when its budget is spent (when the stop signal is due). Exits are
//! reaped by one waiting thread per child and reported as [`WorldEvent`]s,
//! which the caller feeds back to the runtime. When a container has
//! stopped, whatever is left of its group is killed: nothing is orphaned.
//!
//! Where the processes' standard streams go is [`Output`]: discarded,
//! passed through (`grace run`), or kept in per-container log files
//! ([`logs`]).
//!
//! Only the runtime decides when to kill, from its persisted deadlines; a
//! caller that is cancelled or crashes never turns into an early SIGKILL
//! (containerd cri#1098).

pub mod logs;
mod output;

pub use output::Output;

use std::collections::HashMap;
use std::process::{Child, Command};
use std::sync::mpsc;

use grace_core::Action;
use rustix::process::{Pid, Signal, kill_process_group};

use crate::clock::Clock;
use crate::runtime::{Actuator, Runtime, RuntimeError};
use crate::store::{Store, StoredObject};

/// What the processes did, for the runtime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorldEvent {
    /// A pre-stop hook returned (on its own, not cut off).
    PreStopFinished {
        /// The object.
        object: String,
        /// The container's index.
        container: usize,
    },
    /// A container's main process exited.
    Exited {
        /// The object.
        object: String,
        /// The container's index.
        container: usize,
        /// Its status as a shell reports it: the exit code, or 128 + the
        /// signal that ended it; `None` if it could not be read.
        code: Option<i32>,
    },
}

/// Runs containers as process groups and carries out the runtime's actions
/// on them.
#[derive(Debug)]
pub struct ProcessActuator {
    events: mpsc::Sender<WorldEvent>,
    /// Process group of each running container's workload.
    workloads: HashMap<(String, usize), u32>,
    /// Process group of each running pre-stop hook.
    hooks: HashMap<(String, usize), u32>,
    stop_signal: Signal,
    output: Output,
}

impl ProcessActuator {
    /// An actuator whose processes report to the returned receiver. The
    /// stop signal is SIGTERM unless set with [`with_stop_signal`].
    ///
    /// [`with_stop_signal`]: ProcessActuator::with_stop_signal
    pub fn new() -> (Self, mpsc::Receiver<WorldEvent>) {
        let (events, rx) = mpsc::channel();
        let actuator = ProcessActuator {
            events,
            workloads: HashMap::new(),
            hooks: HashMap::new(),
            stop_signal: Signal::TERM,
            output: Output::Discard,
        };
        (actuator, rx)
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

    /// Starts every container of `object` (`command`, run directly, in a
    /// new process group each).
    pub fn start(&mut self, object: &str, stored: &StoredObject) -> std::io::Result<()> {
        for (i, container) in stored.containers.iter().enumerate() {
            let Some((program, args)) = container.command.split_first() else {
                continue;
            };
            let mut command = Command::new(program);
            command.args(args);
            self.output.workload(&mut command, object, stored, i)?;
            let child = spawn_group(command)?;
            self.workloads.insert((object.to_owned(), i), child.id());
            self.reap(child, object, i, true);
        }
        Ok(())
    }

    /// Whether a container's workload is still running (not yet reaped).
    pub fn is_running(&self, object: &str, container: usize) -> bool {
        self.workloads.contains_key(&(object.to_owned(), container))
    }

    /// Forgets a reaped workload and kills what is left of its group (a
    /// grandchild that outlived the main process).
    pub fn reaped(&mut self, object: &str, container: usize) {
        if let Some(group) = self.workloads.remove(&(object.to_owned(), container)) {
            signal_group(group, Signal::KILL);
        }
    }

    /// Forgets a hook that returned.
    pub fn hook_returned(&mut self, object: &str, container: usize) {
        self.hooks.remove(&(object.to_owned(), container));
    }

    /// SIGKILLs every workload and hook still running: what is left when
    /// the supervisor itself goes away, so that nothing outlives it.
    pub fn kill_all(&mut self) {
        for (_, group) in self.hooks.drain().chain(self.workloads.drain()) {
            signal_group(group, Signal::KILL);
        }
    }

    fn reap(&self, mut child: Child, object: &str, container: usize, workload: bool) {
        let events = self.events.clone();
        let object = object.to_owned();
        std::thread::spawn(move || {
            let status = child.wait();
            let event = if workload {
                WorldEvent::Exited {
                    object,
                    container,
                    code: status.ok().and_then(|s| {
                        use std::os::unix::process::ExitStatusExt;
                        s.code().or_else(|| s.signal().map(|n| 128 + n))
                    }),
                }
            } else {
                WorldEvent::PreStopFinished { object, container }
            };
            let _ = events.send(event);
        });
    }
}

impl Actuator for ProcessActuator {
    fn perform(
        &mut self,
        object: &str,
        stored: &StoredObject,
        action: &Action,
    ) -> Result<(), String> {
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
                let mut command = Command::new("sh");
                command.arg("-c").arg(hook);
                self.output.hook(&mut command);
                let child = spawn_group(command).map_err(|e| format!("pre-stop: {e}"))?;
                self.hooks.insert(key(container), child.id());
                self.reap(child, object, container, false);
                Ok(())
            }
            Action::SendStopSignal { container } => {
                let container = usize::from(container);
                // The hook's budget is spent (or it returned): cut it off.
                if let Some(group) = self.hooks.remove(&key(container)) {
                    signal_group(group, Signal::KILL);
                }
                // The container's own stop signal (lifecycle.stopSignal),
                // else the actuator's.
                let signal = stored
                    .containers
                    .get(container)
                    .and_then(|c| c.stop_signal)
                    .and_then(Signal::from_named_raw)
                    .unwrap_or(self.stop_signal);
                if let Some(&group) = self.workloads.get(&key(container)) {
                    signal_group(group, signal);
                    signal_group(group, Signal::CONT);
                }
                Ok(())
            }
            Action::SendKill { container } => {
                let container = usize::from(container);
                if let Some(&group) = self.workloads.get(&key(container)) {
                    signal_group(group, Signal::KILL);
                }
                Ok(())
            }
            Action::ContainerStopped { container } => {
                let container = usize::from(container);
                if let Some(group) = self.hooks.remove(&key(container)) {
                    signal_group(group, Signal::KILL);
                }
                self.reaped(object, container);
                Ok(())
            }
            // An action added to the core later: nothing a process needs.
            _ => Ok(()),
        }
    }
}

impl<S: Store, C: Clock> Runtime<S, C, ProcessActuator> {
    /// Feeds what a process did back to the runtime: a returned hook
    /// becomes [`Runtime::pre_stop_finished`], an exit
    /// [`Runtime::container_exited`] (and the rest of its group is killed).
    pub fn handle_world_event(&mut self, event: WorldEvent) -> Result<(), RuntimeError> {
        match event {
            WorldEvent::PreStopFinished { object, container } => {
                self.actuator().hook_returned(&object, container);
                let _ = self.handle_pre_stop_finished(&object, container)?;
            }
            WorldEvent::Exited {
                object, container, ..
            } => {
                let _ = self.handle_container_exited(&object, container)?;
                self.actuator().reaped(&object, container);
            }
        }
        Ok(())
    }
}

/// Starts `command` (its streams set by [`Output`]) as the leader of a
/// new process group.
fn spawn_group(mut command: Command) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    command.process_group(0).spawn()
}

/// Signals a whole process group; a group that is already gone is fine.
fn signal_group(group: u32, signal: Signal) {
    // Never group 0 or 1: "our own group" and "everyone".
    let Some(pid) = i32::try_from(group)
        .ok()
        .filter(|g| *g > 1)
        .and_then(Pid::from_raw)
    else {
        return;
    };
    let _ = kill_process_group(pid, signal);
}
