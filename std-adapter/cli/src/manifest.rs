//! Object files for `grace apply -f`: a small JSON manifest shaped like a
//! Kubernetes pod, checked field by field before anything is stored.
//!
//! ```json
//! {
//!   "kind": "Pod",
//!   "metadata": { "name": "web", "finalizers": ["example.com/keep"] },
//!   "spec": {
//!     "nodeName": "node-a",
//!     "terminationGracePeriodSeconds": 10,
//!     "restartPolicy": "OnFailure",
//!     "containers": [
//!       { "name": "app", "command": ["sh", "-c", "exec sleep 1000"],
//!         "preStop": "sleep 2" }
//!     ]
//!   }
//! }
//! ```
//!
//! `kind` is `Pod` (graceful, the default) or `Object` (no graceful
//! strategy: removed at once unless finalizers hold it, R11). Unknown
//! fields are refused, so a misspelt `preStop` is an error, not a pod
//! without its hook.

use grace_core::{Name, Record, Strategy};
use serde::Deserialize;

use crate::field_error::{FieldError, from_json};
use crate::runtime::CONTAINERS;
use crate::store::{FINALIZERS, StoredContainer, StoredObject};

/// The longest object name: a DNS-1123 subdomain's 253 bytes, as
/// Kubernetes allows a pod's name.
pub const NAME_MAX: usize = grace_std::api_server::OBJECT_NAME_MAX;

/// A parsed object file: the name it is stored under and the object.
#[derive(Clone, Debug, PartialEq)]
pub struct Manifest {
    /// `metadata.name`.
    pub name: String,
    /// The object as it will be stored (its uid, when the file gave none,
    /// is generated).
    pub object: StoredObject,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawManifest {
    #[serde(default)]
    kind: RawKind,
    metadata: RawMetadata,
    #[serde(default)]
    spec: RawSpec,
}

#[derive(Deserialize, Default)]
enum RawKind {
    #[default]
    Pod,
    Object,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawMetadata {
    name: String,
    uid: Option<String>,
    #[serde(default)]
    finalizers: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawSpec {
    node_name: Option<String>,
    termination_grace_period_seconds: Option<i64>,
    /// `Always` (the default), `OnFailure` or `Never` (R92).
    restart_policy: Option<grace_core::RestartPolicy>,
    #[serde(default)]
    containers: Vec<RawContainer>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawContainer {
    name: String,
    command: Vec<String>,
    pre_stop: Option<String>,
    #[serde(default)]
    sidecar: bool,
}

/// Parses and checks an object file. `uid` supplies a uid when the file
/// has none.
pub fn parse(text: &str, uid: impl FnOnce() -> String) -> Result<Manifest, FieldError> {
    let raw: RawManifest = from_json(text)?;
    grace_std::api_server::check_object_name(&raw.metadata.name)
        .map_err(|message| FieldError::at("metadata.name", message))?;
    let uid = match raw.metadata.uid {
        Some(uid) if uid.is_empty() => {
            return Err(FieldError::at("metadata.uid", "must not be empty"));
        }
        Some(uid) => uid,
        None => uid(),
    };
    let uid =
        Name::try_from(uid.as_str()).map_err(|e| FieldError::at("metadata.uid", e.to_string()))?;
    let mut meta: Record<FINALIZERS> = Record::new(uid);
    meta.termination_grace_period_seconds = match raw.spec.termination_grace_period_seconds {
        // The API's default (R18).
        None => Some(30),
        Some(s) if s < 0 => {
            return Err(FieldError::at(
                "spec.terminationGracePeriodSeconds",
                format!("must be greater than or equal to 0, got {s}"),
            ));
        }
        Some(s) => Some(s),
    };
    for (i, f) in raw.metadata.finalizers.iter().enumerate() {
        let field = format!("metadata.finalizers[{i}]");
        if f.is_empty() {
            return Err(FieldError::at(field, "must not be empty"));
        }
        if meta.finalizers.contains(f) {
            return Err(FieldError::at(field, format!("duplicate finalizer `{f}`")));
        }
        let name = Name::try_from(f.as_str()).map_err(|e| FieldError::at(&field, e.to_string()))?;
        meta.finalizers
            .push(name)
            .map_err(|_| FieldError::at(field, format!("more than {FINALIZERS} finalizers")))?;
    }
    if let Some(node) = &raw.spec.node_name {
        check_name("spec.nodeName", node)?;
    }
    let strategy = match raw.kind {
        RawKind::Pod => Strategy::POD,
        RawKind::Object => Strategy::GENERIC,
    };
    if matches!(raw.kind, RawKind::Object) && !raw.spec.containers.is_empty() {
        return Err(FieldError::at(
            "spec.containers",
            "an Object has no containers (use kind Pod)",
        ));
    }
    if raw.spec.containers.len() > CONTAINERS {
        return Err(FieldError::at(
            "spec.containers",
            format!("at most {CONTAINERS} containers"),
        ));
    }
    let mut containers: Vec<StoredContainer> = Vec::new();
    for (i, c) in raw.spec.containers.into_iter().enumerate() {
        check_name(&format!("spec.containers[{i}].name"), &c.name)?;
        if containers.iter().any(|other| other.name == c.name) {
            return Err(FieldError::at(
                format!("spec.containers[{i}].name"),
                format!("duplicate container `{}`", c.name),
            ));
        }
        if c.command.first().is_none_or(String::is_empty) {
            return Err(FieldError::at(
                format!("spec.containers[{i}].command"),
                "must name a program",
            ));
        }
        if c.pre_stop.as_deref().is_some_and(|h| h.trim().is_empty()) {
            return Err(FieldError::at(
                format!("spec.containers[{i}].preStop"),
                "must not be empty",
            ));
        }
        // The agent expands `$(NAME)` in a command as the kubelet does
        // (`$$` is a `$`): this format's commands are run as written, so
        // every `$` is escaped.
        let command = c.command.iter().map(|a| a.replace('$', "$$"));
        containers.push(
            StoredContainer::new(c.name, command)
                .with_pre_stop_hook(c.pre_stop)
                .with_sidecar(c.sidecar),
        );
    }
    let mut object = match raw.spec.node_name {
        Some(node) => StoredObject::on_node(meta, node),
        None => StoredObject::unscheduled(meta),
    };
    object.strategy = strategy;
    object.containers = containers;
    object.restart_policy = raw.spec.restart_policy;
    Ok(Manifest {
        name: raw.metadata.name,
        object,
    })
}

/// A DNS-1123 label: lower-case letters, digits and `-`, starting and
/// ending with a letter or digit, at most 63 bytes: a node's or a
/// container's name.
pub fn check_name(field: &str, name: &str) -> Result<(), FieldError> {
    grace_std::api_server::check_name(name).map_err(|message| FieldError::at(field, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uid() -> String {
        "generated-uid".into()
    }

    #[test]
    fn a_pod_file_becomes_a_scheduled_pod_with_its_containers() {
        let m = parse(
            r#"{"metadata":{"name":"web","finalizers":["example.com/keep"]},
                "spec":{"nodeName":"node-a","terminationGracePeriodSeconds":10,
                        "containers":[{"name":"app","command":["sleep","100"],"preStop":"sleep 2"}]}}"#,
            uid,
        )
        .expect("valid");
        assert_eq!(m.name, "web");
        assert_eq!(m.object.uid(), "generated-uid");
        assert!(m.object.record.scheduled);
        assert_eq!(m.object.record.termination_grace_period_seconds, Some(10));
        assert!(m.object.record.finalizers.contains("example.com/keep"));
        assert_eq!(m.object.node.as_deref(), Some("node-a"));
        assert_eq!(m.object.containers[0].pre_stop.as_deref(), Some("sleep 2"));
        assert_eq!(m.object.restart_policy, None, "Always, the default");
    }

    #[test]
    fn r92_a_pod_file_names_its_restart_policy_in_kubernetes_words() {
        let file = |policy: &str| {
            format!(
                r#"{{"metadata":{{"name":"web"}},"spec":{{"restartPolicy":"{policy}",
                    "containers":[{{"name":"app","command":["true"]}}]}}}}"#
            )
        };
        let m = parse(&file("OnFailure"), uid).expect("valid");
        assert_eq!(
            m.object.restart_policy,
            Some(grace_core::RestartPolicy::OnFailure)
        );
        assert!(parse(&file("always"), uid).is_err(), "case-sensitive");
    }

