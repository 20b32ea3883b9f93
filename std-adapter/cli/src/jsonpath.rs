//! kubectl's JSONPath templates: `-o jsonpath=…`, the columns of
//! `-o custom-columns=…` and the key of `--sort-by`.
//!
//! kubectl speaks its own dialect, older than RFC 9535, and its users write
//! it: text with `{…}` actions, where an action is a path
//! (`{.items[*].metadata.name}`), a quoted literal (`{"\n"}`), or
//! `{range PATH}` … `{end}`, whose body runs once for each value the path
//! finds. A path is made of fields (`.name`, `['name']`, `\.` to keep a dot
//! in a key), `*`, `..` (every descendant), indexes and slices (`[0]`,
//! `[-1]`, `[1:]`, `[0:4:2]`), unions (`[0,2]`) and filters
//! (`[?(@.name=="app")]`, `[?(@.ready)]`). `@` and `$` both name the
//! current value: the object, or the element a `range` is at.
//!
//! The printing follows kubectl's: the values one path finds are joined by
//! spaces; a string is printed as it is, a number or boolean as Go prints
//! it, and a list or map as JSON in Go's encoding (sorted keys, `<`, `>`
//! and `&` escaped). A missing field prints nothing, as kubectl's
//! `--allow-missing-template-keys` default does; an index out of range is
//! an error.
//!
//! Where kubectl is plainly accidental, grace does the careful thing:
//! `['a.b']` is one key (kubectl splits it at the dot), a slice with a
//! step steps, and `..` visits maps in key order (kubectl's order is Go's
//! random map order).

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt::{self, Write as _};

use serde_json::Value;

/// A parsed template, ready to run on any number of objects.
#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    source: String,
    segments: Vec<Segment>,
}

/// One piece of a template.
#[derive(Clone, Debug, PartialEq)]
enum Segment {
    /// Printed as it is.
    Text(String),
    /// The values a path finds, joined by spaces.
    Path(Path),
    /// The body, once for each value the path finds, with that value as
    /// the current one.
    Range(Path, Vec<Segment>),
}

/// A path: steps from the current value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Path(Vec<Step>);

#[derive(Clone, Debug, PartialEq)]
enum Step {
    /// A map's key (`.name`, `['name']`).
    Field(String),
    /// Every element or value (`.*`, `[*]`).
    Wildcard,
    /// The value and every descendant that has children (`..`).
    Recursive,
    /// One element (`[2]`, `[-1]`).
    Index(i64),
    /// Elements `start..end` by `step` (`[1:]`, `[0:4:2]`).
    Slice {
        start: Option<i64>,
        end: Option<i64>,
        step: Option<i64>,
    },
    /// The values of each path, in turn (`[0,2]`, `['a','b']`).
    Union(Vec<Path>),
    /// The elements of a list for which the filter holds.
    Filter(Box<Filter>),
    /// A literal in place of the current value (text, number, boolean).
    Literal(Value),
}

#[derive(Clone, Debug, PartialEq)]
struct Filter {
    left: Path,
    /// `None`: the left path finds something (`[?(@.ready)]`).
    compare: Option<(Operator, Path)>,
}

#[derive(Copy, Clone, Debug, PartialEq)]
enum Operator {
    Equal,
    NotEqual,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
}

/// A template that does not parse: kubectl's reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The template as given.
    pub template: String,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "error parsing jsonpath {}, {}",
            self.template, self.reason
        )
    }
}

impl std::error::Error for ParseError {}

/// A template that parsed but cannot run on this object (an index out of
/// range, values of different types compared).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecuteError {
    /// The template as given.
    pub template: String,
    /// What went wrong.
    pub reason: String,
}

impl fmt::Display for ExecuteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "error executing jsonpath {:?}: Error executing template: {}",
            self.template, self.reason
        )
    }
}

impl std::error::Error for ExecuteError {}

