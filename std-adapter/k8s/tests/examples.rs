//! The examples are programs a user would write; each one runs here.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

#[allow(dead_code, reason = "the example's `main` is not called here")]
#[path = "../examples/delete_a_pod.rs"]
mod delete_a_pod;

#[test]
fn r24_the_delete_a_pod_example_answers_with_the_deletion_timestamp_and_grace() {
    let meta = delete_a_pod::delete(1_700_000_000_000).expect("the example runs");
    // R24: the timestamp is now + the grace given (10 s), not the pod's 30.
    let ts = meta.deletion_timestamp.expect("a deletion timestamp");
    assert_eq!(ts.0.as_second(), 1_700_000_000 + 10);
    assert_eq!(meta.deletion_grace_period_seconds, Some(10));
    // The finalizer still holds the object.
    assert_eq!(meta.finalizers, Some(vec!["example.com/drain".to_owned()]));
}
