//! A pod's deletion as Kubernetes events: each decision grace took, with
//! its reason and the rule it follows, read from what the store keeps (the
//! record and the agent's persisted kill state). `grace describe` shows
//! them as kubectl's Events table, and the agent's Kubernetes API serves
//! them as `core/v1` Events ([`Event::to_k8s`]), so that `kubectl describe
//! pod` shows them too.
//!
//! They say where the deletion is now and why; the agent's log has every
//! step as it happened. When the store does not keep an event's time (a
//! pre-stop hook's start), [`Event::at`] is `None`, which kubectl shows
//! as `<unknown>`.

use grace_core::{Instant, Kind, Stage, Timestamp};
use k8s_openapi::api::core::v1::{Event as K8sEvent, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use grace_std::clock::{Clock, SystemClock};
use grace_std::runtime::KillRecord;
use grace_std::store::{ContainerStatus, StoredObject};

use crate::meta::rfc3339;

/// One event of a deletion.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Event {
    /// A `Warning` (a workload SIGKILL ended), else `Normal`.
    pub warning: bool,
    /// What happened, one CamelCase word (`DeletionAccepted`,
    /// `StopSignalSent`, …).
    pub reason: &'static str,
    /// When it happened (Unix seconds), when the store tells.
    pub at: Option<f64>,
    /// Who decided: [`FROM_API`] for what the delete request decided,
    /// [`FROM_AGENT`] for the kill.
    pub from: &'static str,
    /// The decision, with its rule.
    pub message: String,
}

/// The source of the events of what the delete request decided.
pub const FROM_API: &str = "grace-api";

/// The source of the events of what the node's agent did.
pub const FROM_AGENT: &str = "grace-agent";

impl Event {
    fn new(reason: &'static str, from: &'static str, at: Option<f64>, message: String) -> Event {
        Event {
            warning: false,
            reason,
            at,
            from,
            message,
        }
    }

    /// This event as Kubernetes serves it: `core/v1` Event `name` in
    /// `namespace`, about the Pod `pod` (uid `uid`), its time in
    /// `firstTimestamp` (left out when unknown: kubectl shows
    /// `<unknown>`) and `lastTimestamp` = `order_at`, the time kubectl
    /// sorts events by (for an event of unknown time, that of the known
    /// one before it, so that the table keeps the decisions' order).
    pub fn to_k8s(
        &self,
        name: String,
        namespace: &str,
        pod: &str,
        uid: &str,
        order_at: Option<f64>,
    ) -> K8sEvent {
        let time = whole_seconds;
        K8sEvent {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(pod.to_owned()),
                namespace: Some(namespace.to_owned()),
                uid: Some(uid.to_owned()),
                ..ObjectReference::default()
            },
            reason: Some(self.reason.to_owned()),
            message: Some(self.message.clone()),
            type_: Some(if self.warning { "Warning" } else { "Normal" }.to_owned()),
            source: Some(EventSource {
                component: Some(self.from.to_owned()),
                host: None,
            }),
            count: Some(1),
            first_timestamp: self.at.and_then(time),
            last_timestamp: order_at.and_then(time),
            reporting_component: Some(self.from.to_owned()),
            ..K8sEvent::default()
        }
    }
}

/// Whole seconds, as a Kubernetes Time.
fn whole_seconds(t: f64) -> Option<Time> {
    crate::time(Timestamp::from_unix_seconds(t.floor() as i64))
}

/// The wall time of `instant` of the agent's monotonic clock, when
/// `record` was written in this boot (the clock's epoch); `None` for the
/// end of the clock, where a deadline past it stopped (D2).
fn wall_of(record: Option<&KillRecord>, instant: Instant) -> Option<f64> {
    if instant == Instant::MAX {
        return None;
    }
    let clock = SystemClock::new();
    let record = record?;
    if !record.epoch.starts_with(&clock.epoch()) {
        return None;
    }
    let now = clock.now();
    let back = now.mono.as_millis() as f64 - instant.as_millis() as f64;
    Some(now.wall.as_unix_millis() as f64 / 1000.0 - back / 1000.0)
}

