//! Run-to-run noise: measured across repeated runs when both reports have them, else estimated
//! from each report's own interval samples.
//!
//! **From repeats** (`run --runs N`, the report's `repeats.runs[]`, [`NoiseSource::Repeats`]):
//! when both reports hold at least [`MIN_REPEATS`] runs, each run's number is one sample; the
//! change is beyond noise when it exceeds Welch's t at 95 % (two-sided) times the standard error
//! of the difference of the two means (`t(df) * sqrt(se_a² + se_b²)`, df by Welch–Satterthwaite,
//! [`t_critical`]). Runs are independent, so the textbook test holds; with few runs t is large
//! (12.7 for one degree of freedom, 4.3 for two), which is the honest price of few repeats.
//!
//! **From intervals** ([`NoiseSource::Intervals`], otherwise): a report keeps one point per
//! sampling interval (`intervals[]`): the workload's numbers when it reported them, and per
//! device the DMA maps per second and translation time per I/O. The spread of those points
//! inside one run is then the only noise measure two reports carry:
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

use crate::report::{IntervalDevice, Repeats, Report};
use iommutop_abi::row_key::RowKey;
use serde::Serialize;

/// Fewest steady interval samples a run needs for its noise to be estimated.
pub const MIN_SAMPLES: usize = 3;

/// Fewest runs each report needs for noise to be measured across repeats.
pub const MIN_REPEATS: usize = 2;

/// What the spread behind a noise judgement was measured over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NoiseSource {
    /// The steady interval samples (seconds) inside each run.
    Intervals,
    /// Repeated runs of the workload (`run --runs N`), one sample per run.
    Repeats,
}

impl NoiseSource {
    /// What one sample is, in the plural: `runs`, `steady interval samples`.
    pub fn samples_name(self) -> &'static str {
        match self {
            NoiseSource::Intervals => "steady interval samples",
            NoiseSource::Repeats => "runs",
        }
    }
}

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
    /// Relative standard deviation of one sample (sample standard deviation over the mean).
    pub rsd: f64,
    pub source: NoiseSource,
}

impl Spread {
    /// The spread of steady interval samples; `None` below [`MIN_SAMPLES`] values, or with a
    /// mean that is not positive and finite.
    pub fn of(values: &[f64]) -> Option<Spread> {
        Spread::from_samples(values, MIN_SAMPLES, NoiseSource::Intervals)
    }

    /// The spread of one number across repeated runs; `None` below [`MIN_REPEATS`] runs, or
    /// with a mean that is not positive and finite.
    pub fn of_repeats(values: &[f64]) -> Option<Spread> {
        Spread::from_samples(values, MIN_REPEATS, NoiseSource::Repeats)
    }

