//! What a netperf run did, as the report holds it, and its headline for a person.

use super::parse::RrResult;
use super::Netperf;
use crate::window::{per_unit, PerUnit, ProbeWindow};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// One NIC taking part, for the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Nic {
    /// `client` or `server`.
    pub role: String,
    pub name: String,
    pub pci_address: Option<iommutop_model::pci::PciAddress>,
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

/// What a netperf run did, as `run.workload.results` holds it: netperf's numbers flat at the top
/// (so that `compare` and `--fail-if workload.KEY` find them), what was run below. A number
/// netperf did not give is absent, not 0.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NetperfResults {
    pub transactions_per_s: f64,
    pub transactions: u64,
    pub elapsed_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_latency_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_latency_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p90_latency_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_latency_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_latency_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_latency_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stddev_latency_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_cpu_percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_cpu_percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_service_demand_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_service_demand_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmissions: Option<u64>,
    pub test: String,
    pub mode: String,
    pub nics: Vec<Nic>,
    /// The NICs' DMA and IOMMU maps per transaction, summed; absent when the probes saw none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dma_maps_per_transaction: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iommu_maps_per_transaction: Option<f64>,
    /// By PCI address; absent without probes (`iommutop workload`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_transaction: Option<BTreeMap<String, NicPerTransaction>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_window_s: Option<f64>,
    pub command: Vec<String>,
}

impl NetperfResults {
    /// netperf's own numbers; what was run is filled in by the caller.
    pub fn of(r: &RrResult) -> NetperfResults {
        NetperfResults {
            transactions_per_s: r.transactions_per_s,
            transactions: r.transactions(),
            elapsed_s: r.elapsed_s,
            mean_latency_us: r.mean_latency_us,
            p50_latency_us: r.p50_latency_us,
            p90_latency_us: r.p90_latency_us,
            p99_latency_us: r.p99_latency_us,
            min_latency_us: r.min_latency_us,
            max_latency_us: r.max_latency_us,
            stddev_latency_us: r.stddev_latency_us,
            local_cpu_percent: r.local_cpu_percent,
            remote_cpu_percent: r.remote_cpu_percent,
            local_service_demand_us: r.local_service_demand_us,
            remote_service_demand_us: r.remote_service_demand_us,
            request_size: r.request_size,
            response_size: r.response_size,
            retransmissions: r.retransmissions,
            ..NetperfResults::default()
        }
    }
}

/// The headline for a person.
pub fn summarize(results: &Map<String, Value>) -> String {
    let n = |key: &str| results.get(key).and_then(Value::as_f64);
    let mut out = format!(
        "netperf {} {}/{} ({}): {:.1} transactions/s, {} transactions in {:.1} s\n",
        results.get("test").and_then(Value::as_str).unwrap_or("?"),
        n("request_size").unwrap_or(0.0),
        n("response_size").unwrap_or(0.0),
        results.get("mode").and_then(Value::as_str).unwrap_or("?"),
        n("transactions_per_s").unwrap_or(0.0),
        n("transactions").unwrap_or(0.0),
        n("elapsed_s").unwrap_or(0.0),
    );
    let lat: Vec<String> = [
        ("mean", "mean_latency_us"),
        ("p50", "p50_latency_us"),
        ("p90", "p90_latency_us"),
        ("p99", "p99_latency_us"),
    ]
    .iter()
    .filter_map(|(label, key)| n(key).map(|v| format!("{label} {v:.1}")))
    .collect();
    if !lat.is_empty() {
        out.push_str(&format!("  latency µs: {}\n", lat.join("  ")));
    }
    if let (Some(l), Some(r)) = (n("local_cpu_percent"), n("remote_cpu_percent")) {
        out.push_str(&format!("  CPU: local {l:.1} %, remote {r:.1} %\n"));
    }
    if let Some(Value::Object(table)) = results.get("per_transaction") {
        for (pci, row) in table {
            let v = |k: &str| row.get(k).and_then(Value::as_f64).unwrap_or(0.0);
            out.push_str(&format!(
                "  {} {pci}: {:.2} DMA maps, {:.2} IOMMU maps, {:.2} IOTLB flushes per transaction\n",
                row.get("name").and_then(Value::as_str).unwrap_or("?"),
                v("dma_map"),
                v("iommu_map"),
                v("iotlb_flush"),
            ));
        }
    }
    out
}

impl Netperf {
    /// Each NIC's probe counts per transaction over the window, by PCI address.
    pub(super) fn per_transaction(
        &self,
        window: &ProbeWindow,
        result: &RrResult,
    ) -> BTreeMap<String, NicPerTransaction> {
        let transactions = result.transactions();
        self.nics
            .iter()
            .filter_map(|nic| {
                let pci = nic.pci_address?.to_string();
                let counts = per_unit(window, &pci, transactions)?;
                let row = NicPerTransaction {
                    counts,
                    name: nic.name.clone(),
                    role: nic.role.clone(),
                };
                Some((pci, row))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netperf::parse::parse_rr;
    use serde_json::json;

    #[test]
    fn results_are_flat_numbers_with_latency_in_microseconds() {
        let r = parse_rr(include_str!("../../testdata/netperf-tcp-rr-k.txt")).unwrap();
        let m = crate::WorkloadResults::from(NetperfResults::of(&r))
            .to_report(None)
            .expect("encodes");
        assert_eq!(m["transactions_per_s"], json!(40839.93));
        assert_eq!(m["p99_latency_us"], json!(116.0));
        assert_eq!(m["request_size"], json!(1024));
        let text = summarize(&m);
        assert!(text.contains("40839.9 transactions/s"), "{text}");
        assert!(text.contains("p99 116.0"), "{text}");
    }
}
