//! What the runtime thread of an agent takes, on one channel: requests
//! from the socket's connections, changes from a store's watch, process
//! events, and the order to stop. The lifecycle inputs among them are
//! grace-core's: a request's is [`Request::input`], a process event
//! carries one ([`WorldEvent::input`]).

use std::sync::mpsc;

use crate::api::{Reply, Request};
use crate::process::WorldEvent;

/// One input of the runtime thread.
#[allow(
    clippy::large_enum_variant,
    reason = "one per request or event on a channel; a request holds a uid of any Kubernetes length inline"
)]
pub(crate) enum Input {
    /// A client's request, from the socket (local agent).
    Request(Request, mpsc::SyncSender<Reply>),
    /// A change event of the store's watch named this object (node agent).
    #[cfg_attr(
        not(feature = "etcd"),
        allow(
            dead_code,
            reason = "only a node agent (feature `etcd`) watches a store"
        )
    )]
    Changed(String),
    /// Changes may have been missed (the store's log was trimmed): look
    /// at every object again (node agent).
    #[cfg_attr(
        not(feature = "etcd"),
        allow(
            dead_code,
            reason = "only a node agent (feature `etcd`) watches a store"
        )
    )]
    Resync,
    /// A process exited, a pre-stop hook returned.
    World(WorldEvent),
    /// SIGTERM, SIGINT or a handle's `shutdown`.
    Stop,
}
