//! The verdict of `iommutop diagnose`: from the host facts and one report, what translation costs
//! each device per unit of the workload and in CPU share, where the time goes, which call paths
//! pay it, and what to try with the gain expected or measured. Pure: the same inputs give the
//! same words, so it is unit-tested on fixture reports.
//!
//! - [`system`]: the system facts (why the IOMMU is on, which mode, every group).
//! - [`advice`]: what to try, and what it would gain.
//! - [`ab`]: the `--ab` experiment's outcome (translated against identity).
//! - [`diagnosis`]: all of it as data, which every `--format` renders.

pub mod ab;
pub mod advice;
mod call_paths;
pub mod diagnosis;
mod health;
pub mod system;

pub use ab::{ab_outcome, AbOutcome};
pub use advice::{advise, Advice, Gain};
pub use call_paths::{folded_stacks, CALL_PATHS};
pub use diagnosis::Diagnosis;
pub use system::{iommu_reasons, render_system};

use crate::compare::work::{label, work_units, DeviceWork, WorkUnits};
use crate::report::Report;
use crate::sample::Op;
use crate::snapshot::{Device, RowKind};
use crate::waiting::DmaWaiting;
use call_paths::heaviest_paths;
use health::health_line;
use iommutop_abi::units::human_ns;
use std::fmt::Write;

/// Operations whose time a verdict breaks the translation cost into, with their plain names.
const WHERE: [(Op, &str); 7] = [
    (Op::IovaAlloc, "IOVA allocation"),
    (
        Op::IovaAllocSlow,
        "IOVA allocation through the rbtree (cache misses)",
    ),
    (Op::IommuMap, "page-table updates (map)"),
    (Op::IommuUnmap, "page-table updates (unmap)"),
    (Op::IotlbSync, "IOTLB sync after map"),
    (Op::IotlbFlush, "IOTLB invalidation and its wait"),
    (Op::IovaFree, "IOVA release"),
];

/// Devices worth a verdict: those that mapped memory for DMA, busiest first.
fn dma_devices<'a>(report: &'a Report, only: Option<&str>) -> Vec<&'a Device> {
    let mut devices: Vec<&Device> = report
        .devices
        .iter()
        .filter(|d| d.op(Op::DmaMap).count > 0)
        .filter(|d| only.is_none_or(|wanted| d.answers_to(wanted)))
        .collect();
    devices.sort_by_key(|d| std::cmp::Reverse(d.op(Op::DmaMap).count));
    devices
}

/// The workload line of a verdict: what ran and its own numbers.
fn workload_line(report: &Report, units: &WorkUnits) -> Option<String> {
    let workload = report.run.workload.as_ref();
    let name = workload.map(|w| w.name.clone()).or_else(|| {
        (!report.run.command.is_empty()).then(|| crate::shell::join(&report.run.command))
    })?;
    let mut line = format!("workload: {name}, {:.1} s", report.run.duration_s);
    if let (Some(metric), Some(rate)) = (&units.rate_metric, units.rate) {
        let _ = write!(line, ": {rate:.1} {metric}");
    }
    if let Some(count) = units.count {
        let _ = write!(line, " ({count:.0} {}s)", units.unit);
    }
    Some(line)
}

/// The verdict for every device that did DMA during the run (or the one asked for), then the
/// deferred flush work; `ab` adds the measured gain to the advice of its device.
pub fn verdict(report: &Report, device: Option<&str>, ab: Option<&AbOutcome>) -> String {
    let mut out = String::new();
    let units = work_units(report);
    if let Some(line) = workload_line(report, &units) {
        let _ = writeln!(out, "{line}");
    }
    let devices = dma_devices(report, device);
    if let Some(filter) = &report.run.task_filter {
        let _ = writeln!(out, "scope: {}", filter.note());
    }
    if let Some(line) = health_line(report) {
        let _ = writeln!(out, "{line}");
    }
    if let Some(line) = headline(&devices, &units) {
        let _ = writeln!(out, "{line}");
    }
    if devices.is_empty() {
        let _ = writeln!(
            out,
            "no device mapped memory for DMA during the run{}: nothing to attribute",
            device
                .map(|d| format!(" (asked for {d})"))
                .unwrap_or_default()
        );
        return out;
    }
    for d in devices {
        out.push('\n');
        out.push_str(&device_verdict(report, d, &units, ab));
    }
    if device.is_none() {
        out.push_str(&deferred_lines(report));
    }
    out
}

