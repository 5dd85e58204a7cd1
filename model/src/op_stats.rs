//! One operation's numbers over an interval (count, bytes, rate, latency): what a snapshot's row
//! holds per operation and what the derived overhead is computed from.

use crate::hist::Histogram;
use crate::sample::OpCounters;
use serde::{Deserialize, Serialize};

/// One operation of one row over an interval, as shown and reported.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct OpStats {
    pub count: u64,
    pub bytes: u64,
    pub failures: u64,
    pub rate_per_s: f64,
    /// Bytes per call; `None` when nothing was counted or the hook carries no size.
    pub avg_bytes: Option<f64>,
    /// `None` when no call was timed (tracepoint tier: counts only).
    pub latency: Option<Latency>,
}

impl OpStats {
    /// Whether the op's latency was measured in this interval.
    pub fn is_timed(&self) -> bool {
        self.latency.is_some()
    }

    /// Measured time in ns, if timed.
    pub fn total_ns(&self) -> Option<u64> {
        self.latency.as_ref().map(|l| l.total_ns)
    }
}

/// Measured latency of the timed calls of one operation. Percentiles are estimates from the
/// log-linear slots (within 12.5%, see [`crate::hist`]); `max_ns_bound` is a bound every call was
/// below. In JSON the slots are `hist_fine`, with their log2 view in `hist` (what reports had
/// before); a report with only `hist` reads back from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "LatencyJson", from = "LatencyJson")]
pub struct Latency {
    pub timed: u64,
    pub total_ns: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns_bound: u64,
    pub hist: Histogram,
    /// `total_ns` as measured, the probes' own cost nested in the calls included; `None` in
    /// reports written before self time.
    pub raw_total_ns: Option<u64>,
    /// Waiting: of `raw_total_ns`, the time the calling tasks spent switched out (preempted,
    /// asleep on a lock), which `total_ns` leaves out, and how many calls waited; `None` in
    /// reports written before it was measured.
    pub offcpu: Option<Waiting>,
}

/// Time the timed calls of an operation spent switched out, and how many of them did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Waiting {
    pub offcpu_ns: u64,
    pub waited: u64,
}

/// [`Latency`] as reports write it.
#[derive(Serialize, Deserialize)]
struct LatencyJson {
    timed: u64,
    total_ns: u64,
    mean_ns: f64,
    p50_ns: u64,
    p90_ns: u64,
    p99_ns: u64,
    p999_ns: u64,
    max_ns_bound: u64,
    hist: Vec<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hist_fine: Option<Histogram>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    raw_total_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    offcpu_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    waited: Option<u64>,
}

impl From<Latency> for LatencyJson {
    fn from(l: Latency) -> LatencyJson {
        LatencyJson {
            timed: l.timed,
            total_ns: l.total_ns,
            mean_ns: l.mean_ns,
            p50_ns: l.p50_ns,
            p90_ns: l.p90_ns,
            p99_ns: l.p99_ns,
            p999_ns: l.p999_ns,
            max_ns_bound: l.max_ns_bound,
            hist: l.hist.log2_slots().to_vec(),
            hist_fine: Some(l.hist),
            raw_total_ns: l.raw_total_ns,
            offcpu_ns: l.offcpu.map(|w| w.offcpu_ns),
            waited: l.offcpu.map(|w| w.waited),
        }
    }
}

impl From<LatencyJson> for Latency {
    fn from(j: LatencyJson) -> Latency {
        Latency {
            timed: j.timed,
            total_ns: j.total_ns,
            mean_ns: j.mean_ns,
            p50_ns: j.p50_ns,
            p90_ns: j.p90_ns,
            p99_ns: j.p99_ns,
            p999_ns: j.p999_ns,
            max_ns_bound: j.max_ns_bound,
            hist: j
                .hist_fine
                .unwrap_or_else(|| Histogram::from_log2_slots(&j.hist)),
            raw_total_ns: j.raw_total_ns,
            offcpu: j.offcpu_ns.map(|offcpu_ns| Waiting {
                offcpu_ns,
                waited: j.waited.unwrap_or(0),
            }),
        }
    }
}

