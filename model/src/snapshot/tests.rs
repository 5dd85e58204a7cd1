use super::*;
use crate::sample::{EntryGroup, Health, OpHealth, OpenCalls, HIST_SLOTS};

fn counters(count: u64, bytes: u64, timed_ns: &[u64]) -> OpCounters {
    let mut hist = vec![0u64; HIST_SLOTS];
    for &ns in timed_ns {
        hist[crate::hist::slot_of(ns)] += 1;
    }
    OpCounters {
        count,
        bytes,
        failures: 0,
        timed: timed_ns.len() as u64,
        total_ns: timed_ns.iter().sum(),
        raw_total_ns: timed_ns.iter().sum(),
        offcpu_ns: 0,
        waited: 0,
        hist,
    }
}

fn source(kind: SourceKind, id: u64, name: &str, ops: &[(Op, OpCounters)]) -> RawSource {
    RawSource {
        kind,
        id,
        name: name.to_string(),
        generation: 0,
        driver: None,
        row: 0,
        ops: ops.iter().cloned().collect(),
        map_directions: Default::default(),
    }
}

fn sample(at_s: u64, sources: Vec<RawSource>) -> RawSample {
    RawSample {
        monotonic_ns: at_s * 1_000_000_000,
        sources,
        ..RawSample::default()
    }
}

fn nvme_facts() -> Vec<DeviceFacts> {
    vec![DeviceFacts {
        pci_address: "0000:00:04.0".parse().expect("address"),
        driver: Some("nvme".into()),
        iommu_group: Some(3),
        domain_type: Some("DMA-FQ".into()),
        iommu_unit: Some("dmar0".into()),
        disks: vec!["nvme0n1".into()],
        children: vec!["nvme0".into()],
        ..DeviceFacts::default()
    }]
}

/// The NVMe bound to nvme (generation 1), then to another driver that mapped too
/// (generation 2), within one interval, while sysfs still says nvme.
fn rebound_within_an_interval() -> (RawSample, RawSample) {
    let bound = |generation, driver: &str, maps| RawSource {
        generation,
        driver: Some(driver.into()),
        ..source(
            SourceKind::Device,
            1,
            "0000:00:04.0",
            &[(Op::DmaMap, counters(maps, maps * 4096, &[]))],
        )
    };
    (
        sample(1, vec![bound(1, "nvme", 100)]),
        sample(
            2,
            vec![bound(1, "nvme", 130), bound(2, "uio_pci_generic", 7)],
        ),
    )
}

#[test]
fn a_new_generation_of_a_key_counts_from_zero_and_one_row_has_both() {
    let (before, after) = rebound_within_an_interval();
    let snapshot = Snapshot::between(&before, &after, &nvme_facts());
    assert_eq!(snapshot.devices.len(), 1);
    let device = snapshot.device("0000:00:04.0").expect("row");
    assert_eq!(device.op(Op::DmaMap).count, 30 + 7);
    assert_eq!(
        device.driver.as_deref(),
        Some("nvme"),
        "sysfs's, in a report"
    );
}

#[test]
fn by_binding_each_driver_has_its_own_row() {
    let (before, after) = rebound_within_an_interval();
    let snapshot = Snapshot::between_by_binding(&before, &after, &nvme_facts());
    let by_driver: Vec<(Option<&str>, u64)> = snapshot
        .devices
        .iter()
        .map(|d| (d.driver.as_deref(), d.op(Op::DmaMap).count))
        .collect();
    assert_eq!(
        by_driver,
        [(Some("nvme"), 30), (Some("uio_pci_generic"), 7)]
    );
    assert!(snapshot.devices.iter().all(|d| d.key == "0000:00:04.0"));
}

