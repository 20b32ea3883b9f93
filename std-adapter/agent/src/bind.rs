//! Binding on a shared store: how the agents of several nodes share the
//! pods that name no node (no `spec.nodeName`).
//!
//! The rule, least loaded first: an agent that sees an unbound pod (a
//! change in the store's watch, or the store's listing when it starts)
//! waits [`STEP`] for each pod already bound to its node, reads the pod
//! again and, if it is still unbound and not being deleted, binds it to
//! its node with a compare-and-swap on the revision it read. The first
//! agent to write wins; the others' writes fail on the revision, and they
//! drop the pod. The binding is in the store before any agent acts on it:
//! the winner starts the pod when its watch shows it bound there. A delete
//! that comes first removes the pod at once (R19), and the binding then
//! finds nothing.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::containers::wants_binding;
use crate::error::AgentError;
use crate::store::{Store, StoreError};

/// How long an agent waits, per pod bound to its node, before it tries to
/// bind an unbound pod.
pub const STEP: Duration = Duration::from_millis(25);

/// Starts the binder of `node` on `store` (whose writes carry the node's
/// fencing token) on a thread of its own; returns the sender that names
/// pods to look at. It first looks at every stored pod, and stops when
/// the sender is dropped.
pub(crate) fn spawn<S: Store + Send + 'static>(
    store: S,
    node: String,
) -> Result<mpsc::Sender<String>, AgentError> {
    let (tx, rx) = mpsc::channel::<String>();
    let binder = move || {
        let mut due: BTreeMap<String, Instant> = BTreeMap::new();
        if let Ok(listing) = store.list() {
            let load = bound_to(&listing.objects, &node);
            for (name, object, _) in &listing.objects {
                if wants_binding(object) {
                    due.insert(name.clone(), after(delay(load)));
                }
            }
        }
        loop {
            let wait = due.values().min().map_or(Duration::from_secs(1), |t| {
                t.saturating_duration_since(Instant::now())
            });
            match rx.recv_timeout(wait) {
                Ok(name) => {
                    if let std::collections::btree_map::Entry::Vacant(entry) = due.entry(name) {
                        let load = store.list().map_or(0, |l| bound_to(&l.objects, &node));
                        entry.insert(after(delay(load)));
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
            let now = Instant::now();
            let ready: Vec<String> = due
                .iter()
                .filter(|(_, t)| **t <= now)
                .map(|(n, _)| n.clone())
                .collect();
            for name in ready {
                due.remove(&name);
                if let Err(e) = bind(&store, &name, &node)
                    && !matches!(e, StoreError::Conflict { .. } | StoreError::NotFound { .. })
                {
                    // The store is away: looked at again later.
                    due.insert(name, after(Duration::from_secs(1)));
                }
            }
        }
    };
    std::thread::Builder::new()
        .name("grace-binder".into())
        .spawn(binder)
        .map_err(|e| AgentError::io("the agent's binder thread", e))?;
    Ok(tx)
}

/// The instant `wait` from now (now, should that overflow).
fn after(wait: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(wait).unwrap_or(now)
}

/// The wait before trying to bind, with `load` pods bound here.
fn delay(load: usize) -> Duration {
    STEP.saturating_mul(u32::try_from(load).unwrap_or(u32::MAX))
}

/// How many of `objects` are bound to `node` and not being deleted.
fn bound_to<R>(objects: &[(String, crate::store::StoredObject, R)], node: &str) -> usize {
    objects
        .iter()
        .filter(|(_, o, _)| {
            o.node.as_deref() == Some(node) && o.record.deletion_timestamp.is_none()
        })
        .count()
}

/// Binds `name` to `node` if it is still unbound: a compare-and-swap on
/// the revision read ([`StoreError::Conflict`] if another agent was
/// first).
fn bind<S: Store>(store: &S, name: &str, node: &str) -> Result<(), StoreError> {
    let Some((mut object, revision)) = store.get(name)? else {
        return Ok(());
    };
    if !wants_binding(&object) {
        return Ok(());
    }
    object.node = Some(node.to_owned());
    object.record.scheduled = true;
    store.update(name, object, revision).map(|_| ())
}
