//! Namespaces: the one place that decides which are served. Until objects
//! are keyed by namespace, every pod is in `default`, and another
//! namespace is answered NotFound.

use super::status::Status;

/// The namespace every pod is in.
pub(crate) const DEFAULT: &str = "default";

/// Whether `namespace` is served; NotFound if not.
pub(crate) fn served(namespace: &str) -> Result<(), Status> {
    if namespace == DEFAULT {
        Ok(())
    } else {
        Err(Status::namespace_not_found(namespace))
    }
}
