//! The page of `iommutop diagnose --format html`: the system and the verdict as the text says
//! them, the devices' figures in a table, the A/B section, the findings against the baseline,
//! then the run's report as `report --html` draws it.

use super::compare::findings;
use super::{escape, page, report_sections};
use crate::diagnose::diagnosis::{Diagnosis, THIS_RUN};
use std::fmt::Write;

/// The page of a diagnosis.
pub fn render_diagnosis(d: &Diagnosis) -> String {
    let mut body = String::from("<h1>iommutop diagnose</h1>\n<h2>System</h2>\n");
    let _ = writeln!(body, "<pre class=\"system\">{}</pre>", text(&d.system));
    body.push_str("<h2>Verdict</h2>\n");
    body.push_str(&devices_table(d));
    let _ = writeln!(body, "<pre class=\"verdict\">{}</pre>", text(&d.verdict));
    if let Some(ab) = &d.ab {
        let _ = writeln!(
            body,
            "<h2>A/B: translated against identity</h2>\n<pre class=\"ab\">{}</pre>",
            escape(&ab.render())
        );
    }
    if let Some(baseline) = &d.baseline {
        let _ = writeln!(
            body,
            "<section class=\"baseline\"><h2>Against the baseline <code>{}</code> (A: the \
             baseline, B: {THIS_RUN})</h2>\n<p>{}.</p>",
            escape(&baseline.file),
            escape(&baseline.comparison.noise.sentence())
        );
        body.push_str(&findings(&baseline.comparison));
        body.push_str("</section>\n");
    }
    if let Some(report) = &d.report {
        body.push_str("<h2 class=\"run\">The run</h2>\n");
        body.push_str(&report_sections(report, false));
    }
    let version = d
        .report
        .as_ref()
        .map_or(env!("CARGO_PKG_VERSION"), |r| r.tool.version.as_str());
    page("iommutop diagnose", &body, version)
}

/// Lines as the text prints them, escaped.
fn text(lines: &[String]) -> String {
    escape(&lines.join("\n"))
}

/// [`Diagnosis::devices_table`] as an HTML table, a row per device.
fn devices_table(d: &Diagnosis) -> String {
    if d.devices.is_empty() {
        return String::new();
    }
    let (headers, rows) = d.devices_table();
    let mut out = String::from("<table class=\"diagnosed\"><thead><tr>");
    for header in &headers {
        let _ = write!(out, "<th>{}</th>", escape(header));
    }
    out.push_str("</tr></thead><tbody>\n");
    for (device, cells) in d.devices.iter().zip(rows) {
        let _ = write!(out, "<tr data-device=\"{}\">", escape(&device.key));
        for cell in cells {
            let _ = write!(out, "<td>{}</td>", escape(&cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
    out
}
