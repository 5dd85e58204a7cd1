use super::*;

#[test]
fn slot_of_matches_the_shared_vectors() {
    for &(value, slot) in SLOT_VECTORS {
        assert_eq!(slot_of(value), slot, "slot_of({value})");
    }
}

#[test]
fn bounds_enclose_their_slot_and_tile_the_line() {
    assert_eq!(slot_lower_bound(0), 0);
    for slot in 0..HIST_SLOTS {
        let lower = slot_lower_bound(slot);
        assert_eq!(slot_of(lower), slot, "lower bound of {slot}");
        if let Some(upper) = slot_upper_bound(slot) {
            assert!(upper > lower);
            assert_eq!(slot_of(upper - 1), slot, "last value of {slot}");
            assert_eq!(slot_of(upper), slot + 1, "first value above {slot}");
        }
    }
    assert_eq!(slot_upper_bound(LAST_SLOT), None);
}

#[test]
fn a_slot_is_at_most_a_quarter_of_its_lower_bound_wide() {
    for slot in SUB_SLOTS..LAST_SLOT {
        let lower = slot_lower_bound(slot);
        let width = slot_upper_bound(slot).expect("bounded") - lower;
        assert!(width * 4 <= lower, "slot {slot}: [{lower}, +{width})");
    }
    for slot in 0..SUB_SLOTS {
        assert_eq!(
            slot_upper_bound(slot),
            Some(slot as u64 + 1),
            "exact slot {slot}"
        );
    }
}

#[test]
fn every_value_near_a_power_of_two_lands_in_the_slot_that_holds_it() {
    for bit in 0..64u32 {
        let power = 1u64 << bit;
        for v in [power - 1, power, power.saturating_add(1)] {
            let slot = slot_of(v);
            assert!(slot_lower_bound(slot) <= v, "{v} below its slot {slot}");
            if let Some(upper) = slot_upper_bound(slot) {
                assert!(v < upper, "{v} above its slot {slot}");
            }
        }
    }
}

#[test]
fn the_log2_view_folds_each_power_of_two() {
    let mut h = Histogram::default();
    for v in [0, 1, 2, 3, 5, 900, 1_000, 1_023, 1_024, 3 << 30, u64::MAX] {
        h.record(v);
    }
    let log2 = h.log2_slots();
    assert_eq!(log2[0], 2);
    assert_eq!(log2[1], 2);
    assert_eq!(log2[2], 1);
    assert_eq!(log2[9], 3);
    assert_eq!(log2[10], 1);
    assert_eq!(log2[LOG2_SLOTS - 1], 2);
    assert_eq!(log2.iter().sum::<u64>(), h.total());
    for v in [0u64, 1, 2, 7, 1_000, 65_536, 1 << 31, u64::MAX] {
        let mut one = Histogram::default();
        one.record(v);
        assert_eq!(one.log2_slots()[log2_slot_of(v)], 1, "log2 slot of {v}");
    }
}

#[test]
fn an_old_log2_histogram_spreads_over_its_sub_slots() {
    let mut log2 = [0u64; LOG2_SLOTS];
    log2[0] = 3;
    log2[10] = 6;
    log2[LOG2_SLOTS - 1] = 4;
    let h = Histogram::from_log2_slots(&log2);
    assert_eq!(h.total(), 13);
    assert_eq!(&h.slots()[0..2], &[2, 1]);
    let first = slot_of(1_024);
    assert_eq!(&h.slots()[first..first + SUB_SLOTS], &[2, 2, 1, 1]);
    assert_eq!(h.log2_slots(), log2);
    // The median of values spread over [1024, 2048) stays inside that power of two.
    let mut only = [0u64; LOG2_SLOTS];
    only[10] = 100;
    let median = Histogram::from_log2_slots(&only)
        .quantile(0.5)
        .expect("counted");
    assert!((1_024..2_048).contains(&median), "{median}");
}

#[test]
fn from_slots_pads_and_clamps() {
    let short = Histogram::from_slots(&[1, 2]);
    assert_eq!(short.total(), 3);
    assert_eq!(short.slots()[1], 2);
    let mut long = vec![0u64; HIST_SLOTS + 3];
    long[LAST_SLOT] = 1;
    long[HIST_SLOTS + 2] = 4;
    assert_eq!(Histogram::from_slots(&long).slots()[LAST_SLOT], 5);
    assert!(Histogram::from_slots(&[]).is_empty());
}

#[test]
fn since_subtracts_and_treats_backwards_as_reset() {
    let earlier = Histogram::from_slots(&[1, 2, 3]);
    let later = Histogram::from_slots(&[1, 5, 4, 1]);
    assert_eq!(later.since(&earlier), Histogram::from_slots(&[0, 3, 1, 1]));
    let reset = Histogram::from_slots(&[0, 1]);
    assert_eq!(reset.checked_since(&earlier), None);
    assert_eq!(reset.since(&earlier), reset);
}

#[test]
fn merge_adds_slotwise() {
    let mut a = Histogram::from_slots(&[1, 0, 2]);
    a.merge(&Histogram::from_slots(&[0, 4, 1]));
    assert_eq!(a, Histogram::from_slots(&[1, 4, 3]));
    let mut full = Histogram::from_slots(&[u64::MAX]);
    full.merge(&Histogram::from_slots(&[1]));
    assert_eq!(full.slots()[0], u64::MAX);
}

