use super::*;
use iommutop_model::facts::{DeviceFacts, IommuGroup, IommuUnit, IommuVendor};
use iommutop_model::hist::slot_of;
use iommutop_model::sample::{Health, OpCounters, RawSample, RawSource, SourceKind, HIST_SLOTS};
use iommutop_model::snapshot::Snapshot;

fn nvme_facts() -> DeviceFacts {
    DeviceFacts {
        pci_address: "0000:00:04.0".parse().expect("address"),
        driver: Some("nvme".into()),
        iommu_group: Some(3),
        domain_type: Some("DMA-FQ".into()),
        disks: vec!["nvme0n1".into()],
        ..DeviceFacts::default()
    }
}

/// 2000 timed 4 KiB maps of 1000 ns each (log2 slot 9) and 2000 completions.
fn two_thousand_reads() -> Totals {
    let mut slots = vec![0; HIST_SLOTS];
    slots[slot_of(1_000)] = 2000;
    let maps = OpCounters {
        count: 2000,
        bytes: 2000 * 4096,
        timed: 2000,
        total_ns: 2_000_000,
        hist: slots,
        ..OpCounters::default()
    };
    let completions = OpCounters {
        count: 2000,
        bytes: 2000 * 4096,
        ..OpCounters::default()
    };
    let sample = RawSample {
        monotonic_ns: 1_000_000_000,
        sources: vec![
            RawSource {
                kind: SourceKind::Device,
                id: 1,
                name: "0000:00:04.0".into(),
                generation: 0,
                driver: None,
                row: 0,
                ops: [(Op::DmaMap, maps)].into_iter().collect(),
                map_directions: Default::default(),
            },
            RawSource {
                kind: SourceKind::Disk,
                id: 2,
                name: "nvme0n1".into(),
                generation: 0,
                driver: None,
                row: 0,
                ops: [(Op::Completion, completions)].into_iter().collect(),
                map_directions: Default::default(),
            },
        ],
        program_stats: [("dma__map_page__fentry".to_string(), (2000, 300_000))]
            .into_iter()
            .collect(),
        health: [(Health::DeviceMapFull, 0)].into_iter().collect(),
        ..RawSample::default()
    };
    let mut totals = Totals::default();
    totals.add(&Snapshot::between(
        &RawSample::default(),
        &sample,
        &[nvme_facts()],
    ));
    totals
}

fn host() -> HostLabels {
    HostLabels::from_facts(&HostFacts {
        kernel_release: Some("6.12.95+deb12-amd64".into()),
        cmdline: Some("console=ttyS0 intel_iommu=on iommu.strict=1 quiet".into()),
        iommu_units: vec![IommuUnit {
            name: "dmar0".into(),
            vendor: Some(IommuVendor::Intel),
        }],
        groups: vec![IommuGroup {
            id: 3,
            domain_type: Some("DMA".into()),
            devices: vec!["0000:00:04.0".into()],
        }],
        ..HostFacts::default()
    })
}

fn text(totals: &Totals) -> String {
    let points = [
        PointTier {
            point: "dma_map",
            tier: Some("fentry"),
        },
        PointTier {
            point: "iotlb_flush",
            tier: None,
        },
    ];
    render(&Exposition {
        totals,
        host: &host(),
        points: &points,
        cpus: 2,
        sample_errors: 0,
        rows: RowUse::default(),
    })
    .expect("renders")
}

const NVME: &str = r#"{device="0000:00:04.0",driver="nvme",group="3",domain="DMA-FQ"}"#;

fn assert_line(text: &str, line: &str) {
    assert!(
        text.lines().any(|l| l == line),
        "no line `{line}` in:\n{text}"
    );
}

#[test]
fn a_device_counts_calls_bytes_and_seconds() {
    let text = text(&two_thousand_reads());
    assert_line(&text, &format!("iommutop_dma_maps_total{NVME} 2000"));
    assert_line(
        &text,
        &format!("iommutop_dma_map_bytes_total{NVME} 8192000"),
    );
    assert_line(
        &text,
        &format!("iommutop_dma_map_seconds_total{NVME} 0.002"),
    );
    assert_line(&text, &format!("iommutop_completions_total{NVME} 2000"));
    assert_line(
        &text,
        &format!("iommutop_translation_seconds_total{NVME} 0.002"),
    );
    assert_line(
        &text,
        &format!("iommutop_iotlb_invalidations_total{NVME} 0"),
    );
    assert_line(&text, "# TYPE iommutop_dma_maps_total counter");
}

