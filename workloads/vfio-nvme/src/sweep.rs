//! The IOTLB sweep's results and their analysis: the median latency per working set of 1, 2,
//! 4 … N pages, the knee where it steps up (the working set stopped fitting the IOTLB) and the
//! sentence that says so. All pure; the chart is the model's (`html::sweep_chart`), drawn by the
//! runner.

use crate::params::PageSize;
pub use iommutop_vfio_nvme_results::{Knee, SweepSeries, SweepStep, VfioNvmeSweep};

/// The smallest relative step taken as a knee.
pub const MIN_JUMP_RATIO: f64 = 0.03;
/// The step must exceed the noise by this factor.
pub const MIN_JUMP_OVER_NOISE: f64 = 3.0;
/// The rise between the two steps at the knee must be this share of the whole jump (a step,
/// not a ramp).
pub const MIN_SHARPNESS: f64 = 0.4;

/// Why a sweep's steps show no knee: the series' verdict says it, with the evidence (the best
/// split, its levels and the noise).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoKnee {
    #[error("{0} steps are too few to find a knee (need 3 or more: raise --pages)")]
    TooFewSteps(usize),
    #[error("no knee: latency does not rise with more pages ({0})")]
    NoRise(String),
    #[error(
        "no knee: latency rises by less than {least:.0} % ({0})",
        least = MIN_JUMP_RATIO * 100.0
    )]
    TooSmall(String),
    #[error(
        "no knee: the rise is within {times} x the noise ({0})",
        times = MIN_JUMP_OVER_NOISE
    )]
    WithinNoise(String),
    #[error("no knee: latency ramps up gradually rather than stepping ({0})")]
    Ramp(String),
}

/// Fits a two-level step to the medians (least squares over every split) and accepts it as a
/// knee if the jump is large, above the noise, and sharp.
pub fn find_knee(steps: &[SweepStep]) -> Result<Knee, NoKnee> {
    if steps.len() < 3 {
        return Err(NoKnee::TooFewSteps(steps.len()));
    }
    let m: Vec<f64> = steps.iter().map(|s| s.median_ns as f64).collect();
    let sse = |xs: &[f64]| {
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        (mean, xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>())
    };
    let mut best: Option<(usize, f64, f64, f64)> = None;
    for k in 1..m.len() {
        let (lm, ls) = sse(&m[..k]);
        let (rm, rs) = sse(&m[k..]);
        let cost = ls + rs;
        if best.is_none_or(|b| cost < b.3) {
            best = Some((k, lm, rm, cost));
        }
    }
    let Some((k, below, above, cost)) = best else {
        return Err(NoKnee::TooFewSteps(steps.len())); // three steps or more have a split
    };
    let noise = (cost / (m.len() as f64 - 2.0).max(1.0)).sqrt();
    let jump = above - below;
    let ratio = if below > 0.0 { jump / below } else { 0.0 };
    let sharp = m[k] - m[k - 1];
    let evidence = format!(
        "best split between {} and {} pages: {:.1} -> {:.1} us ({:+.1} %), noise {:.2} us",
        steps[k - 1].pages,
        steps[k].pages,
        below / 1e3,
        above / 1e3,
        ratio * 100.0,
        noise / 1e3
    );
    if jump <= 0.0 {
        return Err(NoKnee::NoRise(evidence));
    }
    if ratio < MIN_JUMP_RATIO {
        return Err(NoKnee::TooSmall(evidence));
    }
    if jump < MIN_JUMP_OVER_NOISE * noise {
        return Err(NoKnee::WithinNoise(evidence));
    }
    if sharp < MIN_SHARPNESS * jump {
        return Err(NoKnee::Ramp(evidence));
    }
    Ok(Knee {
        pages_before: steps[k - 1].pages,
        pages_after: steps[k].pages,
        entries_estimate: steps[k - 1].pages,
        below_ns: below,
        above_ns: above,
        jump_ratio: ratio,
        noise_ns: noise,
    })
}