    fn from_samples(values: &[f64], fewest: usize, source: NoiseSource) -> Option<Spread> {
        if values.len() < fewest || !values.iter().all(|v| v.is_finite()) {
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
            source,
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
    /// Samples in A and in B: runs, or steady interval samples.
    pub samples: (usize, usize),
    /// `repeats` when both spreads came from repeated runs, else `intervals`.
    pub source: NoiseSource,
}

impl Significance {
    /// `5 and 5 runs`, `12 and 10 steady interval samples`.
    pub fn basis(&self) -> String {
        format!(
            "{} and {} {}",
            self.samples.0,
            self.samples.1,
            self.source.samples_name()
        )
    }
}

/// Judges the change from `a` to `b` (whole-run values) against the two runs' spreads: Welch's
/// t when both come from repeats, [`Z`] otherwise. `None` when either spread is unknown or `a` is
/// not positive.
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
    let (se_a, se_b) = (sa.relative_se(), sb.relative_se());
    let repeats = sa.source == NoiseSource::Repeats && sb.source == NoiseSource::Repeats;
    let critical = if repeats {
        t_critical(welch_df(se_a, sa.samples, se_b, sb.samples))
    } else {
        Z
    };
    let band = critical * (se_a.powi(2) + se_b.powi(2)).sqrt();
    Some(Significance {
        change,
        band,
        beyond_noise: change.abs() > band,
        samples: (sa.samples, sb.samples),
        source: if repeats {
            NoiseSource::Repeats
        } else {
            NoiseSource::Intervals
        },
    })
}

/// Welch–Satterthwaite degrees of freedom of the difference of two means with standard errors
/// `se_a` (of `n_a` samples) and `se_b`; infinite when both are exact.
pub fn welch_df(se_a: f64, n_a: usize, se_b: f64, n_b: usize) -> f64 {
    let (va, vb) = (se_a.powi(2), se_b.powi(2));
    let denominator = va.powi(2) / (n_a.max(2) - 1) as f64 + vb.powi(2) / (n_b.max(2) - 1) as f64;
    if denominator > 0.0 {
        (va + vb).powi(2) / denominator
    } else {
        f64::INFINITY
    }
}

/// Two-sided 95 % critical values of Student's t for 1 to 30 degrees of freedom.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// The two-sided 95 % critical value of Student's t for `df` degrees of freedom, rounded down to
/// the next tabulated value (so never smaller than the exact one).
pub fn t_critical(df: f64) -> f64 {
    if df.is_nan() || df < 1.0 {
        return T_975[0];
    }
    if df < 31.0 {
        return T_975[df as usize - 1];
    }
    match df {
        df if df < 40.0 => T_975[29],
        df if df < 60.0 => 2.021,
        df if df < 120.0 => 2.000,
        df if df.is_finite() => 1.980,
        _ => 1.960,
    }
}

/// Both reports' repeated runs, when each has at least [`MIN_REPEATS`]: then noise is measured
/// across them.
pub fn repeats_of<'r>(a: &'r Report, b: &'r Report) -> Option<(&'r Repeats, &'r Repeats)> {
    let enough = |r: &'r Report| r.repeats.as_ref().filter(|r| r.runs.len() >= MIN_REPEATS);
    Some((enough(a)?, enough(b)?))
}

/// The spread of a workload metric across the runs of `repeats` (for `completions_per_s`, the
/// completions per second summed over devices).
pub fn repeat_workload_spread(repeats: &Repeats, metric: &str) -> Option<Spread> {
    let values: Vec<f64> = repeats
        .runs
        .iter()
        .filter_map(|run| {
            if metric == super::work::COMPLETIONS_PER_S {
                run.completions_per_s()
            } else {
                run.workload.get(metric).copied()
            }
        })
        .collect();
    Spread::of_repeats(&values)
}

/// The spread of a device's translation time per unit across the runs of `repeats`: per unit
/// of the workload's work when `of_workload`, else per the device's own I/O.
pub fn repeat_device_spread(repeats: &Repeats, key: &RowKey, of_workload: bool) -> Option<Spread> {
    let values: Vec<f64> = repeats
        .runs
        .iter()
        .filter_map(|run| run.translation_ns_per_unit(key, of_workload))
        .collect();
    Spread::of_repeats(&values)
}

/// A workload metric's change from A (`va`) to B (`vb`) judged against its noise: across the
/// repeated runs when both reports have them and the metric was kept per run, else across each
/// report's interval samples.
pub fn judge_workload(
    a: &Report,
    b: &Report,
    metric: &str,
    va: f64,
    vb: f64,
) -> Option<Significance> {
    repeats_of(a, b)
        .and_then(|(ra, rb)| {
            judge(
                va,
                vb,
                repeat_workload_spread(ra, metric),
                repeat_workload_spread(rb, metric),
            )
        })
        .or_else(|| {
            judge(
                va,
                vb,
                workload_spread(a, metric),
                workload_spread(b, metric),
            )
        })
}