    #[test]
    fn commands_run_as_written_their_dollars_escaped_for_the_agents_expansion() {
        let m = parse(
            r#"{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","command":["sh","-c","echo $$ $(x)"]}]}}"#,
            uid,
        )
        .expect("valid");
        assert_eq!(
            m.object.containers[0].command,
            ["sh", "-c", "echo $$$$ $$(x)"]
        );
    }

    #[test]
    fn r18_a_missing_grace_defaults_to_30_seconds() {
        let m = parse(r#"{"metadata":{"name":"a"}}"#, uid).expect("valid");
        assert_eq!(m.object.record.termination_grace_period_seconds, Some(30));
        assert!(!m.object.record.scheduled, "no nodeName: unscheduled");
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (r#"{"metadata":{"name":"Web"}}"#, "metadata.name"),
            (r#"{"metadata":{"name":"a","uid":""}}"#, "metadata.uid"),
            (
                r#"{"metadata":{"name":"a"},"spec":{"terminationGracePeriodSeconds":-1}}"#,
                "spec.terminationGracePeriodSeconds",
            ),
            (
                r#"{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","command":["x"],"prestop":"y"}]}}"#,
                "spec.containers[0].prestop",
            ),
            (
                r#"{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","command":[]}]}}"#,
                "spec.containers[0].command",
            ),
            (
                r#"{"metadata":{"name":"a","finalizers":["x","x"]}}"#,
                "metadata.finalizers[1]",
            ),
            (r#"{"kind":"Deployment","metadata":{"name":"a"}}"#, "kind"),
        ];
        for (text, field) in cases {
            let e = parse(text, uid).expect_err(text);
            assert_eq!(e.field, field, "{text}: {e}");
        }
    }

    #[test]
    fn truncated_json_reports_line_and_column() {
        let e = parse("{\n  \"metadata\": {\"name\": \"a\"", uid).expect_err("truncated");
        assert_eq!(e.position.map(|(line, _)| line), Some(2), "{e}");
    }
}
