//! The whole object as it was applied ([`Manifest`]): every field of the
//! manifest, those grace acts on and those it only keeps, so an object
//! reads back as it was written.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An object as it was applied, as compact JSON text (a JSON object):
/// its `metadata` and `spec` as the manifest gave them, fields grace does
/// not act on included (`image`, `resources`, `annotations`,
/// `tolerations` …), without what the store holds beside it (the
/// object's uid, times, finalizers, labels, owner references, node, grace
/// period and status, which change without a new manifest).
///
/// Kept once per object as one string, not as a tree, and shared, not
/// copied: a clone is a reference count. Stored as a JSON string; opaque
/// to the stores, which keep it as it was written.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Manifest(Arc<str>);

impl Manifest {
    /// The manifest made of `value` (written as compact JSON).
    pub fn from_json(value: &serde_json::Value) -> Self {
        Manifest(Arc::from(value.to_string()))
    }

    /// The JSON text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The manifest as a JSON value: an error if the text is not JSON (a
    /// manifest is only written by [`Manifest::from_json`], but a store's
    /// bytes or a client's request may say anything).
    pub fn to_json(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_str(&self.0)
    }
}

impl fmt::Debug for Manifest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Manifest({})", self.0)
    }
}

impl Serialize for Manifest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Manifest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Ok(Manifest(Arc::from(text.as_ref())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_is_stored_as_one_string_and_reads_back_whole() {
        let pod = serde_json::json!({"spec": {"containers": [{"name": "a", "image": "nginx"}]}});
        let manifest = Manifest::from_json(&pod);
        let text = serde_json::to_string(&manifest).expect("encodes");
        assert!(text.starts_with('"'), "{text}");
        let back: Manifest = serde_json::from_str(&text).expect("decodes");
        assert_eq!(back, manifest);
        assert_eq!(back.to_json().expect("JSON"), pod);
    }
}
