//! `DeleteOptions`: Kubernetes' wire form (k8s-openapi's `meta/v1`) and
//! grace-core's, both ways.

use grace_core::{DeleteOptions, Name, Preconditions, Propagation};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use crate::BridgeError;

/// A Kubernetes `DeleteOptions` as grace-core takes it. Nothing given is
/// nothing (R1: a DELETE without a body). A propagation policy Kubernetes
/// does not know becomes [`Propagation::Unrecognized`], which grace-core's
/// validation refuses in its order (R4, R6); a `dryRun` value other than
/// `All` is refused here (grace-core holds dry run as a flag).
pub fn delete_options_from_wire(wire: &meta::DeleteOptions) -> Result<DeleteOptions, BridgeError> {
    let propagation_policy = wire.propagation_policy.as_deref().map(|p| match p {
        "Background" => Propagation::Background,
        "Foreground" => Propagation::Foreground,
        "Orphan" => Propagation::Orphan,
        _ => Propagation::Unrecognized,
    });
    if let Some(bad) = wire.dry_run.iter().flatten().find(|d| *d != "All") {
        return Err(BridgeError::Unsupported {
            field: "dryRun",
            value: bad.clone(),
        });
    }
    let preconditions = match &wire.preconditions {
        None => Preconditions::default(),
        Some(p) => Preconditions {
            uid: p
                .uid
                .as_deref()
                .map(|u| {
                    Name::try_from(u).map_err(|_| BridgeError::TooLong {
                        field: "preconditions.uid".to_owned(),
                    })
                })
                .transpose()?,
            resource_version: p
                .resource_version
                .as_deref()
                .map(|rv| {
                    rv.parse().map_err(|_| BridgeError::ResourceVersion {
                        field: "preconditions.resourceVersion",
                        value: rv.to_owned(),
                    })
                })
                .transpose()?,
        },
    };
    Ok(DeleteOptions {
        grace_period_seconds: wire.grace_period_seconds,
        preconditions,
        propagation_policy,
        orphan_dependents: wire.orphan_dependents,
        dry_run: wire.dry_run.as_ref().is_some_and(|d| !d.is_empty()),
    })
}

/// grace-core's options as Kubernetes sends them (a client's DELETE body).
/// [`Propagation::Unrecognized`] has no wire value of its own and is sent
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
