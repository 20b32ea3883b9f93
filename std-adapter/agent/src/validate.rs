//! The one check of what a request to the agent holds, run by the agent
//! on every request whoever sent it (the CLI, another program, a raw
//! socket), before anything is decided or stored.
//!
//! The CLI's manifest readers (grace-cli's `manifest` and
//! `manifest_file`) check a manifest as it was written, with the
//! field's place in the file; what they produce passes this check. This
//! one checks the object as it is stored: everything the agent relies on
//! when it runs the object (a container names its program, a stop signal
//! is a signal) and nothing that only the agent may write (the kill state,
//! the containers' statuses, a deletion in progress).
//!
//! [`Request::Get`], [`Request::Watch`] and [`Request::Delete`] carry
//! nothing to check here: a name that is not stored is not found, and a
//! delete's options are grace-core's to validate (R6).

use grace_core::{Name, PodPhase, Strategy};

use crate::api::Request;
use crate::runtime::CONTAINERS;
use crate::store::{EnvSource, FIELD_PATHS, StoredContainer, StoredObject, is_env_field_path};

/// A request the agent refuses: the field, in kubectl's notation
/// (`spec.containers[0].command`), and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// The object the request is about (empty if none).
    pub name: String,
    /// The field.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Pod \"{}\" is invalid: {}: {}",
            self.name, self.field, self.message
        )
    }
}

impl std::error::Error for Invalid {}

/// Checks `request`; the first field found wrong is the error.
pub fn request(request: &Request) -> Result<(), Invalid> {
    match request {
        Request::Apply { name, object } => checked(name, object, true),
        Request::Put { name, object, .. } => checked(name, object, false),
        Request::RemoveFinalizer { name, finalizer } => {
            finalizer_name(finalizer).map_err(|message| Invalid {
                name: name.clone(),
                field: "metadata.finalizers".into(),
                message,
            })
        }
        Request::Delete { .. } | Request::Get { .. } | Request::Watch | Request::Status => Ok(()),
    }
}

fn checked(name: &str, object: &StoredObject, uid_required: bool) -> Result<(), Invalid> {
    object_named(name, object, uid_required).map_err(|(field, message)| Invalid {
        name: name.to_owned(),
        field,
        message,
    })
}

/// Checks an object to be stored under `name`: `uid_required` for
/// [`Request::Apply`] (a [`Request::Put`] may leave the uid empty: the
/// agent assigns one). The error is `(field, message)`.
pub fn object_named(
    name: &str,
    object: &StoredObject,
    uid_required: bool,
) -> Result<(), (String, String)> {
    let at = |field: &str, message: String| (field.to_owned(), message);
    grace_std::store::ObjectKey::parse(name).map_err(|e| at(e.field(), e.to_string()))?;
    let record = &object.record;
    if uid_required && record.uid.is_empty() {
        return Err(at("metadata.uid", "Required value".into()));
    }
    if record.deletion_timestamp.is_some() || record.deletion_grace_period_seconds.is_some() {
        return Err(at(
            "metadata.deletionTimestamp",
            "Forbidden: set by the agent when a deletion is accepted, never by a client".into(),
        ));
    }
    if !matches!(
        record.phase,
        PodPhase::Pending | PodPhase::Running | PodPhase::Unset
    ) {
        return Err(at(
            "status.phase",
            "Forbidden: a pod's status is its agent's to write".into(),
        ));
    }
    if let Some(s) = record.termination_grace_period_seconds
        && s < 0
    {
        return Err(at(
            "spec.terminationGracePeriodSeconds",
            format!("must be greater than or equal to 0, got {s}"),
        ));
    }
    for (i, f) in record.finalizers.iter().enumerate() {
        let field = format!("metadata.finalizers[{i}]");
        finalizer_name(f.as_str()).map_err(|m| at(&field, m))?;
        if record.finalizers.iter().take(i).any(|other| other == f) {
            return Err(at(&field, format!("Duplicate value: \"{f}\"")));
        }
    }
    for (key, value) in &object.labels {
        grace_std::api_server::check_label(key, value)
            .map_err(|m| at(&format!("metadata.labels.{key}"), m.to_string()))?;
    }
    if let Some(node) = &object.node {
        grace_std::api_server::check_name(node).map_err(|m| at("spec.nodeName", m.to_string()))?;
    }
    if object.strategy != Strategy::POD && object.strategy != Strategy::GENERIC {
        return Err(at(
            "kind",
            "Unsupported value: a Pod (graceful) or an Object (no graceful strategy)".into(),
        ));
    }
    if object.agent.is_some() {
        return Err(at(
            "agent",
            "Forbidden: the kill state is the agent's to write".into(),
        ));
    }
    if !object.status.is_empty() {
        return Err(at(
            "status.containerStatuses",
            "Forbidden: a pod's status is its agent's to write".into(),
        ));
    }
    if object.started.is_some() {
        return Err(at(
            "status.startTime",
            "Forbidden: a pod's status is its agent's to write".into(),
        ));
    }
    // The Pod as applied is shown and compared as a Pod: it must be one.
    if let Some(manifest) = &object.manifest
        && !manifest.to_json().is_ok_and(|pod| pod.is_object())
    {
        return Err(at(
            "manifest",
            "Invalid value: the object as applied must be a JSON object".into(),
        ));
    }
    containers(object)
}

