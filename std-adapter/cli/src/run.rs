//! `grace run`: supervise one command like a one-container pod. When grace
//! itself gets SIGTERM or SIGINT, the command is stopped the Kubernetes
//! way — pre-stop hook within the grace, stop signal, SIGKILL when the grace
//! is spent (never sooner than 2 s after the stop signal) — and grace exits
//! with the command's status.
//!
//! grace is an entrypoint / `ExecStart` wrapper: the command gets grace's
//! own stdin, stdout and stderr (a pre-stop hook gets its stdout and
//! stderr). The command runs in a process group of its own, so that the
//! stop is grace's to decide: a Ctrl-C at a terminal reaches grace, not
//! the command — and a command that reads from the terminal itself is
//! stopped by it (SIGTTIN), as any background job is; feed it through a
//! pipe or a file instead.
//!
//! Other signals grace gets are forwarded to the command's process group,
//! as tini (`-g`) and dumb-init do: SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2,
//! SIGALRM, SIGWINCH, SIGCONT, SIGURG, SIGVTALRM, SIGPROF, SIGIO, SIGPWR
//! and SIGTSTP (after which grace stops itself too, as a job would; the
//! SIGCONT that resumes it is forwarded). SIGKILL and SIGSTOP cannot be
//! caught: the command is started through grace itself ([`exec_child`]),
//! which sets a parent-death signal (SIGKILL) before it `exec`s the
//! command, so a `grace run` killed outright takes its command with it.
//! A command that cannot be run ends grace with 127 (not found) or 126
//! (found, not executable), as a shell does.

use std::ffi::OsString;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration as StdDuration;

use grace_core::{DeleteOptions, Input, Name, Record};
use rustix::process::Signal;
use signal_hook::consts::{SIGINT, SIGTERM, SIGTSTP};
use signal_hook::iterator::Signals;

use crate::clock::{Clock, SystemClock};
use crate::process::{Output, ProcessActuator};
use crate::runtime::{Recovery, Runtime, RuntimeError};
use crate::store::{MemoryStore, StoredContainer, StoredObject};

/// What to supervise, and how to stop it.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The command and its arguments.
    pub command: Vec<String>,
    /// The grace period in seconds (the pod spec's
    /// `terminationGracePeriodSeconds`).
    pub grace_period_seconds: i64,
    /// The pre-stop hook, run by `sh -c`.
    pub pre_stop: Option<String>,
    /// The stop signal (SIGTERM unless set).
    pub stop_signal: Signal,
}

/// Parses a signal name: `TERM`, `SIGTERM`, `INT`, `QUIT`, `HUP`, `USR1`,
/// `USR2`, `WINCH`, or a number.
pub fn parse_signal(name: &str) -> Result<Signal, String> {
    let bare = name.trim().to_ascii_uppercase();
    let bare = bare.strip_prefix("SIG").unwrap_or(&bare);
    let signal = match bare {
        "TERM" => Signal::TERM,
        "INT" => Signal::INT,
        "QUIT" => Signal::QUIT,
        "HUP" => Signal::HUP,
        "USR1" => Signal::USR1,
        "USR2" => Signal::USR2,
        "WINCH" => Signal::WINCH,
        "KILL" => Signal::KILL,
        other => other
            .parse::<i32>()
            .ok()
            .and_then(Signal::from_named_raw)
            .ok_or_else(|| format!("unknown signal `{name}`"))?,
    };
    Ok(signal)
}

/// The signals `grace run` forwards to its command's process group
/// (SIGTERM and SIGINT start the stop instead).
pub const FORWARDED: [Signal; 13] = [
    Signal::HUP,
    Signal::QUIT,
    Signal::USR1,
    Signal::USR2,
    Signal::ALARM,
    Signal::WINCH,
    Signal::CONT,
    Signal::URG,
    Signal::VTALARM,
    Signal::PROF,
    Signal::IO,
    Signal::POWER,
    Signal::TSTP,
];

/// Why `grace run` failed.
#[derive(Debug)]
pub enum RunError {
    /// The command could not be run; grace exits with `code`: 127 if it
    /// was not found, 126 if it was found but cannot be executed, as a
    /// shell does.
    CannotRun {
        /// What went wrong, as a container runtime says it.
        reason: String,
        /// 127 or 126.
        code: u8,
    },
    /// The supervision failed.
    Runtime(RuntimeError),
    /// An operating-system operation around the command failed
    /// (installing the signal handlers).
    Io {
        /// What was being done.
        context: &'static str,
        /// The error.
        error: std::io::Error,
    },
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::CannotRun { reason, .. } => f.write_str(reason),
            RunError::Runtime(e) => e.fmt(f),
            RunError::Io { context, error } => write!(f, "{context}: {error}"),
        }
    }
}

impl std::error::Error for RunError {}

impl From<RuntimeError> for RunError {
    fn from(e: RuntimeError) -> Self {
        RunError::Runtime(e)
    }
}

/// The shell's exit code for `program`, which could not be run: 126 if a
/// file of that name is there (a path, or found in `PATH`) but cannot be
/// executed, 127 if there is none.
fn cannot_run_code(program: &str) -> u8 {
    let found = if program.contains('/') {
        Path::new(program).exists()
    } else {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
    };
    if found { 126 } else { 127 }
}

