//! `--sort-by=PATH`: objects in the order of one field, as kubectl sorts
//! them: by the first value the path finds in each; an object without one
//! first; numbers by value, strings in natural order (`pod-2` before
//! `pod-10`); timestamps, being RFC 3339 strings, by time.

use std::cmp::Ordering;

use serde_json::Value;

use crate::jsonpath::Path;

/// A parsed `--sort-by`.
#[derive(Clone, Debug, PartialEq)]
pub struct SortKey {
    path: Path,
    /// The path as kubectl names it in errors (`{.metadata.name}`).
    source: String,
}

impl SortKey {
    /// A path in any of kubectl's four spellings (`metadata.name`,
    /// `.metadata.name`, `{metadata.name}`, `{.metadata.name}`).
    pub fn parse(text: &str) -> Result<SortKey, String> {
        let path = Path::parse_relaxed(text).map_err(|e| e.reason)?;
        let inner = text
            .trim_start_matches('{')
            .trim_end_matches('}')
            .trim_start_matches('.');
        Ok(SortKey {
            path,
            source: format!("{{.{inner}}}"),
        })
    }

    /// Sorts `items` (see [`sort`]).
    pub fn sort<T>(&self, items: &mut Vec<T>, object: impl Fn(&T) -> Value) -> Result<(), String> {
        sort(items, &self.path, &self.source, object)
    }
}

/// Sorts `items` by the path's value in each (`object` gives an item's
/// JSON; `source` names the path in errors). The order of items that
/// compare equal is kept. A path that finds nothing in any item is
/// refused, as kubectl refuses it; the items are then left as they were.
pub fn sort<T>(
    items: &mut Vec<T>,
    path: &Path,
    source: &str,
    object: impl Fn(&T) -> Value,
) -> Result<(), String> {
    let keys = items
        .iter()
        .map(|item| {
            let json = object(item);
            Ok(path.find(&json)?.first().map(|v| v.clone().into_owned()))
        })
        .collect::<Result<Vec<Option<Value>>, String>>()?;
    if !keys.is_empty() && keys.iter().all(Option::is_none) {
        return Err(format!(
            "couldn't find any field with path \"{source}\" in the list of objects"
        ));
    }
    let mut keyed: Vec<(Option<Value>, T)> = keys.into_iter().zip(items.drain(..)).collect();
    keyed.sort_by(|(a, _), (b, _)| match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => compare(a, b),
    });
    items.extend(keyed.into_iter().map(|(_, item)| item));
    Ok(())
}

fn compare(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => a
            .as_f64()
            .zip(b.as_f64())
            .and_then(|(a, b)| a.partial_cmp(&b))
            .unwrap_or(Ordering::Equal),
        (Value::String(a), Value::String(b)) => natural(a, b),
        (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
        // Values of different kinds: kubectl gives up; grace keeps them
        // in a fixed order of kinds.
        _ => rank(a).cmp(&rank(b)),
    }
}

fn rank(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Number(_) => 2,
        Value::String(_) => 3,
        Value::Array(_) => 4,
        Value::Object(_) => 5,
    }
}

/// Natural order: runs of digits compare by value, the rest by character.
fn natural(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a, b);
    loop {
        match (a.chars().next(), b.chars().next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let (da, ra) = digits(a);
                let (db, rb) = digits(b);
                let (va, vb) = (da.trim_start_matches('0'), db.trim_start_matches('0'));
                let by_value = va.len().cmp(&vb.len()).then_with(|| va.cmp(vb));
                if by_value != Ordering::Equal {
                    return by_value;
                }
                // Equal values: fewer leading zeros first.
                let by_zeros = da.len().cmp(&db.len());
                if by_zeros != Ordering::Equal {
                    return by_zeros;
                }
                (a, b) = (ra, rb);
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(&y);
                }
                (a, b) = (&a[x.len_utf8()..], &b[y.len_utf8()..]);
            }
        }
    }
}

fn digits(s: &str) -> (&str, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s.split_at(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_sort_by_the_field_in_natural_order_missing_first() {
        let mut items = vec![
            json!({"n": "pod-10", "r": 3}),
            json!({"n": "pod-2", "r": 1}),
            json!({"r": 2}),
            json!({"n": "pod-1", "r": 10}),
        ];
        let path = Path::parse_relaxed(".n").expect("path");
        sort(&mut items, &path, "{.n}", Clone::clone).expect("sorts");
        let order: Vec<&Value> = items.iter().map(|i| &i["r"]).collect();
        assert_eq!(order, [&json!(2), &json!(10), &json!(1), &json!(3)]);
        let by_number = Path::parse_relaxed("{.r}").expect("path");
        sort(&mut items, &by_number, "{.r}", Clone::clone).expect("sorts");
        let order: Vec<&Value> = items.iter().map(|i| &i["r"]).collect();
        assert_eq!(order, [&json!(1), &json!(2), &json!(3), &json!(10)]);
        let nowhere = Path::parse_relaxed(".x").expect("path");
        assert_eq!(
            sort(&mut items, &nowhere, "{.x}", Clone::clone),
            Err("couldn't find any field with path \"{.x}\" in the list of objects".into())
        );
        assert_eq!(items.len(), 4, "nothing is lost on an error");
    }
}