#[test]
fn deltas_rates_and_means() {
    let before = sample(
        10,
        vec![source(
            SourceKind::Device,
            1,
            "0000:00:04.0",
            &[(Op::DmaMap, counters(100, 409_600, &[500; 100]))],
        )],
    );
    let after = sample(
        12,
        vec![source(
            SourceKind::Device,
            1,
            "0000:00:04.0",
            &[(Op::DmaMap, counters(300, 1_228_800, &[500; 300]))],
        )],
    );
    let snapshot = Snapshot::between(&before, &after, &nvme_facts());
    assert_eq!(snapshot.interval_ns, 2_000_000_000);
    let device = snapshot.device("0000:00:04.0").expect("row");
    let map = device.op(Op::DmaMap);
    assert_eq!(map.count, 200);
    assert_eq!(map.bytes, 819_200);
    assert_eq!(map.rate_per_s, 100.0);
    assert_eq!(map.avg_bytes, Some(4096.0));
    let latency = map.latency.expect("timed");
    assert_eq!(latency.timed, 200);
    assert_eq!(latency.mean_ns, 500.0);
    assert_eq!(latency.max_ns_bound, 512);
    assert_eq!(device.driver.as_deref(), Some("nvme"));
    assert_eq!(device.iommu_group, Some(3));
    assert_eq!(snapshot.events, 200);
}

#[test]
fn disk_completions_fold_into_their_pci_device() {
    let before = sample(0, vec![]);
    let after = sample(
        1,
        vec![
            source(
                SourceKind::Device,
                1,
                "0000:00:04.0",
                &[(Op::DmaMap, counters(10, 40_960, &[]))],
            ),
            source(
                SourceKind::Disk,
                2,
                "nvme0n1",
                &[(Op::Completion, counters(10, 0, &[]))],
            ),
            source(
                SourceKind::Disk,
                3,
                "sda",
                &[(Op::Completion, counters(5, 0, &[]))],
            ),
        ],
    );
    let snapshot = Snapshot::between(&before, &after, &nvme_facts());
    let keys: Vec<String> = snapshot.devices.iter().map(|d| d.key.to_string()).collect();
    assert_eq!(keys, ["0000:00:04.0", "sda"]);
    let nvme = snapshot.device("0000:00:04.0").expect("row");
    assert_eq!(nvme.completions, 10);
    assert_eq!(nvme.names, ["nvme0n1"]);
    assert_eq!(nvme.derived.maps_per_io, Some(1.0));
    let sda = snapshot.device("sda").expect("row");
    assert_eq!(sda.kind, RowKind::Disk);
    assert_eq!(sda.pci_address, None);
}

#[test]
fn netdev_and_child_names_fold_too() {
    let facts = vec![DeviceFacts {
        pci_address: "0000:00:03.0".parse().expect("address"),
        netdevs: vec!["eth0".into()],
        children: vec!["virtio1".into()],
        ..DeviceFacts::default()
    }];
    let after = sample(
        1,
        vec![
            source(
                SourceKind::Netdev,
                7,
                "eth0",
                &[(Op::Completion, counters(4, 0, &[]))],
            ),
            source(
                SourceKind::Device,
                8,
                "virtio1",
                &[(Op::DmaMap, counters(6, 600, &[]))],
            ),
        ],
    );
    let snapshot = Snapshot::between(&RawSample::default(), &after, &facts);
    assert_eq!(snapshot.devices.len(), 1);
    let nic = &snapshot.devices[0];
    assert_eq!(nic.key, "0000:00:03.0");
    assert_eq!(nic.names, ["eth0", "virtio1"]);
    assert_eq!(nic.completions, 4);
    assert_eq!(nic.op(Op::DmaMap).count, 6);
}

#[test]
fn deferred_work_keeps_its_own_row() {
    let after = sample(
        1,
        vec![
            source(
                SourceKind::Deferred,
                0,
                "",
                &[(Op::FqFlush, counters(3, 0, &[]))],
            ),
            source(
                SourceKind::Deferred,
                9,
                "dmar0",
                &[(Op::IotlbFlush, counters(2, 0, &[]))],
            ),
            source(
                SourceKind::Unattributed,
                0,
                "",
                &[(Op::IommuMap, counters(2, 0, &[]))],
            ),
        ],
    );
    let snapshot = Snapshot::between(&RawSample::default(), &after, &[]);
    let keys: Vec<String> = snapshot.devices.iter().map(|d| d.key.to_string()).collect();
    assert_eq!(keys, ["deferred", "deferred:dmar0", "unattributed"]);
    let kinds: Vec<RowKind> = snapshot.devices.iter().map(|d| d.kind).collect();
    assert_eq!(
        kinds,
        [RowKind::Deferred, RowKind::Deferred, RowKind::Unattributed]
    );
}

