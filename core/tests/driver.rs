//! The embassy driver (feature `embassy`) on the host, on embassy-time's
//! mock clock: inputs through its channel, deadlines met to the
//! millisecond, every change persisted before its actions (write-ahead),
//! and a force-deleted kill carried to its end before the object is
//! forgotten (D4).
//!
//! One test per process matters here: the mock clock is global. The tests
//! of this file share it, so they run one after another under a lock.
#![cfg(feature = "embassy")]

use std::sync::Mutex;

use embassy_futures::select::{Either, select};
use embassy_futures::yield_now;
use embassy_sync::blocking_mutex::raw::NoopRawMutex;
use embassy_sync::channel::Channel;
use embassy_time::{Duration, MockDriver};
use grace_core::driver::{Answer, Driver, Firmware, Input};
use grace_core::{
    Action, ContainerSpec, DeleteOptions, Id, Lifecycle, Name, Record, SharedTable, Strategy, Table,
};

type Lc = Lifecycle<2, 1>;

/// The mock clock is process-global.
static CLOCK: Mutex<()> = Mutex::new(());

#[derive(Clone, Debug, PartialEq)]
enum Event {
    /// A lifecycle stored, and whether it owed actions then.
    Persist {
        ms: u64,
        id: Id,
        owes: bool,
    },
    Perform {
        ms: u64,
        id: Id,
        action: Action,
    },
    Answered {
        ms: u64,
        answer: Answer,
    },
    Forget {
        ms: u64,
        id: Id,
    },
}

#[derive(Default)]
struct Recorder {
    events: Vec<Event>,
}

fn ms() -> u64 {
    embassy_time::Instant::now().as_millis()
}

impl Firmware<2, 1> for Recorder {
    type Error = ();

    async fn persist(&mut self, id: Id, lifecycle: &Lc) -> Result<(), ()> {
        let owes = lifecycle.has_action();
        self.events.push(Event::Persist { ms: ms(), id, owes });
        Ok(())
    }

    async fn perform(&mut self, id: Id, action: Action, _: &Lc) -> Result<(), ()> {
        self.events.push(Event::Perform {
            ms: ms(),
            id,
            action,
        });
        Ok(())
    }

    async fn answered(&mut self, _: &Input, answer: Answer) -> Result<(), ()> {
        self.events.push(Event::Answered { ms: ms(), answer });
        Ok(())
    }

    async fn forget(&mut self, id: Id, _: &Lc) -> Result<(), ()> {
        self.events.push(Event::Forget { ms: ms(), id });
        Ok(())
    }
}

fn pod(uid: &str) -> Lc {
    let record = Record::new(Name::try_from(uid).expect("short"));
    Lifecycle::new(Strategy::POD, record, &[ContainerSpec::default()]).expect("fits")
}

/// Lets the driver run until it waits again.
async fn settle() {
    for _ in 0..16 {
        yield_now().await;
    }
}

/// Moves the mock clock by `ms` and lets the driver react.
async fn advance(ms: u64) {
    MockDriver::get().advance(Duration::from_millis(ms));
    settle().await;
}

fn performed(events: &[Event]) -> Vec<(u64, Action)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Perform { ms, action, .. } => Some((*ms, *action)),
            _ => None,
        })
        .collect()
}

