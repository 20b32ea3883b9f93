//! Every rule the repository cites is defined in `core/RULES.md`, and no
//! file points to a document outside the repository.
//!
//! The sources, tests, docs, READMEs, manifests, scripts and scenario files
//! of the whole repository are scanned (the crate's own directory alone when
//! it is built outside the repository, as from its published package) for
//! rule ids (`R15`, `D5`) and invariant numbers ("invariant 2"); each must
//! be a heading of RULES.md (`#### R15`, `#### Invariant 2`), which is what
//! gives it its anchor (`rules#r15`) on docs.rs and on a forge.

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
    // Number 49 was never assigned; every other one up to R91 is a rule.
    let mut expected: Vec<String> = (1..=91)
        .filter(|&n| n != 49)
        .map(|n| format!("R{n}"))
        .collect();
    expected.extend((1..=8).map(|n| format!("D{n}")));
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
        format!("D{}", 9),
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
