//! Group commit of the agent's change requests.
//!
//! Requests that are waiting together on the runtime thread are decided
//! one after another on one [`Batch`](crate::runtime::Batch) and made
//! durable by one commit (two store transactions: before and after the
//! actions), then each is answered: its own answer, exactly as if it had
//! been handled alone, once what it wrote is durable. A refused request
//! writes nothing; each request sees the ones before it. A request on an
//! object the batch already changed starts a new batch, so that every
//! precondition is checked against a stored revision.
//!
//! `GRACE_AGENT_GROUP_COMMIT=off` handles each request alone (one commit
//! or two per request): only for measuring what group commit gains.

use std::sync::{Arc, mpsc};
use std::time::Duration as StdDuration;

use grace_core::{FinalizerChange, Name};

use super::{AgentRuntime, Input, RunClock, bound_here, error, invalid, start};
use crate::api::{DeleteReport, Reply, Request};
use crate::process::ProcessActuator;
use crate::runtime::{Batch, RuntimeError};
use crate::store::RedbStore;

/// The environment variable that switches group commit off (`off`).
pub const GROUP_COMMIT_ENV: &str = "GRACE_AGENT_GROUP_COMMIT";

/// How long a batch waits for one more request after the last one came:
/// clients answered by the previous commit send their next request within
/// a few tens of microseconds, and joining this commit saves them a whole
/// commit (milliseconds) of waiting.
const LINGER: StdDuration = StdDuration::from_micros(150);

/// Whether group commit is on (the default) in this process's environment.
pub fn group_commit() -> bool {
    std::env::var(GROUP_COMMIT_ENV).map_or(true, |v| v != "off")
}

type AgentBatch<'a> = Batch<'a, Arc<RedbStore>, RunClock, ProcessActuator>;

/// A request decided on a batch, waiting for the commit.
enum Decided {
    /// The answer, whatever the commit does: the request was refused and
    /// wrote nothing.
    Refused(Reply),
    /// The answer, once the commit succeeds.
    Done(String, Reply),
    /// An object created: answered with its revision once stored, then
    /// started if it is bound to this node.
    Applied { name: String, start: bool },
}

/// Handles `first` and every change request that follows it without a
/// pause, in batches; returns the first input that is not a change
/// request, if one came.
pub(super) fn serve_batches(
    rt: &mut AgentRuntime,
    first: (Request, mpsc::Sender<Reply>),
    inputs: &mpsc::Receiver<Input>,
    node: &str,
) -> Option<Input> {
    let mut next = first;
    loop {
        let mut batch = rt.open_batch();
        let mut waiting = Vec::new();
        let rest = loop {
            let (request, reply) = next;
            if batch.is_full() || name(&request).is_some_and(|n| batch.touches(n)) {
                // For the next batch.
                break Some(Input::Request(request, reply));
            }
            waiting.push((reply, decide(&mut batch, request, node)));
            match following(inputs) {
                Some(Input::Request(request, reply)) => next = (request, reply),
                other => break other,
            }
        };
        let committed = batch.commit();
        answer(rt, waiting, committed.as_ref().err());
        match rest {
            Some(Input::Request(request, reply)) => next = (request, reply),
            other => return other,
        }
    }
}

/// The next input if one is waiting or comes within [`LINGER`].
fn following(inputs: &mpsc::Receiver<Input>) -> Option<Input> {
    match inputs.try_recv() {
        Ok(input) => Some(input),
        Err(_) => inputs.recv_timeout(LINGER).ok(),
    }
}

/// The object a change request is about.
fn name(request: &Request) -> Option<&str> {
    match request {
        Request::Apply { name, .. }
        | Request::Delete { name, .. }
        | Request::RemoveFinalizer { name, .. } => Some(name),
        Request::Get { .. } | Request::Watch => None,
    }
}

/// Decides one request on the batch (as the agent's `handle` does alone).
fn decide(batch: &mut AgentBatch<'_>, request: Request, node: &str) -> Decided {
    match request {
        Request::Apply { name, object } => {
            if let Err(e) = crate::manifest::check_name("metadata.name", &name) {
                return Decided::Refused(invalid(e.to_string()));
            }
            let start = object.node.as_deref() == Some(node);
            match batch.create(&name, *object) {
                Ok(()) => Decided::Applied { name, start },
                Err(e) => Decided::Refused(error(&name, &e)),
            }
        }
        Request::Delete { name, options } => {
            let answer = match batch.delete(&name, &options) {
                Ok(answer) => answer,
                Err(e) => return Decided::Refused(error(&name, &e)),
            };
            // The agent sees its own node's deletions at once.
            if !answer.response.dry_run
                && bound_here(batch.runtime(), &name, node)
                && let Err(e) = batch.agent_sync(&name)
            {
                // The delete stays, as when it is handled alone.
                return Decided::Done(name.clone(), error(&name, &e));
            }
            let reply = Reply::Deleted(DeleteReport {
                outcome: answer.response.outcome,
                record: answer.record,
                dry_run: answer.response.dry_run,
                force: answer.response.force,
            });
            Decided::Done(name, reply)
        }
        Request::RemoveFinalizer { name, finalizer } => {
            let Ok(finalizer) = Name::try_from(finalizer.as_str()) else {
                return Decided::Refused(invalid(format!(
                    "finalizer `{finalizer}`: name too long"
                )));
            };
            match batch.update_finalizers(&name, &FinalizerChange::Remove(finalizer)) {
                Ok(_) => Decided::Done(name, Reply::Updated),
                Err(e) => Decided::Refused(error(&name, &e)),
            }
        }
        Request::Get { .. } | Request::Watch => {
            Decided::Refused(invalid("not a change request".into()))
        }
    }
}

/// Answers every request of a batch, after its commit (`failed`: why the
/// commit failed).
fn answer(
    rt: &mut AgentRuntime,
    waiting: Vec<(mpsc::Sender<Reply>, Decided)>,
    failed: Option<&RuntimeError>,
) {
    for (reply, decided) in waiting {
        let sent = match (decided, failed) {
            (Decided::Refused(refused), _) => refused,
            (Decided::Done(name, _) | Decided::Applied { name, .. }, Some(e)) => error(&name, e),
            (Decided::Done(_, done), None) => done,
            (Decided::Applied { name, start: go }, None) => {
                let revision = rt.object(&name).map_or(0, |o| o.meta.resource_version);
                if go {
                    start(rt, &name);
                }
                Reply::Applied { revision }
            }
        };
        let _ = reply.send(sent);
    }
}
