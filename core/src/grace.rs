//! The agent's effective grace (kubelet `calculateEffectiveGracePeriod`,
//! R50–R55): the budget it kills with, which can only shrink.

/// The agent's budget after one more look at the record or an override.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EffectiveGrace {
    /// Whole seconds, at least 1 ([R54]).
    ///
    /// [R54]: crate::rules#r54
    pub seconds: i64,
    /// The budget changed after termination had started ([R55]); the agent
    /// applies it at once ([D5]).
    ///
    /// [R55]: crate::rules#r55
    /// [D5]: crate::rules#d5
    pub shortened: bool,
}

/// Computes the effective grace.
///
/// - `remembered`: the budget already in force, 0 before termination began;
/// - `deletion_grace`: the record's `deletionGracePeriodSeconds` as last seen;
/// - `override_seconds`: an agent-side override such as an eviction;
/// - `spec_grace`: `spec.terminationGracePeriodSeconds`.
pub fn effective_grace(
    remembered: i64,
    deletion_grace: Option<i64>,
    override_seconds: Option<i64>,
    spec_grace: Option<i64>,
) -> EffectiveGrace {
    let mut g = remembered;
    let mut overridden = false;
    // R51: the API's grace is bedrock truth when smaller.
    if let Some(d) = deletion_grace
        && (g == 0 || d < g)
    {
        g = d;
        overridden = true;
    }
    // R52: agent overrides only shorten.
    if let Some(o) = override_seconds
        && (g == 0 || o < g)
    {
        g = o;
        overridden = true;
    }
    // R53: the spec is a fallback only when nothing applied.
    if !overridden
        && g == 0
        && let Some(s) = spec_grace
    {
        g = s;
    }
    // R50: once started, the budget never grows. Without this, a deletion
    // grace of 0 resets `g` to 0 and a longer override then replaces it.
    if remembered > 0 && g > remembered {
        g = remembered;
    }
    // R54: never below one second.
    if g < 1 {
        g = 1;
    }
    EffectiveGrace {
        seconds: g,
        // R55
        shortened: remembered != 0 && remembered != g,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r51_deletion_grace_wins_when_smaller() {
        assert_eq!(effective_grace(30, Some(10), None, Some(30)).seconds, 10);
        assert_eq!(effective_grace(10, Some(30), None, Some(30)).seconds, 10);
        assert_eq!(effective_grace(0, Some(45), None, Some(30)).seconds, 45);
    }

    #[test]
    fn r52_overrides_only_shorten() {
        assert_eq!(effective_grace(30, Some(30), Some(1), None).seconds, 1);
        assert_eq!(effective_grace(5, Some(30), Some(10), None).seconds, 5);
    }

    #[test]
    fn r53_spec_is_a_fallback_and_zero_deletion_grace_counts_as_applied() {
        assert_eq!(effective_grace(0, None, None, Some(30)).seconds, 30);
        // "use 1 when pod DeletionGracePeriodSeconds is zero"
        assert_eq!(effective_grace(0, Some(0), None, Some(30)).seconds, 1);
        // R68's last resort is 2 when the spec is absent; on the termination
        // path the floor of R54 applies instead.
        assert_eq!(effective_grace(0, None, None, None).seconds, 1);
    }

    #[test]
    fn r54_never_below_one_second() {
        assert_eq!(effective_grace(0, Some(-5), None, None).seconds, 1);
        assert_eq!(effective_grace(0, None, Some(0), Some(30)).seconds, 1);
    }

    #[test]
    fn r55_a_change_after_start_is_reported_as_shortened() {
        let g = effective_grace(30, Some(5), None, Some(30));
        assert_eq!(
            g,
            EffectiveGrace {
                seconds: 5,
                shortened: true
            }
        );
        assert!(!effective_grace(0, Some(5), None, Some(30)).shortened);
        assert!(!effective_grace(5, Some(5), None, Some(30)).shortened);
    }

    #[test]
    fn r50_the_budget_never_grows_once_started() {
        for remembered in [1, 2, 30, i64::MAX] {
            for d in [
                None,
                Some(i64::MIN),
                Some(0),
                Some(1),
                Some(60),
                Some(i64::MAX),
            ] {
                for o in [None, Some(0), Some(1), Some(i64::MAX)] {
                    let g = effective_grace(remembered, d, o, Some(i64::MAX));
                    assert!(g.seconds <= remembered, "{remembered} {d:?} {o:?} -> {g:?}");
                }
            }
        }
    }
}