/// The 6.12-rt AMD-Vi lab report's NVMe maps (fio under load, PREEMPT_RT's sleeping locks):
/// 30,006 timed, 2.088 s on the CPU, 7.057 s switched out in 1,845 of them.
fn rt_nvme_maps() -> Totals {
    let mut slots = vec![0; HIST_SLOTS];
    slots[slot_of(69_593)] = 30_006;
    let maps = OpCounters {
        count: 30_399,
        timed: 30_006,
        total_ns: 2_088_212_648,
        raw_total_ns: 9_814_601_373,
        offcpu_ns: 7_056_693_138,
        waited: 1_845,
        hist: slots,
        ..OpCounters::default()
    };
    let sample = RawSample {
        monotonic_ns: 20_187_021_785,
        sources: vec![RawSource {
            kind: SourceKind::Device,
            id: 1,
            name: "0000:00:04.0".into(),
            generation: 0,
            driver: None,
            row: 0,
            ops: [(Op::DmaMap, maps)].into_iter().collect(),
            map_directions: Default::default(),
        }],
        ..RawSample::default()
    };
    let mut totals = Totals::default();
    totals.add(&Snapshot::between(
        &RawSample::default(),
        &sample,
        &[nvme_facts()],
    ));
    totals
}

/// Waiting inside a call (PREEMPT_RT's sleeping locks) is not its cost. The seconds, the
/// histogram's sum and the translation time are on-CPU; the time switched out and the calls that
/// waited are counters of their own.
#[test]
fn waiting_is_counted_apart_from_the_on_cpu_time() {
    let text = text(&rt_nvme_maps());
    assert_line(
        &text,
        &format!("iommutop_dma_map_seconds_total{NVME} 2.088212648"),
    );
    assert_line(
        &text,
        &format!("iommutop_dma_map_duration_seconds_sum{NVME} 2.088212648"),
    );
    assert_line(
        &text,
        &format!("iommutop_translation_seconds_total{NVME} 2.088212648"),
    );
    assert_line(
        &text,
        &format!("iommutop_dma_map_offcpu_seconds_total{NVME} 7.056693138"),
    );
    assert_line(&text, &format!("iommutop_dma_maps_waited_total{NVME} 1845"));
    assert_line(
        &text,
        "# TYPE iommutop_dma_map_offcpu_seconds_total counter",
    );
    assert_line(&text, "# TYPE iommutop_dma_maps_waited_total counter");
    assert!(
        text.lines()
            .any(|l| l.starts_with("# HELP iommutop_dma_map_seconds_total Per device: on-CPU")),
        "{text}"
    );
    // A device that never waited says 0, as its other counters do.
    let text = self::text(&two_thousand_reads());
    assert_line(
        &text,
        &format!("iommutop_dma_map_offcpu_seconds_total{NVME} 0"),
    );
    assert_line(&text, &format!("iommutop_dma_maps_waited_total{NVME} 0"));
    // Only timed operations have them.
    assert!(!text.contains("iommutop_completion_offcpu_seconds_total"));
}

#[test]
fn latency_buckets_are_the_log2_slots_in_seconds() {
    let text = text(&two_thousand_reads());
    let labels = NVME.trim_end_matches('}');
    // Slot 8 is [256, 512) ns: nothing below 512 ns; slot 9 is [512, 1024) ns.
    assert_line(
        &text,
        &format!("iommutop_dma_map_duration_seconds_bucket{labels},le=\"0.000000512\"}} 0"),
    );
    assert_line(
        &text,
        &format!("iommutop_dma_map_duration_seconds_bucket{labels},le=\"0.000001024\"}} 2000"),
    );
    assert_line(
        &text,
        &format!("iommutop_dma_map_duration_seconds_bucket{labels},le=\"+Inf\"}} 2000"),
    );
    assert_line(
        &text,
        &format!("iommutop_dma_map_duration_seconds_sum{NVME} 0.002"),
    );
    assert_line(
        &text,
        &format!("iommutop_dma_map_duration_seconds_count{NVME} 2000"),
    );
    let buckets = text
        .lines()
        .filter(|l| l.starts_with("iommutop_dma_map_duration_seconds_bucket"))
        .count();
    assert_eq!(buckets, 32, "31 slot bounds and +Inf");
    // Untimed operations have no histogram.
    assert!(!text.contains("iommutop_dma_unmap_duration_seconds_bucket"));
}

#[test]
fn the_host_is_one_info_series() {
    let text = text(&Totals::default());
    assert_line(
        &text,
        r#"iommutop_host_info{kernel="6.12.95+deb12-amd64",iommu="intel",default_domain="DMA",cmdline_iommu="intel_iommu=on iommu.strict=1"} 1"#,
    );
    assert_line(&text, "iommutop_host_cpus 2");
    assert_line(
        &text,
        r#"iommutop_probe_point_attached{point="dma_map",tier="fentry"} 1"#,
    );
    assert_line(
        &text,
        r#"iommutop_probe_point_attached{point="iotlb_flush",tier="none"} 0"#,
    );
}

#[test]
fn the_probes_own_cost_and_health_are_counters() {
    let text = text(&two_thousand_reads());
    assert_line(
        &text,
        r#"iommutop_probe_seconds_total{program="dma__map_page__fentry"} 0.0003"#,
    );
    assert_line(
        &text,
        r#"iommutop_probe_runs_total{program="dma__map_page__fentry"} 2000"#,
    );
    assert_line(&text, "iommutop_probe_events_total 4000");
    assert_line(
        &text,
        r#"iommutop_probe_health_total{counter="device_map_full"} 0"#,
    );
    assert_line(&text, "iommutop_sample_errors_total 0");
}

