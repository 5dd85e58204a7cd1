//! `compare` on reports built like the lab's: TCP_RR between two e1000e NICs, with and without
//! translation, on two kernels, with noisy and quiet interval samples.

mod counts;
mod thresholds;
mod units;

use super::*;
use crate::facts::{DeviceFacts, HostFacts, IommuGroup, IommuUnit, IommuVendor};
use crate::report::{IntervalPoint, ReportInputs, Run, WorkloadReport};
use crate::sample::{OpCounters, RawSample, RawSource, SourceKind, HIST_SLOTS};
use serde_json::json;

const NICS: [(&str, &str, u32); 2] = [("0000:00:05.0", "eth0", 2), ("0000:00:06.0", "eth1", 3)];

/// How one synthetic TCP_RR run looked.
#[derive(Clone)]
struct Run1 {
    kernel: &'static str,
    cmdline: &'static str,
    /// Group type of each NIC (`identity`, `DMA-FQ`, `DMA`).
    domain: [&'static str; 2],
    /// Transactions per second, whole run.
    tps: f64,
    /// Transactions per second of each one-second interval.
    seconds: Vec<f64>,
    /// DMA map / unmap time per call in ns.
    map_ns: u64,
    /// DMA maps per transaction per NIC.
    maps: u64,
    config: &'static [(&'static str, &'static str)],
}

fn counters(count: u64, each_ns: Option<u64>) -> OpCounters {
    let mut hist = vec![0u64; HIST_SLOTS];
    let (timed, total_ns) = match each_ns {
        Some(ns) => {
            hist[crate::hist::slot_of(ns)] = count;
            (count, count * ns)
        }
        None => (0, 0),
    };
    OpCounters {
        count,
        bytes: count * 900,
        failures: 0,
        timed,
        total_ns,
        raw_total_ns: total_ns,
        offcpu_ns: 0,
        waited: 0,
        hist,
    }
}

/// netperf's NICs as its results name them: the devices it drove.
fn nics() -> Vec<serde_json::Value> {
    NICS.iter()
        .zip(["client", "server"])
        .map(|((address, netdev, _), role)| {
            json!({"role": role, "name": netdev, "pci_address": address,
                   "namespace": null, "address": null})
        })
        .collect()
}

fn report(run: &Run1) -> Report {
    let duration = run.seconds.len() as f64;
    let transactions = (run.tps * duration).round() as u64;
    let translated = |i: usize| run.domain[i] != "identity";
    let host = HostFacts {
        kernel_release: Some(run.kernel.into()),
        cmdline: Some(run.cmdline.into()),
        kernel_config: run
            .config
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        iommu_units: vec![IommuUnit {
            name: "dmar0".into(),
            vendor: Some(IommuVendor::Intel),
        }],
        groups: NICS
            .iter()
            .enumerate()
            .map(|(i, (address, _, group))| IommuGroup {
                id: *group,
                domain_type: Some(run.domain[i].into()),
                devices: vec![(*address).into()],
            })
            .collect(),
        devices: NICS
            .iter()
            .enumerate()
            .map(|(i, (address, netdev, group))| DeviceFacts {
                pci_address: address.parse().expect("address"),
                driver: Some("e1000e".into()),
                iommu_group: Some(*group),
                domain_type: Some(run.domain[i].into()),
                iommu_unit: Some("dmar0".into()),
                netdevs: vec![(*netdev).into()],
                ..DeviceFacts::default()
            })
            .collect(),
        lab: true,
    };
    let mut sources = Vec::new();
    for (i, (address, netdev, _)) in NICS.iter().enumerate() {
        let maps = transactions * run.maps;
        let iommu = if translated(i) { maps } else { 0 };
        sources.push(RawSource {
            kind: SourceKind::Device,
            id: 100 + i as u64,
            name: (*address).into(),
            generation: 0,
            driver: None,
            row: 0,
            ops: [
                (Op::DmaMap, counters(maps, Some(run.map_ns))),
                (Op::DmaUnmap, counters(maps, Some(run.map_ns / 2))),
                (Op::IommuMap, counters(iommu, Some(run.map_ns / 3))),
                (Op::IotlbSync, counters(iommu, Some(run.map_ns / 10))),
                (Op::IovaAlloc, counters(iommu, Some(run.map_ns / 10))),
            ]
            .into_iter()
            .collect(),
            map_directions: Default::default(),
        });
        sources.push(RawSource {
            kind: SourceKind::Netdev,
            id: 200 + i as u64,
            name: (*netdev).into(),
            generation: 0,
            driver: None,
            row: 0,
            ops: [(Op::Completion, counters(transactions * 4, None))]
                .into_iter()
                .collect(),
            map_directions: Default::default(),
        });
    }
    let first = RawSample {
        monotonic_ns: 1_000_000_000,
        sources: Vec::new(),
        ..RawSample::default()
    };
    let last = RawSample {
        monotonic_ns: 1_000_000_000 + (duration * 1e9) as u64,
        sources,
        ..RawSample::default()
    };
    let intervals = run
        .seconds
        .iter()
        .enumerate()
        .map(|(s, &tps)| IntervalPoint {
            t_s: s as f64 + 1.0,
            devices: NICS
                .iter()
                .map(|(address, _, _)| {
                    let point = crate::report::IntervalDevice {
                        dma_map_per_s: tps * run.maps as f64,
                        translation_ns_per_io: Some(
                            run.map_ns as f64 * 1.5 * run.maps as f64 / 4.0 * (tps / run.tps),
                        ),
                        completions_per_s: tps * 4.0,
                    };
                    ((*address).into(), point)
                })
                .collect(),
            workload: Some(json!({ "transactions_per_s": tps })),
        })
        .collect();
    Report::build(ReportInputs {
        tool_version: "0.1.0",
        host: &host,
        run: Run {
            started_at: "2026-11-22T12:00:00Z".into(),
            duration_s: duration,
            interval_s: 1.0,
            profile: Some("tcp-rr".into()),
            command: vec![],
            exit_status: Some(0),
            workload: Some(WorkloadReport {
                name: "netperf".into(),
                params: serde_json::from_value(json!({"test": "TCP_RR", "duration_s": duration}))
                    .expect("params"),
                results: crate::results::WorkloadResults::read(
                    "netperf",
                    json!({
                        "transactions_per_s": run.tps,
                        "transactions": transactions,
                        "elapsed_s": duration,
                        "test": "TCP_RR",
                        "mode": "local",
                        "nics": nics(),
                        "command": []
                    })
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
                ),
            }),
            device_filter: None,
            task_filter: None,
        },
        first: &first,
        last: &last,
        probes: vec![],
        bpf_stats_enabled_by_iommutop: false,
        intervals,
        warnings: vec![],
    })
}

const CONFIG_612: &[(&str, &str)] = &[
    ("INTEL_IOMMU", "y"),
    ("INTEL_IOMMU_DEFAULT_ON", "n"),
    ("INTEL_IOMMU_SCALABLE_MODE_DEFAULT_ON", "y"),
    ("IOMMU_DEFAULT_DMA_LAZY", "y"),
    ("IOMMUFD", "n"),
];
const CONFIG_61: &[(&str, &str)] = &[
    ("INTEL_IOMMU", "y"),
    ("INTEL_IOMMU_DEFAULT_ON", "n"),
    ("INTEL_IOMMU_SCALABLE_MODE_DEFAULT_ON", "y"),
    ("IOMMU_DEFAULT_DMA_LAZY", "y"),
];

/// Emulated TCP_RR: every second differs by tens of percent (LAB.md).
fn noisy() -> Vec<f64> {
    vec![943.0, 615.0, 717.0, 845.0, 726.0]
}

fn translated_612() -> Run1 {
    Run1 {
        kernel: "6.12.95+deb12-amd64",
        cmdline: "console=ttyS0 intel_iommu=on iommutop.lab=1",
        domain: ["DMA-FQ", "DMA-FQ"],
        tps: 769.2,
        seconds: noisy(),
        map_ns: 40_000,
        maps: 3,
        config: CONFIG_612,
    }
}

fn passthrough_612() -> Run1 {
    Run1 {
        cmdline: "console=ttyS0 intel_iommu=on iommu.passthrough=1 iommutop.lab=1",
        domain: ["identity", "identity"],
        tps: 820.0,
        seconds: vec![1020.0, 700.0, 810.0, 760.0, 810.0],
        map_ns: 8_000,
        ..translated_612()
    }
}

fn kinds(c: &Comparison) -> Vec<FindingKind> {
    c.findings.iter().map(|f| f.kind).collect()
}

#[test]
fn passthrough_against_translated_names_the_nics_the_cause_and_the_work_only_b_pays() {
    let a = report(&passthrough_612());
    let b = report(&translated_612());
    let c = compare(&a, &b);
    assert_eq!(c.unit, "transaction");
    assert_eq!(kinds(&c), [FindingKind::Workload, FindingKind::Translation]);
    let finding = &c.findings[1];
    assert_eq!(
        finding.headline,
        "IOMMU translation on the NICs 0000:00:05.0 (eth0, e1000e) and 0000:00:06.0 (eth1, \
         e1000e) is the difference: B translates their DMA, A does not"
    );
    assert_eq!(finding.share_of_gap, Some(1.0));
    assert_eq!(
        finding.details[0],
        "cause: command line iommu.passthrough: 1 in A, (not set) in B; default domain type: \
         identity in A, DMA-FQ in B"
    );
    let eth0 = &finding.details[1];
    assert!(
        eth0.starts_with("0000:00:05.0 (eth0, e1000e) per transaction, A → B: DMA maps 3.00 → 3.00, IOMMU page-table maps 0.00 → 3.00, IOTLB syncs 0.00 → 3.00, IOTLB invalidations 0.00 → 0.00, IOMMU work 0ns → "),
        "{eth0}"
    );
    // Noisy seconds: the throughput gap is not attributed.
    let workload = &c.findings[0].headline;
    assert!(
        workload.starts_with(
            "transactions_per_s: 820.0 in A, 769.2 in B (-6.2%): within run-to-run noise"
        ),
        "{workload}"
    );
    assert!(
        workload.ends_with("so no cause is claimed for it"),
        "{workload}"
    );
    let text = c.render(("pt.json", "intel.json"));
    assert!(text.starts_with("A: pt.json: kernel 6.12.95+deb12-amd64; IOMMU intel (dmar0), default domain identity; intel_iommu=on iommu.passthrough=1; workload netperf; 5.0 s from 2026-11-22T12:00:00Z\n"), "{text}");
    assert!(
        text.contains("\n1. [100% of the translation-time gap] IOMMU translation on the NICs"),
        "{text}"
    );
    assert!(
        text.contains("    IOMMU page-table maps  0.00 → 3.00\n"),
        "{text}"
    );
}

#[test]
fn a_gap_beyond_noise_is_credited_to_translation_only_by_its_measured_share() {
    let quiet_a = Run1 {
        seconds: vec![1000.0, 1010.0, 990.0, 1000.0, 1000.0],
        tps: 1000.0,
        ..passthrough_612()
    };
    let quiet_b = Run1 {
        seconds: vec![900.0, 905.0, 895.0, 900.0, 900.0],
        tps: 900.0,
        ..translated_612()
    };
    let c = compare(&report(&quiet_a), &report(&quiet_b));
    let workload = &c.findings[0];
    assert!(
        workload.headline.contains(": beyond run-to-run noise (±"),
        "{}",
        workload.headline
    );
    // 1/900 - 1/1000 s = 111 us per transaction; translation grew by 2 NICs × 3 maps × 48 us.
    let line = &workload.details[0];
    assert!(
        line.starts_with("time per transaction (1 / rate) changed by +111us, translation time per transaction by +288us: translation work in the kernel accounts for about 100% of the change"),
        "{line}"
    );
}

#[test]
fn two_kernels_with_the_same_translation_claim_no_cause() {
    let old = Run1 {
        kernel: "6.1.0-56-amd64",
        config: CONFIG_61,
        tps: 700.0,
        seconds: vec![640.0, 930.0, 510.0, 700.0, 720.0],
        map_ns: 41_000,
        ..translated_612()
    };
    let c = compare(&report(&old), &report(&translated_612()));
    assert_eq!(kinds(&c), [FindingKind::Workload, FindingKind::Same]);
    assert!(
        c.findings[0].headline.contains("within run-to-run noise"),
        "{}",
        c.findings[0].headline
    );
    let same = &c.findings[1];
    assert!(same
        .headline
        .starts_with("translation is the same in both runs"));
    assert!(
        same.details.last().is_some_and(|d| d
            .contains("kernel: 6.1.0-56-amd64 in A, 6.12.95+deb12-amd64 in B")
            && d.contains("CONFIG_IOMMUFD: (absent) in A, n in B")),
        "{:?}",
        same.details
    );
    assert!(
        c.devices
            .iter()
            .all(|d| !d.changed && d.share_of_gap.is_none()),
        "a gap within noise is no one's share"
    );
    let text = c.render(("a", "b"));
    assert!(!text.contains("cause:"), "{text}");
    assert!(!text.contains("of the gap"), "{text}");
    assert!(!text.contains("IOMMU translation on"), "{text}");
    let roles: Vec<Role> = c.host.iter().map(|h| h.role).collect();
    assert_eq!(roles, [Role::Context, Role::Context]);
}

#[test]
fn a_gap_beyond_noise_with_unchanged_translation_is_not_blamed_on_it() {
    let old = Run1 {
        kernel: "6.1.0-56-amd64",
        config: CONFIG_61,
        tps: 1000.0,
        seconds: vec![1000.0, 1010.0, 990.0, 1000.0, 1000.0],
        ..translated_612()
    };
    let new = Run1 {
        tps: 800.0,
        seconds: vec![800.0, 805.0, 795.0, 800.0, 800.0],
        ..translated_612()
    };
    let c = compare(&report(&old), &report(&new));
    let line = &c.findings[0].details[0];
    assert!(
        line.contains("translation time per transaction only by")
            && line.contains("the change is not in the kernel's translation work"),
        "{line}"
    );
}

#[test]
fn a_group_switched_at_run_time_is_named_as_the_cause() {
    let identity = Run1 {
        domain: ["identity", "DMA-FQ"],
        ..translated_612()
    };
    let c = compare(&report(&translated_612()), &report(&identity));
    let finding = c
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::Translation)
        .expect("translation finding");
    assert_eq!(
        finding.headline,
        "IOMMU translation on the NIC 0000:00:05.0 (eth0, e1000e) is the difference: A translates its DMA, B does not"
    );
    assert!(
        finding.details[0].starts_with(
            "cause: the IOMMU group's domain type (0000:00:05.0: group type DMA-FQ in A, identity in B), set at run time"
        ),
        "{:?}",
        finding.details
    );
}

