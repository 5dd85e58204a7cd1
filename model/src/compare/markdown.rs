//! `iommutop compare --format markdown`: the comparison as a PR comment — the two reports, a
//! table of the findings with their numbers and the unit of each (`compare --json`'s `unit`),
//! and the thresholds with theirs.

use super::{Comparison, Evaluation, Finding, FindingKind, Numbers};
use std::fmt::Write;

/// The whole comment, ending in a newline.
pub fn render_markdown(c: &Comparison, names: (&str, &str), thresholds: &[Evaluation]) -> String {
    let mut out = String::from("### iommutop compare\n\n");
    out.push_str("| | report | kernel | IOMMU | workload |\n|---|---|---|---|---|\n");
    for (tag, name, side) in [("A", names.0, &c.a), ("B", names.1, &c.b)] {
        let _ = writeln!(
            out,
            "| {tag} | `{}` | {} | {} | {} |",
            cell(name),
            cell(side.kernel.as_deref().unwrap_or("unknown")),
            cell(&side.iommu),
            cell(side.workload.as_deref().unwrap_or("-")),
        );
    }
    let _ = writeln!(out, "\n{}.", capitalized(&c.noise.sentence()));
    out.push_str(
        "\n| # | finding | share of gap | measured | unit | A | B | change | noise | beyond noise \
         |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut rank = 0;
    for finding in &c.findings {
        let number = if finding.kind == FindingKind::Workload {
            "-".to_string()
        } else {
            rank += 1;
            rank.to_string()
        };
        let _ = writeln!(out, "| {number} | {} |", finding_cells(finding));
    }
    if !thresholds.is_empty() {
        out.push_str(
            "\n| threshold | unit | A | B | change | noise | beyond noise | result |\n\
             |---|---|---|---|---|---|---|---|\n",
        );
        for t in thresholds {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} | {} | {} | {} |",
                cell(&t.expression),
                t.unit.as_deref().map_or("-".into(), cell),
                value(t.numbers.a),
                value(t.numbers.b),
                change(&t.numbers),
                noise(&t.numbers),
                beyond(&t.numbers),
                if t.crossed { "**crossed**" } else { "held" }
            );
        }
    }
    out
}

fn finding_cells(f: &Finding) -> String {
    let n = &f.numbers;
    [
        cell(&f.headline),
        f.share_of_gap
            .map_or("-".into(), |s| format!("{:.0}%", s * 100.0)),
        cell(&f.quantity),
        cell(&f.unit),
        value(n.a),
        value(n.b),
        change(n),
        noise(n),
        beyond(n),
    ]
    .join(" | ")
}

/// Text made safe for one table cell: no pipes or line breaks.
/// `Noise: ...` at the start of a sentence.
fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

fn value(v: Option<f64>) -> String {
    match v {
        Some(v) if v.fract() == 0.0 && v.abs() < 1e15 => format!("{v:.0}"),
        Some(v) => format!("{v:.2}"),
        None => "-".into(),
    }
}

fn change(n: &Numbers) -> String {
    n.delta_pct.map_or("-".into(), |d| format!("{d:+.1}%"))
}

fn noise(n: &Numbers) -> String {
    n.noise_pct.map_or("-".into(), |p| format!("±{p:.1}%"))
}

fn beyond(n: &Numbers) -> String {
    match n.beyond_noise {
        Some(true) => "yes".into(),
        Some(false) => "no".into(),
        None => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{compare, Threshold};
    use crate::report::fixtures::full_report;

    #[test]
    fn a_comparison_is_a_table_with_a_row_per_finding_and_threshold() {
        let a = full_report();
        let mut b = a.clone();
        b.host.kernel_release = Some("6.18.1".into());
        let comparison = compare(&a, &b);
        let threshold = Threshold::parse("workload.read_iops < -2%")
            .expect("parses")
            .evaluate(&a, &b)
            .expect("evaluates");
        let text = render_markdown(&comparison, ("old.json", "new|x.json"), &[threshold]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "### iommutop compare");
        assert!(
            text.contains("| A | `old.json` | 6.12.95+deb12-amd64 |"),
            "{text}"
        );
        assert!(text.contains("| B | `new\\|x.json` | 6.18.1 |"), "{text}");
        let findings = lines
            .iter()
            .skip_while(|l| !l.starts_with("| # | finding"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .count();
        assert_eq!(findings, comparison.findings.len(), "{text}");
        // Each finding's A and B are in the unit its JSON names.
        let header: Vec<&str> = lines
            .iter()
            .find(|l| l.starts_with("| # | finding"))
            .map(|l| l.split(" | ").collect())
            .unwrap_or_default();
        let unit_column = header
            .iter()
            .position(|h| *h == "unit")
            .expect("a unit column");
        let rows = lines
            .iter()
            .skip_while(|l| !l.starts_with("| # | finding"))
            .skip(2)
            .take_while(|l| l.starts_with('|'));
        for (row, finding) in rows.zip(&comparison.findings) {
            let cells: Vec<&str> = row.split(" | ").collect();
            assert_eq!(cells[unit_column], cell(&finding.unit), "{row}");
            assert_eq!(header[unit_column + 1], "A");
        }
        assert!(
            text.contains(
                "| `workload.read_iops < -2%` | read/s | 2000 | 2000 | +0.0% | - | - | held |"
            ),
            "{text}"
        );
        let cells = |line: &str| line.replace("\\|", "").matches('|').count();
        for table in text.split("\n\n").filter(|block| block.starts_with('|')) {
            let header = table.lines().next().unwrap_or_default();
            for line in table.lines() {
                assert_eq!(cells(line), cells(header), "{line}");
            }
        }
    }
}
