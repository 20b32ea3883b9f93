//! Pods: get, list, create, delete, patch and eviction, each a request of
//! the agent's own protocol handed to the same runtime thread the socket
//! hands its requests to ([`super::Context::dispatch`]): one decision
//! path, one group commit. Reads go to the store, as the socket's do.

use std::collections::HashMap;

use grace_core::DeleteOptions;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::{Value, json};

use super::namespace::{self, PodRef, Scope};
use super::status::Status;
use super::{Answer, Caller, Context, selector::Selector, table};
use crate::api::{Item, Merge, Reply, Request, items};
use crate::store::{StoreError, split_key};

/// The query of a request, decoded.
pub(crate) type Query = HashMap<String, String>;

/// A stored object as the API shows it: a Pod in the namespace of its
/// key (whatever the kept manifest says: a manifest applied with `-n`
/// names none).
pub(crate) fn pod(item: &Item) -> Pod {
    let mut pod = grace_k8s::pod_object::to_pod(&item.name, &item.object);
    pod.metadata.namespace = Some(split_key(&item.name).0.to_owned());
    pod
}

fn store_status(name: &str, e: StoreError) -> Status {
    match e {
        StoreError::NotFound { .. } => Status::pod_not_found(name),
        other => Status::internal(format!("store: {other}")),
    }
}

/// The pod `at` names.
pub(crate) fn read(ctx: &Context, at: PodRef<'_>) -> Result<(u64, Pod), Status> {
    let key = at.key();
    let (revision, found) = items(&*ctx.store, Some(&key)).map_err(|e| store_status(at.name, e))?;
    let item = found
        .first()
        .ok_or_else(|| Status::pod_not_found(at.name))?;
    Ok((revision, pod(item)))
}

/// `GET …/pods/NAME`: the Pod, or a Table of one row.
pub(crate) fn get(ctx: &Context, at: PodRef<'_>, accept: &str) -> Answer {
    match read(ctx, at) {
        Ok((revision, pod)) if table::wanted(accept) => {
            Answer::ok(table::table(&[pod], revision, true))
        }
        Ok((_, pod)) => Answer::ok(json!(pod)),
        Err(status) => Answer::Failed(status),
    }
}

/// The pods of `scope` the query's selectors pick, in the API server's
/// order (by namespace, then name), with the store's revision.
pub(crate) fn selected(
    ctx: &Context,
    scope: &Scope,
    query: &Query,
) -> Result<(u64, Vec<(String, Pod)>), Status> {
    let selector = Selector::parse(
        query.get("labelSelector").map(String::as_str),
        query.get("fieldSelector").map(String::as_str),
    )
    .map_err(Status::bad_request)?;
    let (revision, mut all) = items(&*ctx.store, None).map_err(|e| store_status("", e))?;
    all.retain(|item| scope.holds(&item.name));
    all.sort_by(|a, b| split_key(&a.name).cmp(&split_key(&b.name)));
    let pods = all
        .iter()
        .map(|item| (item.name.clone(), pod(item)))
        .filter(|(_, p)| selector.matches(p))
        .collect();
    Ok((revision, pods))
}

/// `GET …/pods`: the pods of `scope` the selectors pick, `limit` at a
/// time (the `continue` token is the key of the last pod given), as a
/// PodList or a Table.
pub(crate) fn list(ctx: &Context, scope: &Scope, query: &Query, accept: &str) -> Answer {
    let (revision, all) = match selected(ctx, scope, query) {
        Ok(found) => found,
        Err(s) => return Answer::Failed(s),
    };
    let after = query.get("continue").cloned().unwrap_or_default();
    let limit = query
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let mut page: Vec<(String, Pod)> = all
        .into_iter()
        .filter(|(key, _)| after.is_empty() || split_key(key) > split_key(&after))
        .take(limit.saturating_add(1))
        .collect();
    let more = page.len() > limit;
    page.truncate(limit);
    let next = if more {
        page.last().map(|(key, _)| key.clone())
    } else {
        None
    };
    let pods: Vec<Pod> = page.into_iter().map(|(_, p)| p).collect();
    if table::wanted(accept) {
        return Answer::ok(table::table(&pods, revision, true));
    }
    let mut metadata = json!({"resourceVersion": revision.to_string()});
    if let (Some(next), Some(m)) = (next, metadata.as_object_mut()) {
        m.insert("continue".into(), json!(next));
    }
    Answer::ok(json!({
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": metadata,
        "items": pods,
    }))
}

