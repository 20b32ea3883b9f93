//! `grace wait --for=…`: what kubectl's `wait` waits for. `delete` (the
//! object is gone), `create` (it exists), `condition=NAME[=VALUE]` (a
//! `status.conditions` entry, `True` unless a value is given) and
//! `jsonpath=PATH[=VALUE]` (the path finds a value, or this one).

use serde_json::Value;

use crate::jsonpath::{Path, go_sprint};

/// A parsed `--for`.
#[derive(Clone, Debug, PartialEq)]
pub enum WaitFor {
    /// The object is gone.
    Delete,
    /// The object exists.
    Create,
    /// `status.conditions[type=NAME].status` is VALUE (both compared
    /// without regard to case, as kubectl compares them).
    Condition {
        /// The condition's type (`Ready`).
        name: String,
        /// Its status (`True` by default).
        value: String,
    },
    /// The path finds a value (`None`), or finds exactly this one.
    JsonPath {
        /// Where to look.
        path: Path,
        /// What to find there, as kubectl prints it.
        value: Option<String>,
    },
}

impl WaitFor {
    /// `delete`, `create`, `condition=NAME[=VALUE]` or
    /// `jsonpath=PATH[=VALUE]` (kubectl's spellings; quotes around the
    /// value are dropped, as kubectl drops them).
    pub fn parse(text: &str) -> Result<WaitFor, String> {
        match text {
            "delete" => return Ok(WaitFor::Delete),
            "create" => return Ok(WaitFor::Create),
            _ => {}
        }
        if let Some(rest) = text.strip_prefix("condition=") {
            let (name, value) = rest.split_once('=').unwrap_or((rest, "true"));
            if name.is_empty() {
                return Err("condition=: a condition's name is required (condition=Ready)".into());
            }
            return Ok(WaitFor::Condition {
                name: name.to_owned(),
                value: value.to_owned(),
            });
        }
        if let Some(rest) = text.strip_prefix("jsonpath=") {
            // The value follows the last `=` after the path's closing brace
            // (a filter's `==` inside the path is not it).
            let path_end = rest.rfind('}').map_or(0, |i| i.saturating_add(1));
            let (path, value) = match rest.get(path_end..).and_then(|tail| tail.strip_prefix('=')) {
                Some(value) => (rest.get(..path_end).unwrap_or(rest), Some(value)),
                None if path_end == 0 => match rest.split_once('=') {
                    Some((path, value)) => (path, Some(value)),
                    None => (rest, None),
                },
                None => (rest, None),
            };
            let value = value.map(|v| v.trim_matches(['\'', '"']).to_owned());
            if value.as_deref() == Some("") {
                return Err("jsonpath wait has to have a value after equal sign".into());
            }
            let path = Path::parse_relaxed(path).map_err(|e| e.to_string())?;
            return Ok(WaitFor::JsonPath { path, value });
        }
        Err(format!(
            "unrecognized condition: \"{text}\" (delete, create, condition=NAME[=VALUE], jsonpath=PATH[=VALUE])"
        ))
    }

    /// Whether `pod` (its Kubernetes JSON) meets a condition or jsonpath
    /// wait. `delete` and `create` are about whether the object exists,
    /// not about its fields: `false` here.
    pub fn met(&self, pod: &Value) -> Result<bool, String> {
        match self {
            WaitFor::Delete | WaitFor::Create => Ok(false),
            WaitFor::Condition { name, value } => Ok(pod
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|c| {
                    c.get("type")
                        .and_then(Value::as_str)
                        .is_some_and(|t| t.eq_ignore_ascii_case(name))
                        && c.get("status")
                            .and_then(Value::as_str)
                            .is_some_and(|s| s.eq_ignore_ascii_case(value))
                })),
            WaitFor::JsonPath { path, value } => {
                let found = path.find(pod)?;
                match value {
                    None => Ok(!found.is_empty()),
                    Some(value) => match found.as_slice() {
                        [] => Ok(false),
                        [one] => Ok(go_sprint(one) == *value),
                        _ => Err("given jsonpath expression matches more than one value".into()),
                    },
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conditions_and_jsonpath_waits_read_the_pod_as_kubectl_does() {
        let pod = json!({"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "PodScheduled", "status": "True"}
        ], "containerStatuses": [{"restartCount": 0}]}});
        let met = |text: &str| WaitFor::parse(text).and_then(|w| w.met(&pod));
        assert_eq!(met("condition=Ready"), Ok(true));
        assert_eq!(met("condition=ready=true"), Ok(true));
        assert_eq!(met("condition=Ready=False"), Ok(false));
        assert_eq!(met("condition=ContainersReady"), Ok(false));
        assert_eq!(met("jsonpath={.status.phase}=Running"), Ok(true));
        assert_eq!(met("jsonpath={.status.phase}='Running'"), Ok(true));
        assert_eq!(met("jsonpath=.status.phase=Succeeded"), Ok(false));
        assert_eq!(
            met("jsonpath={.status.containerStatuses[0].restartCount}=0"),
            Ok(true)
        );
        assert_eq!(met("jsonpath={.status.phase}"), Ok(true));
        assert_eq!(met("jsonpath={.status.podIP}"), Ok(false));
        assert_eq!(
            met(r#"jsonpath={.status.conditions[?(@.type=="Ready")].status}=True"#),
            Ok(true)
        );
        assert!(met("jsonpath={.status.conditions[*].type}=Ready").is_err());
        assert!(WaitFor::parse("jsonpath={.status.phase}=").is_err());
        assert!(WaitFor::parse("ready").is_err());
        assert_eq!(WaitFor::parse("delete"), Ok(WaitFor::Delete));
        assert_eq!(WaitFor::parse("create"), Ok(WaitFor::Create));
    }
}
