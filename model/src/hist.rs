//! Log-linear latency histograms, slot for slot the same as the BPF side (`ebpf/lib/bits.bpf.h`).
//!
//! Every power of two is split into [`SUB_SLOTS`] equal slots. Values below `SUB_SLOTS` get a slot
//! each (slot `v` holds exactly `v`); above, a value `v` with `2^e <= v < 2^(e+1)` falls into
//! sub-slot `(v >> (e - SUB_BITS)) & (SUB_SLOTS - 1)` of its power of two, whose slots start at
//! `(e - SUB_BITS + 1) * SUB_SLOTS`. With 4 sub-slots a slot is at most a quarter of its lower
//! bound wide; the last slot, [`LAST_SLOT`], holds everything from `7 * 2^30` ns (about 7.5 s) up.
//!
//! # Percentile estimates and their error
//! A histogram only knows which slot a value fell into. A percentile is the slot that holds the
//! wanted rank (nearest rank: the `ceil(q * n)`-th smallest value), estimated by the middle of
//! the slot. The true value lies in the same slot, so the estimate is off by at most half a slot:
//! `|estimate - true| <= width / 2 <= lower / 8 <= true / 8`, within **12.5%** (exact below
//! [`SUB_SLOTS`] ns). In the last slot the upper bound is unknown, so the estimate is the slot's
//! lower bound, a lower bound of the truth.
//!
//! Reports keep the log2 view too (`hist`, 32 slots, [`Histogram::log2_slots`]) for readers
//! written before the finer slots, and for Prometheus buckets; a report that has only the log2
//! view reads back with each power of two's count spread evenly over its sub-slots, so its
//! percentiles stay as before: within a factor of two.

use iommutop_abi::hist::HIST_SLOTS;
use serde::{Deserialize, Serialize};

pub use iommutop_abi::hist::{
    log2_slot_lower_bound, log2_slot_of, log2_slot_upper_bound, slot_lower_bound, slot_of,
    slot_upper_bound, LAST_SLOT, LOG2_SLOTS, SLOT_VECTORS, SUB_BITS, SUB_SLOTS,
};

/// Counts per log-linear slot of nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Histogram {
    #[serde(with = "serde_big_array")]
    slots: [u64; HIST_SLOTS],
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            slots: [0; HIST_SLOTS],
        }
    }
}

/// serde implements arrays only up to 32 elements: a histogram is a plain JSON array of its slots.
mod serde_big_array {
    use iommutop_abi::hist::HIST_SLOTS;
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(slots: &[u64; HIST_SLOTS], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(slots.iter())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u64; HIST_SLOTS], D::Error> {
        let counts = Vec::<u64>::deserialize(d)?;
        let len = counts.len();
        counts
            .try_into()
            .map_err(|_| D::Error::invalid_length(len, &"one count per histogram slot"))
    }
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

    /// A histogram from the log2 view of an older report: each power of two's count is spread
    /// evenly over the slots that split it (the first ones take the remainder).
    pub fn from_log2_slots(counts: &[u64]) -> Histogram {
        let mut hist = Histogram::default();
        for (log2_slot, &count) in counts.iter().enumerate() {
            let lower = log2_slot_lower_bound(log2_slot);
            let first = slot_of(lower);
            let last = match log2_slot_upper_bound(log2_slot) {
                Some(upper) => slot_of(upper - 1),
                None => first + SUB_SLOTS - 1,
            };
            let slots = (last - first + 1) as u64;
            for (i, slot) in (first..=last).enumerate() {
                let share = count / slots + u64::from((i as u64) < count % slots);
                hist.add(slot, share);
            }
        }
        hist
    }

    /// Per-slot counts, slot 0 first.
    pub fn slots(&self) -> &[u64; HIST_SLOTS] {
        &self.slots
    }

    /// The same counts in [`LOG2_SLOTS`] powers of two (every slot lies inside one).
    pub fn log2_slots(&self) -> [u64; LOG2_SLOTS] {
        let mut log2 = [0u64; LOG2_SLOTS];
        for (slot, &count) in self.slots.iter().enumerate() {
            let into = &mut log2[log2_slot_of(slot_lower_bound(slot))];
            *into = into.saturating_add(count);
        }
        log2
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

    /// The value below which a fraction `q` (0..=1) of the values lie: the middle of the slot
    /// holding the nearest rank `ceil(q * n)` (the smallest value's slot for `q` = 0); `None`
    /// for an empty histogram.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut below = 0u64;
        for (slot, &count) in self.slots.iter().enumerate() {
            below = below.saturating_add(count);
            if count > 0 && below >= rank {
                return Some(slot_middle(slot));
            }
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

/// The middle of a slot's whole-nanosecond values (its lower bound for the last slot).
fn slot_middle(slot: usize) -> u64 {
    let lower = slot_lower_bound(slot);
    match slot_upper_bound(slot) {
        Some(upper) => lower + (upper - 1 - lower) / 2,
        None => lower,
    }
}

#[cfg(test)]
mod tests;
