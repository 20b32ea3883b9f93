//! An async driver for embassy (feature `embassy`): a task that owns a
//! [`Table`] (or shares a [`SharedTable`](crate::SharedTable)), takes inputs from an
//! embassy-sync channel, sleeps with [`embassy_time::Timer::at`] until the
//! table's next deadline or the next input, and hands every action to the
//! firmware's [`Firmware`] implementation.
//!
//! Each step, for the one object it concerns:
//!
//! 1. apply the input (or the deadline) to the table;
//! 2. if the lifecycle changed, [`Firmware::persist`] it — write-ahead: it
//!    is stored before any of its actions is taken, and before the sender
//!    hears the answer ([`Firmware::answered`]);
//! 3. hand out its actions, in order ([`Firmware::perform`]);
//! 4. once it [is finished](Lifecycle::is_finished) (removed, nothing
//!    owed, nothing left running: a force-deleted kill is not dropped),
//!    take it out of the table and call [`Firmware::forget`].
//!
//! After handing out [`Action::SendStopSignal`] the driver reports when
//! the signal went out ([`Input::StopSignalSent`], at
//! [`Firmware::now`] plus one millisecond, as grace-std's runtime does):
//! SIGKILL stays at least 2 s after the signal itself ([R62]). That move
//! of the deadline is not persisted on its own (it is stored with the
//! object's next change); after a reset no deadline of the old boot counts
//! anyway ([`flash`](crate::flash)).
//!
//! Due objects come from the table's deadline queue
//! ([`Table::poll_due`]), earliest first, not from a scan of the table;
//! no lifecycle is copied to tell whether an input changed it (the table's
//! reply says so), and the lifecycle the firmware is handed is one buffer
//! of the driver's, written in place.
//!
//! The driver never allocates and never panics; the firmware's errors end
//! [`Driver::run`] with [`DriverError::Firmware`]. Every input must go
//! through the channel, and new objects through [`Driver::insert`] (which
//! persists them before their first input): an object inserted directly
//! into the table, or a change made directly on a shared table, is not
//! persisted, and its actions wait until the object's next input or
//! deadline.
//!
//! [R62]: crate::rules#r62

use core::convert::Infallible;
use core::fmt;

use embassy_futures::select::{Either, select};
use embassy_sync::blocking_mutex::raw::RawMutex;
use embassy_sync::channel::Receiver;
use embassy_time::Timer;

use crate::input::{Input, Reply};
use crate::lifecycle::{Action, Lifecycle};
use crate::name::NAME_CAPACITY;
use crate::shared::{Busy, TableAccess};
#[cfg(doc)]
use crate::table::Table;
use crate::table::TableFull;
use crate::table::{Id, UnknownId};
use crate::time::{Duration, Instant, Now, WallTime};

/// One input for the driver, sent through its channel by a task or an
/// interrupt handler: an [`Input`] and the object it is for.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Command {
    /// The object.
    pub id: Id,
    /// The input, as [`Table::handle`] takes it.
    pub input: Input,
}

impl Command {
    /// `input` for object `id`.
    pub const fn new(id: Id, input: Input) -> Self {
        Command { id, input }
    }
}

/// The table's answer to a [`Command`], given once the change is
/// persisted: the command it answers and the table's reply. A firmware
/// that passes answers on (a channel back to the tasks that send
/// commands) lets each sender find its own with
/// [`answers`](Answer::answers).
///
/// ```
/// use grace_core::driver::{Answer, Command};
/// use grace_core::{Reply, UnknownId};
///
/// fn mine(answer: &Answer, sent: &Command) -> Option<Result<Reply, UnknownId>> {
///     answer.answers(sent).then_some(answer.reply)
/// }
/// # let _ = mine;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Answer {
    /// The command it answers.
    pub command: Command,
    /// What the table replied ([`Table::handle`]).
    pub reply: Result<Reply, UnknownId>,
}

impl Answer {
    /// Whether this answers `sent`: the same object and the same input.
    /// Two identical commands in flight at once get their answers in the
    /// order they were sent.
    pub fn answers(&self, sent: &Command) -> bool {
        self.command == *sent
    }
}

/// What the firmware does with the driver's outputs. Every method but
/// [`perform`](Self::perform) has a default that does nothing.
///
/// The futures need not be `Send`: the driver runs in one embassy task.
#[allow(async_fn_in_trait, reason = "embassy tasks are single-threaded")]
pub trait Firmware<const F: usize, const C: usize, const L: usize = NAME_CAPACITY> {
    /// The firmware's own error; it ends [`Driver::run`].
    type Error;

