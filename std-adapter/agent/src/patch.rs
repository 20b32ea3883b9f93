//! Patches, as the Kubernetes API server applies them to a Pod's JSON:
//! JSON merge patch (RFC 7386), strategic merge patch (the part kubectl
//! sends for Pods: maps merged with `null` deleting, lists merged by their
//! merge key, `$patch: delete` items, `$deleteFromPrimitiveList` and
//! `$setElementOrder` for finalizers and containers, `$retainKeys`), and
//! JSON patch (RFC 6902: add, remove, replace, move, copy, test).
//!
//! One implementation for both of the agent's front doors: the Kubernetes
//! API's PATCH (`k8s_api`) and `grace patch -p`, which applies the patch
//! to the Pod it reads and stores the result as an update
//! ([`crate::update`] decides what may change). Outside the `k8s-api`
//! feature: it needs `serde_json` only.

use std::fmt;

use serde_json::{Map, Value};

/// The three kinds of patch, by kubectl's `--type` word.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PatchType {
    /// `strategic` (kubectl's default): `application/strategic-merge-patch+json`.
    Strategic,
    /// `merge`: RFC 7386, `application/merge-patch+json`.
    Merge,
    /// `json`: RFC 6902, `application/json-patch+json`.
    Json,
}

impl PatchType {
    /// kubectl's `--type` word: `strategic`, `merge` or `json`.
    pub fn from_word(word: &str) -> Option<PatchType> {
        match word {
            "strategic" => Some(PatchType::Strategic),
            "merge" => Some(PatchType::Merge),
            "json" => Some(PatchType::Json),
            _ => None,
        }
    }

    /// The type a PATCH's `Content-Type` names (parameters ignored).
    pub fn from_content_type(content_type: &str) -> Option<PatchType> {
        match content_type.split(';').next().unwrap_or("").trim() {
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/json-patch+json" => Some(PatchType::Json),
            _ => None,
        }
    }
}

/// Why a patch could not be applied; the document is left as it was.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PatchError {
    /// A strategic merge patch that is not a JSON object.
    NotAnObject,
    /// A JSON patch that is not a list of operations.
    NotAList,
    /// A JSON patch operation without a field it needs (`path`, `value`,
    /// `from`).
    Missing {
        /// The operation (`add`, `move`, ...; empty if it has none).
        op: String,
        /// The missing field.
        field: &'static str,
    },
    /// An operation that is none of RFC 6902's.
    UnknownOperation(String),
    /// A path that is not a JSON pointer, or a bad list index in one.
    BadPath(String),
    /// Nothing at the path (or its parent) in the document.
    NoValue(String),
    /// A `test` operation that did not match.
    TestFailed(String),
}

impl fmt::Display for PatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatchError::NotAnObject => f.write_str("a strategic merge patch is a JSON object"),
            PatchError::NotAList => f.write_str("a JSON patch is a list of operations"),
            PatchError::Missing { op, field } if op.is_empty() => {
                write!(f, "an operation without `{field}`")
            }
            PatchError::Missing { op, field } => write!(f, "`{op}` without `{field}`"),
            PatchError::UnknownOperation(op) => write!(f, "unknown operation {op:?}"),
            PatchError::BadPath(path) => write!(f, "bad path `{path}`"),
            PatchError::NoValue(path) => write!(f, "no value at {path}"),
            PatchError::TestFailed(path) => write!(f, "test failed at {path}"),
        }
    }
}

impl std::error::Error for PatchError {}

/// Applies `patch` of kind `kind` to `target`; on an error `target` is
/// unchanged.
pub fn apply(kind: PatchType, target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    match kind {
        PatchType::Merge => {
            merge(target, patch);
            Ok(())
        }
        PatchType::Strategic => {
            // Applied to a copy: a failure half-way changes nothing.
            let mut doc = target.clone();
            strategic(&mut doc, patch)?;
            *target = doc;
            Ok(())
        }
        PatchType::Json => json_patch(target, patch),
    }
}

