//! A Pod's (or any object's) metadata and grace's [`Record`], both ways.

use grace_core::{ContainerSpec, Name, PodPhase, Record, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::BridgeError;

fn name(field: &str, value: &str) -> Result<Name, BridgeError> {
    Name::try_from(value).map_err(|_| BridgeError::TooLong {
        field: field.to_owned(),
    })
}

fn timestamp(field: &'static str, time: &Time) -> Result<Timestamp, BridgeError> {
    // Whole seconds, as Kubernetes persists them (R48).
    let seconds = time.0.as_second();
    if !(0..=grace_core::MAX_TIMESTAMP_SECONDS).contains(&seconds) {
        return Err(BridgeError::Time { field });
    }
    Ok(Timestamp::from_unix_seconds(seconds))
}

/// The latest whole second a Kubernetes `Time` holds in Rust (k8s-openapi
/// keeps times as `jiff` timestamps, which end at 9999-12-30T22:00:00Z).
/// grace saturates deletion timestamps later, at 9999-12-31T23:59:59Z
/// ([`MAX_TIMESTAMP_SECONDS`](grace_core::MAX_TIMESTAMP_SECONDS), D2, as
/// Go's `time` can write): such a timestamp is written as this one.
pub const LATEST_TIME_SECONDS: i64 = 253_402_207_200;

/// A timestamp as a Kubernetes `Time`. One past [`LATEST_TIME_SECONDS`]
/// is written as that second rather than left out: an object without its
/// deletion timestamp would read as one nobody is deleting. `None` only
/// before year -9999, which no grace timestamp is.
pub fn time(t: Timestamp) -> Option<Time> {
    k8s_openapi::jiff::Timestamp::from_second(t.as_unix_seconds().min(LATEST_TIME_SECONDS))
        .ok()
        .map(Time)
}

/// `t` as RFC 3339 text in whole seconds, as Kubernetes writes times, up
/// to 9999-12-31T23:59:59Z, where grace saturates deletion timestamps
/// (D2) — a day past the latest [`time`] gives. Out of that range, the
/// seconds as a number.
pub fn rfc3339(t: Timestamp) -> String {
    use k8s_openapi::jiff::{SignedDuration, civil::DateTime};
    DateTime::constant(1970, 1, 1, 0, 0, 0, 0)
        .checked_add(SignedDuration::from_secs(t.as_unix_seconds()))
        .map_or_else(
            |_| t.as_unix_seconds().to_string(),
            |ts| ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        )
}

/// The deletion record of any object from its `metadata`: uid (required),
/// resource version, generation, deletion timestamp and grace,
/// finalizers (at most `F`). The Pod fields (`scheduled`, `phase`, the
/// spec's grace) are those of an object that is not a Pod: unscheduled,
/// no phase, no grace; [`record_from_pod`] fills them.
pub fn record_from_meta<const F: usize>(meta: &ObjectMeta) -> Result<Record<F>, BridgeError> {
    let uid = meta.uid.as_deref().ok_or(BridgeError::Missing {
        field: "metadata.uid",
    })?;
    let mut record: Record<F> = Record::new(name("metadata.uid", uid)?);
    record.resource_version = match meta.resource_version.as_deref() {
        None | Some("") => 0,
        Some(rv) => rv.parse().map_err(|_| BridgeError::ResourceVersion {
            field: "metadata.resourceVersion",
            value: rv.to_owned(),
        })?,
    };
    record.generation = meta.generation.unwrap_or(0);
    record.deletion_timestamp = meta
        .deletion_timestamp
        .as_ref()
        .map(|t| timestamp("metadata.deletionTimestamp", t))
        .transpose()?;
    record.deletion_grace_period_seconds = meta.deletion_grace_period_seconds;
    for (i, f) in meta.finalizers.iter().flatten().enumerate() {
        let finalizer = name(&format!("metadata.finalizers[{i}]"), f)?;
        record
            .finalizers
            .push(finalizer)
            .map_err(|_| BridgeError::TooManyFinalizers { capacity: F })?;
    }
    record.scheduled = false;
    record.phase = PodPhase::Unset;
    record.termination_grace_period_seconds = None;
    Ok(record)
}

/// A Pod's deletion record: [`record_from_meta`] plus `spec.nodeName`
/// (scheduled or not, R19), `status.phase` (R20) and
/// `spec.terminationGracePeriodSeconds` (R18; the API server defaults it
/// to 30, so a Pod read from a cluster has it).
pub fn record_from_pod<const F: usize>(pod: &Pod) -> Result<Record<F>, BridgeError> {
    let mut record = record_from_meta(&pod.metadata)?;
    let spec = pod.spec.as_ref();
    record.scheduled = spec
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    record.termination_grace_period_seconds = spec.and_then(|s| s.termination_grace_period_seconds);
    // A phase Kubernetes does not define counts as none reported.
    record.phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
        .parse()
        .unwrap_or(PodPhase::Unset);
    Ok(record)
}

/// What the agent needs to know of each container, in grace's order:
/// native sidecars (`initContainers` with `restartPolicy: Always`) first,
/// then the containers; a container has a pre-stop hook if its
/// `lifecycle.preStop` is set. Init containers that run to completion are
/// not running when a Pod is deleted and are left out.
pub fn container_specs(pod: &Pod) -> Vec<ContainerSpec> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let hook = |c: &k8s_openapi::api::core::v1::Container| {
        c.lifecycle.as_ref().is_some_and(|l| l.pre_stop.is_some())
    };
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .map(|c| ContainerSpec {
            pre_stop: hook(c),
            sidecar: true,
            stopped: false,
        });
    let mains = spec.containers.iter().map(|c| ContainerSpec {
        pre_stop: hook(c),
        sidecar: false,
        stopped: false,
    });
    sidecars.chain(mains).collect()
}

/// The record's metadata as Kubernetes writes it: uid, resource version
/// (a string), generation, deletion timestamp (RFC 3339, whole seconds)
/// and grace, finalizers. Other fields are left unset.
pub fn meta_from_record<const F: usize>(record: &Record<F>) -> ObjectMeta {
    let mut meta = ObjectMeta::default();
    apply_record(record, &mut meta);
    meta
}

/// Writes the record's fields into `meta` (the rest of `meta` is kept), as
/// an update or a merge patch of the object would.
pub fn apply_record<const F: usize>(record: &Record<F>, meta: &mut ObjectMeta) {
    meta.uid = Some(record.uid.to_string());
    meta.resource_version = Some(record.resource_version.to_string());
    meta.generation = Some(record.generation);
    meta.deletion_timestamp = record.deletion_timestamp.and_then(time);
    meta.deletion_grace_period_seconds = record.deletion_grace_period_seconds;
    let finalizers: Vec<String> = record.finalizers.iter().map(|f| f.to_string()).collect();
    meta.finalizers = (!finalizers.is_empty()).then_some(finalizers);
}

/// The Pod status a kubelet writes for the record's phase (for a
/// `status` subresource merge patch): `{"phase": "Failed"}`; `None` for
/// no phase.
pub fn phase_patch<const F: usize>(
    record: &Record<F>,
) -> Option<k8s_openapi::api::core::v1::PodStatus> {
    if record.phase == PodPhase::Unset {
        return None;
    }
    let phase = record.phase.as_str();
    Some(k8s_openapi::api::core::v1::PodStatus {
        phase: Some(phase.to_owned()),
        ..Default::default()
    })
}
