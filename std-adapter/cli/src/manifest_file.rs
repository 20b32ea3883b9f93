//! What `grace apply -f` and `grace delete -f` read: files, directories
//! and standard input holding Kubernetes manifests, YAML or JSON, several
//! documents each.
//!
//! A document is parsed with the Kubernetes types (k8s-openapi's `Pod`).
//! Those types accept any field and drop the ones they do not know, as
//! Kubernetes' own non-strict decoding does; grace is strict instead, as
//! `kubectl apply --validate=strict` is: the deserializer is wrapped with
//! `serde_ignored`, every field the types dropped is an error, and the
//! document is read once more to find where that field is (its line and
//! column). Type errors come with the path (`serde_path_to_error`) and the
//! position the format reports.
//!
//! JSON is read with serde_json (a file whose first character is `{`;
//! several objects may follow each other), everything else as YAML with
//! serde-saphyr, documents separated by `---`. Each document is parsed
//! in a copy of the file with everything else blanked out, so every
//! position is the file's own.
//!
//! A JSON document without `apiVersion` is grace's older object format
//! ([`crate::manifest`]), still accepted.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use grace_agent::pod_update::annotate;

use crate::k8s_pod::{PodError, ignored_fields, to_object};
use crate::store::StoredObject;

/// A manifest that cannot be applied: where, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestError {
    /// The file (`-` for standard input).
    pub source: String,
    /// The field, in kubectl's notation (`spec.containers[0].imagee`).
    pub field: Option<String>,
    /// Line and column (from 1), when known.
    pub at: Option<(u64, u64)>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for ManifestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "\"{}\": ", self.source)?;
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        write!(f, "{}", self.message)?;
        if let Some((line, column)) = self.at {
            write!(f, " (line {line}, column {column})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ManifestError {}

/// The namespace of a manifest that names none, as kubectl's.
const DEFAULT_NAMESPACE: &str = "default";

/// One object read from a manifest.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    /// The file it came from.
    pub source: String,
    /// `metadata.name` (generated for a `metadata.generateName`).
    pub name: String,
    /// `metadata.namespace`, if given.
    pub namespace: Option<String>,
    /// The object to store; an empty uid when the manifest gave none.
    pub object: StoredObject,
    /// Fields valid in a Pod that grace does not act on.
    pub ignored: Vec<String>,
    /// Warnings (a value taken as Kubernetes takes it).
    pub warnings: Vec<String>,
    /// The document as the file gives it (nulls and empty maps included),
    /// for kubectl's last-applied annotation ([`Document::annotate`]).
    raw: Option<serde_json::Value>,
}

impl Document {
    /// Writes on the kept Pod the annotation `kubectl apply` writes: the
    /// document as its file gives it, in `namespace`, the one the object
    /// goes to (the file's, or else `-n`'s).
    pub fn annotate(&mut self, namespace: &str) {
        if let (Some(kept), Some(raw)) = (&self.object.manifest, &self.raw) {
            self.object.manifest = Some(annotate(kept, raw, namespace));
        }
    }
}

/// Reads every manifest `files` name: `-` is standard input, a directory
/// is its `.json`, `.yaml` and `.yml` files in name order (not recursive,
/// as kubectl without `-R`). Nothing is returned unless every document is
/// valid.
pub fn read(files: &[PathBuf]) -> Result<Vec<Document>, ManifestError> {
    let mut documents = Vec::new();
    for file in files {
        for (source, text) in sources(file)? {
            let json = source.ends_with(".json");
            documents.extend(parse_as(&source, &text, json)?);
        }
    }
    Ok(documents)
}

fn sources(file: &Path) -> Result<Vec<(String, String)>, ManifestError> {
    let cannot = |path: &Path, e: std::io::Error| ManifestError {
        source: path.display().to_string(),
        field: None,
        at: None,
        message: format!("cannot read: {e}"),
    };
    if file == Path::new("-") {
        let text = std::io::read_to_string(std::io::stdin()).map_err(|e| cannot(file, e))?;
        return Ok(vec![("-".to_owned(), text)]);
    }
    if file.is_dir() {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(file)
            .map_err(|e| cannot(file, e))?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|p| {
                p.is_file()
                    && p.extension()
                        .is_some_and(|e| e == "json" || e == "yaml" || e == "yml")
            })
            .collect();
        paths.sort();
        return paths
            .into_iter()
            .map(|p| {
                let text = std::fs::read_to_string(&p).map_err(|e| cannot(&p, e))?;
                Ok((p.display().to_string(), text))
            })
            .collect();
    }
    let text = std::fs::read_to_string(file).map_err(|e| cannot(file, e))?;
    Ok(vec![(file.display().to_string(), text)])
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Format {
    Json,
    Yaml,
}

/// Parses every document of one manifest file's `text` (JSON if it
/// starts with `{`, else YAML).
pub fn parse(source: &str, text: &str) -> Result<Vec<Document>, ManifestError> {
    parse_as(source, text, false)
}

/// [`parse`], as JSON if `json` (a `.json` file).
fn parse_as(source: &str, text: &str, json: bool) -> Result<Vec<Document>, ManifestError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let format = if json || text.trim_start().starts_with('{') {
        Format::Json
    } else {
        Format::Yaml
    };
    let fail = |at: Option<(u64, u64)>, field: Option<String>, message: String| ManifestError {
        source: source.to_owned(),
        field,
        at,
        message,
    };
    let mut documents = Vec::new();
    for range in split(format, text).map_err(|(m, at)| fail(at, None, m))? {
        let doc = blank_outside(text, range);
        let peek: Peek = run(format, &doc, PeekPass).map_err(|(m, at)| fail(at, None, m))?;
        let Some(peek) = peek.0 else {
            continue; // an empty YAML document
        };
        match (peek.api_version.as_deref(), peek.kind.as_deref()) {
            (None, _) if format == Format::Json => {
                documents.push(legacy(source, &doc)?);
            }
            (None, _) => {
                return Err(fail(
                    None,
                    Some("apiVersion".into()),
                    "Required value: a Kubernetes manifest (apiVersion: v1, kind: Pod)".into(),
                ));
            }
            (Some("v1"), Some("Pod")) => {
                documents.push(pod_document(source, format, &doc, &[])?);
            }
            (Some("v1"), Some("List")) => {
                let count = run(format, &doc, CountItems).map_err(|(m, at)| fail(at, None, m))?;
                for i in 0..count {
                    documents.push(pod_document(
                        source,
                        format,
                        &doc,
                        &[Seg::Key("items".into()), Seg::Index(i)],
                    )?);
                }
            }
            (api_version, kind) => {
                let field = if api_version == Some("v1") {
                    "kind"
                } else {
                    "apiVersion"
                };
                let at = locate(format, &doc, &[Seg::Key(field.into())]);
                return Err(fail(
                    at,
                    Some(field.into()),
                    format!(
                        "Unsupported value: {}/{}: grace handles Pods (apiVersion: v1, kind: Pod) and v1 Lists of them",
                        api_version.unwrap_or(""),
                        kind.unwrap_or("")
                    ),
                ));
            }
        }
    }
    Ok(documents)
}