impl Template {
    /// Parses kubectl's template syntax.
    pub fn parse(source: &str) -> Result<Template, ParseError> {
        let fail = |reason: String| ParseError {
            template: source.to_owned(),
            reason,
        };
        let actions = split_actions(source).map_err(fail)?;
        let mut stack: Vec<(Path, Vec<Segment>)> = Vec::new();
        let mut segments = Vec::new();
        for piece in actions {
            let segment = match piece {
                Piece::Text(text) => Segment::Text(text.to_owned()),
                Piece::Action(action) => match parse_action(action).map_err(fail)? {
                    Action::Path(path) => Segment::Path(path),
                    Action::Range(path) => {
                        stack.push((path, std::mem::take(&mut segments)));
                        continue;
                    }
                    Action::End => {
                        let Some((path, outer)) = stack.pop() else {
                            return Err(fail("not in range, nothing to end".to_owned()));
                        };
                        let body = std::mem::replace(&mut segments, outer);
                        Segment::Range(path, body)
                    }
                },
            };
            segments.push(segment);
        }
        // kubectl runs a range left open to the end of the template.
        while let Some((path, outer)) = stack.pop() {
            let body = std::mem::replace(&mut segments, outer);
            segments.push(Segment::Range(path, body));
        }
        Ok(Template {
            source: source.to_owned(),
            segments,
        })
    }

    /// The template as given.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The template's text for `object`.
    pub fn render(&self, object: &Value) -> Result<String, ExecuteError> {
        let mut out = String::new();
        render(&self.segments, object, &mut out).map_err(|reason| ExecuteError {
            template: self.source.clone(),
            reason,
        })?;
        Ok(out)
    }
}

impl Path {
    /// A column's or a sort key's path as kubectl relaxes it:
    /// `metadata.name`, `.metadata.name`, `{metadata.name}` and
    /// `{.metadata.name}` are one path.
    pub fn parse_relaxed(text: &str) -> Result<Path, ParseError> {
        let fail = |reason: &str| ParseError {
            template: text.to_owned(),
            reason: reason.to_owned(),
        };
        let inner = text
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .unwrap_or(text);
        let inner = inner.strip_prefix('.').unwrap_or(inner);
        if inner.is_empty() || inner.contains(['{', '}']) {
            return Err(fail(
                "unexpected path string, expected a 'name1.name2' or '.name1.name2' or '{name1.name2}' or '{.name1.name2}'",
            ));
        }
        match parse_action(&format!(".{inner}")) {
            Ok(Action::Path(path)) => Ok(path),
            Ok(_) => Err(fail("a column is a path, not range or end")),
            Err(reason) => Err(ParseError {
                template: text.to_owned(),
                reason,
            }),
        }
    }

    /// The values the path finds in `object`.
    pub fn find<'a>(&self, object: &'a Value) -> Result<Vec<Cow<'a, Value>>, String> {
        self.eval(vec![Cow::Borrowed(object)])
    }

    fn eval<'a>(&self, mut values: Vec<Cow<'a, Value>>) -> Result<Vec<Cow<'a, Value>>, String> {
        for step in &self.0 {
            values = step.eval(values)?;
        }
        Ok(values)
    }
}

fn render(segments: &[Segment], current: &Value, out: &mut String) -> Result<(), String> {
    for segment in segments {
        match segment {
            Segment::Text(text) => out.push_str(text),
            Segment::Path(path) => {
                for (i, value) in path.find(current)?.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    write_text(value, out);
                }
            }
            Segment::Range(path, body) => {
                for value in path.find(current)? {
                    render(body, &value, out)?;
                }
            }
        }
    }
    Ok(())
}

impl Step {
    fn eval<'a>(&self, input: Vec<Cow<'a, Value>>) -> Result<Vec<Cow<'a, Value>>, String> {
        let mut out = Vec::new();
        for value in input {
            match self {
                Step::Field(name) => {
                    if let Some(v) = child(&value, |v| v.as_object().and_then(|m| m.get(name))) {
                        out.push(v);
                    }
                }
                Step::Wildcard => out.extend(children(&value)),
                Step::Recursive => descend(value, &mut out),
                Step::Index(index) => {
                    let Some(list) = as_list(&value)? else {
                        continue;
                    };
                    let len = list_len(list);
                    let at = if *index < 0 {
                        index.saturating_add(len)
                    } else {
                        *index
                    };
                    if at < 0 || at >= len {
                        return Err(out_of_bounds(at, len));
                    }
                    out.extend(child(&value, |v| v.get(usize::try_from(at).ok()?)));
                }
                Step::Slice { start, end, step } => {
                    let Some(list) = as_list(&value)? else {
                        continue;
                    };
                    let len = list_len(list);
                    let from_end = |i: i64| if i < 0 { i.saturating_add(len) } else { i };
                    let start = start.map_or(0, from_end);
                    let end = end.map_or(len, from_end);
                    if start != end {
                        if start >= len {
                            return Err(out_of_bounds(start, len));
                        }
                        if end > len {
                            return Err(out_of_bounds(end.saturating_sub(1), len));
                        }
                    }
                    let step = step.unwrap_or(1);
                    if step <= 0 {
                        return Err(format!("invalid slice step {step}"));
                    }
                    let (start, end) = (start.max(0), end.max(0));
                    let mut i = start;
                    while i < end {
                        out.extend(child(&value, |v| v.get(usize::try_from(i).ok()?)));
                        i = i.saturating_add(step);
                    }
                }
                Step::Union(paths) => {
                    for path in paths {
                        out.extend(path.eval(vec![value.clone()])?);
                    }
                }
                Step::Filter(filter) => {
                    let Some(list) = value.as_array() else {
                        if value.is_null() {
                            continue;
                        }
                        return Err(format!(
                            "{} is not array or slice and cannot be filtered",
                            go_type(&value)
                        ));
                    };
                    for (i, element) in list.iter().enumerate() {
                        if filter.holds(element)? {
                            out.extend(child(&value, |v| v.get(i)));
                        }
                    }
                }
                Step::Literal(literal) => out.push(Cow::Owned(literal.clone())),
            }
        }
        Ok(out)
    }
}

