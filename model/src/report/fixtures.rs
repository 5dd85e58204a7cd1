//! Reports for tests: one with every field populated, one as small as a report gets.

use super::{
    IntervalPoint, ProbeEntry, ProbeStatus, Refusal, Report, ReportInputs, Run, Tier,
    WorkloadReport,
};
use crate::facts::{DeviceFacts, HostFacts, IommuGroup, IommuUnit, IommuVendor};
use crate::sample::{
    EntryGroup, Health, Op, OpCounters, OpHealth, OpenCalls, RawSample, RawSource, SourceKind,
    HIST_SLOTS,
};
use crate::snapshot::Snapshot;
use serde_json::json;

/// `count` calls of which those in `timed_ns` were timed, `bytes_each` bytes each.
pub fn counters(count: u64, bytes_each: u64, timed_ns: &[u64]) -> OpCounters {
    let mut hist = vec![0u64; HIST_SLOTS];
    for &ns in timed_ns {
        hist[crate::hist::slot_of(ns)] += 1;
    }
    OpCounters {
        count,
        bytes: count * bytes_each,
        failures: 0,
        timed: timed_ns.len() as u64,
        total_ns: timed_ns.iter().sum(),
        raw_total_ns: timed_ns.iter().sum(),
        offcpu_ns: 0,
        waited: 0,
        hist,
    }
}

/// The same calls as measured with a quarter of their own time again spent in nested probes.
fn with_nested_probes(mut counters: OpCounters) -> OpCounters {
    counters.raw_total_ns = counters.total_ns + counters.total_ns / 4;
    counters
}