/// A Pod at `prefix` in the document (the root, or `items[i]` of a List).
fn pod_document(
    source: &str,
    format: Format,
    doc: &str,
    prefix: &[Seg],
) -> Result<Document, ManifestError> {
    let mut unknown: Vec<Vec<Seg>> = Vec::new();
    let mut error_path: Vec<Seg> = Vec::new();
    let pass = PodPass {
        prefix,
        unknown: &mut unknown,
        error_path: &mut error_path,
    };
    let fail = |path: Vec<Seg>, at: Option<(u64, u64)>, message: String| ManifestError {
        source: source.to_owned(),
        field: (!path.is_empty()).then(|| display(&path)),
        at,
        message,
    };
    let pod = match run(format, doc, pass) {
        Ok(Some(pod)) => pod,
        Ok(None) => return Err(fail(prefix.to_vec(), None, "not found".into())),
        Err((message, at)) => {
            let mut path = prefix.to_vec();
            path.extend(error_path);
            return Err(fail(path, at, message));
        }
    };
    if let Some(first) = unknown.into_iter().next() {
        let mut path = prefix.to_vec();
        path.extend(first);
        let at = locate(format, doc, &path);
        return Err(fail(
            path,
            at,
            "unknown field: not a field of a Kubernetes v1 Pod".into(),
        ));
    }
    let converted = to_object(&pod).map_err(|PodError { path, message }| {
        let mut full = prefix.to_vec();
        full.extend(segments(&path));
        let at = locate(format, doc, &full);
        fail(full, at, message)
    })?;
    // For the annotation `kubectl apply` writes: the document as the file
    // gives it (nulls and empty maps included), read once more as JSON.
    // kubectl writes the namespace the object goes to: the file's, or else
    // `-n`'s, which the caller knows ([`Document::annotate`]); the file's
    // or the default until then.
    let raw = run(format, doc, RawPass { prefix }).ok().flatten();
    let mut document = Document {
        source: source.to_owned(),
        name: converted.name,
        namespace: converted.namespace,
        object: converted.object,
        ignored: ignored_fields(&pod),
        warnings: converted.warnings,
        raw,
    };
    let namespace = document
        .namespace
        .clone()
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned());
    document.annotate(&namespace);
    Ok(document)
}