#[test]
fn strict_against_lazy_is_named_with_its_parameter() {
    let strict = Run1 {
        cmdline: "console=ttyS0 intel_iommu=on iommu.strict=1",
        domain: ["DMA", "DMA"],
        ..translated_612()
    };
    let c = compare(&report(&translated_612()), &report(&strict));
    let finding = c
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::Invalidation)
        .expect("invalidation finding");
    assert!(
        finding.details[0].contains("command line iommu.strict: (not set) in A, 1 in B"),
        "{:?}",
        finding.details
    );
    assert!(finding.details[0].contains("default domain type: DMA-FQ in A, DMA in B"));
}

#[test]
fn more_maps_per_transaction_is_a_real_change() {
    let more = Run1 {
        maps: 4,
        ..translated_612()
    };
    let c = compare(&report(&translated_612()), &report(&more));
    assert!(kinds(&c).contains(&FindingKind::Counts), "{:?}", c.findings);
}

#[test]
fn identical_reports_show_no_difference() {
    let r = report(&translated_612());
    let c = compare(&r, &r);
    assert!(c.host.is_empty());
    assert_eq!(kinds(&c), [FindingKind::Workload, FindingKind::Same]);
    assert_eq!(c.devices.len(), 2);
    assert!(c.devices.iter().all(|d| d.share_of_gap.is_none()));
}

