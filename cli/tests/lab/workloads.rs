//! The workloads in the lab (Debian 6.12, emulated Intel VT-d, one vCPU): the profiles run the real
//! netperf and fio in the guest against the lab's e1000e pair and NVMe, and each report holds the
//! workload's numbers beside the devices' probe numbers; dma-contention gives a curve from the
//! probes; the TLB sweep gives a curve per page size with huge pages reserved and given back.
//! Two boots: network and TLB, then disk.

use crate::support::*;
use serde_json::Value;
use std::path::Path;

/// The lab's devices (pinned PCI addresses, docs/lab.md).
const NVME: &str = "0000:00:04.0";
const NICS: [&str; 2] = ["0000:00:05.0", "0000:00:06.0"];

fn step_ok(out: &Path, name: &str) {
    let rc = read(&out.join(format!("{name}.rc")));
    assert_eq!(
        rc.trim(),
        "0",
        "{name} failed: {}",
        std::fs::read_to_string(out.join(format!("{name}.err"))).unwrap_or_default()
    );
}

fn device<'a>(report: &'a Value, key: &str) -> &'a Value {
    report["devices"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["key"] == key))
        .unwrap_or_else(|| panic!("no device {key} in the report"))
}

fn number(v: &Value, what: &str) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| panic!("{what} is not a number: {v}"))
}

fn boot(name: &str, script: &str) -> std::path::PathBuf {
    let out = lab_out_dir(name);
    let script = project_root().join("cli/tests/lab").join(script);
    let output = lab_run(
        &["--kernel", "6.12", "--iommu", "intel", "--smp", "1"],
        &[
            "sh",
            &script.to_string_lossy(),
            &lab_iommutop_bin(),
            &out.to_string_lossy(),
        ],
    );
    assert_succeeded(&output, name);
    out
}

/// The NICs' state (up, addresses) from `ip -j addr`, by name.
fn link_states(path: &Path) -> Vec<(String, Value, Value)> {
    read_json(path)
        .as_array()
        .expect("ip -j addr")
        .iter()
        .filter(|l| l["ifname"].as_str().is_some_and(|n| n.starts_with("eth")))
        .map(|l| {
            (
                l["ifname"].as_str().unwrap_or("").to_string(),
                l["operstate"].clone(),
                l["addr_info"].clone(),
            )
        })
        .collect()
}

#[test]
fn lab_tcp_rr_profile_and_tlb_sweep() {
    if lab_skipped("lab workloads: tcp-rr-1k and tlb") {
        return;
    }
    let out = boot("workloads-net", "workloads-net.sh");

    // tcp-rr-1k: netperf's numbers and the NICs' probe numbers in one valid report.
    step_ok(&out, "tcp-rr");
    let report = read_json(&out.join("tcp-rr.json"));
    assert_valid_report(&report);
    assert_eq!(report["run"]["profile"], "tcp-rr-1k");
    let workload = &report["run"]["workload"];
    assert_eq!(workload["name"], "netperf");
    assert_eq!(workload["params"]["request_size"], 1024);
    let r = &workload["results"];
    assert!(number(&r["transactions_per_s"], "transactions_per_s") > 0.0);
    let transactions = r["transactions"].as_u64().expect("transactions");
    assert!(transactions > 100, "{r}");
    for key in [
        "mean_latency_us",
        "p50_latency_us",
        "p90_latency_us",
        "p99_latency_us",
    ] {
        assert!(number(&r[key], key) > 0.0, "{key}");
    }
    assert!(r["local_cpu_percent"].is_number(), "{r}");
    for nic in NICS {
        // Per transaction, each side maps a TX header, a TX fragment and an RX refill.
        let maps = number(
            &r["per_transaction"][nic]["dma_map"],
            "dma_map per transaction",
        );
        assert!(
            (2.5..=4.5).contains(&maps),
            "{nic}: {maps} maps per transaction"
        );
        let iommu = number(&r["per_transaction"][nic]["iommu_map"], "iommu_map");
        assert!(iommu > 0.0, "{nic}: translated, so IOMMU maps: {iommu}");
        // The same NICs in the report's devices, with the run's totals.
        let row = device(&report, nic);
        assert!(op_count(row, "dma_map") >= transactions * 2);
    }
    assert!(
        number(&r["dma_maps_per_transaction"], "total") >= 5.0,
        "{r}"
    );
    // Live transactions/s in the intervals, for compare's noise estimate.
    let live = report["intervals"]
        .as_array()
        .expect("intervals")
        .iter()
        .filter(|i| i["workload"]["transactions_per_s"].is_number())
        .count();
    assert!(live >= 2, "{live} intervals with live numbers");
    // The NICs came back as they were; no namespace left.
    assert_eq!(
        link_states(&out.join("links-before.json")),
        link_states(&out.join("links-after.json"))
    );
    assert_eq!(read(&out.join("netns-after.txt")).trim(), "");

    // tlb in the guest: ≥ 10 working sets per page size, 2 MiB pages from a reservation that
    // was given back.
    step_ok(&out, "tlb");
    let tlb = read_json(&out.join("tlb.json"));
    let curve = tlb["results"]["curve"].as_array().expect("curve");
    for page in ["4k", "2m"] {
        let n = curve.iter().filter(|p| p["page_size"] == page).count();
        assert!(n >= 10, "{page}: {n} working sets");
    }
    assert_eq!(
        tlb["results"]["page_sizes"]["2m"]["backing"], "hugetlb",
        "{tlb}"
    );
    assert_eq!(
        read(&out.join("hugepages-before")),
        read(&out.join("hugepages-after")),
        "nr_hugepages restored"
    );
}

