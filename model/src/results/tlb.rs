//! What a tlb run did, as `run.workload.results` holds it: the pointer chase's ns per access
//! over working sets per page size (the curve), the steps found in it, and the reach each step
//! suggests.

use iommutop_abi::workload::Headline;
pub use iommutop_vfio_nvme_results::params::PageSize;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How a page size's buffer was backed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesBacking {
    /// `4k`, `hugetlb` or `thp`.
    pub backing: String,
    /// With `thp`: the share of the buffer the kernel gave huge pages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub huge_fraction: Option<f64>,
}

/// One working set measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    pub page_size: PageSize,
    pub bytes: u64,
    pub ns_per_access: f64,
    pub accesses: u64,
    /// TSC cycles, where the TSC is constant and non-stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycles_per_access: Option<f64>,
}

/// The TSC: whether cycles can be trusted, and its rate (the median of the measurements').
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TscResult {
    pub usable: bool,
    pub ghz: Option<f64>,
}

/// What a step is taken to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum StepKind {
    /// Seen with 4 KiB pages only: the TLB's reach with 4 KiB pages.
    Tlb,
    /// Seen with both page sizes at the same working set: a cache's size.
    Cache,
    /// Seen with 2 MiB pages only, or only one page size was measured.
    Unclear,
}

impl StepKind {
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// A rise in latency between two working sets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub page_size: PageSize,
    /// The largest working set before the rise (the reach estimate).
    pub fast_bytes: u64,
    /// The first working set after it.
    pub slow_bytes: u64,
    pub ns_before: f64,
    pub ns_after: f64,
    pub ratio: f64,
    pub kind: StepKind,
}

/// A reach estimate from a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub what: String,
    /// The working set the step ends (`fast_bytes`).
    pub working_set_bytes: u64,
    /// TLB steps: entries (working set / page size). Cache steps: the bytes of cache lines the
    /// chase touched at that working set (one line per 4 KiB in the `pages` pattern).
    pub entries: Option<u64>,
    pub cache_bytes: Option<u64>,
}

/// What a tlb run did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TlbResults {
    /// `pages` or `lines`: what the chase steps over.
    pub pattern: String,
    #[serde(with = "iommutop_abi::keyed_by_text")]
    pub page_sizes: BTreeMap<PageSize, SeriesBacking>,
    pub sizes_per_page_size: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ns_per_access_4k_largest: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ns_per_access_2m_largest: Option<f64>,
    /// ns per access with 4 KiB pages over 2 MiB at the largest working set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub huge_page_speedup_largest: Option<f64>,
    pub tsc: TscResult,
    pub curve: Vec<CurvePoint>,
    pub steps: Vec<Step>,
    pub estimates: Vec<Estimate>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// The unit of work (uncounted: accesses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<Headline>,
}
