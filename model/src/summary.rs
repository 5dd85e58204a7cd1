//! A report as plain text for the terminal: host line, one row per device, the probes, warnings.

use crate::report::{ProbeEntry, Report};
use crate::sample::Op;
use crate::snapshot::Device;
use crate::units::{human_count, human_ns, percent};

const NONE: &str = "-";

/// The whole summary, ending in a newline; tables as wide as their cells (for files and pipes).
pub fn render_summary(report: &Report) -> String {
    render_summary_fitted(report, None)
}

/// The whole summary with its tables fitted to `width` columns (a terminal's), cells wrapped
/// where they must; as [`render_summary`] without a width.
pub fn render_summary_fitted(report: &Report, width: Option<u16>) -> String {
    let mut out = String::new();
    out.push_str(&host_line(report));
    out.push_str(&run_line(report));
    out.push('\n');
    out.push_str(&device_table(&report.devices, width));
    if let Some(note) = self_time_note(&report.devices) {
        out.push_str(&note);
    }
    if !report.probes.is_empty() {
        out.push('\n');
        out.push_str(&probe_table(&report.probes, width));
    }
    if !report.warnings.is_empty() {
        out.push_str("\nwarnings:\n");
        for warning in &report.warnings {
            out.push_str(&format!("  - {warning}\n"));
        }
    }
    out
}

fn host_line(report: &Report) -> String {
    let host = &report.host;
    let iommu = &host.iommu;
    let mut parts = vec![format!("{} {}", report.tool.name, report.tool.version)];
    parts.push(format!(
        "kernel {}",
        host.kernel_release.as_deref().unwrap_or("unknown")
    ));
    if iommu.present {
        let vendor = iommu.vendor.map_or("unknown vendor", |v| v.name());
        parts.push(format!("IOMMU {vendor} ({})", iommu.units.join(", ")));
        let domain = iommu.default_domain_type.as_deref().unwrap_or("unknown");
        match iommu.dma_mode {
            Some(mode) => parts.push(format!("default domain {domain} ({})", mode.name())),
            None => parts.push(format!("default domain {domain}")),
        }
    } else {
        parts.push("no IOMMU".to_string());
    }
    if host.lab {
        parts.push("lab".to_string());
    }
    format!("{}\n", parts.join(", "))
}

fn run_line(report: &Report) -> String {
    let run = &report.run;
    let mut parts = vec![format!(
        "run {:.1} s, interval {:.1} s",
        run.duration_s, run.interval_s
    )];
    if let Some(profile) = &run.profile {
        parts.push(format!("profile {profile}"));
    }
    if let Some(workload) = &run.workload {
        parts.push(format!("workload {}", workload.name));
    }
    if !run.command.is_empty() {
        parts.push(format!("command `{}`", crate::shell::join(&run.command)));
    }
    if let Some(status) = run.exit_status {
        parts.push(format!("exit status {status}"));
    }
    if let Some(filter) = &run.device_filter {
        parts.push(format!(
            "device {} only (with deferred and unattributed work)",
            filter.describe()
        ));
    }
    if let Some(filter) = &run.task_filter {
        parts.push(format!("{} only", filter.describe()));
    }
    format!("{}\n", parts.join(", "))
}

/// Which times the table shows, and how much of the measured time was the probes' own.
fn self_time_note(devices: &[Device]) -> Option<String> {
    let (measured, own, waiting) = devices
        .iter()
        .flat_map(|device| device.ops.values())
        .filter_map(|op| op.latency.as_ref())
        .filter_map(|latency| {
            let waiting = latency.offcpu.map_or(0, |w| w.offcpu_ns);
            Some((latency.raw_total_ns?, latency.total_ns, waiting))
        })
        .fold((0u64, 0u64, 0u64), |(raw, own, wait), (r, o, w)| {
            (
                raw.saturating_add(r),
                own.saturating_add(o),
                wait.saturating_add(w),
            )
        });
    (measured > 0).then(|| {
        let probes = measured.saturating_sub(own).saturating_sub(waiting);
        let mut note = format!(
            "times are self times: the probes nested in each call ran {} of the measured time, taken out (raw_total_ns in the JSON keeps it)",
            percent(probes as f64 / measured as f64)
        );
        if waiting > 0 {
            note.push_str(&format!(
                "; tasks waited switched out inside the calls for {} of it (preempted or asleep on a lock), taken out too (offcpu_ns)",
                percent(waiting as f64 / measured as f64)
            ));
        }
        note.push('\n');
        note
    })
}

