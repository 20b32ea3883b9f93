//! Delete options in Kubernetes' wire form (`meta/v1` `DeleteOptions`:
//! camelCase, a string resource version, a `dryRun` list), read into
//! [`DeleteOptions`] once for every reader of that form: grace-std's agent
//! protocol and grace-k8s's k8s-openapi types each parse the JSON their
//! way and hand the fields here (R1, R6, R7).

use core::fmt;

use crate::name::Name;
use crate::options::{DeleteOptions, Preconditions, Propagation};

/// The fields of a wire `DeleteOptions`, borrowed from whatever parsed the
/// JSON; `None` is a field not given. `dry_run` iterates the `dryRun`
/// list (empty when absent).
#[derive(Clone, Debug, Default)]
pub struct WireDeleteOptions<'a, D> {
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `preconditions.uid`.
    pub uid: Option<&'a str>,
    /// `preconditions.resourceVersion` (a string on the wire).
    pub resource_version: Option<&'a str>,
    /// `propagationPolicy`.
    pub propagation_policy: Option<&'a str>,
    /// `orphanDependents`.
    pub orphan_dependents: Option<bool>,
    /// `dryRun`.
    pub dry_run: D,
}

/// A wire field grace cannot take. Nothing was converted.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum WireOptionsError<'a> {
    /// A `dryRun` value other than `All`, which Kubernetes' validation
    /// refuses ([R6]); grace holds dry run as a flag.
    ///
    /// [R6]: crate::rules#r6
    DryRun(&'a str),
    /// `preconditions.uid` longer than a [`Name`] holds.
    UidTooLong,
    /// `preconditions.resourceVersion` is not a whole number (grace's
    /// stores use their revision, a number, as the resource version).
    ResourceVersion(&'a str),
}

impl fmt::Display for WireOptionsError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireOptionsError::DryRun(value) => write!(
                f,
                "dryRun: Unsupported value: \"{value}\": supported values: \"All\" (R6)"
            ),
            WireOptionsError::UidTooLong => {
                f.write_str("preconditions.uid: name longer than its capacity")
            }
            WireOptionsError::ResourceVersion(value) => write!(
                f,
                "preconditions.resourceVersion: \"{value}\" is not a resource version grace can hold (a whole number)"
            ),
        }
    }
}

impl core::error::Error for WireOptionsError<'_> {}

impl Propagation {
    /// `propagationPolicy` as Kubernetes spells it; any other value is
    /// [`Propagation::Unrecognized`], which validation refuses in its
    /// order ([R4], [R6]).
    ///
    /// [R4]: crate::rules#r4
    /// [R6]: crate::rules#r6
    pub fn from_wire(value: &str) -> Self {
        match value {
            "Background" => Propagation::Background,
            "Foreground" => Propagation::Foreground,
            "Orphan" => Propagation::Orphan,
            _ => Propagation::Unrecognized,
        }
    }
}

impl DeleteOptions {
    /// Reads wire options. Nothing given is nothing ([R1]: a DELETE
    /// without a body); checks `dryRun`, then the preconditions' uid, then
    /// their resource version.
    ///
    /// [R1]: crate::rules#r1
    pub fn from_wire<'a, D>(wire: WireDeleteOptions<'a, D>) -> Result<Self, WireOptionsError<'a>>
    where
        D: IntoIterator<Item = &'a str>,
    {
        let mut dry_run = false;
        for value in wire.dry_run {
            if value != "All" {
                return Err(WireOptionsError::DryRun(value));
            }
            dry_run = true;
        }
        let uid = wire
            .uid
            .map(|u| Name::try_from(u).map_err(|_| WireOptionsError::UidTooLong))
            .transpose()?;
        let resource_version = wire
            .resource_version
            .map(|rv| {
                rv.parse()
                    .map_err(|_| WireOptionsError::ResourceVersion(rv))
            })
            .transpose()?;
        Ok(DeleteOptions {
            grace_period_seconds: wire.grace_period_seconds,
            preconditions: Preconditions {
                uid,
                resource_version,
            },
            propagation_policy: wire.propagation_policy.map(Propagation::from_wire),
            orphan_dependents: wire.orphan_dependents,
            dry_run,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire<'a>(
        dry_run: &'a [&'a str],
    ) -> WireDeleteOptions<'a, core::iter::Copied<core::slice::Iter<'a, &'a str>>> {
        WireDeleteOptions {
            grace_period_seconds: None,
            uid: None,
            resource_version: None,
            propagation_policy: None,
            orphan_dependents: None,
            dry_run: dry_run.iter().copied(),
        }
    }

    #[test]
    fn r1_nothing_given_is_nothing() {
        assert_eq!(
            DeleteOptions::from_wire(wire(&[])),
            Ok(DeleteOptions::default())
        );
    }

    #[test]
    fn every_field_is_read() {
        let options = DeleteOptions::from_wire(WireDeleteOptions {
            grace_period_seconds: Some(5),
            uid: Some("u-1"),
            resource_version: Some("12"),
            propagation_policy: Some("Foreground"),
            orphan_dependents: Some(false),
            ..wire(&["All"])
        });
        let options = options.expect("valid");
        assert_eq!(options.grace_period_seconds, Some(5));
        assert_eq!(options.preconditions.uid.as_deref(), Some("u-1"));
        assert_eq!(options.preconditions.resource_version, Some(12));
        assert_eq!(options.propagation_policy, Some(Propagation::Foreground));
        assert_eq!(options.orphan_dependents, Some(false));
        assert!(options.dry_run);
    }

    #[test]
    fn r6_unknown_values_are_unrecognized_or_refused() {
        let options = DeleteOptions::from_wire(WireDeleteOptions {
            propagation_policy: Some("Sideways"),
            ..wire(&[])
        });
        assert_eq!(
            options.map(|o| o.propagation_policy),
            Ok(Some(Propagation::Unrecognized))
        );
        assert_eq!(
            DeleteOptions::from_wire(wire(&["All", "Some"])),
            Err(WireOptionsError::DryRun("Some"))
        );
        let rv = DeleteOptions::from_wire(WireDeleteOptions {
            resource_version: Some("abc"),
            ..wire(&[])
        });
        assert_eq!(rv, Err(WireOptionsError::ResourceVersion("abc")));
    }

    #[test]
    fn propagation_round_trips_through_its_wire_spelling() {
        for p in [
            Propagation::Background,
            Propagation::Foreground,
            Propagation::Orphan,
            Propagation::Unrecognized,
        ] {
            assert_eq!(Propagation::from_wire(p.as_str()), p);
        }
    }
}