#[test]
fn reports_without_workload_numbers_compare_per_completion() {
    let mut a = report(&passthrough_612());
    let mut b = report(&translated_612());
    a.run.workload = None;
    b.run.workload = None;
    let c = compare(&a, &b);
    assert_eq!(c.unit, "completed I/O");
    assert_eq!(c.findings[0].kind, FindingKind::Workload);
    assert!(c.findings[0].headline.starts_with("completions_per_s:"));
    assert_eq!(c.findings[1].kind, FindingKind::Translation);
}

#[test]
fn the_comparison_serializes() {
    let c = compare(&report(&passthrough_612()), &report(&translated_612()));
    let value = serde_json::to_value(&c).expect("serializes");
    assert_eq!(value["findings"][1]["kind"], "translation");
    assert_eq!(value["devices"][0]["transition"], "only_b");
    assert_eq!(value["host"][0]["role"], "translation");
}

/// A 5.10 report: VT-d's own DMA ops, whose page-table hook only exists on that era.
fn with_vtd_own_ops(mut report: Report) -> Report {
    report.probes.push(crate::report::ProbeEntry {
        point: "iommu_map".into(),
        tier: Some(crate::report::Tier::Kprobe),
        symbol: Some("iommu_map, iommu_map_atomic, __domain_mapping".into()),
        status: crate::report::ProbeStatus::Attached,
        latency: true,
        reason: None,
        refused: vec![],
    });
    report
}

