//! What the store keeps under a name: the object's deletion metadata, where
//! it runs, its containers, the runtime's opaque kill state, and the whole
//! object as it was applied.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use grace_core::{ContainerSpec, Record, RestartPolicy, Strategy, Timestamp};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::container_run::{EnvVar, SecurityContext};
use super::manifest::Manifest;
use super::restarts::ContainerRestarts;

/// The finalizer capacity of stored records: an object with more
/// finalizers than this cannot be stored (it fails to decode as
/// [`StoreError::Corrupt`](super::StoreError::Corrupt)).
pub const FINALIZERS: usize = 16;

/// One stored object. Serialized as JSON by the durable backends.
///
/// Every field but `record` defaults when absent, so objects written by an
/// older version still decode. Built with [`StoredObject::on_node`] or
/// [`StoredObject::unscheduled`], then its fields set (more may come).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StoredObject {
    /// The deletion-relevant metadata. A store overwrites
    /// `record.resource_version` with the [`Revision`](super::Revision) of
    /// each write, as the Kubernetes API server does with etcd's
    /// modification revision.
    // Stored under its first name, `meta`: objects written before keep
    // decoding, and the JSON the agent's API sends keeps its shape.
    #[serde(rename = "meta")]
    pub record: Record<FINALIZERS>,
    /// How the object's type is deleted (pod or generic); pods by default.
    #[serde(default)]
    pub strategy: Strategy,
    /// The node the object is bound to; `None` while unscheduled. This is
    /// the truth for `record.scheduled`: the runtime sets that from it, so an
    /// object with no node is an unscheduled pod, which a delete removes at
    /// once with no signals (R19). [`StoredObject::on_node`] and
    /// [`StoredObject::unscheduled`] keep the two in step.
    #[serde(default)]
    pub node: Option<String>,
    /// The containers, in declaration order.
    #[serde(default)]
    pub containers: Vec<StoredContainer>,
    /// `metadata.labels`: what `grace get -l` and `delete -l` select on.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// `metadata.creationTimestamp`: when the object was created (whole
    /// seconds), for `grace get`'s AGE; `None` for objects stored before it
    /// was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<Timestamp>,
    /// The runtime's persisted kill state. Opaque to the store: it is kept
    /// and returned as it was written.
    #[serde(default)]
    pub agent: Option<KillState>,
    /// What the agent last reported of each container, in declaration
    /// order (`status.containerStatuses[].state`); a container with no
    /// entry has not been started yet (`Waiting`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status: Vec<ContainerStatus>,
    /// When its agent first reported on it, as it took it to run
    /// (`status.startTime`, whole seconds); `None` until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<Timestamp>,
    /// `metadata.ownerReferences`: the objects this one depends on. The
    /// garbage collector ([`crate::gc`]) deletes it once none of them is
    /// left, and a foreground deletion of an owner waits for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owners: Vec<OwnerReference>,
    /// The whole object as it was last applied (`grace apply`): what it
    /// reads back as, fields grace does not act on included; `None` for an
    /// object made otherwise (`grace run`) or stored before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<Manifest>,
    /// `spec.restartPolicy`: which exited containers its agent starts
    /// again (R92); `None` when not given, which is `Always`, the API
    /// server's default.
    #[serde(
        rename = "restartPolicy",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub restart_policy: Option<RestartPolicy>,
    /// Each container's restarts, in declaration order; a container with
    /// no entry was never restarted and waits for none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restarts: Vec<ContainerRestarts>,
}

/// One entry of `metadata.ownerReferences`: an object the holder depends
/// on, named by its uid (what the garbage collector matches), with the
/// fields Kubernetes keeps beside it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct OwnerReference {
    /// The owner's `apiVersion` (`v1`).
    pub api_version: String,
    /// The owner's kind (`Pod`).
    pub kind: String,
    /// The owner's name.
    pub name: String,
    /// The owner's uid: the reference holds while an object with this uid
    /// is stored.
    pub uid: String,
    /// Whether the owner is the managing controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
    /// Whether a foreground deletion of the owner waits for this
    /// dependent to be gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_owner_deletion: Option<bool>,
}