fn device_table(devices: &[Device], width: Option<u16>) -> String {
    if devices.is_empty() {
        return "no DMA or IOMMU activity was seen\n".to_string();
    }
    let mut table = Table::new(&[
        ("DEVICE", Align::Left),
        ("DRIVER", Align::Left),
        ("NAMES", Align::Left),
        ("DOMAIN", Align::Left),
        ("MAPS", Align::Right),
        ("MB", Align::Right),
        ("MAP P50", Align::Right),
        ("MAP P99", Align::Right),
        ("IOVA", Align::Right),
        ("SYNCS", Align::Right),
        ("FLUSHES", Align::Right),
        ("IOS", Align::Right),
        ("NS/IO", Align::Right),
        ("CPU", Align::Right),
    ]);
    for device in devices {
        let map = device.op(Op::DmaMap);
        let latency = map.latency.as_ref();
        table.row(vec![
            device.key.clone(),
            or_none(device.driver.clone()),
            or_none((!device.names.is_empty()).then(|| device.names.join(","))),
            or_none(device.domain_type.clone()),
            human_count(map.count),
            format!("{:.1}", map.bytes as f64 / 1e6),
            or_none(latency.map(|l| human_ns(l.p50_ns))),
            or_none(latency.map(|l| human_ns(l.p99_ns))),
            human_count(device.op(Op::IovaAlloc).count),
            human_count(device.op(Op::IotlbSync).count),
            human_count(device.op(Op::IotlbFlush).count),
            human_count(device.completions),
            or_none(
                device
                    .derived
                    .translation_ns_per_io
                    .map(|ns| format!("{ns:.0}")),
            ),
            or_none(device.derived.cpu_share.map(percent)),
        ]);
    }
    table.render(width)
}

fn probe_table(probes: &[ProbeEntry], width: Option<u16>) -> String {
    let mut table = Table::new(&[
        ("PROBE", Align::Left),
        ("TIER", Align::Left),
        ("STATUS", Align::Left),
        ("SYMBOL", Align::Left),
        ("LATENCY", Align::Left),
        ("NOTES", Align::Wrap),
    ]);
    for probe in probes {
        table.row(vec![
            probe.point.clone(),
            or_none(probe.tier.map(|t| t.name().to_string())),
            probe.status.name().to_string(),
            or_none(probe.symbol.clone()),
            if probe.latency { "yes" } else { "no" }.to_string(),
            or_none(probe_notes(probe)),
        ]);
    }
    table.render(width)
}

/// The reason, then the refused tiers: `no BTF; refused fentry (EPERM), kprobe (not built in)`.
fn probe_notes(probe: &ProbeEntry) -> Option<String> {
    let refused: Vec<String> = probe
        .refused
        .iter()
        .map(|r| format!("{} ({})", r.tier.name(), r.reason))
        .collect();
    let refused = (!refused.is_empty()).then(|| format!("refused {}", refused.join(", ")));
    match (probe.reason.clone(), refused) {
        (Some(reason), Some(refused)) => Some(format!("{reason}; {refused}")),
        (reason, refused) => reason.or(refused),
    }
}

fn or_none(value: Option<String>) -> String {
    value.unwrap_or_else(|| NONE.to_string())
}

#[derive(Clone, Copy)]
enum Align {
    Left,
    Right,
    /// Left, and the one kind of column whose cells wrap to fit a width (free text).
    Wrap,
}

/// The narrowest a wrapping column is made: narrower, its text would be a word a line.
const WRAP_MIN_WIDTH: u16 = 32;

/// Columns separated by two spaces, each as wide as its widest cell, no borders, no trailing
/// spaces (comfy-table). Given a width, the free-text columns wrap so that the table fits it where
/// it can; names and numbers never wrap.
struct Table {
    table: comfy_table::Table,
}

