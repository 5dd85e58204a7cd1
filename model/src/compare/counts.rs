//! Whether a device's counts per unit (maps, page-table maps, syncs, invalidations) changed
//! between the runs: beyond a margin, and beyond what the runs' probes may have missed of them.

use super::work::DeviceWork;
use crate::report::Report;
use crate::sample::{Health, Op};
use crate::snapshot::RowKey;

/// Relative change in a count per unit that counts as a change (counts repeat run to run; the
/// margin absorbs set-up traffic and partial transactions).
const COUNT_CHANGE: f64 = 0.10;
/// Absolute change in a count per unit below which nothing changed.
const COUNT_FLOOR: f64 = 0.05;

/// Whether a count per unit differs between the runs.
pub fn count_changed(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => {
            let delta = (b - a).abs();
            delta > COUNT_FLOOR && delta > COUNT_CHANGE * a.abs().max(b.abs())
        }
        _ => false,
    }
}

/// How much of each count per unit the two runs may have missed together: the calls of the
/// device their probes did not count, per unit of work. A difference no larger than this may be
/// the probes', not the kernel's, and makes no finding.
pub(super) struct CountSlack {
    dma_maps: f64,
    iommu_maps: f64,
    iotlb_syncs: f64,
    iotlb_flushes: f64,
}

/// The calls of `op` on the row `device` that a report's counts may lack: from its `losses`, the
/// calls no program saw (of no known device, so possibly all this one's) and the device's calls
/// open at the end; in a report written before them, the bound its health gave
/// (`missed_calls.<op>`, the kernel having skipped both programs of a call).
pub fn uncounted(report: &Report, op: Op, device: Option<&RowKey>) -> u64 {
    match &report.losses {
        Some(losses) => device.map_or_else(
            || losses.ops.get(&op).and_then(|o| o.lost).unwrap_or(0),
            |device| losses.uncounted(op, device),
        ),
        None => report
            .health
            .get(&Health::MissedCalls(op))
            .copied()
            .unwrap_or(0),
    }
}

impl CountSlack {
    /// The calls A and B may have missed of the device (by its key in each, where it is there),
    /// over its units in A and in B (`counts`).
    pub(super) fn of(
        (a, key_a): (&Report, Option<&RowKey>),
        (b, key_b): (&Report, Option<&RowKey>),
        counts: (Option<f64>, Option<f64>),
    ) -> CountSlack {
        let per_unit = |report: &Report, key: Option<&RowKey>, count: Option<f64>, op: Op| -> f64 {
            let missed = uncounted(report, op, key) as f64;
            count.filter(|c| *c > 0.0).map_or(0.0, |c| missed / c)
        };
        let both = |op: Op| per_unit(a, key_a, counts.0, op) + per_unit(b, key_b, counts.1, op);
        CountSlack {
            dma_maps: both(Op::DmaMap),
            iommu_maps: both(Op::IommuMap),
            iotlb_syncs: both(Op::IotlbSync),
            iotlb_flushes: both(Op::IotlbFlush),
        }
    }
}

/// Whether a count per unit differs between the runs by more than they may have missed of it.
fn count_changed_beyond(a: Option<f64>, b: Option<f64>, slack: f64) -> bool {
    count_changed(a, b) && a.zip(b).is_some_and(|(a, b)| (b - a).abs() > slack)
}

/// Whether any count per unit (maps, page-table maps, syncs, invalidations) differs by more than
/// the runs' probes may have missed of it.
pub(super) fn counts_changed(
    a: Option<&DeviceWork>,
    b: Option<&DeviceWork>,
    slack: &CountSlack,
) -> bool {
    let (Some(a), Some(b)) = (a, b) else {
        return false;
    };
    count_changed_beyond(a.dma_maps, b.dma_maps, slack.dma_maps)
        || count_changed_beyond(a.iommu_maps, b.iommu_maps, slack.iommu_maps)
        || count_changed_beyond(a.iotlb_syncs, b.iotlb_syncs, slack.iotlb_syncs)
        || count_changed_beyond(a.iotlb_flushes, b.iotlb_flushes, slack.iotlb_flushes)
}
