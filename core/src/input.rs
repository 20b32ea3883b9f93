//! The one input type of the state machine ([`Input`]) and the one answer
//! to it ([`Reply`]).
//!
//! Every layer takes the same enum: [`Lifecycle::handle`] for one object,
//! [`Table::handle`](crate::Table::handle) for one object of a table, the
//! embassy driver's channel, and grace-std's runtime. Adding an input is
//! one variant here and one arm in `Lifecycle::handle`.

use crate::kill::ContainerIndex;
#[cfg(doc)]
use crate::lifecycle::{Action, Lifecycle};
use crate::lifecycle::{DeleteResponse, Handled, UnknownContainer, UpdateOutcome};
use crate::options::DeleteOptions;
use crate::registry::{DeleteError, FinalizerChange, UpdateError};

/// One input to a lifecycle: a request at the API level, an observation at
/// the agent's level, or the time having come. The time itself is not in
/// it: it is [`Lifecycle::handle`]'s `now`.
///
/// A lifecycle's record as another API server stored it is not an input
/// here but [`Lifecycle::observe_record`]: it carries a whole record of the
/// lifecycle's own capacities, which would make every input that large.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    all(feature = "arbitrary", not(target_os = "none")),
    derive(arbitrary::Arbitrary)
)]
#[non_exhaustive]
pub enum Input {
    /// A delete request ([R1]–[R44]). A dry run decides and reports but
    /// changes nothing; errors change nothing either. Answered by
    /// [`Reply::Delete`].
    ///
    /// [R1]: crate::rules#r1
    /// [R44]: crate::rules#r44
    Delete(DeleteOptions),
    /// An update of the finalizer list ([R45], [R46]). Answered by
    /// [`Reply::Update`].
    ///
    /// [R45]: crate::rules#r45
    /// [R46]: crate::rules#r46
    FinalizerUpdate(FinalizerChange),
    /// The agent observes the record and acts on it: starts the kill once
    /// a deletion is visible ([R57]), applies a shorter grace at once
    /// ([D5]).
    ///
    /// [R57]: crate::rules#r57
    /// [D5]: crate::rules#d5
    AgentSync,
    /// An agent-side kill override such as an eviction ([R52], [R73],
    /// [R74]): it only shortens, and acts at once.
    ///
    /// [R52]: crate::rules#r52
    /// [R73]: crate::rules#r73
    /// [R74]: crate::rules#r74
    Evict {
        /// The eviction's grace, in seconds.
        grace_period_seconds: i64,
    },
    /// A container's pre-stop hook returned.
    PreStopFinished(ContainerIndex),
    /// A container's process exited.
    ContainerExited(ContainerIndex),
    /// A container that had exited was started again ([R92], [R93]): it
    /// runs, so a later delete stops it as any other. Ignored once the pod
    /// is being deleted or evicted ([R94]), or if the container has not
    /// stopped.
    ///
    /// [R92]: crate::rules#r92
    /// [R93]: crate::rules#r93
    /// [R94]: crate::rules#r94
    ContainerStarted(ContainerIndex),
    /// The stop signal of a container really went out at `now` ([R62]):
    /// the agent reports when it carried out [`Action::SendStopSignal`],
    /// which may be later than when it was decided. SIGKILL is then due no
    /// sooner than 2 s after `now`; a later deadline stays as it is.
    ///
    /// [R62]: crate::rules#r62
    StopSignalSent(ContainerIndex),
    /// The agent stops reporting ([R77]–[R80]): the record stays as it is.
    ///
    /// [R77]: crate::rules#r77
    /// [R80]: crate::rules#r80
    NodeLost,
    /// The agent reconnects; a report it owes is sent at once.
    NodeReady,
    /// Proof that the node is gone for good ([D7], like PodGC on a deleted
    /// node, [R82]): running containers count as stopped (no signals), and
    /// the final delete is issued on the agent's behalf.
    ///
    /// [D7]: crate::rules#d7
    /// [R82]: crate::rules#r82
    NodeFenced,
    /// Deadlines that have passed: pre-stop cut-offs (then the stop
    /// signal), sidecar waits, SIGKILL. Early or repeated inputs do
    /// nothing. Answered [`Handled::Applied`] unless the node is fenced:
    /// what came due shows in the actions.
    Timeout,
}