/// The verdict in one sentence: what translation costs each translated device per its unit (the
/// workload's for the devices it drove, else the device's own I/O), the share of the time per
/// unit of the devices the workload drove, the CPU it takes, and where most of it goes. Figures
/// in different units are stated apart, never added up.
fn headline(devices: &[&Device], units: &WorkUnits) -> Option<String> {
    if devices.is_empty() {
        return None;
    }
    let translated: Vec<(&Device, DeviceWork)> = devices
        .iter()
        .map(|d| (*d, DeviceWork::of(d, units)))
        .filter(|(_, w)| w.translated)
        .collect();
    if translated.is_empty() {
        return Some(
            "verdict: no device's DMA was translated during the run (identity domains or no \
             IOMMU): translation costs nothing here beyond the DMA API itself"
                .into(),
        );
    }
    // The timed devices by unit, in the order their first device comes (busiest first).
    let mut by_unit: Vec<(&str, Vec<String>)> = Vec::new();
    for (d, w) in &translated {
        let Some(ns) = w.dma_ns else { continue };
        let cost = format!("{} {}", label(d), human_ns(ns.round() as u64));
        match by_unit.iter_mut().find(|(unit, _)| *unit == w.unit) {
            Some((_, costs)) => costs.push(cost),
            None => by_unit.push((&w.unit, vec![cost])),
        }
    }
    if by_unit.is_empty() {
        return Some(format!(
            "verdict: {} translated, but the DMA path was only counted, not timed",
            translated
                .iter()
                .map(|(d, _)| label(d))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let costs: Vec<String> = by_unit
        .iter()
        .map(|(unit, costs)| format!("{} per {unit}", costs.join(" and ")))
        .collect();
    let cpu: f64 = translated.iter().filter_map(|(_, w)| w.cpu_share).sum();
    let mut line = format!(
        "verdict: IOMMU translation costs {} in DMA map+unmap",
        costs.join(" and ")
    );
    // The share of the time per unit: only of the devices the workload drove, whose time is
    // per its unit.
    let driven: Vec<f64> = translated
        .iter()
        .filter(|(_, w)| w.of_workload)
        .filter_map(|(_, w)| w.dma_ns)
        .collect();
    let time_share = share_of_time(units, driven.iter().sum())
        .filter(|_| !driven.is_empty())
        .map(|share| share * 100.0);
    if by_unit.len() == 1 {
        if let Some(share) = time_share {
            let _ = write!(
                line,
                ", together {share:.0}% of the time per {}",
                units.unit
            );
        }
        let _ = write!(line, " and {:.1}% of one CPU", cpu * 100.0);
    } else {
        if let Some(share) = time_share {
            let (who, together) = match driven.len() {
                1 => ("the device", ""),
                _ => ("the devices", " together"),
            };
            let _ = write!(
                line,
                "; {who} per {unit}{together} {share:.0}% of the time per {unit}",
                unit = units.unit
            );
        }
        let _ = write!(line, "; {:.1}% of one CPU in all", cpu * 100.0);
    }
    let heaviest = translated
        .iter()
        .flat_map(|(d, _)| {
            WHERE
                .iter()
                .filter_map(|(op, what)| d.derived.of_which.get(op).map(|s| (*s, *what)))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((share, what)) = heaviest {
        let _ = write!(
            line,
            "; the largest part: {what}, {:.0}% of it",
            share * 100.0
        );
    }
    Some(line)
}

/// What the figures of the devices the workload drove are per: its unit when it counted them,
/// else `completed I/O`.
fn per(units: &WorkUnits) -> String {
    if units.count.is_some() {
        units.unit.clone()
    } else {
        "completed I/O".into()
    }
}

/// Says when a device's DMA calls spent a notable part of their time switched out: waiting
/// (preempted, asleep on a lock), which the times above leave out (see [`crate::waiting`]).
fn waiting_line(d: &Device) -> Option<String> {
    let waiting = DmaWaiting::finding(d)?;
    Some(format!(
        "  waiting inside translation: {} DMA map/unmap calls were switched out for {} in all, {:.0}% of their measured time (preempted, or asleep on a lock: PREEMPT_RT makes spinlocks sleep); left out of the cost above",
        waiting.waited_calls,
        human_ns(waiting.offcpu_ns),
        waiting.share() * 100.0
    ))
}

fn device_verdict(
    report: &Report,
    d: &Device,
    units: &WorkUnits,
    ab: Option<&AbOutcome>,
) -> String {
    let mut out = String::new();
    let work = DeviceWork::of(d, units);
    let unit = work.unit.clone();
    let group = d.iommu_group.map_or_else(
        || "no IOMMU group".to_string(),
        |g| format!("IOMMU group {g}"),
    );
    let _ = writeln!(
        out,
        "{}, {group}, {}",
        label(d),
        system::translation_state(d.domain_type.as_deref())
    );
    let maps = d.op(Op::DmaMap);
    let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
    let _ = writeln!(
        out,
        "  per {unit}: {} DMA maps{}, {} IOMMU page-table maps, {} IOTLB syncs, {} IOTLB invalidations",
        f(work.dma_maps),
        maps.avg_bytes
            .map(|b| format!(" of {b:.0} bytes"))
            .unwrap_or_default(),
        f(work.iommu_maps),
        f(work.iotlb_syncs),
        f(work.iotlb_flushes),
    );
    match (work.dma_ns, d.derived.cpu_share) {
        (Some(dma_ns), Some(share)) => {
            let mut line = format!(
                "  translation costs {} per {unit} in DMA map+unmap",
                human_ns(dma_ns.round() as u64)
            );
            if let Some(iommu_ns) = work.iommu_ns.filter(|_| work.translated) {
                let _ = write!(
                    line,
                    " ({} of it IOMMU work)",
                    human_ns(iommu_ns.round() as u64)
                );
            }
            let _ = write!(line, ", {:.1}% of one CPU", share * 100.0);
            if let Some(time_share) = share_of_time(units, dma_ns).filter(|_| work.of_workload) {
                let _ = write!(line, ", {:.0}% of the time per {unit}", time_share * 100.0);
            }
            let _ = writeln!(out, "{line}");
        }
        _ => {
            let _ = writeln!(
                out,
                "  translation time not measured (the DMA path was only counted, not timed)"
            );
        }
    }
    if let Some(line) = waiting_line(d) {
        let _ = writeln!(out, "{line}");
    }
    if !work.translated {
        let _ = writeln!(
            out,
            "  no IOMMU page-table work: this device's DMA is not translated, so translation costs it nothing beyond the DMA API itself"
        );
        return out;
    }
    // The parts as the page's bar draws them: nested calls taken out of the calls they run in,
    // and a line for the rest, so that the shares add up to 100%.
    let mut parts = crate::html::time_bar::segments(&d.derived);
    let rest = parts
        .iter()
        .position(|s| s.op.is_none())
        .map(|i| parts.remove(i));
    parts.sort_by(|a, b| b.share.total_cmp(&a.share));
    if !parts.is_empty() {
        let _ = writeln!(
            out,
            "  where the time goes (shares of translation time, adding up to 100%):"
        );
        for part in parts.iter().chain(rest.iter()) {
            let _ = writeln!(out, "    {:5.1}%  {}", part.share * 100.0, part.label);
        }
    }
    let paths = heaviest_paths(report, &d.key);
    if paths.is_empty() {
        let _ = writeln!(
            out,
            "  call paths: none sampled (stack sampling needs the fentry or kprobe tier)"
        );
    } else {
        let _ = writeln!(out, "  call paths that pay it (sampled, most first):");
        for (op, path, samples) in paths {
            let _ = writeln!(out, "    {} ×{samples}: {path}", op.name());
        }
    }
    let tips = advise(d, &work, &unit, ab);
    if !tips.is_empty() {
        let _ = writeln!(out, "  what to try:");
        for tip in tips {
            let [action, why, gain] = tip.lines();
            let _ = writeln!(out, "    - {action}\n      {why}\n      {gain}");
        }
    }
    out
}

/// Translation time per unit over the time per unit (1 / rate), for one-at-a-time workloads.
fn share_of_time(units: &WorkUnits, ns_per_unit: f64) -> Option<f64> {
    units.rate_metric.as_deref()?;
    units.count?;
    let rate = units.rate?;
    (rate > 0.0).then(|| ns_per_unit * rate / 1e9)
}

/// The flush-queue timer's work, charged to no device.
fn deferred_lines(report: &Report) -> String {
    let mut out = String::new();
    for row in report
        .devices
        .iter()
        .filter(|d| d.kind == RowKind::Deferred)
    {
        let flushes = row.op(Op::FqFlush).count;
        let invalidations = row.op(Op::IotlbFlush).count;
        if flushes == 0 && invalidations == 0 {
            continue;
        }
        let time = row
            .derived
            .translation_ns
            .map(|ns| format!(", {} in all", human_ns(ns)))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "\ndeferred flushes ({}): {flushes} flush-queue runs, {invalidations} IOTLB \
             invalidations{time} — the lazy mode's batched invalidations, shared by the devices \
             of its IOMMU, charged to none",
            row.key
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::Diagnosis;
    use crate::report::fixtures::full_report;
    use crate::sample::Health;

    /// Waiting inside translation (PREEMPT_RT's sleeping locks) is named, apart from
    /// the cost, when it is a notable share of a device's DMA time; a trace of it is not.
    #[test]
    fn waiting_inside_translation_is_named_when_it_is_a_notable_share() {
        let mut report = full_report();
        let device = report
            .devices
            .iter_mut()
            .find(|d| d.op(Op::DmaMap).latency.is_some())
            .expect("a device with timed DMA maps");
        let set_waiting = |device: &mut Device, share: f64| {
            for stats in device.ops.values_mut() {
                if let Some(latency) = stats.latency.as_mut() {
                    let raw = latency.raw_total_ns.unwrap_or(latency.total_ns);
                    latency.offcpu = Some(crate::op_stats::Waiting {
                        offcpu_ns: (raw as f64 * share) as u64,
                        waited: latency.timed.div_ceil(10),
                    });
                }
            }
        };
        set_waiting(device, 0.5);
        let line = waiting_line(device).expect("half the time waiting is named");
        assert!(line.contains("waiting inside translation"), "{line}");
        assert!(line.contains("50%"), "{line}");
        set_waiting(device, 0.01);
        assert_eq!(
            waiting_line(device),
            None,
            "1% of the time is not a finding"
        );
    }

    #[test]
    fn names_the_device_its_cost_where_it_goes_and_what_to_try() {
        let report = full_report();
        let text = verdict(&report, None, None);
        assert!(
            text.starts_with("workload: fio, 2.0 s: 2000.0 read_iops\n"),
            "{text}"
        );
        assert!(
            text.contains("0000:00:02.0 (nvme0n1, nvme), IOMMU group 3, translated, lazy\n"),
            "{text}"
        );
        assert!(
            text.contains("  per completed I/O: 1.00 DMA maps of 4096 bytes, 1.00 IOMMU page-table maps, 1.00 IOTLB syncs, 0.00 IOTLB invalidations\n"),
            "{text}"
        );
        assert!(
            text.contains("  translation costs 3.00us per completed I/O in DMA map+unmap (300ns of it IOMMU work), 0.6% of one CPU\n"),
            "{text}"
        );
        // The parts and the rest add up to 100%.
        assert!(
            text.contains("     10.0%  IOVA allocation (per-CPU caches)\n"),
            "{text}"
        );
        assert!(
            text.contains("     90.0%  the rest of the timed calls"),
            "{text}"
        );
        assert!(text.contains("call paths: none sampled"), "{text}");
        assert!(
            text.contains("- identity domain for a device you trust: `echo identity > /sys/kernel/iommu_groups/3/type`"),
            "{text}"
        );
        assert!(
            text.contains("      gain: expected to save 300ns to 3.00us per completed I/O: "),
            "{text}"
        );
        assert!(
            text.contains("- a userspace driver (VFIO) with buffers in 2 MiB huge pages"),
            "{text}"
        );
        assert!(
            text.contains("\ndeferred flushes (deferred): 20 flush-queue runs"),
            "{text}"
        );
    }

    /// A `--pid` run's per-I/O figures lack the interrupt-context work: said before them.
    #[test]
    fn a_task_filter_is_said_before_the_verdict() {
        let mut report = full_report();
        assert!(!verdict(&report, None, None).contains("scope:"));
        report.run.task_filter = Some(crate::TaskFilter {
            pid: Some(4242),
            comm: Some("qemu".into()),
            ..Default::default()
        });
        let text = verdict(&report, None, None);
        let scope = text.find("scope: only the work process 4242 (qemu) did in task context");
        let first_device = text.find("0000:00:02.0");
        assert!(scope.is_some() && scope < first_device, "{text}");
        assert!(text.contains("interrupt-context work"), "{text}");
    }

    #[test]
    fn lost_calls_are_said_before_the_verdict() {
        let report = full_report();
        let text = verdict(&report, None, None);
        let warning = text.find(
            "numbers may be incomplete: calls seen by no probe program: 2 dma_map or dma_unmap, \
             3 iommu_map (the counts are short by that many); 1 call was still open at the end",
        );
        let first_device = text.find("0000:00:02.0");
        assert!(warning.is_some() && warning < first_device, "{text}");
    }

    /// The kernel skipped runs and every call concerned was seen at one end: the counts are
    /// exact, and nothing says they may be short.
    #[test]
    fn an_exact_run_is_not_called_incomplete() {
        let mut report = full_report();
        exact(&mut report);
        for (counter, count) in [(Health::RecursionMisses, 7), (Health::ExitWithoutEntry, 4)] {
            report.health.insert(counter, count);
        }
        assert!(!verdict(&report, None, None).contains("numbers may be incomplete"));
    }

    fn exact(report: &mut Report) {
        let losses = report.losses.as_mut().expect("losses");
        for group in &mut losses.groups {
            group.lost = 0;
        }
        for op in losses.ops.values_mut() {
            op.lost = op.lost.map(|_| 0);
            op.open_at_end = 0;
            op.devices.clear();
        }
    }

    #[test]
    fn untimed_calls_over_a_thousandth_are_said_as_a_share_of_the_latencies() {
        let mut report = full_report();
        exact(&mut report);
        let dma_map = report
            .losses
            .as_mut()
            .and_then(|l| l.ops.get_mut(&Op::DmaMap))
            .expect("dma_map");
        dma_map.untimed = Some(4);
        dma_map.untimed_share = Some(0.001);
        assert!(
            !verdict(&report, None, None).contains("numbers may be incomplete"),
            "0.1% is not over it"
        );
        let dma_map = report
            .losses
            .as_mut()
            .and_then(|l| l.ops.get_mut(&Op::DmaMap))
            .expect("dma_map");
        dma_map.untimed = Some(8);
        dma_map.untimed_share = Some(0.002);
        let text = verdict(&report, None, None);
        assert!(
            text.contains(
                "numbers may be incomplete: the latencies leave out 0.20% of dma_map calls \
                 (counted, not timed)\n"
            ),
            "{text}"
        );
    }

    /// A report written before `losses` is judged by its health counters, as it was.
    #[test]
    fn a_report_without_losses_is_judged_by_its_health() {
        let mut report = full_report();
        report.losses = None;
        report.health.clear();
        assert!(!verdict(&report, None, None).contains("numbers may be incomplete"));
        report.health.insert(Health::RecursionMisses, 7);
        report.health.insert(Health::StackLost, 3);
        let text = verdict(&report, None, None);
        let warning = text.find("numbers may be incomplete: 7 probe runs were skipped");
        let first_device = text.find("0000:00:02.0");
        assert!(warning.is_some() && warning < first_device, "{text}");
    }

    #[test]
    fn an_identity_device_gets_no_advice() {
        let mut report = full_report();
        report.devices[0].domain_type = Some("identity".into());
        report.devices[0]
            .ops
            .insert(Op::IommuMap, Default::default());
        report.devices[0]
            .ops
            .insert(Op::IotlbSync, Default::default());
        let text = verdict(&report, Some("nvme0n1"), None);
        assert!(text.contains("identity: not translated"), "{text}");
        assert!(
            text.contains("verdict: no device's DMA was translated"),
            "{text}"
        );
        assert!(text.contains("no IOMMU page-table work"), "{text}");
        assert!(!text.contains("what to try"), "{text}");
    }

    #[test]
    fn strict_mode_suggests_lazy_invalidation() {
        let mut report = full_report();
        report.devices[0].domain_type = Some("DMA".into());
        let text = verdict(&report, Some("0000:00:02.0"), None);
        assert!(text.contains("translated, strict"), "{text}");
        assert!(
            text.contains("- lazy invalidation: `echo DMA-FQ > /sys/kernel/iommu_groups/3/type`"),
            "{text}"
        );
    }

    /// A run with two workloads divided the NVMe's cost by the transactions of netperf, which
    /// drove only the NICs: each device now goes per its own unit, and the share of the time
    /// per transaction is only the NICs'.
    #[test]
    fn the_verdict_never_puts_a_device_per_another_workloads_transaction() {
        let report = crate::report::fixtures::two_workloads_report("DMA-FQ");
        let text = verdict(&report, None, None);
        let headline = text
            .lines()
            .find(|l| l.starts_with("verdict: "))
            .expect("a verdict line");
        assert_eq!(
            headline,
            "verdict: IOMMU translation costs 0000:00:04.0 (nvme0n1, nvme) 15.3us per completed \
             I/O and 0000:00:05.0 (eth0, e1000e) 18.0us and 0000:00:06.0 (eth1, e1000e) 12.0us \
             per transaction in DMA map+unmap; the devices per transaction together 3% of the \
             time per transaction; 9.1% of one CPU in all; the largest part: IOVA allocation, \
             10% of it"
        );
        assert!(
            text.contains(
                "0000:00:04.0 (nvme0n1, nvme), IOMMU group 1, translated, lazy\n  per completed \
                 I/O: 1.00 DMA maps of 4096 bytes, 1.00 IOMMU page-table maps, 1.00 IOTLB \
                 syncs, 0.00 IOTLB invalidations\n  translation costs 15.3us per completed I/O \
                 in DMA map+unmap (1.53us of it IOMMU work), 6.1% of one CPU\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "0000:00:05.0 (eth0, e1000e), IOMMU group 2, translated, lazy\n  per \
                 transaction: 3.00 DMA maps of 900 bytes, 3.00 IOMMU page-table maps, 3.00 \
                 IOTLB syncs, 0.00 IOTLB invalidations\n  translation costs 18.0us per \
                 transaction in DMA map+unmap (0ns of it IOMMU work), 1.8% of one CPU, 2% of \
                 the time per transaction\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("gain: expected to save 1.53us to 15.3us per completed I/O"),
            "{text}"
        );
        let d = Diagnosis::of_run(crate::report::fixtures::host(), report, None, None, None);
        assert_eq!(d.unit, "transaction");
        let units: Vec<(&str, &str)> = d
            .devices
            .iter()
            .map(|d| (d.key.as_str(), d.work.unit.as_str()))
            .collect();
        assert_eq!(
            units,
            [
                ("0000:00:04.0", "completed I/O"),
                ("0000:00:05.0", "transaction"),
                ("0000:00:06.0", "transaction")
            ]
        );
        let json = serde_json::to_value(&d).expect("serializes");
        assert_eq!(json["devices"][0]["work"]["unit"], "completed I/O");
        assert_eq!(json["devices"][0]["work"]["dma_ns"], 15_300.0);
        let (headers, rows) = d.devices_table();
        assert_eq!(headers[3], "per");
        assert_eq!(headers[6], "DMA map+unmap, ns per unit");
        assert_eq!(
            (rows[0][3].as_str(), rows[0][6].as_str()),
            ("completed I/O", "15300")
        );
        assert_eq!(
            (rows[1][3].as_str(), rows[1][6].as_str()),
            ("transaction", "18000")
        );
    }

    /// With only a device the workload did not drive translated, the verdict states it per its
    /// own I/O and claims no share of the time per transaction.
    #[test]
    fn devices_the_workload_did_not_drive_claim_no_share_of_its_time() {
        let mut report = crate::report::fixtures::two_workloads_report("DMA-FQ");
        for nic in report
            .devices
            .iter_mut()
            .filter(|d| d.driver.as_deref() == Some("e1000e"))
        {
            nic.domain_type = Some("identity".into());
            nic.ops.remove(&Op::IommuMap);
            nic.ops.remove(&Op::IotlbSync);
        }
        let text = verdict(&report, None, None);
        assert!(
            text.contains(
                "verdict: IOMMU translation costs 0000:00:04.0 (nvme0n1, nvme) 15.3us per \
                 completed I/O in DMA map+unmap and 6.1% of one CPU; the largest part"
            ),
            "{text}"
        );
        let headline = text.lines().find(|l| l.starts_with("verdict: "));
        assert!(
            headline.is_some_and(|l| !l.contains("of the time per")),
            "{text}"
        );
    }

    #[test]
    fn an_unknown_device_is_said_to_have_done_no_dma() {
        let text = verdict(&full_report(), Some("0000:ff:00.0"), None);
        assert!(
            text.contains(
                "no device mapped memory for DMA during the run (asked for 0000:ff:00.0)"
            ),
            "{text}"
        );
    }
}
