//! The selected device in detail: what it is, its headline numbers, sparklines of the last
//! minute, the probe tier behind each number, and the latency histograms of map, unmap, IOVA
//! allocation and IOTLB flush.

use super::{fit, histogram, style};
use crate::columns::mapped_bytes_per_s;
use crate::format;
use crate::history::Point;
use crate::state::State;
use iommutop_model::derive::IoBasis;
use iommutop_model::report::Tier;
use iommutop_model::sample::Op;
use iommutop_model::snapshot::{Device, Latency, RowKind};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Sparkline, Wrap};
use ratatui::Frame;

/// Width of a sparkline's label (`maps/s `) and of its current value.
const SPARK_LABEL: u16 = 7;
const SPARK_VALUE: u16 = 8;

/// Narrowest a histogram gets before fewer are put side by side.
const HISTOGRAM_MIN_WIDTH: u16 = 18;

/// Height a row of histograms is given before the sparklines grow.
const HISTOGRAM_HEIGHT: u16 = 10;

/// Inner height from which lines may wrap and a blank line separates the histograms.
const ROOMY: u16 = 16;

pub fn render(state: &State, frame: &mut Frame, area: Rect) {
    let Some(device) = state.selected_device() else {
        probes_only(state, frame, area);
        return;
    };
    let block = Block::bordered().title(title(device, area.width.saturating_sub(4) as usize));
    let inner = block.inner(area);
    frame.render_widget(block, area);

    let summary = summary_line(device);
    let tiers = tier_line(state, device);
    // On a short pane every line counts: one line each for the summary and the tiers (cut at
    // the edge), no gap before the histograms.
    let roomy = inner.height >= ROOMY;
    let summary_height = if roomy {
        lines_needed(&summary, inner.width)
    } else {
        1
    };
    let tiers_height = if roomy {
        lines_needed(&tiers, inner.width)
    } else {
        1
    };
    let gap = u16::from(roomy);
    let sparks: [(&str, Series); 3] = [
        ("maps/s", Series::MapsPerS),
        ("ns/IO", Series::NsPerIo),
        ("CPU", Series::Cpu),
    ];
    // Taller sparklines when the histograms would leave space unused.
    let fixed = summary_height + tiers_height + gap;
    let spark_height = (inner.height.saturating_sub(fixed + HISTOGRAM_HEIGHT) / 3).clamp(1, 2);
    let [summary_area, spark_area, tiers_area, _, hist_area] = Layout::vertical([
        Constraint::Length(summary_height),
        Constraint::Length(spark_height * sparks.len() as u16),
        Constraint::Length(tiers_height),
        Constraint::Length(gap),
        Constraint::Min(0),
    ])
    .areas(inner);
    frame.render_widget(
        Paragraph::new(summary).wrap(Wrap { trim: true }),
        summary_area,
    );
    for (i, (label, series)) in sparks.iter().enumerate() {
        let row = Rect {
            y: spark_area.y + i as u16 * spark_height,
            height: spark_height,
            ..spark_area
        }
        .intersection(spark_area);
        if !row.is_empty() {
            sparkline(state, device, frame, row, label, *series);
        }
    }
    frame.render_widget(Paragraph::new(tiers).wrap(Wrap { trim: true }), tiers_area);
    histograms(state, device, frame, hist_area);
}

/// Lines `line` takes wrapped at `width`.
fn lines_needed(line: &Line, width: u16) -> u16 {
    if width == 0 {
        return 1;
    }
    (line.width() as u16).div_ceil(width).clamp(1, 2)
}

