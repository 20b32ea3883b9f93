//! What the CLI makes of its manifests passes the agent's check of every
//! request (`grace_agent::validate`), and an object the agent accepts is
//! shown by the CLI without a panic.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use grace_agent::validate::object_named;
use grace_core::{Record, Timestamp};
use grace_std::store::{StoredContainer, StoredObject};

#[test]
fn what_the_cli_makes_of_its_manifests_passes() {
    let m = grace_cli::manifest::parse(
        r#"{"kind":"Object","metadata":{"name":"o","finalizers":["a/b"]}}"#,
        || "u".into(),
    )
    .expect("valid");
    assert_eq!(object_named(&m.name, &m.object, true), Ok(()));
    let docs = grace_cli::manifest_file::parse(
        "x.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {app: web}}\n\
         spec:\n  initContainers: [{name: s, command: [sleep, '1'], restartPolicy: Always}]\n  \
         containers:\n  - name: a\n    command: [sleep, '1']\n    \
         lifecycle: {preStop: {sleep: {seconds: 1}}, stopSignal: SIGINT}\n",
    )
    .expect("valid");
    for d in docs {
        assert_eq!(object_named(&d.name, &d.object, false), Ok(()));
    }
}

#[test]
fn an_accepted_object_with_extreme_values_is_shown_without_a_panic() {
    for created in [i64::MIN, -1, 0, i64::MAX] {
        let record = Record::builder("u").build().expect("a record");
        let mut o = StoredObject::on_node(record, "n");
        let mut c = StoredContainer::new("a", ["x"]);
        c.stop_signal = Some(31);
        o.containers.push(c);
        o.created = Some(Timestamp::from_unix_seconds(created));
        o.record.termination_grace_period_seconds = Some(i64::MAX);
        assert_eq!(object_named("p", &o, true), Ok(()));
        for now in [i64::MIN, 0, i64::MAX] {
            let _ = grace_cli::output::row("p", &o, true, Timestamp::from_unix_seconds(now), None);
        }
        let _ = grace_cli::k8s_pod::to_pod("p", &o);
    }
}