/// The Pod in a request's body.
fn body_pod(body: &[u8]) -> Result<Pod, Status> {
    serde_json::from_slice::<Pod>(body).map_err(|e| {
        Status::bad_request(format!(
            "Pod in version \"v1\" cannot be handled as a Pod: {e}"
        ))
    })
}

/// Whether the query asks for a dry run (`dryRun=All`).
fn dry_run(query: &Query) -> Result<bool, Status> {
    match query.get("dryRun").map(String::as_str) {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(Status::bad_request(format!(
            "dryRun: unsupported value \"{other}\" (only \"All\")"
        ))),
    }
}

/// `POST /api/v1/namespaces/NS/pods`: creates the pod (201), as `grace
/// apply` of a new object does.
pub(crate) fn create(
    ctx: &Context,
    caller: &Caller,
    ns: &str,
    query: &Query,
    body: &[u8],
) -> Answer {
    let mut pod = match body_pod(body) {
        Ok(p) => p,
        Err(s) => return Answer::Failed(s),
    };
    if let Err(s) = namespace::matches_body(ns, pod.metadata.namespace.as_deref())
        .and_then(|()| caller.may_write("create", None, ns))
    {
        return Answer::Failed(s);
    }
    // The kept manifest names its namespace, as `grace apply -n` keeps it.
    pod.metadata.namespace = Some(ns.to_owned());
    let name = pod.metadata.name.clone().unwrap_or_default();
    let mut converted = match grace_k8s::pod_object::to_object(&pod) {
        Ok(c) => c,
        Err(e) => return Answer::Failed(Status::invalid(&name, &e.path, &e.message)),
    };
    // The server gives every object it creates a uid.
    if converted.object.record.uid.is_empty()
        && let Ok(uid) = grace_core::Name::try_from(crate::update::new_uid().as_str())
    {
        converted.object.record.uid = uid;
    }
    if converted.object.created.is_none() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        converted.object.created = Some(grace_core::Timestamp::from_unix_seconds(now));
    }
    let warnings = ignored(&pod);
    let dry = match dry_run(query) {
        Ok(d) => d,
        Err(s) => return Answer::Failed(s),
    };
    let at = PodRef {
        namespace: ns,
        name: &converted.name,
    };
    if dry {
        let item = Item {
            name: at.key(),
            revision: 0,
            object: converted.object,
        };
        return Answer::Json(201, json!(self::pod(&item)), warnings);
    }
    let request = Request::Apply {
        name: at.key(),
        object: Box::new(converted.object),
    };
    match ctx.dispatch(caller, request) {
        Reply::Error(e) => Answer::Failed(Status::from_api(&name, e)),
        _ => match read(ctx, at) {
            Ok((_, pod)) => Answer::Json(201, json!(pod), warnings),
            Err(s) => Answer::Failed(s),
        },
    }
}

/// The fields grace does not act on, as `Warning` headers.
fn ignored(pod: &Pod) -> Vec<String> {
    let fields: Vec<String> = grace_k8s::pod_object::ignored_fields(pod)
        .into_iter()
        .filter(|f| !f.starts_with("metadata.annotations") && f != "metadata.namespace")
        .collect();
    if fields.is_empty() {
        Vec::new()
    } else {
        vec![format!("grace does not act on: {}", fields.join(", "))]
    }
}

/// The DeleteOptions of a DELETE: its body if it has one, else its query
/// (`gracePeriodSeconds`, `propagationPolicy`, `dryRun`).
pub(crate) fn delete_options(query: &Query, body: &[u8]) -> Result<DeleteOptions, Status> {
    let trimmed = body.iter().any(|b| !b.is_ascii_whitespace());
    let mut wire: meta::DeleteOptions = if trimmed {
        serde_json::from_slice(body)
            .map_err(|e| Status::bad_request(format!("DeleteOptions: {e}")))?
    } else {
        meta::DeleteOptions::default()
    };
    if wire.grace_period_seconds.is_none()
        && let Some(g) = query.get("gracePeriodSeconds")
    {
        let g = g
            .parse()
            .map_err(|_| Status::bad_request(format!("gracePeriodSeconds: `{g}`")))?;
        wire.grace_period_seconds = Some(g);
    }
    if wire.propagation_policy.is_none() {
        wire.propagation_policy = query.get("propagationPolicy").cloned();
    }
    if wire.dry_run.is_none() && dry_run(query)? {
        wire.dry_run = Some(vec!["All".to_owned()]);
    }
    grace_k8s::delete_options_from_wire(&wire).map_err(|e| Status::bad_request(e.to_string()))
}

