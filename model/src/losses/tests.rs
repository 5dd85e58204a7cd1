use super::*;
use crate::facts::DeviceFacts;
use crate::report::Tier;
use crate::sample::{OpCounters, OpenCalls, RawSample, RawSource, SourceKind, HIST_SLOTS};

const NVME: &str = "0000:00:04.0";

/// `count` calls of which `timed` were timed, 1 µs each.
fn counters(count: u64, timed: u64) -> OpCounters {
    let mut hist = vec![0u64; HIST_SLOTS];
    hist[crate::hist::slot_of(1_000)] = timed;
    OpCounters {
        count,
        timed,
        total_ns: timed * 1_000,
        raw_total_ns: timed * 1_000,
        hist,
        ..OpCounters::default()
    }
}

fn nvme(ops: &[(Op, u64, u64)]) -> RawSource {
    RawSource {
        kind: SourceKind::Device,
        id: 7,
        name: NVME.into(),
        generation: 0,
        driver: None,
        row: 0,
        ops: ops
            .iter()
            .map(|&(op, count, timed)| (op, counters(count, timed)))
            .collect(),
        map_directions: Default::default(),
    }
}

fn facts() -> Vec<DeviceFacts> {
    vec![DeviceFacts {
        pci_address: NVME.parse().expect("address"),
        driver: Some("nvme".into()),
        ..DeviceFacts::default()
    }]
}

fn probe(point: &str, tier: Tier) -> ProbeEntry {
    ProbeEntry {
        point: point.into(),
        tier: Some(tier),
        symbol: None,
        status: ProbeStatus::Attached,
        latency: tier.measures_latency(),
        reason: None,
        refused: vec![],
    }
}

fn group(programs: &[&str], ops: &[Op], skipped: u64) -> EntryGroup {
    EntryGroup {
        programs: programs.iter().map(|p| p.to_string()).collect(),
        ops: ops.to_vec(),
        skipped,
    }
}

fn health(unseen_entries: u64, understudy_entries: u64, unpushed: u64) -> OpHealth {
    OpHealth {
        unseen_entries,
        understudy_entries,
        unpushed,
        ..OpHealth::default()
    }
}

/// The losses between an empty first sample and `last`, with `dma_map` and `dma_unmap` timed and
/// `iommu_map` counted by a tracepoint.
fn losses_of(last: RawSample) -> Losses {
    let first = RawSample::default();
    let snapshot = Snapshot::between(&first, &last, &facts());
    Losses::of(
        &snapshot,
        &[
            probe("dma_map", Tier::Fentry),
            probe("dma_unmap", Tier::Fentry),
            probe("iommu_map", Tier::Tracepoint),
        ],
    )
}

#[test]
fn the_lost_calls_are_the_skipped_entries_no_one_saw() {
    // 10 entry runs skipped: 4 entered by an understudy, 3 counted by their exits, of which 1
    // was an entry seen but not pushed (its exit counted it too): 10 − (4 + 3 − 1) = 4.
    assert_eq!(lost_calls(10, 4, 3, 1), 4);
    assert_eq!(lost_calls(0, 0, 0, 0), 0);
    // An unpushed entry's exit is among the unseen entries: it covers no skipped run.
    assert_eq!(lost_calls(2, 0, 1, 1), 2);
}

#[test]
fn more_seen_than_skipped_is_clamped_at_zero() {
    // Exits of calls that began before the probes attached find no frame either.
    assert_eq!(lost_calls(3, 2, 5, 0), 0);
    assert_eq!(lost_calls(0, 0, u64::MAX, 0), 0);
    assert_eq!(lost_calls(u64::MAX, 0, 0, u64::MAX), u64::MAX);
}

#[test]
fn a_group_of_one_op_loses_its_own_calls() {
    let g = GroupLosses::of(
        &group(&["dma__map_phys__fentry"], &[Op::DmaMap], 12),
        &BTreeMap::from([
            (Op::DmaMap, health(3, 5, 1)),
            (Op::DmaUnmap, health(9, 9, 0)),
        ]),
    );
    assert_eq!(
        (g.understudy_entries, g.unseen_entries, g.unpushed),
        (5, 3, 1),
        "the group's own op only"
    );
    assert_eq!(g.lost, 5);
}