    /// The current time, both clocks read together, under the clock
    /// contract of [`Now`] (the one grace-std's `Clock` follows too):
    /// `mono` never decreases and advances with real time; `wall` is unix
    /// milliseconds and may jump. The default reads embassy-time's clock
    /// for both: a board without a real-time clock then writes deletion
    /// timestamps in seconds since boot (the contract's fallback); a board
    /// with one gives its wall time here.
    fn now(&mut self) -> Now {
        let mono = Instant::from(embassy_time::Instant::now());
        let wall = i64::try_from(mono.as_millis()).unwrap_or(i64::MAX);
        Now::new(WallTime::from_unix_millis(wall), mono)
    }

    /// Stores `lifecycle`, which has just changed, before any of its
    /// actions is handed out (write-ahead). The default stores nothing.
    async fn persist(&mut self, id: Id, lifecycle: &Lifecycle<F, C, L>) -> Result<(), Self::Error> {
        let _ = (id, lifecycle);
        Ok(())
    }

    /// Carries out `action` for object `id`; `lifecycle` is its state once
    /// the action was handed out (its next deadline, its record).
    async fn perform(
        &mut self,
        id: Id,
        action: Action,
        lifecycle: &Lifecycle<F, C, L>,
    ) -> Result<(), Self::Error>;

    /// The answer to a command, once persisted: a delete's response, say,
    /// for whoever sent it.
    async fn answered(&mut self, answer: Answer) -> Result<(), Self::Error> {
        let _ = answer;
        Ok(())
    }

    /// The object is finished and out of the table; erase what
    /// [`persist`](Self::persist) stored for it.
    async fn forget(&mut self, id: Id, lifecycle: &Lifecycle<F, C, L>) -> Result<(), Self::Error> {
        let _ = (id, lifecycle);
        Ok(())
    }
}

/// Why [`Driver::run`] stopped.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum DriverError<E> {
    /// The firmware returned an error.
    Firmware(E),
    /// The shared table was borrowed by an enclosing call (see [`Busy`]).
    Busy,
}

impl<E: fmt::Display> fmt::Display for DriverError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriverError::Firmware(e) => write!(f, "firmware: {e}"),
            DriverError::Busy => fmt::Display::fmt(&Busy, f),
        }
    }
}

// The message includes the firmware's error, so there is no `source()`
// (a chain printed link by link would say it twice); it is the variant's
// field.
impl<E: fmt::Debug + fmt::Display> core::error::Error for DriverError<E> {}

impl<E> From<Busy> for DriverError<E> {
    fn from(_: Busy) -> Self {
        DriverError::Busy
    }
}

/// The driver: a table, the receiving end of the input channel, and the
/// table's capacities (`N` objects, `F` finalizers, `C` containers; `Q`
/// is the channel's).
///
/// A [`SharedTable`](crate::SharedTable) in a `static` lets interrupt
/// handlers read it while the driver task works on it:
///
/// ```no_run
/// # #![allow(unused)] // a sketch of a firmware's parts, nothing calls them
/// use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
/// use embassy_sync::channel::Channel;
/// use grace_core::driver::{Command, Driver, Firmware};
/// use grace_core::{Action, Id, Lifecycle, SharedTable};
///
/// static INPUTS: Channel<CriticalSectionRawMutex, Command, 8> = Channel::new();
/// static TABLE: SharedTable<4, 2, 1> = SharedTable::new();
///
/// struct Board;
///
/// impl Firmware<2, 1> for Board {
///     type Error = ();
///     async fn perform(&mut self, id: Id, action: Action, _: &Lifecycle<2, 1>) -> Result<(), ()> {
///         // Signal the process, drop it from load balancing, ...
///         Ok(())
///     }
/// }
///
/// // The body of an `#[embassy_executor::task]`; tasks and interrupt
/// // handlers send `Command`s to `INPUTS`.
/// async fn grace_task() {
///     let mut driver: Driver<'_, _, _, 4, 2, 1, 8> = Driver::new(&TABLE, INPUTS.receiver());
///     let Err(_stopped) = driver.run(&mut Board).await;
/// }
/// ```
pub struct Driver<
    'ch,
    T,
    M: RawMutex,
    const N: usize,
    const F: usize,
    const C: usize,
    const Q: usize,
    const L: usize = NAME_CAPACITY,