fn containers(object: &StoredObject) -> Result<(), (String, String)> {
    let at = |field: String, message: String| (field, message);
    if object.strategy == Strategy::GENERIC && !object.containers.is_empty() {
        return Err(at(
            "spec.containers".into(),
            "an Object has no containers (use kind Pod)".into(),
        ));
    }
    if object.containers.len() > CONTAINERS {
        return Err(at(
            "spec.containers".into(),
            format!("grace runs at most {CONTAINERS} containers (sidecars included) per Pod"),
        ));
    }
    for (i, c) in object.containers.iter().enumerate() {
        let path = format!("spec.containers[{i}]");
        grace_std::api_server::check_name(&c.name)
            .map_err(|m| at(format!("{path}.name"), m.to_string()))?;
        if object.containers.iter().take(i).any(|o| o.name == c.name) {
            return Err(at(
                format!("{path}.name"),
                format!("Duplicate value: \"{}\"", c.name),
            ));
        }
        if c.command.first().is_none_or(String::is_empty) {
            return Err(at(
                format!("{path}.command"),
                "Required value: grace runs processes, so the command must name the program".into(),
            ));
        }
        if c.command.iter().any(|a| a.contains('\0')) {
            return Err(at(
                format!("{path}.command"),
                "Invalid value: an argument holds a NUL byte".into(),
            ));
        }
        if let Some(hook) = &c.pre_stop {
            if hook.trim().is_empty() {
                return Err(at(
                    format!("{path}.lifecycle.preStop"),
                    "Required value: the hook's command line is empty".into(),
                ));
            }
            if hook.contains('\0') {
                return Err(at(
                    format!("{path}.lifecycle.preStop"),
                    "Invalid value: the hook's command line holds a NUL byte".into(),
                ));
            }
        }
        run_spec(c, &path)?;
        if let Some(n) = c.stop_signal
            && rustix::process::Signal::from_named_raw(n).is_none()
        {
            return Err(at(
                format!("{path}.lifecycle.stopSignal"),
                format!("Unsupported value: {n} is not a signal"),
            ));
        }
    }
    Ok(())
}

/// What a container runs with besides its command: environment entries
/// (names, and fields the agent can read), working directory, post-start
/// hook.
fn run_spec(c: &StoredContainer, path: &str) -> Result<(), (String, String)> {
    let at = |field: String, message: String| (field, message);
    for (i, var) in c.env.iter().enumerate() {
        if var.name.is_empty() || var.name.contains(['=', '\0']) {
            return Err(at(
                format!("{path}.env[{i}].name"),
                format!(
                    "Invalid value: \"{}\": a variable's name is not empty and holds no '='",
                    var.name
                ),
            ));
        }
        match &var.source {
            EnvSource::Value(v) if v.contains('\0') => {
                return Err(at(
                    format!("{path}.env[{i}].value"),
                    "Invalid value: holds a NUL byte".into(),
                ));
            }
            EnvSource::FieldRef(p) if !is_env_field_path(p) => {
                return Err(at(
                    format!("{path}.env[{i}].valueFrom.fieldRef.fieldPath"),
                    format!(
                        "Unsupported value: \"{p}\": the agent sets {}, metadata.labels['KEY']",
                        FIELD_PATHS.join(", ")
                    ),
                ));
            }
            _ => {}
        }
    }
    if let Some(dir) = &c.working_dir
        && (!dir.starts_with('/') || dir.contains('\0'))
    {
        return Err(at(
            format!("{path}.workingDir"),
            format!("Invalid value: \"{dir}\": an absolute path"),
        ));
    }
    if let Some(hook) = &c.post_start
        && (hook.trim().is_empty() || hook.contains('\0'))
    {
        return Err(at(
            format!("{path}.lifecycle.postStart"),
            "Invalid value: the hook's command line is empty or holds a NUL byte".into(),
        ));
    }
    Ok(())
}

