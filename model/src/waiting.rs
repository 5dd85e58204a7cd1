//! Waiting inside translation: the time a device's DMA map and unmap calls spent switched out
//! (preempted, asleep on a lock), which their cost leaves out, and when it is a finding of its
//! own. `diagnose`, `compare` and the live view all ask here, so that they agree on the figure and
//! the threshold.
//!
//! The figure is the calls' off-CPU time over their measured time (`raw_total_ns`, which holds
//! the on-CPU self time, the probes' own cost and the waiting). On a preemptible kernel a task
//! preempted inside a map shows a little; on PREEMPT_RT, where the IOMMU drivers' spinlocks sleep,
//! it can be most of the measured time (6.12-rt, AMD-Vi, fio under load: 64% of the NVMe's).

use crate::sample::Op;
use crate::snapshot::Device;
use serde::Serialize;

/// The share of a device's measured time in DMA map and unmap calls spent waiting, from which
/// waiting is a finding of its own: on PREEMPT_RT a lock inside translation sleeps.
pub const WAITING_FINDING: f64 = 0.05;

/// The share of the timed calls that must have waited for waiting to be a pattern rather than an
/// event: the e1000e maps its receive ring in process context when its link comes up, and on
/// one CPU a tick's preemption of those few calls (1 to 4 of 6,000 in a 3 s TCP_RR on 7.3) can
/// reach [`WAITING_FINDING`] of the measured time on its own.
pub const WAITING_MIN_WAITED: f64 = 0.01;

/// The operations whose waiting is measured against the threshold: the DMA API calls, which
/// contain all the rest.
pub const WAITING_OPS: [Op; 2] = [Op::DmaMap, Op::DmaUnmap];

/// A device's waiting in its DMA map and unmap calls over a run or an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct DmaWaiting {
    /// Time the calls spent switched out, ns.
    pub offcpu_ns: u64,
    /// The calls' measured time (on-CPU self time, the probes' cost and the waiting), ns.
    pub measured_ns: u64,
    /// Calls that were switched out at least once.
    pub waited_calls: u64,
    /// The timed calls.
    pub timed_calls: u64,
}

impl DmaWaiting {
    /// The waiting of `device`'s timed DMA map and unmap calls; `None` when neither was timed or
    /// the report predates the measurement of waiting.
    pub fn of(device: &Device) -> Option<DmaWaiting> {
        let mut total: Option<DmaWaiting> = None;
        for op in WAITING_OPS {
            let stats = device.op(op);
            let Some(latency) = stats.latency.as_ref() else {
                continue;
            };
            let Some(waiting) = latency.offcpu else {
                continue;
            };
            let sum = total.get_or_insert_with(DmaWaiting::default);
            sum.offcpu_ns = sum.offcpu_ns.saturating_add(waiting.offcpu_ns);
            sum.waited_calls = sum.waited_calls.saturating_add(waiting.waited);
            sum.timed_calls = sum.timed_calls.saturating_add(latency.timed);
            sum.measured_ns = sum
                .measured_ns
                .saturating_add(latency.raw_total_ns.unwrap_or(latency.total_ns));
        }
        total
    }

    /// Off-CPU time over measured time, 0 with nothing measured.
    pub fn share(&self) -> f64 {
        if self.measured_ns == 0 {
            0.0
        } else {
            self.offcpu_ns as f64 / self.measured_ns as f64
        }
    }

    /// Whether the waiting is a finding of its own: [`WAITING_FINDING`] of the measured time or
    /// more, in at least [`WAITING_MIN_WAITED`] of the calls.
    pub fn is_finding(&self) -> bool {
        self.measured_ns > 0
            && self.share() >= WAITING_FINDING
            && self.waited_calls as f64 >= WAITING_MIN_WAITED * self.timed_calls as f64
    }

