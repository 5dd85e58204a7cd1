//! The report's `probes`: each logical probe point and the tier it got, apart from the rest of
//! the report so that what reads them (the loss figures) need not depend on the whole report.

use serde::{Deserialize, Serialize};

/// How a probe is attached, cheapest first.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Tier {
    /// BPF trampolines on entry and exit: counts, bytes and latency.
    Fentry,
    /// kprobe and kretprobe: counts, bytes and latency, slower than fentry.
    Kprobe,
    /// A kernel tracepoint: counts and bytes only, no latency.
    Tracepoint,
}

impl Tier {
    pub fn name(self) -> &'static str {
        self.into()
    }

    pub fn measures_latency(self) -> bool {
        !matches!(self, Tier::Tracepoint)
    }
}

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ProbeStatus {
    Attached,
    /// No tier exists on this kernel (no symbol, no tracepoint).
    Unavailable,
    /// A tier existed but loading or attaching failed.
    Failed,
}

impl ProbeStatus {
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// One logical probe point and the tier it got (the `iommutop probes` table).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeEntry {
    /// Logical point (`dma_map`, `iotlb_flush`, `completion.nvme`, ...).
    pub point: String,
    /// The tier that attached; `None` if none did.
    pub tier: Option<Tier>,
    /// Kernel function or tracepoint attached to (`dma_map_page_attrs`, `iommu:map`).
    pub symbol: Option<String>,
    pub status: ProbeStatus,
    /// Whether this point measures latency (fentry/kprobe pairs do, tracepoints count only).
    pub latency: bool,
    /// Why it is unavailable or failed, or a note on the tier chosen.
    pub reason: Option<String>,
    /// Better tiers that were tried and refused, best first.
    pub refused: Vec<Refusal>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub tier: Tier,
    pub reason: String,
}
