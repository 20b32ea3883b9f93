//! A store shared by several processes: requests decided by another API
//! server (`grace_std::api_server`, as the CLI does with several agents on
//! etcd), and an agent's runtime on its node's view of the store that
//! follows what the others write (`Runtime::observe`).
//!
//! The store here is the in-memory one shared between "processes" of one
//! test; tests/multi_agent.rs runs the same with real agents on etcd.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

mod common;

use std::sync::Arc;

use common::actuators::Recorder;
use grace_core::{
    Action, DeleteOptions, Duration, FinalizerChange, Input, Name, Phase, PodPhase, Record,
    Timestamp,
};
use grace_std::api_server;
use grace_std::clock::{Clock, ManualClock};
use grace_std::runtime::{Observed, Recovery, Runtime};
use grace_std::store::{MemoryStore, NodeScoped, Store, StoredContainer, StoredObject};

const T_MS: i64 = 1_700_000_000_000;

type Agent = Runtime<NodeScoped<Arc<MemoryStore>>, Arc<ManualClock>, Recorder>;

struct World {
    store: Arc<MemoryStore>,
    clock: Arc<ManualClock>,
    recorder: Recorder,
}

impl World {
    fn new() -> Self {
        World {
            store: Arc::new(MemoryStore::new()),
            clock: Arc::new(ManualClock::at_unix_millis(T_MS)),
            recorder: Recorder::default(),
        }
    }

    /// The agent of `node-a`, started now.
    fn agent(&self) -> Agent {
        Runtime::open(
            NodeScoped::new(Arc::clone(&self.store), "node-a"),
            self.clock.clone(),
            self.recorder.clone(),
            Recovery::default(),
        )
        .expect("runtime opens")
    }

    fn advance_ms(&self, ms: u64) {
        self.clock.advance(Duration::from_millis(ms));
    }

    fn now(&self) -> grace_core::Now {
        self.clock.now()
    }

    fn create(&self, name: &str, uid: &str, node: &str) {
        let _ = api_server::create(&self.store, name, pod(uid, node)).expect("created");
    }

    fn delete(&self, name: &str, options: &DeleteOptions) {
        let _ = api_server::delete(&self.store, self.now(), name, options).expect("accepted");
    }

    fn stored(&self, name: &str) -> Option<StoredObject> {
        self.store.get(name).expect("readable").map(|(o, _)| o)
    }
}

fn pod(uid: &str, node: &str) -> StoredObject {
    let mut object = StoredObject::on_node(Record::new(Name::try_from(uid).expect("short")), node);
    object.containers = vec![StoredContainer::named("app")];
    object
}

fn at_s(s: i64) -> Option<Timestamp> {
    Some(Timestamp::from_unix_seconds(T_MS / 1000 + s))
}

#[test]
fn r57_deletion_decided_by_another_process_is_carried_out_as_stored() {
    let w = World::new();
    let mut agent = w.agent();
    w.create("web", "uid-1", "node-a");
    assert_eq!(agent.observe("web").expect("observed"), Observed::New);
    assert_eq!(agent.lifecycle("web").map(|l| l.phase()), Some(Phase::Live));

    w.delete("web", &DeleteOptions::with_grace(10));
    let decided = w.stored("web").expect("kept while terminating").record;
    assert_eq!(decided.deletion_timestamp, at_s(10));
    w.advance_ms(300);
    assert_eq!(agent.observe("web").expect("observed"), Observed::Changed);
    assert_eq!(
        w.recorder.take_actions(),
        [
            Action::RemoveEndpoints,
            Action::SendStopSignal { container: 0 }
        ]
    );
    // The agent wrote its kill state, and the record as the API decided it.
    let stored = w.stored("web").expect("still stored");
    assert_eq!(stored.record.deletion_timestamp, decided.deletion_timestamp);
    assert_eq!(
        stored.record.deletion_grace_period_seconds,
        decided.deletion_grace_period_seconds
    );
    assert!(stored.agent.is_some());
    // Its own writes are not news to it.
    assert_eq!(agent.observe("web").expect("observed"), Observed::Unchanged);

    // SIGKILL when the grace counted from the agent's sync is spent.
    w.advance_ms(9_999);
    agent.handle_timeouts().expect("handled");
    assert_eq!(w.recorder.take_actions(), []);
    w.advance_ms(1);
    agent.handle_timeouts().expect("handled");
    assert_eq!(
        w.recorder.take_actions(),
        [Action::SendKill { container: 0 }]
    );
    let _ = agent
        .handle("web", Input::container_exited(0))
        .expect("reported");
    assert_eq!(
        w.recorder.take_actions(),
        [Action::ContainerStopped { container: 0 }]
    );
    // The final delete (the runtime's own store write, R75).
    assert_eq!(w.stored("web"), None);
    assert_eq!(agent.names().count(), 0);
}