impl Table {
    fn new(headers: &[(&'static str, Align)]) -> Table {
        let mut table = comfy_table::Table::new();
        table
            .load_preset(comfy_table::presets::NOTHING)
            .set_header(headers.iter().map(|(h, _)| *h));
        for (index, (_, align)) in headers.iter().enumerate() {
            if let Some(column) = table.column_mut(index) {
                // Two spaces between columns: one on each side, none before the first.
                column.set_padding((u16::from(index > 0), 1));
                column.set_cell_alignment(match align {
                    Align::Left | Align::Wrap => comfy_table::CellAlignment::Left,
                    Align::Right => comfy_table::CellAlignment::Right,
                });
                column.set_constraint(match align {
                    Align::Wrap => comfy_table::ColumnConstraint::LowerBoundary(
                        comfy_table::Width::Fixed(WRAP_MIN_WIDTH),
                    ),
                    Align::Left | Align::Right => comfy_table::ColumnConstraint::ContentWidth,
                });
            }
        }
        Table { table }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.table.add_row(cells);
    }

    /// The table, fitted to `width` columns when one is given.
    fn render(self, width: Option<u16>) -> String {
        let mut table = self.table;
        match width {
            Some(width) => table
                .set_content_arrangement(comfy_table::ContentArrangement::Dynamic)
                .set_width(width),
            None => table.set_content_arrangement(comfy_table::ContentArrangement::Disabled),
        };
        let mut out = String::new();
        for line in table.lines() {
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::{full_report, minimal_report, report_with_probes};
    use crate::report::{ProbeStatus, Refusal, Tier};

    #[test]
    fn fitted_tables_wrap_their_cells_to_the_width() {
        let report = full_report();
        let wide = render_summary(&report);
        let fitted = render_summary_fitted(&report, Some(100));
        let table_lines = |text: &str| -> Vec<String> {
            text.lines()
                .skip_while(|l| !l.starts_with("PROBE"))
                .take_while(|l| !l.is_empty())
                .map(str::to_string)
                .collect()
        };
        assert!(table_lines(&wide).iter().any(|l| l.chars().count() > 100));
        let lines = table_lines(&fitted);
        assert!(lines.len() > table_lines(&wide).len(), "{fitted}");
        for line in &lines {
            assert!(line.chars().count() <= 100, "{line:?} in\n{fitted}");
        }
        // Names and numbers never wrap: the device row is whole.
        assert!(
            fitted.contains("0000:00:02.0  nvme    nvme0n1  DMA-FQ  4000  16.4"),
            "{fitted}"
        );
    }

    #[test]
    fn a_device_filter_is_said_on_the_run_line() {
        let mut report = full_report();
        report.apply_device_filter(&crate::device_filter::DeviceFilter {
            device: "nvme0n1".into(),
            pci_address: "0000:00:02.0".into(),
        });
        let text = render_summary(&report);
        assert!(
            text.lines().nth(1).is_some_and(|line| line.ends_with(
                ", device nvme0n1 (0000:00:02.0) only (with deferred and unattributed work)"
            )),
            "{text}"
        );
    }

    #[test]
    fn a_task_filter_is_said_on_the_run_line() {
        let mut report = full_report();
        report.run.task_filter = Some(crate::TaskFilter {
            cgroup: Some("/sys/fs/cgroup/vm".into()),
            cgroup_id: Some(77),
            ..Default::default()
        });
        let text = render_summary(&report);
        assert!(
            text.lines()
                .nth(1)
                .is_some_and(|line| line.ends_with(", cgroup /sys/fs/cgroup/vm only")),
            "{text}"
        );
    }

    #[test]
    fn a_full_report() {
        let expected = "\
iommutop 0.1.0, kernel 6.12.95+deb12-amd64, IOMMU intel (dmar0), default domain DMA-FQ (lazy), lab
run 2.0 s, interval 1.0 s, profile nvme-4k-read, workload fio, exit status 0

DEVICE        DRIVER  NAMES    DOMAIN  MAPS    MB  MAP P50  MAP P99  IOVA  SYNCS  FLUSHES   IOS  NS/IO    CPU
0000:00:02.0  nvme    nvme0n1  DMA-FQ  4000  16.4   1.92us   1.92us  4000   4000        0  4000   3000  0.60%
deferred      -       -        -          0   0.0        -        -     0      0        0     0      -      -
times are self times: the probes nested in each call ran 13.16% of the measured time, taken out (raw_total_ns in the JSON keeps it)

PROBE        TIER        STATUS       SYMBOL              LATENCY  NOTES
dma_map      fentry      attached     dma_map_page_attrs  yes      -
iommu_map    tracepoint  attached     iommu:map           no       refused fentry (no BTF for iommu_map), kprobe (kprobes are not built into this kernel)
iotlb_flush  -           unavailable  -                   no       no vendor IOTLB function in kallsyms

warnings:
  - kprobes unavailable: CONFIG_KPROBES is off
  - probe iotlb_flush unavailable: no vendor IOTLB function in kallsyms
  - latency not measured for iommu_map: attached at a tier that only counts
  - 2 calls nested deeper than the tracker follows (8): their nested work was charged to the call below them
";
        assert_eq!(render_summary(&full_report()), expected);
    }

    #[test]
    fn a_minimal_report() {
        let expected = "\
iommutop 0.1.0, kernel unknown, no IOMMU
run 0.0 s, interval 1.0 s

no DMA or IOMMU activity was seen

warnings:
  - no IOMMU is active on this host: DMA addresses are not translated, so there is no translation cost to measure
";
        assert_eq!(render_summary(&minimal_report()), expected);
    }

    #[test]
    fn a_command_run_and_a_probe_with_reason_and_refusals() {
        let mut report = minimal_report();
        report.run.command = vec!["dd".into(), "if=/dev/nvme0n1".into()];
        report.run.exit_status = Some(1);
        report.warnings.clear();
        report.probes = vec![ProbeEntry {
            point: "completion.nvme".into(),
            tier: Some(crate::report::Tier::Tracepoint),
            symbol: Some("nvme:nvme_complete_rq".into()),
            status: crate::report::ProbeStatus::Attached,
            latency: false,
            reason: Some("nvme_pci_complete_rq is never hit".into()),
            refused: vec![crate::report::Refusal {
                tier: crate::report::Tier::Fentry,
                reason: "EPERM".into(),
            }],
        }];
        let expected = "\
iommutop 0.1.0, kernel unknown, no IOMMU
run 0.0 s, interval 1.0 s, command `dd if=/dev/nvme0n1`, exit status 1

no DMA or IOMMU activity was seen

PROBE            TIER        STATUS    SYMBOL                 LATENCY  NOTES
completion.nvme  tracepoint  attached  nvme:nvme_complete_rq  no       nvme_pci_complete_rq is never hit; refused fentry (EPERM)
";
        assert_eq!(render_summary(&report), expected);
    }

    /// A point no tier could hook printed its refusals three times (reason, notes, warnings).
    #[test]
    fn each_refusal_is_said_once() {
        let refused = vec![
            Refusal {
                tier: Tier::Fentry,
                reason: "alloc_iova_fast: refused before verification".into(),
            },
            Refusal {
                tier: Tier::Kprobe,
                reason: "this kernel has no kprobe PMU".into(),
            },
        ];
        let unhooked = |point: &str| ProbeEntry {
            point: point.into(),
            tier: None,
            symbol: None,
            status: ProbeStatus::Unavailable,
            latency: false,
            reason: None,
            refused: refused.clone(),
        };
        let text = render_summary(&report_with_probes(vec![
            unhooked("iova_alloc"),
            unhooked("iova_free"),
        ]));
        let iova_free_row = text
            .lines()
            .find(|line| line.starts_with("iova_free "))
            .unwrap_or_default();
        assert_eq!(iova_free_row.matches("no kprobe PMU").count(), 1, "{text}");
        assert_eq!(
            text.matches("no kprobe PMU").count(),
            2,
            "one per row: {text}"
        );
        assert_eq!(
            text.matches("refused before verification").count(),
            2,
            "one per row: {text}"
        );
        assert!(
            text.contains(
                "not measured, every tier refused (the probe table says why): iova_alloc, \
                 iova_free"
            ),
            "{text}"
        );
    }
}
