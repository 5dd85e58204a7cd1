//! The JSON report, version 1: what one run measured, on which host, with which probes.
//!
//! `docs/report.schema.json` describes exactly what [`Report::to_json`] writes (a test checks it);
//! `docs/report.md` explains every field. Readers accept any version-1 report, also one written
//! by a newer build that added fields or operations (unknown ones are skipped).

mod build;
pub(crate) mod overhead;
pub(crate) mod probes;
mod read;
pub mod repeats;

pub use build::{ReportInputs, MAX_PROCESS_ROWS, MAX_STATS_ROWS};
pub use overhead::{ProgramOverhead, SelfOverhead, UnderstudiesUsed};
pub use probes::{ProbeEntry, ProbeStatus, Refusal, Tier};
pub use read::{ReadReportError, ReportError};
pub use repeats::Repeats;

use crate::facts::{DomainType, IommuVendor};
use crate::sample::Health;
use crate::snapshot::Device;
use iommutop_abi::{Op, RowKey};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The report format this build writes and reads.
pub const SCHEMA_VERSION: u32 = 1;

/// `tool.name` of every iommutop report.
pub const TOOL_NAME: &str = "iommutop";

/// The JSON Schema of [`Report`] (`docs/report.schema.json`), for tests that validate reports.
pub fn schema_text() -> &'static str {
    include_str!("../../docs/report.schema.json")
}

/// One run of iommutop, as written to `--output report.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u32,
    pub tool: Tool,
    pub host: Host,
    pub run: Run,
    /// One entry per row seen over the whole run (first to last sample), sorted by key.
    pub devices: Vec<Device>,
    pub probes: Vec<ProbeEntry>,
    pub self_overhead: SelfOverhead,
    /// Per-interval figures, so that `compare` can tell signal from noise.
    pub intervals: Vec<IntervalPoint>,
    /// Human sentences about what limits the numbers (probes missing, counters lost, ...).
    pub warnings: Vec<String>,
    /// The probes' health counters over the run, by name (`recursion_misses`, `abandoned_frames`,
    /// ...; see docs/probes.md): what the warnings are made from, for CI to gate on. Absent in
    /// reports written before it existed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub health: BTreeMap<Health, u64>,
    /// The calls the probes did not see whole, per operation and per group of entry programs
    /// (docs/probes.md, "How the loss figures are computed"). Absent in reports written before
    /// it existed, whose `health` bounds them with `missed_calls.<op>` instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub losses: Option<crate::losses::Losses>,
    /// The kernel's own DMA and IOMMU trace events against the probes' counts, when asked
    /// (`record --cross-check`, `diagnose`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_check: Option<crate::cross_check::CrossCheck>,
    /// Sampled kernel call paths of DMA API calls, heaviest first (absent when not sampled).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stacks: Vec<StackSample>,
    /// `run --runs N` with N ≥ 2: each measured run's numbers and their spread (absent
    /// otherwise, and in reports of older builds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats: Option<Repeats>,
}

/// One kernel call path that DMA API calls of a device took, from sampling one call in N.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackSample {
    /// The device row's key (PCI address, `deferred`, ...).
    pub device: RowKey,
    /// The sampled operation (`dma_map`, `dma_unmap`).
    pub op: Op,
    /// Sampled calls that took this path.
    pub samples: u64,
    /// Their summed latency in ns.
    pub total_ns: u64,
    /// Innermost first: `dma_map_page_attrs`, `e1000_xmit_frame`, ...
    pub frames: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    pub kernel_release: Option<String>,
    pub cmdline: Option<String>,
    pub iommu: HostIommu,
    /// IOMMU-relevant kernel options without `CONFIG_` (`INTEL_IOMMU: "y"`; `"n"` if not set).
    pub kernel_config: BTreeMap<String, String>,
    /// Ran inside the iommutop QEMU lab.
    pub lab: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostIommu {
    pub present: bool,
    pub vendor: Option<IommuVendor>,
    /// Unit names (`dmar0`, `ivhd0`).
    pub units: Vec<String>,
    /// `DMA`, `DMA-FQ`, `identity`, ... (what most groups have).
    pub default_domain_type: Option<String>,
    /// The default domain's DMA mode, written by its name (`strict`, `lazy`, `passthrough`).
    #[serde(default, with = "iommutop_abi::domain::as_mode")]
    pub dma_mode: Option<DomainType>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// RFC 3339 UTC (`2025-03-01T12:34:56Z`), see [`crate::time::rfc3339_utc`].
    pub started_at: String,
    pub duration_s: f64,
    pub interval_s: f64,
    /// Profile name, if the run came from one.
    pub profile: Option<String>,
    /// The command iommutop ran under its probes (empty if none).
    pub command: Vec<String>,
    /// Its exit status (`None`: no command, or killed by a signal).
    pub exit_status: Option<i32>,
    pub workload: Option<WorkloadReport>,
    /// `--device`: the one device whose rows were kept (with deferred and unattributed work).
    /// Absent when every device was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_filter: Option<crate::device_filter::DeviceFilter>,
    /// `--pid`/`--cgroup`: only these tasks' task-context work was counted. Absent when every
    /// task's was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_filter: Option<crate::task_filter::TaskFilter>,
}

/// A built-in workload's parameters and results, as the workload reported them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadReport {
    pub name: String,
    pub params: iommutop_abi::params::WorkloadParams,
    pub results: crate::results::WorkloadResults,
}

/// A workload as the JSON holds it: the results are typed by the workload's name.
#[derive(Deserialize)]
struct WorkloadReportJson {
    name: String,
    params: iommutop_abi::params::WorkloadParams,
    results: Map<String, Value>,
}

impl<'de> Deserialize<'de> for WorkloadReport {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<WorkloadReport, D::Error> {
        let json = WorkloadReportJson::deserialize(d)?;
        let results = crate::results::WorkloadResults::read(&json.name, json.results);
        Ok(WorkloadReport {
            name: json.name,
            params: json.params,
            results,
        })
    }
}

impl WorkloadReport {
    /// The workload's unit of work and headline numbers (`results.work`), if it stated them:
    /// reports of builds before it did have none.
    pub fn headline(&self) -> Option<iommutop_abi::workload::Headline> {
        self.results.headline()
    }
}

/// The headline numbers of one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalPoint {
    /// Seconds since the run started, at the end of the interval.
    pub t_s: f64,
    /// By device key.
    pub devices: BTreeMap<RowKey, IntervalDevice>,
    /// What the workload reported for this interval, if anything.
    pub workload: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalDevice {
    pub dma_map_per_s: f64,
    pub translation_ns_per_io: Option<f64>,
    pub completions_per_s: f64,
}

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod round_trip;
#[cfg(test)]
mod tests;
