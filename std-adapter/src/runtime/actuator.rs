//! The runtime's two ways to the world: an [`Actuator`] carries out what
//! the machine decides, and [`WorldEvent`]s report back what then happened
//! there (a pre-stop hook returned, a container's processes exited).

use std::error::Error;
use std::fmt;
use std::sync::Arc;

use grace_core::{Action, ContainerIndex, Input, Instant, Timestamp};

use super::{Runtime, RuntimeError};
use crate::clock::Clock;
use crate::store::{Store, StoredObject};

/// Carries out what the machine decides. The runtime calls it only after
/// the decision is durable.
///
/// Contract:
/// - Every method MUST be idempotent: after a crash the runtime repeats
///   the actions that were owed when it stopped, which may have been done.
/// - It MUST NOT block for long: a pre-stop hook is *started* here. What
///   happens afterwards (the hook returns, the process exits) is reported
///   as a [`WorldEvent`] to [`Runtime::handle_world_event`], typically from
///   a thread of the actuator's own through a channel the program's loop
///   reads (see [`WorldEvent`]).
/// - A failure is an [`ActionError`]: it is reported as a
///   [`Change::ActionFailed`](super::Change::ActionFailed) and the action is
///   not retried by the runtime (the next input or restart may owe it
///   again).
pub trait Actuator: Send {
    /// Performs `action` for `object` (`stored` holds its containers'
    /// commands). `Action::Remove` is the runtime's own (a store delete)
    /// and is never passed here.
    fn perform(
        &mut self,
        object: &str,
        stored: &StoredObject,
        action: &Action,
    ) -> Result<(), ActionError>;

    /// Told of each event given to [`Runtime::handle_world_event`] before
    /// the runtime takes it, so that the actions it owes next meet the
    /// world as it is (a hook that returned is not cut off). Returns the
    /// events the runtime takes now, in order: by default the event
    /// itself. An actuator may hold one back until its world settles and
    /// give it with a later one — [`ProcessActuator`](crate::process::ProcessActuator)
    /// holds a container's exit while its pre-stop hook still runs, since
    /// a stopped container may end the object's deletion.
    fn world_event(&mut self, event: WorldEvent) -> Vec<WorldEvent> {
        vec![event]
    }

    /// Told of each event once the runtime has taken it (its input is
    /// durable), to forget what the event ended: the order keeps a crash in
    /// between from losing track of a workload. Does nothing unless
    /// implemented.
    fn world_event_taken(&mut self, event: &WorldEvent) {
        let _ = event;
    }

    /// Told what a container's workload still owes, so that it can be
    /// kept where it outlives the runtime (the process actuator keeps it in
    /// its workload table): after its stop signal went out
    /// (`stop_signal_sent` and the SIGKILL deadline), and before its
    /// object's record is removed while it still stops (a force delete:
    /// the SIGKILL deadline alone). Instants are the runtime clock's.
    /// Does nothing unless implemented.
    fn kill_owed(&mut self, object: &str, container: usize, owed: OwedKill) {
        let _ = (object, container, owed);
    }

    /// Asked before a container's stop signal is sent: whether an earlier
    /// process already sent it (it crashed before the store said so), and
    /// when (the runtime clock's instant, as given to
    /// [`kill_owed`](Self::kill_owed)). If so, the stop signal is not sent
    /// again and the 2 s before SIGKILL count from then (D6). `None`
    /// unless implemented.
    fn stop_signal_sent_before(&mut self, object: &str, container: usize) -> Option<Instant> {
        let _ = (object, container);
        None
    }
}

/// What a container's workload still owes, told to the actuator
/// ([`Actuator::kill_owed`]); `None` leaves what was told before as it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OwedKill {
    /// When its stop signal really went out.
    pub stop_signal_sent: Option<Instant>,
    /// When SIGKILL is due.
    pub sigkill_at: Option<Instant>,
}

/// An action an [`Actuator`] could not carry out, and why. Cheap to clone
/// (the underlying error is shared); two are equal when their actions and
/// messages are.
///
/// ```
/// use grace_core::Action;
/// use grace_std::runtime::ActionError;
///
/// let error = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
/// let failed = ActionError::new(&Action::SendKill { container: 0 }, error);
/// assert_eq!(failed.action(), Action::SendKill { container: 0 });
/// assert_eq!(failed.to_string(), "container 0: SIGKILL: permission denied");
/// // The message says the cause; it is `error()`, not `source()`.
/// assert!(std::error::Error::source(&failed).is_none());
/// assert!(failed.error().downcast_ref::<std::io::Error>().is_some());
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ActionError {
    action: Action,
    error: Arc<dyn Error + Send + Sync>,
}

