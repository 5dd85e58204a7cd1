//! A log-linear (HDR) latency histogram: each power of two is cut into 2^[`SUB_BITS`] equal
//! buckets, so a bucket is at most 1/128 (0.78 %) of its values wide. Log2 buckets (the
//! probes' histograms) are too coarse for a tail CCDF, where a step of a few percent is the
//! signal.
//!
//! The counts live in an [`hdrhistogram::Histogram`]; beside it we keep the exact minimum,
//! maximum and sum, which the summary reports to the nanosecond.

use hdrhistogram::Histogram;
pub use iommutop_vfio_nvme_results::{CcdfPoint, HistogramBuckets, LatencySummary};
use serde::{Deserialize, Serialize};

/// Sub-bucket bits: 128 buckets per power of two (values below 256 are exact).
pub const SUB_BITS: u32 = 7;
/// The HDR precision that gives [`SUB_BITS`]: two significant figures need unit resolution up
/// to 200, so 256 sub-buckets, the upper half of which is repeated at each power of two.
const SIGNIFICANT_FIGURES: u8 = 2;

/// Latencies in nanoseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyHistogram {
    counts: Histogram<u64>,
    min: u64,
    max: u64,
    sum: u128,
}

impl Default for LatencyHistogram {
    fn default() -> LatencyHistogram {
        LatencyHistogram::new()
    }
}

/// Counts covering every u64, so recording and adding never leave the range.
fn every_u64() -> Histogram<u64> {
    match Histogram::new_with_max(u64::MAX, SIGNIFICANT_FIGURES) {
        Ok(counts) => counts,
        Err(e) => unreachable!("1..=u64::MAX at {SIGNIFICANT_FIGURES} figures is valid: {e}"),
    }
}

impl LatencyHistogram {
    pub fn new() -> LatencyHistogram {
        LatencyHistogram {
            counts: every_u64(),
            min: u64::MAX,
            max: 0,
            sum: 0,
        }
    }

    pub fn record(&mut self, v: u64) {
        self.counts.saturating_record(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += u128::from(v);
    }

    pub fn merge(&mut self, other: &LatencyHistogram) {
        for bucket in other.counts.iter_recorded() {
            self.counts
                .saturating_record_n(bucket.value_iterated_to(), bucket.count_at_value());
        }
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum += other.sum;
    }

    pub fn total(&self) -> u64 {
        self.counts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    pub fn min(&self) -> Option<u64> {
        (!self.is_empty()).then_some(self.min)
    }

    pub fn max(&self) -> Option<u64> {
        (!self.is_empty()).then_some(self.max)
    }

    /// The sum of every value recorded, in ns.
    pub fn sum(&self) -> u128 {
        self.sum
    }

    pub fn mean(&self) -> Option<f64> {
        (!self.is_empty()).then(|| self.sum as f64 / self.total() as f64)
    }

    /// The value at quantile `q` (0..=1): the highest value of the bucket holding the
    /// ceil(q·n)-th smallest sample, clamped to the observed min and max.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        (!self.is_empty()).then(|| {
            self.counts
                .value_at_quantile(q.clamp(0.0, 1.0))
                .clamp(self.min, self.max)
        })
    }

    pub fn summary(&self) -> Option<LatencySummary> {
        Some(LatencySummary {
            count: self.total(),
            min_ns: self.min()?,
            mean_ns: self.mean()?,
            p50_ns: self.quantile(0.50)?,
            p90_ns: self.quantile(0.90)?,
            p99_ns: self.quantile(0.99)?,
            p999_ns: self.quantile(0.999)?,
            max_ns: self.max()?,
        })
    }

    /// The CCDF at every non-empty bucket: (bucket's highest value, share of samples above it).
    /// The last point is (max, 0).
    pub fn ccdf(&self) -> Vec<CcdfPoint> {
        let total = self.total();
        let mut seen = 0u64;
        self.buckets()
            .map(|(_, high, count)| {
                seen += count;
                CcdfPoint {
                    latency_ns: high.clamp(self.min, self.max),
                    ccdf: (total - seen) as f64 / total as f64,
                }
            })
            .collect()
    }

    /// The non-empty buckets with the exact count, extremes and sum: the histogram as reports
    /// hold it.
    pub fn buckets_reported(&self) -> HistogramBuckets {
        HistogramBuckets {
            sub_bucket_bits: SUB_BITS,
            count: self.total(),
            min_ns: self.min(),
            max_ns: self.max(),
            sum_ns: self.sum(),
            buckets: self.buckets().map(|(l, h, c)| [l, h, c]).collect(),
        }
    }

    /// Non-empty buckets as (lowest value, highest value, count), lowest first.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.counts.iter_recorded().map(|bucket| {
            let low = self.counts.lowest_equivalent(bucket.value_iterated_to());
            // Not `highest_equivalent`: it stops one short of u64::MAX in the last bucket.
            let high = low + (self.counts.equivalent_range(low) - 1);
            (low, high, bucket.count_at_value())
        })
    }
}

/// Serialized as the report holds it: only non-empty buckets, as `[low_ns, high_ns, count]`.
impl Serialize for LatencyHistogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.buckets_reported().serialize(s)
    }
}