/// RFC 7386: objects merge key by key, `null` removes, anything else
/// replaces.
pub fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(map) = target {
        for (key, value) in patch {
            if value.is_null() {
                map.remove(key);
            } else {
                merge(map.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// The merge key of a Pod's list field, by the field's name (k8s.io/api's
/// `patchMergeKey` tags); `None` for a list replaced whole.
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        | "schedulingGates" => "name",
        "ports" => "containerPort",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "ownerReferences" => "uid",
        "hostAliases" | "podIPs" | "hostIPs" => "ip",
        "conditions" => "type",
        "topologySpreadConstraints" => "topologyKey",
        _ => return None,
    })
}

/// Strategic merge patch, as kube-apiserver applies it to a Pod.
pub fn strategic(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let Value::Object(patch) = patch else {
        return Err(PatchError::NotAnObject);
    };
    if patch.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut replaced = patch.clone();
        replaced.remove("$patch");
        *target = Value::Object(replaced);
        return Ok(());
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(map) = target else {
        return Ok(());
    };
    let retain = patch.get("$retainKeys").and_then(Value::as_array).cloned();
    for (key, value) in patch {
        if key == "$retainKeys" || key == "$patch" {
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            let gone = value.as_array().cloned().unwrap_or_default();
            if let Some(Value::Array(list)) = map.get_mut(field) {
                list.retain(|v| !gone.contains(v));
            }
            continue;
        }
        if let Some(field) = key.strip_prefix("$setElementOrder/") {
            order(map, field, value);
            continue;
        }
        if value.is_null() {
            map.remove(key);
            continue;
        }
        let slot = map.entry(key.clone()).or_insert(Value::Null);
        match (slot, value) {
            (Value::Array(live), Value::Array(items)) => list(key, live, items)?,
            (slot @ Value::Object(_), Value::Object(_)) => strategic(slot, value)?,
            (slot, value) => *slot = strip(value),
        }
    }
    if let Some(keep) = retain {
        map.retain(|k, _| keep.iter().any(|r| r.as_str() == Some(k)));
    }
    Ok(())
}

/// A list field merged: by merge key, or as a set of primitives
/// (finalizers), or replaced.
fn list(field: &str, live: &mut Vec<Value>, items: &[Value]) -> Result<(), PatchError> {
    if field == "finalizers" {
        for item in items {
            if !live.contains(item) {
                live.push(item.clone());
            }
        }
        return Ok(());
    }
    let Some(key) = merge_key(field) else {
        *live = items.iter().map(strip).collect();
        return Ok(());
    };
    for item in items {
        let id = item.get(key).cloned().unwrap_or(Value::Null);
        let found = live.iter().position(|l| l.get(key) == Some(&id));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (found, delete) {
            (Some(i), true) => {
                live.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => {
                if let Some(slot) = live.get_mut(i) {
                    strategic(slot, item)?;
                }
            }
            (None, false) => live.push(strip(item)),
        }
    }
    Ok(())
}

/// `$setElementOrder/FIELD`: the named items first, in that order; the
/// others after them, in their order.
fn order(map: &mut Map<String, Value>, field: &str, wanted: &Value) {
    let (Some(Value::Array(live)), Some(wanted)) = (map.get_mut(field), wanted.as_array()) else {
        return;
    };
    let key = merge_key(field);
    let id = |v: &Value| match key {
        Some(k) => v.get(k).cloned().unwrap_or(Value::Null),
        None => v.clone(),
    };
    let mut ordered: Vec<Value> = Vec::with_capacity(live.len());
    for w in wanted {
        let w = id(w);
        if let Some(i) = live.iter().position(|l| id(l) == w) {
            ordered.push(live.remove(i));
        }
    }
    ordered.append(live);
    *live = ordered;
}

/// A patch value without its directives (what is stored).
fn strip(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip).collect()),
        other => other.clone(),
    }
}

/// RFC 6902, applied to a copy: all the operations, or none.
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let ops = patch.as_array().ok_or(PatchError::NotAList)?;
    let mut doc = target.clone();
    for op in ops {
        let field = |f: &str| op.get(f).and_then(Value::as_str).map(str::to_owned);
        let name = field("op").unwrap_or_default();
        let missing = |field: &'static str| PatchError::Missing {
            op: name.clone(),
            field,
        };
        let path = field("path").ok_or_else(|| missing("path"))?;
        let value = || op.get("value").cloned().ok_or_else(|| missing("value"));
        match name.as_str() {
            "add" => add(&mut doc, &path, value()?)?,
            "remove" => drop(remove(&mut doc, &path)?),
            "replace" => {
                remove(&mut doc, &path)?;
                add(&mut doc, &path, value()?)?;
            }
            "move" => {
                let from = field("from").ok_or_else(|| missing("from"))?;
                let moved = remove(&mut doc, &from)?;
                add(&mut doc, &path, moved)?;
            }
            "copy" => {
                let from = field("from").ok_or_else(|| missing("from"))?;
                let copied = doc
                    .pointer(&from)
                    .cloned()
                    .ok_or(PatchError::NoValue(from))?;
                add(&mut doc, &path, copied)?;
            }
            "test" => {
                // An absent member tests equal to `null`, as in the
                // apiserver's json-patch: kube-runtime's `finalizer()`
                // tests `/metadata/finalizers` against `null` before its
                // first add.
                if doc.pointer(&path).unwrap_or(&Value::Null) != &value()? {
                    return Err(PatchError::TestFailed(path));
                }
            }
            _ => return Err(PatchError::UnknownOperation(name)),
        }
    }
    *target = doc;
    Ok(())
}