#[test]
fn d4_force_delete_by_another_process_stops_the_workload_with_the_two_second_floor() {
    let w = World::new();
    let mut agent = w.agent();
    w.create("web", "uid-1", "node-a");
    let _ = agent.observe("web").expect("observed");
    let answer = api_server::delete(&w.store, w.now(), "web", &DeleteOptions::with_grace(0))
        .expect("accepted");
    assert!(answer.response.force, "flagged: the workload may still run");
    assert_eq!(w.stored("web"), None, "removed at once");

    assert_eq!(agent.observe("web").expect("observed"), Observed::Changed);
    assert_eq!(
        agent.lifecycle("web").map(|l| l.phase()),
        Some(Phase::Deleted)
    );
    assert_eq!(
        w.recorder.take_actions(),
        [
            Action::RemoveEndpoints,
            Action::SendStopSignal { container: 0 }
        ]
    );
    w.advance_ms(2_000);
    agent.handle_timeouts().expect("handled");
    assert_eq!(
        w.recorder.take_actions(),
        [],
        "never sooner than 2 s after SIGTERM, counted from when it was sent \
         (the clock's millisecond rounded up: it may have been late in it)"
    );
    w.advance_ms(1);
    agent.handle_timeouts().expect("handled");
    assert_eq!(
        w.recorder.take_actions(),
        [Action::SendKill { container: 0 }]
    );
    let _ = agent
        .handle("web", Input::container_exited(0))
        .expect("reported");
    assert_eq!(
        w.recorder.take_actions(),
        [Action::ContainerStopped { container: 0 }]
    );
    assert_eq!(agent.names().count(), 0, "forgotten once stopped");
    assert_eq!(w.stored("web"), None);
}

#[test]
fn r80_deletion_accepted_while_the_agent_is_down_is_carried_out_when_it_returns() {
    let w = World::new();
    w.create("web", "uid-1", "node-a");
    {
        let mut agent = w.agent();
        let _ = agent.observe("web").expect("observed");
        let _ = agent.handle("web", Input::AgentSync).expect("synced");
    }
    // The agent is gone: the deletion is accepted and waits (R80).
    w.delete("web", &DeleteOptions::with_grace(20));
    let decided = w.stored("web").expect("kept").record;
    w.advance_ms(5_000);
    assert_eq!(w.recorder.take_actions(), []);

    // The agent comes back (same boot: its workload kept running).
    let mut agent = w.agent();
    assert_eq!(
        w.recorder.take_actions(),
        [
            Action::RemoveEndpoints,
            Action::SendStopSignal { container: 0 }
        ]
    );
    let stored = w.stored("web").expect("kept").record;
    assert_eq!(stored.deletion_timestamp, decided.deletion_timestamp);
    // The budget counts from when the agent saw the deletion (R57).
    w.advance_ms(20_000);
    agent.handle_timeouts().expect("handled");
    assert_eq!(
        w.recorder.take_actions(),
        [Action::SendKill { container: 0 }]
    );
}

