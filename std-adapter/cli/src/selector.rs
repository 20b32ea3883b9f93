//! kubectl's label selectors (`-l`): `app=web`, `app==web`, `app!=web`,
//! `app`, `!app`, `tier in (a,b)`, `tier notin (a,b)`, joined by commas
//! (all must hold).

use std::collections::BTreeMap;

/// One requirement of a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed label selector.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector(Vec<Requirement>);

impl Selector {
    /// Parses kubectl's syntax; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Selector, String> {
        let mut requirements = Vec::new();
        for part in split_top(text) {
            let part = part.trim();
            if part.is_empty() {
                return Err(format!(
                    "unable to parse requirement: empty requirement in \"{text}\""
                ));
            }
            requirements.push(requirement(part)?);
        }
        Ok(Selector(requirements))
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
        })
    }
}

/// Splits on the commas that are not inside a set's parentheses.
fn split_top(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth = depth.saturating_add(1),
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i.saturating_add(1); // after the one-byte ','
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn requirement(part: &str) -> Result<Requirement, String> {
    let key_ok = |k: &str| {
        crate::k8s_pod::check_label(k, "")
            .map(|()| k.to_owned())
            .map_err(|e| format!("unable to parse requirement: {e}"))
    };
    let value_ok = |v: &str| {
        let v = v.trim();
        crate::k8s_pod::check_label("k", v)
            .map(|()| v.to_owned())
            .map_err(|e| format!("unable to parse requirement: {e}"))
    };
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement::NotExists(key_ok(key.trim())?));
    }
    for (op, negate) in [(" notin ", true), (" in ", false)] {
        if let Some((key, set)) = part.split_once(op) {
            let set = set.trim();
            let inner = set
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .ok_or_else(|| {
                    format!("unable to parse requirement: `{set}`: expected a set such as (a,b)")
                })?;
            let values = inner
                .split(',')
                .map(value_ok)
                .collect::<Result<Vec<_>, _>>()?;
            let key = key_ok(key.trim())?;
            return Ok(if negate {
                Requirement::NotIn(key, values)
            } else {
                Requirement::In(key, values)
            });
        }
    }
    for (op, negate) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((key, value)) = part.split_once(op) {
            let (key, value) = (key_ok(key.trim())?, value_ok(value)?);
            return Ok(if negate {
                Requirement::NotEquals(key, value)
            } else {
                Requirement::Equals(key, value)
            });
        }
    }
    Ok(Requirement::Exists(key_ok(part)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn each_form_selects_as_kubectl() {
        let web = labels(&[("app", "web"), ("tier", "front")]);
        let db = labels(&[("app", "db")]);
        let cases = [
            ("app=web", true, false),
            ("app==web", true, false),
            ("app!=web", false, true),
            ("tier", true, false),
            ("!tier", false, true),
            ("app in (web, db)", true, true),
            ("app notin (web)", false, true),
            ("app=web,tier=front", true, false),
            ("tier in (front,back),app", true, false),
        ];
        for (text, on_web, on_db) in cases {
            let s = Selector::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!((s.matches(&web), s.matches(&db)), (on_web, on_db), "{text}");
        }
    }

    #[test]
    fn malformed_selectors_are_refused() {
        for text in ["", "a b=c", "app in web", "=web"] {
            assert!(Selector::parse(text).is_err(), "{text}");
        }
    }
}
