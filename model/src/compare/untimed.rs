//! Why a report has a count but no timing for an operation: the tier its probe point got, or
//! the point's absence. `--fail-if` on a latency says this instead of "not found".

use crate::report::{ProbeStatus, Report};
use crate::sample::Op;

/// Why `report` holds no latency for `op` (probe points are named after the operation they
/// time: `dma_map`, `iommu_map`, ...).
pub fn untimed_reason(report: &Report, op: Op) -> String {
    let point = op.name();
    let Some(probe) = report.probes.iter().find(|p| p.point == point) else {
        return format!(
            "the `{point}` probe point was not attached (left out with --points, or the report \
             lists no probes)"
        );
    };
    match (probe.status, probe.tier) {
        (ProbeStatus::Attached, Some(tier)) if !tier.measures_latency() => format!(
            "the `{point}` probe point got the {} tier, which counts calls but cannot time \
             them (fentry or kprobe can: `iommutop probes` says why they were refused)",
            tier.name()
        ),
        (ProbeStatus::Attached, _) => format!("no `{point}` call of this device was timed"),
        (ProbeStatus::Unavailable | ProbeStatus::Failed, _) => format!(
            "the `{point}` probe point did not attach ({})",
            probe.status.name()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::full_report;

    #[test]
    fn each_cause_is_named() {
        let report = full_report();
        assert!(
            untimed_reason(&report, Op::IommuMap)
                .contains("got the tracepoint tier, which counts calls but cannot time them"),
            "iommu_map is on the tracepoint tier in the fixture"
        );
        assert!(untimed_reason(&report, Op::IovaAlloc).contains("was not attached"));
        assert!(untimed_reason(&report, Op::IotlbFlush).contains("did not attach (unavailable)"));
        assert!(untimed_reason(&report, Op::DmaMap).contains("no `dma_map` call"));
    }
}
