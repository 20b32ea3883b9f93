//! `?watch=true`: the store's own watch (the one `grace get -w` reads
//! through the socket), as Kubernetes watch events, one JSON object and a
//! newline each.
//!
//! - `resourceVersion` empty or `0`: an `ADDED` for every pod the
//!   selectors pick, then the changes after that listing; `N`: the
//!   changes after revision `N`. A revision the store no longer keeps is
//!   an in-stream `ERROR` with a 410 `Expired` Status (an HTTP 410 would
//!   make kube-rs retry the same revision forever).
//! - A pod that comes to match the selectors is `ADDED`, one that stops
//!   matching `DELETED`; a removed pod's `DELETED` carries its last state
//!   at the revision of its removal.
//! - `allowWatchBookmarks=true`: a `BOOKMARK` with the store's revision
//!   every [`BOOKMARK_EVERY`] without events.
//! - The stream ends at `timeoutSeconds`, or when the client hangs up
//!   (seen within [`crate::HANGUP_CHECK`]).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use tokio::sync::mpsc::Sender;

use super::namespace::Scope;
use super::pods::{Query, pod};
use super::selector::Selector;
use super::status::Status;
use super::{Context, table};
use crate::api::{Item, items};
use crate::store::{EventKind, Revision, Store, StoreError};

/// How often a quiet watch that allows bookmarks gets one.
pub(crate) const BOOKMARK_EVERY: Duration = Duration::from_secs(15);

/// How a watch was asked for.
pub(crate) struct WatchRequest {
    scope: Scope,
    selector: Selector,
    from: Option<u64>,
    bookmarks: bool,
    until: Option<Instant>,
    table: bool,
}

impl WatchRequest {
    /// Reads the query of a watch of `scope`'s pods; a bad selector or
    /// revision is a 400.
    pub fn parse(query: &Query, accept: &str, scope: Scope) -> Result<WatchRequest, Status> {
        let selector = Selector::parse(
            query.get("labelSelector").map(String::as_str),
            query.get("fieldSelector").map(String::as_str),
        )
        .map_err(Status::bad_request)?;
        let from = match query.get("resourceVersion").map(String::as_str) {
            None | Some("" | "0") => None,
            Some(rv) => Some(rv.parse::<u64>().map_err(|_| {
                Status::bad_request(format!("resourceVersion: `{rv}` is not a revision"))
            })?),
        };
        let until = query
            .get("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .and_then(|t| Instant::now().checked_add(Duration::from_secs(t)));
        Ok(WatchRequest {
            scope,
            selector,
            from,
            bookmarks: query.get("allowWatchBookmarks").map(String::as_str) == Some("true"),
            until,
            table: table::wanted(accept),
        })
    }
}

impl WatchRequest {
    /// Whether the watch covers `item` as it is now.
    fn picks(&self, item: &Item) -> bool {
        self.scope.holds(&item.name) && self.selector.matches(&pod(item))
    }
}

/// One event line.
fn line(kind: &str, object: Value) -> Bytes {
    let mut text = json!({"type": kind, "object": object}).to_string();
    text.push('\n');
    Bytes::from(text)
}

/// Streams the watch into `out` until it ends (on this thread: it
/// blocks).
pub(crate) fn run(ctx: &Context, request: &WatchRequest, out: &Sender<Bytes>) {
    let object = |pod: &Pod, revision: u64| -> Value {
        if request.table {
            table::table(std::slice::from_ref(pod), revision, false)
        } else {
            json!(pod)
        }
    };
    let send = |bytes: Bytes| out.blocking_send(bytes).is_ok();
    let mut known = BTreeSet::new();
    let from = match request.from {
        Some(from) => {
            // Which pods the client knows: those that match now.
            if let Ok((_, all)) = items(&*ctx.store, None) {
                known.extend(
                    all.iter()
                        .filter(|i| request.picks(i))
                        .map(|i| i.name.clone()),
                );
            }
            from
        }
        None => {
            let (revision, all) = match items(&*ctx.store, None) {
                Ok(found) => found,
                Err(e) => {
                    let _ = send(line("ERROR", Status::internal(e.to_string()).to_json()));
                    return;
                }
            };
            for item in all.iter().filter(|i| request.scope.holds(&i.name)) {
                let p = pod(item);
                if request.selector.matches(&p) {
                    known.insert(item.name.clone());
                    if !send(line("ADDED", object(&p, revision))) {
                        return;
                    }
                }
            }
            revision
        }
    };
    let mut watch = match ctx.store.watch(Revision(from)) {
        Ok(w) => w,
        Err(e @ StoreError::Compacted { .. }) => {
            let message = format!("too old resource version: {from} ({e})");
            let _ = send(line("ERROR", Status::expired(message).to_json()));
            return;
        }
        Err(e) => {
            let _ = send(line("ERROR", Status::internal(e.to_string()).to_json()));
            return;
        }
    };
    let mut quiet_since = Instant::now();
    loop {
        if request.until.is_some_and(|u| Instant::now() >= u) || out.is_closed() {
            return;
        }
        let event = match watch.next_timeout(crate::HANGUP_CHECK) {
            Ok(Some(event)) => event,
            Ok(None) => {
                if request.bookmarks && quiet_since.elapsed() >= BOOKMARK_EVERY {
                    quiet_since = Instant::now();
                    let revision = ctx.store.revision().map(|r| r.0).unwrap_or(from);
                    let mark = json!({"kind": "Pod", "apiVersion": "v1",
                                      "metadata": {"resourceVersion": revision.to_string()}});
                    if !send(line("BOOKMARK", mark)) {
                        return;
                    }
                }
                continue;
            }
            Err(e) => {
                let status = match e {
                    StoreError::Compacted { .. } => Status::expired(e.to_string()),
                    other => Status::internal(other.to_string()),
                };
                let _ = send(line("ERROR", status.to_json()));
                return;
            }
        };
        // Another namespace's change is no event here (nor a sign of life).
        if !request.scope.holds(&event.name) {
            continue;
        }
        quiet_since = Instant::now();
        let revision = event.revision.0;
        let item = Item {
            name: event.name.clone(),
            revision,
            object: event.object,
        };
        let mut p = pod(&item);
        p.metadata.resource_version = Some(revision.to_string());
        let matches = request.selector.matches(&p);
        let was = known.contains(&event.name);
        let kind = match (event.kind, matches, was) {
            // A watch from a revision may start after the removal: the
            // client listed the pod then, so its last state decides.
            (EventKind::Deleted, matched, was) if matched || was => "DELETED",
            (EventKind::Deleted, ..) => continue,
            (_, true, true) => "MODIFIED",
            (_, true, false) => "ADDED",
            (_, false, true) => "DELETED",
            (_, false, false) => continue,
        };
        if kind == "DELETED" {
            known.remove(&event.name);
        } else {
            known.insert(event.name.clone());
        }
        if !send(line(kind, object(&p, revision))) {
            return;
        }
    }
}
