//! `iommutop diagnose --format markdown`: the diagnosis for an issue or a pull request — the
//! system and the verdict as the text says them, a table of the devices' figures with their
//! units, the A/B section, and the comparison with the baseline as `compare --format markdown`
//! tables it.

use super::{joined, Diagnosis, THIS_RUN};
use crate::compare::markdown::render_markdown;
use std::fmt::Write;

/// The whole document, ending in a newline.
pub fn render_markdown_diagnosis(d: &Diagnosis) -> String {
    let mut out = String::from("### iommutop diagnose\n\n");
    out.push_str(&fenced(&joined(&d.system)));
    out.push_str("\n#### Verdict\n\n");
    if !d.devices.is_empty() {
        out.push_str(&devices_table(d));
        out.push('\n');
    }
    out.push_str(&fenced(&joined(&d.verdict)));
    if let Some(ab) = &d.ab {
        out.push_str("\n#### A/B: translated against identity\n\n");
        out.push_str(&fenced(&ab.render()));
    }
    if let Some(baseline) = &d.baseline {
        let _ = write!(
            out,
            "\n#### Against the baseline `{}` (A: the baseline, B: {THIS_RUN})\n\n",
            baseline.file.replace('`', "'")
        );
        let comparison = render_markdown(&baseline.comparison, (&baseline.file, THIS_RUN), &[]);
        // Its own heading gives way to the one above.
        let tables = comparison
            .split_once("\n\n")
            .map_or(comparison.as_str(), |(_, rest)| rest);
        out.push_str(tables);
    }
    out
}

/// Text in a fenced block, as it prints.
fn fenced(text: &str) -> String {
    format!("```text\n{text}```\n")
}

/// [`Diagnosis::devices_table`] as a Markdown table.
fn devices_table(d: &Diagnosis) -> String {
    let (headers, rows) = d.devices_table();
    let mut out = format!(
        "| {} |\n|{}\n",
        headers.join(" | "),
        "---|".repeat(headers.len())
    );
    for row in rows {
        let cells: Vec<String> = row.iter().map(|c| c.replace('|', "\\|")).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out
}
