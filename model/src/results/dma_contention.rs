//! What a dma-contention run did, as `run.workload.results` holds it: fio's numbers per job
//! count (the curve), the probes' for the device at each step, and how the mapping latency grew
//! from the first step to the last.

use super::fio::TargetResult;
use super::PerUnit;
use iommutop_abi::workload::Headline;
use serde::{Deserialize, Deserializer, Serialize};

/// One operation of one device over a window of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowOp {
    pub count: u64,
    pub per_s: f64,
    /// Latency of the timed calls (fentry/kprobe tiers); `None` when the tier only counts.
    pub mean_ns: Option<f64>,
    pub p50_ns: Option<u64>,
    pub p90_ns: Option<u64>,
    pub p99_ns: Option<u64>,
}

impl WindowOp {
    /// An operation the probes did not see in the window.
    pub fn unseen() -> WindowOp {
        WindowOp {
            count: 0,
            per_s: 0.0,
            mean_ns: None,
            p50_ns: None,
            p90_ns: None,
            p99_ns: None,
        }
    }
}

/// The probes' numbers of one step for the device: each operation a step reports with its
/// latency (zero when the probes saw none), the counts per I/O, and the step's length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepProbes {
    pub dma_map: WindowOp,
    pub dma_unmap: WindowOp,
    pub iova_alloc: WindowOp,
    pub iova_alloc_slow: WindowOp,
    pub iova_free: WindowOp,
    pub iommu_map: WindowOp,
    pub iotlb_flush: WindowOp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_io: Option<PerUnit>,
    pub window_s: f64,
}

/// One step of the curve: fio's numbers at a job count, and the probes' when they were attached
/// (`probes` is null when they saw nothing of the device, absent when none were attached).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub threads: u64,
    pub iops: f64,
    pub ios: u64,
    pub clat_mean_us: Option<f64>,
    pub clat_p99_us: Option<f64>,
    pub sys_cpu_percent: Option<f64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub probes: Option<Option<StepProbes>>,
}

/// A key that is there, null or not: `Some(None)` for null (a plain `Option` would read null as
/// absent, and the step would be written back without its `probes`).
fn present<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Option<StepProbes>>, D::Error> {
    Option::deserialize(deserializer).map(Some)
}

/// What a dma-contention run did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DmaContentionResults {
    pub steps: usize,
    /// IOPS with one job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops_1: Option<f64>,
    /// Mean latency at the last step over the first, when both were timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iova_alloc_mean_ns_growth: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dma_map_mean_ns_growth: Option<f64>,
    pub curve: Vec<Step>,
    pub target: TargetResult,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// The unit of work (uncounted: I/Os).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<Headline>,
}

impl DmaContentionResults {
    /// The results of `curve`, with the first step's IOPS and the latency growth derived.
    pub fn of(curve: Vec<Step>, target: TargetResult, interrupted: bool) -> DmaContentionResults {
        let mean = |step: Option<&Step>, op: fn(&StepProbes) -> &WindowOp| -> Option<f64> {
            op(step?.probes.as_ref()?.as_ref()?).mean_ns
        };
        let growth = |op: fn(&StepProbes) -> &WindowOp| {
            Some(mean(curve.last(), op)? / mean(curve.first(), op)?)
        };
        DmaContentionResults {
            steps: curve.len(),
            iops_1: curve.first().map(|step| step.iops),
            iova_alloc_mean_ns_growth: growth(|p| &p.iova_alloc),
            dma_map_mean_ns_growth: growth(|p| &p.dma_map),
            curve,
            target,
            interrupted,
            work: None,
        }
    }
}