/// The deletion of `object` as events, in the order its decisions were
/// taken, each with its reason and rule; none for an object not being
/// deleted. The agent's kill state (the instants of its monotonic clock)
/// is read against this machine's clock now.
pub fn deletion_events(object: &StoredObject) -> Vec<Event> {
    let record = object
        .agent
        .as_ref()
        .and_then(|state| KillRecord::decode(state).ok());
    let record = record.as_ref();
    let wall = |instant| wall_of(record, instant);
    let meta = &object.record;
    let mut events = Vec::new();
    let Some(ts) = meta.deletion_timestamp else {
        return events;
    };
    let dgps = meta.deletion_grace_period_seconds.unwrap_or(0);
    // The request's time, unless its timestamp stopped at the latest one
    // (D2): then only absolute times can be told.
    let saturated = ts.as_unix_seconds() >= grace_core::MAX_TIMESTAMP_SECONDS;
    let requested = (!saturated).then(|| ts.as_unix_seconds().saturating_sub(dgps));
    let requested_at = requested.map(|r| r as f64);
    let since = |t: f64| match requested {
        Some(requested) => format!("+{:.1} s", t - requested as f64),
        None => {
            let whole = rfc3339(Timestamp::from_unix_seconds(t.floor() as i64));
            let tenths = ((t - t.floor()) * 10.0) as u8;
            format!("{}.{tenths}Z", whole.trim_end_matches('Z'))
        }
    };
    let why = if object.strategy.kind == Kind::Generic {
        "not a graceful type: no grace (R11); finalizers keep the record (R30, R31)".to_owned()
    } else if !meta.scheduled {
        "grace 0: the pod is not scheduled (no spec.nodeName, R19)".to_owned()
    } else if meta.phase.is_terminal() {
        "grace 0: the pod has finished (phase Succeeded or Failed, R20)".to_owned()
    } else if meta.termination_grace_period_seconds == Some(dgps) {
        format!(
            "grace {dgps} s: the request's grace, or spec.terminationGracePeriodSeconds when it gave none (R18)"
        )
    } else {
        format!(
            "grace {dgps} s: the request's grace (R18), shortened by later requests if any (R15, R16)"
        )
    };
    events.push(Event::new(
        "DeletionAccepted",
        FROM_API,
        requested_at,
        match requested {
            Some(requested) => format!(
                "at {}: deletionTimestamp {} = request + {dgps} s (R24); {why}",
                rfc3339(Timestamp::from_unix_seconds(requested)),
                rfc3339(ts),
            ),
            None => format!(
                "deletionTimestamp {}: request + {dgps} s passes the latest time RFC 3339 writes and stops there (D2); {why}",
                rfc3339(ts),
            ),
        },
    ));
    events.push(Event::new(
        "GenerationBumped",
        FROM_API,
        requested_at,
        format!(
            "generation {}: bumped once by the first delete (R25)",
            meta.generation
        ),
    ));
    if !meta.finalizers.is_empty() {
        let names: Vec<&str> = meta.finalizers.iter().map(|f| f.as_str()).collect();
        events.push(Event::new(
            "HeldByFinalizers",
            FROM_API,
            requested_at,
            format!(
                "[{}]: the record stays until they are removed (R29, R45)",
                names.join(", ")
            ),
        ));
    }
    let Some(record) = record else {
        events.push(Event::new(
            "AgentNotStarted",
            FROM_AGENT,
            None,
            "no kill state: no agent has acted on this object yet".to_owned(),
        ));
        return events;
    };
    let agent = record.lifecycle.agent();
    if !agent.killing {
        let whose = object.node.as_deref().map_or(
            "it is unscheduled: nothing runs, the record goes at once (R19, R29)".to_owned(),
            |n| format!("waiting for the agent of node {n} (its workload is not stopped until it acts, R57, R80)"),
        );
        events.push(Event::new("KillNotStarted", FROM_AGENT, None, whose));
        return events;
    }
    let g = agent.remembered_grace;
    let kill = record.lifecycle.containers();
    // The kill's start is the stop signal of a main container without a
    // pre-stop hook (it goes out at once, R63); with hooks only, the store
    // does not keep it.
    let started = object
        .containers
        .iter()
        .zip(kill)
        .filter(|(c, _)| c.pre_stop.is_none() && !c.sidecar)
        .filter_map(|(_, k)| k.stop_signal_sent_at().and_then(wall))
        .reduce(f64::min);
    events.push(Event::new(
        "KillStarted",
        FROM_AGENT,
        started,
        format!(
            "effective grace {g} s: deletionGracePeriodSeconds {dgps} when set and smaller than any grace already in force (R50, R51), at least 1 s (R53, R54); the budget starts when the agent starts the kill, not at the deletionTimestamp (R57)"
        ),
    ));
    for (i, (c, kill)) in object.containers.iter().zip(kill).enumerate() {
        let name = &c.name;
        let sent = kill.stop_signal_sent_at().and_then(wall);
        // When its process ended, as its status says.
        let ended = match object.status.get(i) {
            Some(ContainerStatus::Terminated {
                finished_at: Some(at),
                ..
            }) => Some(at.as_unix_seconds() as f64),
            _ => None,
        };
        match kill.stage() {
            Stage::Running => events.push(Event::new(
                "NotStopped",
                FROM_AGENT,
                None,
                format!("{name}: not stopped yet"),
            )),
            Stage::PreStop { cutoff } => events.push(Event::new(
                "PreStopRunning",
                FROM_AGENT,
                None,
                format!(
                    "{name}: hook running within the budget of {g} s (R59); the agent stops waiting at {} and sends the stop signal (R60)",
                    wall(cutoff).map_or("its cut-off".to_owned(), since)
                ),
            )),
            Stage::AwaitingTurn { cutoff } => events.push(Event::new(
                "AwaitingTurn",
                FROM_AGENT,
                None,
                format!(
                    "{name}: a sidecar stops after the main containers and the sidecars declared after it (R69), waiting at most until {} (R70)",
                    wall(cutoff).map_or("its cut-off".to_owned(), since)
                ),
            )),
            Stage::Stopping { kill_at } => {
                events.push(Event::new(
                    "StopSignalSent",
                    FROM_AGENT,
                    sent,
                    format!(
                        "{name}: at {} (R63), after the pre-stop hook if any",
                        sent.map_or("?".to_owned(), since)
                    ),
                ));
                if kill_at == Instant::MAX {
                    events.push(Event::new(
                        "KillScheduled",
                        FROM_AGENT,
                        sent,
                        format!(
                            "{name}: no SIGKILL: the {g} s budget passes the end of the agent's clock, where its deadline stops (D2)"
                        ),
                    ));
                    continue;
                }
                // Rounded: the signal's time is when it really went out, a few
                // milliseconds after the budget was decided (R62).
                let budget = kill_at
                    .saturating_duration_since(kill.stop_signal_sent_at().unwrap_or(kill_at))
                    .as_millis()
                    .saturating_add(500)
                    / 1000;
                events.push(Event::new(
                    "KillScheduled",
                    FROM_AGENT,
                    sent,
                    format!(
                        "{name}: SIGKILL due at {} unless it exits: {budget} s after the stop signal = the {g} s budget less the whole seconds the hook took (R61, truncated), and never less than 2 s (R62)",
                        wall(kill_at).map_or("?".to_owned(), since)
                    ),
                ));
            }
            Stage::Killed => {
                let budget = kill.budget_seconds().max(2);
                events.push(Event {
                    warning: true,
                    ..Event::new(
                        "Killed",
                        FROM_AGENT,
                        ended,
                        format!(
                            "{name}: SIGKILL sent {budget} s after the stop signal: it outlived its budget (the grace less the whole seconds the hook took, R61; at least 2 s, R62; R63)"
                        ),
                    )
                });
            }
            Stage::Stopped => events.push(Event::new(
                "Stopped",
                FROM_AGENT,
                ended,
                format!(
                    "{name}: the process has exited{}",
                    if kill.budget_seconds() > 0 {
                        format!(
                            " (SIGKILL was due {} s after the stop signal: the grace less the whole seconds the hook took, R61; at least 2 s, R62)",
                            kill.budget_seconds().max(2)
                        )
                    } else {
                        String::new()
                    }
                ),
            )),
            _ => events.push(Event::new(
                "UnknownStage",
                FROM_AGENT,
                None,
                format!("{name}: in a stage this version does not name"),
            )),
        }
    }
    if agent.reported {
        events.push(Event::new(
            "FinalDelete",
            FROM_AGENT,
            None,
            "the agent confirmed the stop with a grace-0 delete (R75); finalizers, if any, still hold the record".to_owned(),
        ));
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use grace_core::Record;
    use grace_std::store::{StoredContainer, StoredObject};

    fn pod() -> StoredObject {
        let mut web = StoredObject::on_node(
            Record::builder("uid-web")
                .build()
                .unwrap_or_else(|e| panic!("{e}")),
            "node-a",
        );
        web.containers
            .push(StoredContainer::new("app", ["sleep", "1000"]));
        web
    }

    #[test]
    fn an_object_not_being_deleted_has_no_events() {
        assert_eq!(deletion_events(&pod()), Vec::new());
    }

    /// R24: the timestamp is the request's time plus the grace, so the
    /// request's time is told back; no agent has acted yet.
    #[test]
    fn r24_a_deletion_no_agent_has_acted_on_tells_the_request_and_waits() {
        let mut web = pod();
        web.record.deletion_timestamp = Some(Timestamp::from_unix_seconds(1_000_030));
        web.record.deletion_grace_period_seconds = Some(30);
        web.record.generation = 2;
        let events = deletion_events(&web);
        let reasons: Vec<&str> = events.iter().map(|e| e.reason).collect();
        assert_eq!(
            reasons,
            ["DeletionAccepted", "GenerationBumped", "AgentNotStarted"]
        );
        let accepted = &events[0];
        assert_eq!(accepted.at, Some(1_000_000.0));
        assert_eq!(accepted.from, FROM_API);
        assert!(
            accepted.message.starts_with(
                "at 1970-01-12T13:46:40Z: deletionTimestamp 1970-01-12T13:47:10Z = request + 30 s (R24)"
            ),
            "{}",
            accepted.message
        );
        assert_eq!((events[2].from, events[2].at), (FROM_AGENT, None));

        let k8s = accepted.to_k8s(
            "web.grace-0".into(),
            "default",
            "web",
            "uid-web",
            Some(1_000_000.0),
        );
        assert_eq!(k8s.reason.as_deref(), Some("DeletionAccepted"));
        assert_eq!(k8s.type_.as_deref(), Some("Normal"));
        assert_eq!(k8s.involved_object.uid.as_deref(), Some("uid-web"));
        assert_eq!(
            k8s.source.and_then(|s| s.component).as_deref(),
            Some(FROM_API)
        );
        assert_eq!(k8s.first_timestamp, k8s.last_timestamp);
        let unknown = events[2].to_k8s(
            "web.grace-2".into(),
            "default",
            "web",
            "uid-web",
            Some(1_000_000.0),
        );
        assert_eq!(unknown.first_timestamp, None, "kubectl shows <unknown>");
        assert!(unknown.last_timestamp.is_some(), "kept in order");
    }

    /// D2: a timestamp stopped at the latest time tells no request time.
    #[test]
    fn d2_a_saturated_timestamp_tells_no_request_time() {
        let mut web = pod();
        web.record.deletion_timestamp = Some(Timestamp::from_unix_seconds(
            grace_core::MAX_TIMESTAMP_SECONDS,
        ));
        web.record.deletion_grace_period_seconds = Some(i64::MAX);
        let events = deletion_events(&web);
        assert_eq!(events[0].at, None);
        assert!(
            events[0]
                .message
                .starts_with("deletionTimestamp 9999-12-31T23:59:59Z"),
            "{}",
            events[0].message
        );
    }
}
