//! Kubernetes' rules for an apply of a Pod that is already stored, on the
//! whole object as applied ([`Manifest`]):
//!
//! - [`check_spec_update`]: which fields of the spec an update may change,
//!   as the API server's `ValidatePodUpdate` decides: a container's or
//!   init container's `image`, `activeDeadlineSeconds` (set, or lowered),
//!   `tolerations` (added to, or an existing one's `tolerationSeconds`);
//!   nothing else;
//! - [`last_applied`]: the `kubectl.kubernetes.io/last-applied-configuration`
//!   annotation, written as `kubectl apply` writes it;
//! - [`merge`]: kubectl's three-way merge of a map (labels, annotations):
//!   what the last apply set and the new one leaves out is removed, what
//!   others added is kept.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::store::Manifest;

/// The annotation in which `kubectl apply` keeps the object it applied.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The API server's message for a spec change it does not allow (Kubernetes
/// 1.29 and later), followed by what changed.
pub const FORBIDDEN_SPEC_CHANGE: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// An update of a Pod that Kubernetes refuses: the field, in kubectl's
/// notation (`spec`, `spec.activeDeadlineSeconds`), and the API server's
/// words (`Forbidden: …`, `Invalid value: …`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForbiddenUpdate {
    /// The field.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for ForbiddenUpdate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for ForbiddenUpdate {}

impl ForbiddenUpdate {
    /// The refusal of a change of `changed` (paths in kubectl's notation),
    /// fields no update may change.
    pub fn spec_change(changed: &[String]) -> Self {
        ForbiddenUpdate {
            field: "spec".into(),
            message: format!(
                "Forbidden: {FORBIDDEN_SPEC_CHANGE}\n  changed: {}",
                changed.join(", ")
            ),
        }
    }
}

/// Checks the update of the Pod `old` (as stored) into `new` (as applied),
/// both whole Pods as JSON, as Kubernetes' `ValidatePodUpdate` checks its
/// spec (and the namespace, which never changes). Fields grace holds
/// beside the manifest (the node, the grace period) are checked by the
/// caller.
pub fn check_spec_update(old: &Value, new: &Value) -> Result<(), ForbiddenUpdate> {
    let namespace = |pod: &Value| pod.pointer("/metadata/namespace").cloned();
    if let (Some(was), Some(is)) = (namespace(old), namespace(new))
        && was != is
    {
        return Err(ForbiddenUpdate {
            field: "metadata.namespace".into(),
            message: format!("Invalid value: {is}: field is immutable"),
        });
    }
    let empty = Value::Object(Map::new());
    let old = old.get("spec").unwrap_or(&empty);
    let new = new.get("spec").unwrap_or(&empty);
    for list in ["containers", "initContainers"] {
        check_containers(old, new, list)?;
    }
    check_deadline(old, new)?;
    check_tolerations(old, new)?;
    // What may change, taken as it was: anything else that differs is
    // forbidden.
    let mut munged = new.clone();
    if let Some(spec) = munged.as_object_mut() {
        for list in ["containers", "initContainers"] {
            let images = old.get(list).and_then(Value::as_array);
            let containers = spec.get_mut(list).and_then(Value::as_array_mut);
            for (i, c) in containers.into_iter().flatten().enumerate() {
                let was = images.and_then(|a| a.get(i)).and_then(|c| c.get("image"));
                if let Some(c) = c.as_object_mut() {
                    match was {
                        Some(image) => c.insert("image".into(), image.clone()),
                        None => c.remove("image"),
                    };
                }
            }
        }
        for field in ["activeDeadlineSeconds", "tolerations"] {
            match old.get(field) {
                Some(value) => spec.insert(field.into(), value.clone()),
                None => spec.remove(field),
            };
        }
    }
    let mut changed = Vec::new();
    differences(old, &munged, "spec", &mut changed);
    if changed.is_empty() {
        Ok(())
    } else {
        Err(ForbiddenUpdate::spec_change(&changed))
    }
}

