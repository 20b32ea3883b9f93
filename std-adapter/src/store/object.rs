//! What the store keeps under a name: the object's deletion metadata, where
//! it runs, its containers, and the runtime's opaque kill state.

use grace_core::{ContainerSpec, Record, Strategy};
use serde::{Deserialize, Serialize};

/// The finalizer capacity of stored records: an object with more
/// finalizers than this cannot be stored (it fails to decode as
/// [`StoreError::Corrupt`](super::StoreError::Corrupt)).
pub const FINALIZERS: usize = 16;

/// One stored object. Serialized as JSON by the durable backends.
///
/// Every field but `meta` defaults when absent, so objects written by an
/// older version still decode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredObject {
    /// The deletion-relevant metadata. A store overwrites
    /// `meta.resource_version` with the [`Revision`](super::Revision) of
    /// each write, as the Kubernetes API server does with etcd's
    /// modification revision.
    pub meta: Record<FINALIZERS>,
    /// How the object's type is deleted (pod or generic); pods by default.
    #[serde(default)]
    pub strategy: Strategy,
    /// The node the object is bound to; `None` while unscheduled.
    #[serde(default)]
    pub node: Option<String>,
    /// The containers, in declaration order.
    #[serde(default)]
    pub containers: Vec<StoredContainer>,
    /// The runtime's persisted kill state. Opaque to the store: it is kept
    /// and returned as it was written.
    #[serde(default)]
    pub agent: Option<serde_json::Value>,
}

impl StoredObject {
    /// An object with the given metadata, no node, no containers and no
    /// agent state.
    pub fn new(meta: Record<FINALIZERS>) -> Self {
        StoredObject {
            meta,
            strategy: Strategy::POD,
            node: None,
            containers: Vec::new(),
            agent: None,
        }
    }

    /// The uid of the object (`meta.uid`).
    pub fn uid(&self) -> &str {
        self.meta.uid.as_str()
    }
}

/// One container of a stored object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
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
}

impl StoredContainer {
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