impl Filter {
    fn holds(&self, element: &Value) -> Result<bool, String> {
        let lefts = self.left.find(element)?;
        let Some((operator, right)) = &self.compare else {
            return Ok(!lefts.is_empty());
        };
        // kubectl 1.32: an element without the field does not match.
        let left = match lefts.as_slice() {
            [] => return Ok(false),
            [one] => one,
            _ => return Err("can only compare one element at a time".to_owned()),
        };
        let rights = right.find(element)?;
        let [right] = rights.as_slice() else {
            return Err("can only compare one element at a time".to_owned());
        };
        let ordering = compare(left, right)?;
        Ok(match (operator, ordering) {
            (Operator::Equal, o) => o == Some(Ordering::Equal),
            (Operator::NotEqual, o) => o != Some(Ordering::Equal),
            (_, None) => return Err("invalid type for comparison".to_owned()),
            (Operator::Less, Some(o)) => o.is_lt(),
            (Operator::LessEqual, Some(o)) => o.is_le(),
            (Operator::Greater, Some(o)) => o.is_gt(),
            (Operator::GreaterEqual, Some(o)) => o.is_ge(),
        })
    }
}

/// Two values as Go's templates compare them: numbers of one kind
/// (integers or floats), strings, booleans (equality only: `None`).
/// Values of different kinds are an error.
fn compare(left: &Value, right: &Value) -> Result<Option<Ordering>, String> {
    let incompatible = || Err("incompatible types for comparison".to_owned());
    match (left, right) {
        (Value::String(a), Value::String(b)) => Ok(Some(a.cmp(b))),
        (Value::Bool(a), Value::Bool(b)) => Ok((a == b).then_some(Ordering::Equal)),
        (Value::Null, Value::Null) => Ok(Some(Ordering::Equal)),
        (Value::Number(a), Value::Number(b)) => match (integer(a), integer(b)) {
            (Some(a), Some(b)) => Ok(Some(a.cmp(&b))),
            (None, None) => Ok(a
                .as_f64()
                .zip(b.as_f64())
                .and_then(|(a, b)| a.partial_cmp(&b))),
            _ => incompatible(),
        },
        _ => incompatible(),
    }
}

fn integer(n: &serde_json::Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

fn out_of_bounds(index: i64, len: i64) -> String {
    format!("array index out of bounds: index {index}, length {len}")
}

fn list_len(list: &[Value]) -> i64 {
    i64::try_from(list.len()).unwrap_or(i64::MAX)
}

/// The list `value` is; `None` for null (skipped, as kubectl skips nil).
fn as_list(value: &Value) -> Result<Option<&[Value]>, String> {
    match value {
        Value::Array(list) => Ok(Some(list)),
        Value::Null => Ok(None),
        other => Err(format!("{} is not array or slice", go_type(other))),
    }
}

/// The type kubectl names in its errors: Go's, for decoded JSON.
fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if integer(n).is_some() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// A part of `value`, borrowed when `value` is.
fn child<'a>(
    value: &Cow<'a, Value>,
    pick: impl Fn(&Value) -> Option<&Value>,
) -> Option<Cow<'a, Value>> {
    match value {
        Cow::Borrowed(v) => pick(v).map(Cow::Borrowed),
        Cow::Owned(v) => pick(v).map(|c| Cow::Owned(c.clone())),
    }
}