/// `ValidateContainerUpdates`: as many containers as before, and an image
/// may change but not to nothing (a Pod grace runs may have none at all).
fn check_containers(old: &Value, new: &Value, list: &str) -> Result<(), ForbiddenUpdate> {
    let len = |spec: &Value| spec.get(list).and_then(Value::as_array).map_or(0, Vec::len);
    if len(old) != len(new) {
        return Err(ForbiddenUpdate {
            field: format!("spec.{list}"),
            message: "Forbidden: pod updates may not add or remove containers".into(),
        });
    }
    let containers = new.get(list).and_then(Value::as_array);
    for (i, c) in containers.into_iter().flatten().enumerate() {
        let image = c.get("image").and_then(Value::as_str).unwrap_or("");
        let had = old
            .pointer(&format!("/{list}/{i}/image"))
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty());
        if image.is_empty() && had {
            return Err(ForbiddenUpdate {
                field: format!("spec.{list}[{i}].image"),
                message: "Required value".into(),
            });
        }
        if image.trim() != image {
            return Err(ForbiddenUpdate {
                field: format!("spec.{list}[{i}].image"),
                message: format!(
                    "Invalid value: {image:?}: must not have leading or trailing whitespace"
                ),
            });
        }
    }
    Ok(())
}

/// `activeDeadlineSeconds` may be set, or lowered, never raised or unset.
fn check_deadline(old: &Value, new: &Value) -> Result<(), ForbiddenUpdate> {
    let field = "spec.activeDeadlineSeconds".to_owned();
    let was = old.get("activeDeadlineSeconds").and_then(Value::as_i64);
    match (
        was,
        new.get("activeDeadlineSeconds").and_then(Value::as_i64),
    ) {
        (_, Some(is)) if !(0..=i64::from(i32::MAX)).contains(&is) => Err(ForbiddenUpdate {
            field,
            message: format!(
                "Invalid value: {is}: must be between 0 and {} inclusive",
                i32::MAX
            ),
        }),
        (Some(was), Some(is)) if was < is => Err(ForbiddenUpdate {
            field,
            message: format!("Invalid value: {is}: must be less than or equal to previous value"),
        }),
        (Some(_), None) => Err(ForbiddenUpdate {
            field,
            message:
                "Invalid value: \"null\": must not update from a positive integer to nil value"
                    .into(),
        }),
        _ => Ok(()),
    }
}

/// Tolerations may be added; an existing one may change only its
/// `tolerationSeconds`.
fn check_tolerations(old: &Value, new: &Value) -> Result<(), ForbiddenUpdate> {
    let list = |spec: &Value| {
        spec.get("tolerations")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let without_seconds = |t: &Value| {
        let mut t = t.clone();
        if let Some(map) = t.as_object_mut() {
            map.remove("tolerationSeconds");
        }
        t
    };
    let new = list(new);
    for was in list(old) {
        let was = without_seconds(&was);
        if !new.iter().any(|t| same(&without_seconds(t), &was)) {
            return Err(ForbiddenUpdate {
                field: "spec.tolerations".into(),
                message: "Forbidden: existing toleration can not be modified except its tolerationSeconds".into(),
            });
        }
    }
    Ok(())
}

/// Whether two values are the same as the API server compares them
/// (`Semantic.DeepEqual`): an absent field, `null`, an empty list and an
/// empty map are all "not set".
fn same(a: &Value, b: &Value) -> bool {
    let mut found = Vec::new();
    differences(a, b, "", &mut found);
    found.is_empty()
}

fn unset(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(m)) => m.is_empty(),
        Some(_) => false,
    }
}

/// The paths (kubectl's notation, under `path`) at which `a` and `b`
/// differ, the first few.
fn differences(a: &Value, b: &Value, path: &str, found: &mut Vec<String>) {
    const FEW: usize = 5;
    if found.len() >= FEW || (unset(Some(a)) && unset(Some(b))) {
        return;
    }
    let at = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                match (x.get(key), y.get(key)) {
                    (Some(p), Some(q)) => differences(p, q, &at(key), found),
                    (p, q) if unset(p) && unset(q) => {}
                    _ => found.push(at(key)),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                differences(p, q, &format!("{path}[{i}]"), found);
            }
        }
        (x, y) if x == y => {}
        _ => found.push(path.to_owned()),
    }
}

