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
//! The driver never allocates and never panics; the firmware's errors end
//! [`Driver::run`] with [`DriverError::Firmware`]. Every input must go
//! through the channel: a change made directly on a shared table (other
//! than inserting a new object) is not persisted, and its actions wait
//! until the object's next input or deadline.

use core::convert::Infallible;

use embassy_futures::select::{Either, select};
use embassy_sync::blocking_mutex::raw::RawMutex;
use embassy_sync::channel::Receiver;
use embassy_time::Timer;

use crate::lifecycle::{Action, DeleteResponse, Handled, Lifecycle, UpdateOutcome};
use crate::name::NAME_CAPACITY;
use crate::options::DeleteOptions;
use crate::registry::FinalizerChange;
use crate::shared::{Busy, TableAccess};
use crate::table::{ContainerInputError, Id, Table, TableDeleteError, TableUpdateError};
use crate::time::{Instant, Now, WallTime};

/// One input for the driver, sent through its channel by a task or an
/// interrupt handler: the table's `handle_*` inputs, named by [`Id`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Input {
    /// A delete request ([`Table::handle_delete`]).
    Delete {
        /// The object.
        id: Id,
        /// The request's options.
        options: DeleteOptions,
    },
    /// A finalizer update ([`Table::handle_finalizer_update`]).
    FinalizerUpdate {
        /// The object.
        id: Id,
        /// The change.
        change: FinalizerChange,
    },
    /// The agent observes the record ([`Table::handle_agent_sync`]).
    AgentSync(Id),
    /// An eviction ([`Table::handle_evict`]).
    Evict {
        /// The object.
        id: Id,
        /// The eviction's grace.
        grace_period_seconds: i64,
    },
    /// A pre-stop hook returned ([`Table::handle_pre_stop_finished`]).
    PreStopFinished {
        /// The object.
        id: Id,
        /// The container's index.
        container: usize,
    },
    /// A process exited ([`Table::handle_container_exited`]).
    ContainerExited {
        /// The object.
        id: Id,
        /// The container's index.
        container: usize,
    },
    /// The agent stopped reporting ([`Table::handle_node_lost`]).
    NodeLost(Id),
    /// The agent is back ([`Table::handle_node_ready`]).
    NodeReady(Id),
    /// The node is gone for good ([`Table::handle_node_fenced`]).
    NodeFenced(Id),
}

impl Input {
    /// The object the input is for.
    pub fn id(&self) -> Id {
        match self {
            Input::Delete { id, .. }
            | Input::FinalizerUpdate { id, .. }
            | Input::Evict { id, .. }
            | Input::PreStopFinished { id, .. }
            | Input::ContainerExited { id, .. } => *id,
            Input::AgentSync(id)
            | Input::NodeLost(id)
            | Input::NodeReady(id)
            | Input::NodeFenced(id) => *id,
        }
    }
}

/// The table's answer to an [`Input`], given once the change is persisted.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Answer {
    /// To [`Input::Delete`].
    Delete(Result<DeleteResponse, TableDeleteError>),
    /// To [`Input::FinalizerUpdate`].
    Update(Result<UpdateOutcome, TableUpdateError>),
    /// To every agent-side input.
    Agent(Result<Handled, ContainerInputError>),
}

/// What the firmware does with the driver's outputs. Every method but
/// [`perform`](Self::perform) has a default that does nothing.
///
/// The futures need not be `Send`: the driver runs in one embassy task.
#[allow(async_fn_in_trait, reason = "embassy tasks are single-threaded")]
pub trait Firmware<const F: usize, const C: usize, const L: usize = NAME_CAPACITY> {
    /// The firmware's own error; it ends [`Driver::run`].
    type Error;

    /// The current time. The default reads embassy-time's clock for both
    /// clocks: deletion timestamps are then seconds since boot; a board
    /// with a real-time clock gives its wall time here.
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