/// A list's elements or a map's values (in key order).
fn children<'a>(value: &Cow<'a, Value>) -> Vec<Cow<'a, Value>> {
    let len = match value.as_ref() {
        Value::Array(list) => list.len(),
        Value::Object(map) => map.len(),
        _ => 0,
    };
    (0..len)
        .filter_map(|i| {
            child(value, |v| match v {
                Value::Array(list) => list.get(i),
                Value::Object(map) => map.values().nth(i),
                _ => None,
            })
        })
        .collect()
}

/// `..`: the value, if it has children, then the same for each child.
fn descend<'a>(value: Cow<'a, Value>, out: &mut Vec<Cow<'a, Value>>) {
    let kids = children(&value);
    if kids.is_empty() {
        return;
    }
    out.push(value);
    for kid in kids {
        descend(kid, out);
    }
}

/// A value as `-o jsonpath` prints it.
fn write_text(value: &Value, out: &mut String) {
    match value {
        Value::String(s) => out.push_str(s),
        Value::Number(n) => out.push_str(&go_number(n)),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Null => out.push_str("null"),
        Value::Array(_) | Value::Object(_) => go_json(value, out),
    }
}

/// A value as `-o custom-columns` prints it: Go's `fmt.Sprint` of the
/// decoded JSON (`map[a:1 b:x]`, `[a b]`, `<nil>`).
pub fn go_sprint(value: &Value) -> String {
    let mut out = String::new();
    sprint(value, &mut out);
    out
}

fn sprint(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("<nil>"),
        Value::Array(list) => {
            out.push('[');
            for (i, v) in list.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                sprint(v, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push_str("map[");
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                sprint(v, out);
            }
            out.push(']');
        }
        scalar => write_text(scalar, out),
    }
}

/// A number as Go's `%v` prints a decoded JSON number: integers in full,
/// floats in `%g` form (`1.5`, `1.2345675e+06`, `1e-05`).
fn go_number(n: &serde_json::Number) -> String {
    if let Some(i) = integer(n) {
        return i.to_string();
    }
    let f = n.as_f64().unwrap_or_default();
    let Some((digits, exp)) = shortest_digits(f) else {
        return f.to_string();
    };
    // strconv's %g with the shortest precision: an exponent unless
    // -4 <= exp < eprec, where eprec is 6, or the digit count when that
    // is smaller and covers the integer part.
    let count = i64::try_from(digits.len()).unwrap_or(i64::MAX);
    let mut eprec = 6;
    if eprec > count && count >= exp.saturating_add(1) {
        eprec = count;
    }
    if exp < -4 || exp >= eprec {
        go_exponent(f, &digits, exp, true)
    } else {
        f.to_string()
    }
}

/// The shortest decimal digits of `f` (no sign, no leading zeros) and its
/// decimal exponent, from Rust's shortest round-trip form.
fn shortest_digits(f: f64) -> Option<(String, i64)> {
    if !f.is_finite() || f == 0.0 {
        return None;
    }
    let text = format!("{:e}", f.abs());
    let (mantissa, exp) = text.split_once('e')?;
    let exp: i64 = exp.parse().ok()?;
    Some((mantissa.replace('.', ""), exp))
}

/// `d.ddde±XX` as Go writes it; `two_digits`: at least two exponent digits
/// (`%g`), else as encoding/json trims a negative one (`1e-7`).
fn go_exponent(f: f64, digits: &str, exp: i64, two_digits: bool) -> String {
    let mut out = String::new();
    if f.is_sign_negative() {
        out.push('-');
    }
    let mut chars = digits.chars();
    out.extend(chars.next());
    let rest: String = chars.collect();
    if !rest.is_empty() {
        out.push('.');
        out.push_str(&rest);
    }
    out.push('e');
    out.push(if exp < 0 { '-' } else { '+' });
    let magnitude = exp.unsigned_abs();
    if two_digits || exp >= 0 {
        let _ = write!(out, "{magnitude:02}");
    } else {
        let _ = write!(out, "{magnitude}");
    }
    out
}

/// A list or map as Go's encoding/json writes it: compact, keys sorted,
/// `<`, `>`, `&`, U+2028 and U+2029 escaped, floats in full unless tiny or
/// huge.
fn go_json(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match (integer(n), n.as_f64()) {
            (Some(i), _) => {
                let _ = write!(out, "{i}");
            }
            (None, Some(f)) => {
                let tiny_or_huge = f != 0.0 && (f.abs() < 1e-6 || f.abs() >= 1e21);
                match shortest_digits(f) {
                    Some((digits, exp)) if tiny_or_huge => {
                        out.push_str(&go_exponent(f, &digits, exp, false))
                    }
                    _ => {
                        let _ = write!(out, "{f}");
                    }
                }
            }
            (None, None) => out.push_str("null"),
        },
        Value::String(s) => go_json_string(s, out),
        Value::Array(list) => {
            out.push('[');
            for (i, v) in list.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json(v, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json_string(k, out);
                out.push(':');
                go_json(v, out);
            }
            out.push('}');
        }
    }
}

