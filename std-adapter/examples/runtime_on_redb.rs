//! A first program on `grace-std`, as a new user writes it: a `Runtime` on
//! a redb file with an `Actuator` of its own, a pod deleted and its SIGTERM
//! sent; then the program stops and opens the same file again, sees the
//! recovery, and finishes the deletion.
//!
//! `cargo run -p grace-std --example runtime_on_redb` (the test
//! `std-adapter/tests/examples.rs` runs it too).
#![deny(warnings)]

use std::error::Error;
use std::sync::{Arc, Mutex};

use grace_core::{Action, DeleteOptions, Phase, Record, Stage};
use grace_std::clock::SystemClock;
use grace_std::runtime::{Actuator, Change, Runtime};
use grace_std::store::{RedbStore, StoredContainer, StoredObject};

/// Carries out actions by writing them down, where the program can read
/// them.
#[derive(Clone, Default)]
struct Notebook(Arc<Mutex<Vec<String>>>);

impl Actuator for Notebook {
    fn perform(&mut self, object: &str, _: &StoredObject, action: &Action) -> Result<(), String> {
        let mut lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        lines.push(format!("{object}: {action}"));
        Ok(())
    }
}

/// Runs both lives of the program.
pub fn main() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("grace.redb");
    let notebook = Notebook::default();

    // First run: create, delete, SIGTERM.
    {
        let mut runtime = Runtime::builder(
            RedbStore::open(&path)?,
            SystemClock::new(),
            notebook.clone(),
        )
        .open()?;
        let mut web = StoredObject::on_node(Record::builder("uid-web-0").build()?, "node-a");
        web.containers
            .push(StoredContainer::new("app", ["sleep", "1000"]));
        runtime.create("web-0", web)?;
        runtime.handle_delete("web-0", &DeleteOptions::with_grace(30))?;
        runtime.handle_agent_sync("web-0")?;
        let pod = runtime.lifecycle("web-0").ok_or("web-0 is tracked")?;
        assert_eq!(pod.phase(), Phase::Terminating);
    } // The program stops here: the runtime and the store are closed.

    // Second run on the same file: the deletion is recovered, its SIGKILL
    // deadline kept.
    let mut builder = Runtime::builder(
        RedbStore::open(&path)?,
        SystemClock::new(),
        notebook.clone(),
    );
    let transitions = builder.subscribe();
    let mut runtime = builder.open()?;
    let recovered: Vec<Change> = transitions.try_iter().map(|t| t.change).collect();
    assert_eq!(recovered, [Change::Recovered { reset: false }]);
    let pod = runtime.lifecycle("web-0").ok_or("web-0 is recovered")?;
    assert!(matches!(
        pod.containers()[0].stage(),
        Stage::Stopping { .. }
    ));

    // The process exits: the agent's final delete removes the record.
    runtime.handle_container_exited("web-0", 0)?;
    assert!(runtime.lifecycle("web-0").is_none());

    let lines = notebook.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
    for line in &lines {
        println!("{line}");
    }
    assert_eq!(
        lines,
        [
            "web-0: removed from endpoints",
            "web-0: container 0: stop signal",
            "web-0: container 0: stopped",
        ]
    );
    Ok(())
}
