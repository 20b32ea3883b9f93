//! A watch's view of an [`EtcdStore`](super::EtcdStore): the change log
//! read from etcd, then an etcd watch of the log keys once caught up.

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{EventType, GetOptions, Txn, TxnOp, WatchFilterType, WatchOptions, WatchStream};

use super::keys::{self, decode_counter};
use super::{Inner, gets, header_revision};
use crate::store::{Event, Revision, StoreError, WatchSource};

/// At most this many events are read from the log per request.
const READ_CHUNK: i64 = 256;

/// How long a watch waits before asking an unreachable server again.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// The [`WatchSource`] of an etcd store.
///
/// Reads are by the store's revisions, never by etcd's: after anything
/// goes wrong with the etcd watch (the connection dropped, the watch was
/// cancelled, its start was compacted, an event is missing), the next read
/// goes back to the log and resumes at the revision after the last one
/// returned. The etcd watch only saves the log reads while caught up.
pub(super) struct EtcdFeed {
    inner: Arc<Inner>,
    live: Option<Live>,
}

/// An etcd watch of the log, and the store revision it delivers next.
struct Live {
    stream: WatchStream,
    next: u64,
}

/// What one wait on the etcd watch gave.
enum Waited {
    /// Changes (maybe none: the watch was created, or only log entries
    /// were trimmed).
    Events(Vec<Event>),
    /// Nothing within the time.
    Nothing,
    /// The watch ended or failed: read the log again.
    Broken,
}

/// What one read of the log gave.
enum CaughtUp {
    /// Changes after the revision asked for.
    Events(Vec<Event>),
    /// None yet: every later change has an etcd revision after this one.
    Idle(i64),
}

impl EtcdFeed {
    pub(super) fn new(inner: Arc<Inner>) -> Self {
        EtcdFeed { inner, live: None }
    }

    /// The logged changes after `after` (at most [`READ_CHUNK`]), with the
    /// compaction mark read in the same transaction.
    fn catch_up(&self, after: Revision) -> Result<CaughtUp, StoreError> {
        let keys = &self.inner.keys;
        let from = after.get().saturating_add(1);
        let range = GetOptions::new()
            .with_range(keys::prefix_end(&keys.logs()))
            .with_limit(READ_CHUNK);
        let txn = Txn::new().and_then(vec![
            TxnOp::get(keys.compacted(), None),
            TxnOp::get(keys.log(from), Some(range)),
        ]);
        let response = self.inner.txn("watch", txn)?;
        let mut found = gets(&response).into_iter();
        let compacted = found.next().and_then(|g| g.kvs.into_iter().next());
        let compacted = Revision(decode_counter(
            &keys.compacted(),
            compacted.as_ref().map(|kv| kv.value()),
        )?);
        if after < compacted {
            return Err(StoreError::Compacted {
                requested: after,
                compacted,
            });
        }
        let log = found.next().map(|g| g.kvs).unwrap_or_default();
        if log.is_empty() {
            return Ok(CaughtUp::Idle(header_revision(&response)));
        }
        log.iter()
            .map(|kv| keys::decode_event(kv.key(), kv.value()))
            .collect::<Result<Vec<_>, _>>()
            .map(CaughtUp::Events)
    }

    /// Starts an etcd watch of the log's new entries from etcd revision
    /// `from`.
    fn open(&self, from: i64) -> Result<WatchStream, StoreError> {
        let mut client = self.inner.client.watch_client();
        let logs = self.inner.keys.logs();
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(from)
            // Trimming the log deletes entries: not changes of the store.
            .with_filters([WatchFilterType::NoDelete]);
        self.inner.call(
            "watch",
            async move { client.watch(logs, Some(options)).await },
        )
    }

    /// Waits up to `timeout` for the etcd watch's next message.
    fn wait(&mut self, timeout: Duration) -> Waited {
        let Some(live) = self.live.as_mut() else {
            return Waited::Broken;
        };
        let message = self
            .inner
            .runtime()
            .block_on(async { tokio::time::timeout(timeout, live.stream.message()).await });
        let response = match message {
            Err(_elapsed) => return Waited::Nothing,
            Ok(Ok(Some(response))) => response,
            Ok(Ok(None) | Err(_)) => return Waited::Broken,
        };
        if response.canceled() || response.compact_revision() > 0 {
            return Waited::Broken;
        }
        let mut events = Vec::new();
        for event in response.events() {
            if event.event_type() != EventType::Put {
                continue;
            }
            let Some(kv) = event.kv() else {
                continue;
            };
            match keys::decode_event(kv.key(), kv.value()) {
                Ok(event) => events.push(event),
                // Read again from the log, which reports it properly.
                Err(_) => return Waited::Broken,
            }
        }
        Waited::Events(events)
    }

    /// Drops the etcd watch, within the runtime its stream belongs to.
    fn close(&mut self) {
        if let Some(live) = self.live.take() {
            let _guard = self.inner.runtime().enter();
            drop(live);
        }
    }
}

impl Drop for EtcdFeed {
    fn drop(&mut self) {
        self.close();
    }
}

impl WatchSource for EtcdFeed {
    fn read(&mut self, after: Revision, timeout: Duration) -> Result<Vec<Event>, StoreError> {
        let deadline = Instant::now().checked_add(timeout);
        let left = || match deadline {
            Some(d) => d.saturating_duration_since(Instant::now()),
            None => timeout,
        };
        loop {
            let positioned = self
                .live
                .as_ref()
                .is_some_and(|live| live.next == after.get().saturating_add(1));
            if !positioned {
                self.close();
                let opened = self.catch_up(after).and_then(|caught| match caught {
                    CaughtUp::Events(events) => Ok(Err(events)),
                    CaughtUp::Idle(at) => self.open(at.saturating_add(1)).map(Ok),
                });
                match opened {
                    Ok(Err(events)) => return Ok(events),
                    Ok(Ok(stream)) => {
                        self.live = Some(Live {
                            stream,
                            next: after.get().saturating_add(1),
                        });
                    }
                    Err(e @ StoreError::Compacted { .. }) => return Err(e),
                    // The server is not reachable (now): ask again until
                    // the time is up.
                    Err(e) => {
                        let left = left();
                        if left.is_zero() {
                            return Err(e);
                        }
                        std::thread::sleep(left.min(RETRY_PAUSE));
                        continue;
                    }
                }
            }
            match self.wait(left()) {
                Waited::Nothing => return Ok(Vec::new()),
                Waited::Broken => self.close(),
                Waited::Events(mut events) => {
                    events.retain(|e| e.revision > after);
                    let contiguous = events
                        .iter()
                        .zip(after.get().saturating_add(1)..)
                        .all(|(e, expected)| e.revision.get() == expected);
                    match (events.last(), self.live.as_mut()) {
                        (Some(last), Some(live)) if contiguous => {
                            live.next = last.revision.get().saturating_add(1);
                            return Ok(events);
                        }
                        // A gap (log entries never written because the
                        // batch outran the retention): the log says what
                        // is left.
                        (Some(_), _) => self.close(),
                        (None, _) if left().is_zero() => return Ok(Vec::new()),
                        (None, _) => {}
                    }
                }
            }
        }
    }
}
