//! Reports as one self-contained HTML page (`--html FILE`): per device the latency distribution
//! of every timed operation, counts and rates over the run's intervals, where the translation time
//! goes, and the sampled call paths; for `compare`, A and B on the same charts under the findings.
//!
//! Pure functions from reports to a `String`. The page fetches nothing: its charts are inline SVG
//! (drawn by plotters), its style an inline `<style>`, it has no script, image or font of its own
//! to load. Every string that comes from a report goes through [`escape`].

mod charts;
mod compare;
mod diagnose;
mod escape;
mod paths;
pub mod time_bar;

pub use charts::sweep_chart;
pub use compare::render_comparison;
pub use diagnose::render_diagnosis;
pub use escape::escape;

use crate::facts::DomainType;
use crate::losses::Losses;
use crate::report::Report;
use crate::sample::Op;
use crate::snapshot::{Device, RowKey, RowKind};
use crate::sriov::{vfs_under_physfn, Nesting};
use charts::{HistSeries, Line};
use iommutop_abi::units::{human_ns, three_digits};
use std::fmt::Write;

/// The page of one report; `source` names it (the file it was read from).
pub fn render_report(report: &Report, source: &str) -> String {
    let mut body = format!(
        "<h1>iommutop report <span class=\"source\">{}</span></h1>\n",
        escape(source)
    );
    body.push_str(&report_sections(report, true));
    page(
        &format!("iommutop report: {source}"),
        &body,
        &report.tool.version,
    )
}

/// Everything a report's page shows under its title: what ran, the warnings, the devices, the
/// verdict (folded, when `with_verdict`) and a section per row.
fn report_sections(report: &Report, with_verdict: bool) -> String {
    let mut body = run_facts(report);
    body.push_str(&warnings(&report.warnings));
    let listed = shown_rows(report);
    body.push_str(&overview(&listed));
    if let Some(losses) = report.losses.as_ref().filter(|l| l.any()) {
        body.push_str(&losses_table(losses));
    }
    if with_verdict {
        let verdict = crate::diagnose::verdict(report, None, None);
        let _ = writeln!(
            body,
            "<details class=\"verdict\"><summary>verdict (as <code>iommutop report</code> prints \
             it)</summary><pre>{}</pre></details>",
            escape(&verdict)
        );
    }
    for (index, (device, nesting)) in listed.iter().enumerate() {
        body.push_str(&device_section(report, device, *nesting, index));
    }
    body
}

/// The rows worth a section: any with something counted, those that mapped memory for DMA first
/// (most maps first), then by translation time; SR-IOV virtual functions right under their
/// physical function ([`vfs_under_physfn`]).
fn shown_rows(report: &Report) -> Vec<(&Device, Nesting)> {
    let mut rows: Vec<&Device> = report
        .devices
        .iter()
        .filter(|d| d.completions > 0 || d.ops.values().any(|s| s.count > 0))
        .collect();
    rows.sort_by_key(|d| {
        (
            std::cmp::Reverse(d.op(Op::DmaMap).count),
            std::cmp::Reverse(d.derived.translation_ns.unwrap_or(0)),
        )
    });
    vfs_under_physfn(&rows)
}

/// `0000:00:05.0 (eth0, e1000e)`, escaped.
fn label(device: &Device) -> String {
    escape(&crate::compare::work::label(device))
}

/// The host, the IOMMU and what ran.
fn run_facts(report: &Report) -> String {
    let host = &report.host;
    let iommu = if host.iommu.present {
        format!(
            "{}, {}",
            crate::compare::iommu_description(host),
            host.iommu
                .dma_mode
                .and_then(DomainType::mode_name)
                .unwrap_or("mode unknown"),
        )
    } else {
        "none".into()
    };
    let what = report
        .run
        .workload
        .as_ref()
        .map(|w| w.name.clone())
        .or_else(|| {
            (!report.run.command.is_empty()).then(|| crate::shell::join(&report.run.command))
        })
        .unwrap_or_else(|| "nothing (probes only)".into());
    let mut facts = vec![
        ("kernel", host.kernel_release.clone().unwrap_or_default()),
        ("IOMMU", iommu),
        ("ran", what),
        (
            "when",
            format!(
                "{} for {:.1} s, sampled every {} s",
                report.run.started_at,
                report.run.duration_s,
                three_digits(report.run.interval_s)
            ),
        ),
        (
            "written by",
            format!(
                "{} {}{}",
                report.tool.name,
                report.tool.version,
                if host.lab {
                    " in the iommutop lab (QEMU)"
                } else {
                    ""
                }
            ),
        ),
    ];
    if let Some(ns) = report.self_overhead.total_ns_per_event {
        facts.push(("probe cost", format!("{ns:.0} ns per event")));
    }
    let mut out = String::from("<dl class=\"facts\">\n");
    for (name, value) in facts {
        let _ = writeln!(out, "<dt>{name}</dt><dd>{}</dd>", escape(&value));
    }
    out.push_str("</dl>\n");
    out
}

