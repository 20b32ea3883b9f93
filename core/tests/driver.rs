//! The embassy driver (feature `embassy`) on the host, on embassy-time's
//! mock clock: inputs through its channel, deadlines met to the
//! millisecond, every change persisted before its actions (write-ahead),
//! and a force-deleted kill carried to its end before the object is
//! forgotten (D4).
//!
//! One test per process matters here: the mock clock is global. The tests
//! of this file share it, so they run one after another under a lock.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]
#![cfg(feature = "embassy")]

use std::sync::Mutex;

use embassy_futures::select::{Either, select};
use embassy_futures::yield_now;
use embassy_sync::blocking_mutex::raw::NoopRawMutex;
use embassy_sync::channel::Channel;
use embassy_time::{Duration, MockDriver};
use grace_core::driver::{Answer, Command, Driver, DriverError, Firmware};
use grace_core::{
    Action, ContainerSpec, DeleteOptions, Id, Lifecycle, Name, Record, SharedTable, Strategy, Table,
};
use grace_core::{Input, Reply, UnknownContainer};

type Lc = Lifecycle<2, 1>;

/// The mock clock is process-global.
static CLOCK: Mutex<()> = Mutex::new(());

#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant, reason = "a test log, read by pattern")]
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
    /// How long sending a stop signal takes (the mock clock moves by it
    /// inside `perform`).
    signal_takes_ms: u64,
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
        if let Action::SendStopSignal { .. } = action {
            MockDriver::get().advance(Duration::from_millis(self.signal_takes_ms));
        }
        Ok(())
    }

    async fn answered(&mut self, answer: Answer) -> Result<(), ()> {
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
    let inputs: Channel<NoopRawMutex, Command, 4> = Channel::new();
    let mut driver: Driver<'_, Table<4, 2, 1>, _, 4, 2, 1, 4> =
        Driver::new(Table::new(), inputs.receiver());
    let id = driver.table().insert(pod("web")).expect("room");
    let mut firmware = Recorder::default();

    let script = async {
        advance(1_000).await;
        // A force delete at t = 1000: the record goes, the kill has not started.
        inputs
            .send(Command::new(
                id,
                Input::Delete(DeleteOptions::with_grace(0)),
            ))
            .await;
        settle().await;
        advance(500).await;
        // The agent sees it at 1500: SIGTERM, SIGKILL 2 s later (D4, R62).
        inputs.send(Command::new(id, Input::AgentSync)).await;
        settle().await;
        advance(2_000).await;
        advance(1).await;
        advance(99).await;
        inputs
            .send(Command::new(id, Input::container_exited(0)))
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
            // R62: 2 s after the stop signal was reported sent (1 501).
            (3_501, Action::SendKill { container: 0 }),
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
    let inputs: Channel<NoopRawMutex, Command, 4> = Channel::new();
    let id = TABLE
        .with(|t| t.insert(pod("db")).ok())
        .expect("not busy")
        .expect("room");
    let mut driver: Driver<'_, &SharedTable<4, 2, 1>, _, 4, 2, 1, 4> =
        Driver::new(&TABLE, inputs.receiver());
    let mut firmware = Recorder::default();

    let script = async {
        inputs
            .send(Command::new(
                id,
                Input::Delete(DeleteOptions::with_grace(3)),
            ))
            .await;
        inputs.send(Command::new(id, Input::AgentSync)).await;
        settle().await;
        // A dry run changes nothing: nothing is persisted for it.
        let mut dry = DeleteOptions::with_grace(1);
        dry.dry_run = true;
        inputs.send(Command::new(id, Input::Delete(dry))).await;
        settle().await;
        advance(2_999).await;
        advance(1).await;
        inputs
            .send(Command::new(id, Input::container_exited(0)))
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
                answer:
                    Answer {
                        reply: Ok(Reply::Delete(Ok(r))),
                        ..
                    },
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

#[test]
fn r62_driver_reports_the_stop_signal_sent_so_sigkill_stays_two_seconds_after_it() {
    let _clock = CLOCK.lock().unwrap_or_else(|e| e.into_inner());
    MockDriver::get().reset();
    let inputs: Channel<NoopRawMutex, Command, 4> = Channel::new();
    let mut driver: Driver<'_, Table<4, 2, 1>, _, 4, 2, 1, 4> =
        Driver::new(Table::new(), inputs.receiver());
    let id = driver.table().insert(pod("slow")).expect("room");
    // Sending the signal takes 300 ms (a slow bus, a busy firmware).
    let mut firmware = Recorder {
        signal_takes_ms: 300,
        ..Recorder::default()
    };
    let script = async {
        inputs
            .send(Command::new(
                id,
                Input::Delete(DeleteOptions::with_grace(2)),
            ))
            .await;
        inputs.send(Command::new(id, Input::AgentSync)).await;
        settle().await;
        // The stop signal was decided at 0 (SIGKILL due at 2 000) but went
        // out at 300: not killed 2 s after the decision ...
        advance(1_700).await;
        advance(300).await;
        // ... but 2 s after the signal (plus the clock's millisecond).
        advance(1).await;
        settle().await;
    };
    let _ = embassy_futures::block_on(select(driver.run(&mut firmware), script));
    let events = &firmware.events;
    assert_eq!(
        performed(events),
        [
            (0, Action::RemoveEndpoints),
            (0, Action::SendStopSignal { container: 0 }),
            (2_301, Action::SendKill { container: 0 }),
        ],
        "{events:#?}"
    );
}

#[test]
fn driver_expires_due_objects_earliest_deadline_first() {
    let _clock = CLOCK.lock().unwrap_or_else(|e| e.into_inner());
    MockDriver::get().reset();
    let inputs: Channel<NoopRawMutex, Command, 8> = Channel::new();
    let mut driver: Driver<'_, Table<4, 2, 1>, _, 4, 2, 1, 8> =
        Driver::new(Table::new(), inputs.receiver());
    // The first slot gets the later deadline.
    let late = driver.table().insert(pod("late")).expect("room");
    let early = driver.table().insert(pod("early")).expect("room");
    let mut firmware = Recorder::default();
    let script = async {
        for (id, grace) in [(late, 5), (early, 3)] {
            inputs
                .send(Command::new(
                    id,
                    Input::Delete(DeleteOptions::with_grace(grace)),
                ))
                .await;
            inputs.send(Command::new(id, Input::AgentSync)).await;
        }
        settle().await;
        // The board was busy: both deadlines have passed when it looks.
        advance(10_000).await;
    };
    let _ = embassy_futures::block_on(select(driver.run(&mut firmware), script));
    let kills: Vec<Id> = firmware
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Perform {
                id,
                action: Action::SendKill { .. },
                ..
            } => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(kills, [early, late], "{:#?}", firmware.events);
}

#[test]
fn driver_answers_name_the_object_and_input_they_answer() {
    let _clock = CLOCK.lock().unwrap_or_else(|e| e.into_inner());
    MockDriver::get().reset();
    let inputs: Channel<NoopRawMutex, Command, 8> = Channel::new();
    let mut driver: Driver<'_, Table<4, 2, 1>, _, 4, 2, 1, 8> =
        Driver::new(Table::new(), inputs.receiver());
    let a = driver.table().insert(pod("a")).expect("room");
    let b = driver.table().insert(pod("b")).expect("room");
    let sent = [
        Command::new(a, Input::Delete(DeleteOptions::with_grace(5))),
        Command::new(b, Input::AgentSync),
        Command::new(b, Input::container_exited(3)),
    ];
    let mut firmware = Recorder::default();
    let script = async {
        for input in sent.clone() {
            inputs.send(input).await;
        }
        settle().await;
    };
    let _ = embassy_futures::block_on(select(driver.run(&mut firmware), script));
    let answers: Vec<Answer> = firmware
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Answered { answer, .. } => Some(answer.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(answers.len(), sent.len());
    for (answer, input) in answers.iter().zip(&sent) {
        assert!(answer.answers(input), "{answer:?} for {input:?}");
        for other in sent.iter().filter(|o| *o != input) {
            assert!(!answer.answers(other), "{answer:?} also for {other:?}");
        }
    }
    assert_eq!(answers[0].command.id, a);
    assert!(matches!(answers[0].command.input, Input::Delete(_)));
    assert!(matches!(answers[0].reply, Ok(Reply::Delete(Ok(_)))));
    assert_eq!(answers[2].command.input, Input::container_exited(3));
    assert_eq!(answers[2].reply, Ok(Reply::Handled(Err(UnknownContainer))));
}

#[test]
fn driver_insert_persists_an_object_before_its_first_input() {
    let _clock = CLOCK.lock().unwrap_or_else(|e| e.into_inner());
    MockDriver::get().reset();
    let inputs: Channel<NoopRawMutex, Command, 4> = Channel::new();
    let mut driver: Driver<'_, Table<4, 2, 1>, _, 4, 2, 1, 4> =
        Driver::new(Table::new(), inputs.receiver());
    let mut firmware = Recorder::default();
    let id = embassy_futures::block_on(driver.insert(&mut firmware, pod("new")))
        .expect("no firmware error")
        .expect("room");
    assert_eq!(
        firmware.events,
        [Event::Persist {
            ms: 0,
            id,
            owes: false
        }]
    );
    // An input that changes nothing (the node was never lost) writes
    // nothing more; the table's reply says so, no copy is compared.
    let script = async {
        inputs.send(Command::new(id, Input::NodeReady)).await;
        settle().await;
    };
    let _ = embassy_futures::block_on(select(driver.run(&mut firmware), script));
    let writes = firmware
        .events
        .iter()
        .filter(|e| matches!(e, Event::Persist { .. }))
        .count();
    assert_eq!(writes, 1, "{:#?}", firmware.events);
}

#[test]
fn driver_error_displays_and_is_an_error() {
    #[derive(Debug)]
    struct Flash;
    impl std::fmt::Display for Flash {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("flash full")
        }
    }
    impl std::error::Error for Flash {}
    let e: DriverError<Flash> = DriverError::Firmware(Flash);
    assert_eq!(e.to_string(), "firmware: flash full");
    // The message says the cause; `source()` does not say it again.
    let dynamic: &dyn std::error::Error = &e;
    assert!(dynamic.source().is_none());
    let busy: DriverError<Flash> = DriverError::Busy;
    assert_eq!(
        busy.to_string(),
        "shared table already in use by an enclosing call"
    );
}
