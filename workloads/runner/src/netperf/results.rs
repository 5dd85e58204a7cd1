//! What a netperf run did, as the report holds it, and its headline for a person.

use super::parse::RrResult;
use super::Netperf;
use crate::window::{per_unit, ProbeWindow};
use iommutop_model::pci::PciAddress;
use std::collections::BTreeMap;

pub use iommutop_model::results::netperf::{NetperfResults, Nic, NicPerTransaction};

/// netperf's own numbers; what was run is filled in by the caller.
pub fn results_of(r: &RrResult) -> NetperfResults {
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

/// The headline for a person.
pub fn summarize(results: &NetperfResults) -> String {
    let mut out = format!(
        "netperf {} {}/{} ({}): {:.1} transactions/s, {} transactions in {:.1} s\n",
        results.test,
        results.request_size.unwrap_or(0),
        results.response_size.unwrap_or(0),
        results.mode,
        results.transactions_per_s,
        results.transactions,
        results.elapsed_s,
    );
    let lat: Vec<String> = [
        ("mean", results.mean_latency_us),
        ("p50", results.p50_latency_us),
        ("p90", results.p90_latency_us),
        ("p99", results.p99_latency_us),
    ]
    .iter()
    .filter_map(|(label, value)| value.map(|v| format!("{label} {v:.1}")))
    .collect();
    if !lat.is_empty() {
        out.push_str(&format!("  latency µs: {}\n", lat.join("  ")));
    }
    if let (Some(l), Some(r)) = (results.local_cpu_percent, results.remote_cpu_percent) {
        out.push_str(&format!("  CPU: local {l:.1} %, remote {r:.1} %\n"));
    }
    for (pci, row) in results.per_transaction.iter().flatten() {
        out.push_str(&format!(
            "  {} {pci}: {:.2} DMA maps, {:.2} IOMMU maps, {:.2} IOTLB flushes per transaction\n",
            row.name, row.counts.dma_map, row.counts.iommu_map, row.counts.iotlb_flush,
        ));
    }
    out
}

impl Netperf {
    /// Each NIC's probe counts per transaction over the window, by PCI address.
    pub(super) fn per_transaction(
        &self,
        window: &ProbeWindow,
        result: &RrResult,
    ) -> BTreeMap<PciAddress, NicPerTransaction> {
        let transactions = result.transactions();
        self.nics
            .iter()
            .filter_map(|nic| {
                let pci = nic.pci_address?;
                let counts = per_unit(window, &pci.to_string(), transactions)?;
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
        let results = results_of(&r);
        let m = iommutop_model::results::WorkloadResults::from(results.clone())
            .to_map()
            .expect("encodes");
        assert_eq!(m["transactions_per_s"], json!(40839.93));
        assert_eq!(m["p99_latency_us"], json!(116.0));
        assert_eq!(m["request_size"], json!(1024));
        let text = summarize(&results);
        assert!(text.contains("40839.9 transactions/s"), "{text}");
        assert!(text.contains("p99 116.0"), "{text}");
    }
}