/// `grace run-exec`: the first moments of `grace run`'s command. Asks for
/// SIGKILL when the parent dies (`PR_SET_PDEATHSIG`; the parent is the
/// thread of `grace run` that started it, its main thread, which lives as
/// long as `grace run`), checks the parent (pid `parent`) is still there,
/// then replaces itself with `command` (the signal setting is kept across
/// `exec`, except for set-user-ID programs). Returns only if that fails:
/// the exit code, 127 or 126, as a shell's.
pub fn exec_child(parent: u32, command: &[OsString]) -> u8 {
    use std::os::unix::process::CommandExt;
    let Some((program, args)) = command.split_first() else {
        return 127;
    };
    if let Err(e) = rustix::process::set_parent_process_death_signal(Some(Signal::KILL)) {
        eprintln!("grace run: cannot tie the command to grace: {e}");
        return 126;
    }
    let parent_now = rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get());
    if u32::try_from(parent_now).ok() != Some(parent) {
        // grace run died before the signal was set: it would never come.
        return 137;
    }
    let e = std::process::Command::new(program).args(args).exec();
    eprintln!("grace run: {}: {e}", program.to_string_lossy());
    if e.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}

/// Runs the command to its end; returns the exit code grace should exit
/// with: the command's own, or 128 + the signal that ended it.
pub fn run(options: &RunOptions) -> Result<u8, RunError> {
    let (tx, signals_rx) = mpsc::channel();
    let mut signals = Signals::new(
        [SIGTERM, SIGINT]
            .into_iter()
            .chain(FORWARDED.map(Signal::as_raw)),
    )
    .map_err(|error| RunError::Io {
        context: "signals",
        error,
    })?;
    std::thread::Builder::new()
        .spawn(move || {
            for signal in signals.forever() {
                if tx.send(signal).is_err() {
                    break;
                }
            }
        })
        .map_err(|error| RunError::Io {
            context: "the signal thread",
            error,
        })?;

    let mut meta = Record::new({
        let uid = format!("uid-run-{}", std::process::id());
        Name::try_from(uid.as_str()).map_err(|_| RuntimeError::InvalidName {
            field: "metadata.uid",
            reason: grace_std::api_server::NameError::Length {
                len: uid.len(),
                max: grace_core::NAME_CAPACITY,
            },
        })?
    });
    meta.termination_grace_period_seconds = Some(options.grace_period_seconds);
    let mut object = StoredObject::on_node(meta, "local");
    object.containers = vec![
        StoredContainer::new("main", options.command.iter().cloned())
            .with_pre_stop_hook(options.pre_stop.clone()),
    ];

    // Orphans of the workloads are reaped here at once (best effort: else
    // PID 1 reaps them).
    let _ = grace_std::process::become_subreaper();
    let (actuator, world) = ProcessActuator::new();
    let actuator = actuator
        .with_stop_signal(options.stop_signal)
        .with_output(Output::Inherit)
        .with_launcher(vec![
            // This very binary, even if its file was replaced meanwhile.
            "/proc/self/exe".into(),
            "run-exec".into(),
            "--parent".into(),
            std::process::id().to_string(),
            "--".into(),
        ]);
    let mut rt = Runtime::open(
        MemoryStore::new(),
        SystemClock::new(),
        actuator,
        Recovery::default(),
    )?;
    rt.create("main", object.clone())?;
    if let Err(e) = rt.actuator().start("main", &object) {
        let program = options.command.first().map_or("", String::as_str);
        return Err(RunError::CannotRun {
            reason: e.to_string(),
            code: cannot_run_code(program),
        });
    }

    let mut status: Option<u8> = None;
    let mut deleting = false;
    loop {
        while let Ok(signal) = signals_rx.try_recv() {
            if signal == SIGTERM || signal == SIGINT {
                if !deleting {
                    // kubectl delete: the spec's grace.
                    deleting = true;
                    let _ = rt.handle("main", Input::Delete(DeleteOptions::default()))?;
                    let _ = rt.handle("main", Input::AgentSync)?;
                }
                continue;
            }
            if let Some(forwarded) = Signal::from_named_raw(signal) {
                let _ = rt.actuator().signal("main", 0, forwarded);
            }
            if signal == SIGTSTP {
                // Stopped like a job, once the command was told.
                let _ = rustix::process::kill_process(rustix::process::getpid(), Signal::STOP);
            }
        }
        let wait = rt
            .poll_timeout()
            .map(|t| {
                t.saturating_duration_since(rt.clock().now().mono)
                    .as_millis()
            })
            .map_or(50, |ms| ms.min(50));
        if let Ok(event) = world.recv_timeout(StdDuration::from_millis(wait)) {
            if let Some((_, code)) = event.exit() {
                status = Some(exit_code(code));
                if !deleting {
                    return Ok(status.unwrap_or(1));
                }
            }
            rt.handle_world_event(event)?;
        }
        rt.handle_timeouts()?;
        if deleting && rt.names().next().is_none() {
            return Ok(status.unwrap_or(137));
        }
    }
}

/// The shell convention: the code, or 128 + the signal (see
/// [`WorldEvent::exit_code`](crate::process::WorldEvent::exit_code)); 1 if the status could not be read.
fn exit_code(code: Option<i32>) -> u8 {
    code.and_then(|c| u8::try_from(c & 0xff).ok()).unwrap_or(1)
}
