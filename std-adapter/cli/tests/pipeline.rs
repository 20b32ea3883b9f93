//! A library client pipelining requests to a real `grace agent`: every
//! request sent at once, the answers read back in order, each request
//! seeing the ones before it, a refused one in its place.
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

use grace_agent::api::{Client, ErrorKind, Reply, Request};
use grace_core::{DeleteOptions, Name, Record};
use grace_std::store::StoredObject;
use support::Agent;

/// An object with no container, bound to another node (its deletion is
/// decided here and waits for that node).
fn apply(name: &str) -> Request {
    let object = StoredObject::on_node(
        Record::new(Name::try_from(format!("uid-{name}").as_str()).expect("short")),
        "elsewhere",
    );
    Request::Apply {
        name: name.into(),
        object: Box::new(object),
    }
}

fn delete(name: &str) -> Request {
    Request::Delete {
        name: name.into(),
        options: DeleteOptions::with_grace(30),
    }
}

#[test]
fn pipelined_requests_are_answered_in_order_each_seeing_the_ones_before_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(dir.path(), &[]);
    let mut client = Client::connect(dir.path()).expect("connects");

    let answers = client
        .pipeline(&[
            apply("a"),
            apply("b"),
            delete("a"),
            apply("a"),
            delete("missing"),
            delete("b"),
            Request::Get { name: None },
        ])
        .expect("answered");

    assert_eq!(answers.len(), 7);
    assert!(
        matches!(answers[0], Ok(Reply::Applied { .. })),
        "{answers:?}"
    );
    assert!(
        matches!(answers[1], Ok(Reply::Applied { .. })),
        "{answers:?}"
    );
    let Ok(Reply::Deleted(report)) = &answers[2] else {
        panic!("{answers:?}");
    };
    assert!(report.record.deletion_timestamp.is_some());
    // `a` is still stored (terminating, waiting for its node).
    let Err(e) = &answers[3] else {
        panic!("{answers:?}");
    };
    assert_eq!(e.kind, ErrorKind::AlreadyExists);
    let Err(e) = &answers[4] else {
        panic!("{answers:?}");
    };
    assert_eq!(e.kind, ErrorKind::NotFound);
    assert!(matches!(answers[5], Ok(Reply::Deleted(_))), "{answers:?}");
    let Ok(Reply::Objects { items, .. }) = &answers[6] else {
        panic!("{answers:?}");
    };
    let names: Vec<&str> = items.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert!(
        items
            .iter()
            .all(|i| i.object.record.deletion_timestamp.is_some()),
        "the get sees both deletes: {items:?}"
    );
}

#[test]
fn a_client_left_idle_past_the_agents_request_timeout_still_serves_its_next_requests() {
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = Agent::start(dir.path(), &[]);
    let mut client = Client::connect(dir.path()).expect("connects");
    assert!(matches!(
        client.call(&apply("before")),
        Ok(Reply::Applied { .. })
    ));
    // The thing under test: the agent drops a connection that sends
    // nothing for its request timeout, and a client kept for later (a
    // controller between two resyncs, a bench waiting for its workloads)
    // must not fail on it.
    std::thread::sleep(grace_agent::REQUEST_TIMEOUT + std::time::Duration::from_secs(1));
    let answers = client
        .pipeline(&[apply("after"), delete("before"), delete("after")])
        .expect("the agent answers");
    assert!(
        matches!(answers[0], Ok(Reply::Applied { .. })),
        "{answers:?}"
    );
    assert!(
        answers[1..]
            .iter()
            .all(|a| matches!(a, Ok(Reply::Deleted(_)))),
        "{answers:?}"
    );
    assert!(matches!(
        client.call(&Request::Get { name: None }),
        Ok(Reply::Objects { .. })
    ));
}
