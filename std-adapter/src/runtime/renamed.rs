//! The runtime's inputs under their old names, kept as deprecated aliases
//! (the core's names, `handle_*`, are the ones to use).

use grace_core::{ContainerIndex, DeleteOptions, FinalizerChange, Handled, UpdateOutcome};

use super::{Actuator, DeleteAnswer, Runtime, RuntimeError};
use crate::clock::Clock;
use crate::store::Store;

impl<S: Store, C: Clock, A: Actuator> Runtime<S, C, A> {
    /// [`handle_delete`](Self::handle_delete)'s old name.
    #[deprecated(note = "renamed handle_delete, as in the core")]
    pub fn delete(
        &mut self,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<DeleteAnswer, RuntimeError> {
        self.handle_delete(name, options)
    }

    /// [`handle_finalizer_update`](Self::handle_finalizer_update)'s old name.
    #[deprecated(note = "renamed handle_finalizer_update, as in the core")]
    pub fn update_finalizers(
        &mut self,
        name: &str,
        change: &FinalizerChange,
    ) -> Result<UpdateOutcome, RuntimeError> {
        self.handle_finalizer_update(name, change)
    }

    /// [`handle_agent_sync`](Self::handle_agent_sync)'s old name.
    #[deprecated(note = "renamed handle_agent_sync, as in the core")]
    pub fn agent_sync(&mut self, name: &str) -> Result<Handled, RuntimeError> {
        self.handle_agent_sync(name)
    }

    /// [`handle_evict`](Self::handle_evict)'s old name.
    #[deprecated(note = "renamed handle_evict, as in the core")]
    pub fn evict(
        &mut self,
        name: &str,
        grace_period_seconds: i64,
    ) -> Result<Handled, RuntimeError> {
        self.handle_evict(name, grace_period_seconds)
    }

    /// [`handle_pre_stop_finished`](Self::handle_pre_stop_finished)'s old name.
    #[deprecated(note = "renamed handle_pre_stop_finished, as in the core")]
    pub fn pre_stop_finished(
        &mut self,
        name: &str,
        container: impl Into<ContainerIndex>,
    ) -> Result<Handled, RuntimeError> {
        self.handle_pre_stop_finished(name, container)
    }

    /// [`handle_container_exited`](Self::handle_container_exited)'s old name.
    #[deprecated(note = "renamed handle_container_exited, as in the core")]
    pub fn container_exited(
        &mut self,
        name: &str,
        container: impl Into<ContainerIndex>,
    ) -> Result<Handled, RuntimeError> {
        self.handle_container_exited(name, container)
    }
}