pub fn host() -> HostFacts {
    HostFacts {
        kernel_release: Some("6.12.95+deb12-amd64".into()),
        cmdline: Some("console=ttyS0 intel_iommu=on iommutop.lab=1".into()),
        kernel_config: [("INTEL_IOMMU", "y"), ("IOMMU_DEFAULT_DMA_LAZY", "y")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        iommu_units: vec![IommuUnit {
            name: "dmar0".into(),
            vendor: Some(IommuVendor::Intel),
        }],
        groups: vec![IommuGroup {
            id: 3,
            domain_type: Some("DMA-FQ".into()),
            devices: vec!["0000:00:02.0".into()],
        }],
        devices: vec![DeviceFacts {
            pci_address: "0000:00:02.0".parse().expect("address"),
            driver: Some("nvme".into()),
            vendor_id: Some(0x1b36),
            device_id: Some(0x0010),
            class: Some(0x010802),
            iommu_group: Some(3),
            domain_type: Some("DMA-FQ".into()),
            iommu_unit: Some("dmar0".into()),
            netdevs: vec![],
            disks: vec!["nvme0n1".into()],
            children: vec!["nvme0".into()],
            physfn: None,
            sriov_numvfs: None,
        }],
        lab: true,
    }
}

fn nvme_source(reads: u64) -> RawSource {
    let map_ns = vec![2_000u64; reads as usize];
    let unmap_ns = vec![1_000u64; reads as usize];
    let iova_ns = vec![300u64; reads as usize];
    RawSource {
        kind: SourceKind::Device,
        id: 0xffff_8880_0123_4000,
        name: "0000:00:02.0".into(),
        generation: 0,
        driver: None,
        row: 0,
        ops: [
            (
                Op::DmaMap,
                with_nested_probes(counters(reads, 4096, &map_ns)),
            ),
            (Op::DmaUnmap, counters(reads, 4096, &unmap_ns)),
            (Op::IovaAlloc, counters(reads, 4096, &iova_ns)),
            (Op::IommuMap, counters(reads, 4096, &[])),
            (Op::IotlbSync, counters(reads, 0, &[])),
        ]
        .into_iter()
        .collect(),
        map_directions: Default::default(),
    }
}

fn disk_source(reads: u64) -> RawSource {
    RawSource {
        kind: SourceKind::Disk,
        id: 0xffff_8880_0456_0000,
        name: "nvme0n1".into(),
        generation: 0,
        driver: None,
        row: 0,
        ops: [(Op::Completion, counters(reads, 4096, &[]))]
            .into_iter()
            .collect(),
        map_directions: Default::default(),
    }
}

pub fn first_sample() -> RawSample {
    RawSample {
        monotonic_ns: 1_000_000_000,
        sources: vec![nvme_source(0)],
        ..RawSample::default()
    }
}

pub fn last_sample() -> RawSample {
    let mut sample = RawSample {
        monotonic_ns: 3_000_000_000,
        sources: vec![
            nvme_source(4_000),
            disk_source(4_000),
            RawSource {
                kind: SourceKind::Deferred,
                id: 0,
                name: String::new(),
                generation: 0,
                driver: None,
                row: 0,
                ops: [(Op::FqFlush, counters(20, 0, &[]))].into_iter().collect(),
                map_directions: Default::default(),
            },
        ],
        ..RawSample::default()
    };
    sample.health.insert(Health::NestingOverflow, 2);
    sample
        .program_stats
        .insert("dma__map_page__fentry".into(), (8_000, 1_200_000));
    sample
        .program_stats
        .insert("dma__map_page__fexit".into(), (8_000, 1_600_000));
    with_losses(sample)
}

/// The figures of calls not seen whole: the DMA map and unmap entries share a group (a
/// multi-function program serves both), whose 12 skipped runs were 6 understudies' entries and 4
/// exits that found no frame, 2 lost; the page-table map tracepoint skipped 3 runs; one unmap of
/// the NVMe was still open at the end.
fn with_losses(mut sample: RawSample) -> RawSample {
    sample.program_misses = [
        ("dma__map_page__fentry", 8),
        ("multi__device__fentry", 4),
        ("iommu__map__tp", 3),
    ]
    .into_iter()
    .map(|(name, misses)| (name.to_string(), misses))
    .collect();
    let health = |unseen_entries, understudy_entries| OpHealth {
        unseen_entries,
        understudy_entries,
        ..OpHealth::default()
    };
    sample.op_health = [(Op::DmaMap, health(3, 6)), (Op::DmaUnmap, health(1, 0))]
        .into_iter()
        .collect();
    sample.entry_groups = vec![
        EntryGroup {
            programs: vec![
                "dma__map_page__fentry".into(),
                "multi__device__fentry".into(),
            ],
            ops: vec![Op::DmaMap, Op::DmaUnmap],
            skipped: 12,
        },
        EntryGroup {
            programs: vec!["iommu__map__tp".into()],
            ops: vec![Op::IommuMap],
            skipped: 3,
        },
    ];
    sample.open_calls = vec![OpenCalls {
        kind: SourceKind::Device,
        id: 0xffff_8880_0123_4000,
        generation: 0,
        op: Op::DmaUnmap,
        calls: 1,
    }];
    sample
}

pub fn probes() -> Vec<ProbeEntry> {
    vec![
        ProbeEntry {
            point: "dma_map".into(),
            tier: Some(Tier::Fentry),
            symbol: Some("dma_map_page_attrs".into()),
            status: ProbeStatus::Attached,
            latency: true,
            reason: None,
            refused: vec![],
        },
        ProbeEntry {
            point: "iommu_map".into(),
            tier: Some(Tier::Tracepoint),
            symbol: Some("iommu:map".into()),
            status: ProbeStatus::Attached,
            latency: false,
            reason: None,
            refused: vec![
                Refusal {
                    tier: Tier::Fentry,
                    reason: "no BTF for iommu_map".into(),
                },
                Refusal {
                    tier: Tier::Kprobe,
                    reason: "kprobes are not built into this kernel".into(),
                },
            ],
        },
        ProbeEntry {
            point: "iotlb_flush".into(),
            tier: None,
            symbol: None,
            status: ProbeStatus::Unavailable,
            latency: false,
            reason: Some("no vendor IOTLB function in kallsyms".into()),
            refused: vec![],
        },
    ]
}

pub fn full_report() -> Report {
    let host = host();
    let first = first_sample();
    let last = last_sample();
    let interval = Snapshot::between(&first, &last, &host.devices);
    let mut report = Report::build(ReportInputs {
        tool_version: "0.1.0",
        host: &host,
        run: Run {
            started_at: "2025-03-01T12:00:00Z".into(),
            duration_s: 2.0,
            interval_s: 1.0,
            profile: Some("nvme-4k-read".into()),
            command: vec![],
            exit_status: Some(0),
            workload: Some(WorkloadReport {
                name: "fio".into(),
                params: serde_json::from_value(json!({"bs": "4k", "iodepth": 1})).expect("params"),
                results: crate::results::WorkloadResults::read(
                    "fio",
                    json!({"read_iops": 2000.0})
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
        probes: probes(),
        bpf_stats_enabled_by_iommutop: true,
        intervals: vec![IntervalPoint::from_snapshot(
            2.0,
            &interval,
            Some(json!({"read_iops": 2000.0})),
        )],
        warnings: vec!["kprobes unavailable: CONFIG_KPROBES is off".into()],
    });
    report.self_overhead.dispatch_ns = Some(431);
    report.self_overhead.nested_dispatch_ns = Some(903);
    report
}

pub fn minimal_report() -> Report {
    report_with_probes(vec![])
}

/// The minimal report of a run whose probes went as given.
pub fn report_with_probes(probes: Vec<ProbeEntry>) -> Report {
    let host = HostFacts::default();
    let sample = RawSample::default();
    Report::build(ReportInputs {
        tool_version: "0.1.0",
        host: &host,
        run: Run {
            started_at: "1970-01-01T00:00:00Z".into(),
            duration_s: 0.0,
            interval_s: 1.0,
            profile: None,
            command: vec![],
            exit_status: None,
            workload: None,
            device_filter: None,
            task_filter: None,
        },
        first: &sample,
        last: &sample,
        probes,
        bpf_stats_enabled_by_iommutop: false,
        intervals: vec![],
        warnings: vec![],
    })
}

/// The full report as `run --runs 2 --warmup 1` writes it: two runs' numbers beside the whole.
pub fn repeated_report() -> Report {
    use super::repeats::{RepeatRun, Repeats};
    let mut report = full_report();
    let results = |iops: f64| {
        let results = json!({"read_iops": iops, "rw": "randread"});
        crate::results::WorkloadResults::read(
            "fio",
            results.as_object().cloned().unwrap_or_default(),
        )
    };
    let runs = vec![
        RepeatRun::new(0.0, 1.0, &results(1900.0), &report.devices),
        RepeatRun::new(1.0, 1.0, &results(2100.0), &report.devices),
    ];
    report.repeats = Some(Repeats::new(1, runs));
    report
}

/// The NICs of [`two_workloads_report`]: address, netdev, IOMMU group, and the time of each DMA
/// map and unmap call (ns).
const TWO_WORKLOADS_NICS: [(&str, &str, u32, u64, u64); 2] = [
    ("0000:00:05.0", "eth0", 2, 4_000, 2_000),
    ("0000:00:06.0", "eth1", 3, 3_000, 1_000),
];

/// A run with two workloads at once: netperf TCP_RR between eth0 and eth1, the report's
/// workload, while something else read the NVMe, which netperf did not drive. Every device's
/// calls take the same time each, so each figure per unit is exact. Every group is `domain`
/// (`DMA-FQ`, or `identity`: no IOMMU work at all).
pub fn two_workloads_report(domain: &str) -> Report {
    use crate::results::netperf::{NetperfResults, Nic, NicPerTransaction};
    use crate::results::PerUnit;
    use iommutop_abi::workload::{Headline, WorkUnit};
    const TRANSACTIONS: u64 = 2_000;
    const READS: u64 = 8_000;
    let translated = domain != "identity";
    let iommu = |count: u64| if translated { count } else { 0 };
    let fact = |address: &str, driver: &str, group: u32| DeviceFacts {
        pci_address: address.parse().expect("address"),
        driver: Some(driver.into()),
        iommu_group: Some(group),
        domain_type: Some(domain.into()),
        iommu_unit: Some("dmar0".into()),
        ..DeviceFacts::default()
    };
    let mut devices = vec![DeviceFacts {
        disks: vec!["nvme0n1".into()],
        children: vec!["nvme0".into()],
        ..fact("0000:00:04.0", "nvme", 1)
    }];
    for (address, netdev, group, _, _) in TWO_WORKLOADS_NICS {
        devices.push(DeviceFacts {
            netdevs: vec![netdev.into()],
            ..fact(address, "e1000e", group)
        });
    }
    let host = HostFacts {
        groups: devices
            .iter()
            .map(|d| IommuGroup {
                id: d.iommu_group.unwrap_or_default(),
                domain_type: Some(domain.into()),
                devices: vec![d.pci_address.to_string()],
            })
            .collect(),
        devices,
        ..self::host()
    };
    let timed = |count: u64, bytes: u64, ns: u64| counters(count, bytes, &vec![ns; count as usize]);
    let source = |kind: SourceKind, id: u64, name: &str, ops: Vec<(Op, OpCounters)>| RawSource {
        kind,
        id,
        name: name.into(),
        generation: 0,
        driver: None,
        row: 0,
        ops: ops.into_iter().collect(),
        map_directions: Default::default(),
    };
    let mut sources = vec![
        source(
            SourceKind::Device,
            1,
            "0000:00:04.0",
            vec![
                (Op::DmaMap, timed(READS, 4096, 10_000)),
                (Op::DmaUnmap, timed(READS, 4096, 5_300)),
                (Op::IovaAlloc, timed(iommu(READS), 4096, 1_530)),
                (Op::IommuMap, counters(iommu(READS), 4096, &[])),
                (Op::IotlbSync, counters(iommu(READS), 0, &[])),
            ],
        ),
        source(
            SourceKind::Disk,
            2,
            "nvme0n1",
            vec![(Op::Completion, counters(READS, 4096, &[]))],
        ),
    ];
    let maps = 3 * TRANSACTIONS;
    for (i, (address, netdev, _, map_ns, unmap_ns)) in TWO_WORKLOADS_NICS.into_iter().enumerate() {
        let id = 10 + 2 * i as u64;
        sources.push(source(
            SourceKind::Device,
            id,
            address,
            vec![
                (Op::DmaMap, timed(maps, 900, map_ns)),
                (Op::DmaUnmap, timed(maps, 900, unmap_ns)),
                (Op::IommuMap, counters(iommu(maps), 900, &[])),
                (Op::IotlbSync, counters(iommu(maps), 0, &[])),
            ],
        ));
        sources.push(source(
            SourceKind::Netdev,
            id + 1,
            netdev,
            vec![
                (Op::Completion, counters(2 * TRANSACTIONS, 1024, &[])),
                (Op::TxPackets, counters(2 * TRANSACTIONS, 0, &[])),
            ],
        ));
    }
    let first = RawSample {
        monotonic_ns: 1_000_000_000,
        ..RawSample::default()
    };
    let last = RawSample {
        monotonic_ns: 3_000_000_000,
        sources,
        ..RawSample::default()
    };
    let interval = Snapshot::between(&first, &last, &host.devices);
    let per_transaction = TWO_WORKLOADS_NICS
        .iter()
        .zip(["client", "server"])
        .map(|((address, netdev, ..), role)| {
            let counts = PerUnit {
                completion: 2.0,
                dma_map: 3.0,
                dma_unmap: 3.0,
                iommu_map: if translated { 3.0 } else { 0.0 },
                iotlb_sync: if translated { 3.0 } else { 0.0 },
                ..PerUnit::default()
            };
            let nic = NicPerTransaction {
                counts,
                name: (*netdev).into(),
                role: role.into(),
            };
            ((*address).parse().expect("a PCI address"), nic)
        })
        .collect();
    let netperf = NetperfResults {
        transactions_per_s: 1_000.0,
        transactions: TRANSACTIONS,
        elapsed_s: 2.0,
        test: "TCP_RR".into(),
        mode: "local".into(),
        nics: TWO_WORKLOADS_NICS
            .iter()
            .zip(["client", "server"])
            .map(|((address, netdev, ..), role)| Nic {
                role: role.into(),
                name: (*netdev).into(),
                pci_address: Some(address.parse().expect("address")),
                namespace: None,
                address: None,
            })
            .collect(),
        per_transaction: Some(per_transaction),
        work: Some(Headline::counted(
            WorkUnit::Transaction,
            TRANSACTIONS as f64,
            "transactions_per_s",
            1_000.0,
        )),
        ..NetperfResults::default()
    };
    Report::build(ReportInputs {
        tool_version: "0.1.0",
        host: &host,
        run: Run {
            started_at: "2026-11-22T12:00:00Z".into(),
            duration_s: 2.0,
            interval_s: 2.0,
            profile: Some("tcp-rr-1k".into()),
            command: vec![],
            exit_status: Some(0),
            workload: Some(WorkloadReport {
                name: "netperf".into(),
                params: serde_json::from_value(json!({"test": "TCP_RR"})).expect("params"),
                results: netperf.into(),
            }),
            device_filter: None,
            task_filter: None,
        },
        first: &first,
        last: &last,
        probes: probes(),
        bpf_stats_enabled_by_iommutop: false,
        intervals: vec![IntervalPoint::from_snapshot(
            2.0,
            &interval,
            Some(json!({"transactions_per_s": 1_000.0})),
        )],
        warnings: vec![],
    })
}

/// The PCI functions of [`sriov_report`]: address, driver, netdev, its physical function, DMA
/// maps. An igb NIC at 0c.0 with three VFs (QEMU puts them at its devfn + 0x80, stride 2), and
/// an e1000e at 0d.0 that sorts between the PF and its VFs.
const SRIOV_FUNCTIONS: [(&str, &str, &str, Option<&str>, u64); 5] = [
    ("0000:00:0c.0", "igb", "eth1", None, 300),
    ("0000:00:0d.0", "e1000e", "eth2", None, 2_000),
    ("0000:00:1c.0", "igbvf", "eth3", Some("0000:00:0c.0"), 1_000),
    ("0000:00:1c.2", "igbvf", "eth4", Some("0000:00:0c.0"), 500),
    ("0000:00:1c.4", "igbvf", "eth5", Some("0000:00:0c.0"), 4_000),
];

/// The full report's NVMe and deferred work beside an SR-IOV NIC and three of its VFs, each
/// with DMA maps of its own.
pub fn sriov_report() -> Report {
    let mut host = host();
    for (i, (address, driver, netdev, physfn, _)) in SRIOV_FUNCTIONS.into_iter().enumerate() {
        let group = 10 + i as u32;
        host.devices.push(DeviceFacts {
            pci_address: address.parse().expect("address"),
            driver: Some(driver.into()),
            iommu_group: Some(group),
            domain_type: Some("DMA-FQ".into()),
            iommu_unit: Some("dmar0".into()),
            netdevs: vec![netdev.into()],
            physfn: physfn.map(|pf| pf.parse().expect("address")),
            sriov_numvfs: (driver == "igb").then_some(3),
            ..DeviceFacts::default()
        });
        host.groups.push(IommuGroup {
            id: group,
            domain_type: Some("DMA-FQ".into()),
            devices: vec![address.into()],
        });
    }
    let first = first_sample();
    let mut last = last_sample();
    for (i, (address, _, _, _, maps)) in SRIOV_FUNCTIONS.into_iter().enumerate() {
        last.sources.push(RawSource {
            kind: SourceKind::Device,
            id: 0xffff_8880_0800_0000 + i as u64,
            name: address.into(),
            generation: 0,
            driver: None,
            row: 0,
            ops: [(Op::DmaMap, counters(maps, 1500, &[]))]
                .into_iter()
                .collect(),
            map_directions: Default::default(),
        });
    }
    Report {
        devices: Snapshot::between(&first, &last, &host.devices).devices,
        ..full_report()
    }
}