/// Before any device shows up: which tier each probe point got, so the numbers to come can be
/// read (latency needs fentry or kprobe; tracepoints only count).
fn probes_only(state: &State, frame: &mut Frame, area: Rect) {
    let block = Block::bordered().title(Span::styled(" Probes ", style::title()));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let mut lines = Vec::new();
    for op in Op::ALL {
        let probes: Vec<_> = state.probes_for(op).collect();
        if probes.is_empty() {
            continue;
        }
        let timed = probes.iter().any(|p| p.latency);
        let tier = tier_of(state, op);
        let what = if tier == "none" {
            "not attached"
        } else if timed {
            "counts and latency"
        } else {
            "counts only"
        };
        lines.push(Line::from(vec![
            Span::raw(format!("{:<16}", op.name())),
            Span::styled(format!("{tier:<22}"), style::key()),
            Span::styled(what, style::dim()),
        ]));
    }
    if lines.is_empty() {
        lines.push(Line::styled("no probe attached", style::dim()));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

/// ` 0000:00:04.0 nvme · nvme0n1 · group 3 DMA-FQ · dmar0 `.
fn title(device: &Device, width: usize) -> Line<'static> {
    let mut parts = Vec::new();
    if let Some(driver) = &device.driver {
        parts.push(driver.clone());
    }
    if !device.names.is_empty() {
        parts.push(device.names.join(","));
    }
    match (device.iommu_group, &device.domain_type) {
        (Some(group), Some(domain)) => parts.push(format!("group {group} {domain}")),
        (Some(group), None) => parts.push(format!("group {group}")),
        (None, Some(domain)) => parts.push(domain.clone()),
        (None, None) => {}
    }
    if let Some(unit) = &device.iommu_unit {
        parts.push(unit.clone());
    }
    let kind = match device.kind {
        RowKind::Deferred => Some("deferred flush-queue work, no device in flight"),
        RowKind::Unattributed => Some("IOMMU work outside the DMA API (VFIO, ...)"),
        _ => None,
    };
    parts.extend(kind.map(str::to_string));
    let rest = fit(
        &parts.join(" · "),
        width.saturating_sub(device.key.to_string().len() + 3),
    );
    Line::from(vec![
        Span::styled(format!(" {} ", device.key), style::title()),
        Span::raw(format!("{rest} ")),
    ])
}

/// `12.3k maps/s · 50.4 MB/s · 12.3k I/O/s · 1.00 maps/IO · 0.02 flushes/IO · 0 failed`.
fn summary_line(device: &Device) -> Line<'static> {
    let map = device.op(Op::DmaMap);
    let io = device.op(Op::Completion);
    let derived = &device.derived;
    let mut parts = vec![
        format!("{} maps/s", format::rate(map.rate_per_s)),
        format!("{} MB/s", format::mb_per_s(mapped_bytes_per_s(device))),
    ];
    match derived.io_basis {
        Some(IoBasis::Completions) | None => {
            parts.push(format!("{} I/O/s", format::rate(io.rate_per_s)))
        }
        Some(IoBasis::DmaMaps) => parts.push("no completions: 1 map = 1 I/O".to_string()),
        Some(IoBasis::Packets) => parts.push(format!(
            "{} rx + {} tx pkt/s",
            format::rate(io.rate_per_s),
            format::rate(device.op(Op::TxPackets).rate_per_s)
        )),
    }
    let per = if derived.io_basis == Some(IoBasis::Packets) {
        "pkt"
    } else {
        "IO"
    };
    if derived.maps_per_io.is_some() {
        parts.push(format!("{} maps/{per}", format::ratio(derived.maps_per_io)));
    }
    if derived.iotlb_flushes_per_io.is_some() {
        parts.push(format!(
            "{} flushes/{per}",
            format::ratio(derived.iotlb_flushes_per_io)
        ));
    }
    let slow = device.op(Op::IovaAllocSlow).count;
    let alloc = device.op(Op::IovaAlloc).count;
    if slow > 0 && alloc > 0 {
        parts.push(format!(
            "IOVA slow path {}",
            format::percent(slow as f64 / alloc as f64)
        ));
    }
    let failed: u64 = device.ops.values().map(|s| s.failures).sum();
    if failed > 0 {
        return Line::from(vec![
            Span::raw(parts.join(" · ")),
            Span::styled(format!(" · {failed} failed"), style::warn()),
        ]);
    }
    Line::from(parts.join(" · "))
}

#[derive(Debug, Clone, Copy)]
enum Series {
    MapsPerS,
    NsPerIo,
    Cpu,
}

impl Series {
    fn value(self, p: &Point) -> Option<f64> {
        match self {
            Series::MapsPerS => Some(p.maps_per_s),
            Series::NsPerIo => p.ns_per_io,
            // In millionths, so that small shares still draw.
            Series::Cpu => p.cpu_share.map(|s| s * 1e6),
        }
    }

    fn now(self, device: &Device) -> String {
        match self {
            Series::MapsPerS => format::rate(device.op(Op::DmaMap).rate_per_s),
            Series::NsPerIo => format::ns_f64(device.derived.translation_ns_per_io),
            Series::Cpu => format::cpu(device.derived.cpu_share),
        }
    }
}