fn warnings(warnings: &[String]) -> String {
    if warnings.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "<details class=\"warnings\"><summary>{} warning{}</summary><ul>\n",
        warnings.len(),
        if warnings.len() == 1 { "" } else { "s" }
    );
    for warning in warnings {
        let _ = writeln!(out, "<li>{}</li>", escape(warning));
    }
    out.push_str("</ul></details>\n");
    out
}

/// One line per row: what it is, its DMA maps and completions, what translation costs it; a
/// virtual function's row indented under its physical function's, or saying whose it is.
fn overview(rows: &[(&Device, Nesting)]) -> String {
    let mut out = String::from(
        "<h2>Devices</h2>\n<table class=\"overview\"><thead><tr><th>row</th><th>kind</th>\
         <th>names</th><th>driver</th><th>domain</th><th>dma_map</th><th>completions</th>\
         <th>translation per I/O</th><th>CPU</th></tr></thead><tbody>\n",
    );
    for (index, (d, nesting)) in rows.iter().enumerate() {
        let (row_attributes, cell_class, vf_of) = match nesting.physfn() {
            None => (String::new(), "", String::new()),
            Some(pf) => (
                format!(" class=\"vf\" data-physfn=\"{pf}\""),
                " class=\"vf\"",
                format!(" <span class=\"vf-of\">VF of {pf}</span>"),
            ),
        };
        let _ = writeln!(
            out,
            "<tr data-device=\"{key}\"{row_attributes}><td{cell_class}><a href=\"#dev-{index}\">{key}</a>\
             {vf_of}</td><td>{kind}</td>\
             <td>{names}</td><td>{driver}</td><td>{domain}</td>\
             <td class=\"num\" data-field=\"dma_map\">{maps}</td>\
             <td class=\"num\" data-field=\"completions\">{completions}</td>\
             <td class=\"num\">{per_io}</td><td class=\"num\">{cpu}</td></tr>",
            key = escape(&d.key.to_string()),
            kind = kind_name(d.kind),
            names = escape(&d.names.join(", ")),
            driver = escape(d.driver.as_deref().unwrap_or("")),
            domain = escape(d.domain_type.as_deref().unwrap_or("")),
            maps = d.op(Op::DmaMap).count,
            completions = d.completions,
            per_io = per_io(d),
            cpu = d
                .derived
                .cpu_share
                .map_or("–".into(), |s| format!("{:.2}%", s * 100.0)),
        );
    }
    out.push_str("</tbody></table>\n");
    out
}

/// The operations with calls untimed, lost or open at the end (docs/probes.md, "How the loss
/// figures are computed"), and a note per group of several operations that lost calls.
fn losses_table(losses: &Losses) -> String {
    let mut out = String::from(
        "<h2>Calls not seen whole</h2>\n<table class=\"losses\"><thead><tr><th>operation</th>\
         <th>calls</th><th>untimed (counted, not timed)</th><th>lost (seen by no program)</th>\
         <th>open at end (counted nowhere)</th></tr></thead><tbody>\n",
    );
    for (op, o) in &losses.ops {
        if !o.any() {
            continue;
        }
        let untimed = match (o.untimed, o.untimed_share) {
            (Some(n), Some(share)) if n > 0 => format!("{n} ({:.2}%)", share * 100.0),
            (Some(n), _) => n.to_string(),
            (None, _) => "–".into(),
        };
        let _ = writeln!(
            out,
            "<tr data-op=\"{op}\"><td>{op}</td><td class=\"num\">{calls}</td>\
             <td class=\"num\" data-field=\"untimed\">{untimed}</td>\
             <td class=\"num\" data-field=\"lost\">{lost}</td>\
             <td class=\"num\" data-field=\"open_at_end\">{open}</td></tr>",
            op = op.name(),
            calls = o.calls,
            lost = o.lost.map_or("–".into(), |n| n.to_string()),
            open = o.open_at_end,
        );
    }
    out.push_str("</tbody></table>\n");
    for group in losses.lost_groups().filter(|g| g.ops.len() > 1) {
        let names: Vec<&str> = group.ops.iter().map(|op| op.name()).collect();
        let _ = writeln!(
            out,
            "<p class=\"note\">The {} lost calls of {} are one figure: one group of programs \
             serves them, and which each call was, the kernel cannot say.</p>",
            group.lost,
            crate::losses::both(&names)
        );
    }
    out
}