fn go_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A template split into text and the insides of its `{…}` actions.
enum Piece<'a> {
    Text(&'a str),
    Action(&'a str),
}

/// Splits at `{` and at the `}` that closes it; a `}` inside quotes or a
/// filter does not close an action.
fn split_actions(source: &str) -> Result<Vec<Piece<'_>>, String> {
    let mut pieces = Vec::new();
    let mut rest = source;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            pieces.push(Piece::Text(&rest[..open]));
        }
        let inside = rest
            .get(open..)
            .unwrap_or_default()
            .strip_prefix('{')
            .unwrap_or_default();
        let close = action_end(inside)?;
        pieces.push(Piece::Action(&inside[..close]));
        rest = inside
            .get(close..)
            .unwrap_or_default()
            .strip_prefix('}')
            .unwrap_or_default();
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest));
    }
    Ok(pieces)
}

/// Where the action that starts `text` ends (the index of its `}`).
fn action_end(text: &str) -> Result<usize, String> {
    let mut quote = None;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if c == '\n' || c == '\r' {
            return Err("unclosed action".to_owned());
        }
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '"' | '\'' => quote = Some(c),
                '\\' => escaped = !escaped,
                '}' if !escaped => return Ok(i),
                _ => escaped = false,
            },
        }
    }
    Err("unclosed action".to_owned())
}

enum Action {
    Path(Path),
    Range(Path),
    End,
}

/// One action's inside: `range PATH`, `end`, or a path.
fn parse_action(text: &str) -> Result<Action, String> {
    let trimmed = text.trim_start_matches([' ', '\t']);
    if let Some(rest) = keyword(trimmed, "range") {
        return Ok(Action::Range(PathParser::new(rest).parse()?));
    }
    if let Some(rest) = keyword(trimmed, "end") {
        if !rest.trim().is_empty() {
            return Err(format!("unrecognized identifier {}", rest.trim()));
        }
        return Ok(Action::End);
    }
    Ok(Action::Path(PathParser::new(text).parse()?))
}

/// `text` after the identifier `word`, if it starts with it as a whole.
fn keyword<'a>(text: &'a str, word: &str) -> Option<&'a str> {
    let rest = text.strip_prefix(word)?;
    rest.chars()
        .next()
        .is_none_or(is_terminator)
        .then_some(rest)
}

/// Ends a field or an identifier.
fn is_terminator(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\r' | '\n' | '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}'
    )
}