/// A finalizer's name: not empty, short enough to be stored.
fn finalizer_name(finalizer: &str) -> Result<(), String> {
    if finalizer.is_empty() {
        return Err("Required value: a finalizer's name is not empty".into());
    }
    Name::try_from(finalizer)
        .map(|_| ())
        .map_err(|e| format!("Invalid value: \"{finalizer}\": {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::EnvVar;
    use grace_core::Record;

    fn pod() -> StoredObject {
        let record = Record::builder("uid-1").build().expect("a record");
        let mut o = StoredObject::on_node(record, "local");
        o.containers
            .push(StoredContainer::new("app", ["sleep", "1"]));
        o
    }

    fn refused(change: impl FnOnce(&mut StoredObject)) -> String {
        let mut o = pod();
        change(&mut o);
        object_named("web", &o, true).expect_err("refused").0
    }

    #[test]
    fn what_the_cli_refuses_the_agent_refuses_naming_the_field() {
        assert_eq!(
            refused(|o| o.containers[0].command.clear()),
            "spec.containers[0].command"
        );
        assert_eq!(
            refused(|o| o.containers[0].command = vec![String::new()]),
            "spec.containers[0].command"
        );
        assert_eq!(
            refused(|o| o.containers.push(StoredContainer::new("app", ["x"]))),
            "spec.containers[1].name"
        );
        assert_eq!(
            refused(|o| o.containers[0].pre_stop = Some(" ".into())),
            "spec.containers[0].lifecycle.preStop"
        );
        assert_eq!(
            refused(|o| o.containers[0].env = vec![EnvVar::field_ref("IP", "status.podIP")]),
            "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath"
        );
        assert_eq!(
            refused(|o| o.containers[0].env = vec![EnvVar::value("A=B", "c")]),
            "spec.containers[0].env[0].name"
        );
        assert_eq!(
            refused(|o| o.containers[0].working_dir = Some("tmp".into())),
            "spec.containers[0].workingDir"
        );
        assert_eq!(
            refused(|o| o.containers[0].stop_signal = Some(0)),
            "spec.containers[0].lifecycle.stopSignal"
        );
        assert_eq!(
            refused(|o| o.record.termination_grace_period_seconds = Some(-1)),
            "spec.terminationGracePeriodSeconds"
        );
        assert_eq!(refused(|o| o.node = Some("Node A".into())), "spec.nodeName");
        assert_eq!(
            refused(|o| {
                o.labels.insert("a b".into(), "c".into());
            }),
            "metadata.labels.a b"
        );
        assert_eq!(
            refused(|o| o.strategy = Strategy::GENERIC),
            "spec.containers"
        );
        assert_eq!(
            refused(|o| o.status.push(crate::store::ContainerStatus::RUNNING)),
            "status.containerStatuses"
        );
        assert_eq!(
            refused(|o| o.started = Some(grace_core::Timestamp::from_unix_seconds(1))),
            "status.startTime"
        );
        assert_eq!(
            refused(
                |o| o.record.deletion_timestamp = Some(grace_core::Timestamp::from_unix_seconds(1))
            ),
            "metadata.deletionTimestamp"
        );
        assert_eq!(
            refused(|o| o.record.phase = PodPhase::Succeeded),
            "status.phase"
        );
        assert_eq!(
            refused(|o| o.record.uid = Name::try_from("").expect("empty")),
            "metadata.uid"
        );
        assert_eq!(
            object_named("Web", &pod(), true).expect_err("name").0,
            "metadata.name"
        );
        let not_json: crate::store::Manifest =
            serde_json::from_str("\"{not json\"").expect("a string");
        assert_eq!(refused(|o| o.manifest = Some(not_json)), "manifest");
        let mut whole = pod();
        whole.manifest = Some(crate::store::Manifest::from_json(
            &serde_json::json!({"spec": {}}),
        ));
        assert_eq!(object_named("web", &whole, true), Ok(()));
    }

    #[test]
    fn a_put_may_leave_the_uid_to_the_agent_an_apply_may_not() {
        let mut o = pod();
        o.record.uid = Name::try_from("").expect("empty");
        let put = Request::Put {
            name: "web".into(),
            object: Box::new(o.clone()),
            merge: Default::default(),
        };
        assert_eq!(request(&put), Ok(()));
        let apply = Request::Apply {
            name: "web".into(),
            object: Box::new(o),
        };
        let e = request(&apply).expect_err("no uid");
        assert_eq!(
            e.to_string(),
            "Pod \"web\" is invalid: metadata.uid: Required value"
        );
    }
}
