//! Leases, node liveness keys and fencing epochs (see the docs of
//! [`EtcdStore`] for how agents use them).

use std::time::Duration;

use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp};

use super::keys::decode_counter;
use super::{EtcdStore, gets};
use crate::store::StoreError;

/// A lease granted by etcd: every key bound to it is removed when it
/// expires (not kept alive within its TTL) or is revoked.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lease {
    id: i64,
    ttl: Duration,
}

impl Lease {
    /// etcd's id of the lease.
    pub fn id(self) -> i64 {
        self.id
    }

    /// The time to live etcd granted (which may be longer than asked:
    /// etcd has a minimum, 2 s with its default timings). Each keep-alive
    /// restarts it.
    pub fn ttl(self) -> Duration {
        self.ttl
    }
}

/// The outcome of [`EtcdStore::bump_fencing_epoch`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[must_use = "a stale bump did not fence anything: read the epoch again"]
pub enum EpochBump {
    /// The epoch moved from the one seen to this one (seen + 1).
    Bumped(u64),
    /// The epoch was no longer the one seen (someone bumped it first);
    /// this is the current one.
    Stale(u64),
}

impl EtcdStore {
    /// Asks etcd for a lease of `ttl`, rounded up to whole seconds (at
    /// least 1). etcd may grant a longer one; [`Lease::ttl`] says.
    pub fn grant_lease(&self, ttl: Duration) -> Result<Lease, StoreError> {
        let seconds = ttl
            .as_secs()
            .saturating_add(u64::from(ttl.subsec_nanos() > 0))
            .max(1);
        let seconds = i64::try_from(seconds).unwrap_or(i64::MAX);
        let mut client = self.inner.client.lease_client();
        let granted =
            self.inner.call(
                "grant lease",
                async move { client.grant(seconds, None).await },
            )?;
        if !granted.error().is_empty() {
            return Err(StoreError::Unavailable(crate::store::BackendError::from(
                format!("etcd did not grant a lease: {}", granted.error()),
            )));
        }
        Ok(Lease {
            id: granted.id(),
            ttl: Duration::from_secs(u64::try_from(granted.ttl()).unwrap_or(0)),
        })
    }

    /// Renews `lease` once: its TTL starts again. Fails with
    /// [`StoreError::NotFound`] if the lease has expired or was revoked
    /// (its keys are gone; grant a new one and register again).
    pub fn keep_alive(&self, lease: Lease) -> Result<(), StoreError> {
        let mut client = self.inner.client.lease_client();
        // Opens etcd's keep-alive stream, sends one renewal and reads its
        // answer; dropping the stream ends it.
        self.inner.call_with(
            "keep-alive",
            async move { client.keep_alive(lease.id).await.map(drop) },
            |e| lease_error(lease, e),
        )
    }

    /// Ends `lease` now: every key bound to it is removed at once (an agent
    /// shutting down cleanly). [`StoreError::NotFound`] if it had already
    /// expired or been revoked.
    pub fn revoke_lease(&self, lease: Lease) -> Result<(), StoreError> {
        let mut client = self.inner.client.lease_client();
        self.inner.call_with(
            "revoke lease",
            async move { client.revoke(lease.id).await.map(drop) },
            |e| lease_error(lease, e),
        )
    }

    /// Writes `node`'s liveness key, bound to `lease`: the node counts as
    /// alive until the lease expires or is revoked. Registering again (a
    /// restarted agent with a new lease) moves the key to the new lease;
    /// the last registration wins. Telling two live agents of one node
    /// apart is the fencing epoch's job. [`StoreError::NotFound`] if the
    /// lease has expired.
    pub fn register_node(&self, node: &str, lease: Lease) -> Result<(), StoreError> {
        let mut client = self.inner.client.kv_client();
        let key = self.inner.keys.node(node);
        let options = PutOptions::new().with_lease(lease.id);
        self.inner.call_with(
            "register node",
            async move {
                let value = lease.id.to_string();
                client.put(key, value, Some(options)).await.map(drop)
            },
            |e| lease_error(lease, e),
        )
    }

    /// The nodes whose liveness key exists (their lease is alive), in name
    /// order.
    pub fn alive_nodes(&self) -> Result<Vec<String>, StoreError> {
        let mut client = self.inner.client.kv_client();
        let nodes = self.inner.keys.nodes();
        let options = GetOptions::new().with_prefix().with_keys_only();
        let key = nodes.clone();
        let mut found = self.inner.call("alive nodes", async move {
            client.get(key, Some(options)).await
        })?;
        found
            .take_kvs()
            .iter()
            .map(|kv| {
                let key = kv
                    .key_str()
                    .map_err(|e| StoreError::Corrupt(crate::store::BackendError::from_error(e)))?;
                Ok(key.strip_prefix(nodes.as_str()).unwrap_or(key).to_owned())
            })
            .collect()
    }

    /// `node`'s fencing epoch: 0 until it is first bumped.
    pub fn fencing_epoch(&self, node: &str) -> Result<u64, StoreError> {
        let key = self.inner.keys.fencing(node);
        let kv = self.inner.get("fencing epoch", key.clone())?;
        decode_counter(&key, kv.as_ref().map(|kv| kv.value()))
    }

    /// Compare-and-swap on `node`'s fencing epoch: moves it from `seen` to
    /// `seen + 1` if it is still `seen`, else reports the current one.
    pub fn bump_fencing_epoch(&self, node: &str, seen: u64) -> Result<EpochBump, StoreError> {
        let key = self.inner.keys.fencing(node);
        let next = seen.checked_add(1).ok_or_else(|| {
            StoreError::Unavailable(crate::store::BackendError::from(format!(
                "fencing epoch of {node:?} exhausted"
            )))
        })?;
        let still = if seen == 0 {
            Compare::create_revision(key.as_str(), CompareOp::Equal, 0)
        } else {
            Compare::value(key.as_str(), CompareOp::Equal, seen.to_string())
        };
        let txn = Txn::new()
            .when([still])
            .and_then([TxnOp::put(key.as_str(), next.to_string(), None)])
            .or_else([TxnOp::get(key.as_str(), None)]);
        let response = self.inner.txn("bump fencing epoch", txn)?;
        if response.succeeded() {
            return Ok(EpochBump::Bumped(next));
        }
        let current = gets(&response)
            .into_iter()
            .next()
            .and_then(|g| g.kvs.into_iter().next());
        decode_counter(&key, current.as_ref().map(|kv| kv.value())).map(EpochBump::Stale)
    }
}

/// An error of a lease operation: etcd's "lease not found" is
/// [`StoreError::NotFound`] naming the lease.
fn lease_error(lease: Lease, e: etcd_client::Error) -> StoreError {
    let not_found = match &e {
        etcd_client::Error::GRpcStatus(status) => status.message().contains("lease not found"),
        etcd_client::Error::LeaseKeepAliveError(msg) => msg.contains("lease not found"),
        _ => false,
    };
    if not_found {
        StoreError::NotFound {
            name: format!("lease {:x}", lease.id),
        }
    } else {
        super::etcd_error(e)
    }
}
