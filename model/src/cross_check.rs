//! A second opinion from the kernel (`record --cross-check`, `diagnose`): its own DMA and IOMMU
//! trace events, counted beside the probes by programs that share nothing with the tracker
//! (ebpf/progs/crosscheck.bpf.c), set against the probes' counts per device and operation. Where
//! they agree, the probes' counts hold on that machine; where they do not, the report says so
//! with both figures.
//!
//! The kernel's count of an event can be short by the runs of its counting program the kernel
//! skipped (a task switched out inside it, on kernels that preempt there: those runs name no
//! device); and maps made through the IOVA API (6.17+: dma_iova_link and dma_iova_sync, the block
//! layer's multi-segment requests) have no dma: event at all. Both are known, and allowed for.

use crate::report::overhead::ProgramOverhead;
use crate::sample::{KernelEvent, KernelEventCounts, Op, RawSample};
use iommutop_abi::units::human_count;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How far apart the probes' and the kernel's counts may be beyond what is known to separate
/// them: 0.5% of the larger, at least one call.
pub const AGREEMENT: f64 = 0.005;

/// The report's `cross_check`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CrossCheck {
    /// Per device (by row key; `None`: all devices together, for the events that name none) and
    /// operation, the probes' count and the kernel's.
    pub rows: Vec<CrossCheckRow>,
    /// Each kernel event counted, by its program: the event it was attached to
    /// (`dma:dma_map_phys`), or why none was.
    pub events: BTreeMap<String, String>,
    /// What could not be compared, and why (no dma: events on this kernel, `--pid`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One device's (or all devices') operation, counted by the probes and by the kernel's events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrossCheckRow {
    /// The row key (a PCI address); `None` for all devices together.
    pub device: Option<String>,
    pub op: Op,
    pub probes: u64,
    /// The kernel's events counted.
    pub kernel: u64,
    /// Runs of the programs that count this operation's events the kernel skipped: events the
    /// kernel's count lacks, of any device.
    pub kernel_skipped: u64,
    /// Calls the probes count that have no event (maps and unmaps made through the IOVA API), of
    /// any device.
    pub without_event: u64,
    /// Whether the counts agree: the probes' count lies between the kernel's and the kernel's
    /// plus what it is known to lack, each within [`AGREEMENT`].
    pub agrees: bool,
}

impl CrossCheckRow {
    /// How far apart the counts are beyond what is known to separate them, as a share of the
    /// larger (0 when they agree that way exactly).
    pub fn apart(&self) -> f64 {
        let over = self
            .probes
            .saturating_sub(self.kernel + self.kernel_skipped + self.without_event);
        let under = self.kernel.saturating_sub(self.probes);
        (over.max(under)) as f64 / self.probes.max(self.kernel).max(1) as f64
    }

    /// The one line a disagreement is said in.
    pub fn warning(&self) -> String {
        let device = self.device.as_deref().unwrap_or("all devices");
        let mut line = format!(
            "cross-check: {device} {}: the probes counted {}, the kernel's own events {} ({:.1}% apart",
            self.op.name(),
            human_count(self.probes),
            human_count(self.kernel),
            100.0 * self.apart()
        );
        if self.kernel_skipped > 0 {
            line.push_str(&format!(
                " beyond the {} runs the kernel skipped of its counting programs",
                human_count(self.kernel_skipped)
            ));
        }
        if self.without_event > 0 {
            line.push_str(&format!(
                " and the {} IOVA-API calls that have no event",
                human_count(self.without_event)
            ));
        }
        line.push_str("): one of them missed calls");
        line
    }
}

/// Which operation each kernel event counts.
fn op_of(event: KernelEvent) -> Op {
    match event {
        KernelEvent::DmaMap | KernelEvent::DmaMapSg | KernelEvent::DmaMapResource => Op::DmaMap,
        KernelEvent::DmaUnmap | KernelEvent::DmaUnmapSg | KernelEvent::DmaUnmapResource => {
            Op::DmaUnmap
        }
        KernelEvent::IommuMap => Op::IommuMap,
        KernelEvent::IommuUnmap => Op::IommuUnmap,
    }
}

/// The counting programs of each operation's events (ebpf/progs/crosscheck.bpf.c), and the probe
/// programs whose calls have no event (the IOVA API's map and unmap).
const COUNTING_PROGRAMS: [(Op, &[&str], &[&str]); 4] = [
    (
        Op::DmaMap,
        &[
            "crosscheck__dma_map__tp",
            "crosscheck__dma_map_sg__tp",
            "crosscheck__dma_map_sg_err__tp",
            "crosscheck__dma_map_resource__tp",
        ],
        &["dma__iova_sync__fexit"],
    ),
    (
        Op::DmaUnmap,
        &[
            "crosscheck__dma_unmap__tp",
            "crosscheck__dma_unmap_sg__tp",
            "crosscheck__dma_unmap_resource__tp",
        ],
        &["dma__iova_destroy__fexit"],
    ),
    (Op::IommuMap, &["crosscheck__iommu_map__tp"], &[]),
    (Op::IommuUnmap, &["crosscheck__iommu_unmap__tp"], &[]),
];

