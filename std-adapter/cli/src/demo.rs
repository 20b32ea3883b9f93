//! `grace demo`: three real processes deleted the Kubernetes way, on the
//! embedded durable store, with a live timeline.
//!
//! Interrupted (SIGINT, SIGTERM), it cleans up after itself: its processes
//! and hooks are killed, its temporary directory removed, and it exits
//! with 128 + the signal, as a shell reports it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use signal_hook::consts::{SIGINT, SIGTERM};

use grace_core::{Action, DeleteOptions, Input, Name, Phase, Record};

use crate::clock::{Clock, SystemClock};
use crate::process::ProcessActuator;
use crate::runtime::{Change, Recovery, Runtime, RuntimeError};
use crate::store::{RedbStore, StoredContainer, StoredObject};

/// Why the demo stopped before its end.
#[derive(Debug)]
#[non_exhaustive]
pub enum DemoError {
    /// The runtime refused an input, or its store failed.
    Runtime(RuntimeError),
    /// The data directory or its store file is not private to this user,
    /// and cannot be made so.
    Private(grace_std::private::PrivateError),
    /// An operating-system operation failed: installing the signal
    /// handlers, starting a part's process.
    Io {
        /// What was being done.
        context: String,
        /// The error.
        error: std::io::Error,
    },
    /// The deletions did not finish within the demo's time limit.
    TimedOut(StdDuration),
}

impl std::fmt::Display for DemoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DemoError::Runtime(e) => e.fmt(f),
            DemoError::Private(e) => write!(f, "refusing to start: {e}"),
            DemoError::Io { context, error } => write!(f, "{context}: {error}"),
            DemoError::TimedOut(limit) => {
                write!(f, "the demo did not finish in {} s", limit.as_secs())
            }
        }
    }
}

// Each message includes its cause: no `source()` beside it.
impl std::error::Error for DemoError {}

impl From<RuntimeError> for DemoError {
    fn from(e: RuntimeError) -> Self {
        DemoError::Runtime(e)
    }
}

impl From<crate::store::StoreError> for DemoError {
    fn from(e: crate::store::StoreError) -> Self {
        DemoError::Runtime(RuntimeError::Store(e))
    }
}

fn io_error(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> DemoError {
    let context = context.into();
    move |error| DemoError::Io { context, error }
}

/// One demo object.
struct Part {
    name: &'static str,
    grace: i64,
    what: &'static str,
    command: &'static str,
    pre_stop: Option<&'static str>,
}

const PARTS: [Part; 3] = [
    Part {
        name: "web",
        grace: 2,
        what: "exits on SIGTERM",
        command: "trap 'exit 0' TERM; while :; do sleep 0.1; done",
        pre_stop: None,
    },
    Part {
        name: "stubborn",
        grace: 3,
        what: "ignores SIGTERM",
        command: "trap '' TERM; while :; do sleep 0.1; done",
        pre_stop: None,
    },
    Part {
        name: "hooked",
        grace: 3,
        what: "pre-stop `sleep 30` outlasts its budget; ignores SIGTERM",
        command: "trap '' TERM; while :; do sleep 0.1; done",
        pre_stop: Some("sleep 30"),
    },
];

/// What happened to one object, for the summary.
#[derive(Default, Debug)]
struct Seen {
    sigterm: Option<f64>,
    sigkill: Option<f64>,
    stopped: Option<f64>,
    deleted: Option<f64>,
}

/// How a demo ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It ran to its end.
    Done,
    /// It was interrupted by this signal (and cleaned up).
    Interrupted(i32),
}