fn is_alphanumeric(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

struct PathParser<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> PathParser<'a> {
    fn new(text: &'a str) -> Self {
        PathParser { text, at: 0 }
    }

    /// Moves past `n` bytes of the text.
    fn skip(&mut self, n: usize) {
        self.at = self.at.saturating_add(n);
    }

    fn rest(&self) -> &'a str {
        self.text.get(self.at..).unwrap_or("")
    }

    fn parse(mut self) -> Result<Path, String> {
        let mut steps = Vec::new();
        loop {
            let rest = self.rest();
            let Some(c) = rest.chars().next() else {
                return Ok(Path(steps));
            };
            if rest.starts_with("[?(") {
                self.skip(3);
                steps.push(self.filter()?);
                continue;
            }
            if rest.starts_with("..") {
                if steps.last() == Some(&Step::Recursive) {
                    return Err("invalid multiple recursive descent".to_owned());
                }
                self.skip(2);
                steps.push(Step::Recursive);
                if self.rest().chars().next().is_some_and(is_alphanumeric) {
                    steps.push(self.field());
                }
                continue;
            }
            match c {
                ' ' | '\t' | '@' | '$' => self.skip(1),
                '[' => {
                    self.skip(1);
                    steps.push(self.bracket()?);
                }
                '"' | '\'' => steps.push(Step::Literal(Value::String(self.quoted(c)?))),
                '.' => {
                    self.skip(1);
                    steps.push(self.field());
                }
                '+' | '-' | '0'..='9' => steps.push(self.number()?),
                c if is_alphanumeric(c) => {
                    let word: String = rest.chars().take_while(|c| !is_terminator(*c)).collect();
                    self.skip(word.len());
                    match word.as_str() {
                        "true" => steps.push(Step::Literal(Value::Bool(true))),
                        "false" => steps.push(Step::Literal(Value::Bool(false))),
                        other => return Err(format!("unrecognized identifier {other}")),
                    }
                }
                other => {
                    return Err(format!(
                        "unrecognized character in action: {}",
                        other.escape_debug()
                    ));
                }
            }
        }
    }

    /// A field name up to a terminator; `\` keeps the next character.
    fn field(&mut self) -> Step {
        let mut name = String::new();
        let mut chars = self.rest().char_indices();
        let mut end = self.rest().len();
        while let Some((i, c)) = chars.next() {
            if c == '\\' {
                if let Some((_, next)) = chars.next() {
                    name.push(next);
                }
                continue;
            }
            if is_terminator(c) {
                end = i;
                break;
            }
            name.push(c);
        }
        self.skip(end);
        if name == "*" {
            Step::Wildcard
        } else {
            Step::Field(name)
        }
    }

    /// The inside of `[…]`: `*`, a union, `'key'`, an index or a slice.
    fn bracket(&mut self) -> Result<Step, String> {
        let rest = self.rest();
        let close = rest.find(']').ok_or("unterminated array")?;
        let inside = &rest[..close];
        self.skip(close.saturating_add(1));
        bracket_step(inside)
    }

    fn filter(&mut self) -> Result<Step, String> {
        let rest = self.rest();
        let mut quote = None;
        let mut end = None;
        let mut previous = None;
        for (i, c) in rest.char_indices() {
            if c == '\n' {
                break;
            }
            match quote {
                Some(q) if c == q && previous != Some('\\') => quote = None,
                Some(_) => {}
                None if c == '"' || c == '\'' => quote = Some(c),
                None if c == ')' => {
                    end = Some(i);
                    break;
                }
                None => {}
            }
            previous = Some(c);
        }
        let end = end.ok_or("unterminated filter")?;
        let inside = &rest[..end];
        if !rest.get(end..).unwrap_or_default().starts_with(")]") {
            return Err("unclosed array expect ]".to_owned());
        }
        self.skip(end.saturating_add(2));
        let split = inside.find(['!', '<', '>', '=']);
        let filter = match split {
            Some(at) if at > 0 => {
                let left = &inside[..at];
                let (operator_text, right) = inside[at..].split_at(
                    inside[at..]
                        .find(|c| !matches!(c, '!' | '<' | '>' | '='))
                        .unwrap_or(inside[at..].len()),
                );
                let operator = match operator_text {
                    "==" => Operator::Equal,
                    "!=" => Operator::NotEqual,
                    "<" => Operator::Less,
                    "<=" => Operator::LessEqual,
                    ">" => Operator::Greater,
                    ">=" => Operator::GreaterEqual,
                    other => return Err(format!("unrecognized filter operator {other}")),
                };
                if right.is_empty() {
                    return Err(format!("unrecognized filter operator {}", &inside[at..]));
                }
                Filter {
                    left: PathParser::new(left).parse()?,
                    compare: Some((operator, PathParser::new(right).parse()?)),
                }
            }
            _ => Filter {
                left: PathParser::new(inside).parse()?,
                compare: None,
            },
        };
        Ok(Step::Filter(Box::new(filter)))
    }

    fn quoted(&mut self, quote: char) -> Result<String, String> {
        let rest = self.rest();
        let mut escaped = false;
        for (i, c) in rest.char_indices().skip(1) {
            if c == '\n' {
                break;
            }
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == quote {
                self.skip(i.saturating_add(c.len_utf8()));
                return unquote(&rest[1..i])
                    .map_err(|e| format!("unquote string {} error {e}", &rest[..=i]));
            }
        }
        Err("unterminated quoted string".to_owned())
    }

    fn number(&mut self) -> Result<Step, String> {
        let rest = self.rest();
        let sign = usize::from(rest.starts_with(['+', '-']));
        let len = rest[sign..]
            .find(|c: char| c != '.' && !c.is_ascii_digit())
            .map_or(rest.len(), |n| n.saturating_add(sign));
        let text = &rest[..len];
        self.skip(len);
        if let Ok(i) = text.parse::<i64>() {
            return Ok(Step::Literal(Value::from(i)));
        }
        text.parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(|n| Step::Literal(Value::Number(n)))
            .ok_or_else(|| format!("cannot parse number {text}"))
    }
}