/// A document in grace's older format.
fn legacy(source: &str, doc: &str) -> Result<Document, ManifestError> {
    let manifest = crate::manifest::parse(doc, String::new).map_err(|e| ManifestError {
        source: source.to_owned(),
        field: Some(e.field.clone()),
        at: e.position.map(|(l, c)| (l as u64, c as u64)),
        message: e.message.clone(),
    })?;
    Ok(Document {
        source: source.to_owned(),
        name: manifest.name,
        namespace: None,
        object: manifest.object,
        ignored: Vec::new(),
        warnings: Vec::new(),
        raw: None,
    })
}

/// A format's error: its message, and its line and column when known.
type Failure = (String, Option<(u64, u64)>);

/// The byte ranges of the documents in `text`.
fn split(format: Format, text: &str) -> Result<Vec<std::ops::Range<usize>>, Failure> {
    match format {
        Format::Json => {
            let mut ranges = Vec::new();
            let mut stream = serde_json::Deserializer::from_str(text).into_iter::<IgnoredAny>();
            let mut start = 0;
            while let Some(next) = stream.next() {
                next.map_err(json_error)?;
                let end = stream.byte_offset();
                ranges.push(start..end);
                start = end;
            }
            Ok(ranges)
        }
        Format::Yaml => {
            let mut ranges = Vec::new();
            let mut start = 0_usize;
            let mut offset = 0_usize;
            for line in text.split_inclusive('\n') {
                let marker = ["---", "..."].iter().any(|m| {
                    line.strip_prefix(m).is_some_and(|rest| {
                        rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n'])
                    })
                });
                if marker {
                    ranges.push(start..offset);
                    // The marker itself is blanked; what follows it on
                    // the line belongs to the next document.
                    start = offset.saturating_add(3);
                }
                offset = offset.saturating_add(line.len());
            }
            ranges.push(start..text.len());
            Ok(ranges)
        }
    }
}

/// `text` with everything outside `range` turned into spaces (line breaks
/// kept), so positions in the copy are positions in the file.
fn blank_outside(text: &str, range: std::ops::Range<usize>) -> String {
    text.char_indices()
        .map(|(i, c)| {
            if range.contains(&i) || c == '\n' || c == '\r' {
                c
            } else {
                ' '
            }
        })
        .collect()
}

/// A step of a path into a document.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

