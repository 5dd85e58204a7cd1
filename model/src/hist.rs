//! log2 latency histograms, slot for slot the same as the BPF side (`ebpf/lib/bits.bpf.h`).
//!
//! Slot `i` holds values `v` with `2^i <= v < 2^(i+1)`; slot 0 also holds 0 (so it is `[0, 2)`),
//! and the last slot holds everything from `2^31` ns (about 2.1 s) up.
//!
//! # Percentile estimates and their error
//! A histogram only knows which slot a value fell into. A percentile is estimated by finding the
//! slot that holds the wanted rank and interpolating linearly between the slot's bounds `2^i` and
//! `2^(i+1)`, as if values were spread evenly inside the slot. The true value lies in the same slot
//! as the estimate, so for slots `i >= 1` the estimate is within a factor of two of the truth
//! (`|estimate - true| < 2^i <= true`); in slot 0 both lie in `[0, 2)` ns. In the last slot the
//! upper bound is unknown, so the estimate is the slot's lower bound `2^31`, a lower bound of the truth.

use crate::sample::HIST_SLOTS;
use serde::{Deserialize, Serialize};

/// The last slot: it takes every value from `2^31` up.
pub const LAST_SLOT: usize = HIST_SLOTS - 1;

/// Inputs and the slot they fall into. The BPF side is tested against the same table, so that
/// `iommutop_hist_slot()` in C and [`slot_of`] in Rust cannot drift apart.
pub const SLOT_VECTORS: &[(u64, usize)] = &[
    (0, 0),
    (1, 0),
    (2, 1),
    (3, 1),
    (4, 2),
    (5, 2),
    (7, 2),
    (8, 3),
    (15, 3),
    (16, 4),
    (255, 7),
    (256, 8),
    (1_000, 9),
    (1_023, 9),
    (1_024, 10),
    (1_025, 10),
    (65_535, 15),
    (65_536, 16),
    (1_000_000, 19),
    (1_000_000_000, 29),
    ((1 << 30) - 1, 29),
    (1 << 30, 30),
    ((1 << 31) - 1, 30),
    (1 << 31, 31),
    ((1 << 32) - 1, 31),
    (1 << 32, 31),
    (1 << 40, 31),
    (1 << 63, 31),
    (u64::MAX, 31),
];

/// The slot a value falls into: `floor(log2(v))`, 0 for `v <= 1`, clamped to [`LAST_SLOT`].
pub fn slot_of(v: u64) -> usize {
    if v <= 1 {
        return 0;
    }
    let log2 = (u64::BITS - 1 - v.leading_zeros()) as usize;
    log2.min(LAST_SLOT)
}

/// Smallest value slot `slot` holds (0 for slot 0).
pub fn slot_lower_bound(slot: usize) -> u64 {
    if slot == 0 {
        0
    } else {
        1u64 << slot.min(LAST_SLOT)
    }
}

/// First value above slot `slot`, or `None` for the last slot, which has no upper bound.
pub fn slot_upper_bound(slot: usize) -> Option<u64> {
    (slot < LAST_SLOT).then(|| 1u64 << (slot + 1))
}

/// Counts per log2 slot of nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Histogram {
    slots: [u64; HIST_SLOTS],
}

/// The percentiles iommutop reports, in ns (estimates, see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Percentiles {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
}

impl Histogram {
    /// A histogram from per-slot counts as read from the kernel. Missing slots count 0; slots past
    /// the last (a longer array than [`HIST_SLOTS`]) are added to the last slot, like the kernel clamps.
    pub fn from_slots(counts: &[u64]) -> Histogram {
        let mut hist = Histogram::default();
        for (slot, &count) in counts.iter().enumerate() {
            hist.add(slot, count);
        }
        hist
    }

    /// Per-slot counts, slot 0 first.
    pub fn slots(&self) -> &[u64; HIST_SLOTS] {
        &self.slots
    }

    /// Counts one value.
    pub fn record(&mut self, value_ns: u64) {
        self.add(slot_of(value_ns), 1);
    }

    /// Adds `count` values to `slot` (clamped to the last slot).
    pub fn add(&mut self, slot: usize, count: u64) {
        let slot = slot.min(LAST_SLOT);
        self.slots[slot] = self.slots[slot].saturating_add(count);
    }

    /// Number of values counted.
    pub fn total(&self) -> u64 {
        self.slots
            .iter()
            .fold(0u64, |sum, &c| sum.saturating_add(c))
    }

    pub fn is_empty(&self) -> bool {
        self.slots.iter().all(|&c| c == 0)
    }

    /// Adds another histogram's counts to this one.
    pub fn merge(&mut self, other: &Histogram) {
        for (slot, &count) in other.slots.iter().enumerate() {
            self.add(slot, count);
        }
    }

    /// What was counted between `earlier` and `self`, two reads of the same cumulative histogram.
    /// Returns `None` when a slot went backwards (the counters were reset in between): the caller
    /// decides what a reset means.
    pub fn checked_since(&self, earlier: &Histogram) -> Option<Histogram> {
        let mut delta = Histogram::default();
        for (slot, (&now, &before)) in self.slots.iter().zip(earlier.slots.iter()).enumerate() {
            delta.slots[slot] = now.checked_sub(before)?;
        }
        Some(delta)
    }