/// `[…]`'s step from its inside.
fn bracket_step(inside: &str) -> Result<Step, String> {
    let inside = if inside == "*" { ":" } else { inside };
    if inside.contains(',') {
        let paths = inside
            .split(',')
            .map(|part| bracket_step(part.trim()).map(|step| Path(vec![step])))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(Step::Union(paths));
    }
    if let Some(key) = inside
        .strip_prefix('\'')
        .and_then(|k| k.strip_suffix('\''))
        .filter(|k| !k.contains('\''))
    {
        return Ok(Step::Field(key.to_owned()));
    }
    let invalid = || format!("invalid array index {inside:?}");
    let number = |part: &str| -> Result<Option<i64>, String> {
        if part.is_empty() {
            return Ok(None);
        }
        let digits = part.strip_prefix('-').unwrap_or(part);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        part.parse()
            .map(Some)
            .map_err(|_| format!("array index {part} is not a number"))
    };
    let parts: Vec<&str> = inside.split(':').collect();
    match parts.as_slice() {
        [index] => number(index)?.map(Step::Index).ok_or_else(invalid),
        [start, end] => Ok(Step::Slice {
            start: number(start)?,
            end: number(end)?,
            step: None,
        }),
        [start, end, step] => Ok(Step::Slice {
            start: number(start)?,
            end: number(end)?,
            step: number(step)?,
        }),
        _ => Err(invalid()),
    }
}