/// kubectl's notation: `spec.containers[0].name`.
fn display(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// The steps of a path in kubectl's notation; a label's key (which may
/// hold dots) is one step.
fn segments(path: &str) -> Vec<Seg> {
    let (path, label) = match path.strip_prefix("metadata.labels.") {
        Some(key) => ("metadata.labels", Some(key)),
        None => (path, None),
    };
    let mut out = Vec::new();
    for part in path.split('.') {
        let mut rest = part;
        if let Some(open) = rest.find('[') {
            out.push(Seg::Key(rest[..open].to_owned()));
            rest = &rest[open..];
            while let Some(end) = rest.find(']') {
                if let Ok(i) = rest[1..end].parse() {
                    out.push(Seg::Index(i));
                }
                rest = rest.get(end.saturating_add(1)..).unwrap_or_default();
            }
        } else {
            out.push(Seg::Key(rest.to_owned()));
        }
    }
    if let Some(key) = label {
        out.push(Seg::Key(key.to_owned()));
    }
    out
}

/// One read of a document with a deserializer of either format.
trait Pass {
    type Out;
    fn run<'de, D: Deserializer<'de>>(self, de: D) -> Result<Self::Out, D::Error>;
    /// Whether keys are read with their position (YAML's `Spanned`).
    fn spanned(&mut self, _yaml: bool) {}
}

/// Runs `pass` on `text`; an error comes with its message and position.
fn run<P: Pass>(format: Format, text: &str, mut pass: P) -> Result<P::Out, Failure> {
    match format {
        Format::Json => {
            let mut de = serde_json::Deserializer::from_str(text);
            let out = pass.run(&mut de).map_err(json_error)?;
            de.end().map_err(json_error)?;
            Ok(out)
        }
        Format::Yaml => {
            pass.spanned(true);
            let mut options = serde_saphyr::Options::default();
            options.with_snippet = false;
            serde_saphyr::with_deserializer_from_str_with_options(text, options, |de| pass.run(de))
                .map_err(|e| {
                    let at = e.location().map(|l| (l.line(), l.column()));
                    (yaml_message(&e), at)
                })
        }
    }
}

fn json_error(e: serde_json::Error) -> Failure {
    let text = e.to_string();
    let message = match text.rfind(" at line ") {
        Some(i) => text[..i].to_owned(),
        None => text,
    };
    let at = (e.line() > 0).then(|| (e.line() as u64, e.column() as u64));
    (message, at)
}

/// The first line of serde-saphyr's report, without its position (given
/// apart) and the snippet it draws.
fn yaml_message(e: &serde_saphyr::Error) -> String {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    match first.split_once(": ") {
        Some((position, rest)) if position.starts_with("line ") => rest.to_owned(),
        _ => first.to_owned(),
    }
}

/// `apiVersion` and `kind`, if the document is a map (`None`: empty).
struct Peek(Option<TypeMeta>);

#[derive(Deserialize)]
struct TypeMeta {
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
    kind: Option<String>,
}

struct PeekPass;

impl Pass for PeekPass {
    type Out = Peek;
    fn run<'de, D: Deserializer<'de>>(self, de: D) -> Result<Peek, D::Error> {
        Option::<TypeMeta>::deserialize(de).map(Peek)
    }
}

/// How many `items` a List has.
struct CountItems;

impl Pass for CountItems {
    type Out = usize;
    fn run<'de, D: Deserializer<'de>>(self, de: D) -> Result<usize, D::Error> {
        #[derive(Deserialize)]
        struct Items {
            #[serde(default)]
            items: Vec<IgnoredAny>,
        }
        Items::deserialize(de).map(|l| l.items.len())
    }
}

/// The document at `prefix` as JSON, as the file gives it.
struct RawPass<'a> {
    prefix: &'a [Seg],
}

impl Pass for RawPass<'_> {
    type Out = Option<serde_json::Value>;
    fn run<'de, D: Deserializer<'de>>(self, de: D) -> Result<Self::Out, D::Error> {
        Walk {
            path: self.prefix,
            target: std::marker::PhantomData::<serde_json::Value>,
        }
        .deserialize(de)
    }
}

/// The Pod at `prefix`: every field the types drop goes to `unknown`, the
/// path of an error to `error_path`.
struct PodPass<'a> {
    prefix: &'a [Seg],
    unknown: &'a mut Vec<Vec<Seg>>,
    error_path: &'a mut Vec<Seg>,
}