fn kind_name(kind: RowKind) -> &'static str {
    match kind {
        RowKind::Pci => "pci",
        RowKind::Device => "device",
        RowKind::Deferred => "deferred",
        RowKind::Unattributed => "unattributed",
        RowKind::Disk => "disk",
        RowKind::Netdev => "netdev",
    }
}

/// `1.23us per packet`, or `–` when not measured.
fn per_io(d: &Device) -> String {
    match (d.derived.translation_ns_per_io, d.derived.io_basis) {
        (Some(ns), Some(basis)) => {
            let unit = match basis {
                crate::derive::IoBasis::Completions => "completion",
                crate::derive::IoBasis::DmaMaps => "map",
                crate::derive::IoBasis::Packets => "packet",
            };
            format!("{} per {unit}", human_ns(ns.round() as u64))
        }
        _ => "–".into(),
    }
}

/// Everything about one row: its counts, the time bar, a latency chart per timed operation, its
/// rates over time and its call paths. Rows that mapped nothing for DMA start folded.
fn device_section(report: &Report, d: &Device, nesting: Nesting, index: usize) -> String {
    let open = if d.op(Op::DmaMap).count > 0 {
        " open"
    } else {
        ""
    };
    let mut out = format!(
        "<section class=\"device\" id=\"dev-{index}\" data-device=\"{}\">\n<details{open}>\
         <summary><h2>{}</h2></summary>\n",
        escape(&d.key.to_string()),
        label(d)
    );
    if let Some(pf) = nesting.physfn() {
        let _ = writeln!(
            out,
            "<p class=\"vf-of\">SR-IOV virtual function of {pf}</p>"
        );
    }
    out.push_str(&ops_table(&[("", d)]));
    out.push_str(&directions_table(d));
    out.push_str("<h3>Where the time goes</h3>\n");
    out.push_str(&time_bar_html(d));
    out.push_str("<h3>Latency of the timed operations</h3>\n<div class=\"charts\">\n");
    let timed = timed_ops(&[d]);
    if timed.is_empty() {
        out.push_str("<p class=\"note\">No operation of this row was timed.</p>\n");
    }
    for op in timed {
        let stats = d.op(op);
        let Some(latency) = stats.latency.as_ref() else {
            continue;
        };
        let chart = charts::latency_chart(
            op.name(),
            &[HistSeries {
                label: "",
                hist: &latency.hist,
            }],
        );
        let _ = writeln!(
            out,
            "<figure data-op=\"{op}\">{chart}<figcaption>{op}: {} calls timed, mean {}, p50 {}, \
             p99 {}</figcaption></figure>",
            latency.timed,
            human_ns(latency.mean_ns.round() as u64),
            human_ns(latency.p50_ns),
            human_ns(latency.p99_ns),
            op = op.name(),
        );
    }
    out.push_str("</div>\n<h3>Over time</h3>\n<div class=\"charts\">\n");
    out.push_str(&interval_charts(&[("", report, &d.key)], false));
    out.push_str("</div>\n<h3>Call paths (sampled)</h3>\n");
    out.push_str(&paths::call_paths(report, &d.key.to_string()));
    out.push_str("</details>\n</section>\n");
    out
}

