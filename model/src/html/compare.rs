//! The page of `compare A B --html`: the findings first, then per device A and B on the same
//! charts (each timed operation's latency distribution of A over B's, rates side by side) and
//! their time bars one above the other.

use super::charts::{self, HistSeries};
use super::{escape, interval_charts, label, ops_table, page, time_bar_html, timed_ops};
use crate::compare::explain::waiting_figure;
use crate::compare::work::same_device;
use crate::compare::{Comparison, DeviceChange, DeviceWork, Side};
use crate::report::Report;
use crate::snapshot::{Device, RowKey};
use iommutop_abi::units::human_ns;
use std::fmt::Write;

/// The page of a comparison of A with B; `names` are the reports' file names.
pub fn render_comparison(
    a: &Report,
    b: &Report,
    comparison: &Comparison,
    names: (&str, &str),
) -> String {
    let mut body = String::from("<h1>iommutop compare</h1>\n<dl class=\"facts\">\n");
    for (tag, name, side) in [("A", names.0, &comparison.a), ("B", names.1, &comparison.b)] {
        let _ = writeln!(
            body,
            "<dt class=\"side-{}\">{tag}</dt><dd>{}: {}</dd>",
            tag.to_lowercase(),
            escape(name),
            escape(&side_line(side))
        );
    }
    body.push_str("</dl>\n");
    let per_device = if comparison.device_unit == crate::compare::OWN_UNITS {
        "each device's own unit (its section says which)".to_string()
    } else {
        comparison.device_unit.clone()
    };
    let _ = writeln!(
        body,
        "<p>{}. Per-device figures are per {}.</p>",
        escape(&comparison.noise.sentence()),
        escape(&per_device)
    );
    body.push_str(&findings(comparison));
    body.push_str(&host(comparison));
    body.push_str(&workload(comparison));
    for (index, change) in comparison.devices.iter().enumerate() {
        let in_a = a.devices.iter().find(|d| d.key == change.key);
        let in_b = b
            .devices
            .iter()
            .find(|d| d.key == change.key)
            .or_else(|| in_a.and_then(|d| same_device(&b.devices, d)));
        let in_a = in_a.or_else(|| in_b.and_then(|d| same_device(&a.devices, d)));
        body.push_str(&device_section((a, b), (in_a, in_b), change, index));
    }
    page(
        &format!("iommutop compare: {} against {}", names.0, names.1),
        &body,
        &b.tool.version,
    )
}

/// `kernel 6.12…; IOMMU intel (dmar0), default domain DMA-FQ; workload fio; 20.0 s from …`.
fn side_line(side: &Side) -> String {
    let mut parts = side.description();
    parts.push(format!("{:.1} s from {}", side.duration_s, side.started_at));
    parts.join("; ")
}

pub(super) fn findings(c: &Comparison) -> String {
    let mut out = String::from("<h2>Findings</h2>\n<ol class=\"findings\">\n");
    for finding in &c.findings {
        let share = finding
            .share_of_gap
            .map(|s| {
                format!(
                    "<strong>[{:.0}% of the translation-time gap]</strong> ",
                    s * 100.0
                )
            })
            .unwrap_or_default();
        let _ = write!(out, "<li>{share}{}.", escape(&finding.headline));
        if !finding.details.is_empty() {
            out.push_str("<ul>");
            for detail in &finding.details {
                let _ = write!(out, "<li>{}</li>", escape(detail));
            }
            out.push_str("</ul>");
        }
        out.push_str("</li>\n");
    }
    out.push_str("</ol>\n");
    out
}

fn host(c: &Comparison) -> String {
    if c.host.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<h2>Host, A → B</h2>\n<table><thead><tr><th>what</th><th>A</th><th>B</th><th>role</th>\
         </tr></thead><tbody>\n",
    );
    for h in &c.host {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&h.what),
            escape(&h.a),
            escape(&h.b),
            h.role.name()
        );
    }
    out.push_str("</tbody></table>\n");
    out
}

fn workload(c: &Comparison) -> String {
    if c.workload.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<h2>Workload</h2>\n<table><thead><tr><th>metric</th><th>A</th><th>B</th><th>change</th>\
         </tr></thead><tbody>\n",
    );
    for m in &c.workload {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"num\">{:.1}</td><td class=\"num\">{:.1}</td>\
             <td class=\"num\">{}</td></tr>",
            escape(&m.metric),
            m.a,
            m.b,
            m.change
                .map_or("–".into(), |c| format!("{:+.1}%", c * 100.0))
        );
    }
    out.push_str("</tbody></table>\n");
    out
}