/// Each cross-check program's event (`system:event`), or why it has none (the loader's error).
pub type Attachments<E> = BTreeMap<&'static str, Result<String, E>>;

/// What a run hands over to cross-check.
pub struct CrossCheckInputs<'a, E> {
    pub first: &'a RawSample,
    pub last: &'a RawSample,
    pub attached: &'a Attachments<E>,
    /// The probes counted only some tasks' work (`--pid`, `--cgroup`).
    pub filtered: bool,
}

impl CrossCheck {
    /// The cross-check of a run: the kernel's events between its first and last samples against
    /// the probes' counts of the report's rows (`probes`: per row key, each operation's count)
    /// and of every row together; `programs`, the report's programs over the run.
    pub fn of<E: std::fmt::Display>(
        inputs: &CrossCheckInputs<'_, E>,
        probes: &BTreeMap<String, BTreeMap<Op, u64>>,
        programs: &[ProgramOverhead],
        program_misses: &BTreeMap<String, u64>,
    ) -> CrossCheck {
        let events = inputs
            .attached
            .iter()
            .map(|(program, outcome)| {
                let said = match outcome {
                    Ok(event) => event.clone(),
                    Err(why) => why.to_string(),
                };
                (program.to_string(), said)
            })
            .collect();
        let mut check = CrossCheck {
            events,
            ..CrossCheck::default()
        };
        if inputs.filtered {
            check.notes.push(
                "not compared under --pid/--cgroup: the probes counted the selected tasks' work, \
                 the kernel's events every task's"
                    .into(),
            );
            return check;
        }
        let counted = |op: Op| counted(inputs.attached, op);
        for op in [Op::DmaMap, Op::DmaUnmap, Op::IommuMap, Op::IommuUnmap] {
            if !counted(op) {
                check.notes.push(not_counted_note(inputs.attached, op));
            }
        }
        let kernel = kernel_counts(inputs.first, inputs.last);
        if kernel.contains_key(&Some(BEYOND_ROOM.to_string())) {
            check.notes.push(format!(
                "the kernel's events of devices beyond the first {MAX_EVENT_DEVICES} were counted \
                 together: those devices are not compared"
            ));
        }
        let row = |device: Option<String>, op: Op, probes: u64, kernel: u64| {
            let (kernel_skipped, without_event) = allowance(op, programs, program_misses);
            let slack = (AGREEMENT * probes.max(kernel) as f64) as u64;
            CrossCheckRow {
                agrees: probes + slack >= kernel
                    && probes <= kernel + kernel_skipped + without_event + slack,
                device,
                op,
                probes,
                kernel,
                kernel_skipped,
                without_event,
            }
        };
        // Per device, the events that name one: every device either side counted.
        for op in [Op::DmaMap, Op::DmaUnmap]
            .into_iter()
            .filter(|op| counted(*op))
        {
            for device in compared_devices(&kernel, probes, op) {
                let probed = probes.get(device).and_then(|ops| ops.get(&op)).copied();
                let events = kernel
                    .get(&Some(device.clone()))
                    .and_then(|ops| ops.get(&op));
                check.rows.push(row(
                    Some(device.clone()),
                    op,
                    probed.unwrap_or(0),
                    events.copied().unwrap_or(0),
                ));
            }
        }
        // All devices together, the events that name none.
        for op in [Op::IommuMap, Op::IommuUnmap]
            .into_iter()
            .filter(|op| counted(*op))
        {
            let probed = probes.values().filter_map(|ops| ops.get(&op)).sum();
            let events = kernel.get(&None).and_then(|ops| ops.get(&op)).copied();
            check.rows.push(row(None, op, probed, events.unwrap_or(0)));
        }
        check
    }

    /// A warning for each row that disagrees.
    pub fn warnings(&self) -> Vec<String> {
        self.rows
            .iter()
            .filter(|row| !row.agrees)
            .map(CrossCheckRow::warning)
            .collect()
    }
}

/// Whether the kernel's events of `op` were counted: one of its counting programs attached.
fn counted<E>(attached: &Attachments<E>, op: Op) -> bool {
    COUNTING_PROGRAMS
        .iter()
        .find(|(o, ..)| *o == op)
        .is_some_and(|(_, counting, _)| {
            counting
                .iter()
                .any(|p| attached.get(*p).is_some_and(Result::is_ok))
        })
}