/// A row's DMA maps by direction, and for a NIC per packet sent and received; nothing for a row
/// without the split (no maps, or a report of a build before it).
fn directions_table(d: &Device) -> String {
    let Some(split) = d.dma_map_directions.as_ref() else {
        return String::new();
    };
    let ratio = |r: Option<f64>, what: &str| {
        r.map_or_else(String::new, |r| format!("{r:.2} per packet {what}"))
    };
    let mut out = String::from(
        "<h3>DMA maps by direction</h3>\n<table class=\"directions\">\n<thead><tr><th>direction</th>\
         <th>maps</th><th>MB</th><th>per packet</th></tr></thead>\n<tbody>\n",
    );
    let rows = [
        (
            "to the device",
            &split.to_device,
            ratio(split.to_device_per_packet_sent, "sent"),
        ),
        (
            "from the device",
            &split.from_device,
            ratio(split.from_device_per_packet_received, "received"),
        ),
        ("both ways", &split.bidirectional, String::new()),
        ("not known", &split.not_known, String::new()),
    ];
    for (name, counted, per) in rows {
        if counted.count == 0 && matches!(name, "both ways" | "not known") {
            continue;
        }
        let _ = writeln!(
            out,
            "<tr data-direction=\"{name}\"><td>{name}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{:.1}</td><td>{per}</td></tr>",
            counted.count,
            counted.bytes as f64 / 1e6,
        );
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

/// The operations of any of `rows` with a latency histogram that holds calls, in ABI order.
fn timed_ops(rows: &[&Device]) -> Vec<Op> {
    Op::ALL
        .into_iter()
        .filter(|&op| {
            rows.iter().any(|d| {
                d.ops
                    .get(&op)
                    .and_then(|s| s.latency.as_ref())
                    .is_some_and(|l| !l.hist.is_empty())
            })
        })
        .collect()
}

/// A table of the operations counted, one column group per side (`""` for a single report).
fn ops_table(sides: &[(&str, &Device)]) -> String {
    let mut out = String::from("<table class=\"ops\"><thead><tr><th>op</th>");
    for (side, _) in sides {
        let side = if side.is_empty() {
            String::new()
        } else {
            format!(" {side}")
        };
        let _ = write!(
            out,
            "<th>count{side}</th><th>per s{side}</th><th>mean{side}</th><th>p50{side}</th>\
             <th>p99{side}</th>"
        );
    }
    out.push_str("</tr></thead><tbody>\n");
    for op in Op::ALL {
        if sides.iter().all(|(_, d)| d.op(op).count == 0) {
            continue;
        }
        let _ = write!(out, "<tr data-op=\"{0}\"><td>{0}</td>", op.name());
        for (_, d) in sides {
            let stats = d.op(op);
            let latency = stats.latency.as_ref();
            let ns = |f: fn(&crate::snapshot::Latency) -> u64| {
                latency.map_or("–".to_string(), |l| human_ns(f(l)))
            };
            let _ = write!(
                out,
                "<td class=\"num\" data-field=\"count\">{}</td><td class=\"num\">{:.1}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>",
                stats.count,
                stats.rate_per_s,
                ns(|l| l.mean_ns.round() as u64),
                ns(|l| l.p50_ns),
                ns(|l| l.p99_ns),
            );
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
    out
}

/// The bar of [`time_bar::segments`] with its legend; a sentence when not measured.
fn time_bar_html(d: &Device) -> String {
    let segments = time_bar::segments(&d.derived);
    let Some(total) = d.derived.translation_ns.filter(|_| !segments.is_empty()) else {
        return "<p class=\"note\">Translation time not measured for this row.</p>\n".into();
    };
    let mut bar = String::from("<div class=\"timebar\">");
    let mut legend = String::from("<ul class=\"legend\">");
    for (index, segment) in segments.iter().enumerate() {
        let color = SEGMENT_COLORS[index % SEGMENT_COLORS.len()];
        let color = if segment.op.is_none() {
            REST_COLOR
        } else {
            color
        };
        let name = segment.op.map_or("rest", Op::name);
        let percent = segment.share * 100.0;
        let _ = write!(
            bar,
            "<span class=\"segment\" data-op=\"{name}\" data-share=\"{share}\" \
             style=\"width:{percent:.4}%;background:{color}\" title=\"{label}: {percent:.1}%\"></span>",
            share = segment.share,
            label = segment.label,
        );
        let _ = write!(
            legend,
            "<li><span class=\"swatch\" style=\"background:{color}\"></span>{label}{op}: \
             {percent:.1}%</li>",
            label = segment.label,
            op = segment
                .op
                .map(|op| format!(" (<code>{}</code>)", op.name()))
                .unwrap_or_default(),
        );
    }
    bar.push_str("</div>");
    legend.push_str("</ul>");
    format!(
        "<p>{} of translation time in all; parts nested in another are taken out of it, so \
         nothing is drawn twice.</p>\n{bar}\n{legend}\n",
        human_ns(total)
    )
}

const SEGMENT_COLORS: [&str; 7] = [
    "#4e79a7", "#a0cbe8", "#f28e2b", "#ffbe7d", "#59a14f", "#e15759", "#b07aa1",
];
const REST_COLOR: &str = "#d3d3d3";

/// Charts of one row (or the same row in A and B) over the run: DMA maps and completions per
/// second, and translation time per I/O. `sides` are `(label, report, row key)`; `compared` draws
/// one chart per quantity with a line per side, else one report's rates share a chart.
fn interval_charts(sides: &[(&str, &Report, &RowKey)], compared: bool) -> String {
    type Pick = fn(&crate::report::IntervalDevice) -> Option<f64>;
    let series = |pick: Pick| -> Vec<(String, Vec<(f64, f64)>)> {
        sides
            .iter()
            .map(|(label, report, key)| {
                let points = report
                    .intervals
                    .iter()
                    .filter_map(|p| Some((p.t_s, pick(p.devices.get(*key)?)?)))
                    .collect();
                (label.to_string(), points)
            })
            .collect()
    };
    let maps = series(|d| Some(d.dma_map_per_s));
    let completions = series(|d| Some(d.completions_per_s));
    let per_io = series(|d| d.translation_ns_per_io);
    let mut out = String::new();
    if !compared {
        let Some(((_, maps), (_, completions))) = maps.first().zip(completions.first()) else {
            return String::new();
        };
        let lines = [
            Line {
                label: "dma_map/s",
                points: maps.clone(),
            },
            Line {
                label: "completions/s",
                points: completions.clone(),
            },
        ];
        out.push_str(&figure(&charts::line_chart("rates", "per second", &lines)));
    } else {
        for (title, data) in [("dma_map/s", &maps), ("completions/s", &completions)] {
            let lines: Vec<Line> = data
                .iter()
                .map(|(label, points)| Line {
                    label,
                    points: points.clone(),
                })
                .collect();
            out.push_str(&figure(&charts::line_chart(title, "per second", &lines)));
        }
    }
    let lines: Vec<Line> = per_io
        .iter()
        .map(|(label, points)| Line {
            label: if label.is_empty() {
                "ns per I/O"
            } else {
                label
            },
            points: points.clone(),
        })
        .collect();
    out.push_str(&figure(&charts::line_chart(
        "translation time per I/O",
        "ns",
        &lines,
    )));
    if out.is_empty() {
        out.push_str("<p class=\"note\">No interval of the run has this row.</p>\n");
    }
    out
}

fn figure(svg: &str) -> String {
    if svg.is_empty() {
        String::new()
    } else {
        format!("<figure>{svg}</figure>\n")
    }
}

/// The whole document around `body`, written by iommutop `version`.
fn page(title: &str, body: &str, version: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"generator\" content=\"iommutop {version}\">\n<title>{title}</title>\n\
         <style>{STYLE}</style>\n</head>\n<body>\n{body}<footer>Written by iommutop {version}. \
         This page is self-contained: it loads no script, style, font or image from anywhere.\
         </footer>\n</body>\n</html>\n",
        version = escape(version),
        title = escape(title),
    )
}

#[cfg(test)]
mod tests;

const STYLE: &str = "
body { font-family: sans-serif; margin: 1.5em; color: #222; max-width: 1400px; }
h1 .source { font-weight: normal; font-size: 0.7em; color: #555; }
h2 { display: inline; font-size: 1.25em; }
section.device { border-top: 1px solid #ccc; margin-top: 1.5em; padding-top: 0.5em; }
summary { cursor: pointer; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; }
dl.facts dt { font-weight: bold; }
dl.facts dd { margin: 0; font-family: monospace; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.charts { display: flex; flex-wrap: wrap; gap: 0.5em; }
figure { margin: 0; }
figcaption { font-size: 0.85em; color: #444; max-width: 440px; }
.timebar { display: flex; width: 100%; max-width: 900px; height: 1.6em; border: 1px solid #999; }
.timebar .segment { display: block; height: 100%; }
ul.legend { list-style: none; padding: 0; columns: 2; max-width: 900px; font-size: 0.9em; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; margin-right: 0.4em; vertical-align: middle; border: 1px solid #888; }
table.paths td.frames { font-family: monospace; font-size: 0.85em; }
td.share { position: relative; min-width: 5em; }
.meter { position: absolute; left: 0; top: 15%; height: 70%; background: #4e79a7; opacity: 0.3; }
.note { color: #666; font-style: italic; }
td.vf { padding-left: 2em; }
.vf-of { color: #666; font-size: 0.85em; }
.findings li { margin-bottom: 0.4em; }
.side-a { color: #1f77b4; font-weight: bold; }
.side-b { color: #e66a00; font-weight: bold; }
pre { background: #f7f7f7; padding: 0.5em; overflow-x: auto; }
footer { margin-top: 2em; font-size: 0.8em; color: #666; }
";