impl OwnerReference {
    /// A reference to the owner `kind`/`name` with uid `uid`, neither
    /// controller nor blocking.
    pub fn new(
        api_version: impl Into<String>,
        kind: impl Into<String>,
        name: impl Into<String>,
        uid: impl Into<String>,
    ) -> Self {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            controller: None,
            block_owner_deletion: None,
        }
    }

    /// The same reference with `controller` set (or unset).
    #[must_use]
    pub fn with_controller(mut self, controller: Option<bool>) -> Self {
        self.controller = controller;
        self
    }

    /// The same reference with `blockOwnerDeletion` set (or unset).
    #[must_use]
    pub fn with_block_owner_deletion(mut self, block: Option<bool>) -> Self {
        self.block_owner_deletion = block;
        self
    }

    /// Whether a foreground deletion of the owner waits for the dependent.
    pub fn blocks(&self) -> bool {
        self.block_owner_deletion == Some(true)
    }
}

/// A container's state as its agent reports it, in Kubernetes' words
/// (`ContainerState`): waiting, running since when, or terminated with its
/// exit code, the reason (`Completed`, `Error`, `ContainerCannotRun`,
/// `ContainerStatusUnknown`) and its times.
///
/// The times are the agent's wall clock in whole seconds, as Kubernetes
/// keeps them; the runtime fills in those left `None`
/// ([`Runtime::set_container_status`](crate::runtime::Runtime::set_container_status)).
/// Statuses written before the times were kept (`"running"`) still decode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "compat::StatusForm")]
#[non_exhaustive]
pub enum ContainerStatus {
    /// Not started yet.
    Waiting {
        /// Why (`ContainerCreating`, or `CreateContainerConfigError`: the
        /// pod asks for what the agent must not do).
        reason: String,
        /// What is wrong, if something is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// Its process runs.
    Running {
        /// When its process started (`state.running.startedAt`).
        #[serde(rename = "startedAt", default, skip_serializing_if = "Option::is_none")]
        started_at: Option<Timestamp>,
    },
    /// Its process has ended, or could not be started.
    Terminated {
        /// The exit code (128 + the signal that ended it); `None` when
        /// unknown (a process that ended while no agent ran, whose waiter
        /// ended with it and kept no status).
        #[serde(rename = "exitCode")]
        exit_code: Option<i32>,
        /// `Completed` (exit code 0), `Error`, `ContainerCannotRun` (it
        /// could not be started) or `ContainerStatusUnknown`.
        reason: String,
        /// Why it could not be started, if so.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        /// When the process had started (`None`: it never ran, or its
        /// start is not known).
        #[serde(rename = "startedAt", default, skip_serializing_if = "Option::is_none")]
        started_at: Option<Timestamp>,
        /// When it ended, or could not be started.
        #[serde(
            rename = "finishedAt",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        finished_at: Option<Timestamp>,
    },
}

impl ContainerStatus {
    /// A running process, its start time to be filled in.
    pub const RUNNING: ContainerStatus = ContainerStatus::Running { started_at: None };

    /// The status of a process that exited with `code` (`None`: unknown),
    /// its times to be filled in.
    pub fn exited(code: Option<i32>) -> Self {
        let reason = match code {
            Some(0) => "Completed",
            Some(_) => "Error",
            None => "ContainerStatusUnknown",
        };
        ContainerStatus::Terminated {
            exit_code: code,
            reason: reason.to_owned(),
            message: None,
            started_at: None,
            finished_at: None,
        }
    }

    /// This status with its end set to `at` (when given, and if it is an
    /// end): an exit known to have happened earlier than it is reported.
    pub(crate) fn finished_at(self, at: Option<Timestamp>) -> Self {
        match (self, at) {
            (
                ContainerStatus::Terminated {
                    exit_code,
                    reason,
                    message,
                    started_at,
                    finished_at: _,
                },
                Some(at),
            ) => ContainerStatus::Terminated {
                exit_code,
                reason,
                message,
                started_at,
                finished_at: Some(at),
            },
            (status, _) => status,
        }
    }

    /// The status of a container the agent will not start as its pod
    /// asks (`runAsNonRoot` with uid 0, a field its environment cannot be
    /// set from): waiting, as the kubelet reports a
    /// `CreateContainerConfigError`.
    pub fn config_error(message: String) -> Self {
        ContainerStatus::Waiting {
            reason: "CreateContainerConfigError".to_owned(),
            message: Some(message),
        }
    }

    /// The status of a container whose process could not be started.
    pub fn cannot_run(message: String) -> Self {
        ContainerStatus::Terminated {
            exit_code: Some(128),
            reason: "ContainerCannotRun".to_owned(),
            message: Some(message),
            started_at: None,
            finished_at: None,
        }
    }

    /// Whether the process runs.
    pub fn is_running(&self) -> bool {
        matches!(self, ContainerStatus::Running { .. })
    }