#[test]
fn a_group_of_several_ops_sums_their_terms_and_loses_as_one() {
    let ops = [Op::IovaAlloc, Op::IommuMap, Op::IotlbSync];
    let mut last = RawSample {
        sources: vec![nvme(&[(Op::IovaAlloc, 100, 100), (Op::IommuMap, 100, 100)])],
        entry_groups: vec![group(&["multi__mapping__fentry"], &ops, 20)],
        ..RawSample::default()
    };
    last.op_health.insert(Op::IovaAlloc, health(4, 6, 0));
    last.op_health.insert(Op::IommuMap, health(2, 1, 0));
    let losses = losses_of(last);
    assert_eq!(losses.groups.len(), 1);
    assert_eq!(losses.groups[0].lost, 20 - (4 + 6 + 2 + 1));
    let iommu_map = &losses.ops[&Op::IommuMap];
    assert_eq!(iommu_map.lost, Some(7), "the group's figure");
    assert_eq!(iommu_map.lost_with, [Op::IovaAlloc, Op::IotlbSync]);
    assert_eq!(losses.ops[&Op::IotlbSync].lost, Some(7));
    let warnings = losses.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(
            "7 events of iova_alloc, iommu_map or iotlb_sync were seen by no probe program"
        ),
        "{warnings:?}"
    );
    assert!(warnings[0].contains("which of them each was, it cannot say"));
}

#[test]
fn a_count_only_group_loses_its_skipped_runs() {
    let last = RawSample {
        sources: vec![nvme(&[(Op::IommuMap, 500, 0)])],
        entry_groups: vec![group(&["iommu__map__tp"], &[Op::IommuMap], 6)],
        ..RawSample::default()
    };
    let losses = losses_of(last);
    let iommu_map = &losses.ops[&Op::IommuMap];
    assert_eq!(iommu_map.lost, Some(6));
    assert_eq!(iommu_map.untimed, None, "a tracepoint times nothing");
    assert_eq!(iommu_map.untimed_share, None);
    assert!(iommu_map.devices.is_empty());
    assert_eq!(
        losses.warnings(),
        [
            "6 iommu_map events were seen by no probe program (the kernel skipped every program \
          that could have seen them): the counts are short by that many (of which devices, \
          nothing tells: neither end was seen)"
        ]
    );
}

#[test]
fn an_exact_run_says_nothing() {
    // Every skipped entry was made by an understudy or counted by its exit; 1 call in 1,000
    // untimed (0.1%, not over it).
    let mut last = RawSample {
        sources: vec![nvme(&[
            (Op::DmaMap, 1_000, 999),
            (Op::DmaUnmap, 1_000, 1_000),
        ])],
        entry_groups: vec![
            group(&["dma__map_phys__fentry"], &[Op::DmaMap], 7),
            group(&["dma__unmap_phys__fentry"], &[Op::DmaUnmap], 0),
        ],
        ..RawSample::default()
    };
    last.op_health.insert(Op::DmaMap, health(1, 6, 0));
    let losses = losses_of(last);
    assert_eq!(losses.warnings(), Vec::<String>::new());
    let dma_map = &losses.ops[&Op::DmaMap];
    assert_eq!(
        (dma_map.calls, dma_map.untimed, dma_map.lost),
        (1_000, Some(1), Some(0))
    );
    assert_eq!(dma_map.understudy_entries, 6);
    assert_eq!(dma_map.devices[&NVME.into()].untimed, Some(1));
    assert!(!losses.ops[&Op::DmaUnmap].devices.contains_key(&NVME.into()));
    assert_eq!(losses.lost_groups().count(), 0);
    assert_eq!(losses.untimed_over_limit().count(), 0);
    assert!(losses.any(), "one call untimed is still shown in the table");
}

#[test]
fn skipped_runs_beyond_what_was_seen_are_said_lost() {
    let mut last = RawSample {
        sources: vec![nvme(&[(Op::DmaMap, 1_000, 1_000)])],
        entry_groups: vec![group(&["dma__map_phys__fentry"], &[Op::DmaMap], 19)],
        ..RawSample::default()
    };
    last.op_health.insert(Op::DmaMap, health(3, 4, 0));
    let warnings = losses_of(last).warnings();
    assert_eq!(
        warnings,
        ["12 dma_map calls were seen by no probe program (the kernel skipped every program that \
          could have seen them): the counts are short by that many (of which devices, nothing \
          tells: neither end was seen)"]
    );
}

