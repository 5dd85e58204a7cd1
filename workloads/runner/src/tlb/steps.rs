//! Steps in a latency-versus-working-set curve, and what they say: a rise seen with 4 KiB pages
//! and not with 2 MiB pages at the same working set is the TLB running out of entries; a rise
//! seen with both is a cache running out of lines.

use serde::Serialize;

/// One measured working set.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    pub bytes: u64,
    pub ns: f64,
}

pub use iommutop_model::results::tlb::{Estimate, PageSize, Step, StepKind};

/// A point-to-point rise by this factor starts or continues a step (a steady climb of smaller
/// rises is no step)...
const RISE: f64 = 1.25;
/// ...and a step counts when it rises by this factor overall...
const MIN_RATIO: f64 = 1.25;
/// ...and by at least this many ns (timer noise at L1 latencies is a few tenths).
const MIN_NS: f64 = 0.5;

/// Index ranges `(fast, slow)` of the steps in `points` (sorted by size).
pub fn find_steps(points: &[Point]) -> Vec<(usize, usize)> {
    let mut steps = Vec::new();
    let mut i = 1;
    while i < points.len() {
        if points[i].ns > points[i - 1].ns * RISE {
            let fast = i - 1;
            let mut slow = i;
            while slow + 1 < points.len() && points[slow + 1].ns > points[slow].ns * RISE {
                slow += 1;
            }
            let (before, after) = (points[fast].ns, points[slow].ns);
            if after >= before * MIN_RATIO && after - before >= MIN_NS {
                steps.push((fast, slow));
            }
            i = slow + 1;
        } else {
            i += 1;
        }
    }
    steps
}

/// Whether two steps rise over a common stretch of working sets (sharing only an end point is
/// not enough: 4m→8m with 4 KiB pages and 8m→16m with 2 MiB pages are different limits).
fn overlaps(a: &Step, b: &Step) -> bool {
    a.fast_bytes.max(b.fast_bytes) < a.slow_bytes.min(b.slow_bytes)
}

/// Steps of both series, classified by comparing them (`small` = the 4 KiB series).
pub fn classify(small: Option<&[Point]>, huge: Option<&[Point]>) -> Vec<Step> {
    let make = |points: &[Point], page_size: PageSize| -> Vec<Step> {
        find_steps(points)
            .into_iter()
            .map(|(f, s)| Step {
                page_size,
                fast_bytes: points[f].bytes,
                slow_bytes: points[s].bytes,
                ns_before: points[f].ns,
                ns_after: points[s].ns,
                ratio: points[s].ns / points[f].ns,
                kind: StepKind::Unclear,
            })
            .collect()
    };
    let mut small_steps = small.map(|p| make(p, PageSize::Size4K)).unwrap_or_default();
    let mut huge_steps = huge.map(|p| make(p, PageSize::Size2M)).unwrap_or_default();
    if small.is_some() && huge.is_some() {
        for step in &mut small_steps {
            step.kind = if huge_steps.iter().any(|h| overlaps(step, h)) {
                StepKind::Cache
            } else {
                StepKind::Tlb
            };
        }
        for step in &mut huge_steps {
            if small_steps.iter().any(|s| overlaps(step, s)) {
                step.kind = StepKind::Cache;
            }
        }
    }
    small_steps.extend(huge_steps);
    small_steps
}