/// What `promtool check metrics` lints, checked without it: counters end in `_total`, units
/// are base units, every family has help.
#[test]
fn names_follow_the_prometheus_conventions() {
    for family in families(&Exposition {
        totals: &two_thousand_reads(),
        host: &host(),
        points: &[],
        cpus: 1,
        sample_errors: 0,
        rows: RowUse::default(),
    }) {
        let name = family.name();
        assert!(name.starts_with("iommutop_"), "{name}");
        assert!(!family.help().is_empty(), "{name} has no help");
        match family.get_field_type() {
            MetricType::COUNTER => assert!(name.ends_with("_total"), "{name}"),
            _ => assert!(!name.ends_with("_total"), "{name}"),
        }
        for abbreviation in ["_ns", "_us", "_ms", "_nanoseconds", "_kb"] {
            assert!(!name.contains(abbreviation), "{name}");
        }
    }
}

#[test]
fn label_values_are_escaped() {
    let mut host = host();
    host.cmdline_iommu = "iommu=\"pt\"\\".into();
    let text = render(&Exposition {
        totals: &Totals::default(),
        host: &host,
        points: &[],
        cpus: 1,
        sample_errors: 0,
        rows: RowUse::default(),
    })
    .expect("renders");
    assert!(text.contains(r#"cmdline_iommu="iommu=\"pt\"\\""#), "{text}");
}

#[test]
fn a_host_without_an_iommu_says_none() {
    let labels = HostLabels::from_facts(&HostFacts::default());
    assert_eq!(labels.iommu, "none");
    assert_eq!(labels.default_domain, "");
}

/// An igb NIC at 0c.0 and one of its virtual functions, each with timed DMA maps.
fn nic_and_its_vf() -> Totals {
    let pf: iommutop_model::pci::PciAddress = "0000:00:0c.0".parse().expect("address");
    let function = |address: &str, driver: &str, group: u32| DeviceFacts {
        pci_address: address.parse().expect("address"),
        driver: Some(driver.into()),
        iommu_group: Some(group),
        domain_type: Some("DMA-FQ".into()),
        ..DeviceFacts::default()
    };
    let facts = [
        DeviceFacts {
            sriov_numvfs: Some(3),
            ..function("0000:00:0c.0", "igb", 10)
        },
        DeviceFacts {
            physfn: Some(pf),
            ..function("0000:00:1c.0", "igbvf", 11)
        },
    ];
    let maps = |count: u64| {
        let mut slots = vec![0; HIST_SLOTS];
        slots[slot_of(1_000)] = count;
        OpCounters {
            count,
            bytes: count * 1500,
            timed: count,
            total_ns: count * 1_000,
            hist: slots,
            ..OpCounters::default()
        }
    };
    let source = |id: u64, name: &str, count: u64| RawSource {
        kind: SourceKind::Device,
        id,
        name: name.into(),
        generation: 0,
        driver: None,
        row: 0,
        ops: [(Op::DmaMap, maps(count))].into_iter().collect(),
        map_directions: Default::default(),
    };
    let sample = RawSample {
        monotonic_ns: 1_000_000_000,
        sources: vec![source(1, "0000:00:0c.0", 10), source(2, "0000:00:1c.0", 20)],
        ..RawSample::default()
    };
    let mut totals = Totals::default();
    totals.add(&Snapshot::between(&RawSample::default(), &sample, &facts));
    totals
}

/// Every series of an SR-IOV virtual function names its physical function, so that a fleet
/// sums a NIC's VFs with it; no other series has the label.
#[test]
fn a_vfs_series_name_its_physical_function() {
    let text = text(&nic_and_its_vf());
    let series = |device: &str| -> Vec<&str> {
        text.lines()
            .filter(|l| !l.starts_with('#') && l.contains(&format!("device=\"{device}\"")))
            .collect()
    };
    let vf = series("0000:00:1c.0");
    let pf = series("0000:00:0c.0");
    assert_eq!(vf.len(), pf.len(), "the same families for both:\n{text}");
    assert!(vf.len() > 40, "{text}");
    for line in &vf {
        assert!(
            line.contains(r#",physfn="0000:00:0c.0""#),
            "no physfn label: {line}"
        );
    }
    for line in &pf {
        assert!(!line.contains("physfn"), "{line}");
    }
    assert_line(
        &text,
        r#"iommutop_dma_maps_total{device="0000:00:1c.0",driver="igbvf",group="11",domain="DMA-FQ",physfn="0000:00:0c.0"} 20"#,
    );
    assert_line(
        &text,
        r#"iommutop_dma_map_duration_seconds_bucket{device="0000:00:1c.0",driver="igbvf",group="11",domain="DMA-FQ",physfn="0000:00:0c.0",le="+Inf"} 20"#,
    );
    assert_line(
        &text,
        r#"iommutop_dma_maps_total{device="0000:00:0c.0",driver="igb",group="10",domain="DMA-FQ"} 10"#,
    );
}
