//! kubectl's ways of naming objects: `TYPE NAME…`, `TYPE/NAME…`, and
//! grace's shorthand `NAME…` (grace has one store of objects, so the type
//! may be left out).

use crate::command_error::CommandError;
use crate::store::StoredObject;

/// The type named on the command line.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Type {
    /// `pod`, `pods`, `po`: objects with Kubernetes' Pod strategy.
    Pod,
    /// `object`, `objects`: every object (grace's own type word, for
    /// objects of any strategy).
    Any,
}

impl Type {
    fn of(word: &str) -> Option<Type> {
        match word {
            "pod" | "pods" | "po" => Some(Type::Pod),
            "object" | "objects" => Some(Type::Any),
            _ => None,
        }
    }

    /// Whether `object` is of this type.
    pub fn holds(self, object: &StoredObject) -> bool {
        match self {
            Type::Pod => object.strategy.kind == grace_core::Kind::Pod,
            Type::Any => true,
        }
    }
}

/// kubectl's answer to `grace get svc` when no object is named "svc": the
/// word names another of Kubernetes' resource types, not a missing pod.
/// `None` for any other word.
pub fn not_a_type_grace_has(word: &str) -> Option<CommandError> {
    is_kubernetes_type(word).then(|| {
        CommandError::failed(format!(
            "the server doesn't have a resource type \"{word}\" (grace knows pods and objects)"
        ))
    })
}

/// Whether `word` names one of Kubernetes' other built-in resource types
/// as kubectl spells them (plural, singular or short name).
fn is_kubernetes_type(word: &str) -> bool {
    const TYPES: &[&str] = &[
        "all",
        "services",
        "service",
        "svc",
        "nodes",
        "node",
        "no",
        "namespaces",
        "namespace",
        "ns",
        "deployments",
        "deployment",
        "deploy",
        "replicasets",
        "replicaset",
        "rs",
        "statefulsets",
        "statefulset",
        "sts",
        "daemonsets",
        "daemonset",
        "ds",
        "jobs",
        "job",
        "cronjobs",
        "cronjob",
        "cj",
        "configmaps",
        "configmap",
        "cm",
        "secrets",
        "secret",
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        "pvc",
        "persistentvolumes",
        "persistentvolume",
        "pv",
        "endpoints",
        "ep",
        "events",
        "event",
        "ev",
        "ingresses",
        "ingress",
        "ing",
        "serviceaccounts",
        "serviceaccount",
        "sa",
        "replicationcontrollers",
        "replicationcontroller",
        "rc",
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        "hpa",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "pdb",
        "networkpolicies",
        "networkpolicy",
        "netpol",
        "storageclasses",
        "storageclass",
        "sc",
        "leases",
        "lease",
        "customresourcedefinitions",
        "customresourcedefinition",
        "crd",
        "crds",
    ];
    TYPES.contains(&word)
}

/// What the positional arguments name: a type (if given) and names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Args {
    /// The type, if one was given.
    pub kind: Option<Type>,
    /// The names, in the order given.
    pub names: Vec<String>,
}

/// Reads `TYPE NAME…`, `TYPE/NAME…` or `NAME…`.
pub fn parse(args: &[String]) -> Result<Args, CommandError> {
    let Some(first) = args.first() else {
        return Ok(Args::default());
    };
    let unknown = |word: &str| {
        CommandError::failed(format!(
            "the server doesn't have a resource type \"{word}\" (grace knows pods and objects)"
        ))
    };
    if first.contains('/') {
        let mut kind = None;
        let mut names = Vec::new();
        for arg in args {
            let Some((word, name)) = arg.split_once('/') else {
                return Err(CommandError::invalid(format!(
                    "there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (\"{arg}\")"
                )));
            };
            let t = Type::of(word).ok_or_else(|| unknown(word))?;
            if name.is_empty() {
                return Err(CommandError::invalid(format!(
                    "\"{arg}\": the name is empty"
                )));
            }
            kind = Some(match kind {
                Some(Type::Pod) if t == Type::Pod => Type::Pod,
                None => t,
                Some(_) => Type::Any,
            });
            names.push(name.to_owned());
        }
        return Ok(Args { kind, names });
    }
    let (kind, rest) = match Type::of(first) {
        Some(t) => (Some(t), args.get(1..).unwrap_or_default()),
        None => (None, args),
    };
    if let Some(bad) = rest.iter().find(|a| a.contains('/')) {
        return Err(CommandError::invalid(format!(
            "there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (\"{bad}\")"
        )));
    }
    Ok(Args {
        kind,
        names: rest.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Result<Args, CommandError> {
        parse(&words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn type_name_type_slash_name_and_bare_names_all_name_objects() {
        let both = |kind, names: &[&str]| Args {
            kind,
            names: names.iter().map(|n| (*n).to_owned()).collect(),
        };
        assert_eq!(
            args(&["pod", "a", "b"]).ok(),
            Some(both(Some(Type::Pod), &["a", "b"]))
        );
        assert_eq!(args(&["pods"]).ok(), Some(both(Some(Type::Pod), &[])));
        assert_eq!(
            args(&["pod/a", "po/b"]).ok(),
            Some(both(Some(Type::Pod), &["a", "b"]))
        );
        assert_eq!(args(&["a", "b"]).ok(), Some(both(None, &["a", "b"])));
        assert_eq!(args(&[]).ok(), Some(both(None, &[])));
    }

    #[test]
    fn mixed_forms_and_unknown_types_are_refused_as_kubectl_does() {
        assert_eq!(args(&["pod", "pod/a"]).err().map(|e| e.code), Some(2));
        assert_eq!(args(&["pod/a", "b"]).err().map(|e| e.code), Some(2));
        for word in ["svc", "nodes", "deploy", "cm"] {
            let e = not_a_type_grace_has(word).expect("another Kubernetes type");
            assert_eq!(
                e.message,
                format!(
                    "the server doesn't have a resource type \"{word}\" (grace knows pods and objects)"
                )
            );
            assert_eq!(e.code, 1);
        }
        assert!(not_a_type_grace_has("web").is_none());
        let e = args(&["deployment/a"]).expect_err("unknown type");
        assert!(
            e.message
                .contains("doesn't have a resource type \"deployment\""),
            "{}",
            e.message
        );
    }
}
