//! `grace get`'s kubectl output options against a real agent running real
//! workloads: `-o jsonpath`, `-o custom-columns`, `--sort-by`,
//! `--field-selector`, `--show-labels` and `-L`, and `delete
//! --field-selector`.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

mod support;

use std::path::Path;

use support::{Agent, grace, text};

fn pod(name: &str, app: &str, tier: Option<&str>) -> String {
    let tier = tier.map_or(String::new(), |t| format!(", tier: {t}"));
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: {app}{tier}}}
spec:
  nodeName: local
  containers:
  - name: main
    image: busybox
    command: [sleep, '1000']
  - name: side
    image: busybox
    command: [sleep, '1000']
"
    )
}

/// Applies the pods and returns once they run.
fn apply(dir: &Path, pods: &[(&str, &str, Option<&str>)]) {
    for (name, app, tier) in pods {
        let file = dir.join(format!("{name}.yaml"));
        std::fs::write(&file, pod(name, app, *tier)).unwrap();
        let out = grace(dir, &["apply", "-f", file.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let running = || {
        let out = grace(dir, &["get", "-o", "jsonpath={.items[*].status.phase}"]);
        text(&out.stdout)
            .split(' ')
            .filter(|p| *p == "Running")
            .count()
            == pods.len()
    };
    support::common::wait_for(
        "the pods running",
        std::time::Duration::from_secs(30),
        running,
    );
}

fn stdout(dir: &Path, args: &[&str]) -> String {
    let out = grace(dir, args);
    assert!(
        out.status.success(),
        "grace {args:?}: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn jsonpath_custom_columns_and_sort_by_print_as_kubectl_does() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let _agent = Agent::start(dir, &[]);
    apply(
        dir,
        &[
            ("web-10", "web", Some("front")),
            ("web-2", "web", None),
            ("db", "db", Some("back")),
        ],
    );

    // The template runs on the v1 List, as kubectl's does; --sort-by
    // orders it naturally (web-2 before web-10).
    let names = stdout(
        dir,
        &[
            "get",
            "--sort-by=.metadata.name",
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name}:{.spec.containers[*].name}{"\n"}{end}"#,
        ],
    );
    assert_eq!(names, "db:main side\nweb-2:main side\nweb-10:main side\n");
    // One named pod: the template runs on the Pod itself.
    assert_eq!(
        stdout(
            dir,
            &["get", "web-2", "-o", "jsonpath={.metadata.labels.app}"]
        ),
        "web"
    );

    let table = stdout(
        dir,
        &[
            "get",
            "--sort-by={.metadata.name}",
            "-o",
            "custom-columns=NAME:.metadata.name,TIER:metadata.labels.tier,CONTAINERS:{.spec.containers[*].name}",
        ],
    );
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "{table}");
    let cells: Vec<Vec<&str>> = lines
        .iter()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(cells[0], ["NAME", "TIER", "CONTAINERS"]);
    assert_eq!(cells[1], ["db", "back", "main,side"]);
    assert_eq!(cells[2], ["web-2", "<none>", "main,side"]);
    assert_eq!(cells[3], ["web-10", "front", "main,side"]);
    // Aligned: each column starts where its header does.
    let at = |line: &str, word: &str| line.find(word).unwrap();
    assert_eq!(at(lines[0], "TIER"), at(lines[2], "<none>"), "{table}");
    assert_eq!(
        at(lines[0], "CONTAINERS"),
        at(lines[3], "main,side"),
        "{table}"
    );

    // kubectl's refusals: exit code 2, the option named.
    for bad in ["jsonpath={.items[", "custom-columns=NAME", "bogus"] {
        let out = grace(dir, &["get", "-o", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("--output"),
            "{}",
            text(&out.stderr)
        );
    }
    let out = grace(dir, &["get", "--sort-by=.nowhere"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(r#"couldn't find any field with path "{.nowhere}""#),
        "{}",
        text(&out.stderr)
    );
    // An index past the end is an error when the template runs (exit 1).
    let out = grace(dir, &["get", "-o", "jsonpath={.items[7]}"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("array index out of bounds: index 7, length 3"));
}

#[test]
fn field_selectors_and_label_columns_choose_and_show_as_kubectl_does() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let _agent = Agent::start(dir, &[]);
    apply(dir, &[("a", "web", Some("front")), ("b", "db", None)]);

    let names = |args: &[&str]| {
        let mut all = vec!["get", "-o", "name"];
        all.extend_from_slice(args);
        stdout(dir, &all)
    };
    assert_eq!(names(&["--field-selector", "metadata.name=b"]), "pod/b\n");
    assert_eq!(
        names(&["--field-selector", "metadata.name!=b,spec.nodeName=local"]),
        "pod/a\n"
    );
    assert_eq!(
        names(&["--field-selector", "status.phase=Running"]),
        "pod/a\npod/b\n"
    );
    assert_eq!(names(&["--field-selector", "status.phase=Pending"]), "");
    let out = grace(dir, &["get", "--field-selector", "spec.containers=x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("field label not supported: spec.containers"),
        "{}",
        text(&out.stderr)
    );

    // -L columns (the key's name part in capitals), then LABELS.
    let table = stdout(dir, &["get", "-L", "app,tier", "--show-labels"]);
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        [
            "NAME", "READY", "STATUS", "RESTARTS", "AGE", "APP", "TIER", "LABELS"
        ],
        "{table}"
    );
    assert_eq!(lines[1][0], "a");
    assert_eq!(
        lines[1][5..],
        ["web", "front", "app=web,tier=front"],
        "{table}"
    );
    // b has no tier: an empty cell, then its labels.
    assert_eq!(lines[2][0], "b");
    assert_eq!(lines[2][5..], ["db", "app=db"], "{table}");

    // Another Kubernetes type is not taken for a missing pod's name.
    for args in [
        &["get", "svc"][..],
        &["get", "nodes"],
        &["describe", "deploy"],
        &["delete", "cm"],
    ] {
        let out = grace(dir, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            text(&out.stderr).contains(&format!(
                "the server doesn't have a resource type \"{}\"",
                args[1]
            )),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }

    // delete --field-selector deletes only what it selects.
    let out = grace(
        dir,
        &["delete", "--field-selector", "metadata.name=b", "--now"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(names(&[]), "pod/a\n");
}
