//! The core's types as the [`reference`](mod@crate::reference) model's plain
//! data: strings for names and enums, so that the model shares nothing with
//! the core but the shape of the answer.

use grace_core::{
    DeleteOptions, GcPolicy, Kind, PodPhase, Propagation, Record, Strategy, Timestamp,
};

use crate::reference as model;

/// A record as the model's object.
pub fn to_obj<const F: usize>(r: &Record<F>) -> model::Obj {
    model::Obj {
        uid: r.uid.as_str().to_string(),
        resource_version: r.resource_version,
        generation: r.generation,
        ts: r.deletion_timestamp.map(Timestamp::as_unix_seconds),
        dgps: r.deletion_grace_period_seconds,
        finalizers: r
            .finalizers
            .iter()
            .map(|n| n.as_str().to_string())
            .collect(),
        scheduled: r.scheduled,
        phase: match r.phase {
            PodPhase::Pending => "Pending",
            PodPhase::Running => "Running",
            PodPhase::Succeeded => "Succeeded",
            PodPhase::Failed => "Failed",
            PodPhase::Unknown => "Unknown",
            PodPhase::Unset => "",
            other => panic!("the reference model does not know {other:?} yet"),
        },
        tgps: r.termination_grace_period_seconds,
    }
}

/// A deletion strategy as the model's type.
pub fn to_type(s: &Strategy) -> model::Type {
    model::Type {
        graceful: s.kind == Kind::Pod,
        policy: match s.default_gc_policy {
            GcPolicy::DeleteDependents => model::Policy::DeleteDependents,
            GcPolicy::OrphanDependents => model::Policy::OrphanDependents,
            GcPolicy::Unsupported => model::Policy::Unsupported,
            other => panic!("the reference model does not know {other:?} yet"),
        },
        gc_enabled: s.gc_enabled,
    }
}

/// Delete options as the model's, the propagation policy as the string a
/// client sent.
pub fn to_opts(o: &DeleteOptions) -> model::Opts {
    model::Opts {
        grace: o.grace_period_seconds,
        uid: o.preconditions.uid.as_ref().map(|n| n.as_str().to_string()),
        resource_version: o.preconditions.resource_version,
        propagation: o.propagation_policy.map(|p| match p {
            Propagation::Orphan => "Orphan",
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
            Propagation::Unrecognized => "Bogus",
            other => panic!("the reference model does not know {other:?} yet"),
        }),
        orphan: o.orphan_dependents,
    }
}
