//! A report as plain text for the terminal: host line, one row per device, the probes, warnings.

use crate::cross_check::CrossCheck;
use crate::direction::DirectionSplit;
use crate::losses::Losses;
use crate::report::{ProbeEntry, Report};
use crate::sample::Op;
use crate::snapshot::Device;
use crate::sriov::{vfs_under_physfn, Nesting};
use crate::text::{widest_line, wrap, Align, Table};
use iommutop_abi::units::{human_count, human_ns, percent};

const NONE: &str = "-";

/// The whole summary, ending in a newline; tables as wide as their cells (for files and pipes).
pub fn render_summary(report: &Report) -> String {
    render_summary_fitted(report, None)
}

/// The whole summary with its tables fitted to `width` columns (a terminal's), cells wrapped
/// where they must; as [`render_summary`] without a width.
pub fn render_summary_fitted(report: &Report, width: Option<u16>) -> String {
    let mut out = String::new();
    out.push_str(&wrap(&host_line(report), width));
    out.push_str(&wrap(&run_line(report), width));
    out.push('\n');
    out.push_str(&device_table(&report.devices, width));
    if let Some(table) = direction_table(&report.devices, width) {
        out.push('\n');
        out.push_str(&table);
    }
    if let Some(note) = self_time_note(&report.devices) {
        out.push_str(&wrap(&note, width));
    }
    if let Some(line) = probe_cost_line(report) {
        out.push_str(&wrap(&line, width));
    }
    if let Some(losses) = report.losses.as_ref().filter(|l| l.any()) {
        out.push('\n');
        out.push_str(&losses_table(losses, width));
    }
    if let Some(check) = &report.cross_check {
        out.push('\n');
        out.push_str(&cross_check_table(check, width));
    }
    if !report.probes.is_empty() {
        out.push('\n');
        out.push_str(&probe_table(&report.probes, width));
    }
    if !report.warnings.is_empty() {
        out.push_str("\nwarnings:\n");
        for warning in &report.warnings {
            out.push_str(&wrap(&format!("  - {warning}\n"), width));
        }
    }
    out
}

