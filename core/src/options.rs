//! Delete options as a client sends them, and their validation (R1, R5, R6).

use core::fmt;

use crate::name::Name;

/// The propagation policy of a delete request (`propagationPolicy`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    all(feature = "arbitrary", not(target_os = "none")),
    derive(arbitrary::Arbitrary)
)]
#[non_exhaustive]
pub enum Propagation {
    /// Leave dependents in place (adds the `orphan` finalizer, [R37]).
    ///
    /// [R37]: crate::rules#r37
    Orphan,
    /// Delete dependents after the owner is gone.
    Background,
    /// Delete dependents first (adds `foregroundDeletion`, [R38]).
    ///
    /// [R38]: crate::rules#r38
    Foreground,
    /// Any other value a client sent; it fails validation ([R6]).
    ///
    /// [R6]: crate::rules#r6
    Unrecognized,
}

impl Propagation {
    /// The policy as Kubernetes spells it on the wire (`"Orphan"`,
    /// `"Background"`, `"Foreground"`); `"Unrecognized"` for
    /// [`Unrecognized`](Propagation::Unrecognized), which has no wire value
    /// of its own and which Kubernetes refuses as grace does.
    ///
    /// ```
    /// use grace_core::Propagation;
    ///
    /// assert_eq!(Propagation::Foreground.as_str(), "Foreground");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            Propagation::Orphan => "Orphan",
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
            Propagation::Unrecognized => "Unrecognized",
        }
    }
}

/// Preconditions of a delete request (R7): each one set must match the
/// stored object, or the request is a conflict.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    all(feature = "arbitrary", not(target_os = "none")),
    derive(arbitrary::Arbitrary)
)]
pub struct Preconditions {
    /// The uid the object must have.
    pub uid: Option<Name>,
    /// The resource version the object must have.
    pub resource_version: Option<u64>,
}

/// `DeleteOptions`. `Default` is a request with no body (R1): every field
/// unset, so the type's default grace applies. A caller that wants "now"
/// asks for grace 0 (D3).
///
/// Fields may be added (the request has grown before): outside this crate
/// build one from [`DeleteOptions::default`] or [`DeleteOptions::with_grace`]
/// and the `with_*` methods.
///
/// ```
/// use grace_core::{DeleteOptions, Propagation};
/// let options = DeleteOptions::with_grace(30)
///     .with_propagation_policy(Some(Propagation::Foreground))
///     .with_dry_run(true);
/// assert_eq!(options.grace_period_seconds, Some(30));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    all(feature = "arbitrary", not(target_os = "none")),
    derive(arbitrary::Arbitrary)
)]
#[non_exhaustive]
pub struct DeleteOptions {
    /// Requested grace in seconds. Any i64 is accepted: negative means 1
    /// ([R9]), huge values saturate ([D2]).
    ///
    /// [R9]: crate::rules#r9
    /// [D2]: crate::rules#d2
    pub grace_period_seconds: Option<i64>,
    /// Uid / resource version the object must still have.
    pub preconditions: Preconditions,
    /// How dependents are handled (garbage collection finalizers).
    pub propagation_policy: Option<Propagation>,
    /// The deprecated form of the propagation policy.
    pub orphan_dependents: Option<bool>,
    /// Decide and report, but write nothing ([R42]–[R44]).
    ///
    /// [R42]: crate::rules#r42
    /// [R44]: crate::rules#r44
    pub dry_run: bool,
}

impl DeleteOptions {
    /// A request for a specific grace period.
    pub fn with_grace(seconds: i64) -> Self {
        DeleteOptions {
            grace_period_seconds: Some(seconds),
            ..DeleteOptions::default()
        }
    }

    /// The same request with grace `seconds` (`None`: the type's default).
    #[must_use]
    pub fn with_grace_period(mut self, seconds: Option<i64>) -> Self {
        self.grace_period_seconds = seconds;
        self
    }

    /// The same request with these preconditions.
    #[must_use]
    pub fn with_preconditions(mut self, preconditions: Preconditions) -> Self {
        self.preconditions = preconditions;
        self
    }

    /// The same request with this propagation policy.
    #[must_use]
    pub fn with_propagation_policy(mut self, policy: Option<Propagation>) -> Self {
        self.propagation_policy = policy;
        self
    }

    /// The same request with the deprecated `orphanDependents`.
    #[must_use]
    pub fn with_orphan_dependents(mut self, orphan: Option<bool>) -> Self {
        self.orphan_dependents = orphan;
        self
    }

    /// The same request as a dry run (`true`) or not.
    #[must_use]
    pub fn with_dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// `ValidateDeleteOptions` ([R5], [R6]). Grace values are never invalid.
    ///
    /// [R5]: crate::rules#r5
    /// [R6]: crate::rules#r6
    #[inline]
    pub fn validate(&self) -> Result<(), InvalidOptions> {
        if self.orphan_dependents.is_some() && self.propagation_policy.is_some() {
            return Err(InvalidOptions::OrphanDependentsWithPropagationPolicy);
        }
        if self.propagation_policy == Some(Propagation::Unrecognized) {
            return Err(InvalidOptions::UnrecognizedPropagationPolicy);
        }
        Ok(())
    }
}

/// Why delete options are invalid (HTTP 422).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum InvalidOptions {
    /// Both `orphanDependents` and `propagationPolicy` were set ([R5]).
    ///
    /// [R5]: crate::rules#r5
    OrphanDependentsWithPropagationPolicy,
    /// `propagationPolicy` is not Orphan, Background or Foreground ([R6]).
    ///
    /// [R6]: crate::rules#r6
    UnrecognizedPropagationPolicy,
}

impl fmt::Display for InvalidOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InvalidOptions::OrphanDependentsWithPropagationPolicy => {
                "orphan_dependents and propagation_policy cannot both be set"
            }
            InvalidOptions::UnrecognizedPropagationPolicy => {
                "propagation_policy must be Orphan, Background or Foreground"
            }
        })
    }
}

impl core::error::Error for InvalidOptions {}