/// The parent of a JSON pointer and its last token, unescaped.
fn split(path: &str) -> Result<(&str, String), PatchError> {
    let (parent, last) = path
        .rsplit_once('/')
        .ok_or_else(|| PatchError::BadPath(path.to_owned()))?;
    Ok((parent, last.replace("~1", "/").replace("~0", "~")))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, last) = split(path)?;
    match doc.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.insert(last, value);
            Ok(())
        }
        Some(Value::Array(items)) => {
            let at = if last == "-" {
                items.len()
            } else {
                last.parse::<usize>()
                    .map_err(|_| PatchError::BadPath(path.to_owned()))?
            };
            if at > items.len() {
                return Err(PatchError::NoValue(path.to_owned()));
            }
            items.insert(at, value);
            Ok(())
        }
        _ => Err(PatchError::NoValue(parent.to_owned())),
    }
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, PatchError> {
    let (parent, last) = split(path)?;
    let gone = match doc.pointer_mut(parent) {
        Some(Value::Object(map)) => map.remove(&last),
        Some(Value::Array(items)) => last
            .parse::<usize>()
            .ok()
            .filter(|i| *i < items.len())
            .map(|i| items.remove(i)),
        _ => None,
    };
    gone.ok_or_else(|| PatchError::NoValue(path.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_deletes_with_null_and_replaces_lists() {
        let mut doc =
            json!({"metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]}});
        merge(
            &mut doc,
            &json!({"metadata": {"labels": {"a": null, "c": "3"}, "finalizers": null}}),
        );
        assert_eq!(doc, json!({"metadata": {"labels": {"b": "2", "c": "3"}}}));
    }

    #[test]
    fn strategic_merge_patch_merges_containers_by_name_and_finalizers_as_a_set() {
        let mut doc = json!({"metadata": {"finalizers": ["a", "b"]},
            "spec": {"containers": [{"name": "main", "image": "x"}, {"name": "side", "image": "y"}]}});
        let patch = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"], "finalizers": ["c"]},
            "spec": {"$setElementOrder/containers": [{"name": "main"}],
                     "containers": [{"name": "main", "image": "z"}, {"$patch": "delete", "name": "side"}]}});
        strategic(&mut doc, &patch).unwrap();
        assert_eq!(
            doc,
            json!({"metadata": {"finalizers": ["a", "c"]},
            "spec": {"containers": [{"name": "main", "image": "z"}]}})
        );
    }

    #[test]
    fn json_patch_applies_all_or_nothing() {
        let mut doc = json!({"metadata": {"finalizers": ["a"]}});
        let ok = json!([{"op": "add", "path": "/metadata/finalizers/-", "value": "b"},
                        {"op": "remove", "path": "/metadata/finalizers/0"}]);
        json_patch(&mut doc, &ok).unwrap();
        assert_eq!(doc, json!({"metadata": {"finalizers": ["b"]}}));
        let bad = json!([{"op": "remove", "path": "/metadata/finalizers/0"},
                         {"op": "test", "path": "/metadata/x", "value": 1}]);
        assert!(json_patch(&mut doc, &bad).is_err());
        assert_eq!(doc, json!({"metadata": {"finalizers": ["b"]}}));
    }

    /// kube-runtime's `finalizer()` on an object with no finalizers: a
    /// `test` of `null` at the absent member passes, then the add.
    #[test]
    fn a_test_of_null_passes_on_an_absent_member() {
        let mut doc = json!({"metadata": {"name": "p"}});
        let first = json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
                           {"op": "add", "path": "/metadata/finalizers", "value": ["f"]}]);
        json_patch(&mut doc, &first).unwrap();
        assert_eq!(doc, json!({"metadata": {"name": "p", "finalizers": ["f"]}}));
        let again = json!([{"op": "test", "path": "/metadata/finalizers", "value": null}]);
        assert!(json_patch(&mut doc, &again).is_err());
    }
}