    /// The waiting of `device` when it is a finding.
    pub fn finding(device: &Device) -> Option<DmaWaiting> {
        DmaWaiting::of(device).filter(DmaWaiting::is_finding)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::op_stats::OpDelta;

    /// A device's DMA map and unmap as the 6.12-rt AMD-Vi lab report has them for its NVMe
    /// (`exact-load-6.12-rt-amd`, fio QD32x4 with TCP_RR on both NICs, 20.2 s): count, timed,
    /// on-CPU `total_ns`, `raw_total_ns`, `offcpu_ns`, `waited`.
    pub(crate) const RT_NVME: [(Op, [u64; 6]); 2] = [
        (
            Op::DmaMap,
            [
                30_399,
                30_006,
                2_088_212_648,
                9_814_601_373,
                7_056_693_138,
                1_845,
            ],
        ),
        (
            Op::DmaUnmap,
            [
                30_399,
                30_399,
                1_074_796_635,
                2_048_873_153,
                478_004_475,
                1_419,
            ],
        ),
    ];

    /// The same report's first NIC (`0000:00:05.0`, e1000e): it waited too, but little.
    pub(crate) const RT_NIC: [(Op, [u64; 6]); 2] = [
        (
            Op::DmaMap,
            [7_920, 7_920, 243_379_032, 441_858_806, 10_910_898, 25],
        ),
        (
            Op::DmaUnmap,
            [7_920, 7_920, 144_473_288, 267_558_559, 422_534, 2],
        ),
    ];

    /// Sets `device`'s DMA map and unmap to `numbers` (see [`RT_NVME`]) over `interval_ns`.
    pub(crate) fn set_ops(device: &mut Device, numbers: &[(Op, [u64; 6])], interval_ns: u64) {
        for &(op, [count, timed, total, raw, offcpu, waited]) in numbers {
            let mut delta = OpDelta {
                count,
                timed,
                total_ns: total,
                raw_total_ns: raw,
                offcpu_ns: offcpu,
                waited,
                ..OpDelta::default()
            };
            delta.hist.add(crate::hist::slot_of(total / timed), timed);
            device.ops.insert(op, delta.stats(interval_ns));
        }
    }

    /// A device of the model's full report with only `numbers` for its ops.
    pub(crate) fn device(numbers: &[(Op, [u64; 6])]) -> Device {
        let mut device = crate::report::fixtures::full_report()
            .devices
            .into_iter()
            .find(|d| d.pci_address.is_some())
            .expect("a PCI device");
        device.ops.clear();
        set_ops(&mut device, numbers, 20_187_021_785);
        device
    }

    /// 7,056,693,138 + 478,004,475 ns off the CPU of 9,814,601,373 + 2,048,873,153 ns measured:
    /// 63.5%, in 1,845 + 1,419 calls.
    #[test]
    fn the_rt_nvme_waited_most_of_its_measured_time() {
        let waiting = DmaWaiting::of(&device(&RT_NVME)).expect("measured");
        assert_eq!(waiting.offcpu_ns, 7_534_697_613);
        assert_eq!(waiting.measured_ns, 11_863_474_526);
        assert_eq!(waiting.waited_calls, 3_264);
        assert_eq!(waiting.timed_calls, 60_405);
        assert!(
            (waiting.share() - 0.6351).abs() < 1e-4,
            "{}",
            waiting.share()
        );
        assert!(waiting.is_finding());
    }

    /// 11,333,432 of 709,417,365 ns: 1.6%, below the threshold.
    #[test]
    fn a_little_preemption_is_not_a_finding() {
        let waiting = DmaWaiting::of(&device(&RT_NIC)).expect("measured");
        assert!(
            (waiting.share() - 0.01598).abs() < 1e-4,
            "{}",
            waiting.share()
        );
        assert!(!waiting.is_finding());
        assert_eq!(DmaWaiting::finding(&device(&RT_NIC)), None);
    }

    /// The 7.3 lab's eth1 in a 3 s TCP_RR (`lab_eras`' first run on it, one CPU): a few of the
    /// receive ring's maps at link up were preempted for 15.6 ms, 5.3% of the NIC's measured DMA
    /// time, in 4 of 11,000 calls. An event of the run's start, not waiting inside translation.
    #[test]
    fn a_few_preempted_calls_are_not_a_finding() {
        const LINK_UP: [(Op, [u64; 6]); 2] = [
            (
                Op::DmaMap,
                [5_500, 5_500, 120_000_000, 200_000_000, 15_600_000, 4],
            ),
            (Op::DmaUnmap, [5_500, 5_500, 60_000_000, 95_000_000, 0, 0]),
        ];
        let waiting = DmaWaiting::of(&device(&LINK_UP)).expect("measured");
        assert!(waiting.share() >= WAITING_FINDING, "{}", waiting.share());
        assert!(!waiting.is_finding());
        // The same time in 1% of the calls is a pattern.
        let mut spread = LINK_UP;
        spread[0].1[5] = 110;
        assert!(DmaWaiting::of(&device(&spread))
            .expect("measured")
            .is_finding());
    }

    /// A report written before waiting was measured says nothing about it, rather than 0%.
    #[test]
    fn no_measurement_is_not_zero() {
        let mut device = device(&RT_NVME);
        for stats in device.ops.values_mut() {
            if let Some(latency) = stats.latency.as_mut() {
                latency.offcpu = None;
            }
        }
        assert_eq!(DmaWaiting::of(&device), None);
        device.ops.clear();
        assert_eq!(DmaWaiting::of(&device), None);
    }
}
