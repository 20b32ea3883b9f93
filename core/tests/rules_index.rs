//! Every rule the repository cites is defined in `core/RULES.md`, and no
//! file points to a document outside the repository.
//!
//! The sources, tests, docs, READMEs, manifests, scripts and scenario files
//! of the whole repository are scanned (the crate's own directory alone when
//! it is built outside the repository, as from its published package) for
//! rule ids (`R15`, `D5`) and invariant numbers ("invariant 2"); each must
//! be a heading of RULES.md (`#### R15`, `#### Invariant 2`), which is what
//! gives it its anchor (`rules#r15`) on docs.rs and on a forge. Links into
//! the rules (`crate::rules#r15`, `RULES.md#r15`) and relative links between
//! the Markdown files must land on a file, and on a heading when they name
//! one.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Directories that hold no text of ours: build output, fuzz inputs.
const SKIPPED_DIRS: &[&str] = &["target", ".git", "corpus", "artifacts", "coverage"];

/// Text files worth scanning; anything else (pictures, lock files) is not.
const SCANNED_EXTENSIONS: &[&str] = &["rs", "md", "toml", "json", "jsonl", "dict", "sh", "x"];

/// Names of documents that lived outside the repository. Spelled in pieces
/// so that this file does not cite them itself.
fn forbidden_mentions() -> Vec<String> {
    vec![
        ["..", "/shared"].concat(),
        ["SEMANTICS", ".md"].concat(),
        ["SCENARIOS", ".md"].concat(),
        ["DESIGN", ".md"].concat(),
    ]
}

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The repository's root when the crate sits in it, else the crate itself.
fn scan_root() -> PathBuf {
    let crate_dir = crate_dir();
    match crate_dir.parent() {
        Some(parent)
            if fs::read_to_string(parent.join("Cargo.toml"))
                .is_ok_and(|manifest| manifest.contains("[workspace]")) =>
        {
            parent.to_path_buf()
        }
        _ => crate_dir,
    }
}

fn files_under(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if !SKIPPED_DIRS.contains(&name.as_str()) {
                files_under(&path, found);
            }
        } else {
            let extension = path.extension().map(|e| e.to_string_lossy().into_owned());
            // Extension-less files are the CI scripts (`.ci/run`, ...).
            let scanned = match extension {
                Some(extension) => SCANNED_EXTENSIONS.contains(&extension.as_str()),
                None => dir.file_name().is_some_and(|d| d == ".ci"),
            };
            if scanned {
                found.push(path);
            }
        }
    }
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The rule ids in `text` (`R15`, `D5`: a capital R or D and digits, not
/// inside a longer word), and the invariants it names ("Invariant 2",
/// "invariants 2"), as the headings RULES.md gives them.
fn citations(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    for (i, &c) in chars.iter().enumerate() {
        if c != 'R' && c != 'D' {
            continue;
        }
        if i > 0 && chars.get(i - 1).copied().is_some_and(is_word) {
            continue;
        }
        let digits: String = chars[i + 1..]
            .iter()
            .take_while(|d| d.is_ascii_digit())
            .collect();
        if digits.is_empty() {
            continue;
        }
        let after = chars.get(i + 1 + digits.len()).copied();
        if after.is_some_and(is_word) {
            continue;
        }
        found.push(format!("{c}{digits}"));
    }
    let lower = text.to_lowercase();
    for word in ["invariant ", "invariants "] {
        for (at, _) in lower.match_indices(word) {
            let before = lower[..at].chars().next_back();
            if before.is_some_and(is_word) {
                continue;
            }
            let digits: String = lower[at + word.len()..]
                .chars()
                .take_while(|d| d.is_ascii_digit())
                .collect();
            if !digits.is_empty() {
                found.push(format!("Invariant {digits}"));
            }
        }
    }
    found
}

/// The ids RULES.md defines: its `####` headings.
fn defined(rules: &str) -> Vec<String> {
    rules
        .lines()
        .filter_map(|line| line.strip_prefix("#### "))
        .map(|heading| heading.trim().to_owned())
        .collect()
}

fn rules_text() -> String {
    fs::read_to_string(crate_dir().join("RULES.md")).expect("core/RULES.md is readable")
}

/// Every `file:line: id` whose id is not in `known`.
fn unresolved(files: &[(String, String)], known: &BTreeSet<String>) -> Vec<String> {
    let mut missing = Vec::new();
    for (name, text) in files {
        for (number, line) in text.lines().enumerate() {
            for id in citations(line) {
                if !known.contains(&id) {
                    missing.push(format!("{name}:{}: {id}", number + 1));
                }
            }
        }
    }
    missing
}

fn repository_files() -> Vec<(String, String)> {
    let root = scan_root();
    let mut paths = Vec::new();
    files_under(&root, &mut paths);
    paths.sort();
    paths
        .into_iter()
        .filter_map(|path| {
            let text = fs::read_to_string(&path).ok()?;
            let name = path
                .strip_prefix(&root)
                .unwrap_or(&path)
                .display()
                .to_string();
            Some((name, text))
        })
        .collect()
}

#[test]
fn rules_md_defines_every_rule_once() {
    let ids = defined(&rules_text());
    let unique: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "a heading of RULES.md is repeated");
    // Number 49 was never assigned; every other one up to R101 is a rule.
    let mut expected: Vec<String> = (1..=101)
        .filter(|&n| n != 49)
        .map(|n| format!("R{n}"))
        .collect();
    expected.extend((1..=9).map(|n| format!("D{n}")));
    expected.extend((1..=7).map(|n| format!("Invariant {n}")));
    let missing: Vec<&String> = expected.iter().filter(|id| !unique.contains(id)).collect();
    assert!(
        missing.is_empty(),
        "RULES.md has no heading for {missing:?}"
    );
    let extra: Vec<&&String> = unique.iter().filter(|id| !expected.contains(id)).collect();
    assert!(
        extra.is_empty(),
        "RULES.md has unexpected headings {extra:?}"
    );
}