impl ActionError {
    /// `action` failed with `error`: any error, or a message (a `&str` or
    /// `String` becomes one).
    pub fn new(action: &Action, error: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        let error: Box<dyn Error + Send + Sync> = error.into();
        ActionError {
            action: *action,
            error: Arc::from(error),
        }
    }

    /// The action that could not be carried out.
    pub fn action(&self) -> Action {
        self.action
    }

    /// Why, in the underlying error's words (without the action).
    pub fn reason(&self) -> String {
        self.error.to_string()
    }

    /// The underlying error, to inspect or downcast. The message already
    /// says it, so it is not [`source`](Error::source) too.
    pub fn error(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.error
    }
}

impl fmt::Display for ActionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.action, self.error)
    }
}

// The message includes the underlying error, so there is no `source()`: a
// chain printed link by link would say it twice. It is `error()`.
impl Error for ActionError {}

impl PartialEq for ActionError {
    fn eq(&self, other: &Self) -> bool {
        self.action == other.action && self.reason() == other.reason()
    }
}

/// What happened in the world after an action, reported back to the
/// runtime with [`Runtime::handle_world_event`] (which makes it durable
/// before acting on it, as every input).
///
/// An actuator whose world reports asynchronously (a hook that runs for a
/// while, a process that exits one day) hands these to the program's loop,
/// usually through a channel:
///
/// ```
/// use std::sync::mpsc;
/// use grace_core::{Action, DeleteOptions, Input, Record, Stage};
/// use grace_std::clock::ManualClock;
/// use grace_std::runtime::{ActionError, Actuator, Runtime, WorldEvent};
/// use grace_std::store::{MemoryStore, StoredContainer, StoredObject};
///
/// /// Pre-stop hooks that return at once; the loop feeds what they did
/// /// back to the runtime.
/// struct Hooks(mpsc::Sender<WorldEvent>);
///
/// impl Actuator for Hooks {
///     fn perform(&mut self, object: &str, _: &StoredObject, action: &Action) -> Result<(), ActionError> {
///         if let Action::RunPreStop { container, .. } = *action {
///             let returned = WorldEvent::pre_stop_finished(object, container);
///             self.0.send(returned).map_err(|e| ActionError::new(action, e))?;
///         }
///         Ok(())
///     }
/// }
///
/// let (world, events) = mpsc::channel();
/// let clock = ManualClock::at_unix_millis(1_700_000_000_000);
/// let mut runtime = Runtime::builder(MemoryStore::new(), clock, Hooks(world)).open()?;
/// let mut web = StoredObject::on_node(Record::builder("uid-web-0").build()?, "node-a");
/// let mut app = StoredContainer::new("app", ["sleep", "1000"]);
/// app.pre_stop = Some("sleep 5".into());
/// web.containers.push(app);
/// runtime.create("web-0", web)?;
/// runtime.handle("web-0", Input::Delete(DeleteOptions::with_grace(30)))?;
/// runtime.handle("web-0", Input::AgentSync)?; // the hook starts, and returns
///
/// // The program's loop (a real one waits with `recv_timeout` until
/// // `poll_timeout`, then calls `handle_timeouts`).
/// for event in events.try_iter() {
///     runtime.handle_world_event(event)?;
/// }
/// let pod = runtime.lifecycle("web-0").ok_or("tracked")?;
/// assert!(matches!(pod.containers()[0].stage(), Stage::Stopping { .. }));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorldEvent {
    /// The object it is about.
    pub object: String,
    /// What happened, as the core's input on the object: usually a
    /// pre-stop hook that returned ([`Input::PreStopFinished`]: on its own,
    /// not cut off; the stop signal goes now rather than when the hook's
    /// budget is spent, and the hook's time is charged in whole seconds,
    /// [R60], [R61]) or a container's process that exited with nothing of
    /// it left ([`Input::ContainerExited`]: the container is stopped and
    /// gets no SIGKILL, [R63]). Any input is taken, as
    /// [`Runtime::handle`] takes it.
    ///
    /// [R60]: grace_core::rules#r60
    /// [R61]: grace_core::rules#r61
    /// [R63]: grace_core::rules#r63
    pub input: Input,
    /// For an exit, its status as a shell reports it: the exit code, or
    /// 128 + the signal that ended it; `None` if it could not be read (and
    /// for any other input). Written as the container's status
    /// ([`ContainerStatus::exited`](crate::store::ContainerStatus::exited))
    /// before the input is taken.
    pub exit_code: Option<i32>,
    /// For an exit, when it happened, if the world knows better than the
    /// time the runtime takes it: an exit that came while no agent ran,
    /// read after a restart from what the workload's waiter wrote then.
    /// `None`: the exit is taken as it happens (the status's `finishedAt`
    /// is the runtime's clock).
    pub finished_at: Option<Timestamp>,
}