/// `DELETE …/pods/NAME`: grace's deletion (R1–R44) through the runtime
/// thread. The answer is the Pod: terminating (its deletion timestamp
/// and grace set), or its last state if it was removed at once.
pub(crate) fn delete(
    ctx: &Context,
    caller: &Caller,
    at: PodRef<'_>,
    options: DeleteOptions,
) -> Answer {
    match deleted(ctx, caller, at, options) {
        Ok(pod) => Answer::ok(json!(pod)),
        Err(s) => Answer::Failed(s),
    }
}

/// One pod's deletion, as a single delete and a deletecollection make
/// it: the Pod after it.
pub(crate) fn deleted(
    ctx: &Context,
    caller: &Caller,
    at: PodRef<'_>,
    options: DeleteOptions,
) -> Result<Pod, Status> {
    caller.may_write("delete", Some(at.name), at.namespace)?;
    let (_, before) = read(ctx, at)?;
    let request = Request::Delete {
        name: at.key(),
        options,
    };
    match ctx.dispatch(caller, request) {
        Reply::Error(e) => Err(Status::from_api(at.name, e)),
        Reply::Deleted(report) => {
            // The pod as this delete left it, as kube-apiserver answers:
            // the record as the decision wrote it, not what came after (a
            // container that stops at once makes the kubelet's final
            // delete, grace 0, a moment later), nor nothing once removed.
            let mut last = before;
            grace_k8s::apply_record(&report.record, &mut last.metadata);
            Ok(last)
        }
        other => Err(Status::internal(format!("unexpected reply: {other:?}"))),
    }
}

/// `DELETE /api/v1/namespaces/NS/pods` (deletecollection): every pod of
/// `ns` the query's selectors pick, each through the same path as a
/// single delete (its grace honoured, R1–R44), with the same
/// DeleteOptions (body or query). The answer is a PodList of the pods as
/// their deletions left them, as kube-apiserver answers. A pod removed
/// meanwhile is skipped, as kube-apiserver skips it; another failure ends
/// the request with its Status.
pub(crate) fn delete_collection(
    ctx: &Context,
    caller: &Caller,
    ns: &str,
    query: &Query,
    body: &[u8],
) -> Answer {
    if let Err(s) = caller.may_write("deletecollection", None, ns) {
        return Answer::Failed(s);
    }
    let options = match delete_options(query, body) {
        Ok(o) => o,
        Err(s) => return Answer::Failed(s),
    };
    let (revision, pods) = match selected(ctx, &Scope::In(ns.to_owned()), query) {
        Ok(found) => found,
        Err(s) => return Answer::Failed(s),
    };
    let mut items = Vec::with_capacity(pods.len());
    for (key, _) in &pods {
        let at = PodRef {
            namespace: ns,
            name: split_key(key).1,
        };
        match deleted(ctx, caller, at, options.clone()) {
            Ok(pod) => items.push(pod),
            Err(s) if s.code == 404 => {}
            Err(s) => return Answer::Failed(s),
        }
    }
    Answer::ok(json!({
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": revision.to_string()},
        "items": items,
    }))
}

/// `POST …/pods/NAME/eviction`: a delete with the Eviction's options
/// (`deleteOptions`, or kube-rs's `delete_options`); 201 Success. No
/// disruption budget exists here, so none blocks it (R50–R54 govern
/// budgets where there are some).
pub(crate) fn evict(ctx: &Context, caller: &Caller, at: PodRef<'_>, body: &[u8]) -> Answer {
    let name = at.name;
    let eviction: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return Answer::Failed(Status::bad_request(format!("Eviction: {e}"))),
    };
    if let Some(named) = eviction.pointer("/metadata/name").and_then(Value::as_str)
        && named != name
    {
        return Answer::Failed(Status::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let options = eviction
        .get("deleteOptions")
        .or_else(|| eviction.get("delete_options"))
        .filter(|o| !o.is_null())
        .map(|o| o.to_string())
        .unwrap_or_default();
    let options = match delete_options(&Query::new(), options.as_bytes()) {
        Ok(o) => o,
        Err(s) => return Answer::Failed(s),
    };
    match delete(ctx, caller, at, options) {
        Answer::Json(..) => Answer::Json(
            201,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                   "status": "Success", "code": 201}),
            Vec::new(),
        ),
        other => other,
    }
}

