//! The garbage collector's turn in the agent: the runtime's step
//! ([`Runtime::collect_garbage`], [`Runtime::collect_all_garbage`]), and
//! the kills of the dependents it deleted on this node started at once,
//! as for any delete the agent sees.

use crate::clock::Clock;
use crate::process::ProcessActuator;
use crate::runtime::{Runtime, RuntimeError};
use crate::store::Store;

/// The garbage collector's step after a change to `name` (a delete), or
/// after removals (`None`). With no owner reference stored, only `name`'s
/// own GC finalizers can be due; otherwise every object is looked at. A
/// node agent's runtime sees its node's objects only, not the dependents
/// elsewhere: there the collector over the whole store does it
/// (`shared_gc`), and this nothing.
pub(crate) fn collect<S: Store, C: Clock>(
    rt: &mut Runtime<S, C, ProcessActuator>,
    node: &str,
    name: Option<&str>,
) -> Result<(), RuntimeError> {
    if !rt.store().shows_every_object() {
        return Ok(());
    }
    if !rt.garbage_pending() {
        if let Some(name) = name {
            let _ = rt.collect_garbage(name)?;
        }
        return Ok(());
    }
    let collected = rt.collect_all_garbage()?;
    for dependent in collected.deleted {
        let here = rt
            .object(&dependent)
            .is_some_and(|o| o.node.as_deref() == Some(node));
        if here {
            let _ = rt.handle(&dependent, grace_core::Input::AgentSync)?;
        }
    }
    Ok(())
}