impl WorldEvent {
    /// `input` on `object`, as the world reports it.
    pub fn new(object: impl Into<String>, input: Input) -> Self {
        WorldEvent {
            object: object.into(),
            input,
            exit_code: None,
            finished_at: None,
        }
    }

    /// This event, saying that the exit happened at `at` (see
    /// [`finished_at`](Self::finished_at)).
    #[must_use]
    pub fn with_finished_at(self, at: Timestamp) -> Self {
        WorldEvent {
            finished_at: Some(at),
            ..self
        }
    }

    /// The pre-stop hook of `object`'s container `container` returned.
    pub fn pre_stop_finished(
        object: impl Into<String>,
        container: impl Into<ContainerIndex>,
    ) -> Self {
        WorldEvent::new(object, Input::pre_stop_finished(container))
    }

    /// The process of `object`'s container `container` exited with `code`
    /// (see [`exit_code`](Self::exit_code)).
    pub fn exited(
        object: impl Into<String>,
        container: impl Into<ContainerIndex>,
        code: Option<i32>,
    ) -> Self {
        WorldEvent {
            exit_code: code,
            ..WorldEvent::new(object, Input::container_exited(container))
        }
    }

    /// The object the event is about.
    pub fn object(&self) -> &str {
        &self.object
    }

    /// The container an exit is about, and its code; `None` for an event
    /// that is not an exit.
    pub fn exit(&self) -> Option<(usize, Option<i32>)> {
        match self.input {
            Input::ContainerExited(c) => Some((c.get(), self.exit_code)),
            _ => None,
        }
    }
}

impl<S: Store, C: Clock, A: Actuator> Runtime<S, C, A> {
    /// Takes what happened in the world, as an input: the actuator hears it
    /// first ([`Actuator::world_event`], which may hold it back); each
    /// event it gives back is then its input on its object, as
    /// [`handle`](Self::handle) takes it, after an exit's status
    /// ([`ContainerStatus::exited`](crate::store::ContainerStatus::exited)).
    /// Each is durable before the actions it owes are carried out, and before
    /// [`Actuator::world_event_taken`].
    ///
    /// An event about an object the runtime no longer tracks is no error:
    /// events race with removals (a force delete removes the record while
    /// its processes still stop; a crash between the record's removal and
    /// the actuator's own bookkeeping), and such an event has nothing left
    /// to tell.
    pub fn handle_world_event(&mut self, event: WorldEvent) -> Result<(), RuntimeError> {
        self.handle_world_events([event])
    }

    /// [`handle_world_event`](Self::handle_world_event) for many events,
    /// with one commit per [`Batch`](crate::runtime::Batch) of them rather than two
    /// or three per event: thousands of workloads stopping together are
    /// reported in a few commits. Every event is taken even if one before
    /// it failed (a held exit released with a hook's end is the last word
    /// on it); the first failure is returned once the rest are done.
    pub fn handle_world_events(
        &mut self,
        events: impl IntoIterator<Item = WorldEvent>,
    ) -> Result<(), RuntimeError> {
        let mut events = events.into_iter().peekable();
        let mut first_error = None;
        while events.peek().is_some() {
            let mut batch = self.open_batch();
            while let Some(event) = events.next_if(|e| batch.has_room_for(e.object())) {
                if let Err(e) = batch.handle_world_event(event) {
                    first_error.get_or_insert(e);
                }
            }
            if let Err(e) = batch.commit() {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
