//! `labelSelector` and `fieldSelector`, as a list or watch filters pods
//! with them.
//!
//! Labels: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`,
//! `!k`, joined by commas. Fields: `metadata.name`, `metadata.namespace`,
//! `spec.nodeName`, `status.phase` with `=`, `==` or `!=`; any other
//! field is refused (400), as kube-apiserver refuses a field it does not
//! index.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

/// One requirement of a selector.
#[derive(Clone, Debug, PartialEq)]
enum Term {
    /// The key has one of the values (`=`, `==`, `in`).
    In(String, Vec<String>),
    /// The key is absent or has none of the values (`!=`, `notin`).
    NotIn(String, Vec<String>),
    /// The key is there.
    Exists(String),
    /// The key is absent.
    Absent(String),
}

impl Term {
    fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        match self {
            Term::In(k, vs) => get(k).is_some_and(|v| vs.contains(&v)),
            Term::NotIn(k, vs) => get(k).is_none_or(|v| !vs.contains(&v)),
            Term::Exists(k) => get(k).is_some(),
            Term::Absent(k) => get(k).is_none(),
        }
    }
}

/// A pod filter from a list's or watch's query.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Selector {
    labels: Vec<Term>,
    fields: Vec<Term>,
}

/// The fields a field selector may name.
const FIELDS: [&str; 4] = [
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "status.phase",
];

impl Selector {
    /// Parses both selectors; the error says which term is wrong.
    pub fn parse(labels: Option<&str>, fields: Option<&str>) -> Result<Selector, String> {
        let labels = terms(labels.unwrap_or(""), "labelSelector")?;
        let fields = terms(fields.unwrap_or(""), "fieldSelector")?;
        for f in &fields {
            let (Term::In(key, _) | Term::NotIn(key, _) | Term::Exists(key) | Term::Absent(key)) =
                f;
            if !FIELDS.contains(&key.as_str()) || matches!(f, Term::Exists(_) | Term::Absent(_)) {
                return Err(format!(
                    "field label not supported: {key} (fieldSelector takes {} with =, == or !=)",
                    FIELDS.join(", ")
                ));
            }
        }
        Ok(Selector { labels, fields })
    }

    /// Whether `pod` meets every requirement of both selectors.
    pub fn matches(&self, pod: &Pod) -> bool {
        let empty = BTreeMap::new();
        let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
        let field = |k: &str| -> Option<String> {
            Some(match k {
                "metadata.name" => pod.metadata.name.clone().unwrap_or_default(),
                "metadata.namespace" => pod.metadata.namespace.clone().unwrap_or_default(),
                "spec.nodeName" => pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .unwrap_or_default(),
                "status.phase" => pod
                    .status
                    .as_ref()
                    .and_then(|s| s.phase.clone())
                    .unwrap_or_default(),
                _ => return None,
            })
        };
        self.labels
            .iter()
            .all(|t| t.matches(|k| labels.get(k).cloned()))
            && self.fields.iter().all(|t| t.matches(field))
    }
}

/// Splits at the commas outside parentheses.
fn split(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0u32, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth = depth.saturating_add(1),
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(text.get(start..i).unwrap_or(""));
                start = i.saturating_add(1);
            }
            _ => {}
        }
    }
    parts.push(text.get(start..).unwrap_or(""));
    parts
}

fn terms(text: &str, what: &str) -> Result<Vec<Term>, String> {
    let mut out = Vec::new();
    for part in split(text) {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        out.push(
            term(part).ok_or_else(|| format!("{what}: unable to parse requirement `{part}`"))?,
        );
    }
    Ok(out)
}

fn term(part: &str) -> Option<Term> {
    let owned = |s: &str| s.trim().to_owned();
    if let Some((k, v)) = part.split_once("!=") {
        return Some(Term::NotIn(owned(k), vec![owned(v)]));
    }
    if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
        return Some(Term::In(owned(k), vec![owned(v)]));
    }
    for (word, not) in [(" notin ", true), (" in ", false)] {
        if let Some((k, rest)) = part.split_once(word) {
            let list = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
            let values = list.split(',').map(owned).collect();
            return Some(if not {
                Term::NotIn(owned(k), values)
            } else {
                Term::In(owned(k), values)
            });
        }
    }
    if let Some(k) = part.strip_prefix('!') {
        return Some(Term::Absent(owned(k)));
    }
    let valid = part
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
    valid.then(|| Term::Exists(owned(part)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, labels: &[(&str, &str)]) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some(name.into());
        pod.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        pod
    }

    #[test]
    fn label_and_field_selectors_filter_as_kubernetes_does() {
        let web = pod("web", &[("app", "web"), ("tier", "fe")]);
        let db = pod("db", &[("app", "db")]);
        let cases = [
            ("app=web", "", true, false),
            ("app!=web", "", false, true),
            ("app in (web,db)", "", true, true),
            ("app notin (web)", "", false, true),
            ("tier", "", true, false),
            ("!tier", "", false, true),
            ("app=web,tier=fe", "", true, false),
            ("", "metadata.name=db", false, true),
            ("", "metadata.name!=db", true, false),
        ];
        for (labels, fields, w, d) in cases {
            let s = Selector::parse(Some(labels), Some(fields)).unwrap();
            assert_eq!(
                (s.matches(&web), s.matches(&db)),
                (w, d),
                "{labels} {fields}"
            );
        }
        assert!(Selector::parse(None, Some("spec.image=x")).is_err());
    }
}