/// Runs the demo, writing the timeline to `out`. Uses `data_dir` for the
/// store, or a fresh directory under the system's temp dir that is removed
/// afterwards — also when the demo fails or is interrupted.
pub fn run(out: &mut impl Write, data_dir: Option<&Path>) -> Result<Ended, DemoError> {
    // Set before any process starts: from now on a SIGINT or SIGTERM is
    // noted here instead of ending grace with its processes left behind.
    let interrupted = Arc::new(AtomicUsize::new(0));
    for signal in [SIGINT, SIGTERM] {
        let as_usize = usize::try_from(signal).unwrap_or(0);
        signal_hook::flag::register_usize(signal, Arc::clone(&interrupted), as_usize)
            .map_err(io_error("signals"))?;
    }
    let (dir, temporary) = match data_dir {
        Some(d) => (d.to_path_buf(), false),
        None => (
            std::env::temp_dir().join(format!("grace-demo-{}", std::process::id())),
            true,
        ),
    };
    let result = run_in(out, &dir, &interrupted);
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

/// The signal noted in `interrupted`, if one came.
fn signalled(interrupted: &AtomicUsize) -> Option<i32> {
    match interrupted.load(Ordering::Relaxed) {
        0 => None,
        n => i32::try_from(n).ok(),
    }
}

fn run_in(out: &mut impl Write, dir: &Path, interrupted: &AtomicUsize) -> Result<Ended, DemoError> {
    grace_std::private::private_dir_marked(dir, 0o700, Some("grace.redb"))
        .map_err(DemoError::Private)?;
    let db: PathBuf = dir.join("grace.redb");
    grace_std::private::private_file(&db).map_err(DemoError::Private)?;
    let store = RedbStore::open(&db)?;
    // Orphans of the workloads are reaped here at once (best effort: else
    // PID 1 reaps them).
    let _ = grace_std::process::become_subreaper();
    let (actuator, world) = ProcessActuator::new();
    let mut rt = Runtime::open(store, SystemClock::new(), actuator, Recovery::default())?;
    let result = show(out, &db, &mut rt, &world, interrupted);
    // Whatever happened, nothing the demo started outlives it.
    rt.actuator().kill_all();
    result
}

type DemoRuntime = Runtime<RedbStore, SystemClock, ProcessActuator>;

/// One line of the demo's output, at once (the demo runs in real time).
fn say(out: &mut dyn Write, text: &str) {
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

fn show(
    out: &mut impl Write,
    db: &Path,
    rt: &mut DemoRuntime,
    world: &std::sync::mpsc::Receiver<crate::process::WorldEvent>,
    interrupted: &AtomicUsize,
) -> Result<Ended, DemoError> {
    let transitions = rt.subscribe();
    introduce(out, db);
    start_parts(rt)?;
    // Let the shells install their traps before anything is signalled.
    std::thread::sleep(StdDuration::from_millis(300));
    if let Some(signal) = signalled(interrupted) {
        return Ok(Ended::Interrupted(signal));
    }

    let t0 = StdInstant::now();
    let t0_mono = rt.clock().now().mono;
    delete_parts(out, rt)?;

    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    let limit = StdDuration::from_secs(30);
    loop {
        for t in transitions.try_iter() {
            let at = t.at.mono.saturating_duration_since(t0_mono).as_millis() as f64 / 1000.0;
            let text = describe(&t.change, seen.entry(t.object.clone()).or_default(), at);
            say(out, &format!("{at:>7.2}s  {:<9} {text}", t.object));
        }
        if rt.names().next().is_none() {
            break;
        }
        if let Some(signal) = signalled(interrupted) {
            say(out, "\ninterrupted: the demo's processes are killed");
            return Ok(Ended::Interrupted(signal));
        }
        if t0.elapsed() > limit {
            return Err(DemoError::TimedOut(limit));
        }
        let wait = rt
            .poll_timeout()
            .map(|t| t.saturating_duration_since(rt.clock().now().mono))
            .map_or(StdDuration::from_millis(50), |d| {
                StdDuration::from_millis(d.as_millis().min(50))
            });
        if let Ok(event) = world.recv_timeout(wait) {
            rt.handle_world_event(event)?;
        }
        rt.handle_timeouts()?;
    }

    summarize(out, &seen);
    Ok(Ended::Done)
}

/// The store and the three parts, before anything happens.
fn introduce(out: &mut dyn Write, db: &Path) {
    say(
        out,
        &format!(
            "grace demo: three real processes, deleted the Kubernetes way\nstore: {} (redb, durable)\n",
            db.display()
        ),
    );
    for p in &PARTS {
        say(
            out,
            &format!("  {:<9} grace {} s   {}", p.name, p.grace, p.what),
        );
    }
    say(out, "");
}

/// Creates each part's object and starts its process (unless a data dir
/// kept from an interrupted run has it already).
fn start_parts(rt: &mut DemoRuntime) -> Result<(), DemoError> {
    for p in &PARTS {
        let uid = {
            let uid = format!("uid-{}", p.name);
            Name::try_from(uid.as_str()).map_err(|_| RuntimeError::InvalidName {
                field: "metadata.uid",
                reason: grace_std::api_server::NameError::Length {
                    len: uid.len(),
                    max: grace_core::NAME_CAPACITY,
                },
            })?
        };
        let mut object = StoredObject::on_node(Record::new(uid), "demo-node");
        object.containers = vec![
            StoredContainer::new("main", ["sh", "-c", p.command])
                .with_pre_stop_hook(p.pre_stop.map(str::to_owned)),
        ];
        if rt.lifecycle(p.name).is_some() {
            continue; // a data dir kept from an interrupted run
        }
        rt.create(p.name, object.clone())?;
        rt.actuator()
            .start(p.name, &object)
            .map_err(io_error(format!("{}: cannot start", p.name)))?;
    }
    Ok(())
}

/// Deletes every part with its grace, at t = 0, and lets the agent see it.
fn delete_parts(out: &mut dyn Write, rt: &mut DemoRuntime) -> Result<(), RuntimeError> {
    for p in &PARTS {
        let answer = rt.handle(p.name, Input::Delete(DeleteOptions::with_grace(p.grace)))?;
        let ts = answer
            .delete()
            .and_then(|a| a.record.deletion_timestamp)
            .map_or(0, |t| t.as_unix_seconds());
        say(
            out,
            &format!(
                "{:>7.2}s  {:<9} delete --grace-period={}: deletion timestamp {} (now + {} s)",
                0.0, p.name, p.grace, ts, p.grace
            ),
        );
        let _ = rt.handle(p.name, Input::AgentSync)?;
    }
    Ok(())
}

/// A transition in a few words; notes in `seen` when the part was
/// signalled, killed, stopped and deleted (`at` seconds after t = 0).
fn describe(change: &Change, seen: &mut Seen, at: f64) -> String {
    match change {
        Change::Phase { from, to } => {
            if *to == Phase::Deleted {
                seen.deleted.get_or_insert(at);
            }
            format!("{} → {}", from.as_str(), to.as_str())
        }
        Change::Action(a) => match a {
            Action::RemoveEndpoints => "removed from endpoints".into(),
            Action::RunPreStop { budget_seconds, .. } => {
                format!("pre-stop hook started (budget {budget_seconds} s)")
            }
            Action::SendStopSignal { .. } => {
                seen.sigterm.get_or_insert(at);
                "SIGTERM".into()
            }
            Action::SendKill { .. } => {
                seen.sigkill.get_or_insert(at);
                "SIGKILL (grace spent)".into()
            }
            Action::ContainerStopped { .. } => {
                seen.stopped.get_or_insert(at);
                "process gone".into()
            }
            Action::Remove { force } => {
                if *force {
                    "record removed (FORCE)".into()
                } else {
                    "record removed".into()
                }
            }
            _ => a.to_string(),
        },
        Change::ActionFailed(e) => format!("{} FAILED: {}", e.action(), e.reason()),
        _ => change.to_string(),
    }
}

/// When each part was signalled, killed and deleted, and why.
fn summarize(out: &mut dyn Write, seen: &BTreeMap<String, Seen>) {
    say(out, "\nsummary");
    for p in &PARTS {
        let s = seen.get(p.name);
        let fmt = |v: Option<f64>| v.map_or("-".to_string(), |t| format!("{t:.1} s"));
        say(
            out,
            &format!(
                "  {:<9} grace {} s  SIGTERM {:>7}  SIGKILL {:>7}  deleted {:>7}",
                p.name,
                p.grace,
                fmt(s.and_then(|s| s.sigterm)),
                fmt(s.and_then(|s| s.sigkill)),
                fmt(s.and_then(|s| s.deleted)),
            ),
        );
    }
    say(
        out,
        "  stubborn: SIGKILL when its 3 s grace was spent; hooked: the hook took the whole 3 s,\n  SIGTERM then, SIGKILL 2 s later (the 2 s floor, R62): grace + 2 s.",
    );
}