/// The knee (if any) and a sentence saying what was found.
pub fn analyse(page_size: PageSize, steps: &[SweepStep]) -> (Option<Knee>, String) {
    match find_knee(steps) {
        Ok(k) => {
            let verdict = format!(
                "knee between {} and {} pages of {page_size}: the IOTLB holds about {} entries (at least {}, fewer than {}); median {:.1} -> {:.1} us ({:+.1} %, noise {:.2} us)",
                k.pages_before,
                k.pages_after,
                k.entries_estimate,
                k.pages_before,
                k.pages_after,
                k.below_ns / 1e3,
                k.above_ns / 1e3,
                k.jump_ratio * 100.0,
                k.noise_ns / 1e3
            );
            (Some(k), verdict)
        }
        Err(why) => (None, format!("{page_size}: {why}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(medians: &[(u64, u64)]) -> Vec<SweepStep> {
        medians
            .iter()
            .map(|&(pages, median_ns)| SweepStep {
                pages,
                bytes_covered: pages * 4096,
                ios: 1000,
                median_ns,
                p90_ns: median_ns + 1000,
                p99_ns: median_ns + 5000,
                mean_ns: median_ns as f64,
            })
            .collect()
    }

    /// A clean step at 1024 pages, like QEMU's 1024-entry VT-d IOTLB.
    fn stepped() -> Vec<SweepStep> {
        let mut v = Vec::new();
        let mut p = 1;
        while p <= 4096 {
            let base = if p < 1024 { 100_000 } else { 112_000 };
            v.push((p, base + (p % 7) * 150));
            p *= 2;
        }
        steps(&v)
    }

    #[test]
    fn a_step_is_found_where_it_is() {
        let k = find_knee(&stepped()).unwrap();
        assert_eq!(
            (k.pages_before, k.pages_after, k.entries_estimate),
            (512, 1024, 512)
        );
        assert!(
            k.jump_ratio > 0.1 && k.jump_ratio < 0.13,
            "{}",
            k.jump_ratio
        );
        let (knee, verdict) = analyse(PageSize::Size4K, &stepped());
        assert!(knee.is_some());
        assert!(verdict.contains("between 512 and 1024 pages"), "{verdict}");
    }

    #[test]
    fn flat_noise_and_ramps_are_not_knees() {
        let flat = steps(&[
            (1, 100_000),
            (2, 100_400),
            (4, 99_800),
            (8, 100_200),
            (16, 100_100),
        ]);
        let e = find_knee(&flat).unwrap_err().to_string();
        assert!(
            e.contains("less than 3 %") || e.contains("does not rise"),
            "{e}"
        );
        let falling = steps(&[(1, 120_000), (2, 121_000), (4, 90_000), (8, 91_000)]);
        let e = find_knee(&falling).unwrap_err().to_string();
        assert!(e.contains("does not rise"), "{e}");
        let ramp: Vec<(u64, u64)> = (0..12).map(|i| (1u64 << i, 100_000 + i * 3_000)).collect();
        let e = find_knee(&steps(&ramp)).unwrap_err().to_string();
        assert!(e.contains("gradually") || e.contains("noise"), "{e}");
        let noisy = steps(&[
            (1, 100_000),
            (2, 130_000),
            (4, 95_000),
            (8, 128_000),
            (16, 97_000),
            (32, 131_000),
        ]);
        assert!(find_knee(&noisy).is_err());
        assert!(find_knee(&steps(&[(1, 1), (2, 2)]))
            .unwrap_err()
            .to_string()
            .contains("too few"));
    }

    /// The reasons read as the verdicts said them before they were typed.
    #[test]
    fn no_knee_reasons_read_as_before() {
        assert_eq!(
            NoKnee::TooSmall("e".into()).to_string(),
            "no knee: latency rises by less than 3 % (e)"
        );
        assert_eq!(
            NoKnee::WithinNoise("e".into()).to_string(),
            "no knee: the rise is within 3 x the noise (e)"
        );
        assert_eq!(
            NoKnee::TooFewSteps(2).to_string(),
            "2 steps are too few to find a knee (need 3 or more: raise --pages)"
        );
    }

    #[test]
    fn a_knee_spread_over_two_steps_is_still_found() {
        let s = steps(&[
            (128, 100_000),
            (256, 100_100),
            (512, 100_050),
            (1024, 106_000),
            (2048, 112_000),
            (4096, 112_100),
            (8192, 111_900),
        ]);
        let k = find_knee(&s).unwrap();
        assert!(k.pages_before == 512 || k.pages_before == 1024, "{k:?}");
    }
}
