//! Run-to-run noise, estimated from a report's own interval samples.
//!
//! A report keeps one point per sampling interval (`intervals[]`): the workload's numbers when it
//! reported them, and per device the DMA maps per second and translation time per I/O. The
//! spread of those points inside one run is the only noise measure two reports carry, so it is
//! what `compare` uses:
//!
//! 1. **Steady part.** Seconds before the workload started and after it ended (set-up, tear-down)
//!    are not noise: leading and trailing intervals whose activity is below a quarter of the
//!    median active interval are dropped ([`steady`]).
//! 2. **Spread.** Mean and sample standard deviation of the steady intervals ([`Spread`]); at
//!    least [`MIN_SAMPLES`] are needed.
//! 3. **Judgement.** The relative change B vs A is *beyond noise* when it exceeds
//!    [`Z`] standard errors of the difference of the two means:
//!    `|b - a| / a > Z * sqrt(se_a² + se_b²)`, with `se = rsd / sqrt(n)` ([`judge`]).
//!    Adjacent seconds of one run are not independent and two runs differ in ways no interval
//!    shows (boot, placement), so `Z` is 3 rather than the textbook 2.

use crate::report::{IntervalDevice, Report};
use serde::Serialize;

/// Fewest steady interval samples a run needs for its noise to be estimated.
pub const MIN_SAMPLES: usize = 3;

/// Standard errors a change must exceed to be called beyond noise.
pub const Z: f64 = 3.0;

/// Intervals below this fraction of the median active one, at either end, are set-up or
/// tear-down, not steady state.
const IDLE_FRACTION: f64 = 0.25;

/// Mean and spread of a run's steady interval samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub samples: usize,
    pub mean: f64,
    /// Relative standard deviation of one interval (sample standard deviation over the mean).
    pub rsd: f64,
}

impl Spread {
    /// The spread of `values`; `None` below [`MIN_SAMPLES`] values, or with a mean that is not
    /// positive and finite.
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.len() < MIN_SAMPLES {
            return None;
        }
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        if !(mean.is_finite() && mean > 0.0) {
            return None;
        }
        let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
        Some(Spread {
            samples: values.len(),
            mean,
            rsd: variance.sqrt() / mean,
        })
    }

    /// Relative standard error of the mean.
    pub fn relative_se(&self) -> f64 {
        self.rsd / (self.samples as f64).sqrt()
    }
}

/// Whether a change between two runs is larger than their noise.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Significance {
    /// `(b - a) / a`.
    pub change: f64,
    /// The relative change noise alone could explain (± this).
    pub band: f64,
    pub beyond_noise: bool,
    /// Steady interval samples in A and in B.
    pub samples: (usize, usize),
}

/// Judges the change from `a` to `b` (whole-run values) against the two runs' spreads.
/// `None` when either spread is unknown or `a` is not positive.
pub fn judge(
    a: f64,
    b: f64,
    spread_a: Option<Spread>,
    spread_b: Option<Spread>,
) -> Option<Significance> {
    let (sa, sb) = (spread_a?, spread_b?);
    if !(a.is_finite() && b.is_finite() && a > 0.0) {
        return None;
    }
    let change = (b - a) / a;
    let band = Z * (sa.relative_se().powi(2) + sb.relative_se().powi(2)).sqrt();
    Some(Significance {
        change,
        band,
        beyond_noise: change.abs() > band,
        samples: (sa.samples, sb.samples),
    })
}

/// The steady part of a series: `values[i]` kept from the first to the last interval whose
/// `activity[i]` reaches a quarter of the median positive activity. Missing values are skipped.
pub fn steady(values: &[Option<f64>], activity: &[f64]) -> Vec<f64> {
    let mut active: Vec<f64> = activity.iter().copied().filter(|a| *a > 0.0).collect();
    if active.is_empty() {
        return Vec::new();
    }
    active.sort_by(f64::total_cmp);
    let threshold = active[active.len() / 2] * IDLE_FRACTION;
    let busy = |i: &usize| activity.get(*i).is_some_and(|a| *a >= threshold);
    let (Some(first), Some(last)) = (
        (0..activity.len()).find(busy),
        (0..activity.len()).rev().find(busy),
    ) else {
        return Vec::new();
    };
    values
        .iter()
        .take(last + 1)
        .skip(first)
        .filter_map(|v| *v)
        .filter(|v| v.is_finite())
        .collect()
}