/// Every VM's and userspace driver's VFIO maps landed on one `unattributed` row, whoever's work
/// they were.
#[test]
fn unattributed_work_splits_by_process() {
    let maps = |n| vec![(Op::IommuMap, counters(n, 4096 * n, &[]))];
    let after = sample(
        1,
        vec![
            source(SourceKind::Unattributed, 0, "", &maps(1)),
            source(SourceKind::Unattributed, 1234, "qemu", &maps(5)),
            source(SourceKind::Unattributed, 99, "", &maps(2)),
        ],
    );
    let snapshot = Snapshot::between(&RawSample::default(), &after, &[]);
    let rows: Vec<(String, Option<u32>, u64)> = snapshot
        .devices
        .iter()
        .map(|d| (d.key.to_string(), d.pid, d.op(Op::IommuMap).count))
        .collect();
    assert_eq!(
        rows,
        [
            ("unattributed", None, 1),
            ("unattributed:[99]", Some(99), 2),
            ("unattributed:qemu[1234]", Some(1234), 5),
        ]
        .map(|(key, pid, maps)| (key.to_string(), pid, maps))
    );
    let qemu = snapshot.device("unattributed:qemu[1234]").expect("row");
    assert_eq!(qemu.kind, RowKind::Unattributed);
    assert_eq!(qemu.names, ["qemu"]);
    let json = serde_json::to_value(qemu).expect("serializes");
    assert_eq!(json["pid"], 1234);
    let shared =
        serde_json::to_value(snapshot.device("unattributed").expect("row")).expect("serializes");
    assert!(shared.get("pid").is_none(), "{shared}");
}

#[test]
fn unnamed_and_non_pci_sources_get_stable_keys() {
    let after = sample(
        1,
        vec![
            source(
                SourceKind::Device,
                0xffff_8880_0000_1000,
                "",
                &[(Op::DmaMap, counters(1, 1, &[]))],
            ),
            source(
                SourceKind::Device,
                5,
                "ff000000.dma",
                &[(Op::DmaMap, counters(1, 1, &[]))],
            ),
        ],
    );
    let snapshot = Snapshot::between(&RawSample::default(), &after, &[]);
    let keys: Vec<String> = snapshot.devices.iter().map(|d| d.key.to_string()).collect();
    assert_eq!(keys, ["device@ffff888000001000", "ff000000.dma"]);
    assert!(snapshot.devices.iter().all(|d| d.kind == RowKind::Device));
}

#[test]
fn a_source_appearing_between_samples_counts_from_zero() {
    let before = sample(1, vec![]);
    let after = sample(
        2,
        vec![source(
            SourceKind::Device,
            1,
            "0000:00:04.0",
            &[(Op::DmaMap, counters(7, 0, &[]))],
        )],
    );
    let snapshot = Snapshot::between(&before, &after, &[]);
    assert_eq!(snapshot.devices[0].op(Op::DmaMap).count, 7);
}

#[test]
fn counters_going_backwards_are_a_reset_not_an_underflow() {
    let before = sample(
        1,
        vec![source(
            SourceKind::Device,
            1,
            "0000:00:04.0",
            &[
                (Op::DmaMap, counters(1_000, 4_096_000, &[800; 10])),
                (Op::DmaUnmap, counters(5, 0, &[])),
            ],
        )],
    );
    let after = sample(
        2,
        vec![source(
            SourceKind::Device,
            1,
            "0000:00:04.0",
            &[
                (Op::DmaMap, counters(30, 122_880, &[800; 3])),
                (Op::DmaUnmap, counters(9, 0, &[])),
            ],
        )],
    );
    let snapshot = Snapshot::between(&before, &after, &[]);
    let device = &snapshot.devices[0];
    assert_eq!(device.op(Op::DmaMap).count, 30);
    assert_eq!(device.op(Op::DmaMap).latency.expect("timed").timed, 3);
    // The whole source was reset, so the unmap counter is taken whole too.
    assert_eq!(device.op(Op::DmaUnmap).count, 9);
}