#[test]
fn objects_of_other_nodes_are_left_to_their_agents() {
    let w = World::new();
    w.create("theirs", "uid-b", "node-b");
    w.create("ours", "uid-a", "node-a");
    let mut agent = w.agent();
    assert_eq!(agent.names().collect::<Vec<_>>(), ["ours"]);
    w.delete("theirs", &DeleteOptions::with_grace(5));
    assert_eq!(
        agent.observe("theirs").expect("observed"),
        Observed::Unchanged
    );
    assert_eq!(agent.names().collect::<Vec<_>>(), ["ours"]);
    assert_eq!(w.recorder.take_actions(), []);
    let stored = w.stored("theirs").expect("waits for its own agent (R80)");
    assert!(stored.record.deletion_timestamp.is_some());
}

#[test]
fn r45_finalizer_removed_by_another_process_lets_the_agent_finish() {
    let w = World::new();
    let mut object = pod("uid-1", "node-a");
    object
        .record
        .finalizers
        .push(Name::try_from("example.com/keep").expect("short"))
        .expect("room");
    let _ = api_server::create(&w.store, "web", object).expect("created");
    let mut agent = w.agent();
    w.delete("web", &DeleteOptions::with_grace(10));
    let _ = agent.observe("web").expect("observed");
    let _ = agent
        .handle("web", Input::container_exited(0))
        .expect("reported");
    let _ = w.recorder.take_actions();
    // The final delete was made; the finalizer holds the record.
    let held = w.stored("web").expect("held by its finalizer").record;
    assert_eq!(held.deletion_grace_period_seconds, Some(0));

    let change = FinalizerChange::Remove(Name::try_from("example.com/keep").expect("short"));
    let outcome =
        api_server::update_finalizers(&w.store, w.now(), "web", &change).expect("updated");
    assert_eq!(outcome, grace_core::UpdateOutcome::Deleted { force: false });
    assert_eq!(w.stored("web"), None);
    assert_eq!(agent.observe("web").expect("observed"), Observed::Changed);
    assert_eq!(w.recorder.take_actions(), []);
    assert_eq!(agent.names().count(), 0);
}

#[test]
fn d7_fencing_a_node_removes_its_objects_and_signals_nothing() {
    let w = World::new();
    w.create("a", "uid-a", "node-a");
    w.create("b", "uid-b", "node-b");
    let mut held = pod("uid-c", "node-b");
    held.record
        .finalizers
        .push(Name::try_from("example.com/keep").expect("short"))
        .expect("room");
    let _ = api_server::create(&w.store, "c", held).expect("created");
    w.delete("b", &DeleteOptions::with_grace(30));

    let fenced = api_server::fence_node(&w.store, w.now(), "node-b").expect("fenced");
    assert_eq!(fenced, ["b", "c"]);
    assert_eq!(w.stored("b"), None, "R82: deleted with grace 0");
    let c = w.stored("c").expect("held by its finalizer").record;
    assert_eq!(c.phase, PodPhase::Failed);
    assert_eq!(c.deletion_grace_period_seconds, Some(0));
    assert!(w.stored("a").is_some(), "other nodes' objects untouched");
    assert_eq!(w.recorder.take_actions(), []);
}

#[test]
fn a_name_taken_by_a_new_object_stops_the_old_one_first() {
    let w = World::new();
    let mut agent = w.agent();
    w.create("web", "uid-1", "node-a");
    let _ = agent.observe("web").expect("observed");
    w.delete("web", &DeleteOptions::with_grace(0));
    w.create("web", "uid-2", "node-a");
    // The agent sees only the outcome: another uid under the name.
    assert_eq!(agent.observe("web").expect("observed"), Observed::Replaced);
    assert_eq!(
        w.recorder.take_actions(),
        [
            Action::RemoveEndpoints,
            Action::SendStopSignal { container: 0 }
        ]
    );
    let _ = agent
        .handle("web", Input::container_exited(0))
        .expect("reported");
    assert_eq!(
        w.recorder.take_actions(),
        [Action::ContainerStopped { container: 0 }]
    );
    // The old one is stopped and forgotten; the new one is taken.
    assert_eq!(agent.observe("web").expect("observed"), Observed::New);
    let uid = agent.lifecycle("web").map(|l| l.record().uid.clone());
    assert_eq!(uid.as_deref(), Some("uid-2"));
    assert!(w.stored("web").is_some(), "the new object stays");
}
