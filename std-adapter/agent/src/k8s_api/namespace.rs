//! Namespaces: where a pod is, and the Namespace objects kubectl asks for.
//!
//! A pod is stored under its namespace and name
//! ([`ObjectKey`]: the bare name in `default`, `namespace/name` in any
//! other), so the same name in two namespaces is two pods. grace keeps no
//! Namespace objects: as with the CLI's `-n`, every valid namespace (a
//! DNS-1123 label) exists. `kubectl get ns` lists `default` and the
//! namespaces that hold pods; `kubectl get ns X` answers an `Active`
//! Namespace for any valid `X`; `kubectl create ns X` (and `apply` of a
//! Namespace) succeeds and stores nothing; a namespace cannot be deleted
//! (its pods can: `kubectl delete pods --all -n X`).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::status::Status;
use hyper::Method;

use super::{Answer, Call, Caller, Context, table};
use crate::access::Access;
use crate::store::{DEFAULT_NAMESPACE, ObjectKey, split_key};

/// The namespace of a pod whose manifest names none.
pub(crate) const DEFAULT: &str = DEFAULT_NAMESPACE;

/// A pod, as a URL names it: its namespace and name.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PodRef<'a> {
    /// The namespace (checked by [`served`]).
    pub namespace: &'a str,
    /// The pod's name.
    pub name: &'a str,
}

impl PodRef<'_> {
    /// The store key of the pod.
    pub fn key(&self) -> String {
        ObjectKey {
            namespace: self.namespace.to_owned(),
            name: self.name.to_owned(),
        }
        .to_string()
    }
}

/// The pods a list, watch or deletecollection covers: those of one
/// namespace (`/api/v1/namespaces/NS/pods`), or all (`/api/v1/pods`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Every namespace.
    All,
    /// One namespace.
    In(String),
}

impl Scope {
    /// Whether the pod stored under `key` is in this scope.
    pub fn holds(&self, key: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::In(namespace) => split_key(key).0 == namespace,
        }
    }
}

/// Whether `namespace` can hold pods (a DNS-1123 label); NotFound if not,
/// as kube-apiserver answers for a namespace that does not exist.
pub(crate) fn served(namespace: &str) -> Result<(), Status> {
    grace_std::api_server::check_name(namespace).map_err(|_| Status::namespace_not_found(namespace))
}

/// A body's `metadata.namespace` against the URL's: absent or the same,
/// else kube-apiserver's 400.
pub(crate) fn matches_body(url: &str, body: Option<&str>) -> Result<(), Status> {
    match body {
        Some(ns) if !ns.is_empty() && ns != url => Err(Status::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => Ok(()),
    }
}

/// `/api/v1/namespaces[/NS]`: get, list and create answer synthetic
/// Namespaces (nothing is stored); patch answers the Namespace unchanged;
/// anything else is refused with a 405 Status that says why. Create and
/// patch need write access, as on pods.
pub(crate) fn route(ctx: &Context, caller: &Caller, call: &Call, name: Option<&str>) -> Answer {
    let writes = matches!(call.method, Method::POST | Method::PATCH);
    if writes && caller.access != Access::ReadWrite {
        let verb = if call.method == Method::POST {
            "create"
        } else {
            "patch"
        };
        return Answer::Failed(Status::forbidden(
            &caller.identity.user,
            verb,
            "namespaces",
            name,
            None,
        ));
    }
    match (&call.method, name) {
        (&Method::GET, None) if call.query.get("watch").map(String::as_str) == Some("true") => {
            Answer::Failed(refused("watch"))
        }
        (&Method::GET, None) => list(ctx, &call.accept),
        (&Method::POST, None) => create(&call.body),
        (&Method::GET, Some(ns)) => match served(ns) {
            Ok(()) if table::wanted(&call.accept) => Answer::ok(namespace_table(&[ns], 0)),
            Ok(()) => Answer::ok(object(ns)),
            Err(s) => Answer::Failed(s),
        },
        (&Method::PATCH, Some(ns)) => match served(ns) {
            Ok(()) => Answer::ok(object(ns)),
            Err(s) => Answer::Failed(s),
        },
        (method, _) => Answer::Failed(refused(method.as_str())),
    }
}

/// 405: grace keeps no Namespace objects.
fn refused(verb: &str) -> Status {
    Status {
        kind: "namespaces",
        ..Status::method_not_allowed(
            verb,
            "namespaces: grace keeps no Namespace objects (every valid namespace exists; delete its pods with `kubectl delete pods --all -n NAMESPACE`)",
        )
    }
}

/// An `Active` Namespace named `name`.
fn object(name: &str) -> Value {
    json!({
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/metadata.name": name},
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    })
}

/// `GET /api/v1/namespaces`: `default` and every namespace that holds a
/// pod, as a NamespaceList or a Table.
fn list(ctx: &Context, accept: &str) -> Answer {
    let (revision, items) = match crate::api::items(&*ctx.store, None) {
        Ok(found) => found,
        Err(e) => return Answer::Failed(Status::internal(format!("store: {e}"))),
    };
    let mut names: BTreeSet<&str> = items.iter().map(|i| split_key(&i.name).0).collect();
    names.insert(DEFAULT);
    let names: Vec<&str> = names.into_iter().collect();
    if table::wanted(accept) {
        return Answer::ok(namespace_table(&names, revision));
    }
    let items: Vec<Value> = names.iter().map(|n| object(n)).collect();
    Answer::ok(json!({
        "kind": "NamespaceList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": revision.to_string()},
        "items": items,
    }))
}

