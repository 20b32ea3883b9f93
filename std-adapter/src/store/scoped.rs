//! One node's view of a shared store: what its agent's runtime sees.

use super::{BatchError, Listing, Revision, Store, StoreError, StoredObject, Watch, Write};

/// A store as the agent of one node sees it: `get` and `list` show only
/// the objects bound to that node (their `node` is it); writes and the
/// watch go to the whole store unchanged.
///
/// With several agents on one etcd, each agent's runtime is opened on
/// such a view, so that it recovers, tracks and acts on its own node's
/// objects only; objects of other nodes, and unscheduled ones, are theirs
/// or the API server's (`crate::api_server`).
#[derive(Clone, Debug)]
pub struct NodeScoped<S> {
    inner: S,
    node: String,
}

impl<S: Store> NodeScoped<S> {
    /// `node`'s view of `inner`.
    pub fn new(inner: S, node: impl Into<String>) -> Self {
        NodeScoped {
            inner,
            node: node.into(),
        }
    }

    /// The whole store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The node whose objects are shown.
    pub fn node(&self) -> &str {
        &self.node
    }

    fn ours(&self, object: &StoredObject) -> bool {
        object.node.as_deref() == Some(self.node.as_str())
    }
}

impl<S: Store> Store for NodeScoped<S> {
    fn get(&self, name: &str) -> Result<Option<(StoredObject, Revision)>, StoreError> {
        Ok(self.inner.get(name)?.filter(|(o, _)| self.ours(o)))
    }

    fn list(&self) -> Result<Listing, StoreError> {
        let mut listing = self.inner.list()?;
        listing.objects.retain(|(_, o, _)| self.ours(o));
        Ok(listing)
    }

    fn revision(&self) -> Result<Revision, StoreError> {
        self.inner.revision()
    }

    fn batch(&self, writes: Vec<Write>) -> Result<Vec<Revision>, BatchError> {
        self.inner.batch(writes)
    }

    fn batch_ref(&self, writes: &[Write]) -> Result<Vec<Revision>, BatchError> {
        self.inner.batch_ref(writes)
    }

    fn watch(&self, from: Revision) -> Result<Watch, StoreError> {
        self.inner.watch(from)
    }

    /// One node's objects only.
    fn shows_every_object(&self) -> bool {
        false
    }
}
