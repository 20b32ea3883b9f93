//! The bridge as a controller or admission hook uses it: a Pod and a
//! DeleteOptions body as a Kubernetes client sends them (JSON), decided by
//! grace-core's API-server rules, and the Pod's metadata written back with
//! its deletion timestamp and grace, as the API server would answer.
//!
//! `cargo run -p grace-k8s --example delete_a_pod --features k8s-openapi/v1_34`
//! (the test `std-adapter/k8s/tests/examples.rs` runs it too).
#![deny(warnings)]

use std::error::Error;

use grace_core::{DeleteOutcome, Record, Strategy, WallTime, decide_delete};
use grace_k8s::{container_specs, delete_options_from_wire, meta_from_record, record_from_pod};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta};

/// How many finalizers a record holds here.
const FINALIZERS: usize = 4;

/// A pod with a 30 s grace and a pre-stop hook, deleted with a 10 s grace
/// at `now_ms`: the metadata the API server would answer with.
pub fn delete(now_ms: i64) -> Result<ObjectMeta, Box<dyn Error>> {
    let pod: Pod = serde_json::from_str(
        r#"{
          "apiVersion": "v1", "kind": "Pod",
          "metadata": {"name": "web", "uid": "0b6c2a4e-6b1f-4c1e-9a43-2f3f1b1b7d10",
                       "resourceVersion": "41", "finalizers": ["example.com/drain"]},
          "spec": {"nodeName": "node-a", "terminationGracePeriodSeconds": 30,
                   "containers": [{"name": "app", "image": "nginx",
                     "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "sleep 5"]}}}}]}
        }"#,
    )?;
    let record: Record<FINALIZERS> = record_from_pod(&pod)?;
    let containers = container_specs(&pod);
    println!(
        "pod web: {} container(s), the first with a pre-stop hook: {}",
        containers.len(),
        containers.first().is_some_and(|c| c.pre_stop)
    );

    // `kubectl delete pod web --grace-period=10`'s body.
    let body: DeleteOptions = serde_json::from_str(r#"{"gracePeriodSeconds": 10}"#)?;
    let options = delete_options_from_wire(&body)?;
    let decision = decide_delete(
        &record,
        &Strategy::POD,
        &options,
        WallTime::from_unix_millis(now_ms),
    )?;
    println!("decided: {:?}", decision.outcome);
    if decision.outcome != DeleteOutcome::Graceful {
        return Err("a pod on a node with a grace is deleted gracefully".into());
    }
    let meta = meta_from_record(&decision.record);
    println!(
        "deletionTimestamp {:?}, deletionGracePeriodSeconds {:?}, finalizers {:?}",
        meta.deletion_timestamp.as_ref().map(|t| t.0.to_string()),
        meta.deletion_grace_period_seconds,
        meta.finalizers
    );
    Ok(meta)
}

fn main() -> Result<(), Box<dyn Error>> {
    delete(1_700_000_000_000).map(|_| ())
}