#[test]
fn translation_through_another_era_s_code_is_named_with_the_work_of_each() {
    let old = Run1 {
        kernel: "5.10.0-46-amd64",
        ..translated_612()
    };
    let c = compare(&with_vtd_own_ops(report(&old)), &report(&translated_612()));
    let finding = c
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::CodePath)
        .unwrap_or_else(|| panic!("no code-path finding: {:?}", c.findings));
    assert!(
        finding
            .headline
            .contains("translated through different kernel code"),
        "{}",
        finding.headline
    );
    assert!(
        finding.details[0].starts_with("A: VT-d's own DMA ops"),
        "{:?}",
        finding.details
    );
    assert!(
        finding.details[1].starts_with("B: dma-iommu"),
        "{:?}",
        finding.details
    );
    assert!(
        finding.details[2].contains("IOMMU page-table maps 3.00 → 3.00"),
        "{:?}",
        finding.details
    );
    let same_era = compare(&report(&translated_612()), &report(&translated_612()));
    assert!(!kinds(&same_era).contains(&FindingKind::CodePath));
}

#[test]
fn a_count_derived_from_the_rate_gets_the_rate_s_noise_verdict() {
    let slower = Run1 {
        tps: 700.0,
        ..translated_612()
    };
    let c = compare(&report(&translated_612()), &report(&slower));
    let verdict = |name: &str| {
        c.workload
            .iter()
            .find(|m| m.metric == name)
            .unwrap_or_else(|| panic!("no {name}"))
            .significance
    };
    assert!(verdict("transactions_per_s").is_some());
    assert_eq!(verdict("transactions"), verdict("transactions_per_s"));
}