/// A device's time per unit from A (`ta`, row `key_a`) to B (`tb`, row `key_b`) judged against
/// its noise: its translation time per unit across repeated runs when both reports have them
/// (per unit of the workload's work when `of_workload`, else per the device's own I/O), else
/// its translation time per I/O across interval samples.
pub fn judge_device(
    (a, key_a): (&Report, &RowKey),
    (b, key_b): (&Report, &RowKey),
    (ta, tb): (f64, f64),
    of_workload: bool,
) -> Option<Significance> {
    let field: fn(&IntervalDevice) -> Option<f64> = |p| p.translation_ns_per_io;
    repeats_of(a, b)
        .and_then(|(ra, rb)| {
            judge(
                ta,
                tb,
                repeat_device_spread(ra, key_a, of_workload),
                repeat_device_spread(rb, key_b, of_workload),
            )
        })
        .or_else(|| {
            judge(
                ta,
                tb,
                device_spread(a, key_a, field),
                device_spread(b, key_b, field),
            )
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
    key: &RowKey,
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

    /// Repeats are independent runs, judged with Welch's t: few runs widen the band.
    #[test]
    fn a_change_across_repeats_is_judged_with_welchs_t() {
        assert_eq!(Spread::of_repeats(&[100.0]), None, "one run has no spread");
        let a = Spread::of_repeats(&[95.0, 105.0]).expect("two runs");
        assert_eq!((a.samples, a.source), (2, NoiseSource::Repeats));
        // sd 7.07, rsd 0.0707, se 0.05 each side; df = (2·0.0025)² / (2·0.0025²/1) = 2.
        let df = welch_df(a.relative_se(), 2, a.relative_se(), 2);
        assert!((df - 2.0).abs() < 1e-9, "{df}");
        let verdict = judge(100.0, 120.0, Some(a), Some(a)).expect("judged");
        assert_eq!(verdict.source, NoiseSource::Repeats);
        // band = t(2) 4.303 × sqrt(2) × 0.05 ≈ 0.304: +20% is within it.
        assert!(
            (verdict.band - 4.303 * 2f64.sqrt() * 0.05).abs() < 1e-9,
            "{verdict:?}"
        );
        assert!(!verdict.beyond_noise);
        assert_eq!(verdict.basis(), "2 and 2 runs");
        // Ten runs each with the same spread: t(18) 2.101 and a smaller standard error.
        let ten: Vec<f64> = (0..10)
            .map(|i| if i % 2 == 0 { 95.0 } else { 105.0 })
            .collect();
        let a = Spread::of_repeats(&ten).expect("ten runs");
        let verdict = judge(100.0, 110.0, Some(a), Some(a)).expect("judged");
        let se = a.relative_se();
        assert!(
            (verdict.band - 2.101 * 2f64.sqrt() * se).abs() < 1e-9,
            "{verdict:?}"
        );
        assert!(verdict.beyond_noise, "+10% is beyond ±{:.3}", verdict.band);
        // A spread from repeats against one from intervals: the interval rule (Z).
        let intervals = Spread::of(&ten).expect("intervals");
        let mixed = judge(100.0, 110.0, Some(a), Some(intervals)).expect("judged");
        assert_eq!(mixed.source, NoiseSource::Intervals);
        assert!((mixed.band - Z * 2f64.sqrt() * se).abs() < 1e-9);
    }

    #[test]
    fn t_critical_values_round_the_degrees_of_freedom_down() {
        assert_eq!(t_critical(1.0), 12.706);
        assert_eq!(t_critical(2.9), 4.303);
        assert_eq!(t_critical(30.0), 2.042);
        assert_eq!(t_critical(45.0), 2.021);
        assert_eq!(t_critical(f64::INFINITY), 1.960);
        assert_eq!(t_critical(0.5), 12.706, "below one: the widest");
        assert_eq!(t_critical(f64::NAN), 12.706);
        assert_eq!(welch_df(0.0, 3, 0.0, 3), f64::INFINITY);
    }

    /// `compare` measures noise across repeats only when both reports have them.
    #[test]
    fn repeats_are_used_when_both_reports_have_them_else_intervals() {
        use crate::report::fixtures::{full_report, repeated_report};
        let (a, b) = (repeated_report(), repeated_report());
        let verdict = judge_workload(&a, &b, "read_iops", 2000.0, 2500.0).expect("judged");
        assert_eq!(verdict.source, NoiseSource::Repeats);
        assert_eq!(verdict.samples, (2, 2));
        // 1900 and 2100: rsd 0.0707, band 4.303 × 0.0707 ≈ ±30%: +25% is within.
        assert!(!verdict.beyond_noise, "{verdict:?}");
        assert!(
            judge_workload(&a, &b, "no_such_metric", 1.0, 2.0).is_none(),
            "no per-run values and one interval sample: not measurable"
        );
        let single = full_report();
        assert!(repeats_of(&a, &single).is_none());
        assert!(
            judge_workload(&a, &single, "read_iops", 2000.0, 2500.0).is_none(),
            "falls back to intervals, of which the fixture has too few"
        );
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
