//! `-o custom-columns=HEADER:PATH,…` and `-o custom-columns-file=FILE`, as
//! kubectl prints them: a header row, then one row per object, each cell
//! the values the column's [path](crate::jsonpath::Path) finds, joined by
//! commas, or `<none>`.

use serde_json::Value;

use crate::escape::escape;
use crate::jsonpath::{Path, go_sprint};

/// One column: its header and the path of its values.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    /// Printed as it is, above the column.
    pub header: String,
    /// Where the cell's values are in the object.
    pub path: Path,
}

/// `HEADER:PATH,HEADER:PATH` (kubectl's `-o custom-columns=` spec).
pub fn parse_spec(spec: &str) -> Result<Vec<Column>, String> {
    if spec.is_empty() {
        return Err("custom-columns format specified but no custom columns given".to_owned());
    }
    spec.split(',')
        .map(|part| {
            let (header, path) = part.split_once(':').ok_or_else(|| {
                format!(
                    "unexpected custom-columns spec: {part}, expected <header>:<json-path-expr>"
                )
            })?;
            column(header, path)
        })
        .collect()
}

/// A `-o custom-columns-file=` template: a line of headers and a line of
/// paths, separated by white space.
pub fn parse_file(text: &str) -> Result<Vec<Column>, String> {
    let mut lines = text.lines();
    let usage = "Expected format is one line of space separated headers, one line of space separated column specs.";
    let headers: Vec<&str> = lines
        .next()
        .ok_or_else(|| format!("invalid template, missing header line. {usage}"))?
        .split_whitespace()
        .collect();
    let paths: Vec<&str> = lines
        .next()
        .ok_or_else(|| format!("invalid template, missing spec line. {usage}"))?
        .split_whitespace()
        .collect();
    if headers.len() != paths.len() {
        return Err(format!(
            "number of headers ({}) and field specifications ({}) don't match",
            headers.len(),
            paths.len()
        ));
    }
    headers
        .into_iter()
        .zip(paths)
        .map(|(header, path)| column(header, path))
        .collect()
}

fn column(header: &str, path: &str) -> Result<Column, String> {
    Ok(Column {
        header: header.to_owned(),
        path: Path::parse_relaxed(path).map_err(|e| e.reason)?,
    })
}

/// The header row.
pub fn headers(columns: &[Column]) -> Vec<String> {
    columns.iter().map(|c| c.header.clone()).collect()
}

/// One object's row: each cell the values found, as Go's `fmt.Sprint`
/// prints them, joined by commas; `<none>` when nothing is found.
/// Control characters are escaped so that a value cannot drive the
/// terminal.
pub fn row(columns: &[Column], object: &Value) -> Result<Vec<String>, String> {
    columns
        .iter()
        .map(|column| {
            let values = column.path.find(object)?;
            if values.is_empty() {
                return Ok("<none>".to_owned());
            }
            Ok(values
                .iter()
                .map(|v| escape(&go_sprint(v), false).into_owned())
                .collect::<Vec<_>>()
                .join(","))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cells_join_values_with_commas_and_show_none_when_missing() {
        let columns = parse_spec(
            "NAME:.metadata.name,CONTAINERS:spec.containers[*].name,NODE:{.spec.nodeName},LABELS:{.metadata.labels}",
        )
        .expect("a valid spec");
        assert_eq!(headers(&columns), ["NAME", "CONTAINERS", "NODE", "LABELS"]);
        let pod = json!({"metadata": {"name": "web", "labels": {"b": "2", "a": "1"}},
                         "spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        assert_eq!(
            row(&columns, &pod),
            Ok(vec![
                "web".to_owned(),
                "a,b".to_owned(),
                "<none>".to_owned(),
                "map[a:1 b:2]".to_owned()
            ])
        );
    }

    #[test]
    fn bad_specs_are_refused_in_kubectls_words() {
        assert_eq!(
            parse_spec("NAME"),
            Err("unexpected custom-columns spec: NAME, expected <header>:<json-path-expr>".into())
        );
        assert!(parse_spec("").is_err());
        assert!(parse_spec("N:{.a}{.b}").is_err());
        assert_eq!(
            parse_file("NAME NODE\n.metadata.name\n"),
            Err("number of headers (2) and field specifications (1) don't match".into())
        );
        let from_file = parse_file("NAME   NODE\n.metadata.name   {.spec.nodeName}\n");
        assert_eq!(
            from_file.map(|c| headers(&c)),
            Ok(vec!["NAME".into(), "NODE".into()])
        );
    }
}