    /// This status with the times it leaves `None` filled in, reported at
    /// `now` after `previous`: a process still running keeps its start; one
    /// that starts now starts at `now`; an exit keeps the start of the run
    /// it ends and finishes at `now`, unless `previous` already reported
    /// the same exit (then its times stay).
    pub(crate) fn stamped(self, previous: Option<&ContainerStatus>, now: Timestamp) -> Self {
        use ContainerStatus as S;
        match (self, previous) {
            (S::Running { started_at: None }, Some(S::Running { started_at })) => S::Running {
                started_at: started_at.or(Some(now)),
            },
            (S::Running { started_at: None }, _) => S::Running {
                started_at: Some(now),
            },
            (
                S::Terminated {
                    exit_code,
                    reason,
                    message,
                    started_at,
                    finished_at,
                },
                previous,
            ) => {
                let (ran, ended) = match previous {
                    Some(S::Running { started_at }) => (*started_at, None),
                    Some(S::Terminated {
                        exit_code: c,
                        reason: r,
                        started_at,
                        finished_at,
                        ..
                    }) if *c == exit_code && *r == reason => (*started_at, *finished_at),
                    _ => (None, None),
                };
                S::Terminated {
                    exit_code,
                    reason,
                    message,
                    started_at: started_at.or(ran),
                    finished_at: finished_at.or(ended).or(Some(now)),
                }
            }
            (status, _) => status,
        }
    }
}

/// Reading statuses in the form written before the times were kept.
mod compat {
    use grace_core::Timestamp;
    use serde::Deserialize;

    use super::ContainerStatus;

    /// A stored status: the bare word `"running"` of older versions, or
    /// the tagged form.
    #[derive(Deserialize)]
    #[serde(untagged)]
    pub(super) enum StatusForm {
        Word(Word),
        Tagged(Tagged),
    }

    /// The only status older versions wrote as a bare word.
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub(super) enum Word {
        Running,
    }

    /// [`ContainerStatus`]'s own form.
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub(super) enum Tagged {
        Waiting {
            reason: String,
            #[serde(default)]
            message: Option<String>,
        },
        Running {
            #[serde(rename = "startedAt", default)]
            started_at: Option<Timestamp>,
        },
        Terminated {
            #[serde(rename = "exitCode")]
            exit_code: Option<i32>,
            reason: String,
            #[serde(default)]
            message: Option<String>,
            #[serde(rename = "startedAt", default)]
            started_at: Option<Timestamp>,
            #[serde(rename = "finishedAt", default)]
            finished_at: Option<Timestamp>,
        },
    }

    impl From<StatusForm> for ContainerStatus {
        fn from(form: StatusForm) -> Self {
            match form {
                StatusForm::Word(Word::Running) => ContainerStatus::RUNNING,
                StatusForm::Tagged(Tagged::Waiting { reason, message }) => {
                    ContainerStatus::Waiting { reason, message }
                }
                StatusForm::Tagged(Tagged::Running { started_at }) => {
                    ContainerStatus::Running { started_at }
                }
                StatusForm::Tagged(Tagged::Terminated {
                    exit_code,
                    reason,
                    message,
                    started_at,
                    finished_at,
                }) => ContainerStatus::Terminated {
                    exit_code,
                    reason,
                    message,
                    started_at,
                    finished_at,
                },
            }
        }
    }
}

impl StoredObject {
    /// A pod bound to `node`, whose agent there stops it
    /// (`record.scheduled` is set), with no containers yet and no agent
    /// state.
    ///
    /// ```
    /// use grace_core::Record;
    /// use grace_std::store::{StoredContainer, StoredObject};
    ///
    /// let mut web = StoredObject::on_node(Record::builder("uid-web-0").build()?, "node-a");
    /// web.containers.push(StoredContainer::new("app", ["sleep", "1000"]));
    /// assert!(web.record.scheduled && web.node.as_deref() == Some("node-a"));
    /// # Ok::<(), grace_core::Error>(())
    /// ```
    pub fn on_node(meta: Record<FINALIZERS>, node: impl Into<String>) -> Self {
        let mut object = StoredObject::unscheduled(meta);
        object.record.scheduled = true;
        object.node = Some(node.into());
        object
    }

    /// An object bound to no node (`record.scheduled` is cleared to match):
    /// a pod not scheduled yet, which a delete removes at once with no
    /// signals (R19), or an object of a type with no agent. No containers,
    /// no agent state.
    pub fn unscheduled(meta: Record<FINALIZERS>) -> Self {
        let mut meta = meta;
        meta.scheduled = false;
        StoredObject {
            record: meta,
            strategy: Strategy::POD,
            node: None,
            containers: Vec::new(),
            labels: BTreeMap::new(),
            created: None,
            agent: None,
            status: Vec::new(),
            started: None,
            owners: Vec::new(),
            manifest: None,
            restart_policy: None,
            restarts: Vec::new(),
        }
    }