#[test]
fn a_quantile_is_the_middle_of_the_slot_holding_its_rank() {
    // 90 values in [1024, 1280), 9 in [4096, 5120), 1 in [2^20, 2^20 + 2^18).
    let mut h = Histogram::default();
    h.add(slot_of(1_024), 90);
    h.add(slot_of(4_096), 9);
    h.add(slot_of(1 << 20), 1);
    let p = h.percentiles().expect("not empty");
    assert_eq!(p.p50, 1_024 + 255 / 2);
    assert_eq!(p.p90, 1_024 + 255 / 2);
    assert_eq!(p.p99, 4_096 + 1_023 / 2);
    assert_eq!(p.p999, (1 << 20) + ((1 << 18) - 1) / 2);
    assert_eq!(h.quantile(0.0), Some(1_024 + 255 / 2));
    assert_eq!(h.max_bound(), Some((1 << 20) + (1 << 18)));
}

#[test]
fn small_values_are_exact() {
    let mut h = Histogram::default();
    for v in [0, 1, 1, 2, 3] {
        h.record(v);
    }
    assert_eq!(h.quantile(0.0), Some(0));
    assert_eq!(h.quantile(0.5), Some(1));
    assert_eq!(h.quantile(1.0), Some(3));
}

/// A deterministic generator (splitmix64): the distributions are the same on every run.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    fn normal(&mut self) -> f64 {
        (-2.0 * self.unit().ln()).sqrt() * (std::f64::consts::TAU * self.unit()).cos()
    }
}

/// Latency-like samples, in ns: what DMA maps, IOTLB flushes and deferred timers look like.
fn synthetic_distributions() -> Vec<(&'static str, Vec<u64>)> {
    let mut random = Random(0x1f2e_3d4c);
    let n = 20_000;
    let mut draw = |f: &mut dyn FnMut(&mut Random) -> f64| -> Vec<u64> {
        (0..n)
            .map(|_| f(&mut random).round().max(0.0) as u64)
            .collect()
    };
    vec![
        (
            "uniform 200ns-3us",
            draw(&mut |r| 200.0 + 2_800.0 * r.unit()),
        ),
        (
            "exponential mean 1.5us",
            draw(&mut |r| -1_500.0 * r.unit().ln()),
        ),
        (
            "lognormal median 800ns",
            draw(&mut |r| 800.0 * (0.9 * r.normal()).exp()),
        ),
        (
            "bimodal 400ns / 40us (strict flush)",
            draw(&mut |r| {
                if r.unit() < 0.9 {
                    400.0 + 50.0 * r.normal()
                } else {
                    40_000.0 + 5_000.0 * r.normal()
                }
            }),
        ),
        (
            "pareto tail from 1us",
            draw(&mut |r| 1_000.0 / r.unit().powf(1.0 / 1.5)),
        ),
        ("constant 1234ns", draw(&mut |_| 1_234.0)),
        ("tiny 0-12ns", draw(&mut |r| 12.0 * r.unit())),
        ("timer 4ms-12ms", draw(&mut |r| 4e6 + 8e6 * r.unit())),
    ]
}

/// The nearest-rank percentile of sorted values: the `ceil(q * n)`-th smallest.
fn exact_quantile(sorted: &[u64], q: f64) -> u64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[test]
fn percentiles_are_within_an_eighth_of_exact_on_synthetic_distributions() {
    for (name, mut values) in synthetic_distributions() {
        let mut h = Histogram::default();
        for &v in &values {
            h.record(v);
        }
        values.sort_unstable();
        for q in [0.0, 0.01, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0] {
            let exact = exact_quantile(&values, q);
            let estimate = h.quantile(q).expect("not empty");
            let error = estimate.abs_diff(exact) as f64 / exact.max(1) as f64;
            assert!(
                error <= 0.125,
                "{name}: q={q}: estimate {estimate} vs exact {exact} ({:.1}%)",
                error * 100.0
            );
        }
    }
}

#[test]
fn the_last_slot_reports_its_lower_bound_and_an_unbounded_max() {
    let mut h = Histogram::default();
    h.record(10_000_000_000);
    assert_eq!(h.quantile(0.5), Some(7 << 30));
    assert_eq!(h.max_bound(), Some(u64::MAX));
}

#[test]
fn an_empty_histogram_has_no_percentiles() {
    let h = Histogram::default();
    assert_eq!(h.quantile(0.5), None);
    assert_eq!(h.percentiles(), None);
    assert_eq!(h.max_bound(), None);
}

#[test]
fn serializes_as_a_plain_array_of_every_slot() {
    let h = Histogram::from_slots(&[7]);
    let json = serde_json::to_value(h).expect("serializes");
    let array = json.as_array().expect("an array");
    assert_eq!(array.len(), HIST_SLOTS);
    assert_eq!(array[0], 7);
    let back: Histogram = serde_json::from_value(json).expect("reads back");
    assert_eq!(back, h);
    let short = serde_json::from_value::<Histogram>(serde_json::json!([1, 2]));
    assert!(short.is_err());
}