#[test]
fn every_cited_rule_resolves_to_rules_md() {
    let known: BTreeSet<String> = defined(&rules_text()).into_iter().collect();
    let files = repository_files();
    // The scan sees the repository: at least this file and RULES.md.
    assert!(
        files
            .iter()
            .any(|(name, _)| name.ends_with("rules_index.rs"))
            && files.iter().any(|(name, _)| name.ends_with("RULES.md")),
        "the scan found no sources under {}",
        scan_root().display()
    );
    let missing = unresolved(&files, &known);
    assert!(
        missing.is_empty(),
        "rule ids cited but not defined in core/RULES.md:\n{}",
        missing.join("\n")
    );
}

#[test]
fn no_file_points_outside_the_repository() {
    let mut offending = Vec::new();
    for (name, text) in repository_files() {
        for (number, line) in text.lines().enumerate() {
            for mention in forbidden_mentions() {
                if line.contains(&mention) {
                    offending.push(format!("{name}:{}: {mention}", number + 1));
                }
            }
        }
    }
    assert!(
        offending.is_empty(),
        "files that point to documents outside the repository (the rules are core/RULES.md, \
         the scenario format docs/scenarios.md):\n{}",
        offending.join("\n")
    );
}

#[test]
fn the_scan_catches_an_undefined_id_and_ignores_words() {
    let known: BTreeSet<String> = defined(&rules_text()).into_iter().collect();
    // Undefined ids are assembled, so that this file cites none itself.
    let (r, d, i) = (
        format!("R{}", 49),
        format!("D{}", 10),
        format!("Invariant {}", 8),
    );
    let files = vec![(
        "sample.rs".to_owned(),
        format!(
            "// R16 holds; {r} and {d} do not exist; {} neither.\n\
             // r16_tests, FOO_R16, R16x, 0xD2 and RD are no citations; Invariant 3 is.\n",
            i.to_lowercase()
        ),
    )];
    assert_eq!(
        unresolved(&files, &known),
        [
            format!("sample.rs:1: {r}"),
            format!("sample.rs:1: {d}"),
            format!("sample.rs:1: {i}")
        ]
    );
    assert_eq!(
        citations("R16x, (R62), D5: see invariants 2"),
        ["R62", "D5", "Invariant 2"]
    );
}

/// The anchor a heading gets, as rustdoc and GitHub derive it: lower case,
/// spaces to `-`, punctuation other than `-` and `_` dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown text's headings.
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut in_fence = false;
    let mut found = BTreeSet::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        } else if !in_fence && line.starts_with('#') {
            found.insert(slug(line.trim_start_matches('#')));
        }
    }
    found
}

/// The targets of the inline links `[text](target)` in a Markdown text,
/// outside code blocks and code spans.
fn link_targets(markdown: &str) -> Vec<(usize, String)> {
    let mut in_fence = false;
    let mut found = Vec::new();
    for (number, line) in markdown.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        for (k, part) in line.split('`').enumerate() {
            if k % 2 == 1 {
                continue;
            }
            for (at, _) in part.match_indices("](") {
                let rest = &part[at + 2..];
                if let Some(end) = rest.find(')') {
                    found.push((number + 1, rest[..end].to_owned()));
                }
            }
        }
    }
    found
}

#[test]
fn links_into_the_rules_land_on_a_rule() {
    let rule_anchors = anchors(&rules_text());
    let mut broken = Vec::new();
    for (name, text) in repository_files() {
        for (number, line) in text.lines().enumerate() {
            for marker in ["rules#", "RULES.md#"] {
                for (at, _) in line.match_indices(marker) {
                    let fragment: String = line[at + marker.len()..]
                        .chars()
                        .take_while(|&c| c.is_alphanumeric() || c == '-' || c == '_')
                        .collect();
                    // An empty fragment is this test's own marker, not a link.
                    if !fragment.is_empty() && !rule_anchors.contains(&fragment) {
                        broken.push(format!("{name}:{}: {marker}{fragment}", number + 1));
                    }
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to no rule:\n{}",
        broken.join("\n")
    );
}

#[test]
fn relative_markdown_links_resolve() {
    let root = scan_root();
    let mut broken = Vec::new();
    let mut checked = 0;
    for (name, text) in repository_files() {
        if !name.ends_with(".md") {
            continue;
        }
        let here = root.join(&name);
        let dir = here.parent().unwrap_or(&root).to_path_buf();
        for (number, target) in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((path, fragment)) => (path, Some(fragment)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                here.clone()
            } else {
                dir.join(path)
            };
            let resolved = file.exists()
                && fragment.is_none_or(|fragment| {
                    file.extension().is_none_or(|e| e != "md")
                        || fs::read_to_string(&file).is_ok_and(|t| anchors(&t).contains(fragment))
                });
            if !resolved {
                broken.push(format!("{name}:{number}: {target}"));
            }
            checked += 1;
        }
    }
    assert!(checked > 0, "no relative link found to check");
    assert!(
        broken.is_empty(),
        "broken relative links:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_readme_fits_on_a_page() {
    // crates.io shows the README whole; the rest lives in docs/.
    let Ok(readme) = fs::read_to_string(scan_root().join("README.md")) else {
        return;
    };
    let lines = readme.lines().count();
    assert!(lines <= 250, "README.md has {lines} lines, more than 250");
}
