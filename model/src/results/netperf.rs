//! What a netperf run did, as `run.workload.results` holds it.

use super::PerUnit;
use iommutop_abi::pci::PciAddress;
use iommutop_abi::workload::Headline;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One NIC taking part, for the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Nic {
    /// `client` or `server`.
    pub role: String,
    pub name: String,
    pub pci_address: Option<PciAddress>,
    /// The network namespace the workload moved it into (local mode).
    pub namespace: Option<String>,
    pub address: Option<String>,
}

/// One NIC's probe counts per transaction, with the NIC's name and role.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NicPerTransaction {
    #[serde(flatten)]
    pub counts: PerUnit,
    pub name: String,
    pub role: String,
}

/// netperf's numbers flat at the top (so that `compare` and `--fail-if workload.KEY` find them),
/// what was run below. A number netperf did not give is absent, not 0.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NetperfResults {
    pub transactions_per_s: f64,
    pub transactions: u64,
    pub elapsed_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_latency_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_latency_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p90_latency_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_latency_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_latency_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_latency_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stddev_latency_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_cpu_percent: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_cpu_percent: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_service_demand_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_service_demand_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmissions: Option<u64>,
    pub test: String,
    pub mode: String,
    pub nics: Vec<Nic>,
    /// The NICs' DMA and IOMMU maps per transaction, summed; absent when the probes saw none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dma_maps_per_transaction: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iommu_maps_per_transaction: Option<f64>,
    /// By PCI address; absent without probes (`iommutop workload`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_transaction: Option<BTreeMap<PciAddress, NicPerTransaction>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_window_s: Option<f64>,
    pub command: Vec<String>,
    /// The unit of work and headline numbers; absent in reports of builds before they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<Headline>,
}