/// A quoted literal's text with Go's escapes (`\n`, `\t`, `\"`, `\\`,
/// `\xHH`, `\uHHHH`, `\UHHHHHHHH`, `\NNN` octal).
fn unquote(text: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let escape = chars.next().ok_or("invalid syntax")?;
        let hex = |chars: &mut std::str::Chars<'_>, n: usize| -> Result<char, String> {
            let digits: String = chars.take(n).collect();
            u32::from_str_radix(&digits, 16)
                .ok()
                .filter(|_| digits.len() == n)
                .and_then(char::from_u32)
                .ok_or_else(|| "invalid syntax".to_owned())
        };
        match escape {
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\u{b}'),
            '\\' | '\'' | '"' => out.push(escape),
            'x' => out.push(hex(&mut chars, 2)?),
            'u' => out.push(hex(&mut chars, 4)?),
            'U' => out.push(hex(&mut chars, 8)?),
            '0'..='7' => {
                let rest: String = chars.by_ref().take(2).collect();
                let code = u32::from_str_radix(&format!("{escape}{rest}"), 8)
                    .ok()
                    .filter(|code| rest.len() == 2 && *code <= 255)
                    .and_then(char::from_u32)
                    .ok_or("invalid syntax")?;
                out.push(code);
            }
            _ => return Err("invalid syntax".to_owned()),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({
            "kind": "Pod",
            "metadata": {"name": "web", "labels": {"app": "x", "app.kubernetes.io/name": "y"}},
            "spec": {"containers": [
                {"name": "a", "image": "busybox", "command": ["sleep", "1"]},
                {"name": "b", "image": "nginx"}
            ]},
            "things": [
                {"metadata": {"name": "a"}, "n": 1, "f": 1.5, "b": true, "z": null, "h": "<&>"},
                {"metadata": {"name": "b"}, "n": 2, "big": 1e21, "neg": -0.5, "e": [], "o": {}}
            ]
        })
    }

    fn run(template: &str) -> Result<String, String> {
        Template::parse(template)
            .map_err(|e| e.to_string())?
            .render(&pod())
            .map_err(|e| e.reason)
    }

    // The expected texts below are what kubectl 1.32's `-o jsonpath`
    // printed for the same object.
    #[test]
    fn fields_wildcards_and_ranges_print_as_kubectl_prints_them() {
        assert_eq!(
            run(
                r#"{.metadata.name} {.spec.containers[*].name}{"\n"}{range .spec.containers[*]}[{.name}:{.image}]{end}"#
            ),
            Ok("web a b\n[a:busybox][b:nginx]".to_owned())
        );
        assert_eq!(
            run(r"{.metadata.labels.app\.kubernetes\.io/name}"),
            Ok("y".into())
        );
        assert_eq!(
            run("{.spec.containers[0]}"),
            Ok(r#"{"command":["sleep","1"],"image":"busybox","name":"a"}"#.into())
        );
        assert_eq!(
            run("{range .things[*]}{.metadata.name}={.n},{.f},{.b},{.z};{end}"),
            Ok("a=1,1.5,true,null;b=2,,,;".into())
        );
        assert_eq!(
            run("{$.kind}|{@.kind}|{.things[*].n}"),
            Ok("Pod|Pod|1 2".into())
        );
        assert_eq!(run("{.things[*].e}{.things[1].o}"), Ok("[]{}".into()));
        assert_eq!(run("{.metadata.labels.*}"), Ok("x y".into()));
    }

    #[test]
    fn indexes_slices_unions_and_filters_select_as_kubectl_does() {
        assert_eq!(run("{.things[-1].n}"), Ok("2".into()));
        assert_eq!(run("{.things[0:1].n}"), Ok("1".into()));
        assert_eq!(run("{.things[-1:].n}"), Ok("2".into()));
        assert_eq!(run("{.things[0:2:1].n}"), Ok("1 2".into()));
        assert_eq!(run("{.things[0,1].n}"), Ok("1 2".into()));
        assert_eq!(run("{.things[0]['metadata'].name}"), Ok("a".into()));
        assert_eq!(run("{.things[?(@.n==2)].metadata.name}"), Ok("b".into()));
        assert_eq!(run("{.things[?(@.n>1)].metadata.name}"), Ok("b".into()));
        assert_eq!(
            run(r#"{.things[?(@.metadata.name=="b")].n}"#),
            Ok("2".into())
        );
        // An element without the field does not match; `z` is null but there.
        assert_eq!(run("{.things[?(@.f==1.5)].n}"), Ok("1".into()));
        assert_eq!(run("{.things[?(@.z)].n}"), Ok("1".into()));
    }

    #[test]
    fn missing_fields_print_nothing_and_bad_indexes_are_errors() {
        assert_eq!(
            run("{.nope}|{.metadata.nope.deeper}|{.things[0].n.x}"),
            Ok("||".into())
        );
        assert_eq!(run("{range .empty[*]}x{end}after"), Ok("after".into()));
        assert_eq!(
            run("{.things[3]}x"),
            Err("array index out of bounds: index 3, length 2".into())
        );
        assert_eq!(
            run("{.things[5:6].n}"),
            Err("array index out of bounds: index 5, length 2".into())
        );
        assert_eq!(
            run("{.things[?(@.n==2.0)].n}"),
            Err("incompatible types for comparison".into())
        );
        assert_eq!(
            run("{.a b}"),
            Err("error parsing jsonpath {.a b}, unrecognized identifier b".into())
        );
        assert_eq!(
            run("{.a"),
            Err("error parsing jsonpath {.a, unclosed action".into())
        );
        assert_eq!(
            run("{end}"),
            Err("error parsing jsonpath {end}, not in range, nothing to end".into())
        );
    }

    #[test]
    fn numbers_and_nested_values_are_written_as_go_writes_them() {
        let object = json!({"a": 1234567.5, "b": 0.00001, "c": 1e21, "d": 123456789012_i64,
                             "e": "x\u{2028}y", "f": [1, "s", null], "g": 0.5, "h": 100.0, "i": 1e-7});
        let t = |s: &str| Template::parse(s).map(|t| t.render(&object));
        assert_eq!(
            t("{.a}|{.b}|{.c}|{.d}|{.f}|{.f[*]}|{.g}|{.h}")
                .ok()
                .and_then(Result::ok),
            Some("1.2345675e+06|1e-05|1e+21|123456789012|[1,\"s\",null]|1 s null|0.5|100".into())
        );
        let mut nested = String::new();
        go_json(&object, &mut nested);
        assert_eq!(
            nested,
            r#"{"a":1234567.5,"b":0.00001,"c":1e+21,"d":123456789012,"e":"x\u2028y","f":[1,"s",null],"g":0.5,"h":100,"i":1e-7}"#
        );
        assert_eq!(
            go_sprint(&json!({"b": [1, "x"], "a": null})),
            "map[a:<nil> b:[1 x]]"
        );
    }

    #[test]
    fn relaxed_paths_accept_the_four_spellings() {
        let object = pod();
        for spelling in [
            "metadata.name",
            ".metadata.name",
            "{metadata.name}",
            "{.metadata.name}",
        ] {
            let found = Path::parse_relaxed(spelling).map(|p| p.find(&object).map(|v| v.len()));
            assert_eq!(found, Ok(Ok(1)), "{spelling}");
        }
        assert!(Path::parse_relaxed("").is_err());
        assert!(Path::parse_relaxed("{a}{b}").is_err());
    }
}