/// The note that `op` is not compared, with why its counting programs did not attach.
fn not_counted_note<E: std::fmt::Display>(attached: &Attachments<E>, op: Op) -> String {
    let why = COUNTING_PROGRAMS
        .iter()
        .find(|(o, ..)| *o == op)
        .and_then(|(_, programs, _)| {
            programs
                .iter()
                .find_map(|p| attached.get(*p)?.as_ref().err())
        })
        .map_or_else(|| "its events were not counted".to_string(), E::to_string);
    format!("{}: not compared, no second opinion here: {why}", op.name())
}

/// How far the probes may count above the kernel's events of `op` and still agree: the events
/// its counting programs missed, and the calls of the probe programs that have no event.
fn allowance(
    op: Op,
    programs: &[ProgramOverhead],
    program_misses: &BTreeMap<String, u64>,
) -> (u64, u64) {
    let Some((_, counting, unseen)) = COUNTING_PROGRAMS.iter().find(|(o, ..)| *o == op) else {
        return (0, 0);
    };
    let skipped = counting
        .iter()
        .map(|p| program_misses.get(*p).copied().unwrap_or(0))
        .sum();
    let without = programs
        .iter()
        .filter(|p| unseen.contains(&p.name.as_str()))
        .map(|p| p.run_count)
        .sum();
    (skipped, without)
}

/// The devices compared for `op`: every device either side counted (the kernel's events, the
/// probes' nonzero counts), in order, once each, and not those beyond the map's room.
fn compared_devices<'a>(
    kernel: &'a BTreeMap<Option<String>, BTreeMap<Op, u64>>,
    probes: &'a BTreeMap<String, BTreeMap<Op, u64>>,
    op: Op,
) -> Vec<&'a String> {
    let mut devices: Vec<&String> = kernel.keys().flatten().collect();
    devices.extend(
        probes
            .iter()
            .filter(|(_, ops)| ops.get(&op).is_some_and(|n| *n > 0))
            .map(|(key, _)| key),
    );
    devices.sort();
    devices.dedup();
    devices.retain(|d| d.as_str() != BEYOND_ROOM);
    devices
}

/// The name the kernel's events of devices beyond the cross-check map's room are counted under.
const BEYOND_ROOM: &str = "(devices beyond the map's room)";

/// `IOMMUTOP_MAX_EVENT_DEVICES` in ebpf/include/iommutop/abi.h.
pub const MAX_EVENT_DEVICES: u32 = 256;

