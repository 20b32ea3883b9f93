//! Kubernetes Pods (k8s-openapi's `Pod`) and grace-std's stored objects
//! ([`StoredObject`]), both ways: a manifest's Pod becomes the object a
//! grace store holds ([`to_object`]), and a stored object is shown as a
//! Pod again, with a status from its kill state ([`to_pod`]).
//!
//! The Pod subset grace acts on: `metadata` (`name`, `generateName`, `namespace`, `uid`, `labels`,
//! `finalizers`, `ownerReferences`), `spec.nodeName`, `spec.terminationGracePeriodSeconds`,
//! `spec.restartPolicy` (which exited containers start again, R92),
//! `spec.securityContext` (`runAsUser`, `runAsGroup`, `runAsNonRoot`,
//! `supplementalGroups`), `spec.containers[]` (`name`, `command` + `args`,
//! `env` with values and pod field references, `workingDir`,
//! `securityContext` (`runAsUser`, `runAsGroup`, `runAsNonRoot`),
//! `lifecycle.preStop` and `lifecycle.postStart` as `exec.command` or
//! `sleep.seconds`, `lifecycle.stopSignal`) and native sidecars
//! (`spec.initContainers[]` with `restartPolicy: Always`). Every other field valid in a Pod is accepted,
//! kept with the object ([`StoredObject::manifest`]: the Pod as applied,
//! which [`to_pod`] shows again) and reported by [`ignored_fields`]; a field grace would have to act on
//! and cannot (an HTTP pre-stop hook, an init container that runs to
//! completion, a container without a command, `envFrom`, an environment
//! entry from a ConfigMap or Secret) is refused.

use grace_core::{Name, Record, Strategy};
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, ExecAction, Lifecycle, LifecycleHandler, Pod,
    PodSecurityContext, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use grace_std::api_server::{check_name, check_object_name, generate_name};
use grace_std::runtime::{CONTAINERS, KillRecord};
use grace_std::store::{FINALIZERS, Manifest, OwnerReference, StoredContainer, StoredObject};
use rustix::process::Signal;

/// A field of a Pod that grace refuses, and why. `path` is the field in
/// kubectl's notation (`spec.containers[0].command`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodError {
    /// The field.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

impl PodError {
    pub(crate) fn at(path: impl Into<String>, message: impl std::fmt::Display) -> Self {
        PodError {
            path: path.into(),
            message: message.to_string(),
        }
    }
}

impl std::fmt::Display for PodError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for PodError {}