    /// What was counted between `earlier` and `self`; if the counters were reset in between,
    /// everything in `self` (counted since the reset).
    pub fn since(&self, earlier: &Histogram) -> Histogram {
        self.checked_since(earlier).unwrap_or(*self)
    }

    /// The value below which a fraction `q` (0..=1) of the values lie, estimated by linear
    /// interpolation inside the slot holding that rank; `None` for an empty histogram.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
        let rank = q * total as f64;
        let mut below = 0u64;
        for (slot, &count) in self.slots.iter().enumerate() {
            if count == 0 {
                continue;
            }
            if (below + count) as f64 >= rank {
                let lower = slot_lower_bound(slot);
                let Some(upper) = slot_upper_bound(slot) else {
                    return Some(lower);
                };
                let within = ((rank - below as f64) / count as f64).clamp(0.0, 1.0);
                return Some(lower + ((upper - lower) as f64 * within).round() as u64);
            }
            below += count;
        }
        // Unreachable with a consistent total; the highest slot's bound is the honest answer.
        self.max_bound()
    }

    /// p50, p90, p99 and p99.9; `None` for an empty histogram.
    pub fn percentiles(&self) -> Option<Percentiles> {
        Some(Percentiles {
            p50: self.quantile(0.50)?,
            p90: self.quantile(0.90)?,
            p99: self.quantile(0.99)?,
            p999: self.quantile(0.999)?,
        })
    }

    /// A bound every counted value is below: the upper bound of the highest non-empty slot
    /// (`u64::MAX` when that is the unbounded last slot); `None` for an empty histogram.
    pub fn max_bound(&self) -> Option<u64> {
        let highest = self.slots.iter().rposition(|&c| c > 0)?;
        Some(slot_upper_bound(highest).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_of_matches_the_shared_vectors() {
        for &(value, slot) in SLOT_VECTORS {
            assert_eq!(slot_of(value), slot, "slot_of({value})");
        }
    }

    #[test]
    fn every_power_of_two_starts_its_slot() {
        for i in 1..64u32 {
            let v = 1u64 << i;
            assert_eq!(slot_of(v), (i as usize).min(LAST_SLOT));
            assert_eq!(slot_of(v - 1), ((i - 1) as usize).min(LAST_SLOT));
        }
    }

    #[test]
    fn bounds_enclose_their_slot() {
        for slot in 0..HIST_SLOTS {
            let lower = slot_lower_bound(slot);
            assert_eq!(slot_of(lower), slot);
            if let Some(upper) = slot_upper_bound(slot) {
                assert_eq!(slot_of(upper - 1), slot);
                assert_eq!(slot_of(upper), slot + 1);
            }
        }
        assert_eq!(slot_upper_bound(LAST_SLOT), None);
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
    fn quantiles_interpolate_inside_the_slot() {
        // 100 values in [1024, 2048): the median is the middle of the slot.
        let mut h = Histogram::default();
        h.add(10, 100);
        assert_eq!(h.quantile(0.5), Some(1536));
        assert_eq!(h.quantile(0.0), Some(1024));
        assert_eq!(h.quantile(1.0), Some(2048));
        assert_eq!(h.quantile(0.99), Some(2038));
    }

    #[test]
    fn quantiles_walk_across_slots() {
        // 90 values in slot 8 [256, 512), 9 in slot 12 [4096, 8192), 1 in slot 20.
        let mut h = Histogram::default();
        h.add(8, 90);
        h.add(12, 9);
        h.add(20, 1);
        let p = h.percentiles().expect("not empty");
        assert_eq!(p.p50, 256 + (256.0_f64 * 50.0 / 90.0).round() as u64);
        assert_eq!(p.p90, 512);
        assert_eq!(p.p99, 8192);
        assert_eq!(
            p.p999,
            (1 << 20) + ((1u64 << 20) as f64 * 0.9).round() as u64
        );
        assert_eq!(h.max_bound(), Some(1 << 21));
    }

    #[test]
    fn estimates_stay_within_a_factor_of_two() {
        let values = [3u64, 17, 900, 1_500, 70_000, 123_456_789];
        for &v in &values {
            let mut h = Histogram::default();
            h.record(v);
            for q in [0.0, 0.5, 0.99, 1.0] {
                let estimate = h.quantile(q).expect("one value") as f64;
                let ratio = estimate / v as f64;
                assert!(
                    (0.5..=2.0).contains(&ratio),
                    "v={v} q={q} estimate={estimate}"
                );
            }
        }
    }

    #[test]
    fn last_slot_reports_its_lower_bound_and_unbounded_max() {
        let mut h = Histogram::default();
        h.record(5_000_000_000);
        assert_eq!(h.quantile(0.5), Some(1 << 31));
        assert_eq!(h.max_bound(), Some(u64::MAX));
    }

    #[test]
    fn empty_histogram_has_no_percentiles() {
        let h = Histogram::default();
        assert_eq!(h.quantile(0.5), None);
        assert_eq!(h.percentiles(), None);
        assert_eq!(h.max_bound(), None);
    }

    #[test]
    fn serializes_as_a_plain_array() {
        let h = Histogram::from_slots(&[7]);
        let json = serde_json::to_value(h).expect("serializes");
        let array = json.as_array().expect("an array");
        assert_eq!(array.len(), HIST_SLOTS);
        assert_eq!(array[0], 7);
        let back: Histogram = serde_json::from_value(json).expect("reads back");
        assert_eq!(back, h);
    }
}
