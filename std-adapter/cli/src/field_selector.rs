//! `--field-selector`: pods chosen by the fields the Kubernetes API server
//! lets a client select pods on, with its syntax (`status.phase=Running`,
//! `spec.nodeName!=a,metadata.name==web`).

use serde_json::Value;

/// The fields a pod may be selected on, where each is in the Pod's JSON
/// and the value the API server gives it when the Pod leaves it out.
const FIELDS: &[(&str, &str, &str)] = &[
    ("metadata.name", "/metadata/name", ""),
    ("metadata.namespace", "/metadata/namespace", "default"),
    ("spec.nodeName", "/spec/nodeName", ""),
    ("spec.restartPolicy", "/spec/restartPolicy", "Always"),
    (
        "spec.schedulerName",
        "/spec/schedulerName",
        "default-scheduler",
    ),
    ("spec.serviceAccountName", "/spec/serviceAccountName", ""),
    ("spec.hostNetwork", "/spec/hostNetwork", "false"),
    ("status.phase", "/status/phase", ""),
    ("status.podIP", "/status/podIP", ""),
    ("status.nominatedNodeName", "/status/nominatedNodeName", ""),
];

/// A parsed `--field-selector`: every term must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<Term>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Term {
    /// JSON pointer into the Pod, and the value when it is absent.
    pointer: &'static str,
    absent: &'static str,
    equal: bool,
    value: String,
}

impl FieldSelector {
    /// Parses `FIELD=VALUE`, `FIELD==VALUE` and `FIELD!=VALUE` terms,
    /// separated by commas (`\` escapes `,`, `=`, `!` and `\` in a value).
    /// An unknown field is refused as the API server refuses it.
    pub fn parse(text: &str) -> Result<FieldSelector, String> {
        let mut terms = Vec::new();
        for part in split_unescaped(text, ',') {
            if part.is_empty() {
                continue;
            }
            let (field, equal, value) = split_term(&part)
                .ok_or_else(|| format!("invalid selector: '{text}'; can't understand '{part}'"))?;
            let (_, pointer, absent) = FIELDS
                .iter()
                .find(|(name, _, _)| *name == field)
                .ok_or_else(|| format!("field label not supported: {field}"))?;
            terms.push(Term {
                pointer,
                absent,
                equal,
                value: unescape(value),
            });
        }
        Ok(FieldSelector { terms })
    }

    /// Whether `pod` (a Pod's JSON) has the fields asked for.
    pub fn matches(&self, pod: &Value) -> bool {
        self.terms.iter().all(|term| {
            let found = match pod.pointer(term.pointer) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                _ => term.absent.to_owned(),
            };
            (found == term.value) == term.equal
        })
    }
}

/// `text` split at each `sep` not escaped by a backslash (escapes kept).
fn split_unescaped(text: &str, sep: char) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut escaped = false;
    for c in text.chars() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            parts.push(String::new());
            continue;
        }
        if let Some(last) = parts.last_mut() {
            last.push(c);
        }
    }
    parts
}

/// `field`, whether the operator is an equality, and the raw value.
fn split_term(term: &str) -> Option<(&str, bool, &str)> {
    for (op, equal) in [("!=", false), ("==", true), ("=", true)] {
        if let Some((field, value)) = term.split_once(op) {
            return Some((field.trim(), equal, value));
        }
    }
    None
}

fn unescape(value: &str) -> String {
    let mut out = String::new();
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            out.extend(chars.next());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn terms_select_on_the_pod_fields_the_api_server_allows() {
        let pod = json!({"metadata": {"name": "web", "namespace": "default"},
                         "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let holds = |s: &str| FieldSelector::parse(s).map(|f| f.matches(&pod));
        assert_eq!(holds("status.phase=Running"), Ok(true));
        assert_eq!(holds("status.phase!=Running"), Ok(false));
        assert_eq!(holds("spec.nodeName==n1,metadata.name=web"), Ok(true));
        assert_eq!(holds("metadata.name=web,spec.nodeName=n2"), Ok(false));
        assert_eq!(holds("spec.restartPolicy=Always"), Ok(true));
        assert_eq!(holds("status.podIP="), Ok(true));
        assert_eq!(holds(""), Ok(true));
        assert_eq!(
            holds("spec.image=x"),
            Err("field label not supported: spec.image".into())
        );
        assert!(holds("nonsense").is_err());
        let odd = json!({"metadata": {"name": "a,b"}});
        assert_eq!(
            FieldSelector::parse(r"metadata.name=a\,b").map(|f| f.matches(&odd)),
            Ok(true)
        );
    }
}
