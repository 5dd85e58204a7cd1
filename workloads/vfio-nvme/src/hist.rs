//! A log-linear (HDR-style) latency histogram: each power of two is cut into 2^[`SUB_BITS`]
//! equal buckets, so a bucket is at most 1/128 (0.78 %) of its values wide. Log2 buckets
//! (the probes' histograms) are too coarse for a tail CCDF, where a step of a few percent is the
//! signal.

use serde::{Deserialize, Serialize};

/// Sub-bucket bits: 128 buckets per power of two.
pub const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;
/// Buckets needed to cover every u64.
pub const BUCKETS: usize = ((64 - SUB_BITS as usize) + 1) * (1 << SUB_BITS);

/// The bucket of a value (ns).
pub fn bucket_of(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let high_bit = 63 - v.leading_zeros();
    let shift = high_bit - SUB_BITS;
    let mantissa = v >> shift; // in [SUB, 2 SUB)
    ((u64::from(shift) + 1) * SUB + (mantissa - SUB)) as usize
}

/// The smallest value in a bucket.
pub fn bucket_low(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i;
    }
    let shift = i / SUB - 1;
    let mantissa = i % SUB + SUB;
    mantissa << shift
}

/// The largest value in a bucket.
pub fn bucket_high(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i;
    }
    let shift = i / SUB - 1;
    bucket_low(i as usize).saturating_add((1u64 << shift) - 1)
}

/// Latencies in nanoseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyHistogram {
    counts: Vec<u64>,
    total: u64,
    min: u64,
    max: u64,
    sum: u128,
}

impl Default for LatencyHistogram {
    fn default() -> LatencyHistogram {
        LatencyHistogram::new()
    }
}

/// The percentiles reported for every run and thread, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

/// One point of the complementary CDF: the share of I/Os slower than `latency_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CcdfPoint {
    pub latency_ns: u64,
    pub ccdf: f64,
}

impl LatencyHistogram {
    pub fn new() -> LatencyHistogram {
        LatencyHistogram {
            counts: vec![0; BUCKETS],
            total: 0,
            min: u64::MAX,
            max: 0,
            sum: 0,
        }
    }

    pub fn record(&mut self, v: u64) {
        if let Some(c) = self.counts.get_mut(bucket_of(v)) {
            *c += 1;
        }
        self.total += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += u128::from(v);
    }

    pub fn merge(&mut self, other: &LatencyHistogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum += other.sum;
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    pub fn min(&self) -> Option<u64> {
        (self.total > 0).then_some(self.min)
    }

    pub fn max(&self) -> Option<u64> {
        (self.total > 0).then_some(self.max)
    }

    pub fn mean(&self) -> Option<f64> {
        (self.total > 0).then(|| self.sum as f64 / self.total as f64)
    }

    /// The value at quantile `q` (0..=1): the highest value of the bucket holding the
    /// ceil(q·n)-th smallest sample, clamped to the observed min and max.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if c > 0 && seen >= rank {
                return Some(bucket_high(i).clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    pub fn summary(&self) -> Option<LatencySummary> {
        Some(LatencySummary {
            count: self.total,
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
        let mut points = Vec::new();
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            seen += c;
            points.push(CcdfPoint {
                latency_ns: bucket_high(i).clamp(self.min, self.max),
                ccdf: (self.total - seen) as f64 / self.total as f64,
            });
        }
        points
    }

    /// Non-empty buckets as (lowest value, highest value, count).
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| (bucket_low(i), bucket_high(i), c))
    }
}

/// The serialized form: only non-empty buckets, as `[low_ns, high_ns, count]`.
#[derive(Serialize, Deserialize)]
struct HistogramData {
    sub_bucket_bits: u32,
    count: u64,
    min_ns: Option<u64>,
    max_ns: Option<u64>,
    sum_ns: u128,
    buckets: Vec<[u64; 3]>,
}

impl Serialize for LatencyHistogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        HistogramData {
            sub_bucket_bits: SUB_BITS,
            count: self.total,
            min_ns: self.min(),
            max_ns: self.max(),
            sum_ns: self.sum,
            buckets: self.buckets().map(|(l, h, c)| [l, h, c]).collect(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for LatencyHistogram {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<LatencyHistogram, D::Error> {
        let data = HistogramData::deserialize(d)?;
        if data.sub_bucket_bits != SUB_BITS {
            return Err(serde::de::Error::custom(format!(
                "histogram with {} sub-bucket bits, this build reads {SUB_BITS}",
                data.sub_bucket_bits
            )));
        }
        let mut h = LatencyHistogram::new();
        for [low, _, count] in data.buckets {
            if let Some(c) = h.counts.get_mut(bucket_of(low)) {
                *c += count;
            }
        }
        h.total = data.count;
        h.min = data.min_ns.unwrap_or(u64::MAX);
        h.max = data.max_ns.unwrap_or(0);
        h.sum = data.sum_ns;
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_invert() {
        for i in 0..BUCKETS - 1 {
            assert_eq!(bucket_high(i) + 1, bucket_low(i + 1), "bucket {i}");
            assert_eq!(bucket_of(bucket_low(i)), i);
            assert_eq!(bucket_of(bucket_high(i)), i);
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket_high(BUCKETS - 1), u64::MAX);
    }

    #[test]
    fn buckets_are_narrow() {
        for v in [200u64, 1_000, 12_345, 87_654_321, 1 << 40] {
            let i = bucket_of(v);
            let width = bucket_high(i) - bucket_low(i) + 1;
            assert!(width as f64 / bucket_low(i) as f64 <= 1.0 / 128.0, "{v}");
        }
        for v in 0..SUB {
            assert_eq!(bucket_low(bucket_of(v)), v, "exact below {SUB}");
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
        a.merge(&b);
        assert_eq!(a.total(), 2);
        assert_eq!(a.min(), Some(10));
        assert_eq!(a.max(), Some(1_000_000));
    }

    #[test]
    fn empty_has_no_summary() {
        let h = LatencyHistogram::new();
        assert!(h.summary().is_none());
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
}
