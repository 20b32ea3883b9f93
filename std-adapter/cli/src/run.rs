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

use std::sync::mpsc;
use std::time::Duration as StdDuration;

use grace_core::{DeleteOptions, Name, Record};
use rustix::process::Signal;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::clock::{Clock, SystemClock};
use crate::process::{Output, ProcessActuator, WorldEvent};
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

/// Runs the command to its end; returns the exit code grace should exit
/// with: the command's own, or 128 + the signal that ended it.
pub fn run(options: &RunOptions) -> Result<u8, RuntimeError> {
    let (tx, signals_rx) = mpsc::channel();
    let mut signals =
        Signals::new([SIGTERM, SIGINT]).map_err(|e| RuntimeError::io("signals", e))?;
    std::thread::spawn(move || {
        for signal in signals.forever() {
            if tx.send(signal).is_err() {
                break;
            }
        }
    });

    let mut meta = Record::new(
        Name::try_from(format!("uid-run-{}", std::process::id()).as_str()).map_err(|e| {
            RuntimeError::InvalidName {
                field: "metadata.uid",
                reason: e.to_string(),
            }
        })?,
    );
    meta.termination_grace_period_seconds = Some(options.grace_period_seconds);
    let mut object = StoredObject::on_node(meta, "local");
    object.containers = vec![StoredContainer {
        name: "main".into(),
        pre_stop: options.pre_stop.clone(),
        sidecar: false,
        command: options.command.clone(),
        stop_signal: None,
    }];

    // Orphans of the workloads are reaped here at once (best effort: else
    // PID 1 reaps them).
    let _ = grace_std::process::orphans::become_subreaper();
    let (actuator, world) = ProcessActuator::new();
    let actuator = actuator
        .with_stop_signal(options.stop_signal)
        .with_output(Output::Inherit);
    let mut rt = Runtime::open(
        MemoryStore::new(),
        SystemClock::new(),
        actuator,
        Recovery::default(),
    )?;
    rt.create("main", object.clone())?;
    rt.actuator()
        .start("main", &object)
        .map_err(|e| RuntimeError::io(format!("cannot start {:?}", options.command), e))?;

    let mut status: Option<u8> = None;
    let mut deleting = false;
    loop {
        if !deleting && signals_rx.try_recv().is_ok() {
            // kubectl delete: the spec's grace.
            deleting = true;
            let _ = rt.handle_delete("main", &DeleteOptions::default())?;
            let _ = rt.handle_agent_sync("main")?;
        }
        let wait = rt
            .poll_timeout()
            .map(|t| {
                t.saturating_duration_since(rt.clock().now().mono)
                    .as_millis()
            })
            .map_or(50, |ms| ms.min(50));
        if let Ok(event) = world.recv_timeout(StdDuration::from_millis(wait)) {
            if let WorldEvent::Exited { code, .. } = event {
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
/// [`WorldEvent::Exited`]); 1 if the status could not be read.
fn exit_code(code: Option<i32>) -> u8 {
    code.and_then(|c| u8::try_from(c & 0xff).ok()).unwrap_or(1)
}
