//! `--threshold` expressions judged against the noise, where the noise is measurable.

use super::*;

fn threshold(expr: &str, a: &Run1, b: &Run1) -> Evaluation {
    Threshold::parse(expr)
        .unwrap_or_else(|e| panic!("{expr}: {e}"))
        .evaluate(&report(a), &report(b))
        .unwrap_or_else(|e| panic!("{expr}: {e}"))
}

#[test]
fn a_beyond_noise_threshold_fails_on_a_drop_the_noise_cannot_explain() {
    let expr = "workload.transactions_per_s < -5% beyond-noise";
    let drop = threshold(expr, &steady(800.0), &steady(700.0));
    assert!(drop.crossed, "{}", drop.sentence());
    assert_eq!(drop.numbers.beyond_noise, Some(true));
    assert!(!drop.observed.contains("noise"), "{}", drop.observed);
}

#[test]
fn a_beyond_noise_threshold_holds_when_the_drop_is_within_the_noise() {
    // Emulated TCP_RR seconds differ by tens of percent: 10% fewer is not a measured change.
    let slower = Run1 {
        tps: 692.0,
        seconds: noisy().iter().map(|s| s * 0.9).collect(),
        ..translated_612()
    };
    let plain = threshold(
        "workload.transactions_per_s < -5%",
        &translated_612(),
        &slower,
    );
    assert!(plain.crossed, "{}", plain.sentence());
    let judged = threshold(
        "workload.transactions_per_s < -5% beyond-noise",
        &translated_612(),
        &slower,
    );
    assert_eq!(judged.numbers.beyond_noise, Some(false));
    assert!(!judged.crossed, "{}", judged.sentence());
    assert!(
        judged.observed.contains("within the noise (±"),
        "{}",
        judged.observed
    );
}

#[test]
fn a_beyond_noise_threshold_without_measurable_noise_is_judged_on_the_change() {
    let one_second = |tps: f64| Run1 {
        tps,
        seconds: vec![tps],
        ..translated_612()
    };
    let judged = threshold(
        "workload.transactions_per_s < -5% beyond-noise",
        &one_second(800.0),
        &one_second(700.0),
    );
    assert_eq!(judged.numbers.beyond_noise, None);
    assert!(judged.crossed, "{}", judged.sentence());
    assert!(
        judged.observed.contains("noise not measurable"),
        "{}",
        judged.observed
    );
}

#[test]
fn beyond_noise_applies_only_to_relative_workload_thresholds() {
    for expr in [
        "workload.transactions_per_s < 500 beyond-noise",
        "device[eth0].cpu_share > 10% beyond-noise",
    ] {
        let error = Threshold::parse(expr).expect_err(expr).to_string();
        assert!(error.contains("beyond-noise applies to"), "{error}");
        assert!(error.starts_with(&format!("`{expr}`")), "{error}");
    }
    assert!(Threshold::parse("workload.transactions_per_s < -2%beyond-noise").is_err());
}
