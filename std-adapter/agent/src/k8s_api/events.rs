//! `GET …/events`: each pod's deletion as `core/v1` Events
//! ([`grace_k8s::deletion_events`], what `grace describe` shows), so that
//! `kubectl describe pod` lists grace's decisions with their rules. Read
//! only: grace keeps no Event objects, it makes them from the store on each
//! request (named `POD.grace-N`, N in the order of the decisions).
//!
//! The `fieldSelector` kubectl sends (`involvedObject.name`, `.namespace`,
//! `.uid`, `.kind`, with `=`, `==` or `!=`) picks them; any other field is
//! a 400, as kube-apiserver answers.

use serde_json::{Value, json};

use super::namespace::Scope;
use super::pods::{Query, pod};
use super::status::Status;
use super::{Answer, Context};
use crate::api::items;

/// The fields of an Event this list selects on.
const FIELDS: [&str; 4] = [
    "involvedObject.name",
    "involvedObject.namespace",
    "involvedObject.uid",
    "involvedObject.kind",
];

/// One `field=value` (or `!=`) of a field selector.
struct Term {
    field: String,
    value: String,
    equal: bool,
}

fn parse(selector: &str) -> Result<Vec<Term>, Status> {
    selector
        .split(',')
        .filter(|t| !t.is_empty())
        .map(|term| {
            let (field, value, equal) = if let Some((f, v)) = term.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, v, true)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, v, true)
            } else {
                return Err(Status::bad_request(format!(
                    "invalid selector: '{selector}'; can't understand '{term}'"
                )));
            };
            if !FIELDS.contains(&field) {
                return Err(Status::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            Ok(Term {
                field: field.to_owned(),
                value: value.to_owned(),
                equal,
            })
        })
        .collect()
}

/// The events of the pods in `scope` the query's field selector picks.
pub(crate) fn list(ctx: &Context, scope: &Scope, query: &Query) -> Answer {
    let terms = match parse(query.get("fieldSelector").map_or("", String::as_str)) {
        Ok(t) => t,
        Err(s) => return Answer::Failed(s),
    };
    let (revision, all) = match items(&*ctx.store, None) {
        Ok(found) => found,
        Err(e) => return Answer::Failed(Status::internal(format!("store: {e}"))),
    };
    let mut events: Vec<Value> = Vec::new();
    for item in all.iter().filter(|i| scope.holds(&i.name)) {
        let p = pod(item);
        let namespace = p.metadata.namespace.clone().unwrap_or_default();
        let name = p.metadata.name.clone().unwrap_or_default();
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let picked = terms.iter().all(|t| {
            let actual = match t.field.as_str() {
                "involvedObject.name" => name.as_str(),
                "involvedObject.namespace" => namespace.as_str(),
                "involvedObject.uid" => uid.as_str(),
                _ => "Pod",
            };
            (actual == t.value) == t.equal
        });
        if !picked {
            continue;
        }
        // kubectl sorts by lastTimestamp: an event of unknown time takes
        // the one before it, so that the decisions keep their order.
        let mut order_at = None;
        for (n, event) in grace_k8s::deletion_events::deletion_events(&item.object)
            .iter()
            .enumerate()
        {
            order_at = event.at.or(order_at);
            let k8s = event.to_k8s(
                format!("{name}.grace-{n}"),
                &namespace,
                &name,
                &uid,
                order_at,
            );
            events.push(json!(k8s));
        }
    }
    Answer::ok(json!({
        "kind": "EventList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": revision.to_string()},
        "items": events,
    }))
}