#[test]
fn d4_driver_finishes_a_force_deleted_kill_before_forgetting_it() {
    let _clock = CLOCK.lock().unwrap_or_else(|e| e.into_inner());
    MockDriver::get().reset();
    let inputs: Channel<NoopRawMutex, Input, 4> = Channel::new();
    let mut driver: Driver<'_, Table<4, 2, 1>, _, 4, 2, 1, 4> =
        Driver::new(Table::new(), inputs.receiver());
    let id = driver.table().insert(pod("web")).expect("room");
    let mut firmware = Recorder::default();

    let script = async {
        advance(1_000).await;
        // A force delete at t = 1000: the record goes, the kill has not started.
        inputs
            .send(Input::Delete {
                id,
                options: DeleteOptions::with_grace(0),
            })
            .await;
        settle().await;
        advance(500).await;
        // The agent sees it at 1500: SIGTERM, SIGKILL 2 s later (D4, R62).
        inputs.send(Input::AgentSync(id)).await;
        settle().await;
        advance(1_999).await;
        advance(1).await;
        advance(100).await;
        inputs
            .send(Input::ContainerExited { id, container: 0 })
            .await;
        settle().await;
    };
    let stopped = embassy_futures::block_on(select(driver.run(&mut firmware), script));
    assert!(
        matches!(stopped, Either::Second(())),
        "the driver never stops on its own"
    );

    let events = &firmware.events;
    assert_eq!(
        performed(events),
        [
            (1_000, Action::RemoveEndpoints),
            (1_000, Action::Remove { force: true }),
            (1_500, Action::SendStopSignal { container: 0 }),
            (3_500, Action::SendKill { container: 0 }),
            (3_600, Action::ContainerStopped { container: 0 }),
        ],
        "{events:#?}"
    );
    // Forgotten only once the process has exited, not on `Remove`.
    let forgets: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, Event::Forget { .. }))
        .collect();
    assert_eq!(forgets, [&Event::Forget { ms: 3_600, id }]);
    assert_eq!(events.last(), Some(&Event::Forget { ms: 3_600, id }));
    assert!(driver.table().is_empty());
}

#[test]
fn driver_persists_each_change_before_its_actions_and_answers() {
    let _clock = CLOCK.lock().unwrap_or_else(|e| e.into_inner());
    MockDriver::get().reset();
    static TABLE: SharedTable<4, 2, 1> = SharedTable::new();
    let inputs: Channel<NoopRawMutex, Input, 4> = Channel::new();
    let id = TABLE
        .with(|t| t.insert(pod("db")).ok())
        .expect("not busy")
        .expect("room");
    let mut driver: Driver<'_, &SharedTable<4, 2, 1>, _, 4, 2, 1, 4> =
        Driver::new(&TABLE, inputs.receiver());
    let mut firmware = Recorder::default();

    let script = async {
        inputs
            .send(Input::Delete {
                id,
                options: DeleteOptions::with_grace(3),
            })
            .await;
        inputs.send(Input::AgentSync(id)).await;
        settle().await;
        // A dry run changes nothing: nothing is persisted for it.
        let mut dry = DeleteOptions::with_grace(1);
        dry.dry_run = true;
        inputs.send(Input::Delete { id, options: dry }).await;
        settle().await;
        advance(2_999).await;
        advance(1).await;
        inputs
            .send(Input::ContainerExited { id, container: 0 })
            .await;
        settle().await;
    };
    let _ = embassy_futures::block_on(select(driver.run(&mut firmware), script));

    let events = &firmware.events;
    assert_eq!(
        performed(events),
        [
            (0, Action::RemoveEndpoints),
            (0, Action::SendStopSignal { container: 0 }),
            (3_000, Action::SendKill { container: 0 }),
            (3_000, Action::ContainerStopped { container: 0 }),
            (3_000, Action::Remove { force: false }),
        ],
        "{events:#?}"
    );
    // Write-ahead: every run of actions follows a write that owed them,
    // and every answer to a change follows its write.
    for (i, event) in events.iter().enumerate() {
        let before = events.get(i.wrapping_sub(1));
        match event {
            Event::Perform { .. } => assert!(
                matches!(
                    before,
                    Some(Event::Perform { .. } | Event::Answered { .. })
                        | Some(Event::Persist { owes: true, .. })
                ),
                "event {i} not preceded by a write: {events:#?}"
            ),
            Event::Answered {
                answer: Answer::Delete(Ok(r)),
                ..
            } if !r.dry_run => assert!(
                matches!(before, Some(Event::Persist { .. })),
                "answer {i} before its write: {events:#?}"
            ),
            _ => {}
        }
    }
    let writes = events
        .iter()
        .filter(|e| matches!(e, Event::Persist { .. }))
        .count();
    // Delete, sync, the SIGKILL deadline, the exit; not the dry run.
    assert_eq!(writes, 4, "{events:#?}");
    assert_eq!(events.last(), Some(&Event::Forget { ms: 3_000, id }));
}
