//! What several test files share: an actuator that records what it is
//! asked to do, and a one-container pod.
#![allow(dead_code)] // each test file uses its own part

use std::sync::{Arc, Mutex};

use grace_core::{Action, Name, Record};
use grace_std::runtime::Actuator;
use grace_std::store::{StoredContainer, StoredObject};

/// Records the actions it is asked to carry out, with the object's name.
#[derive(Clone, Default)]
pub struct Recorder(Arc<Mutex<Vec<(String, Action)>>>);

impl Actuator for Recorder {
    fn perform(&mut self, object: &str, _: &StoredObject, action: &Action) -> Result<(), String> {
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

/// A pod with uid `uid` on node-a, with one container `app` (with a
/// pre-stop hook of `sleep 100` if `pre_stop`).
pub fn pod(uid: &str, pre_stop: bool) -> StoredObject {
    let mut object = StoredObject::new(Record::new(Name::try_from(uid).expect("short")));
    object.node = Some("node-a".into());
    object.containers = vec![StoredContainer {
        name: "app".into(),
        pre_stop: pre_stop.then(|| "sleep 100".into()),
        ..StoredContainer::default()
    }];
    object
}