impl Pass for PodPass<'_> {
    type Out = Option<Pod>;
    fn run<'de, D: Deserializer<'de>>(self, de: D) -> Result<Option<Pod>, D::Error> {
        Walk {
            path: self.prefix,
            target: PodSeed {
                unknown: self.unknown,
                error_path: self.error_path,
            },
        }
        .deserialize(de)
    }
}

struct PodSeed<'a> {
    unknown: &'a mut Vec<Vec<Seg>>,
    error_path: &'a mut Vec<Seg>,
}

impl<'de> DeserializeSeed<'de> for PodSeed<'_> {
    type Value = Pod;
    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Pod, D::Error> {
        let unknown = self.unknown;
        let mut note = |path: serde_ignored::Path<'_>| unknown.push(ignored_path(&path));
        let de = serde_ignored::Deserializer::new(de, &mut note);
        serde_path_to_error::deserialize(de).map_err(|e| {
            *self.error_path = e
                .path()
                .iter()
                .filter_map(|s| match s {
                    serde_path_to_error::Segment::Seq { index } => Some(Seg::Index(*index)),
                    serde_path_to_error::Segment::Map { key } => Some(Seg::Key(key.clone())),
                    serde_path_to_error::Segment::Enum { .. }
                    | serde_path_to_error::Segment::Unknown => None,
                })
                .collect();
            e.into_inner()
        })
    }
}

fn ignored_path(path: &serde_ignored::Path<'_>) -> Vec<Seg> {
    use serde_ignored::Path;
    match path {
        Path::Root => Vec::new(),
        Path::Seq { parent, index } => {
            let mut p = ignored_path(parent);
            p.push(Seg::Index(*index));
            p
        }
        Path::Map { parent, key } => {
            let mut p = ignored_path(parent);
            p.push(Seg::Key(key.clone()));
            p
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => ignored_path(parent),
    }
}

/// Walks `path` and hands the value there to `target`; `None` if the path
/// is not in the document.
struct Walk<'p, T> {
    path: &'p [Seg],
    target: T,
}

impl<'de, T: DeserializeSeed<'de>> DeserializeSeed<'de> for Walk<'_, T> {
    type Value = Option<T::Value>;
    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        match self.path.first() {
            None => self.target.deserialize(de).map(Some),
            Some(Seg::Key(_)) => de.deserialize_map(self),
            Some(Seg::Index(_)) => de.deserialize_seq(self),
        }
    }
}

impl<'de, T: DeserializeSeed<'de>> Visitor<'de> for Walk<'_, T> {
    type Value = Option<T::Value>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a map or a list")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let Some((Seg::Key(wanted), rest)) = self.path.split_first() else {
            return Err(de::Error::custom("a list was expected here"));
        };
        let mut found = None;
        let mut target = Some(self.target);
        while let Some(key) = map.next_key::<String>()? {
            match (key == *wanted, target.take()) {
                (true, Some(t)) => {
                    found = map.next_value_seed(Walk {
                        path: rest,
                        target: t,
                    })?;
                }
                (_, t) => {
                    target = t;
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(found)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let Some((Seg::Index(wanted), rest)) = self.path.split_first() else {
            return Err(de::Error::custom("a map was expected here"));
        };
        let mut found = None;
        let mut target = Some(self.target);
        let mut i = 0;
        loop {
            let done = match (i == *wanted, target.take()) {
                (true, Some(t)) => match seq.next_element_seed(Walk {
                    path: rest,
                    target: t,
                })? {
                    Some(value) => {
                        found = value;
                        false
                    }
                    None => true,
                },
                (_, t) => {
                    target = t;
                    seq.next_element::<IgnoredAny>()?.is_none()
                }
            };
            if done {
                return Ok(found);
            }
            i = i.saturating_add(1);
        }
    }
}

/// Where the field at `path` is (line, column), or the nearest enclosing
/// one that is in the document.
fn locate(format: Format, doc: &str, path: &[Seg]) -> Option<(u64, u64)> {
    let mut path = path;
    while !path.is_empty() {
        match run(format, doc, LocatePass { path, yaml: false }) {
            Ok(Some(at)) => return Some(at),
            // The key's end, in JSON: its start is before its quotes.
            Err((_, Some((line, column)))) => {
                let back = match path.last() {
                    Some(Seg::Key(key)) => (key.chars().count() as u64).saturating_add(1),
                    _ => 0,
                };
                return Some((line, column.saturating_sub(back).max(1)));
            }
            Ok(None) | Err((_, None)) => {}
        }
        path = path.split_last().map_or(&[], |(_, rest)| rest);
    }
    None
}

/// Finds the key (or element) at `path`: with YAML its position is read
/// with the key (`Ok(Some(..))`); with JSON an error is raised on it, and
/// the error's position is the answer.
struct LocatePass<'p> {
    path: &'p [Seg],
    yaml: bool,
}

