//! `grace patch NAME -p PATCH [--type strategic|merge|json]`, as
//! `kubectl patch`: the patch is applied to the Pod as `grace get -o json`
//! shows it, by the agent library's implementation of the three kinds
//! ([`grace_agent::patch`], the one the Kubernetes API's PATCH uses), and
//! the result is stored as an update of the object ([`grace_agent::update`]
//! decides what may change: labels, annotations, finalizers, owner
//! references, an image). kubectl's answers: `pod/NAME patched`,
//! `pod/NAME patched (no change)`.
//!
//! As kubectl, a patch that reads as JSON (it starts with `{` or `[`) is
//! sent as it is, so its errors are the server's (`Error from server
//! (BadRequest): patch: …`); any other text is read as YAML first
//! (`unable to parse "…": …`).

use std::io::Write;

use grace_agent::patch::{PatchType, apply};
use serde_json::Value;

use crate::apply::{Applied, store_update};
use crate::k8s_pod::{PodError, to_object, to_pod};
use crate::kubectl::{CommandError, Target, fetch, kind_word, not_found};
use crate::namespace::name_of;

/// kubectl's `--type` word read, or its error.
pub fn patch_type(word: &str) -> Result<PatchType, CommandError> {
    PatchType::from_word(word).ok_or_else(|| {
        CommandError::invalid(format!(
            "--type must be one of [json merge strategic], not \"{word}\""
        ))
    })
}

/// `grace patch`: applies `text` (a patch of kind `kind`) to the object
/// stored as `key` and stores the result.
pub fn patch(
    target: Target<'_>,
    key: &str,
    text: &str,
    kind: PatchType,
    out: &mut impl Write,
) -> Result<(), CommandError> {
    let name = name_of(key);
    let current = fetch(target, key)?.ok_or_else(|| CommandError::failed(not_found(key)))?;
    let word = kind_word(&current);
    let patch = read(text)?;
    let before = serde_json::to_value(to_pod(key, &current))
        .map_err(|e| CommandError::failed(format!("the stored pod: {e}")))?;
    let mut doc = before.clone();
    apply(kind, &mut doc, &patch).map_err(|e| invalid(name, &format!("patch: {e}")))?;
    if doc == before {
        let _ = writeln!(out, "{word}/{name} patched (no change)");
        return Ok(());
    }
    let pod: k8s_openapi::api::core::v1::Pod =
        serde_json::from_value(doc).map_err(|e| invalid(name, &format!("patch: {e}")))?;
    if pod.metadata.name.as_deref() != Some(name) {
        return Err(invalid(name, "metadata.name: field is immutable"));
    }
    // The namespace is the key's: the API server refuses another one.
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let namespace = match namespace {
        "" => crate::store::DEFAULT_NAMESPACE,
        ns => ns,
    };
    if namespace != crate::namespace::namespace_of(key) {
        return Err(invalid(name, "metadata.namespace: field is immutable"));
    }
    let mut object = to_object(&pod)
        .map_err(|PodError { path, message }| invalid(name, &format!("{path}: {message}")))?
        .object;
    // The stored manifest has no namespace when the object is in the
    // default one, or one: kept as it was, so the namespace alone is no
    // change.
    if let (Some(was), Some(is)) = (current.manifest.as_ref(), object.manifest.as_mut()) {
        let had = was
            .to_json()
            .ok()
            .and_then(|v| v.pointer("/metadata/namespace").cloned());
        if let Ok(mut json) = is.to_json() {
            if let Some(meta) = json.get_mut("metadata").and_then(Value::as_object_mut) {
                match had {
                    Some(ns) => meta.insert("namespace".into(), ns),
                    None => meta.remove("namespace"),
                };
            }
            *is = crate::store::Manifest::from_json(&json);
        }
    }
    let done = store_update(target, key, object).map_err(|e| match e.code {
        2 => CommandError::invalid(the(&e.message)),
        _ => e,
    })?;
    match done {
        Applied::Unchanged => {
            let _ = writeln!(out, "{word}/{name} patched (no change)");
        }
        Applied::Created | Applied::Configured => {
            let _ = writeln!(out, "{word}/{name} patched");
        }
    }
    Ok(())
}

/// The patch's text as JSON: JSON as it is (its error is the server's),
/// anything else read as YAML first.
fn read(text: &str) -> Result<Value, CommandError> {
    if text.trim_start().starts_with(['{', '[']) {
        return serde_json::from_str(text).map_err(|e| {
            CommandError::invalid(format!("Error from server (BadRequest): patch: {e}"))
        });
    }
    serde_saphyr::from_str::<Value>(text).map_err(|e| {
        // The first line of the report: kubectl's is one line too.
        let report = e.to_string();
        let first = report.lines().next().unwrap_or_default();
        let first = first.strip_prefix("error: ").unwrap_or(first);
        CommandError::invalid(format!("unable to parse \"{text}\": yaml: {first}"))
    })
}

/// kubectl's line for an Invalid answer: `The Pod "web" is invalid: …`.
fn invalid(name: &str, why: &str) -> CommandError {
    CommandError::invalid(format!("The Pod \"{name}\" is invalid: {why}"))
}

/// The agent's Invalid message (`Pod "web" is invalid: …`) as kubectl
/// prints it.
fn the(message: &str) -> String {
    if message.starts_with("Pod \"") {
        format!("The {message}")
    } else {
        message.to_owned()
    }
}