/// `PATCH …/pods/NAME`: the patch (JSON merge, strategic merge, JSON
/// patch) applied to the Pod as the API shows it, and the result stored
/// as `grace apply` of a changed manifest stores it: labels and
/// finalizers may change (R45, R46), the spec may not.
pub(crate) fn patch(
    ctx: &Context,
    caller: &Caller,
    at: PodRef<'_>,
    content_type: &str,
    body: &[u8],
) -> Answer {
    let name = at.name;
    if let Err(s) = caller.may_write("patch", Some(name), at.namespace) {
        return Answer::Failed(s);
    }
    let (_, current) = match read(ctx, at) {
        Ok(found) => found,
        Err(s) => return Answer::Failed(s),
    };
    let patch: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return Answer::Failed(Status::bad_request(format!("patch: {e}"))),
    };
    let mut doc = json!(current);
    let kind = content_type.split(';').next().unwrap_or("").trim();
    let applied = match kind {
        "application/merge-patch+json" => {
            super::patch::merge(&mut doc, &patch);
            Ok(())
        }
        "application/strategic-merge-patch+json" => super::patch::strategic(&mut doc, &patch),
        "application/json-patch+json" => super::patch::json_patch(&mut doc, &patch),
        "application/apply-patch+yaml" => Err(
            "server-side apply is not served by grace's agent: use client-side `kubectl apply`"
                .to_owned(),
        ),
        other => Err(format!("the patch type `{other}` is not served")),
    };
    if let Err(message) = applied {
        let status = if kind == "application/apply-patch+yaml" || !kind.ends_with("json") {
            Status {
                code: 415,
                reason: "UnsupportedMediaType",
                message,
                name: Some(name.to_owned()),
                causes: Vec::new(),
                kind: "pods",
            }
        } else {
            Status::invalid(name, "patch", &message)
        };
        return Answer::Failed(status);
    }
    let patched: Pod = match serde_json::from_value(doc) {
        Ok(p) => p,
        Err(e) => return Answer::Failed(Status::invalid(name, "patch", &e.to_string())),
    };
    if patched.metadata.name.as_deref() != Some(name) {
        return Answer::Failed(Status::invalid(name, "metadata.name", "field is immutable"));
    }
    if let Some(rv) = patched.metadata.resource_version.as_deref()
        && current.metadata.resource_version.as_deref() != Some(rv)
    {
        return Answer::Failed(Status::conflict(
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        ));
    }
    update(ctx, caller, at, &patched)
}

/// `PUT …/pods/NAME` and the end of a PATCH: the Pod stored through the
/// agent's update ([`Request::Put`]).
pub(crate) fn update(ctx: &Context, caller: &Caller, at: PodRef<'_>, pod: &Pod) -> Answer {
    let name = at.name;
    if let Err(s) = namespace::matches_body(at.namespace, pod.metadata.namespace.as_deref())
        .and_then(|()| caller.may_write("update", Some(name), at.namespace))
    {
        return Answer::Failed(s);
    }
    let mut stored = pod.clone();
    stored.metadata.namespace = Some(at.namespace.to_owned());
    let converted = match grace_k8s::pod_object::to_object(&stored) {
        Ok(c) => c,
        Err(e) => return Answer::Failed(Status::invalid(name, &e.path, &e.message)),
    };
    // The whole pod as it is to be (kubectl computed any merge itself).
    let request = Request::Put {
        name: at.key(),
        object: Box::new(converted.object),
        merge: Merge::Replace,
    };
    match ctx.dispatch(caller, request) {
        Reply::Error(e) => Answer::Failed(Status::from_api(name, e)),
        _ => match read(ctx, at) {
            Ok((_, pod)) => Answer::ok(json!(pod)),
            // The last finalizer of a deleted pod went (R45): removed.
            Err(s) if s.code == 404 => Answer::ok(json!(pod)),
            Err(s) => Answer::Failed(s),
        },
    }
}