/// What the probes themselves cost, from the kernel's BPF run-time statistics: their programs'
/// runs, the time they took in all and per run, and that time as a share of one CPU over the run.
pub fn probe_cost_line(report: &Report) -> Option<String> {
    let programs = &report.self_overhead.programs;
    let runs: u64 = programs.iter().map(|p| p.run_count).sum();
    let ns: u64 = programs.iter().map(|p| p.run_time_ns).sum();
    if runs == 0 {
        return None;
    }
    let mut line = format!(
        "probe cost: {} runs of iommutop's BPF programs took {} in all ({} per run)",
        human_count(runs),
        human_ns(ns),
        human_ns(ns / runs)
    );
    if report.run.duration_s > 0.0 {
        line.push_str(&format!(
            ", {} of one CPU over the run",
            percent(ns as f64 / (report.run.duration_s * 1e9))
        ));
    }
    line.push('\n');
    Some(line)
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
        match iommu.dma_mode.and_then(|mode| mode.mode_name()) {
            Some(mode) => parts.push(format!("default domain {domain} ({mode})")),
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

/// A column of the device table: its title (the live view's, where it shows the same figure),
/// alignment, whether it is left out on a terminal too narrow for all of them, and its cell.
type DeviceColumn = (&'static str, Align, bool, fn(&Device) -> String);

/// The device table's columns; times carry their unit in each cell (`3.33us`), as in the live view.
const DEVICE_COLUMNS: [DeviceColumn; 14] = [
    ("DEVICE", Align::Left, false, |d| d.key.to_string()),
    ("DRIVER", Align::Left, true, |d| or_none(d.driver.clone())),
    ("NAMES", Align::Left, false, |d| {
        or_none((!d.names.is_empty()).then(|| d.names.join(",")))
    }),
    ("DOMAIN", Align::Left, true, |d| {
        or_none(d.domain_type.clone())
    }),
    ("MAPS", Align::Right, false, |d| {
        human_count(d.op(Op::DmaMap).count)
    }),
    ("MB", Align::Right, true, |d| {
        format!("{:.1}", d.op(Op::DmaMap).bytes as f64 / 1e6)
    }),
    ("MAP50", Align::Right, false, |d| {
        or_none(
            d.op(Op::DmaMap)
                .latency
                .as_ref()
                .map(|l| human_ns(l.p50_ns)),
        )
    }),
    ("MAP99", Align::Right, false, |d| {
        or_none(
            d.op(Op::DmaMap)
                .latency
                .as_ref()
                .map(|l| human_ns(l.p99_ns)),
        )
    }),
    ("IOVAS", Align::Right, true, |d| {
        human_count(d.op(Op::IovaAlloc).count)
    }),
    ("SYNCS", Align::Right, true, |d| {
        human_count(d.op(Op::IotlbSync).count)
    }),
    ("FLUSHES", Align::Right, true, |d| {
        human_count(d.op(Op::IotlbFlush).count)
    }),
    ("IOS", Align::Right, false, |d| human_count(d.completions)),
    ("NS/IO", Align::Right, false, |d| {
        or_none(
            d.derived
                .translation_ns_per_io
                .filter(|ns| ns.is_finite() && *ns >= 0.0)
                .map(|ns| human_ns(ns.round() as u64)),
        )
    }),
    ("CPU%", Align::Right, false, |d| {
        or_none(d.derived.cpu_share.map(percent))
    }),
];

/// The device table, SR-IOV virtual functions indented under their physical function. On a
/// terminal too narrow for every column, the columns marked optional are left out (last first)
/// until it fits, and a line says which.
fn device_table(devices: &[Device], width: Option<u16>) -> String {
    if devices.is_empty() {
        return "no DMA or IOMMU activity was seen\n".to_string();
    }
    let rows: Vec<&Device> = devices.iter().collect();
    let listed = vfs_under_physfn(&rows);
    let render = |columns: &[&DeviceColumn]| {
        let headers: Vec<(&str, Align)> = columns.iter().map(|c| (c.0, c.1)).collect();
        let mut table = Table::new(&headers);
        for (device, nesting) in &listed {
            table.row(
                columns
                    .iter()
                    .map(|c| match c.0 {
                        "DEVICE" => device_cell(device, *nesting),
                        _ => (c.3)(device),
                    })
                    .collect(),
            );
        }
        table.render(width)
    };
    let mut columns: Vec<&DeviceColumn> = DEVICE_COLUMNS.iter().collect();
    let mut left_out = Vec::new();
    let mut text = render(&columns);
    while let Some(width) = width {
        if widest_line(&text) <= usize::from(width) {
            break;
        }
        let Some(index) = columns.iter().rposition(|c| c.2) else {
            break;
        };
        left_out.insert(0, columns.remove(index).0);
        text = render(&columns);
    }
    if listed
        .iter()
        .any(|(_, nesting)| matches!(nesting, Nesting::UnderPhysfn(_)))
    {
        text.push_str(&wrap(
            "(indented: SR-IOV virtual functions, each under its physical function)\n",
            width,
        ));
    }
    if !left_out.is_empty() {
        text.push_str(&wrap(
            &format!(
                "(left out to fit the terminal: {}; `--format json` has every figure)\n",
                left_out.join(", ")
            ),
            width,
        ));
    }
    text
}

/// The rows' DMA maps by direction (those with a split: rows that made maps, in reports of
/// builds that split them), and for a NIC per packet sent and received; None without any.
fn direction_table(devices: &[Device], width: Option<u16>) -> Option<String> {
    let split: Vec<(&Device, &DirectionSplit)> = devices
        .iter()
        .filter_map(|d| Some((d, d.dma_map_directions.as_ref()?)))
        .collect();
    if split.is_empty() {
        return None;
    }
    let mut table = Table::new(&[
        ("MAPS BY DIRECTION", Align::Left),
        ("TO DEV", Align::Right),
        ("PER SENT", Align::Right),
        ("FROM DEV", Align::Right),
        ("PER RCVD", Align::Right),
        ("BOTH", Align::Right),
        ("UNKNOWN", Align::Right),
    ]);
    let ratio = |r: Option<f64>| or_none(r.map(|r| format!("{r:.2}")));
    for (device, s) in split {
        table.row(vec![
            device.key.to_string(),
            human_count(s.to_device.count),
            ratio(s.to_device_per_packet_sent),
            human_count(s.from_device.count),
            ratio(s.from_device_per_packet_received),
            human_count(s.bidirectional.count),
            human_count(s.not_known.count),
        ]);
    }
    let mut text = table.render(width);
    text.push_str(&wrap(
        "(TO DEV: buffers the device reads, a NIC's packets to send; FROM DEV: buffers it writes, a NIC's receive buffers; PER SENT, PER RCVD: those maps per packet the NIC sent, received; UNKNOWN: maps whose direction no probe read)\n",
        width,
    ));
    Some(text)
}

/// A row's key; a virtual function's indented under its physical function's row, or, where that
/// has no row, followed by whose it is.
fn device_cell(device: &Device, nesting: Nesting) -> String {
    match nesting {
        Nesting::Own => device.key.to_string(),
        Nesting::UnderPhysfn(_) => format!("  {}", device.key),
        Nesting::PhysfnAbsent(pf) => format!("{} (VF of {pf})", device.key),
    }
}

/// The operations with calls untimed, lost or open at the end, one line each, and a line per
/// group of several operations that lost calls (its figure is theirs together).
fn losses_table(losses: &Losses, width: Option<u16>) -> String {
    let mut table = Table::new(&[
        ("OP", Align::Left),
        ("CALLS", Align::Right),
        ("UNTIMED", Align::Right),
        ("LOST", Align::Right),
        ("OPEN AT END", Align::Right),
    ]);
    for (op, o) in &losses.ops {
        if !o.any() {
            continue;
        }
        let untimed = match (o.untimed, o.untimed_share) {
            (Some(n), Some(share)) if n > 0 => format!("{} ({})", human_count(n), percent(share)),
            (untimed, _) => or_none(untimed.map(human_count)),
        };
        table.row(vec![
            op.name().to_string(),
            human_count(o.calls),
            untimed,
            or_none(o.lost.map(human_count)),
            human_count(o.open_at_end),
        ]);
    }
    let mut out = wrap(
        "calls not seen whole (untimed: counted, not timed; lost: seen by no program; open at \
         end: counted nowhere):\n",
        width,
    );
    out.push_str(&table.render(width));
    for group in losses.lost_groups().filter(|g| g.ops.len() > 1) {
        let names: Vec<&str> = group.ops.iter().map(|op| op.name()).collect();
        out.push_str(&wrap(
            &format!(
                "lost: the {} of {} are one figure (one group of programs serves them: which \
                 each call was, the kernel cannot say)\n",
                human_count(group.lost),
                crate::losses::both(&names)
            ),
            width,
        ));
    }
    out
}

/// The probes' counts against the kernel's own events, a row per device and operation, and what
/// could not be compared.
fn cross_check_table(check: &CrossCheck, width: Option<u16>) -> String {
    let mut out = wrap(
        "cross-check against the kernel's own trace events (dma:*, iommu:map and iommu:unmap):\n",
        width,
    );
    if !check.rows.is_empty() {
        let mut table = Table::new(&[
            ("DEVICE", Align::Left),
            ("OP", Align::Left),
            ("PROBES", Align::Right),
            ("KERNEL", Align::Right),
            ("KNOWN APART", Align::Right),
            ("AGREE", Align::Left),
        ]);
        for row in &check.rows {
            table.row(vec![
                row.device.clone().unwrap_or_else(|| "all devices".into()),
                row.op.name().to_string(),
                human_count(row.probes),
                human_count(row.kernel),
                human_count(row.kernel_skipped + row.without_event),
                if row.agrees {
                    "yes".into()
                } else {
                    format!("no, {}", percent(row.apart()))
                },
            ]);
        }
        out.push_str(&table.render(width));
        out.push_str(&wrap(
            "known apart: runs the kernel skipped of its own counting programs, and IOVA-API \
             calls, which have no event\n",
            width,
        ));
    }
    for note in &check.notes {
        out.push_str(&wrap(&format!("  {note}\n"), width));
    }
    out
}

/// The probe table. Fitted to a width, the notes (why a tier was refused) follow the table, one
/// wrapped line per probe, where a column of them would leave the symbols a word a line.
fn probe_table(probes: &[ProbeEntry], width: Option<u16>) -> String {
    let notes_apart = width.is_some();
    let mut headers = vec![
        ("PROBE", Align::Left),
        ("TIER", Align::Left),
        ("STATUS", Align::Left),
        ("LATENCY", Align::Left),
        ("SYMBOLS", Align::Wrap),
    ];
    if !notes_apart {
        headers.push(("NOTES", Align::Wrap));
    }
    let mut table = Table::new(&headers);
    for probe in probes {
        let mut row = vec![
            probe.point.clone(),
            or_none(probe.tier.map(|t| t.name().to_string())),
            probe.status.name().to_string(),
            if probe.latency { "yes" } else { "no" }.to_string(),
            or_none(probe.symbol.clone()),
        ];
        if !notes_apart {
            row.push(or_none(probe_notes(probe)));
        }
        table.row(row);
    }
    let mut out = table.render(width);
    let notes: Vec<String> = probes
        .iter()
        .filter_map(|p| Some(format!("  {}: {}", p.point, probe_notes(p)?)))
        .collect();
    if notes_apart && !notes.is_empty() {
        out.push_str("probe notes:\n");
        out.push_str(&wrap(&(notes.join("\n") + "\n"), width));
    }
    out
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

/// Width of the bars of [`render_histograms`], in characters.
const HIST_BAR: usize = 30;

/// Each timed operation's latency distribution, per device, as log2 histograms in the style of
/// bcc's biolatency: one line per power of two of nanoseconds, from the first slot with calls to
/// the last, with a bar scaled to the fullest slot. `only` keeps the rows that answer to it.
pub fn render_histograms(report: &Report, only: Option<&str>) -> String {
    let mut out = String::new();
    for device in report
        .devices
        .iter()
        .filter(|d| only.is_none_or(|name| d.answers_to(name)))
    {
        for (op, stats) in &device.ops {
            let Some(latency) = &stats.latency else {
                continue;
            };
            let slots = latency.hist.log2_slots();
            let (Some(first), Some(last)) = (
                slots.iter().position(|&c| c > 0),
                slots.iter().rposition(|&c| c > 0),
            ) else {
                continue;
            };
            let names = if device.names.is_empty() {
                String::new()
            } else {
                format!(" ({})", device.names.join(", "))
            };
            out.push_str(&format!(
                "\n{}{names} {}: {} timed calls\n",
                device.key,
                op.name(),
                latency.timed
            ));
            out.push_str(&format!(
                "{:>21}{:<4}: {:<8} distribution\n",
                "nsecs", "", "count"
            ));
            let fullest = slots.iter().copied().max().unwrap_or(1).max(1);
            for (slot, &count) in slots.iter().enumerate().take(last + 1).skip(first) {
                let low = crate::hist::log2_slot_lower_bound(slot);
                let high = crate::hist::log2_slot_upper_bound(slot)
                    .map_or_else(|| "...".to_string(), |h| (h - 1).to_string());
                // Rounded up, so that a slot with any call shows at least one mark.
                let marks = (count as usize * HIST_BAR).div_ceil(fullest as usize);
                out.push_str(&format!(
                    "{low:>10} -> {high:<10} : {count:<8} |{:<HIST_BAR$}|\n",
                    "*".repeat(marks)
                ));
            }
        }
    }
    if out.is_empty() {
        out.push_str("\nno timed calls: no latency histograms in this report\n");
    }
    out
}

#[cfg(test)]
mod tests;
