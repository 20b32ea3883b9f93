//! When the agent cannot write its own steps: a deadline's (a stop
//! signal, a SIGKILL, a removal) or a process exit's, on a full disk or a
//! store that fails on I/O.
//!
//! Nothing is done that was not written first, so such a step waits: the
//! agent stays up, serves requests (each one fails or succeeds on its own
//! write), and tries its steps again with back-off, from
//! [`FIRST_RETRY`] doubling up to [`LAST_RETRY`]. The process exits whose
//! write failed are kept and offered again, or the containers they report
//! stopped would never be known stopped. The condition is one line in the
//! agent's log when it starts and one when it ends (not one per retry),
//! and is served to `grace describe` ([`crate::api::Request::Status`])
//! while it lasts.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::batched::Served;
use crate::api::{AgentStatus, StoreUnwritable};
use crate::input::Input;
use crate::process::WorldEvent;
use crate::runtime::RuntimeError;
use crate::store::StoreError;

/// The first retry after a failed write of the agent's own.
pub const FIRST_RETRY: Duration = Duration::from_millis(100);

/// The longest wait between two retries.
pub const LAST_RETRY: Duration = Duration::from_secs(5);

/// The agent's status as the connection threads serve it.
pub(crate) type SharedStatus = Arc<Mutex<AgentStatus>>;

/// The runtime thread's record of a failing store (see the module docs).
pub(super) struct Outage {
    /// Set while the agent's own writes fail: since when, and when the
    /// next attempt is due.
    failing: Option<Failing>,
    /// Process exits (and hook returns) not written: offered again.
    events: Vec<WorldEvent>,
    /// What `grace describe` is told.
    shared: SharedStatus,
}

struct Failing {
    since: Instant,
    next: Instant,
    delay: Duration,
    attempts: u32,
}

impl Outage {
    /// No failure yet; the status is published in `shared`.
    pub(super) fn new(shared: SharedStatus) -> Self {
        Outage {
            failing: None,
            events: Vec::new(),
            shared,
        }
    }

    /// Whether the agent's own steps may be tried now: always, unless they
    /// failed and the next retry is not due yet.
    pub(super) fn due(&self) -> bool {
        self.failing
            .as_ref()
            .is_none_or(|f| Instant::now() >= f.next)
    }

    /// How long the runtime thread may wait for input: `wait` (until the
    /// runtime's next deadline), or while the agent's own writes fail,
    /// until the next retry (the deadlines that passed wait for it).
    pub(super) fn wait(&self, wait: Duration) -> Duration {
        match &self.failing {
            Some(f) => f.next.saturating_duration_since(Instant::now()),
            None => wait,
        }
    }

    /// A request's write just went through: the store takes writes again,
    /// so the agent's own steps are retried at once rather than after the
    /// rest of the back-off.
    pub(super) fn retry_now(&mut self) {
        if let Some(f) = &mut self.failing {
            f.next = Instant::now();
        }
    }

    /// Keeps `events` (not written) to be offered again.
    pub(super) fn keep(&mut self, events: Vec<WorldEvent>) {
        self.events.extend(events);
    }

    /// The events kept, taken out to be offered again.
    pub(super) fn take_events(&mut self) -> Vec<WorldEvent> {
        std::mem::take(&mut self.events)
    }

    /// A write of the agent's own failed with `error`: the next attempt
    /// after the back-off; the first failure is logged.
    pub(super) fn failed(&mut self, error: &RuntimeError) {
        let now = Instant::now();
        let failing = self.failing.get_or_insert_with(|| {
            tracing::error!(
                "grace agent: the store fails: the agent cannot write its own steps ({error}); \
                 they wait, retried every {} ms doubling up to {} s",
                FIRST_RETRY.as_millis(),
                LAST_RETRY.as_secs()
            );
            Failing {
                since: now,
                next: now,
                delay: FIRST_RETRY,
                attempts: 0,
            }
        });
        failing.attempts = failing.attempts.saturating_add(1);
        // The delay is at most LAST_RETRY: the clock holds that.
        failing.next = now.checked_add(failing.delay).unwrap_or(now);
        failing.delay = failing.delay.saturating_mul(2).min(LAST_RETRY);
        let since = SystemTime::now()
            .checked_sub(now.saturating_duration_since(failing.since))
            .unwrap_or(SystemTime::now());
        let since_unix_millis = since
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let attempts = failing.attempts;
        self.publish(Some(StoreUnwritable {
            error: error.to_string(),
            since_unix_millis,
            attempts,
        }));
    }

    /// The agent's own steps were written: the outage, if there was one,
    /// is over (logged once). Not while process exits wait to be offered
    /// again.
    pub(super) fn succeeded(&mut self) {
        if !self.events.is_empty() {
            return;
        }
        let Some(failing) = self.failing.take() else {
            return;
        };
        tracing::info!(
            "grace agent: the store takes writes again: the agent writes its own steps again \
             (after {:.1} s, {} failed attempts)",
            failing.since.elapsed().as_secs_f64(),
            failing.attempts
        );
        self.publish(None);
    }

    /// A write of the agent's own failed with `error`: on the store, the
    /// step waits for the next retry (`Ok`); any other error is returned
    /// (the agent stops on it, as on a bug), as is a write refused because
    /// the agent's node was fenced (D7: it takes no further step).
    pub(super) fn store_failed(&mut self, error: RuntimeError) -> Result<(), RuntimeError> {
        match error {
            RuntimeError::Store(StoreError::Fenced { .. }) => {
                tracing::error!("grace agent: {error}");
                Err(error)
            }
            RuntimeError::Store(_) => {
                self.failed(&error);
                Ok(())
            }
            other => Err(other),
        }
    }

    /// Takes what a batch of inputs left ([`Served`]): the process events
    /// not written are kept for the next retry. Returns the input that
    /// ended the batch.
    pub(super) fn served(&mut self, served: Served) -> Result<Option<Input>, RuntimeError> {
        let Served {
            rest,
            failed,
            unwritten,
            wrote,
        } = served;
        self.keep(unwritten);
        if wrote && failed.is_none() {
            self.retry_now();
        }
        if let Some(e) = failed {
            self.store_failed(e)?;
        }
        Ok(rest)
    }

    fn publish(&self, condition: Option<StoreUnwritable>) {
        let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        shared.store_unwritable = condition;
    }
}