impl<'de> Deserialize<'de> for LatencyHistogram {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<LatencyHistogram, D::Error> {
        let data = HistogramBuckets::deserialize(d)?;
        if data.sub_bucket_bits != SUB_BITS {
            return Err(serde::de::Error::custom(format!(
                "histogram with {} sub-bucket bits, this build reads {SUB_BITS}",
                data.sub_bucket_bits
            )));
        }
        let mut h = LatencyHistogram::new();
        for [low, _, count] in data.buckets {
            h.counts.saturating_record_n(low, count);
        }
        if h.total() != data.count {
            return Err(serde::de::Error::custom(format!(
                "histogram says count {} but its buckets hold {}",
                data.count,
                h.total()
            )));
        }
        h.min = data.min_ns.unwrap_or(u64::MAX);
        h.max = data.max_ns.unwrap_or(0);
        h.sum = data.sum_ns;
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buckets_of(values: &[u64]) -> Vec<(u64, u64, u64)> {
        let mut h = LatencyHistogram::new();
        for &v in values {
            h.record(v);
        }
        h.buckets().collect()
    }

    #[test]
    fn buckets_are_narrow() {
        for v in [200u64, 1_000, 12_345, 87_654_321, 1 << 40, u64::MAX] {
            let [(low, high, 1)] = buckets_of(&[v])[..] else {
                panic!("{v} is in one bucket");
            };
            assert!((low..=high).contains(&v), "{v} in [{low}, {high}]");
            let width = high - low + 1;
            assert!(width as f64 / low as f64 <= 1.0 / 128.0, "{v}");
        }
        for v in 0..256 {
            assert_eq!(buckets_of(&[v]), [(v, v, 1)], "exact below 256");
        }
    }

    /// Reports written before hdrhistogram held these `[low, high]` pairs: readers that plot
    /// them must see the same bucket edges.
    #[test]
    fn bucket_edges_match_earlier_reports() {
        for (v, low, high) in [
            (256u64, 256u64, 257u64),
            (511, 510, 511),
            (512, 512, 515),
            (70_001, 69_632, 70_143),
            (9_999_999, 9_961_472, 10_027_007),
            (1 << 40, 1 << 40, (1 << 40) + (1 << 33) - 1),
        ] {
            assert_eq!(buckets_of(&[v]), [(low, high, 1)], "{v}");
        }
    }

    #[test]
    fn percentiles_of_a_uniform_run() {
        let mut h = LatencyHistogram::new();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        let s = h.summary().unwrap();
        assert_eq!(s.count, 10_000);
        assert_eq!(s.min_ns, 1000);
        assert_eq!(s.max_ns, 10_000_000);
        for (got, want) in [
            (s.p50_ns, 5_000_000u64),
            (s.p90_ns, 9_000_000),
            (s.p99_ns, 9_900_000),
            (s.p999_ns, 9_990_000),
        ] {
            let err = (got as f64 - want as f64).abs() / want as f64;
            assert!(err < 0.01, "got {got}, want {want}");
        }
        assert!((s.mean_ns - 5_000_500.0).abs() < 1.0);
    }

    #[test]
    fn percentiles_below_256_are_exact() {
        let mut h = LatencyHistogram::new();
        for v in 1..=200u64 {
            h.record(v);
        }
        assert_eq!(h.quantile(0.5), Some(100));
        assert_eq!(h.quantile(0.9), Some(180));
        assert_eq!(h.quantile(0.99), Some(198));
        assert_eq!(h.quantile(1.0), Some(200));
    }

    #[test]
    fn tail_is_seen_in_the_ccdf() {
        let mut h = LatencyHistogram::new();
        for _ in 0..999 {
            h.record(100_000);
        }
        h.record(5_000_000);
        let c = h.ccdf();
        assert_eq!(c.len(), 2);
        assert!((c[0].ccdf - 0.001).abs() < 1e-12);
        assert_eq!(
            c[1],
            CcdfPoint {
                latency_ns: 5_000_000,
                ccdf: 0.0
            }
        );
        assert_eq!(h.quantile(0.999), Some(h.quantile(0.5).unwrap()));
        assert_eq!(h.quantile(1.0), Some(5_000_000));
    }

    #[test]
    fn merge_adds() {
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        a.record(10);
        b.record(1_000_000);
        b.record(1_000_000);
        a.merge(&b);
        assert_eq!(a.total(), 3);
        assert_eq!(a.min(), Some(10));
        assert_eq!(a.max(), Some(1_000_000));
        assert_eq!(a.quantile(0.5), Some(1_000_000));
        assert!((a.mean().unwrap() - 2_000_010.0 / 3.0).abs() < 1e-6);
    }

    #[test]
    fn empty_has_no_summary() {
        let h = LatencyHistogram::new();
        assert!(h.summary().is_none());
        assert!(h.quantile(0.5).is_none());
        assert!(h.ccdf().is_empty());
    }

    #[test]
    fn json_round_trip_keeps_every_count() {
        let mut h = LatencyHistogram::new();
        for v in [5, 130, 70_000, 70_001, 9_999_999] {
            h.record(v);
        }
        let json = serde_json::to_string(&h).unwrap();
        let back: LatencyHistogram = serde_json::from_str(&json).unwrap();
        assert_eq!(back, h);
    }

    #[test]
    fn json_with_a_count_its_buckets_do_not_hold_is_refused() {
        let json = r#"{"sub_bucket_bits":7,"count":3,"min_ns":5,"max_ns":5,"sum_ns":5,
                       "buckets":[[5,5,1]]}"#;
        let err = serde_json::from_str::<LatencyHistogram>(json).unwrap_err();
        assert!(err.to_string().contains("count 3"), "{err}");
    }
}