/// One device in A and B: counts side by side, both time bars, overlaid latency charts, rates.
fn device_section(
    (a, b): (&Report, &Report),
    (in_a, in_b): (Option<&Device>, Option<&Device>),
    change: &DeviceChange,
    index: usize,
) -> String {
    let change_label = change.label.as_str();
    let key = in_a
        .or(in_b)
        .map_or_else(|| change_label.to_string(), |d| d.key.to_string());
    let mut out = format!(
        "<section class=\"device\" id=\"dev-{index}\" data-device=\"{}\">\n<details open>\
         <summary><h2>{}</h2></summary>\n",
        escape(&key),
        in_a.or(in_b).map_or_else(|| escape(change_label), label)
    );
    let sides: Vec<(&str, &Device)> = [("A", in_a), ("B", in_b)]
        .into_iter()
        .filter_map(|(tag, d)| Some((tag, d?)))
        .collect();
    for (tag, d) in [("A", in_a), ("B", in_b)] {
        if d.is_none() {
            let _ = writeln!(out, "<p class=\"note\">Not in {tag}.</p>");
        }
    }
    out.push_str(&ops_table(&sides));
    out.push_str(&waiting(change));
    out.push_str("<h3>Where the time goes</h3>\n");
    for (tag, d) in &sides {
        let _ = writeln!(out, "<h4 class=\"side-{}\">{tag}</h4>", tag.to_lowercase());
        out.push_str(&time_bar_html(d));
    }
    out.push_str("<h3>Latency of the timed operations, A and B</h3>\n<div class=\"charts\">\n");
    let rows: Vec<&Device> = sides.iter().map(|(_, d)| *d).collect();
    for op in timed_ops(&rows) {
        let latencies: Vec<(&str, Option<crate::snapshot::Latency>)> = sides
            .iter()
            .map(|(tag, d)| (*tag, d.op(op).latency))
            .collect();
        let series: Vec<HistSeries> = latencies
            .iter()
            .filter_map(|(tag, l)| {
                Some(HistSeries {
                    label: tag,
                    hist: &l.as_ref()?.hist,
                })
            })
            .collect();
        let caption: Vec<String> = latencies
            .iter()
            .map(|(tag, l)| match l {
                Some(l) => format!(
                    "{tag}: {} timed, p50 {}, p99 {}",
                    l.timed,
                    human_ns(l.p50_ns),
                    human_ns(l.p99_ns)
                ),
                None => format!("{tag}: not timed"),
            })
            .collect();
        let _ = writeln!(
            out,
            "<figure data-op=\"{op}\">{}<figcaption>{op}: {}</figcaption></figure>",
            charts::latency_chart(op.name(), &series),
            caption.join("; "),
            op = op.name(),
        );
    }
    out.push_str("</div>\n<h3>Over time, A and B</h3>\n<div class=\"charts\">\n");
    let mut over_time: Vec<(&str, &Report, &RowKey)> = Vec::new();
    if let Some(row) = in_a {
        over_time.push(("A", a, &row.key));
    }
    if let Some(row) = in_b {
        over_time.push(("B", b, &row.key));
    }
    out.push_str(&interval_charts(&over_time, true));
    out.push_str("</div>\n</details>\n</section>\n");
    out
}

/// The time a device's DMA map and unmap calls spent switched out (waiting), in A and B, as the
/// text's `switched out (waiting)` line says it: shown where either run measured some, since the
/// times above are on-CPU and leave it out.
fn waiting(change: &DeviceChange) -> String {
    let waited = |w: &Option<DeviceWork>| {
        w.as_ref()
            .and_then(|w| w.dma_offcpu_ns)
            .is_some_and(|ns| ns > 0.0)
    };
    if !waited(&change.a) && !waited(&change.b) {
        return String::new();
    }
    let figure = |w: &Option<DeviceWork>| w.as_ref().map_or("-".into(), waiting_figure);
    format!(
        "<table class=\"waiting\"><thead><tr><th>switched out (waiting): share of the DMA \
         map+unmap time (per {})</th><th>A</th><th>B</th></tr></thead><tbody><tr>\
         <td>preempted, or asleep on a lock; the times above are on-CPU and leave it out</td>\
         <td class=\"num\" data-side=\"a\">{}</td><td class=\"num\" data-side=\"b\">{}</td></tr>\
         </tbody></table>\n",
        escape(&change.unit()),
        escape(&figure(&change.a)),
        escape(&figure(&change.b)),
    )
}