impl Pass for LocatePass<'_> {
    type Out = Option<(u64, u64)>;
    fn run<'de, D: Deserializer<'de>>(self, de: D) -> Result<Self::Out, D::Error> {
        let Some((last, parent)) = self.path.split_last() else {
            return Ok(None);
        };
        Walk {
            path: parent,
            target: Mark {
                seg: last,
                yaml: self.yaml,
            },
        }
        .deserialize(de)
        .map(Option::flatten)
    }
    fn spanned(&mut self, yaml: bool) {
        self.yaml = yaml;
    }
}

/// The last step of a [`LocatePass`].
struct Mark<'p> {
    seg: &'p Seg,
    yaml: bool,
}

impl<'de> DeserializeSeed<'de> for Mark<'_> {
    type Value = Option<(u64, u64)>;
    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        match self.seg {
            Seg::Key(_) => de.deserialize_map(self),
            Seg::Index(_) => de.deserialize_seq(self),
        }
    }
}

impl<'de> Visitor<'de> for Mark<'_> {
    type Value = Option<(u64, u64)>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a map or a list")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let Seg::Key(wanted) = self.seg else {
            return Ok(None);
        };
        let mut found = None;
        if self.yaml {
            while let Some(key) = map.next_key::<serde_saphyr::Spanned<String>>()? {
                if key.value == *wanted && found.is_none() {
                    found = Some((key.referenced.line(), key.referenced.column()));
                }
                map.next_value::<IgnoredAny>()?;
            }
            return Ok(found);
        }
        while let Some(key) = map.next_key::<String>()? {
            if key == *wanted {
                return Err(de::Error::custom("here"));
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(found)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let Seg::Index(wanted) = self.seg else {
            return Ok(None);
        };
        let mut found = None;
        let mut i = 0;
        loop {
            if i == *wanted && found.is_none() {
                if !self.yaml {
                    return Err(de::Error::custom("here"));
                }
                match seq.next_element::<serde_saphyr::Spanned<IgnoredAny>>()? {
                    Some(element) => {
                        found = Some((element.referenced.line(), element.referenced.column()));
                    }
                    None => return Ok(None),
                }
            } else if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(found);
            }
            i = i.saturating_add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = "\
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
  annotations:
    note: hello
spec:
  nodeName: local
  terminationGracePeriodSeconds: 10
  initContainers:
  - name: log
    image: busybox
    restartPolicy: Always
    command: [sh, -c, 'sleep 1000']
  containers:
  - name: app
    image: nginx
    ports:
    - containerPort: 80
    command: [sleep]
    args: ['1000']
    lifecycle:
      preStop:
        exec:
          command: [echo, \"it's time\"]
      stopSignal: SIGUSR1
";

    #[test]
    fn a_yaml_pod_becomes_a_pod_with_its_sidecar_first_and_lists_what_grace_ignores() {
        let docs = parse("pod.yaml", YAML).expect("valid");
        assert_eq!(docs.len(), 1);
        let d = &docs[0];
        assert_eq!(d.name, "web");
        assert_eq!(d.object.labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(d.object.record.termination_grace_period_seconds, Some(10));
        let names: Vec<(&str, bool)> = d
            .object
            .containers
            .iter()
            .map(|c| (c.name.as_str(), c.sidecar))
            .collect();
        assert_eq!(names, [("log", true), ("app", false)]);
        let app = &d.object.containers[1];
        assert_eq!(app.command, ["sleep", "1000"]);
        assert_eq!(app.pre_stop.as_deref(), Some("echo 'it'\\''s time'"));
        assert_eq!(
            app.stop_signal,
            Some(rustix::process::Signal::USR1.as_raw())
        );
        assert_eq!(
            d.ignored,
            [
                "metadata.annotations",
                "spec.containers[*].image",
                "spec.containers[*].ports",
                "spec.initContainers[*].image"
            ]
        );
    }

    #[test]
    fn an_unknown_field_is_refused_with_its_line_and_column_in_yaml_and_json() {
        let yaml = YAML.replace("    ports:\n", "    portz:\n");
        let e = parse("pod.yaml", &yaml).expect_err("unknown field");
        assert_eq!(e.field.as_deref(), Some("spec.containers[0].portz"), "{e}");
        assert_eq!(e.at, Some((20, 5)), "{e}");
        let json = "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"Pod\",\n  \"metadata\": {\"name\": \"a\"},\n  \"spec\": {\n    \"containers\": [{\"name\": \"c\", \"command\": [\"x\"]}],\n    \"nodeNmae\": \"n\"\n  }\n}\n";
        let e = parse("pod.json", json).expect_err("unknown field");
        assert_eq!(e.field.as_deref(), Some("spec.nodeNmae"), "{e}");
        assert_eq!(e.at, Some((7, 5)), "{e}");
    }

    #[test]
    fn a_wrong_type_and_a_missing_command_name_their_field_and_position() {
        let yaml = YAML.replace(
            "terminationGracePeriodSeconds: 10",
            "terminationGracePeriodSeconds: ten",
        );
        let e = parse("pod.yaml", &yaml).expect_err("not a number");
        assert_eq!(
            e.field.as_deref(),
            Some("spec.terminationGracePeriodSeconds"),
            "{e}"
        );
        assert_eq!(e.at.map(|(l, _)| l), Some(11), "{e}");
        // Neither command nor args: nothing names the program.
        let yaml = YAML.replace("    command: [sleep]\n    args: ['1000']\n", "");
        let e = parse("pod.yaml", &yaml).expect_err("no command");
        assert_eq!(
            e.field.as_deref(),
            Some("spec.containers[0].command"),
            "{e}"
        );
        assert_eq!(e.at, Some((18, 5)), "the container: {e}");
    }

    #[test]
    fn several_documents_and_a_list_are_read_in_order() {
        let two = format!("{YAML}---\n{}", YAML.replace("name: web", "name: api"));
        let names: Vec<String> = parse("pods.yaml", &two)
            .expect("valid")
            .into_iter()
            .map(|d| d.name)
            .collect();
        assert_eq!(names, ["web", "api"]);
        let json = r#"{"apiVersion":"v1","kind":"List","items":[
            {"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c","command":["x"]}]}},
            {"apiVersion":"v1","kind":"Pod","metadata":{"name":"b"},"spec":{"containers":[{"name":"c","command":["x"],"bogus":1}]}}]}"#;
        let e = parse("list.json", json).expect_err("bogus");
        assert_eq!(
            e.field.as_deref(),
            Some("items[1].spec.containers[0].bogus"),
            "{e}"
        );
        let json = json.replace(",\"bogus\":1", "");
        let two: Vec<String> = parse("x.json", &format!("{json}\n{json}"))
            .expect("valid")
            .into_iter()
            .map(|d| d.name)
            .collect();
        assert_eq!(two, ["a", "b", "a", "b"]);
    }

    #[test]
    fn other_kinds_and_init_containers_that_complete_are_refused() {
        let e = parse(
            "d.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
        )
        .expect_err("not a pod");
        assert_eq!(e.field.as_deref(), Some("apiVersion"), "{e}");
        assert_eq!(e.at, Some((1, 1)), "{e}");
        let yaml = YAML.replace("    restartPolicy: Always\n", "");
        let e = parse("pod.yaml", &yaml).expect_err("init container");
        assert_eq!(
            e.field.as_deref(),
            Some("spec.initContainers[0].restartPolicy"),
            "{e}"
        );
    }
}