/// The plain sums of one operation over an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpDelta {
    pub count: u64,
    pub bytes: u64,
    pub failures: u64,
    pub timed: u64,
    pub total_ns: u64,
    pub raw_total_ns: u64,
    pub offcpu_ns: u64,
    pub waited: u64,
    pub hist: Histogram,
}

impl OpDelta {
    /// Everything counted since the counters were created (or reset).
    pub fn from_counters(counters: &OpCounters) -> OpDelta {
        OpDelta {
            count: counters.count,
            bytes: counters.bytes,
            failures: counters.failures,
            timed: counters.timed,
            total_ns: counters.total_ns,
            raw_total_ns: counters.raw_total_ns,
            offcpu_ns: counters.offcpu_ns,
            waited: counters.waited,
            hist: Histogram::from_slots(&counters.hist),
        }
    }

    /// `later - earlier`, or `None` if any counter went backwards.
    pub fn checked_between(earlier: &OpCounters, later: &OpCounters) -> Option<OpDelta> {
        Some(OpDelta {
            count: later.count.checked_sub(earlier.count)?,
            bytes: later.bytes.checked_sub(earlier.bytes)?,
            failures: later.failures.checked_sub(earlier.failures)?,
            timed: later.timed.checked_sub(earlier.timed)?,
            total_ns: later.total_ns.checked_sub(earlier.total_ns)?,
            raw_total_ns: later.raw_total_ns.checked_sub(earlier.raw_total_ns)?,
            offcpu_ns: later.offcpu_ns.checked_sub(earlier.offcpu_ns)?,
            waited: later.waited.checked_sub(earlier.waited)?,
            hist: Histogram::from_slots(&later.hist)
                .checked_since(&Histogram::from_slots(&earlier.hist))?,
        })
    }

    /// Adds another delta (saturating).
    pub fn merge(&mut self, other: &OpDelta) {
        self.count = self.count.saturating_add(other.count);
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.failures = self.failures.saturating_add(other.failures);
        self.timed = self.timed.saturating_add(other.timed);
        self.total_ns = self.total_ns.saturating_add(other.total_ns);
        self.raw_total_ns = self.raw_total_ns.saturating_add(other.raw_total_ns);
        self.offcpu_ns = self.offcpu_ns.saturating_add(other.offcpu_ns);
        self.waited = self.waited.saturating_add(other.waited);
        self.hist.merge(&other.hist);
    }

    /// Rates, means and percentiles over an interval of `interval_ns`.
    pub fn stats(&self, interval_ns: u64) -> OpStats {
        OpStats {
            count: self.count,
            bytes: self.bytes,
            failures: self.failures,
            rate_per_s: per_second(self.count, interval_ns),
            avg_bytes: (self.count > 0 && self.bytes > 0)
                .then(|| self.bytes as f64 / self.count as f64),
            latency: self.latency(),
        }
    }

    fn latency(&self) -> Option<Latency> {
        if self.timed == 0 {
            return None;
        }
        let percentiles = self.hist.percentiles()?;
        Some(Latency {
            timed: self.timed,
            total_ns: self.total_ns,
            mean_ns: self.total_ns as f64 / self.timed as f64,
            p50_ns: percentiles.p50,
            p90_ns: percentiles.p90,
            p99_ns: percentiles.p99,
            p999_ns: percentiles.p999,
            max_ns_bound: self.hist.max_bound()?,
            hist: self.hist,
            raw_total_ns: Some(self.raw_total_ns),
            offcpu: Some(Waiting {
                offcpu_ns: self.offcpu_ns,
                waited: self.waited,
            }),
        })
    }
}

/// `count` per second over `interval_ns`; 0 for an empty interval.
pub fn per_second(count: u64, interval_ns: u64) -> f64 {
    if interval_ns == 0 {
        0.0
    } else {
        count as f64 * 1e9 / interval_ns as f64
    }
}
