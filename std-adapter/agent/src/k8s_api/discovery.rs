//! Discovery and OpenAPI: what kubectl asks before it works with Pods.
//!
//! - `/version` reports 1.32 (kubectl's dispatcher then runs its 1.32).
//! - `/api` and `/apis` in the aggregated format (`apidiscovery.k8s.io/v2`)
//!   when the client asks for it, the legacy one otherwise; `/apis` lists
//!   no group (none is served).
//! - `/api/v1`: pods with their verbs and subresources (`pods/log`,
//!   `pods/eviction`, `pods/status`), and namespaces.
//! - `/openapi/v3` and `/openapi/v3/api/v1`: the Pod PATCH operation with
//!   a `fieldValidation` parameter, which tells kubectl that the server
//!   validates fields itself (its default `--validate=strict` then needs
//!   no schema); `/openapi/v2` is not served (404, which kubectl
//!   tolerates).

use serde_json::{Value, json};

/// The content type of an aggregated discovery document.
pub(crate) const AGGREGATED: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// The verbs served on pods.
const POD_VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The verbs served on namespaces: grace keeps none, so these answer
/// synthetic ones (`namespace.rs`).
const NAMESPACE_VERBS: [&str; 4] = ["create", "get", "list", "patch"];

/// `/version`.
pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.4",
        "gitCommit": "grace",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.23.6",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// Whether the client's Accept asks for aggregated discovery.
pub(crate) fn wants_aggregated(accept: &str) -> bool {
    accept.contains("as=APIGroupDiscoveryList")
}

/// `/api`, aggregated: the core group, version v1.
pub(crate) fn api_aggregated() -> Value {
    let sub = |name: &str, group: &str, kind: &str, verbs: &[&str]| {
        json!({"subresource": name,
               "responseKind": {"group": group, "version": "v1", "kind": kind},
               "verbs": verbs})
    };
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": [{
            "metadata": {"creationTimestamp": null},
            "versions": [{
                "version": "v1",
                "freshness": "Current",
                "resources": [{
                    "resource": "namespaces",
                    "responseKind": {"group": "", "version": "v1", "kind": "Namespace"},
                    "scope": "Cluster",
                    "singularResource": "namespace",
                    "verbs": NAMESPACE_VERBS,
                    "shortNames": ["ns"],
                }, {
                    "resource": "pods",
                    "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
                    "scope": "Namespaced",
                    "singularResource": "pod",
                    "verbs": POD_VERBS,
                    "shortNames": ["po"],
                    "categories": ["all"],
                    "subresources": [
                        sub("eviction", "policy", "Eviction", &["create"]),
                        sub("log", "", "Pod", &["get"]),
                        sub("status", "", "Pod", &["get"]),
                    ],
                }],
            }],
        }],
    })
}

/// `/apis`, aggregated: no group.
pub(crate) fn apis_aggregated() -> Value {
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
           "metadata": {}, "items": []})
}

/// `/api`, legacy.
pub(crate) fn api_legacy() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"],
           "serverAddressByClientCIDRs": []})
}

/// `/apis`, legacy.
pub(crate) fn apis_legacy() -> Value {
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
}

/// `/api/v1`: the resources of the core group served here.
pub(crate) fn api_v1() -> Value {
    json!({
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [
            {"name": "namespaces", "singularName": "namespace", "namespaced": false,
             "kind": "Namespace", "verbs": NAMESPACE_VERBS, "shortNames": ["ns"]},
            {"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
             "verbs": POD_VERBS, "shortNames": ["po"], "categories": ["all"]},
            {"name": "pods/eviction", "singularName": "", "namespaced": true,
             "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]},
            {"name": "pods/log", "singularName": "", "namespaced": true, "kind": "Pod",
             "verbs": ["get"]},
            {"name": "pods/status", "singularName": "", "namespaced": true, "kind": "Pod",
             "verbs": ["get"]},
        ],
    })
}

/// The hash in the v1 document's URL: changes with what the document says.
const OPENAPI_HASH: &str = "grace2";

/// `/openapi/v3`: where the core group's document is.
pub(crate) fn openapi_v3() -> Value {
    json!({"paths": {"api/v1": {
        "serverRelativeURL": format!("/openapi/v3/api/v1?hash={OPENAPI_HASH}")}}})
}

/// `/openapi/v3/api/v1`: the Pod operations, each with `fieldValidation`
/// where the server takes it (no schemas: the server validates).
pub(crate) fn openapi_v3_api_v1() -> Value {
    let op = |kind: &str, action: &str, validation: bool| {
        let gvk = json!({"group": "", "version": "v1", "kind": kind});
        let mut params =
            vec![json!({"name": "dryRun", "in": "query", "schema": {"type": "string"}})];
        if validation {
            params.push(
                json!({"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}),
            );
        }
        json!({"x-kubernetes-group-version-kind": gvk,
               "x-kubernetes-action": action,
               "parameters": params,
               "responses": {"200": {"description": "OK"}}})
    };
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.4"},
        "paths": {
            "/api/v1/namespaces/{namespace}/pods": {
                "post": op("Pod", "post", true),
                "get": op("Pod", "list", false),
            },
            "/api/v1/namespaces/{namespace}/pods/{name}": {
                "get": op("Pod", "get", false),
                "put": op("Pod", "put", true),
                "patch": op("Pod", "patch", true),
                "delete": op("Pod", "delete", false),
            },
            // `kubectl apply -f` of a Namespace (nothing is stored).
            "/api/v1/namespaces": {
                "post": op("Namespace", "post", true),
                "get": op("Namespace", "list", false),
            },
            "/api/v1/namespaces/{name}": {
                "get": op("Namespace", "get", false),
                "patch": op("Namespace", "patch", true),
            },
        },
        "components": {"schemas": {}},
    })
}