impl Input {
    /// [`Input::PreStopFinished`] for `container`: an [`Action`]'s one-byte
    /// index, a `usize` or a literal ([`ContainerIndex`]).
    pub fn pre_stop_finished(container: impl Into<ContainerIndex>) -> Self {
        Input::PreStopFinished(container.into())
    }

    /// [`Input::ContainerExited`] for `container` (see
    /// [`pre_stop_finished`](Self::pre_stop_finished)).
    pub fn container_exited(container: impl Into<ContainerIndex>) -> Self {
        Input::ContainerExited(container.into())
    }

    /// [`Input::ContainerStarted`] for `container` (see
    /// [`pre_stop_finished`](Self::pre_stop_finished)).
    pub fn container_started(container: impl Into<ContainerIndex>) -> Self {
        Input::ContainerStarted(container.into())
    }

    /// [`Input::StopSignalSent`] for `container` (see
    /// [`pre_stop_finished`](Self::pre_stop_finished)).
    pub fn stop_signal_sent(container: impl Into<ContainerIndex>) -> Self {
        Input::StopSignalSent(container.into())
    }

    /// [`Input::Evict`] with `grace_period_seconds`.
    pub const fn evict(grace_period_seconds: i64) -> Self {
        Input::Evict {
            grace_period_seconds,
        }
    }
}

/// The answer to an [`Input`]: which one depends on the input.
#[must_use = "an input may be refused; the reply says so"]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Reply {
    /// To [`Input::Delete`].
    Delete(Result<DeleteResponse, DeleteError>),
    /// To [`Input::FinalizerUpdate`].
    Update(Result<UpdateOutcome, UpdateError>),
    /// To every other input; only the inputs naming a container can fail,
    /// with [`UnknownContainer`].
    Handled(Result<Handled, UnknownContainer>),
}

impl Reply {
    /// Whether the input changed the object (a dry run or a refusal did
    /// not): what a caller persists.
    pub fn changed(&self) -> bool {
        match self {
            Reply::Delete(Ok(response)) => !response.dry_run,
            Reply::Update(Ok(_)) => true,
            Reply::Handled(Ok(handled)) => *handled == Handled::Applied,
            Reply::Delete(Err(_)) | Reply::Update(Err(_)) | Reply::Handled(Err(_)) => false,
        }
    }

    /// [`changed`](Self::changed) as a [`Handled`]: the whole answer to an
    /// input that cannot fail (a sync, an eviction, the node's inputs, a
    /// timeout).
    pub fn handled(self) -> Handled {
        if self.changed() {
            Handled::Applied
        } else {
            Handled::Ignored
        }
    }

    /// The answer to an input naming a container: its error, or else
    /// [`handled`](Self::handled).
    pub fn container(self) -> Result<Handled, UnknownContainer> {
        match self {
            Reply::Handled(Err(e)) => Err(e),
            other => Ok(other.handled()),
        }
    }

    /// The answer to a delete; `None` for the reply to another input.
    pub fn delete(self) -> Option<Result<DeleteResponse, DeleteError>> {
        match self {
            Reply::Delete(r) => Some(r),
            Reply::Update(_) | Reply::Handled(_) => None,
        }
    }

    /// The answer to a finalizer update; `None` for the reply to another
    /// input.
    pub fn update(self) -> Option<Result<UpdateOutcome, UpdateError>> {
        match self {
            Reply::Update(r) => Some(r),
            Reply::Delete(_) | Reply::Handled(_) => None,
        }
    }

    /// The reply, or its refusal as an [`Error`](crate::Error): for
    /// callers that want a single `?`.
    pub fn result(self) -> Result<Self, crate::Error> {
        match self {
            Reply::Delete(Err(e)) => Err(crate::Error::Delete(e)),
            Reply::Update(Err(e)) => Err(crate::Error::Update(e)),
            Reply::Handled(Err(e)) => Err(e.into()),
            ok => Ok(ok),
        }
    }
}