#[test]
fn an_op_vanishing_from_a_source_is_a_reset() {
    let before = sample(
        1,
        vec![source(
            SourceKind::Device,
            1,
            "x",
            &[
                (Op::DmaMap, counters(10, 0, &[])),
                (Op::DmaUnmap, counters(10, 0, &[])),
            ],
        )],
    );
    let after = sample(
        2,
        vec![source(
            SourceKind::Device,
            1,
            "x",
            &[(Op::DmaMap, counters(12, 0, &[]))],
        )],
    );
    let snapshot = Snapshot::between(&before, &after, &[]);
    assert_eq!(snapshot.devices[0].op(Op::DmaMap).count, 12);
}

#[test]
fn a_clock_that_did_not_advance_gives_zero_rates() {
    let s = sample(
        5,
        vec![source(
            SourceKind::Device,
            1,
            "x",
            &[(Op::DmaMap, counters(10, 0, &[100]))],
        )],
    );
    let earlier = sample(6, vec![]);
    let snapshot = Snapshot::between(&earlier, &s, &[]);
    assert_eq!(snapshot.interval_ns, 0);
    let device = &snapshot.devices[0];
    assert_eq!(device.op(Op::DmaMap).rate_per_s, 0.0);
    assert_eq!(device.derived.cpu_share, None);
}

#[test]
fn counted_but_untimed_ops_have_no_latency() {
    let after = sample(
        1,
        vec![source(
            SourceKind::Device,
            1,
            "x",
            &[(Op::IommuMap, counters(10, 40_960, &[]))],
        )],
    );
    let snapshot = Snapshot::between(&RawSample::default(), &after, &[]);
    let device = &snapshot.devices[0];
    assert_eq!(device.op(Op::IommuMap).count, 10);
    assert_eq!(device.op(Op::IommuMap).latency, None);
    assert_eq!(device.op(Op::IotlbFlush).avg_bytes, None);
    assert_eq!(device.derived.translation_ns, None);
    assert_eq!(device.derived.translation_ns_per_io, None);
}

#[test]
fn every_op_is_present_in_a_row() {
    let after = sample(1, vec![source(SourceKind::Device, 1, "x", &[])]);
    let snapshot = Snapshot::between(&RawSample::default(), &after, &[]);
    assert_eq!(snapshot.devices[0].ops.len(), Op::ALL.len());
}

#[test]
fn health_and_program_counters_diff_with_resets() {
    let mut before = sample(1, vec![]);
    before.health.insert(Health::DeviceMapFull, 3);
    before
        .program_stats
        .insert("dma__map_page__fentry".into(), (100, 5_000));
    before.program_stats.insert("old".into(), (100, 5_000));
    let mut after = sample(2, vec![]);
    after.health.insert(Health::DeviceMapFull, 5);
    after.health.insert(Health::NestingOverflow, 1);
    after
        .program_stats
        .insert("dma__map_page__fentry".into(), (150, 7_500));
    after.program_stats.insert("old".into(), (10, 700));
    let snapshot = Snapshot::between(&before, &after, &[]);
    assert_eq!(snapshot.health[&Health::DeviceMapFull], 2);
    assert_eq!(snapshot.health[&Health::NestingOverflow], 1);
    assert_eq!(
        snapshot.programs["dma__map_page__fentry"],
        ProgramDelta {
            run_count: 50,
            run_time_ns: 2_500
        }
    );
    assert_eq!(
        snapshot.programs["old"],
        ProgramDelta {
            run_count: 10,
            run_time_ns: 700
        }
    );
}

fn op_health(unseen_entries: u64, understudy_entries: u64) -> OpHealth {
    OpHealth {
        unseen_entries,
        understudy_entries,
        ..OpHealth::default()
    }
}