/// `POST /api/v1/namespaces`: every valid namespace exists already, so
/// this stores nothing and answers the Namespace (201), which is what a
/// script's `kubectl create ns X` before its `kubectl -n X apply` needs.
/// kubectl sends this one as protobuf: its name is read from either.
fn create(body: &[u8]) -> Answer {
    let name = match body.strip_prefix(PROTOBUF_MAGIC) {
        Some(envelope) => protobuf_name(envelope),
        None => serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v.pointer("/metadata/name")?.as_str().map(str::to_owned)),
    };
    let Some(name) = name else {
        return Answer::Failed(Status::bad_request("Namespace: metadata.name is required"));
    };
    if let Err(e) = grace_std::api_server::check_name(&name) {
        return Answer::Failed(Status {
            kind: "namespaces",
            ..Status::invalid(&name, "metadata.name", &e.to_string())
        });
    }
    Answer::Json(201, object(&name), Vec::new())
}

/// The start of a Kubernetes protobuf body (`k8s` and a zero byte).
const PROTOBUF_MAGIC: &[u8] = b"k8s\0";

/// The `metadata.name` of a protobuf Namespace: the envelope
/// (`runtime.Unknown`) field 2 (`raw`), its field 1 (`metadata`), its
/// field 1 (`name`). `None` if the bytes do not read so.
fn protobuf_name(envelope: &[u8]) -> Option<String> {
    let raw = protobuf_field(envelope, 2)?;
    let metadata = protobuf_field(raw, 1)?;
    let name = protobuf_field(metadata, 1)?;
    String::from_utf8(name.to_vec()).ok()
}

/// The bytes of the first length-delimited field `number` of a protobuf
/// message; `None` if it has none or is cut short.
fn protobuf_field(mut message: &[u8], number: u64) -> Option<&[u8]> {
    fn varint(bytes: &mut &[u8]) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = bytes.split_first()?;
            *bytes = rest;
            value |= u64::from(byte & 0x7f).checked_shl(shift)?;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }
    while !message.is_empty() {
        let key = varint(&mut message)?;
        let skip = match key & 7 {
            0 => {
                varint(&mut message)?;
                0
            }
            1 => 8,
            2 => {
                let len = usize::try_from(varint(&mut message)?).ok()?;
                if key >> 3 == number {
                    return message.get(..len);
                }
                len
            }
            5 => 4,
            _ => return None,
        };
        message = message.get(skip..)?;
    }
    None
}

/// The Table of `names` (kubectl's NAME, STATUS, AGE; grace knows no
/// namespace's age).
fn namespace_table(names: &[&str], revision: u64) -> Value {
    let column = |name: &str| {
        json!({"name": name, "type": "string", "format": if name == "Name" {"name"} else {""},
               "description": "", "priority": 0})
    };
    let rows: Vec<Value> = names
        .iter()
        .map(|name| {
            json!({
                "cells": [name, "Active", "<unknown>"],
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": object(name).get("metadata"),
                },
            })
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": revision.to_string()},
        "columnDefinitions": [column("Name"), column("Status"), column("Age")],
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_in_default_is_keyed_by_its_bare_name_and_scopes_split_keys() {
        let web = PodRef {
            namespace: "default",
            name: "web",
        };
        assert_eq!(web.key(), "web");
        let team = PodRef {
            namespace: "team-a",
            name: "web",
        };
        assert_eq!(team.key(), "team-a/web");
        let scope = Scope::In("team-a".into());
        assert!(scope.holds("team-a/web") && !scope.holds("web"));
        assert!(Scope::In(DEFAULT.into()).holds("web"));
        assert!(Scope::All.holds("web") && Scope::All.holds("team-a/web"));
        assert!(served("team-a").is_ok());
        assert_eq!(served("Team_A").map_err(|s| s.code), Err(404));
        assert!(matches_body("team-a", Some("team-a")).is_ok());
        assert!(matches_body("team-a", None).is_ok());
        assert_eq!(
            matches_body("team-a", Some("default")).map_err(|s| s.code),
            Err(400)
        );
    }

    /// What kubectl 1.32's `create ns team-c` sends: the envelope's type
    /// meta (1), then raw (2) = Namespace { metadata (1) { name (1) } }.
    #[test]
    fn a_protobuf_namespace_s_name_is_read() {
        let name = b"team-c";
        let meta = [&[0x0a, 6u8][..], name].concat();
        let namespace = [&[0x0a, 8u8][..], &meta[..], &[0x12, 0]].concat();
        let type_meta = [0x0a, 4, 0x0a, 2, b'v', b'1'];
        let raw_len = u8::try_from(namespace.len()).expect("short");
        let envelope = [&type_meta[..], &[0x12, raw_len], &namespace[..], &[0x1a, 0]].concat();
        assert_eq!(protobuf_name(&envelope).as_deref(), Some("team-c"));
        assert_eq!(protobuf_name(&envelope[..envelope.len() - 9]), None);
        assert_eq!(protobuf_name(&[0xff]), None);
    }
}
