//! The tests' actuators, in one place: one that records what it is asked
//! to do, one that also plays the world and reports back what happened
//! there as a custom actuator would, and one that runs a test's own code
//! at each action.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

use grace_core::{Action, Duration};
use grace_std::clock::ManualClock;
use grace_std::runtime::{ActionError, Actuator, WorldEvent};
use grace_std::store::StoredObject;

/// Records the actions it is asked to carry out, with the object's name.
#[derive(Clone, Default)]
pub struct Recorder(Arc<Mutex<Vec<(String, Action)>>>);

impl Actuator for Recorder {
    fn perform(
        &mut self,
        object: &str,
        _: &StoredObject,
        action: &Action,
    ) -> Result<(), ActionError> {
        self.0
            .lock()
            .expect("not poisoned")
            .push((object.to_owned(), *action));
        Ok(())
    }
}

impl Recorder {
    /// What was recorded since the last take, with the objects' names.
    pub fn take(&self) -> Vec<(String, Action)> {
        std::mem::take(&mut *self.0.lock().expect("not poisoned"))
    }

    /// What was recorded since the last take, the actions alone.
    pub fn take_actions(&self) -> Vec<Action> {
        self.take().into_iter().map(|(_, a)| a).collect()
    }
}

/// A recorder whose world answers on a manual clock, reported back as
/// [`WorldEvent`]s on a channel (what a custom actuator watching its own
/// world does): a pre-stop hook runs for `hook_runs` of the clock and
/// returns; a stop signal takes `stop_takes` of the clock to go out; with
/// `exit_on_stop` the process exits with that code on its stop signal.
pub struct WorldActuator {
    /// What was asked, in order.
    pub recorder: Recorder,
    clock: Arc<ManualClock>,
    events: Sender<WorldEvent>,
    /// How long each pre-stop hook runs before it returns; `None`: hooks
    /// never return on their own.
    pub hook_runs: Option<Duration>,
    /// How long a stop signal takes to go out.
    pub stop_takes: Duration,
    /// The exit code of a process on its stop signal; `None`: it ignores it.
    pub exit_on_stop: Option<i32>,
}

impl WorldActuator {
    /// An actuator on `clock` whose hooks never return and whose processes
    /// ignore their stop signal, and the channel its reports arrive on.
    pub fn new(clock: Arc<ManualClock>) -> (WorldActuator, Receiver<WorldEvent>) {
        let (events, reports) = mpsc::channel();
        let actuator = WorldActuator {
            recorder: Recorder::default(),
            clock,
            events,
            hook_runs: None,
            stop_takes: Duration::ZERO,
            exit_on_stop: None,
        };
        (actuator, reports)
    }

    fn report(&self, action: &Action, event: WorldEvent) -> Result<(), ActionError> {
        self.events
            .send(event)
            .map_err(|e| ActionError::new(action, e))
    }
}

impl Actuator for WorldActuator {
    fn perform(
        &mut self,
        object: &str,
        stored: &StoredObject,
        action: &Action,
    ) -> Result<(), ActionError> {
        match *action {
            Action::SendStopSignal { container } => {
                self.clock.advance(self.stop_takes);
                self.recorder.perform(object, stored, action)?;
                if let Some(code) = self.exit_on_stop {
                    let exited = WorldEvent::exited(object, container, Some(code));
                    self.report(action, exited)?;
                }
            }
            Action::RunPreStop { container, .. } => {
                self.recorder.perform(object, stored, action)?;
                if let Some(runs) = self.hook_runs {
                    self.clock.advance(runs);
                    let returned = WorldEvent::pre_stop_finished(object, container);
                    self.report(action, returned)?;
                }
            }
            _ => self.recorder.perform(object, stored, action)?,
        }
        Ok(())
    }
}

/// An actuator that runs `f` at each action, to look at the world as the
/// action meets it (the store, the clock) or to fail.
pub struct Probe<F>(pub F);

impl<F> Actuator for Probe<F>
where
    F: FnMut(&str, &StoredObject, &Action) -> Result<(), ActionError> + Send,
{
    fn perform(
        &mut self,
        object: &str,
        stored: &StoredObject,
        action: &Action,
    ) -> Result<(), ActionError> {
        (self.0)(object, stored, action)
    }
}
