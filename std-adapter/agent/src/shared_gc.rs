//! The garbage collector on a shared store: each node agent runs
//! [`grace_std::api_server::collect_all_garbage`] over the whole store
//! when its watch shows a removal or an object marked for deletion that
//! holds a GC finalizer, so that dependents go with their owner whichever
//! node either runs on. Several agents may collect at once: every step is
//! conditional (see there).

use std::sync::mpsc;
use std::time::Duration;

use grace_core::{FINALIZER_FOREGROUND, FINALIZER_ORPHAN};

use crate::clock::{Clock, SystemClock};
use crate::error::AgentError;
use crate::store::{EventKind, Store, StoredObject};

/// Whether a change calls for a collection: a removal (an owner gone, or a
/// dependent a foreground owner waited for), or an object marked for
/// deletion that holds a GC finalizer.
pub(crate) fn calls_for_collection(kind: EventKind, object: &StoredObject) -> bool {
    kind == EventKind::Deleted
        || (object.record.deletion_timestamp.is_some()
            && object
                .record
                .finalizers
                .iter()
                .any(|f| f.as_str() == FINALIZER_ORPHAN || f.as_str() == FINALIZER_FOREGROUND))
}

/// Starts the collector on `store` (whose writes carry the node's fencing
/// token) on a thread of its own; returns the sender that asks for a
/// collection. Requests that wait together make one collection; one that
/// fails is tried again a second later. It stops when the sender is
/// dropped.
pub(crate) fn spawn<S: Store + Send + 'static>(store: S) -> Result<mpsc::Sender<()>, AgentError> {
    let (tx, rx) = mpsc::channel::<()>();
    let collector = move || {
        let clock = SystemClock::new();
        let mut again = false;
        loop {
            let asked = if again {
                rx.recv_timeout(Duration::from_secs(1))
                    .map_err(|e| matches!(e, mpsc::RecvTimeoutError::Disconnected))
            } else {
                rx.recv().map_err(|_| true)
            };
            if asked == Err(true) {
                return;
            }
            while rx.try_recv().is_ok() {}
            again = grace_std::api_server::collect_all_garbage(&store, clock.now()).is_err();
        }
    };
    std::thread::Builder::new()
        .name("grace-collector".into())
        .spawn(collector)
        .map_err(|e| AgentError::io("the agent's collector thread", e))?;
    Ok(tx)
}