/// What each step says, given the pattern (`lines`: every cache line of the working set is
/// touched; `pages`: one line per 4 KiB page).
pub fn estimates(steps: &[Step], pattern: &str) -> Vec<Estimate> {
    let footprint = |bytes: u64| {
        if pattern == "pages" {
            bytes / 64
        } else {
            bytes
        }
    };
    steps
        .iter()
        .map(|s| match s.kind {
            StepKind::Tlb => Estimate {
                what: "TLB reach with 4 KiB pages".into(),
                working_set_bytes: s.fast_bytes,
                entries: Some(s.fast_bytes / 4096),
                cache_bytes: None,
            },
            StepKind::Cache => Estimate {
                what: "cache size".into(),
                working_set_bytes: s.fast_bytes,
                entries: None,
                cache_bytes: Some(footprint(s.fast_bytes)),
            },
            StepKind::Unclear => Estimate {
                what: format!("cache or TLB limit ({} pages)", s.page_size),
                working_set_bytes: s.fast_bytes,
                entries: None,
                cache_bytes: None,
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(values: &[(u64, f64)]) -> Vec<Point> {
        values
            .iter()
            .map(|&(bytes, ns)| Point { bytes, ns })
            .collect()
    }

    const K: u64 = 1024;
    const M: u64 = 1024 * 1024;

    #[test]
    fn flat_noisy_curves_have_no_steps() {
        let flat = curve(&[
            (4 * K, 1.0),
            (8 * K, 1.08),
            (16 * K, 0.97),
            (32 * K, 1.05),
            (64 * K, 1.0),
        ]);
        assert!(find_steps(&flat).is_empty());
    }

    #[test]
    fn a_rise_over_two_points_is_one_step() {
        let c = curve(&[
            (64 * K, 1.2),
            (128 * K, 1.2),
            (256 * K, 2.0),
            (512 * K, 4.0),
            (M, 4.1),
        ]);
        assert_eq!(find_steps(&c), [(1, 3)]);
    }

    #[test]
    fn separate_jumps_are_separate_steps_and_a_steady_climb_is_none() {
        // Measured on the build machine (4 KiB pages, `pages` pattern, release build).
        let c = curve(&[
            (128 * K, 1.25),
            (256 * K, 1.36),
            (512 * K, 3.88),
            (M, 4.52),
            (2 * M, 5.98),
            (4 * M, 6.94),
            (8 * M, 35.47),
            (16 * M, 66.30),
            (32 * M, 83.21),
            (64 * M, 340.30),
        ]);
        // 16m → 32m rises ×1.255: it continues the step from 4m, which ends at 64m.
        assert_eq!(find_steps(&c), [(1, 2), (3, 4), (5, 9)]);
        let climb = curve(&[(M, 10.0), (2 * M, 11.5), (4 * M, 13.2), (8 * M, 15.2)]);
        assert!(find_steps(&climb).is_empty());
    }

    #[test]
    fn steps_with_4k_pages_only_are_tlb_and_shared_ones_are_cache() {
        // 4 KiB: a TLB step after 256 KiB (64 entries) and a cache step after 2 MiB.
        let small = curve(&[
            (64 * K, 1.0),
            (128 * K, 1.0),
            (256 * K, 1.0),
            (512 * K, 2.5),
            (M, 2.6),
            (2 * M, 2.6),
            (4 * M, 9.0),
            (8 * M, 9.2),
        ]);
        // 2 MiB: only the cache step.
        let huge = curve(&[
            (64 * K, 1.0),
            (128 * K, 1.0),
            (256 * K, 1.0),
            (512 * K, 1.05),
            (M, 1.0),
            (2 * M, 1.1),
            (4 * M, 6.0),
            (8 * M, 6.1),
        ]);
        let steps = classify(Some(&small), Some(&huge));
        assert_eq!(steps.len(), 3, "{steps:#?}");
        assert_eq!(
            (steps[0].fast_bytes, steps[0].kind),
            (256 * K, StepKind::Tlb)
        );
        assert_eq!(
            (steps[1].fast_bytes, steps[1].kind),
            (2 * M, StepKind::Cache)
        );
        assert_eq!(
            (steps[2].page_size, steps[2].kind),
            (PageSize::Size2M, StepKind::Cache)
        );
        let est = estimates(&steps, "pages");
        assert_eq!(est[0].entries, Some(64));
        assert_eq!(
            est[1].cache_bytes,
            Some(32 * K),
            "pages pattern: one line per 4 KiB"
        );
        assert_eq!(estimates(&steps, "lines")[1].cache_bytes, Some(2 * M));
    }

    #[test]
    fn steps_that_only_touch_are_different_limits() {
        // The lab guest (TCG): 4 KiB pages jump after 4m, 2 MiB pages after 8m.
        let small = curve(&[
            (2 * M, 10.9),
            (4 * M, 12.4),
            (8 * M, 247.8),
            (16 * M, 272.6),
        ]);
        let huge = curve(&[(2 * M, 9.9), (4 * M, 12.6), (8 * M, 14.7), (16 * M, 318.4)]);
        let steps = classify(Some(&small), Some(&huge));
        assert_eq!((steps[0].fast_bytes, steps[0].kind), (4 * M, StepKind::Tlb));
        let last = steps.last().expect("the 2 MiB jump");
        assert_eq!((last.fast_bytes, last.kind), (8 * M, StepKind::Unclear));
        assert_eq!(estimates(&steps, "pages")[0].entries, Some(1024));
    }

    #[test]
    fn one_series_alone_cannot_tell() {
        let small = curve(&[(M, 1.0), (2 * M, 3.0)]);
        let steps = classify(Some(&small), None);
        assert_eq!(steps[0].kind, StepKind::Unclear);
        assert!(estimates(&steps, "lines")[0]
            .what
            .starts_with("cache or TLB"));
    }
}