/// A run whose every second did `tps` transactions, give or take one.
fn steady(tps: f64) -> Run1 {
    Run1 {
        tps,
        seconds: vec![tps - 1.0, tps + 1.0, tps, tps - 1.0, tps + 1.0],
        ..translated_612()
    }
}

/// Waiting inside translation: the 6.12-rt AMD-Vi lab report's NVMe waited 63.5% of its DMA
/// map+unmap time (7,534,697,613 of 11,863,474,526 ns, in 3,264 calls), its NIC 1.6% (11,333,432 of
/// 709,417,365 ns): put on eth0 in B and in A, compare names B's waiting in one line with both
/// runs' figures, and the JSON carries them.
#[test]
fn waiting_inside_translation_is_named_with_both_runs_figures() {
    use crate::waiting::tests::{set_ops, RT_NIC, RT_NVME};
    fn eth0(r: &mut Report) -> &mut Device {
        r.devices
            .iter_mut()
            .find(|d| d.key == NICS[0].0)
            .expect("eth0")
    }
    let (mut a, mut b) = (report(&translated_612()), report(&translated_612()));
    set_ops(eth0(&mut a), &RT_NIC, 5_000_000_000);
    set_ops(eth0(&mut b), &RT_NVME, 5_000_000_000);
    let c = compare(&a, &b);
    let waiting: Vec<&Finding> = c
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::Waiting)
        .collect();
    assert_eq!(waiting.len(), 1, "{:?}", c.findings);
    let finding = waiting[0];
    assert!(
        finding.headline.contains("0000:00:05.0"),
        "{}",
        finding.headline
    );
    assert!(
        finding.headline.contains(
            "of its DMA map+unmap time (per transaction), A spent 1.6% (2.95us) switched out, \
             B spent 63.5% (1.96ms) switched out;"
        ),
        "{}",
        finding.headline
    );
    assert!(!finding.headline.contains('\n'));
    let (sa, sb) = (finding.numbers.a.expect("A"), finding.numbers.b.expect("B"));
    assert!((sa - 1.5976).abs() < 1e-3, "{sa}");
    assert!((sb - 63.512).abs() < 1e-3, "{sb}");
    let units = c.b.units.count.expect("transactions");
    let device = c.devices.iter().find(|d| d.key == NICS[0].0).expect("eth0");
    let work = device.b.as_ref().expect("in B");
    assert_eq!(work.dma_waited_calls, Some(3_264));
    let per_unit = work.dma_offcpu_ns.expect("measured");
    assert!(
        (per_unit - 7_534_697_613.0 / units).abs() < 1e-6,
        "{per_unit}"
    );
    // The times compared stay on-CPU: 2,088,212,648 + 1,074,796,635 ns.
    let on_cpu = work.dma_ns.expect("timed");
    assert!((on_cpu - 3_163_009_283.0 / units).abs() < 1e-6, "{on_cpu}");
    let value = serde_json::to_value(&c).expect("serializes");
    let json = value["findings"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["kind"] == "waiting"))
        .expect("a waiting finding in the JSON");
    assert!(
        (json["b"].as_f64().unwrap_or(0.0) - 63.512).abs() < 1e-3,
        "{json}"
    );
    // 1.6% on both sides is no finding.
    let mut b = report(&translated_612());
    set_ops(eth0(&mut b), &RT_NIC, 5_000_000_000);
    assert!(!kinds(&compare(&a, &b)).contains(&FindingKind::Waiting));
}
