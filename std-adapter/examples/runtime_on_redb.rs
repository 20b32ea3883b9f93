//! A first program on `grace-std`, as a new user writes it: a `Runtime` on
//! a redb file with an `Actuator` of its own, which reports back what
//! happens in its world (the pre-stop hook returned, the process exited).
//! A pod with a hook is deleted; the hook returns, so its SIGTERM goes out
//! at once rather than after the hook's 30 s; then the program stops, opens
//! the same file again, sees the recovery, and finishes the deletion when
//! the process exits (no SIGKILL).
//!
//! `cargo run -p grace-std --example runtime_on_redb` (the test
//! `std-adapter/tests/examples.rs` runs it too).
#![deny(warnings)]

use std::error::Error;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use grace_core::{Action, DeleteOptions, Input, Phase, Record, Stage};
use grace_std::clock::{Clock, SystemClock};
use grace_std::runtime::{ActionError, Actuator, Change, Runtime, WorldEvent};
use grace_std::store::{RedbStore, StoredContainer, StoredObject};

/// Carries out actions by writing them down, where the program can read
/// them, and plays the world: a hook returns at once, a process exits
/// 50 ms after its stop signal. What the world does is sent to `world`,
/// which the program's loop reads.
#[derive(Clone)]
struct Notebook {
    lines: Arc<Mutex<Vec<String>>>,
    world: Sender<WorldEvent>,
}

impl Actuator for Notebook {
    fn perform(
        &mut self,
        object: &str,
        _: &StoredObject,
        action: &Action,
    ) -> Result<(), ActionError> {
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        lines.push(format!("{object}: {action}"));
        match *action {
            Action::RunPreStop { container, .. } => {
                let returned = WorldEvent::pre_stop_finished(object, container);
                self.world
                    .send(returned)
                    .map_err(|e| ActionError::new(action, e))?;
            }
            Action::SendStopSignal { container } => {
                let (world, object) = (self.world.clone(), object.to_owned());
                std::thread::Builder::new()
                    .spawn(move || {
                        std::thread::sleep(Duration::from_millis(50));
                        let _ = world.send(WorldEvent::exited(object, container, Some(0)));
                    })
                    .map_err(|e| ActionError::new(action, e))?;
            }
            _ => {}
        }
        Ok(())
    }
}

type App = Runtime<RedbStore, SystemClock, Notebook>;

/// The program's loop: waits for what the world reports or the next
/// deadline, whichever comes first, and hands both to the runtime, until
/// `done` holds (or 10 s have passed).
fn drive(
    runtime: &mut App,
    world: &Receiver<WorldEvent>,
    done: impl Fn(&App) -> bool,
) -> Result<(), Box<dyn Error>> {
    let started = std::time::Instant::now();
    while !done(runtime) {
        if started.elapsed() > Duration::from_secs(10) {
            return Err("not done within 10 s".into());
        }
        let now = runtime.clock().now().mono;
        let wait = runtime
            .poll_timeout()
            .map_or(Duration::from_millis(100), |t| {
                t.saturating_duration_since(now).into()
            })
            .min(Duration::from_millis(100));
        match world.recv_timeout(wait) {
            Ok(event) => runtime.handle_world_event(event)?,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Err("the world is gone".into()),
        }
        runtime.handle_timeouts()?;
    }
    Ok(())
}

/// Whether web-0's container has been sent its stop signal.
fn stopping(runtime: &App) -> bool {
    runtime.lifecycle("web-0").is_some_and(|pod| {
        (pod.containers().first()).is_some_and(|app| matches!(app.stage(), Stage::Stopping { .. }))
    })
}

/// Runs both lives of the program.
pub fn main() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("grace.redb");
    let (world, events) = mpsc::channel();
    let notebook = Notebook {
        lines: Arc::default(),
        world,
    };

    // First run: create, delete; the hook returns, SIGTERM goes out.
    {
        let started = std::time::Instant::now();
        let mut runtime = Runtime::builder(
            RedbStore::open(&path)?,
            SystemClock::new(),
            notebook.clone(),
        )
        .open()?;
        let mut web = StoredObject::on_node(Record::builder("uid-web-0").build()?, "node-a");
        let mut app = StoredContainer::new("app", ["sleep", "1000"]);
        app.pre_stop = Some("curl -s localhost:8080/drain".into());
        web.containers.push(app);
        runtime.create("web-0", web)?;
        runtime.handle("web-0", Input::Delete(DeleteOptions::with_grace(30)))?;
        runtime.handle("web-0", Input::AgentSync)?;
        drive(&mut runtime, &events, stopping)?;
        assert_eq!(
            runtime.lifecycle("web-0").map(|pod| pod.phase()),
            Some(Phase::Terminating)
        );
        // The hook's 30 s were not waited for.
        assert!(started.elapsed() < Duration::from_secs(10));
    } // The program stops here: the runtime and the store are closed.

    // Second run on the same file: the deletion is recovered, its SIGKILL
    // deadline kept. The process, told to stop before the restart, exits:
    // the record is removed with no SIGKILL.
    let mut builder = Runtime::builder(
        RedbStore::open(&path)?,
        SystemClock::new(),
        notebook.clone(),
    );
    let transitions = builder.subscribe();
    let mut runtime = builder.open()?;
    let recovered: Vec<Change> = transitions.try_iter().map(|t| t.change).collect();
    assert_eq!(recovered, [Change::Recovered { reset: false }]);
    assert!(stopping(&runtime));
    drive(&mut runtime, &events, |runtime| {
        runtime.lifecycle("web-0").is_none()
    })?;

    let lines = notebook
        .lines
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    for line in &lines {
        println!("{line}");
    }
    assert_eq!(
        lines,
        [
            "web-0: removed from endpoints",
            "web-0: container 0: pre-stop hook started (budget 30 s)",
            "web-0: container 0: stop signal",
            "web-0: container 0: stopped",
        ]
    );
    Ok(())
}