/// The annotation `kubectl apply` writes for `document`, the object as its
/// file gives it: the object without the annotation itself (and with
/// `metadata.annotations` present, empty if nothing else is there) in
/// `namespace` unless it names one, as Go's JSON encoder writes it
/// (compact, keys sorted, `<`, `>` and `&` escaped, a newline at the end).
pub fn last_applied(document: &Value, namespace: &str) -> String {
    let mut object = document.clone();
    if let Some(root) = object.as_object_mut() {
        let meta = root
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            if meta.get("namespace").is_none_or(|n| n.as_str() == Some("")) {
                meta.insert("namespace".into(), Value::String(namespace.to_owned()));
            }
            let annotations = meta
                .entry("annotations")
                .or_insert_with(|| Value::Object(Map::new()));
            match annotations.as_object_mut() {
                Some(map) => {
                    map.remove(LAST_APPLIED);
                }
                None => *annotations = Value::Object(Map::new()),
            }
        }
    }
    let mut text = go_json(&object);
    text.push('\n');
    text
}

/// `value` as Go's `encoding/json` writes a map of it: serde_json's
/// compact form (its maps are sorted by key, as Go sorts them) with the
/// characters Go escapes for HTML escaped.
fn go_json(value: &Value) -> String {
    let text = value.to_string();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// The object the last `kubectl apply` (or `grace apply`) applied, read
/// from `manifest`'s annotation; `None` if there is none, or it is not
/// JSON.
pub fn last_applied_object(manifest: &Value) -> Option<Value> {
    let text = manifest
        .pointer("/metadata/annotations")?
        .get(LAST_APPLIED)?
        .as_str()?;
    serde_json::from_str(text).ok()
}

/// Whether the Pods `a` and `b` (as JSON) are the same but for their
/// [`LAST_APPLIED`] annotations, as the API server compares them (unset,
/// `null` and empty are the same). An apply that would change nothing
/// else changes nothing: `grace get -o yaml` applied again is unchanged.
pub(crate) fn same_but_last_applied(a: &Value, b: &Value) -> bool {
    let strip = |pod: &Value| {
        let mut pod = pod.clone();
        if let Some(map) = pod
            .pointer_mut("/metadata/annotations")
            .and_then(Value::as_object_mut)
        {
            map.remove(LAST_APPLIED);
        }
        pod
    };
    same(&strip(a), &strip(b))
}

/// kubectl's three-way merge of a string map: `current` (as stored) with
/// every entry of `modified` (the new apply) set and every key of
/// `original` (the last apply) that `modified` leaves out removed; keys
/// no apply set (added by others) are kept.
pub fn merge(
    original: Option<&BTreeMap<String, String>>,
    modified: &BTreeMap<String, String>,
    current: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut merged = current.clone();
    for key in original.into_iter().flat_map(BTreeMap::keys) {
        if !modified.contains_key(key) {
            merged.remove(key);
        }
    }
    merged.extend(modified.iter().map(|(k, v)| (k.clone(), v.clone())));
    merged
}

/// The string map at `pointer` in `value` (labels, annotations); empty
/// if absent, entries that are not strings left out.
pub(crate) fn string_map(value: &Value, pointer: &str) -> BTreeMap<String, String> {
    value
        .pointer(pointer)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// `manifest` with its `metadata.annotations` made `annotations` (the
/// field left out when there are none).
pub(crate) fn with_annotations(
    manifest: &Value,
    annotations: &BTreeMap<String, String>,
) -> Manifest {
    let mut manifest = manifest.clone();
    if let Some(root) = manifest.as_object_mut() {
        let meta = root
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            if annotations.is_empty() {
                meta.remove("annotations");
            } else {
                let map = annotations
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect();
                meta.insert("annotations".into(), Value::Object(map));
            }
        }
    }
    Manifest::from_json(&manifest)
}

/// `manifest` (the Pod grace keeps) with the annotation `kubectl apply`
/// would write for `document` (the Pod as its file gives it) in
/// `namespace` ([`last_applied`]).
pub fn annotate(manifest: &Manifest, document: &Value, namespace: &str) -> Manifest {
    let Ok(kept) = manifest.to_json() else {
        return manifest.clone();
    };
    let mut annotations = string_map(&kept, "/metadata/annotations");
    annotations.insert(LAST_APPLIED.into(), last_applied(document, namespace));
    with_annotations(&kept, &annotations)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": spec})
    }

    #[test]
    fn an_image_may_change_and_nothing_else_of_a_container() {
        let old = pod(json!({"containers": [{"name": "a", "image": "x:1", "args": ["1"]}]}));
        let image = pod(json!({"containers": [{"name": "a", "image": "x:2", "args": ["1"]}]}));
        assert_eq!(check_spec_update(&old, &image), Ok(()));
        let env = pod(
            json!({"containers": [{"name": "a", "image": "x:1", "args": ["1"],
            "env": [{"name": "A", "value": "1"}]}]}),
        );
        let e = check_spec_update(&old, &env).expect_err("env is immutable");
        assert_eq!(e.field, "spec");
        assert!(
            e.message.starts_with(
                "Forbidden: pod updates may not change fields other than `spec.containers[*].image`"
            ),
            "{e}"
        );
        assert!(
            e.message.ends_with("changed: spec.containers[0].env"),
            "{e}"
        );
        let more = pod(json!({"containers": [{"name": "a", "args": ["1"]}, {"name": "b"}]}));
        let e = check_spec_update(&old, &more).expect_err("a container added");
        assert_eq!(
            e.to_string(),
            "spec.containers: Forbidden: pod updates may not add or remove containers"
        );
        // Unset and empty are the same.
        let empty = pod(
            json!({"containers": [{"name": "a", "image": "x:1", "args": ["1"], "env": []}], "volumes": []}),
        );
        assert_eq!(check_spec_update(&old, &empty), Ok(()));
    }

    #[test]
    fn a_deadline_may_be_set_or_lowered_and_tolerations_only_added() {
        let spec = |extra: Value| {
            let mut s = json!({"containers": [{"name": "a"}]});
            if let (Some(s), Some(e)) = (s.as_object_mut(), extra.as_object()) {
                s.extend(e.clone());
            }
            pod(s)
        };
        let none = spec(json!({}));
        let ten = spec(json!({"activeDeadlineSeconds": 10}));
        let five = spec(json!({"activeDeadlineSeconds": 5}));
        assert_eq!(check_spec_update(&none, &ten), Ok(()));
        assert_eq!(check_spec_update(&ten, &five), Ok(()));
        let e = check_spec_update(&five, &ten).expect_err("raised");
        assert_eq!(
            e.to_string(),
            "spec.activeDeadlineSeconds: Invalid value: 10: must be less than or equal to previous value"
        );
        assert!(check_spec_update(&five, &none).is_err(), "unset");
        let t = |s: i64| json!({"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": s});
        let one = spec(json!({"tolerations": [t(5)]}));
        let two = spec(json!({"tolerations": [t(9), {"key": "other", "operator": "Exists"}]}));
        assert_eq!(check_spec_update(&one, &two), Ok(()));
        let e = check_spec_update(&two, &one).expect_err("removed");
        assert_eq!(e.field, "spec.tolerations");
    }

    #[test]
    fn the_last_applied_annotation_is_written_as_kubectl_writes_it() {
        let doc = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "creationTimestamp": null, "labels": {"run": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx", "args": ["a<b", "&"], "resources": {}}]},
            "status": {}});
        assert_eq!(
            last_applied(&doc, "default"),
            "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"annotations\":{},\"creationTimestamp\":null,\"labels\":{\"run\":\"web\"},\"name\":\"web\",\"namespace\":\"default\"},\"spec\":{\"containers\":[{\"args\":[\"a\\u003cb\",\"\\u0026\"],\"image\":\"nginx\",\"name\":\"web\",\"resources\":{}}]},\"status\":{}}\n"
        );
        // Applied again from `get -o yaml`: the annotation there is left out.
        let mut again = doc.clone();
        again["metadata"]["annotations"] = json!({LAST_APPLIED: "old", "note": "x"});
        let text = last_applied(&again, "default");
        assert!(text.contains("\"annotations\":{\"note\":\"x\"}"), "{text}");
    }

    #[test]
    fn a_three_way_merge_removes_what_the_last_apply_set_and_keeps_what_others_added() {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let original = map(&[("app", "web"), ("tier", "front")]);
        let modified = map(&[("app", "web2")]);
        let current = map(&[("app", "web"), ("tier", "front"), ("team", "a")]);
        assert_eq!(
            merge(Some(&original), &modified, &current),
            map(&[("app", "web2"), ("team", "a")])
        );
        // No last apply: nothing is removed.
        assert_eq!(
            merge(None, &modified, &current),
            map(&[("app", "web2"), ("tier", "front"), ("team", "a")])
        );
    }
}
