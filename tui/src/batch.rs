//! `iommutop top --batch`: the device table as plain text, one block per interval, for pipes and
//! logs (as `top -b` and `perf stat -I` print). Same cells and order as the live view, with the
//! shown rows' totals under them; as many columns as `width` holds, the live view's most
//! important first, every cell whole.

use crate::columns::Column;
use crate::{rows, totals};
use iommutop_model::snapshot::Snapshot;

/// One interval's block: a `time` line, the header, a row per device that matches `filter` (as
/// the live view's `/` matches), sorted by `sort` (descending where the live view sorts that
/// column descending by default), and their totals. `device` names the one device `--device`
/// kept, if any; `scope` is whose work alone was counted (`--pid`/`--cgroup`). With a `width`
/// (a terminal's), columns that would not fit whole are left out, least important first.
pub fn render_interval(
    time: &str,
    snapshot: &Snapshot,
    sort: Column,
    filter: &str,
    device: Option<&str>,
    scope: Option<&str>,
    width: Option<usize>,
) -> String {
    let rows = rows::shown(
        &snapshot.devices,
        sort,
        sort.descending_by_default(),
        filter,
    );
    let mut cells: Vec<Vec<String>> = rows
        .iter()
        .map(|d| Column::ALL.iter().map(|c| c.cell(d)).collect())
        .collect();
    if !rows.is_empty() {
        cells.push(
            Column::ALL
                .iter()
                .map(|&c| totals::cell(c, &rows))
                .collect(),
        );
    }
    let content_widths: Vec<usize> = Column::ALL
        .iter()
        .enumerate()
        .map(|(i, c)| {
            cells
                .iter()
                .map(|row| row[i].chars().count())
                .chain([c.title().chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let shown = fitting(&content_widths, width);
    let line = |values: &[String]| {
        let fields: Vec<String> = shown
            .iter()
            .map(|&i| {
                let (value, width) = (&values[i], content_widths[i]);
                if Column::ALL[i].is_text() {
                    format!("{value:<width$}")
                } else {
                    format!("{value:>width$}")
                }
            })
            .collect();
        fields.join(" ").trim_end().to_string()
    };
    let mut out = format!(
        "time {time}  interval {:.1} s  {} devices  sort {}",
        snapshot.interval_ns as f64 / 1e9,
        rows.len(),
        sort.title()
    );
    if !filter.is_empty() {
        out.push_str(&format!("  filter {filter:?}"));
    }
    if let Some(device) = device {
        out.push_str(&format!("  device {device}"));
    }
    if let Some(scope) = scope {
        out.push_str(&format!("  only {scope}, task context"));
    }
    out.push('\n');
    let titles: Vec<String> = Column::ALL.iter().map(|c| c.title().to_string()).collect();
    out.push_str(&line(&titles));
    out.push('\n');
    for row in &cells {
        out.push_str(&line(row));
        out.push('\n');
    }
    for (device, waiting) in rows::waiting(&rows) {
        out.push_str(&format!(
            "waiting: {} ({} calls), not in CPU% or NS/IO\n",
            crate::format::waiting(&device.key.to_string(), &waiting),
            waiting.waited_calls
        ));
    }
    out.push('\n');
    out
}

/// The indices of the columns (in display order) that fit whole in `width`, as the live view
/// chooses them; every column without a width.
fn fitting(content_widths: &[usize], width: Option<usize>) -> Vec<usize> {
    // A column's index in Column::ALL is its discriminant: ALL lists them in declaration order.
    match width {
        None => (0..Column::ALL.len()).collect(),
        Some(width) => Column::fitting_by(width, |c| content_widths[c as usize])
            .into_iter()
            .map(|c| c as usize)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iommutop_model::snapshot::Snapshot;

    #[test]
    fn an_empty_interval_still_has_its_time_and_header() {
        let snapshot = Snapshot {
            monotonic_ns: 2_000_000_000,
            interval_ns: 1_000_000_000,
            devices: Vec::new(),
            health: Default::default(),
            programs: Default::default(),
            events: 0,
            ..Snapshot::default()
        };
        let text = render_interval(
            "2026-11-23T08:00:00Z",
            &snapshot,
            Column::MapsPerS,
            "",
            None,
            None,
            None,
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "time 2026-11-23T08:00:00Z  interval 1.0 s  0 devices  sort MAPS/s"
        );
        assert!(lines[1].starts_with("DEVICE"), "{text}");
        assert!(lines[1].contains("MAPS/s"), "{text}");
        let scoped = render_interval(
            "2026-11-23T08:00:00Z",
            &snapshot,
            Column::MapsPerS,
            "",
            None,
            Some("process 42 (dd)"),
            None,
        );
        assert!(
            scoped
                .lines()
                .next()
                .is_some_and(|l| l.ends_with("  only process 42 (dd), task context")),
            "{scoped}"
        );
        let text = render_interval(
            "2026-11-23T08:00:00Z",
            &snapshot,
            Column::MapsPerS,
            "",
            Some("vda (0000:00:02.0)"),
            None,
            None,
        );
        assert!(
            text.lines()
                .next()
                .is_some_and(|l| l.ends_with("sort MAPS/s  device vda (0000:00:02.0)")),
            "{text}"
        );
    }
}