/// A workload metric's per-interval values, as the workload reported them (`intervals[].workload`
/// as an object holding `metric`, or a bare number), or for `completions_per_s` the completions
/// per second summed over devices.
pub fn workload_series(report: &Report, metric: &str) -> Vec<Option<f64>> {
    report
        .intervals
        .iter()
        .map(|point| {
            if metric == super::work::COMPLETIONS_PER_S {
                return Some(point.devices.values().map(|d| d.completions_per_s).sum());
            }
            let value = point.workload.as_ref()?;
            value
                .get(metric)
                .and_then(|v| v.as_f64())
                .or_else(|| value.as_f64())
        })
        .collect()
}

/// The spread of a workload metric over the steady part of the run.
pub fn workload_spread(report: &Report, metric: &str) -> Option<Spread> {
    let series = workload_series(report, metric);
    let activity: Vec<f64> = series.iter().map(|v| v.unwrap_or(0.0)).collect();
    Spread::of(&steady(&series, &activity))
}

/// The spread of one device's per-interval figure (`field`) over the intervals in which the
/// device was busy mapping (its steady part by DMA maps per second).
pub fn device_spread(
    report: &Report,
    key: &str,
    field: fn(&IntervalDevice) -> Option<f64>,
) -> Option<Spread> {
    let points: Vec<Option<&IntervalDevice>> = report
        .intervals
        .iter()
        .map(|point| point.devices.get(key))
        .collect();
    let values: Vec<Option<f64>> = points.iter().map(|d| d.and_then(field)).collect();
    let activity: Vec<f64> = points
        .iter()
        .map(|d| d.map_or(0.0, |d| d.dma_map_per_s))
        .collect();
    Spread::of(&steady(&values, &activity))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_the_relative_sample_standard_deviation() {
        assert_eq!(Spread::of(&[1.0, 1.0]), None, "two samples are too few");
        let s = Spread::of(&[90.0, 100.0, 110.0]).expect("three samples");
        assert_eq!(s.samples, 3);
        assert!((s.mean - 100.0).abs() < 1e-9);
        assert!((s.rsd - 0.1).abs() < 1e-9, "{s:?}");
        assert!((s.relative_se() - 0.1 / 3f64.sqrt()).abs() < 1e-12);
        assert_eq!(
            Spread::of(&[0.0, 0.0, 0.0]),
            None,
            "no mean to be relative to"
        );
    }

    #[test]
    fn set_up_and_tear_down_seconds_are_not_steady() {
        let values = [
            Some(0.0),
            Some(5.0),
            Some(100.0),
            Some(80.0),
            Some(120.0),
            Some(3.0),
        ];
        let activity = [0.0, 5.0, 100.0, 80.0, 120.0, 3.0];
        assert_eq!(steady(&values, &activity), [100.0, 80.0, 120.0]);
        // A dip in the middle is noise and stays.
        let values = [Some(100.0), Some(10.0), Some(100.0)];
        assert_eq!(steady(&values, &[100.0, 10.0, 100.0]), [100.0, 10.0, 100.0]);
        assert!(steady(&[Some(1.0)], &[0.0]).is_empty());
    }

    #[test]
    fn a_change_is_judged_against_the_standard_error_of_both_runs() {
        let a = Spread::of(&[95.0, 100.0, 105.0, 100.0]).expect("a");
        let b = Spread::of(&[85.0, 90.0, 95.0, 90.0]).expect("b");
        // rsd ≈ 0.041 and 0.045, se ≈ 0.020 and 0.023: band ≈ 3 × 0.031 = 0.092.
        let verdict = judge(100.0, 90.0, Some(a), Some(b)).expect("judged");
        assert!((verdict.change + 0.1).abs() < 1e-12);
        assert!((verdict.band - 0.0922).abs() < 1e-3, "{verdict:?}");
        assert!(verdict.beyond_noise);
        assert_eq!(verdict.samples, (4, 4));
        let close = judge(100.0, 95.0, Some(a), Some(b)).expect("judged");
        assert!(!close.beyond_noise);
        assert_eq!(judge(100.0, 95.0, Some(a), None), None);
        assert_eq!(judge(0.0, 95.0, Some(a), Some(b)), None);
    }

    #[test]
    fn noisy_emulated_runs_call_a_large_change_noise() {
        // Seconds of TCP_RR under TCG (LAB.md): 943, 215, 317, 345, 426 transactions/s.
        let a = Spread::of(&[943.0, 215.0, 317.0, 345.0, 426.0]).expect("a");
        let b = Spread::of(&[1180.0, 1760.0, 1400.0, 1250.0, 1500.0]).expect("b");
        let verdict = judge(449.0, 1418.0, Some(a), Some(b)).expect("judged");
        assert!(
            verdict.beyond_noise,
            "a factor of three is beyond even this"
        );
        let verdict = judge(449.0, 520.0, Some(a), Some(a)).expect("judged");
        assert!(!verdict.beyond_noise, "+16% is within {:?}", verdict.band);
    }
}