/// A Pod as grace will store it.
#[derive(Clone, Debug, PartialEq)]
pub struct PodObject {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`, if the manifest gives one (checked: a
    /// DNS-1123 label).
    pub namespace: Option<String>,
    /// The object; its uid is empty when the manifest gave none (the
    /// server assigns one on create, and keeps the stored one on update).
    pub object: StoredObject,
    /// Warnings Kubernetes would give too (a negative grace made 1).
    pub warnings: Vec<String>,
}

/// The fields of a Pod grace acts on, as a tree: `Leaf` is used whole,
/// `Fields` is an object some of whose fields are used (a list applies
/// its tree to every element).
enum Used {
    Leaf,
    Fields(&'static [(&'static str, Used)]),
}

const LIFECYCLE: Used = Used::Fields(&[
    (
        "preStop",
        Used::Fields(&[("exec", Used::Leaf), ("sleep", Used::Leaf)]),
    ),
    (
        "postStart",
        Used::Fields(&[("exec", Used::Leaf), ("sleep", Used::Leaf)]),
    ),
    ("stopSignal", Used::Leaf),
]);

/// A container's `securityContext` fields grace acts on (the others, such
/// as `capabilities`, are accepted and ignored).
const CONTAINER_SECURITY: Used = Used::Fields(&[
    ("runAsUser", Used::Leaf),
    ("runAsGroup", Used::Leaf),
    ("runAsNonRoot", Used::Leaf),
]);

const CONTAINER: &[(&str, Used)] = &[
    ("name", Used::Leaf),
    ("command", Used::Leaf),
    ("args", Used::Leaf),
    ("env", Used::Leaf),
    ("workingDir", Used::Leaf),
    ("securityContext", CONTAINER_SECURITY),
    ("lifecycle", LIFECYCLE),
];

const SIDECAR: &[(&str, Used)] = &[
    ("name", Used::Leaf),
    ("command", Used::Leaf),
    ("args", Used::Leaf),
    ("env", Used::Leaf),
    ("workingDir", Used::Leaf),
    ("securityContext", CONTAINER_SECURITY),
    ("lifecycle", LIFECYCLE),
    ("restartPolicy", Used::Leaf),
];

const POD: Used = Used::Fields(&[
    ("apiVersion", Used::Leaf),
    ("kind", Used::Leaf),
    (
        "metadata",
        Used::Fields(&[
            ("name", Used::Leaf),
            ("generateName", Used::Leaf),
            ("namespace", Used::Leaf),
            ("uid", Used::Leaf),
            ("labels", Used::Leaf),
            ("finalizers", Used::Leaf),
            ("ownerReferences", Used::Leaf),
        ]),
    ),
    (
        "spec",
        Used::Fields(&[
            ("nodeName", Used::Leaf),
            ("terminationGracePeriodSeconds", Used::Leaf),
            ("restartPolicy", Used::Leaf),
            (
                "securityContext",
                Used::Fields(&[
                    ("runAsUser", Used::Leaf),
                    ("runAsGroup", Used::Leaf),
                    ("runAsNonRoot", Used::Leaf),
                    ("supplementalGroups", Used::Leaf),
                ]),
            ),
            ("containers", Used::Fields(CONTAINER)),
            ("initContainers", Used::Fields(SIDECAR)),
        ]),
    ),
]);

/// The fields set in `pod` that grace does not act on (valid Kubernetes,
/// meaningless here), in kubectl's notation with `[*]` for any element:
/// `spec.containers[*].image`, `status`.
pub fn ignored_fields(pod: &Pod) -> Vec<String> {
    let mut found = Vec::new();
    if let Ok(json) = serde_json::to_value(pod) {
        unused(&json, &POD, "", &mut found);
    }
    found.sort();
    found.dedup();
    found
}

fn unused(value: &serde_json::Value, used: &Used, path: &str, found: &mut Vec<String>) {
    let Used::Fields(fields) = used else { return };
    match value {
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                let here = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match fields.iter().find(|(name, _)| name == key) {
                    Some((_, inner)) => unused(value, inner, &here, found),
                    // An empty object is what the serializer writes for an
                    // absent `metadata`: nothing was set.
                    None if value.as_object().is_some_and(|m| m.is_empty()) => {}
                    None => found.push(here),
                }
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                unused(item, used, &format!("{path}[*]"), found);
            }
        }
        _ => {}
    }
}

/// Random numbers for a generated name: each call hashes nothing with a
/// fresh `RandomState`, whose keys std seeds from the system's randomness.
fn random() -> u64 {
    use std::hash::BuildHasher as _;
    std::collections::hash_map::RandomState::new().hash_one(())
}

/// Converts a manifest's Pod into the object grace stores (see the module
/// docs for the subset). A Pod with `metadata.generateName` and no
/// `metadata.name` gets a name as the API server would give it (the prefix
/// and five random characters, see
/// [`generate_name`]).
pub fn to_object(pod: &Pod) -> Result<PodObject, PodError> {
    let meta = &pod.metadata;
    let name = match (&meta.name, &meta.generate_name) {
        (Some(name), _) => {
            check_object_name(name).map_err(|m| PodError::at("metadata.name", m))?;
            name.clone()
        }
        // As the API server: the prefix and five random characters.
        (None, Some(prefix)) if !prefix.is_empty() => {
            let name = generate_name(prefix, random);
            check_object_name(&name).map_err(|m| PodError::at("metadata.generateName", m))?;
            name
        }
        (None, _) => return Err(PodError::at("metadata.name", "Required value")),
    };
    let namespace = match meta.namespace.as_deref() {
        None | Some("") => None,
        Some(namespace) => {
            check_name(namespace).map_err(|m| PodError::at("metadata.namespace", m))?;
            Some(namespace.to_owned())
        }
    };
    let uid = match meta.uid.as_deref() {
        Some("") => return Err(PodError::at("metadata.uid", "must not be empty")),
        Some(uid) => uid,
        None => "",
    };
    let uid = Name::try_from(uid).map_err(|e| PodError::at("metadata.uid", e.to_string()))?;
    let mut record: Record<FINALIZERS> = Record::new(uid);
    let mut warnings = Vec::new();
    let Some(spec) = &pod.spec else {
        return Err(PodError::at("spec", "Required value"));
    };
    record.termination_grace_period_seconds = match spec.termination_grace_period_seconds {
        // The API's default (R18).
        None => Some(30),
        // Kubernetes 1.27+ decodes a negative value as 1.
        Some(s) if s < 0 => {
            warnings.push(format!(
                "spec.terminationGracePeriodSeconds: {s} is negative: taken as 1, as Kubernetes does"
            ));
            Some(1)
        }
        Some(s) => Some(s),
    };
    for (i, f) in meta.finalizers.iter().flatten().enumerate() {
        let field = format!("metadata.finalizers[{i}]");
        if f.is_empty() {
            return Err(PodError::at(field, "must not be empty"));
        }
        if record.finalizers.contains(f) {
            return Err(PodError::at(field, format!("Duplicate value: \"{f}\"")));
        }
        let finalizer =
            Name::try_from(f.as_str()).map_err(|e| PodError::at(&field, e.to_string()))?;
        record
            .finalizers
            .push(finalizer)
            .map_err(|_| PodError::at(field, format!("more than {FINALIZERS} finalizers")))?;
    }
    let labels = meta.labels.clone().unwrap_or_default();
    for (key, value) in &labels {
        check_label(key, value).map_err(|m| PodError::at(format!("metadata.labels.{key}"), m))?;
    }
    if let Some(node) = &spec.node_name {
        check_name(node).map_err(|m| PodError::at("spec.nodeName", m))?;
    }
    if spec.containers.is_empty() {
        return Err(PodError::at("spec.containers", "Required value"));
    }
    let mut containers = Vec::new();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let path = format!("spec.initContainers[{i}]");
        if c.restart_policy.as_deref() != Some("Always") {
            return Err(PodError::at(
                format!("{path}.restartPolicy"),
                "grace runs native sidecars only (restartPolicy: Always), not init containers that run to completion",
            ));
        }
        containers.push(container(c, spec, &path, true)?);
    }
    for (i, c) in spec.containers.iter().enumerate() {
        let path = format!("spec.containers[{i}]");
        if let Some(policy) = &c.restart_policy {
            return Err(PodError::at(
                format!("{path}.restartPolicy"),
                format!("Forbidden: may not be set for a container ({policy})"),
            ));
        }
        containers.push(container(c, spec, &path, false)?);
    }
    for (i, c) in containers.iter().enumerate() {
        if containers.iter().take(i).any(|other| other.name == c.name) {
            return Err(PodError::at(
                "spec.containers",
                format!("Duplicate value: container name \"{}\"", c.name),
            ));
        }
    }
    if containers.len() > CONTAINERS {
        return Err(PodError::at(
            "spec.containers",
            format!("grace runs at most {CONTAINERS} containers (sidecars included) per Pod"),
        ));
    }
    let mut object = match &spec.node_name {
        Some(node) => StoredObject::on_node(record, node.clone()),
        None => StoredObject::unscheduled(record),
    };
    object.strategy = Strategy::POD;
    object.containers = containers;
    object.labels = labels;
    object.owners = owners(meta)?;
    object.manifest = Some(kept(pod));
    object.restart_policy = match spec.restart_policy.as_deref() {
        None => None,
        Some(word) => Some(word.parse().map_err(|_| {
            PodError::at(
                "spec.restartPolicy",
                format!(
                    "Unsupported value: \"{word}\": supported values: \"Always\", \"OnFailure\", \"Never\""
                ),
            )
        })?),
    };
    Ok(PodObject {
        name,
        namespace,
        object,
        warnings,
    })
}

/// The Pod as grace keeps it whole ([`StoredObject::manifest`]): every
/// field as applied but those the stored object holds beside it, which
/// change without a new manifest (the uid, times, labels, finalizers and
/// owner references, the node it is bound to, the grace period as
/// defaulted) and the status.
fn kept(pod: &Pod) -> Manifest {
    let mut pod = pod.clone();
    pod.status = None;
    let meta = &mut pod.metadata;
    meta.name = None;
    meta.uid = None;
    meta.resource_version = None;
    meta.generation = None;
    meta.creation_timestamp = None;
    meta.deletion_timestamp = None;
    meta.deletion_grace_period_seconds = None;
    meta.finalizers = None;
    meta.owner_references = None;
    meta.labels = None;
    meta.managed_fields = None;
    meta.self_link = None;
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_name = None;
        spec.termination_grace_period_seconds = None;
    }
    Manifest::from_json(&serde_json::to_value(&pod).unwrap_or_default())
}

/// `metadata.ownerReferences`, checked as the API server checks them: a
/// uid and a name each, no uid twice, at most one controller.
fn owners(meta: &ObjectMeta) -> Result<Vec<OwnerReference>, PodError> {
    let mut owners: Vec<OwnerReference> = Vec::new();
    for (i, r) in meta.owner_references.iter().flatten().enumerate() {
        let path = format!("metadata.ownerReferences[{i}]");
        if r.uid.is_empty() {
            return Err(PodError::at(
                format!("{path}.uid"),
                "Invalid value: \"\": uid must not be empty",
            ));
        }
        if r.name.is_empty() {
            return Err(PodError::at(
                format!("{path}.name"),
                "Invalid value: \"\": name must not be empty",
            ));
        }
        if owners.iter().any(|o| o.uid == r.uid) {
            return Err(PodError::at(
                format!("{path}.uid"),
                format!("Duplicate value: \"{}\"", r.uid),
            ));
        }
        if r.controller == Some(true) && owners.iter().any(|o| o.controller == Some(true)) {
            return Err(PodError::at(
                "metadata.ownerReferences",
                "Invalid value: only one reference can have Controller set to true",
            ));
        }
        owners.push(
            OwnerReference::new(&r.api_version, &r.kind, &r.name, &r.uid)
                .with_controller(r.controller)
                .with_block_owner_deletion(r.block_owner_deletion),
        );
    }
    Ok(owners)
}

/// One container of `spec` (`sidecar`: a native sidecar from
/// `initContainers`).
fn container(
    c: &Container,
    spec: &PodSpec,
    path: &str,
    sidecar: bool,
) -> Result<StoredContainer, PodError> {
    check_name(&c.name).map_err(|m| PodError::at(format!("{path}.name"), m))?;
    let named = |argv: &Option<Vec<String>>| {
        argv.as_ref()
            .is_some_and(|a| a.first().is_some_and(|p| !p.is_empty()))
    };
    let command = match (&c.command, &c.args) {
        (Some(command), args) if named(&c.command) => {
            let mut command = command.clone();
            command.extend(args.iter().flatten().cloned());
            command
        }
        // `kubectl run NAME --image=busybox -- sh -c …`: arguments only.
        // With no image they are the whole command line, as for an image
        // with no entrypoint (busybox's).
        (None, Some(args)) if named(&c.args) => args.clone(),
        _ => {
            return Err(PodError::at(
                format!("{path}.command"),
                "Required value: grace runs processes, not images, so the command (or, with no command, args) must name the program",
            ));
        }
    };
    let lifecycle = c.lifecycle.as_ref();
    let pre_stop = lifecycle
        .and_then(|l| l.pre_stop.as_ref())
        .map(|h| hook_line(h, &format!("{path}.lifecycle.preStop")))
        .transpose()?;
    let post_start = lifecycle
        .and_then(|l| l.post_start.as_ref())
        .map(|h| hook_line(h, &format!("{path}.lifecycle.postStart")))
        .transpose()?;
    let env = crate::container_env::env(c, path)?;
    let working_dir = match c.working_dir.as_deref() {
        None | Some("") => None,
        Some(dir) if !dir.starts_with('/') || dir.contains('\0') => {
            return Err(PodError::at(
                format!("{path}.workingDir"),
                format!("Invalid value: \"{dir}\": an absolute path"),
            ));
        }
        Some(dir) => Some(dir.to_owned()),
    };
    let security = crate::container_env::security_context(c, spec, path)?;
    let stop_signal = lifecycle
        .and_then(|l| l.stop_signal.as_deref())
        .map(|s| {
            signal_number(s).ok_or_else(|| {
                PodError::at(
                    format!("{path}.lifecycle.stopSignal"),
                    format!("Unsupported value: \"{s}\" (a signal name such as SIGTERM, SIGINT, SIGQUIT, SIGUSR1)"),
                )
            })
        })
        .transpose()?;
    Ok(StoredContainer::new(c.name.clone(), command)
        .with_pre_stop_hook(pre_stop)
        .with_post_start_hook(post_start)
        .with_sidecar(sidecar)
        .with_stop_signal(stop_signal)
        .with_env(env)
        .with_working_dir(working_dir)
        .with_security_context(security))
}

/// A pre-stop or post-start hook as the shell line grace runs (`sh -c`).
fn hook_line(hook: &LifecycleHandler, path: &str) -> Result<String, PodError> {
    if hook.http_get.is_some() || hook.tcp_socket.is_some() {
        return Err(PodError::at(
            path,
            "grace runs exec and sleep hooks only (no httpGet or tcpSocket)",
        ));
    }
    if let Some(exec) = &hook.exec {
        let argv = exec.command.as_deref().unwrap_or_default();
        if argv.first().is_none_or(String::is_empty) {
            return Err(PodError::at(
                format!("{path}.exec.command"),
                "Required value",
            ));
        }
        // `sh -c LINE` is the line itself (what `grace get` writes back).
        if let [sh, c, line] = argv
            && sh == "sh"
            && c == "-c"
        {
            return Ok(line.clone());
        }
        return Ok(shell_line(argv));
    }
    if let Some(sleep) = &hook.sleep {
        if sleep.seconds < 0 {
            return Err(PodError::at(
                format!("{path}.sleep.seconds"),
                "must be greater than or equal to 0",
            ));
        }
        return Ok(format!("sleep {}", sleep.seconds));
    }
    Err(PodError::at(path, "Required value: exec or sleep"))
}

/// `argv` as one `sh -c` line that runs exactly it.
fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The signals a stop signal is named by, as Kubernetes names them.
const SIGNALS: &[(&str, Signal)] = &[
    ("SIGTERM", Signal::TERM),
    ("SIGINT", Signal::INT),
    ("SIGQUIT", Signal::QUIT),
    ("SIGHUP", Signal::HUP),
    ("SIGUSR1", Signal::USR1),
    ("SIGUSR2", Signal::USR2),
    ("SIGWINCH", Signal::WINCH),
    ("SIGKILL", Signal::KILL),
];

/// `SIGTERM`, `SIGUSR1`, … (or `SIG15`): the signal's number. The name
/// is read as `grace run --stop-signal` reads it (any case; a number).
fn signal_number(name: &str) -> Option<i32> {
    let short = name.strip_prefix("SIG")?.trim().to_ascii_uppercase();
    let short = short.strip_prefix("SIG").unwrap_or(&short);
    let named = SIGNALS
        .iter()
        .find(|(n, _)| n.strip_prefix("SIG") == Some(short))
        .map(|(_, s)| *s);
    named
        .or_else(|| short.parse::<i32>().ok().and_then(Signal::from_named_raw))
        .map(Signal::as_raw)
}

/// The name Kubernetes gives signal `number` (`SIGTERM`).
fn signal_name(number: i32) -> String {
    SIGNALS
        .iter()
        .filter(|(n, _)| *n != "SIGKILL")
        .find(|(_, s)| s.as_raw() == number)
        .map_or_else(|| format!("SIG{number}"), |(n, _)| (*n).to_owned())
}

/// A label as Kubernetes validates it (the same check the agent makes on
/// every request).
pub use grace_std::api_server::check_label;

/// A stored object (stored under the key `name`, see
/// [`ObjectKey`](grace_std::store::ObjectKey)) as Kubernetes shows the
/// Pod: its namespace and name, the manifest's fields (all of them, as
/// applied, when the object keeps its manifest), the server's metadata
/// (`resourceVersion`, `generation`,
/// `creationTimestamp`, `deletionTimestamp`, `deletionGracePeriodSeconds`)
/// and a status (`phase`, `containerStatuses[].state` from the kill state).
pub fn to_pod(name: &str, object: &StoredObject) -> Pod {
    let meta = &object.record;
    let key = name;
    let (namespace, name) = grace_std::store::split_key(key);
    let mut metadata = ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        labels: (!object.labels.is_empty()).then(|| object.labels.clone()),
        creation_timestamp: object.created.and_then(crate::time),
        ..ObjectMeta::default()
    };
    // uid, resourceVersion, generation, the deletion's timestamp and
    // grace, finalizers: as the bridge writes them for a cluster.
    crate::apply_record(meta, &mut metadata);
    metadata.owner_references = (!object.owners.is_empty()).then(|| {
        object
            .owners
            .iter()
            .map(
                |r| k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                    api_version: r.api_version.clone(),
                    kind: r.kind.clone(),
                    name: r.name.clone(),
                    uid: r.uid.clone(),
                    controller: r.controller,
                    block_owner_deletion: r.block_owner_deletion,
                },
            )
            .collect()
    });
    let exec = |hook: &String| LifecycleHandler {
        exec: Some(ExecAction {
            command: Some(vec!["sh".into(), "-c".into(), hook.clone()]),
        }),
        ..LifecycleHandler::default()
    };
    let to_container = |c: &StoredContainer| Container {
        name: c.name.clone(),
        command: Some(c.command.clone()),
        lifecycle: (c.pre_stop.is_some() || c.post_start.is_some() || c.stop_signal.is_some())
            .then(|| Lifecycle {
                pre_stop: c.pre_stop.as_ref().map(exec),
                post_start: c.post_start.as_ref().map(exec),
                stop_signal: c.stop_signal.map(signal_name),
            }),
        restart_policy: c.sidecar.then(|| "Always".to_owned()),
        env: crate::container_env::to_env(c),
        working_dir: c.working_dir.clone(),
        security_context: crate::container_env::to_security_context(c),
        ..Container::default()
    };
    let sidecars: Vec<Container> = object
        .containers
        .iter()
        .filter(|c| c.sidecar)
        .map(to_container)
        .collect();
    let spec = PodSpec {
        node_name: object.node.clone(),
        termination_grace_period_seconds: meta.termination_grace_period_seconds,
        containers: object
            .containers
            .iter()
            .filter(|c| !c.sidecar)
            .map(to_container)
            .collect(),
        init_containers: (!sidecars.is_empty()).then_some(sidecars),
        // The API server's default when the manifest gave none.
        restart_policy: Some(
            object
                .restart_policy
                .unwrap_or(grace_core::RestartPolicy::Always)
                .as_str()
                .to_owned(),
        ),
        security_context: crate::container_env::pod_groups(&object.containers).map(|groups| {
            PodSecurityContext {
                supplemental_groups: Some(groups),
                ..PodSecurityContext::default()
            }
        }),
        ..PodSpec::default()
    };
    let (metadata, spec) = match applied(object) {
        Some(pod) => overlay(pod, metadata, spec),
        None => (metadata, spec),
    };
    let mut status = status(key, object);
    // Each container's image as its spec names it, as the kubelet reports
    // it (grace pulls none: it runs the command).
    let images = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    for image_of in images {
        let statuses = status
            .container_statuses
            .iter_mut()
            .chain(status.init_container_statuses.iter_mut())
            .flatten();
        for s in statuses.filter(|s| s.name == image_of.name) {
            if let Some(image) = &image_of.image {
                s.image.clone_from(image);
            }
        }
    }
    Pod {
        metadata,
        spec: Some(spec),
        status: Some(status),
    }
}

/// The Pod grace keeps whole, if the object has one that reads as a Pod.
fn applied(object: &StoredObject) -> Option<Pod> {
    let value = object.manifest.as_ref()?.to_json().ok()?;
    serde_json::from_value(value).ok()
}

/// The kept Pod with what grace holds beside it written over it (the
/// metadata grace keeps, the node, the grace period): `ours` are those
/// fields as grace shows them.
fn overlay(kept: Pod, ours: ObjectMeta, spec: PodSpec) -> (ObjectMeta, PodSpec) {
    let metadata = ObjectMeta {
        name: ours.name,
        uid: ours.uid,
        resource_version: ours.resource_version,
        generation: ours.generation,
        creation_timestamp: ours.creation_timestamp,
        deletion_timestamp: ours.deletion_timestamp,
        deletion_grace_period_seconds: ours.deletion_grace_period_seconds,
        finalizers: ours.finalizers,
        owner_references: ours.owner_references,
        labels: ours.labels,
        ..kept.metadata
    };
    let (node_name, termination_grace_period_seconds) = (
        spec.node_name.clone(),
        spec.termination_grace_period_seconds,
    );
    let spec = PodSpec {
        node_name,
        termination_grace_period_seconds,
        ..kept.spec.unwrap_or(spec)
    };
    (metadata, spec)
}

/// A stored terminated state as Kubernetes shows it (`None` for another
/// state).
fn terminated(status: &grace_std::store::ContainerStatus) -> Option<ContainerState> {
    let grace_std::store::ContainerStatus::Terminated {
        exit_code,
        reason,
        message,
        started_at,
        finished_at,
    } = status
    else {
        return None;
    };
    Some(ContainerState {
        terminated: Some(ContainerStateTerminated {
            // The kubelet's code for a status it cannot know.
            exit_code: exit_code.unwrap_or(137),
            reason: Some(reason.clone()),
            message: message.clone(),
            started_at: started_at.and_then(crate::time),
            finished_at: finished_at.and_then(crate::time),
            ..ContainerStateTerminated::default()
        }),
        ..ContainerState::default()
    })
}

/// Go's spelling of a whole number of seconds, as the kubelet's back-off
/// message writes it: `10s`, `5m0s`.
fn go_seconds(seconds: u64) -> String {
    if seconds < 60 {
        format!("{seconds}s")
    } else {
        format!("{}m{}s", seconds / 60, seconds % 60)
    }
}

/// The state of container `i` of the pod stored as `key` while it waits
/// out its back-off (R95): `CrashLoopBackOff`, with the kubelet's message.
fn crash_loop_back_off(key: &str, object: &StoredObject, i: usize) -> Option<ContainerState> {
    if object.record.deletion_timestamp.is_some() {
        return None;
    }
    let delay = object.restarts.get(i)?.waiting()?;
    let container = object.containers.get(i)?;
    let (namespace, name) = grace_std::store::split_key(key);
    Some(ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(grace_core::CRASH_LOOP_BACK_OFF.into()),
            message: Some(format!(
                "back-off {} restarting failed container={} pod={name}_{namespace}({})",
                go_seconds(delay.whole_seconds()),
                container.name,
                object.uid()
            )),
        }),
        ..ContainerState::default()
    })
}

/// `status.phase`, the conditions and the start time
/// ([`pod_status`](crate::pod_status)), and each container's state: what
/// its agent reported (with its times), else from the kill state the
/// runtime persisted.
fn status(name: &str, object: &StoredObject) -> PodStatus {
    let record = object
        .agent
        .as_ref()
        .and_then(|state| KillRecord::decode(state).ok());
    let stages: Vec<Option<grace_core::Stage>> = object
        .containers
        .iter()
        .enumerate()
        .map(|(i, _)| {
            record
                .as_ref()
                .and_then(|r| r.lifecycle.containers().get(i).map(|c| c.stage()))
        })
        .collect();
    // What the agent reported (its exit code, why it could not run)
    // comes first; the kill state tells the rest.
    let reported = |i: usize| -> Option<ContainerState> {
        use grace_std::store::ContainerStatus as S;
        if let Some(waiting) = crash_loop_back_off(name, object, i) {
            return Some(waiting);
        }
        match object.status.get(i)? {
            status @ S::Terminated { .. } => terminated(status),
            S::Waiting { reason, message } => Some(ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some(reason.clone()),
                    message: message.clone(),
                }),
                ..ContainerState::default()
            }),
            // Running, or a state this version does not know: the kill
            // state tells.
            _ => None,
        }
    };
    let state = |stage: Option<grace_core::Stage>| {
        use grace_core::Stage;
        match stage {
            _ if !object.record.scheduled => ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some("Unscheduled".into()),
                    message: Some(crate::pod_status::UNSCHEDULED.into()),
                }),
                ..ContainerState::default()
            },
            Some(Stage::Killed) => ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: 137,
                    signal: Some(9),
                    reason: Some("Killed".into()),
                    ..ContainerStateTerminated::default()
                }),
                ..ContainerState::default()
            },
            Some(Stage::Stopped) => ContainerState {
                terminated: Some(ContainerStateTerminated {
                    reason: Some("Stopped".into()),
                    message: Some("the process exited (its exit status is not kept)".into()),
                    ..ContainerStateTerminated::default()
                }),
                ..ContainerState::default()
            },
            // Running, in its pre-stop hook, waiting for its turn or for
            // its stop signal to take effect (and any stage added later).
            Some(_) | None => ContainerState {
                running: Some(ContainerStateRunning::default()),
                ..ContainerState::default()
            },
        }
    };
    let statuses = |sidecar: bool| -> Option<Vec<ContainerStatus>> {
        let list: Vec<ContainerStatus> = object
            .containers
            .iter()
            .zip(&stages)
            .enumerate()
            .filter(|(_, (c, _))| c.sidecar == sidecar)
            .map(|(i, (c, stage))| {
                let mut state = reported(i).unwrap_or_else(|| state(*stage));
                if let (
                    Some(running),
                    Some(grace_std::store::ContainerStatus::Running { started_at }),
                ) = (state.running.as_mut(), object.status.get(i))
                {
                    running.started_at = started_at.and_then(crate::time);
                }
                let restarts = object.restarts.get(i);
                ContainerStatus {
                    name: c.name.clone(),
                    restart_count: restarts
                        .map_or(0, |r| i32::try_from(r.count).unwrap_or(i32::MAX)),
                    last_state: restarts
                        .and_then(|r| r.last_state.as_ref())
                        .and_then(terminated),
                    ready: state.running.is_some() && object.record.deletion_timestamp.is_none(),
                    started: Some(state.running.is_some()),
                    state: Some(state),
                    stop_signal: c.stop_signal.map(signal_name),
                    ..ContainerStatus::default()
                }
            })
            .collect();
        (!list.is_empty()).then_some(list)
    };
    let phase = crate::pod_status::phase(object);
    PodStatus {
        phase: Some(phase.as_str().to_owned()).filter(|p| !p.is_empty()),
        conditions: (object.strategy.kind == grace_core::Kind::Pod)
            .then(|| crate::pod_status::conditions(object)),
        start_time: object.started.and_then(crate::time),
        container_statuses: statuses(false),
        init_container_statuses: statuses(true),
        ..PodStatus::default()
    }
}
