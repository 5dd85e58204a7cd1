//! A latency histogram drawn as horizontal bars, one line per power of two (the log2 view of the
//! finer slots: a panel has few lines), fastest on top:
//!
//! ```text
//! dma_map · fentry
//! p50 1.54us  p99 3.07us
//!  512ns ██▍           12%
//! 1.02us ████████████  71%
//! 2.05us ███▏          17%
//! ```

use super::style;
use iommutop_model::hist::{log2_slot_lower_bound, Histogram};
use iommutop_model::snapshot::Latency;
use iommutop_model::units::human_ns;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

/// Partial blocks, 1/8 to 7/8 of a cell.
const EIGHTHS: [&str; 7] = ["▏", "▎", "▍", "▌", "▋", "▊", "▉"];

/// Below this width the percentiles take a line each.
const NARROW: u16 = 22;

/// Draws `title`, the percentiles of `latency` (or the `missing` lines when there is none) and
/// the slots.
pub fn render(
    frame: &mut Frame,
    area: Rect,
    title: Line<'static>,
    latency: Option<&Latency>,
    missing: Vec<String>,
) {
    let mut lines = vec![title];
    match latency {
        None => lines.extend(missing.into_iter().map(|l| Line::styled(l, style::dim()))),
        Some(latency) => {
            let p50 = vec![
                Span::styled("p50 ", style::dim()),
                Span::raw(human_ns(latency.p50_ns)),
            ];
            let p99 = vec![
                Span::styled("p99 ", style::dim()),
                Span::raw(human_ns(latency.p99_ns)),
            ];
            if area.width < NARROW {
                lines.push(Line::from(p50));
                lines.push(Line::from(p99));
            } else {
                let mut both = p50;
                both.push(Span::raw("  "));
                both.extend(p99);
                lines.push(Line::from(both));
            }
            let rows = (area.height as usize).saturating_sub(lines.len());
            lines.extend(slot_lines(&latency.hist, rows, area.width as usize));
        }
    }
    frame.render_widget(Paragraph::new(lines), area);
}

/// One line per power of two for at most `rows` of them: the busiest run of consecutive ones.
fn slot_lines(hist: &Histogram, rows: usize, width: usize) -> Vec<Line<'static>> {
    let log2 = hist.log2_slots();
    let slots = &log2[..];
    let (Some(lo), Some(hi)) = (
        slots.iter().position(|&c| c > 0),
        slots.iter().rposition(|&c| c > 0),
    ) else {
        return Vec::new();
    };
    if rows == 0 {
        return Vec::new();
    }
    let span = hi - lo + 1;
    let start = if span <= rows {
        lo
    } else {
        (lo..=hi + 1 - rows)
            .max_by_key(|&s| (slots[s..s + rows].iter().sum::<u64>(), std::cmp::Reverse(s)))
            .unwrap_or(lo)
    };
    let end = (start + rows.min(span)).min(slots.len());
    let total = slots.iter().sum::<u64>().max(1);
    let peak = slots[start..end].iter().copied().max().unwrap_or(1).max(1);
    // `label bar pct`: 6 + 1 + bar + 1 + 4.
    let bar_width = width.saturating_sub(12);
    (start..end)
        .map(|slot| {
            let count = slots[slot];
            let share = count as f64 / total as f64 * 100.0;
            let pct = if count > 0 && share < 1.0 {
                "<1%".to_string()
            } else {
                format!("{share:.0}%")
            };
            let mut spans = vec![Span::styled(
                format!("{:>6} ", human_ns(log2_slot_lower_bound(slot))),
                style::dim(),
            )];
            if bar_width > 0 {
                let bar = bar(count, peak, bar_width);
                let pad = bar_width.saturating_sub(bar.chars().count());
                spans.push(Span::styled(bar, style::bar()));
                spans.push(Span::raw(" ".repeat(pad + 1)));
            }
            spans.push(Span::raw(format!("{pct:>4}")));
            Line::from(spans)
        })
        .collect()
}

/// A bar `count / peak` of `width` cells, in eighths of a cell; at least a sliver when non-zero.
fn bar(count: u64, peak: u64, width: usize) -> String {
    let eighths = (count as f64 / peak as f64 * (width * 8) as f64).round() as usize;
    let eighths = if count > 0 { eighths.max(1) } else { 0 };
    let mut text = "█".repeat(eighths / 8);
    if eighths % 8 > 0 {
        text.push_str(EIGHTHS[eighths % 8 - 1]);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_scale_to_the_peak_in_eighths() {
        assert_eq!(bar(0, 10, 4), "");
        assert_eq!(bar(10, 10, 4), "████");
        assert_eq!(bar(5, 10, 4), "██");
        assert_eq!(bar(1, 1_000, 4), "▏");
        assert_eq!(bar(3, 8, 1), "▍");
    }

    /// A histogram with `count` values in each listed power of two.
    fn log2_histogram(counts: &[(usize, u64)]) -> Histogram {
        let mut log2 = [0u64; iommutop_model::hist::LOG2_SLOTS];
        for &(slot, count) in counts {
            log2[slot] = count;
        }
        Histogram::from_log2_slots(&log2)
    }

    #[test]
    fn too_many_slots_show_the_busiest_window() {
        let h = log2_histogram(&[(3, 1), (9, 100), (10, 300), (11, 50), (20, 1)]);
        let lines = slot_lines(&h, 3, 30);
        assert_eq!(lines.len(), 3);
        let first: String = lines[0].spans.iter().map(|s| s.content.as_ref()).collect();
        assert!(first.starts_with(" 512ns"), "{first}");
    }

    #[test]
    fn few_slots_show_all_of_them() {
        let h = log2_histogram(&[(9, 1), (10, 3)]);
        let lines = slot_lines(&h, 8, 24);
        assert_eq!(lines.len(), 2);
        let second: String = lines[1].spans.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(second, "1.02us ████████████  75%");
    }
}