#[test]
fn lab_fio_profiles_and_dma_contention_on_the_nvme() {
    if lab_skipped("lab workloads: fio and dma-contention") {
        return;
    }
    let out = boot("workloads-disk", "workloads-disk.sh");

    for (profile, dir) in [
        ("fio-randread-4k-qd32x4", "read"),
        ("fio-read-128k-qd128", "read"),
        ("fio-randwrite-4k-qd32x4", "write"),
        ("fio-write-128k-qd128", "write"),
    ] {
        step_ok(&out, profile);
        let report = read_json(&out.join(format!("{profile}.json")));
        assert_valid_report(&report);
        let r = &report["run"]["workload"]["results"];
        assert!(
            number(&r[format!("{dir}_iops")], "iops") > 0.0,
            "{profile}: {r}"
        );
        assert!(
            number(&r[format!("{dir}_clat_p99_us")], "p99") > 0.0,
            "{profile}"
        );
        assert_eq!(r["target"]["pci_address"], NVME, "{profile}");
        // Beside fio's numbers, the NVMe's: maps per I/O from the probes, and its row.
        // One map per 4 KiB random I/O; sequential 128 KiB I/Os are partly merged by the block
        // layer into larger requests, so fewer maps than fio's I/Os (0.8–0.85 seen).
        let maps = number(&r["per_io"][NVME]["dma_map"], "dma_map per I/O");
        let expected = if profile.contains("4k") {
            0.95..=1.5
        } else {
            0.5..=1.5
        };
        assert!(expected.contains(&maps), "{profile}: {maps} maps per I/O");
        let row = device(&report, NVME);
        assert!(row["names"].to_string().contains("nvme0n1"), "{profile}");
        assert!(op_count(row, "dma_map") > 0);
        let other = if dir == "read" {
            "write_iops"
        } else {
            "read_iops"
        };
        assert!(r[other].is_null(), "{profile} did only {dir}s");
    }

    step_ok(&out, "dma-contention");
    let report = read_json(&out.join("dma-contention.json"));
    assert_valid_report(&report);
    let curve = report["run"]["workload"]["results"]["curve"]
        .as_array()
        .expect("curve");
    let threads: Vec<u64> = curve.iter().filter_map(|p| p["threads"].as_u64()).collect();
    assert_eq!(threads, [1, 2, 4, 8]);
    for point in curve {
        let probes = &point["probes"];
        let n = point["threads"].as_u64().unwrap_or(0);
        assert!(
            probes["iova_alloc"]["count"].as_u64().unwrap_or(0) > 0,
            "{n}: {probes}"
        );
        assert!(
            number(&probes["iova_alloc"]["mean_ns"], "iova mean") > 0.0,
            "{n}"
        );
        assert!(
            number(&probes["dma_map"]["mean_ns"], "map mean") > 0.0,
            "{n}"
        );
        assert!(
            number(&probes["dma_unmap"]["p99_ns"], "unmap p99") > 0.0,
            "{n}"
        );
    }

    // A device in use (swap) is never written.
    assert_eq!(
        read(&out.join("swap")).trim(),
        "on",
        "swap could not be set up"
    );
    assert_eq!(read(&out.join("in-use.rc")).trim(), "2");
    let said = read(&out.join("in-use.err"));
    assert!(said.contains("will not write to /dev/nvme0n1"), "{said}");
}