/// `maps/s ▁▂▃▅▇█▇▅   12.3k`: the last minute, one cell per interval, newest on the right.
fn sparkline(
    state: &State,
    device: &Device,
    frame: &mut Frame,
    area: Rect,
    label: &str,
    series: Series,
) {
    let [label_area, spark_area, value_area] = Layout::horizontal([
        Constraint::Length(SPARK_LABEL),
        Constraint::Min(0),
        Constraint::Length(SPARK_VALUE),
    ])
    .areas(area);
    let value_area = Rect {
        height: 1,
        ..value_area
    };
    frame.render_widget(
        Paragraph::new(Span::styled(label.to_string(), style::dim())),
        label_area,
    );
    let data = state
        .history
        .series(&device.key, spark_area.width as usize, |p| series.value(p));
    // Right-aligned, so the newest interval is always at the right edge.
    let pad = (spark_area.width as usize).saturating_sub(data.len()) as u16;
    let spark_area = Rect {
        x: spark_area.x + pad,
        width: spark_area.width - pad,
        ..spark_area
    };
    frame.render_widget(
        Sparkline::default().data(&data).style(style::bar()),
        spark_area,
    );
    frame.render_widget(
        Paragraph::new(Line::from(format!("{:>7}", series.now(device)))),
        value_area,
    );
}

/// `probes iommu_map fentry · iotlb_sync kprobe · completion tracepoint`: the tiers of the
/// numbers without a histogram here (the histograms name theirs in their titles).
fn tier_line(state: &State, device: &Device) -> Line<'static> {
    let mut spans = vec![Span::styled("probes ", style::dim())];
    let shown = shown_ops(device);
    let others = [
        Op::DmaMap,
        Op::IommuMap,
        Op::IotlbSync,
        Op::Completion,
        Op::IovaAllocSlow,
    ]
    .into_iter()
    .filter(|op| !shown.contains(op));
    for (i, op) in others.enumerate() {
        if i > 0 {
            spans.push(Span::styled(" · ", style::dim()));
        }
        spans.push(Span::raw(format!("{} ", op.name())));
        spans.push(Span::styled(tier_of(state, op), style::key()));
    }
    Line::from(spans)
}

/// The tier(s) an op's numbers come from: `fentry`, `tracepoint`, `none`.
fn tier_of(state: &State, op: Op) -> String {
    let mut tiers: Vec<&str> = state
        .probes_for(op)
        .filter_map(|p| p.tier.map(Tier::name))
        .collect();
    tiers.dedup();
    if tiers.is_empty() {
        "none".to_string()
    } else {
        tiers.join("+")
    }
}

/// The four histograms of a row: what its kind of work spends time in.
fn shown_ops(device: &Device) -> [Op; 4] {
    match device.kind {
        RowKind::Deferred => [Op::FqFlush, Op::IovaFree, Op::IotlbFlush, Op::IommuUnmap],
        RowKind::Unattributed => [Op::IommuMap, Op::IommuUnmap, Op::IotlbSync, Op::IotlbFlush],
        _ => [Op::DmaMap, Op::DmaUnmap, Op::IovaAlloc, Op::IotlbFlush],
    }
}

/// As many histograms side by side as fit, in as many rows as the height allows.
fn histograms(state: &State, device: &Device, frame: &mut Frame, area: Rect) {
    if area.height < 3 || area.width < 12 {
        return;
    }
    let ops = shown_ops(device);
    let per_row = ((area.width + 1) / (HISTOGRAM_MIN_WIDTH + 1)).clamp(1, 4) as usize;
    let rows_needed = ops.len().div_ceil(per_row);
    // Each row of histograms needs its title, percentiles and at least two slots.
    let rows = rows_needed.min((area.height / 4).max(1) as usize);
    let row_areas = Layout::vertical(vec![Constraint::Fill(1); rows]).split(area);
    for (r, row_area) in row_areas.iter().enumerate() {
        let cells = Layout::horizontal(vec![Constraint::Fill(1); per_row])
            .spacing(1)
            .split(*row_area);
        for (c, cell) in cells.iter().enumerate() {
            let Some(&op) = ops.get(r * per_row + c) else {
                continue;
            };
            let stats = device.op(op);
            let tier = tier_of(state, op);
            let mut title = Line::from(vec![
                Span::styled(op.name().to_string(), style::title()),
                Span::styled(format!(" {tier}"), style::dim()),
            ]);
            if shows_self_time(stats.latency.as_ref()) {
                title.push_span(Span::styled(" self", style::dim()));
            }
            let missing = if stats.count == 0 {
                vec!["no calls".to_string()]
            } else {
                let why = match tier.as_str() {
                    "tracepoint" => "not timed (tracepoint)",
                    "none" => "not probed",
                    _ => "not timed",
                };
                vec![
                    format!("{} calls", format::rate(stats.count as f64)),
                    why.to_string(),
                ]
            };
            histogram::render(frame, *cell, title, stats.latency.as_ref(), missing);
        }
    }
}

/// Whether the latency shown is a self time that differs from the measured one (the probes of
/// calls nested in these calls ran inside them, and their run time was taken out).
fn shows_self_time(latency: Option<&Latency>) -> bool {
    latency.is_some_and(|l| l.raw_total_ns.is_some_and(|raw| raw > l.total_ns))
}
