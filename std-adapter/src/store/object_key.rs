//! Object keys: the namespace and the name of an object, as one store key.
//!
//! Kubernetes keys a pod by its namespace and its name: the same name in
//! two namespaces is two objects. A store (and the agent's API, and a
//! workload's file names) keys an object by one string: the bare name in
//! the namespace [`DEFAULT_NAMESPACE`], `namespace/name` in any other. So
//! a store written before namespaces (whose keys are bare names) holds
//! the objects of `default` as they are, with no migration, and its
//! workloads' files keep their names. Neither a namespace (a DNS-1123
//! label) nor a name (a DNS-1123 subdomain) holds `/`, so a key reads
//! back one way only.

use std::fmt;

use crate::api_server::{NameError, check_name, check_object_name};

/// The namespace of an object whose manifest names none, and of every
/// object stored before namespaces.
pub const DEFAULT_NAMESPACE: &str = "default";

/// An object's namespace and name: what a store key stands for.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// The namespace: a DNS-1123 label.
    pub namespace: String,
    /// The name: a DNS-1123 subdomain.
    pub name: String,
}

/// Why a key or one of its parts is refused ([`ObjectKey::parse`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// The namespace is not a DNS-1123 label.
    Namespace(NameError),
    /// The name is not a DNS-1123 subdomain.
    Name(NameError),
}

impl KeyError {
    /// The manifest field at fault: `metadata.namespace` or `metadata.name`.
    pub fn field(&self) -> &'static str {
        match self {
            KeyError::Namespace(_) => "metadata.namespace",
            KeyError::Name(_) => "metadata.name",
        }
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Namespace(e) | KeyError::Name(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for KeyError {}

impl ObjectKey {
    /// The key of `name` in `namespace`, both checked.
    pub fn new(namespace: &str, name: &str) -> Result<ObjectKey, KeyError> {
        check_name(namespace).map_err(KeyError::Namespace)?;
        check_object_name(name).map_err(KeyError::Name)?;
        Ok(ObjectKey {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
    }

    /// The key a store key stands for, both parts checked.
    pub fn parse(key: &str) -> Result<ObjectKey, KeyError> {
        let (namespace, name) = split_key(key);
        ObjectKey::new(namespace, name)
    }
}

/// The store key: the bare name in [`DEFAULT_NAMESPACE`], else
/// `namespace/name`.
impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace == DEFAULT_NAMESPACE {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

/// The namespace and the name a store key stands for, unchecked: a key
/// without `/` is a name in [`DEFAULT_NAMESPACE`].
pub fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or((DEFAULT_NAMESPACE, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key of an object in `default` is its bare name (what stores
    /// written before namespaces hold); any other namespace prefixes it.
    #[test]
    fn keys_read_back_and_default_is_the_bare_name() {
        let web = ObjectKey::new("default", "web").expect("valid");
        assert_eq!(web.to_string(), "web");
        assert_eq!(ObjectKey::parse("web"), Ok(web));
        let team = ObjectKey::new("team-a", "web.v2").expect("valid");
        assert_eq!(team.to_string(), "team-a/web.v2");
        assert_eq!(ObjectKey::parse("team-a/web.v2"), Ok(team));
        assert_eq!(split_key("team-a/web"), ("team-a", "web"));
        assert_eq!(split_key("web"), ("default", "web"));
        let long = "n".repeat(63);
        let name = format!("{}.{}", "a".repeat(126), "b".repeat(126));
        let key = ObjectKey::new(&long, &name).expect("the longest");
        assert_eq!(key.to_string().len(), 317);
        assert_eq!(
            ObjectKey::parse("Team/web").map_err(|e| e.field()),
            Err("metadata.namespace")
        );
        assert_eq!(
            ObjectKey::parse("team/web/x").map_err(|e| e.field()),
            Err("metadata.name")
        );
        assert_eq!(
            ObjectKey::new("team.a", "web").map_err(|e| e.field()),
            Err("metadata.namespace")
        );
    }
}