fn group(programs: &[&str], ops: &[Op], skipped: u64) -> EntryGroup {
    EntryGroup {
        programs: programs.iter().map(|p| p.to_string()).collect(),
        ops: ops.to_vec(),
        skipped,
    }
}

#[test]
fn the_trackers_figures_and_skipped_runs_diff_with_resets() {
    let mut before = sample(1, vec![]);
    before
        .program_misses
        .insert("dma__map_phys__fentry".into(), 4);
    before.program_misses.insert("reloaded".into(), 9);
    before.op_health.insert(Op::DmaMap, op_health(2, 3));
    before.op_health.insert(Op::IommuMap, op_health(5, 0));
    before.op_health.insert(Op::IovaFree, op_health(1, 1));
    before.entry_groups = vec![
        group(&["dma__map_phys__fentry"], &[Op::DmaMap], 4),
        group(&["reloaded"], &[Op::IommuMap], 9),
    ];
    let mut after = sample(2, vec![]);
    after
        .program_misses
        .insert("dma__map_phys__fentry".into(), 10);
    after.program_misses.insert("reloaded".into(), 2);
    after.op_health.insert(Op::DmaMap, op_health(3, 7));
    after.op_health.insert(Op::IommuMap, op_health(1, 0));
    after.op_health.insert(Op::IovaFree, op_health(1, 1));
    after.entry_groups = vec![
        group(&["dma__map_phys__fentry"], &[Op::DmaMap], 10),
        group(&["reloaded"], &[Op::IommuMap], 2),
        group(&["iova__free_fast__fentry"], &[Op::IovaFree], 5),
    ];
    let snapshot = Snapshot::between(&before, &after, &[]);
    assert_eq!(snapshot.program_misses["dma__map_phys__fentry"], 6);
    assert_eq!(snapshot.program_misses["reloaded"], 2, "from its reset");
    assert_eq!(snapshot.op_health[&Op::DmaMap], op_health(1, 4));
    assert_eq!(
        snapshot.op_health[&Op::IommuMap],
        op_health(1, 0),
        "from its reset"
    );
    assert!(
        !snapshot.op_health.contains_key(&Op::IovaFree),
        "nothing over the interval"
    );
    let skipped: Vec<(Vec<String>, u64)> = snapshot
        .entry_groups
        .iter()
        .map(|g| (g.programs.clone(), g.skipped))
        .collect();
    assert_eq!(
        skipped,
        [
            (vec!["dma__map_phys__fentry".to_string()], 6),
            (vec!["reloaded".to_string()], 2),
            (vec!["iova__free_fast__fentry".to_string()], 5),
        ],
        "matched by their programs; a new group counts from zero, a reset one from its reset"
    );
    assert_eq!(snapshot.entry_groups[0].ops, [Op::DmaMap]);
}

#[test]
fn calls_open_at_the_later_sample_land_on_their_rows() {
    let open = |id: u64, op: Op, calls: u64| OpenCalls {
        kind: SourceKind::Device,
        id,
        generation: 0,
        op,
        calls,
    };
    let mut before = sample(1, vec![]);
    before.open_calls = vec![open(1, Op::DmaMap, 40)];
    let mut after = sample(
        2,
        vec![
            source(SourceKind::Device, 1, "0000:00:04.0", &[]),
            source(SourceKind::Device, 2, "nvme0", &[]),
        ],
    );
    after.open_calls = vec![
        open(1, Op::DmaUnmap, 2),
        open(2, Op::DmaUnmap, 1),
        open(3, Op::IommuUnmap, 5),
        open(1, Op::DmaMap, 0),
    ];
    let snapshot = Snapshot::between(&before, &after, &nvme_facts());
    let rows: Vec<(String, Op, u64)> = snapshot
        .open_calls
        .iter()
        .map(|o| (o.key.to_string(), o.op, o.calls))
        .collect();
    assert_eq!(
        rows,
        [
            ("0000:00:04.0".to_string(), Op::DmaUnmap, 3),
            ("device@3".to_string(), Op::IommuUnmap, 5),
        ],
        "the later sample's, a child device's folded into its PCI row, a source without \
         counters known by its id"
    );
}