> {
    table: T,
    inputs: Receiver<'ch, M, Command, Q>,
    /// The one lifecycle handed to the firmware across an await (a shared
    /// table cannot stay borrowed there): written in place, never a new
    /// copy per input.
    scratch: Lifecycle<F, C, L>,
}

// The capacities; the table and the channel print nothing useful (a
// shared table may be borrowed, a channel's contents cannot be read
// without taking them).
impl<T, M: RawMutex, const N: usize, const F: usize, const C: usize, const Q: usize, const L: usize>
    fmt::Debug for Driver<'_, T, M, N, F, C, Q, L>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Driver")
            .field("objects", &N)
            .field("queue", &Q)
            .finish_non_exhaustive()
    }
}

impl<'ch, T, M, const N: usize, const F: usize, const C: usize, const Q: usize, const L: usize>
    Driver<'ch, T, M, N, F, C, Q, L>
where
    T: TableAccess<N, F, C, L>,
    M: RawMutex,
{
    /// A driver over `table`, fed by `inputs`.
    pub fn new(table: T, inputs: Receiver<'ch, M, Command, Q>) -> Self {
        Driver {
            table,
            inputs,
            scratch: Lifecycle::VACANT,
        }
    }

    /// The table, to read objects between steps. An object inserted here
    /// directly is not persisted until an input or a deadline changes it:
    /// insert through [`insert`](Self::insert) to have it stored first.
    pub fn table(&mut self) -> &mut T {
        &mut self.table
    }

    /// Tracks a new object: inserts it, [persists](Firmware::persist) it
    /// before any input reaches it, and hands out what it already owes.
    /// A full table hands the lifecycle back (`Ok(Err(_))`).
    #[allow(
        clippy::type_complexity,
        reason = "the table's own result, inside the driver's"
    )]
    pub async fn insert<W: Firmware<F, C, L>>(
        &mut self,
        firmware: &mut W,
        lifecycle: Lifecycle<F, C, L>,
    ) -> Result<Result<Id, TableFull<Lifecycle<F, C, L>>>, DriverError<W::Error>> {
        let id = match self.table.access(|t| t.insert(lifecycle))? {
            Ok(id) => id,
            Err(full) => return Ok(Err(full)),
        };
        self.persist(firmware, id).await?;
        self.settle(firmware, id).await?;
        Ok(Ok(id))
    }

    /// Runs forever: settles what the table already owes (a restored
    /// table's actions), then waits for inputs and deadlines. Returns only
    /// on an error.
    pub async fn run<W: Firmware<F, C, L>>(
        &mut self,
        firmware: &mut W,
    ) -> Result<Infallible, DriverError<W::Error>> {
        self.settle_all(firmware).await?;
        loop {
            self.step(firmware).await?;
        }
    }

    /// Hands out the actions every object owes and forgets the finished
    /// ones, persisting each first (after a restore, say).
    pub async fn settle_all<W: Firmware<F, C, L>>(
        &mut self,
        firmware: &mut W,
    ) -> Result<(), DriverError<W::Error>> {
        // Each round settles one object for good: at most `N` rounds.
        for _ in 0..N {
            let owing = self.table.access(|t| {
                t.iter()
                    .find(|(_, l)| l.has_action() || l.is_finished())
                    .map(|(id, l)| (id, l.has_action()))
            })?;
            let Some((id, has_action)) = owing else {
                break;
            };
            if has_action {
                self.persist(firmware, id).await?;
            }
            self.settle(firmware, id).await?;
        }
        Ok(())
    }

    /// One round: handles every deadline that has passed, then waits for
    /// the next input or the next deadline, whichever comes first, and
    /// handles it.
    pub async fn step<W: Firmware<F, C, L>>(
        &mut self,
        firmware: &mut W,
    ) -> Result<(), DriverError<W::Error>> {
        self.expire(firmware).await?;
        let deadline = self.table.access(|t| t.poll_timeout())?;
        let input = match deadline {
            Some(at) => match select(self.inputs.receive(), Timer::at(wake_at(at))).await {
                Either::First(input) => Some(input),
                Either::Second(()) => None,
            },
            None => Some(self.inputs.receive().await),
        };
        match input {
            Some(command) => self.handle(firmware, command).await,
            None => self.expire(firmware).await,
        }
    }

    /// Applies one command now: the change is persisted, then answered, then
    /// its actions are handed out. Whether the input changed the object is
    /// read from the table's reply (an applied agent input, a delete that
    /// is not a dry run, an accepted update), not by comparing copies; an
    /// input refused or ignored leaves the object as it was and writes
    /// nothing.
    pub async fn handle<W: Firmware<F, C, L>>(
        &mut self,
        firmware: &mut W,
        command: Command,
    ) -> Result<(), DriverError<W::Error>> {
        let now = firmware.now();
        let id = command.id;
        let input = command.input.clone();
        let reply = self.table.access(|t| t.handle(now, id, input))?;
        if reply.is_ok_and(|r| r.changed()) {
            self.persist(firmware, id).await?;
        }
        let answer = Answer { command, reply };
        firmware
            .answered(answer)
            .await
            .map_err(DriverError::Firmware)?;
        self.settle(firmware, id).await
    }

    /// Handles every object whose deadline has passed, earliest first, one
    /// at a time, as the table's deadline queue orders them (no scan of
    /// the table): each is persisted before its actions are handed out.
    async fn expire<W: Firmware<F, C, L>>(
        &mut self,
        firmware: &mut W,
    ) -> Result<(), DriverError<W::Error>> {
        let now = firmware.now();
        // Each object's deadline moves past `now` once handled (or it has
        // none); `N` rounds of at most `4 * C + 1` stages bound the loop.
        let rounds = N.saturating_mul(C.saturating_mul(4).saturating_add(1));
        for _ in 0..rounds {
            let due = self.table.access(|t| {
                t.poll_due()
                    .filter(|(_, due)| due.at <= now.mono)
                    .map(|(id, _)| id)
            })?;
            let Some(id) = due else {
                return Ok(());
            };
            let _ = self.table.access(|t| t.handle(now, id, Input::Timeout))?;
            self.persist(firmware, id).await?;
            self.settle(firmware, id).await?;
        }
        Ok(())
    }

    /// Stores object `id` as it is now.
    async fn persist<W: Firmware<F, C, L>>(
        &mut self,
        firmware: &mut W,
        id: Id,
    ) -> Result<(), DriverError<W::Error>> {
        if self.load(id)? {
            firmware
                .persist(id, &self.scratch)
                .await
                .map_err(DriverError::Firmware)?;
        }
        Ok(())
    }

    /// Copies object `id` into the scratch lifecycle, in place; false if
    /// there is no such object.
    fn load(&mut self, id: Id) -> Result<bool, Busy> {
        let scratch = &mut self.scratch;
        self.table.access(|t| match t.get(id) {
            Some(l) => {
                scratch.clone_from(l);
                true
            }
            None => false,
        })
    }

    /// Hands out object `id`'s actions in order, then forgets it if it is
    /// finished. Once a stop signal is out, the table hears when
    /// ([`Input::StopSignalSent`]): SIGKILL stays at least 2 s
    /// after the signal itself ([R62]), however long the write-ahead and
    /// the firmware took.
    ///
    /// [R62]: crate::rules#r62
    async fn settle<W: Firmware<F, C, L>>(
        &mut self,
        firmware: &mut W,
        id: Id,
    ) -> Result<(), DriverError<W::Error>> {
        loop {
            let scratch = &mut self.scratch;
            let action = self.table.access(|t| {
                let action = t.with(id, Lifecycle::poll_action).ok().flatten()?;
                scratch.clone_from(t.get(id)?);
                Some(action)
            })?;
            let Some(action) = action else {
                break;
            };
            firmware
                .perform(id, action, &self.scratch)
                .await
                .map_err(DriverError::Firmware)?;
            if let Action::SendStopSignal { container } = action {
                // The clock counts whole milliseconds, rounded down: one
                // more is never before the signal (as grace-std does).
                let read = firmware.now();
                let sent = Now::new(
                    read.wall,
                    read.mono.saturating_add(Duration::from_millis(1)),
                );
                let _ = self
                    .table
                    .access(|t| t.handle(sent, id, Input::stop_signal_sent(container)))?;
            }
        }
        if let Some(lifecycle) = self.table.access(|t| t.remove_finished(id))? {
            firmware
                .forget(id, &lifecycle)
                .await
                .map_err(DriverError::Firmware)?;
        }
        Ok(())
    }
}

/// The embassy instant to wake at for `deadline`, saturated at embassy's
/// end of time (a tick rate above 1 kHz has fewer milliseconds than grace).
fn wake_at(deadline: Instant) -> embassy_time::Instant {
    let last = embassy_time::Instant::MAX.as_millis();
    embassy_time::Instant::from_millis(deadline.as_millis().min(last))
}
