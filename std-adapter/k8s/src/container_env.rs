//! A Pod container's `env` and `securityContext` as grace stores them, and
//! back: the entries and the merged user, with what grace cannot honour
//! refused by field.

use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, ObjectFieldSelector, PodSpec, SecurityContext,
};

use grace_std::store::{self, EnvSource, FIELD_PATHS, is_env_field_path};

use crate::pod_object::PodError;

/// The largest uid or gid Kubernetes accepts.
const ID_MAX: i64 = 2_147_483_647;

/// The container's `env` entries; `envFrom` and the sources grace cannot
/// read (ConfigMaps, Secrets, resources, fields it does not keep) are
/// refused, naming the field.
pub(crate) fn env(c: &Container, path: &str) -> Result<Vec<store::EnvVar>, PodError> {
    if c.env_from.as_ref().is_some_and(|e| !e.is_empty()) {
        return Err(PodError::at(
            format!("{path}.envFrom"),
            "Unsupported value: grace has no ConfigMaps or Secrets to read environment entries from",
        ));
    }
    let mut entries = Vec::new();
    for (i, var) in c.env.iter().flatten().enumerate() {
        let at = format!("{path}.env[{i}]");
        if var.name.is_empty() || var.name.contains(['=', '\0']) {
            return Err(PodError::at(
                format!("{at}.name"),
                format!(
                    "Invalid value: \"{}\": a variable's name is not empty and holds no '='",
                    var.name
                ),
            ));
        }
        let entry = match (&var.value, &var.value_from) {
            (Some(value), Some(_)) if !value.is_empty() => {
                return Err(PodError::at(
                    format!("{at}.valueFrom"),
                    "Invalid value: may not be specified when `value` is not empty",
                ));
            }
            (_, Some(from)) => store::EnvVar::field_ref(&var.name, field_ref(from, &at)?),
            (value, None) => store::EnvVar::value(&var.name, value.clone().unwrap_or_default()),
        };
        if entry.name.contains('\0')
            || matches!(&entry.source, EnvSource::Value(v) if v.contains('\0'))
        {
            return Err(PodError::at(
                format!("{at}.value"),
                "Invalid value: holds a NUL byte",
            ));
        }
        entries.push(entry);
    }
    Ok(entries)
}

/// The field path of a `valueFrom`, if it is a field of the pod grace
/// keeps.
fn field_ref(from: &EnvVarSource, at: &str) -> Result<String, PodError> {
    let refused = |kind: &str, what: &str| {
        PodError::at(
            format!("{at}.valueFrom.{kind}"),
            format!("Unsupported value: grace has no {what} to read the value from"),
        )
    };
    if from.config_map_key_ref.is_some() {
        return Err(refused("configMapKeyRef", "ConfigMaps"));
    }
    if from.secret_key_ref.is_some() {
        return Err(refused("secretKeyRef", "Secrets"));
    }
    if from.resource_field_ref.is_some() {
        return Err(refused("resourceFieldRef", "resource requests or limits"));
    }
    let Some(field) = &from.field_ref else {
        return Err(PodError::at(
            format!("{at}.valueFrom"),
            "Required value: fieldRef",
        ));
    };
    if field.api_version.as_deref().is_some_and(|v| v != "v1") {
        return Err(PodError::at(
            format!("{at}.valueFrom.fieldRef.apiVersion"),
            "Unsupported value: v1",
        ));
    }
    let path = &field.field_path;
    if !is_env_field_path(path) {
        return Err(PodError::at(
            format!("{at}.valueFrom.fieldRef.fieldPath"),
            format!(
                "Unsupported value: \"{path}\": grace sets {}, metadata.labels['KEY'] (it keeps no annotations, service accounts or IPs)",
                FIELD_PATHS.join(", ")
            ),
        ));
    }
    Ok(path.clone())
}

/// The user the container runs as: the pod's `securityContext` with the
/// container's `runAsUser`, `runAsGroup` and `runAsNonRoot` over it.
pub(crate) fn security_context(
    c: &Container,
    spec: &PodSpec,
    path: &str,
) -> Result<store::SecurityContext, PodError> {
    let pod = spec.security_context.as_ref();
    let own = c.security_context.as_ref();
    let id = |value: Option<i64>, field: &str| -> Result<Option<u32>, PodError> {
        match value {
            None => Ok(None),
            Some(v) => u32::try_from(v)
                .ok()
                .filter(|v| i64::from(*v) <= ID_MAX)
                .map(Some)
                .ok_or_else(|| {
                    PodError::at(
                        field,
                        format!("Invalid value: {v}: must be between 0 and {ID_MAX}, inclusive"),
                    )
                }),
        }
    };
    let pick = |mine: Option<i64>, theirs: Option<i64>, name: &str| match mine {
        Some(_) => id(mine, &format!("{path}.securityContext.{name}")),
        None => id(theirs, &format!("spec.securityContext.{name}")),
    };
    let user = pick(
        own.and_then(|s| s.run_as_user),
        pod.and_then(|p| p.run_as_user),
        "runAsUser",
    )?;
    let group = pick(
        own.and_then(|s| s.run_as_group),
        pod.and_then(|p| p.run_as_group),
        "runAsGroup",
    )?;
    let non_root = own
        .and_then(|s| s.run_as_non_root)
        .or_else(|| pod.and_then(|p| p.run_as_non_root));
    let mut groups = Vec::new();
    for (i, g) in pod
        .and_then(|p| p.supplemental_groups.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        let field = format!("spec.securityContext.supplementalGroups[{i}]");
        groups.extend(id(Some(*g), &field)?);
    }
    Ok(store::SecurityContext::default()
        .with_run_as_user(user)
        .with_run_as_group(group)
        .with_supplemental_groups(groups)
        .with_run_as_non_root(non_root))
}

/// The stored entries as a Pod's `env`.
pub(crate) fn to_env(c: &store::StoredContainer) -> Option<Vec<EnvVar>> {
    let list: Vec<EnvVar> = c
        .env
        .iter()
        .map(|var| match &var.source {
            EnvSource::FieldRef(path) => EnvVar {
                name: var.name.clone(),
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        field_path: path.clone(),
                        api_version: None,
                    }),
                    ..EnvVarSource::default()
                }),
                ..EnvVar::default()
            },
            // `Value`, and a source a later version may add.
            source => EnvVar {
                name: var.name.clone(),
                value: match source {
                    EnvSource::Value(v) => Some(v.clone()),
                    _ => None,
                },
                ..EnvVar::default()
            },
        })
        .collect();
    (!list.is_empty()).then_some(list)
}

/// The stored user as the container's `securityContext` (the pod's and
/// the container's merged; `supplementalGroups` has no place there and is
/// shown on the pod by [`pod_groups`]).
pub(crate) fn to_security_context(c: &store::StoredContainer) -> Option<SecurityContext> {
    let sc = &c.security_context;
    let set = sc.run_as_user.is_some() || sc.run_as_group.is_some() || sc.run_as_non_root.is_some();
    set.then(|| SecurityContext {
        run_as_user: sc.run_as_user.map(i64::from),
        run_as_group: sc.run_as_group.map(i64::from),
        run_as_non_root: sc.run_as_non_root,
        ..SecurityContext::default()
    })
}

/// The pod's `supplementalGroups`, as the containers keep them.
pub(crate) fn pod_groups(containers: &[store::StoredContainer]) -> Option<Vec<i64>> {
    containers
        .iter()
        .map(|c| &c.security_context.supplemental_groups)
        .find(|g| !g.is_empty())
        .map(|g| g.iter().copied().map(i64::from).collect())
}
