//! The namespace a command works in: `-n/--namespace`, else the variable
//! `GRACE_NAMESPACE` (as a kubeconfig context's namespace), else
//! `default`; or every namespace (`grace get -A`).
//!
//! Names on the command line are names in that namespace; a manifest's
//! `metadata.namespace` is used when no `-n` is given, and refused when it
//! differs from the one given, in kubectl's words.

use crate::command_error::CommandError;
use crate::store::{DEFAULT_NAMESPACE, ObjectKey, split_key};

/// The variable that sets the namespace when `-n` is not given.
pub const NAMESPACE_VARIABLE: &str = "GRACE_NAMESPACE";

/// The namespace of a command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Namespace {
    /// The namespace names are looked up in.
    pub name: String,
    /// Given with `-n`: a manifest in another namespace is refused.
    pub explicit: bool,
    /// `-A`: every namespace (a listing shows a NAMESPACE column).
    pub all: bool,
}

impl Default for Namespace {
    fn default() -> Self {
        Namespace {
            name: DEFAULT_NAMESPACE.to_owned(),
            explicit: false,
            all: false,
        }
    }
}

impl Namespace {
    /// The namespace of `-n` (`flag`), else of `variable` (the value of
    /// [`NAMESPACE_VARIABLE`]), else `default`; `all` for `-A`. A
    /// namespace that is not a DNS-1123 label is refused (exit 2).
    pub fn resolve(
        flag: Option<&str>,
        variable: Option<&str>,
        all: bool,
    ) -> Result<Namespace, CommandError> {
        let (name, explicit) = match (flag, variable) {
            (Some(flag), _) => (flag, true),
            (None, Some(v)) if !v.is_empty() => (v, false),
            (None, _) => (DEFAULT_NAMESPACE, false),
        };
        grace_std::api_server::check_name(name).map_err(|e| {
            let source = if explicit {
                "--namespace"
            } else {
                NAMESPACE_VARIABLE
            };
            CommandError::invalid(format!("{source}: {e}"))
        })?;
        Ok(Namespace {
            name: name.to_owned(),
            explicit,
            all,
        })
    }

    /// The store key of `name` in this namespace.
    pub fn key(&self, name: &str) -> String {
        ObjectKey {
            namespace: self.name.clone(),
            name: name.to_owned(),
        }
        .to_string()
    }

    /// Whether the object stored under `key` is in this namespace (any,
    /// with `-A`).
    pub fn holds(&self, key: &str) -> bool {
        self.all || split_key(key).0 == self.name
    }

    /// The store key of a manifest's object named `name`, with the
    /// manifest's `metadata.namespace` (`manifest`): that namespace if
    /// `-n` was not given, else `-n`'s, which it must match (kubectl's
    /// error otherwise, exit 2).
    pub fn key_of_manifest(
        &self,
        manifest: Option<&str>,
        name: &str,
    ) -> Result<String, CommandError> {
        let namespace = match manifest {
            Some(ns) if self.explicit && ns != self.name => {
                return Err(CommandError::invalid(format!(
                    "the namespace from the provided object \"{ns}\" does not match the namespace \"{}\". You must pass '--namespace={ns}' to perform this operation.",
                    self.name
                )));
            }
            Some(ns) => ns,
            None => &self.name,
        };
        Ok(ObjectKey {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
        .to_string())
    }
}

/// The name part of a store key: what a command prints as the object's
/// name (kubectl names no namespace in its lines).
pub fn name_of(key: &str) -> &str {
    split_key(key).1
}

/// The namespace part of a store key.
pub fn namespace_of(key: &str) -> &str {
    split_key(key).0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `-n` wins over `GRACE_NAMESPACE`, which wins over `default`; a
    /// manifest's namespace is taken unless `-n` names another.
    #[test]
    fn the_namespace_comes_from_the_flag_the_variable_or_default() {
        let default = Namespace::resolve(None, None, false).expect("default");
        assert_eq!(default.key("web"), "web");
        let env = Namespace::resolve(None, Some("team-a"), false).expect("env");
        assert_eq!(env.key("web"), "team-a/web");
        assert!(!env.explicit);
        let flag = Namespace::resolve(Some("team-b"), Some("team-a"), false).expect("flag");
        assert_eq!(flag.key("web"), "team-b/web");
        assert!(flag.holds("team-b/web") && !flag.holds("web"));
        assert_eq!(
            env.key_of_manifest(Some("team-c"), "web").expect("taken"),
            "team-c/web"
        );
        let refused = flag
            .key_of_manifest(Some("team-c"), "web")
            .expect_err("-n names another");
        assert_eq!(refused.code, 2);
        assert!(refused.message.contains(
            "the namespace from the provided object \"team-c\" does not match the namespace \"team-b\""
        ));
        assert_eq!(
            Namespace::resolve(Some("Team"), None, false)
                .expect_err("not a label")
                .code,
            2
        );
        assert_eq!(
            (name_of("team-a/web"), namespace_of("web")),
            ("web", "default")
        );
    }
}