    /// The answer to `input`, once persisted: a delete's response, say,
    /// for whoever sent it.
    async fn answered(&mut self, input: &Input, answer: Answer) -> Result<(), Self::Error> {
        let _ = (input, answer);
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
pub enum DriverError<E> {
    /// The firmware returned an error.
    Firmware(E),
    /// The shared table was borrowed by an enclosing call (see [`Busy`]).
    Busy,
}

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
/// use grace_core::driver::{Driver, Firmware, Input};
/// use grace_core::{Action, Id, Lifecycle, SharedTable};
///
/// static INPUTS: Channel<CriticalSectionRawMutex, Input, 8> = Channel::new();
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
/// // handlers send `Input`s to `INPUTS`.
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
    inputs: Receiver<'ch, M, Input, Q>,
}

impl<'ch, T, M, const N: usize, const F: usize, const C: usize, const Q: usize, const L: usize>
    Driver<'ch, T, M, N, F, C, Q, L>
where
    T: TableAccess<N, F, C, L>,
    M: RawMutex,
{
    /// A driver over `table`, fed by `inputs`.
    pub fn new(table: T, inputs: Receiver<'ch, M, Input, Q>) -> Self {
        Driver { table, inputs }
    }

    /// The table, to insert objects or read them between steps.
    pub fn table(&mut self) -> &mut T {
        &mut self.table
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
            Some(input) => self.handle(firmware, &input).await,
            None => self.expire(firmware).await,
        }
    }

    /// Applies one input now: the change is persisted, then answered, then
    /// its actions are handed out.
    pub async fn handle<W: Firmware<F, C, L>>(
        &mut self,
        firmware: &mut W,
        input: &Input,
    ) -> Result<(), DriverError<W::Error>> {
        let now = firmware.now();
        let id = input.id();
        let before = self.table.access(|t| t.get(id).cloned())?;
        let answer = self.table.access(|t| apply(t, now, input))?;
        let changed = self.table.access(|t| t.get(id) != before.as_ref())?;
        if changed {
            self.persist(firmware, id).await?;
        }
        firmware
            .answered(input, answer)
            .await
            .map_err(DriverError::Firmware)?;
        self.settle(firmware, id).await
    }

    /// Handles every object whose deadline has passed, one at a time:
    /// each is persisted before its actions are handed out.
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
                t.iter()
                    .find(|(_, l)| l.poll_timeout().is_some_and(|d| d <= now.mono))
                    .map(|(id, _)| id)
            })?;
            let Some(id) = due else {
                return Ok(());
            };
            let _ = self
                .table
                .access(|t| t.with(id, |l| l.handle_timeout(now)))?;
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
        // A copy: a shared table cannot stay borrowed across an await.
        if let Some(lifecycle) = self.table.access(|t| t.get(id).cloned())? {
            firmware
                .persist(id, &lifecycle)
                .await
                .map_err(DriverError::Firmware)?;
        }
        Ok(())
    }

    /// Hands out object `id`'s actions in order, then forgets it if it is
    /// finished.
    async fn settle<W: Firmware<F, C, L>>(
        &mut self,
        firmware: &mut W,
        id: Id,
    ) -> Result<(), DriverError<W::Error>> {
        while let Some((action, lifecycle)) = self.table.access(|t| {
            let action = t.with(id, Lifecycle::poll_action).ok().flatten()?;
            Some((action, t.get(id)?.clone()))
        })? {
            firmware
                .perform(id, action, &lifecycle)
                .await
                .map_err(DriverError::Firmware)?;
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

/// The table's input for `input`.
fn apply<const N: usize, const F: usize, const C: usize, const L: usize>(
    table: &mut Table<N, F, C, L>,
    now: Now,
    input: &Input,
) -> Answer {
    let agent = |r: Result<Handled, crate::table::UnknownId>| Answer::Agent(r.map_err(Into::into));
    match input {
        Input::Delete { id, options } => Answer::Delete(table.handle_delete(now, *id, options)),
        Input::FinalizerUpdate { id, change } => {
            Answer::Update(table.handle_finalizer_update(now, *id, change))
        }
        Input::AgentSync(id) => agent(table.handle_agent_sync(now, *id)),
        Input::Evict {
            id,
            grace_period_seconds,
        } => agent(table.handle_evict(now, *id, *grace_period_seconds)),
        Input::PreStopFinished { id, container } => {
            Answer::Agent(table.handle_pre_stop_finished(now, *id, *container))
        }
        Input::ContainerExited { id, container } => {
            Answer::Agent(table.handle_container_exited(now, *id, *container))
        }
        Input::NodeLost(id) => agent(table.handle_node_lost(now, *id)),
        Input::NodeReady(id) => agent(table.handle_node_ready(now, *id)),
        Input::NodeFenced(id) => agent(table.handle_node_fenced(now, *id)),
    }
}

/// The embassy instant to wake at for `deadline`, saturated at embassy's
/// end of time (a tick rate above 1 kHz has fewer milliseconds than grace).
fn wake_at(deadline: Instant) -> embassy_time::Instant {
    let last = embassy_time::Instant::MAX.as_millis();
    embassy_time::Instant::from_millis(deadline.as_millis().min(last))
}
