//! What the loader found for each probe point: the tier it got, its hooks, why others failed.

use super::hook_error::HookError;
use super::table::Tier;
use iommutop_model::sample::Op;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub tier: Tier,
    pub reason: String,
}

/// One hook (a kernel function or tracepoint) of the chosen tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookOutcome {
    /// `dma_map_page_attrs` or `dma:dma_map_page`.
    pub hook: String,
    /// None when attached; else why not.
    pub error: Option<String>,
    /// The hook does not exist in this kernel (renamed, inlined, other vendor): not a failure.
    pub absent: bool,
    /// The tier it was attached at (hooks of one point may differ: a module's function takes a
    /// kprobe where the rest take fentry).
    pub tier: Option<Tier>,
}

impl HookOutcome {
    /// The outcome of the hook `hook` (a function's name, or `category:event`).
    pub fn new(hook: impl Into<String>, result: Result<(), HookError>) -> HookOutcome {
        let (error, absent) = match result {
            Ok(()) => (None, false),
            Err(error) => (Some(error.to_string()), error.is_absence()),
        };
        HookOutcome {
            hook: hook.into(),
            error,
            absent,
            tier: None,
        }
    }

    pub fn is_attached(&self) -> bool {
        self.error.is_none()
    }

    /// The outcome of an attached hook, marked with its tier.
    pub fn at(self, tier: Tier) -> HookOutcome {
        let tier = self.is_attached().then_some(tier);
        HookOutcome { tier, ..self }
    }

    /// One reason for a tier whose every hook failed: the errors of present hooks first.
    pub fn summarize_failures(outcomes: &[HookOutcome]) -> String {
        let failing: Vec<&HookOutcome> = outcomes.iter().filter(|o| !o.absent).collect();
        let shown = if failing.is_empty() {
            outcomes.iter().collect()
        } else {
            failing
        };
        let mut groups: Vec<(Vec<&str>, &str)> = Vec::new();
        for outcome in shown {
            let error = outcome.error.as_deref().unwrap_or("");
            match groups.iter_mut().find(|(_, e)| *e == error) {
                Some((hooks, _)) => hooks.push(&outcome.hook),
                None => groups.push((vec![&outcome.hook], error)),
            }
        }
        groups
            .iter()
            .map(|(hooks, error)| format!("{}: {error}", hooks.join(", ")))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Everything known about one logical point after attaching.
#[derive(Debug, Clone)]
pub struct PointStatus {
    pub point: &'static str,
    pub op: Op,
    pub tier: Option<Tier>,
    pub hooks: Vec<HookOutcome>,
    pub refused: Vec<Refusal>,
    /// What the point is known to miss on this kernel (see `table::EraCaveat`).
    pub caveats: Vec<&'static str>,
}

impl PointStatus {
    /// The attached hooks, each followed by its tier where it is not the point's.
    pub fn attached_hook_labels(&self) -> Vec<String> {
        self.hooks
            .iter()
            .filter(|h| h.is_attached())
            .map(|h| match h.tier {
                Some(tier) if Some(tier) != self.tier => format!("{} ({})", h.hook, tier.name()),
                _ => h.hook.clone(),
            })
            .collect()
    }

    pub fn measures_latency(&self) -> bool {
        self.tier.is_some_and(Tier::measures_latency)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_functions_are_not_failures() {
        let o = HookOutcome::new(
            "dma_map_phys",
            Err(HookError::Absent("unknown BTF type `dma_map_phys`".into())),
        );
        assert!(o.absent);
        let o = HookOutcome::new(
            "dma_map_page_attrs",
            Err(HookError::Refused(
                "load: Operation not permitted (os error 1)".into(),
            )),
        );
        assert!(!o.absent);
    }

    #[test]
    fn summary_groups_hooks_with_the_same_error_and_hides_absent_ones() {
        let outcomes = vec![
            HookOutcome::new("a", Err(HookError::Refused("EPERM".into()))),
            HookOutcome::new("b", Err(HookError::Refused("EPERM".into()))),
            HookOutcome::new("c", Err(HookError::Absent("unknown BTF type `c`".into()))),
        ];
        assert_eq!(HookOutcome::summarize_failures(&outcomes), "a, b: EPERM");
    }
}