    /// The uid of the object (`record.uid`).
    pub fn uid(&self) -> &str {
        self.record.uid.as_str()
    }
}

/// One container of a stored object.
///
/// Fields may be added (the container has grown before): outside this
/// crate build one with [`StoredContainer::new`] or
/// [`StoredContainer::named`] and the `with_*` methods.
#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StoredContainer {
    /// The container's name, unique within the object.
    pub name: String,
    /// The pre-stop hook's command line (run by `sh -c`), if any.
    #[serde(default)]
    pub pre_stop: Option<String>,
    /// A sidecar: stopped after the main containers, in reverse order (R69).
    #[serde(default)]
    pub sidecar: bool,
    /// The workload's command and arguments.
    #[serde(default)]
    pub command: Vec<String>,
    /// The container's own stop signal (`lifecycle.stopSignal`, a signal
    /// number); `None`: the actuator's (SIGTERM unless configured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_signal: Option<i32>,
    /// The process's environment entries (`env`), in order; the process
    /// gets these (and `HOSTNAME`, `PATH` and `HOME` unless set here) and
    /// nothing of the agent's own environment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// The directory the process starts in (`workingDir`), created if
    /// missing; `None`: the agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    /// The user and groups the process runs as (`securityContext`, the
    /// pod's merged with the container's); empty: the agent's user.
    #[serde(default, skip_serializing_if = "SecurityContext::is_empty")]
    pub security_context: SecurityContext,
    /// The post-start hook's command line (run by `sh -c`) once the
    /// process started (`lifecycle.postStart.exec`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_start: Option<String>,
}

impl Clone for StoredContainer {
    fn clone(&self) -> Self {
        StoredContainer {
            name: self.name.clone(),
            pre_stop: self.pre_stop.clone(),
            sidecar: self.sidecar,
            command: self.command.clone(),
            stop_signal: self.stop_signal,
            env: self.env.clone(),
            working_dir: self.working_dir.clone(),
            security_context: self.security_context.clone(),
            post_start: self.post_start.clone(),
        }
    }

    /// Field by field, keeping the strings' allocations (the runtime
    /// fills its writes in place so).
    fn clone_from(&mut self, source: &Self) {
        let StoredContainer {
            name,
            pre_stop,
            sidecar,
            command,
            stop_signal,
            env,
            working_dir,
            security_context,
            post_start,
        } = source;
        self.name.clone_from(name);
        self.pre_stop.clone_from(pre_stop);
        self.sidecar = *sidecar;
        self.command.clone_from(command);
        self.stop_signal = *stop_signal;
        self.env.clone_from(env);
        self.working_dir.clone_from(working_dir);
        self.security_context.clone_from(security_context);
        self.post_start.clone_from(post_start);
    }
}

impl StoredContainer {
    /// A main container named `name` running `command`, with no pre-stop
    /// hook.
    pub fn new<A: Into<String>>(
        name: impl Into<String>,
        command: impl IntoIterator<Item = A>,
    ) -> Self {
        StoredContainer {
            name: name.into(),
            pre_stop: None,
            sidecar: false,
            command: command.into_iter().map(Into::into).collect(),
            stop_signal: None,
            env: Vec::new(),
            working_dir: None,
            security_context: SecurityContext::default(),
            post_start: None,
        }
    }

    /// A main container named `name` with no command and no pre-stop hook
    /// (an object whose workload the actuator does not run, as in tests
    /// and benchmarks of the stores).
    pub fn named(name: impl Into<String>) -> Self {
        StoredContainer {
            name: name.into(),
            ..StoredContainer::default()
        }
    }

    /// The same container with this pre-stop hook, or none.
    #[must_use]
    pub fn with_pre_stop_hook(mut self, hook: Option<String>) -> Self {
        self.pre_stop = hook;
        self
    }

    /// The same container as a sidecar (`true`) or a main container.
    #[must_use]
    pub fn with_sidecar(mut self, sidecar: bool) -> Self {
        self.sidecar = sidecar;
        self
    }

    /// The same container with its own stop signal (a signal number), or
    /// the actuator's (`None`).
    #[must_use]
    pub fn with_stop_signal(mut self, signal: Option<i32>) -> Self {
        self.stop_signal = signal;
        self
    }

