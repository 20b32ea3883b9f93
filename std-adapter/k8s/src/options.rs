//! `DeleteOptions`: Kubernetes' wire form (k8s-openapi's `meta/v1`) and
//! grace-core's, both ways.

use grace_core::{DeleteOptions, WireDeleteOptions, WireOptionsError};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use crate::BridgeError;

/// A Kubernetes `DeleteOptions` as grace-core takes it. Nothing given is
/// nothing (R1: a DELETE without a body). A propagation policy Kubernetes
/// does not know becomes [`Propagation::Unrecognized`](grace_core::Propagation::Unrecognized), which grace-core's
/// validation refuses in its order (R4, R6); a `dryRun` value other than
/// `All` is refused here (grace-core holds dry run as a flag).
pub fn delete_options_from_wire(wire: &meta::DeleteOptions) -> Result<DeleteOptions, BridgeError> {
    // The fields' meaning is grace-core's, shared with grace-std's agent
    // protocol; only the errors are this crate's.
    let p = wire.preconditions.as_ref();
    DeleteOptions::from_wire(WireDeleteOptions {
        grace_period_seconds: wire.grace_period_seconds,
        uid: p.and_then(|p| p.uid.as_deref()),
        resource_version: p.and_then(|p| p.resource_version.as_deref()),
        propagation_policy: wire.propagation_policy.as_deref(),
        orphan_dependents: wire.orphan_dependents,
        dry_run: wire.dry_run.iter().flatten().map(String::as_str),
    })
    .map_err(|e| match e {
        WireOptionsError::DryRun(value) => BridgeError::Unsupported {
            field: "dryRun",
            value: value.to_owned(),
        },
        WireOptionsError::ResourceVersion(value) => BridgeError::ResourceVersion {
            field: "preconditions.resourceVersion",
            value: value.to_owned(),
        },
        // UidTooLong, and any error grace-core adds later.
        _ => BridgeError::TooLong {
            field: "preconditions.uid".to_owned(),
        },
    })
}

/// grace-core's options as Kubernetes sends them (a client's DELETE body).
/// [`Propagation::Unrecognized`](grace_core::Propagation::Unrecognized) has no wire value of its own and is sent
/// as `"Unrecognized"`, which Kubernetes refuses as grace-core does.
pub fn delete_options_to_wire(options: &DeleteOptions) -> meta::DeleteOptions {
    let p = &options.preconditions;
    let preconditions =
        (p.uid.is_some() || p.resource_version.is_some()).then(|| meta::Preconditions {
            uid: p.uid.as_ref().map(|u| u.to_string()),
            resource_version: p.resource_version.map(|rv| rv.to_string()),
        });
    meta::DeleteOptions {
        grace_period_seconds: options.grace_period_seconds,
        preconditions,
        propagation_policy: options.propagation_policy.map(|p| p.as_str().to_owned()),
        orphan_dependents: options.orphan_dependents,
        dry_run: options.dry_run.then(|| vec!["All".to_owned()]),
        ..meta::DeleteOptions::default()
    }
}