/// The kernel's counts over the run, per device name (`None`: the events that name none) and
/// operation.
fn kernel_counts(
    first: &RawSample,
    last: &RawSample,
) -> BTreeMap<Option<String>, BTreeMap<Op, u64>> {
    let mut counts: BTreeMap<Option<String>, BTreeMap<Op, u64>> = BTreeMap::new();
    let before = |entry: &KernelEventCounts, event: KernelEvent| {
        first
            .kernel_events
            .iter()
            .find(|e| e.device == entry.device && e.beyond_room == entry.beyond_room)
            .and_then(|e| e.counts.get(&event).copied())
            .unwrap_or(0)
    };
    for entry in &last.kernel_events {
        let device = if entry.beyond_room {
            Some(BEYOND_ROOM.to_string())
        } else {
            entry.device.map(|_| entry.name.clone())
        };
        for (&event, &n) in &entry.counts {
            let n = n.saturating_sub(before(entry, event));
            *counts
                .entry(device.clone())
                .or_default()
                .entry(op_of(event))
                .or_insert(0) += n;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    const NVME: u64 = 0xffff_8881_0000_0400;
    const NIC: u64 = 0xffff_8881_0000_0500;

    fn events(device: Option<(u64, &str)>, counts: &[(KernelEvent, u64)]) -> KernelEventCounts {
        KernelEventCounts {
            device: device.map(|(id, _)| id),
            name: device.map(|(_, name)| name.to_string()).unwrap_or_default(),
            beyond_room: false,
            counts: counts.iter().copied().collect(),
        }
    }

    fn sample(kernel_events: Vec<KernelEventCounts>) -> RawSample {
        RawSample {
            kernel_events,
            ..RawSample::default()
        }
    }

    fn every_event_attached() -> Attachments<String> {
        COUNTING_PROGRAMS
            .iter()
            .flat_map(|(_, programs, _)| programs.iter())
            .map(|p| (*p, Ok("an:event".to_string())))
            .collect()
    }

    fn probes(rows: &[(&str, &[(Op, u64)])]) -> BTreeMap<String, BTreeMap<Op, u64>> {
        rows.iter()
            .map(|(key, ops)| (key.to_string(), ops.iter().copied().collect()))
            .collect()
    }

    fn row<'a>(check: &'a CrossCheck, device: Option<&str>, op: Op) -> &'a CrossCheckRow {
        check
            .rows
            .iter()
            .find(|r| r.device.as_deref() == device && r.op == op)
            .unwrap_or_else(|| panic!("no row {device:?} {op:?}: {:?}", check.rows))
    }

    #[test]
    fn counts_per_device_over_the_run_agree_and_the_iommu_events_cover_every_device() {
        let first = sample(vec![events(
            Some((NVME, "0000:00:04.0")),
            &[(KernelEvent::DmaMap, 100)],
        )]);
        let last = sample(vec![
            events(
                Some((NVME, "0000:00:04.0")),
                &[(KernelEvent::DmaMap, 1_100), (KernelEvent::DmaUnmap, 1_000)],
            ),
            events(
                Some((NIC, "0000:00:05.0")),
                &[(KernelEvent::DmaMap, 30), (KernelEvent::DmaMapSg, 20)],
            ),
            events(None, &[(KernelEvent::IommuMap, 1_052)]),
        ]);
        let attached = every_event_attached();
        let check = CrossCheck::of(
            &CrossCheckInputs {
                first: &first,
                last: &last,
                attached: &attached,
                filtered: false,
            },
            &probes(&[
                (
                    "0000:00:04.0",
                    &[
                        (Op::DmaMap, 1_000),
                        (Op::DmaUnmap, 1_000),
                        (Op::IommuMap, 1_000),
                    ],
                ),
                ("0000:00:05.0", &[(Op::DmaMap, 50), (Op::IommuMap, 52)]),
            ]),
            &[],
            &BTreeMap::new(),
        );
        let nvme = row(&check, Some("0000:00:04.0"), Op::DmaMap);
        assert_eq!(
            (nvme.probes, nvme.kernel, nvme.agrees),
            (1_000, 1_000, true)
        );
        let nic = row(&check, Some("0000:00:05.0"), Op::DmaMap);
        assert_eq!(
            (nic.probes, nic.kernel),
            (50, 50),
            "page and sg maps are the op's"
        );
        let all = row(&check, None, Op::IommuMap);
        assert_eq!((all.probes, all.kernel, all.agrees), (1_052, 1_052, true));
        assert!(check.warnings().is_empty(), "{:?}", check.warnings());
    }

    #[test]
    fn the_kernel_short_by_its_own_skipped_runs_agrees_and_more_is_said_with_both_figures() {
        let last = sample(vec![events(
            Some((NVME, "0000:00:04.0")),
            &[(KernelEvent::DmaMap, 9_304)],
        )]);
        let attached = every_event_attached();
        let inputs = CrossCheckInputs {
            first: &RawSample::default(),
            last: &last,
            attached: &attached,
            filtered: false,
        };
        let counted = probes(&[("0000:00:04.0", &[(Op::DmaMap, 9_383)])]);
        let skipped = BTreeMap::from([("crosscheck__dma_map__tp".to_string(), 79)]);
        let check = CrossCheck::of(&inputs, &counted, &[], &skipped);
        assert!(row(&check, Some("0000:00:04.0"), Op::DmaMap).agrees);
        let check = CrossCheck::of(&inputs, &counted, &[], &BTreeMap::new());
        let nvme = row(&check, Some("0000:00:04.0"), Op::DmaMap);
        assert!(!nvme.agrees, "79 apart of 9,383 is 0.84%");
        let warning = &check.warnings()[0];
        assert!(
            warning.contains(&human_count(9_383)) && warning.contains(&human_count(9_304)),
            "both figures: {warning}"
        );
        assert!(!warning.contains('\n'));
    }

    #[test]
    fn a_kernel_without_dma_events_or_a_task_filter_is_said_not_compared() {
        let attached: Attachments<String> = every_event_attached()
            .into_iter()
            .map(|(p, e)| {
                let e = if p.contains("iommu") {
                    e
                } else {
                    Err("the kernel has no dma:dma_map_page event".to_string())
                };
                (p, e)
            })
            .collect();
        let mut inputs = CrossCheckInputs {
            first: &RawSample::default(),
            last: &RawSample::default(),
            attached: &attached,
            filtered: false,
        };
        let check = CrossCheck::of(&inputs, &BTreeMap::new(), &[], &BTreeMap::new());
        assert!(
            check.rows.iter().all(|r| r.device.is_none()),
            "{:?}",
            check.rows
        );
        assert!(
            check
                .notes
                .iter()
                .any(|n| n.starts_with("dma_map: not compared")),
            "{:?}",
            check.notes
        );
        inputs.filtered = true;
        let check = CrossCheck::of(&inputs, &BTreeMap::new(), &[], &BTreeMap::new());
        assert!(check.rows.is_empty());
        assert!(check.notes[0].contains("--pid"));
    }
}
