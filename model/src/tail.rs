//! Long tails: an operation whose mean is many times its median is not described by its mean.
//! The report says so, with what the slow calls hold and what is already taken out of them
//! (waiting switched out), so that a mean is never read as the typical call: one line among the
//! report's warnings.

use crate::hist::slot_lower_bound;
use crate::sample::Op;
use crate::snapshot::{Device, Latency};
use iommutop_abi::units::{human_count, human_ns, percent};

/// A mean above this many medians is a tail of its own.
pub const TAIL_RATIO: f64 = 4.0;

/// Fewer timed calls than this have no median worth comparing with.
pub const TAIL_MIN_CALLS: u64 = 100;

/// One device's operation whose mean is over [`TAIL_RATIO`] of its median.
#[derive(Debug, Clone, PartialEq)]
pub struct Tail {
    pub device: String,
    pub op: Op,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    /// Calls of at least [`TAIL_RATIO`] medians (by the histogram's slots).
    pub slow_calls: u64,
    pub timed_calls: u64,
    /// A lower bound on the self time those calls hold: each counted at its slot's lower bound.
    pub slow_ns_at_least: u64,
    pub total_ns: u64,
    /// Time the calls spent switched out, already left out of `total_ns`.
    pub offcpu_ns: u64,
}

impl Tail {
    /// `latency`'s tail, if its mean is over [`TAIL_RATIO`] of its median.
    pub fn of(device: &str, op: Op, latency: &Latency) -> Option<Tail> {
        if latency.timed < TAIL_MIN_CALLS || latency.p50_ns == 0 {
            return None;
        }
        if latency.mean_ns <= TAIL_RATIO * latency.p50_ns as f64 {
            return None;
        }
        let from = (TAIL_RATIO * latency.p50_ns as f64) as u64;
        let (mut slow_calls, mut slow_ns) = (0u64, 0u64);
        for (slot, &count) in latency.hist.slots().iter().enumerate() {
            let lower = slot_lower_bound(slot);
            if lower >= from {
                slow_calls = slow_calls.saturating_add(count);
                slow_ns = slow_ns.saturating_add(count.saturating_mul(lower));
            }
        }
        Some(Tail {
            device: device.to_string(),
            op,
            mean_ns: latency.mean_ns,
            p50_ns: latency.p50_ns,
            p99_ns: latency.p99_ns,
            slow_calls,
            timed_calls: latency.timed,
            slow_ns_at_least: slow_ns.min(latency.total_ns),
            total_ns: latency.total_ns,
            offcpu_ns: latency.offcpu.map_or(0, |w| w.offcpu_ns),
        })
    }

    /// The mean over the median.
    pub fn ratio(&self) -> f64 {
        self.mean_ns / self.p50_ns as f64
    }

    /// The tail in one sentence: how long, what the slow calls hold, what is already out of it,
    /// and what the rest can be.
    pub fn sentence(&self) -> String {
        let share = |part: u64, whole: u64| {
            if whole == 0 {
                0.0
            } else {
                part as f64 / whole as f64
            }
        };
        let waiting = if self.offcpu_ns > 0 {
            format!(
                "the {} it spent switched out is already left out",
                human_ns(self.offcpu_ns)
            )
        } else {
            "none of it was spent switched out".to_string()
        };
        format!(
            "{} {}: its mean {} is {:.1}x its median {}: {} calls ({}) of {} or more hold at least {} of its time, p99 {}; {waiting}: the rest is time on the CPU inside the calls that no probe names (interrupts, spinning on a contended lock or the IOMMU's queue, or a hypervisor holding the vCPU); read the median and percentiles, not the mean, for the typical call",
            self.device,
            self.op.name(),
            human_ns(self.mean_ns as u64),
            self.ratio(),
            human_ns(self.p50_ns),
            human_count(self.slow_calls),
            percent(share(self.slow_calls, self.timed_calls)),
            human_ns((TAIL_RATIO * self.p50_ns as f64) as u64),
            percent(share(self.slow_ns_at_least, self.total_ns)),
            human_ns(self.p99_ns),
        )
    }
}

/// The DMA map and unmap tails of `devices`: the calls that contain all the rest.
pub fn dma_tails(devices: &[Device]) -> Vec<Tail> {
    devices
        .iter()
        .flat_map(|device| {
            [Op::DmaMap, Op::DmaUnmap].into_iter().filter_map(|op| {
                let stats = device.op(op);
                Tail::of(&device.key.to_string(), op, stats.latency.as_ref()?)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::slot_of;
    use crate::op_stats::Waiting;
    use crate::Histogram;

    fn latency(values: &[(u64, u64)], offcpu_ns: u64) -> Latency {
        let mut hist = Histogram::default();
        let (mut timed, mut total) = (0, 0);
        for &(ns, n) in values {
            hist.add(slot_of(ns), n);
            timed += n;
            total += ns * n;
        }
        let p = hist.percentiles().unwrap();
        Latency {
            timed,
            total_ns: total,
            mean_ns: total as f64 / timed as f64,
            p50_ns: p.p50,
            p90_ns: p.p90,
            p99_ns: p.p99,
            p999_ns: p.p999,
            max_ns_bound: hist.max_bound().unwrap(),
            hist,
            raw_total_ns: Some(total + offcpu_ns),
            offcpu: Some(Waiting {
                offcpu_ns,
                waited: u64::from(offcpu_ns > 0),
            }),
        }
    }

    #[test]
    fn a_mean_near_its_median_has_no_tail() {
        let l = latency(&[(1_000, 990), (5_000, 10)], 0);
        assert_eq!(Tail::of("nvme", Op::DmaMap, &l), None);
    }

    #[test]
    fn few_calls_have_no_tail_however_long() {
        let l = latency(&[(1_000, 50), (1_000_000, 2)], 0);
        assert_eq!(Tail::of("nvme", Op::DmaMap, &l), None);
    }

    #[test]
    fn a_mean_over_four_medians_names_what_its_slow_calls_hold() {
        // 98 % of calls at 15 us, 2 % at 3 ms: the mean is about 75 us, 5x the median.
        let l = latency(&[(15_000, 980), (3_000_000, 20)], 7_000_000);
        let tail = Tail::of("0000:00:04.0", Op::DmaMap, &l).expect("a tail");
        assert_eq!(tail.slow_calls, 20);
        assert!(tail.ratio() > 4.0, "{tail:?}");
        // 60 ms of 74.7 ms in the slow calls; each counted at its slot's lower bound (2.6 ms): 70%.
        assert!(
            tail.slow_ns_at_least as f64 >= 0.65 * tail.total_ns as f64,
            "{tail:?}"
        );
        assert!(tail.slow_ns_at_least <= tail.total_ns);
        let text = tail.sentence();
        assert!(text.starts_with("0000:00:04.0 dma_map: its mean"), "{text}");
        assert!(
            text.contains("20 calls (2.00%) of 61.4us or more"),
            "{text}"
        );
        assert!(text.contains("already left out"), "{text}");
    }
}