#[test]
fn untimed_calls_over_a_thousandth_are_said() {
    let last = RawSample {
        sources: vec![nvme(&[
            (Op::DmaMap, 1_000, 998),
            (Op::DmaUnmap, 2_000, 1_998),
        ])],
        ..RawSample::default()
    };
    let losses = losses_of(last);
    assert_eq!(
        losses.warnings(),
        [
            "2 of 1000 dma_map calls (0.20%) were counted but not timed (an interrupt or a \
          preemption landed in their probes): the latency figures leave them out"
        ],
        "dma_unmap's 2 of 2,000 are 0.1%: not over it"
    );
    assert_eq!(losses.ops[&Op::DmaUnmap].untimed_share, Some(0.001));
    assert_eq!(losses.ops[&Op::DmaMap].lost, None, "no group serves it");
}

#[test]
fn calls_open_at_the_end_are_the_devices() {
    let last = RawSample {
        sources: vec![nvme(&[(Op::DmaUnmap, 50, 50)])],
        entry_groups: vec![group(&["dma__unmap_phys__fentry"], &[Op::DmaUnmap], 0)],
        open_calls: vec![
            OpenCalls {
                kind: SourceKind::Device,
                id: 7,
                generation: 0,
                op: Op::DmaUnmap,
                calls: 2,
            },
            OpenCalls {
                kind: SourceKind::Device,
                id: 9,
                generation: 0,
                op: Op::DmaUnmap,
                calls: 1,
            },
        ],
        ..RawSample::default()
    };
    let losses = losses_of(last);
    let unmap = &losses.ops[&Op::DmaUnmap];
    assert_eq!(unmap.open_at_end, 3);
    assert_eq!(
        unmap.devices[&NVME.into()],
        DeviceLosses {
            untimed: Some(0),
            open_at_end: 2
        }
    );
    assert_eq!(
        unmap.devices[&"device@9".into()].open_at_end,
        1,
        "{unmap:?}"
    );
    assert_eq!(losses.uncounted(Op::DmaUnmap, &NVME.into()), 2);
    assert_eq!(
        losses.warnings()[0],
        "2 dma_unmap calls of 0000:00:04.0 were still open when the recording ended (their \
         exits were never seen): counted nowhere, so 0000:00:04.0's dma_unmap count is short by \
         that many"
    );
    assert!(losses.warnings()[1].starts_with("1 dma_unmap call of device@9 was still open"));
}

#[test]
fn either_joins_with_commas_and_or() {
    assert_eq!(either(&[]), "");
    assert_eq!(either(&["a"]), "a");
    assert_eq!(either(&["a", "b"]), "a or b");
    assert_eq!(either(&["a", "b", "c"]), "a, b or c");
}

#[test]
fn losses_read_back_from_json_skip_operations_they_do_not_know() {
    let json = serde_json::json!({
        "ops": {
            "dma_map": {"calls": 10, "untimed": 1, "untimed_share": 0.1, "lost": 2,
                        "lost_with": ["dma_unmap", "teleport"], "open_at_end": 0,
                        "understudy_entries": 0, "understudy_exits": 0, "devices": {}},
            "teleport": {"calls": 1, "untimed": null, "untimed_share": null, "lost": null,
                         "lost_with": [], "open_at_end": 0, "understudy_entries": 0,
                         "understudy_exits": 0, "devices": {}}
        },
        "groups": [{"programs": ["p"], "ops": ["dma_map", "teleport"], "skipped": 2,
                    "understudy_entries": 0, "unseen_entries": 0, "unpushed": 0, "lost": 2}]
    });
    let losses: Losses = serde_json::from_value(json).expect("reads");
    assert_eq!(losses.ops.len(), 1);
    assert_eq!(losses.ops[&Op::DmaMap].lost_with, [Op::DmaUnmap]);
    assert_eq!(losses.groups[0].ops, [Op::DmaMap]);
}