    /// The same container with these environment entries (`env`).
    #[must_use]
    pub fn with_env(mut self, env: Vec<EnvVar>) -> Self {
        self.env = env;
        self
    }

    /// The same container starting in `dir` (`workingDir`), or in the
    /// agent's directory.
    #[must_use]
    pub fn with_working_dir(mut self, dir: Option<String>) -> Self {
        self.working_dir = dir;
        self
    }

    /// The same container running as `context` says.
    #[must_use]
    pub fn with_security_context(mut self, context: SecurityContext) -> Self {
        self.security_context = context;
        self
    }

    /// The same container with this post-start hook (run by `sh -c`), or
    /// none.
    #[must_use]
    pub fn with_post_start_hook(mut self, hook: Option<String>) -> Self {
        self.post_start = hook;
        self
    }

    /// The same container with a pre-stop hook (run by `sh -c`).
    pub fn with_pre_stop(mut self, hook: impl Into<String>) -> Self {
        self.pre_stop = Some(hook.into());
        self
    }

    /// The same container as a sidecar: stopped after the main containers,
    /// in reverse order (R69).
    pub fn as_sidecar(mut self) -> Self {
        self.sidecar = true;
        self
    }

    /// What grace-core needs to know about this container: whether it has
    /// a pre-stop hook and whether it is a sidecar (`stopped` is false).
    pub fn core_spec(&self) -> ContainerSpec {
        ContainerSpec {
            pre_stop: self.pre_stop.is_some(),
            sidecar: self.sidecar,
            stopped: false,
        }
    }
}

/// The runtime's persisted kill state ([`StoredObject::agent`]): bytes in a
/// compact encoding that only the runtime reads
/// ([`KillRecord`](crate::runtime::KillRecord) decodes them). Opaque to the
/// stores, which keep them as they were written; in JSON (what the durable
/// backends store, what the agent's API sends) they are one base64 string.
///
/// Shared, not copied: a clone is a reference count.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct KillState(Arc<[u8]>);

impl KillState {
    /// The state made of `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        KillState(Arc::from(bytes))
    }

    /// The encoded bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Makes the state `bytes`, in the allocation it has if nothing else
    /// holds it and the length is the same (the runtime's write slots).
    pub(crate) fn assign(&mut self, bytes: &[u8]) {
        match Arc::get_mut(&mut self.0) {
            Some(own) if own.len() == bytes.len() => own.copy_from_slice(bytes),
            _ => self.0 = Arc::from(bytes),
        }
    }
}

impl fmt::Debug for KillState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KillState({})", BASE64.encode(&self.0))
    }
}

impl Serialize for KillState {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&BASE64.encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for KillState {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        BASE64
            .decode(text.as_bytes())
            .map(|bytes| KillState(Arc::from(bytes)))
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_stored_before_the_times_still_decode() {
        let old: Vec<ContainerStatus> = serde_json::from_str(
            r#"["running", {"terminated": {"exitCode": 1, "reason": "Error"}}, {"waiting": {"reason": "ContainerCreating"}}]"#,
        )
        .expect("decodes");
        assert_eq!(
            old,
            [
                ContainerStatus::RUNNING,
                ContainerStatus::exited(Some(1)),
                ContainerStatus::Waiting {
                    reason: "ContainerCreating".into(),
                    message: None,
                }
            ]
        );
        let stamped = ContainerStatus::RUNNING.stamped(None, Timestamp::from_unix_seconds(7));
        let back: ContainerStatus =
            serde_json::from_str(&serde_json::to_string(&stamped).expect("encodes"))
                .expect("decodes");
        assert_eq!(back, stamped);
    }

    #[test]
    fn an_exit_keeps_the_start_of_its_run_and_a_report_again_keeps_its_times() {
        let at = Timestamp::from_unix_seconds;
        let running = ContainerStatus::RUNNING.stamped(None, at(10));
        assert_eq!(
            running,
            ContainerStatus::Running {
                started_at: Some(at(10))
            }
        );
        assert_eq!(
            ContainerStatus::RUNNING.stamped(Some(&running), at(20)),
            running
        );
        let exited = ContainerStatus::exited(Some(1)).stamped(Some(&running), at(30));
        let ContainerStatus::Terminated {
            started_at,
            finished_at,
            ..
        } = &exited
        else {
            panic!("{exited:?}");
        };
        assert_eq!((*started_at, *finished_at), (Some(at(10)), Some(at(30))));
        assert_eq!(
            ContainerStatus::exited(Some(1)).stamped(Some(&exited), at(40)),
            exited
        );
    }
}
