//! How a stored container's process is run, beside its command: its
//! environment entries, its working directory and the user it runs as
//! (`env`, `workingDir` and the `securityContext` of a Pod, as grace keeps
//! them). The agent turns them into the process's environment and identity
//! when it starts the container (`process`'s launch).

use serde::{Deserialize, Serialize};

/// One environment entry of a container (`env[]`), in declaration order:
/// a value, or a field of the container's own pod read when the process
/// starts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EnvVar {
    /// The variable's name.
    pub name: String,
    /// Where its value comes from.
    #[serde(flatten)]
    pub source: EnvSource,
}

impl EnvVar {
    /// `name=value`; `value` may refer to earlier entries as `$(NAME)`
    /// (`$$` is a `$`), expanded when the process starts.
    pub fn value(name: impl Into<String>, value: impl Into<String>) -> Self {
        EnvVar {
            name: name.into(),
            source: EnvSource::Value(value.into()),
        }
    }

    /// `name` set from the pod's field `path` (`metadata.name`, see
    /// [`FIELD_PATHS`]) when the process starts.
    pub fn field_ref(name: impl Into<String>, path: impl Into<String>) -> Self {
        EnvVar {
            name: name.into(),
            source: EnvSource::FieldRef(path.into()),
        }
    }
}

/// Where an environment entry's value comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum EnvSource {
    /// A value (`env[].value`), `$(NAME)` references expanded.
    Value(String),
    /// A field of the pod (`env[].valueFrom.fieldRef.fieldPath`).
    FieldRef(String),
}

/// The pod fields an environment entry may be set from, besides
/// `metadata.labels['KEY']`: what a process can know of its own pod.
/// (Kubernetes also offers `metadata.annotations['KEY']`,
/// `spec.serviceAccountName` and the pod's and host's IPs: grace keeps
/// none of them, and refuses them.)
pub const FIELD_PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
];

/// Whether `path` is a field an environment entry may be set from
/// ([`FIELD_PATHS`], or `metadata.labels['KEY']`).
pub fn is_env_field_path(path: &str) -> bool {
    FIELD_PATHS.contains(&path) || label_key(path).is_some()
}

/// The key of a `metadata.labels['KEY']` field path.
pub fn label_key(path: &str) -> Option<&str> {
    let key = path.strip_prefix("metadata.labels['")?.strip_suffix("']")?;
    (!key.is_empty() && !key.contains('\'')).then_some(key)
}

/// The user and groups a container's process runs as: the pod's
/// `securityContext` merged with the container's own (a container's
/// `runAsUser`, `runAsGroup` and `runAsNonRoot` override the pod's;
/// `supplementalGroups` is the pod's only), as the kubelet merges them.
/// All empty: the process runs as the agent's user.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SecurityContext {
    /// The uid (`runAsUser`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_user: Option<u32>,
    /// The primary gid (`runAsGroup`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_group: Option<u32>,
    /// More groups (`supplementalGroups`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supplemental_groups: Vec<u32>,
    /// The process must not run as uid 0 (`runAsNonRoot`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_non_root: Option<bool>,
}

impl SecurityContext {
    /// Nothing set: the agent's user.
    pub fn is_empty(&self) -> bool {
        *self == SecurityContext::default()
    }

    /// The same context running as `uid` (or the default).
    #[must_use]
    pub fn with_run_as_user(mut self, uid: Option<u32>) -> Self {
        self.run_as_user = uid;
        self
    }

    /// The same context with primary group `gid` (or the default).
    #[must_use]
    pub fn with_run_as_group(mut self, gid: Option<u32>) -> Self {
        self.run_as_group = gid;
        self
    }

    /// The same context with these supplementary groups.
    #[must_use]
    pub fn with_supplemental_groups(mut self, groups: Vec<u32>) -> Self {
        self.supplemental_groups = groups;
        self
    }

    /// The same context with `runAsNonRoot` set (or not).
    #[must_use]
    pub fn with_run_as_non_root(mut self, non_root: Option<bool>) -> Self {
        self.run_as_non_root = non_root;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_entries_are_stored_as_kubernetes_writes_them() {
        let env = vec![
            EnvVar::value("GREETING", "hello"),
            EnvVar::field_ref("POD", "metadata.name"),
        ];
        let json = serde_json::to_string(&env).expect("encodes");
        assert_eq!(
            json,
            r#"[{"name":"GREETING","value":"hello"},{"name":"POD","fieldRef":"metadata.name"}]"#
        );
        let back: Vec<EnvVar> = serde_json::from_str(&json).expect("decodes");
        assert_eq!(back, env);
    }

    #[test]
    fn label_paths_name_one_key() {
        assert_eq!(label_key("metadata.labels['app']"), Some("app"));
        assert_eq!(label_key("metadata.labels['']"), None);
        assert_eq!(label_key("metadata.labels"), None);
        assert!(is_env_field_path("spec.nodeName"));
        assert!(!is_env_field_path("status.podIP"));
        assert!(!is_env_field_path("metadata.annotations['a']"));
    }
}
