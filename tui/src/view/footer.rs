//! The bottom line: the keys (or the filter being typed), the refresh interval, and what
//! iommutop itself costs (BPF run time per event, the tool's own CPU), and a warning when the
//! probes saw calls at one end only over the interval.

use super::style;
use crate::format;
use crate::state::{Input, State};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

/// Keys and what they do, most useful first: as many as fit are shown.
const KEYS: [(&str, &str); 7] = [
    ("q", "quit"),
    ("?", "help"),
    ("/", "filter"),
    ("s", "sort"),
    ("p", "pause"),
    ("r", "reverse"),
    ("d", "detail"),
];

pub fn render(state: &State, frame: &mut Frame, area: Rect) {
    let right = overhead(state);
    let right_width = right.iter().map(Span::width).sum::<usize>() as u16;
    let right_width = right_width.min(area.width / 2);
    let [left_area, right_area] =
        Layout::horizontal([Constraint::Min(0), Constraint::Length(right_width)]).areas(area);

    let left = match state.input() {
        Input::Filter => Line::from(vec![
            Span::styled(" filter: ", style::key()),
            Span::raw(state.filter().to_string()),
            Span::styled("█", style::dim()),
            Span::styled("  Enter", style::key()),
            Span::raw(" keep  "),
            Span::styled("Esc", style::key()),
            Span::raw(" clear"),
        ]),
        Input::Normal => keys_line(left_area.width as usize),
    };
    frame.render_widget(Paragraph::new(left), left_area);
    frame.render_widget(Paragraph::new(Line::from(right)), right_area);
}

/// `(q) quit  (?) help ...` with as many keys as fit in `width`; without the parentheses when
/// that fits more.
fn keys_line(width: usize) -> Line<'static> {
    let fits = |compact: bool| {
        let mut used = 1;
        let mut n = 0;
        for (key, what) in KEYS {
            let needed = key.len() + what.len() + if compact { 3 } else { 5 };
            if used + needed > width {
                break;
            }
            used += needed;
            n += 1;
        }
        n
    };
    let (wide, compact) = (fits(false), fits(true));
    let use_compact = compact > wide;
    let mut spans = vec![Span::raw(" ")];
    for (key, what) in KEYS.iter().take(wide.max(compact)) {
        if use_compact {
            spans.push(Span::styled(key.to_string(), style::key()));
            spans.push(Span::raw(format!(" {what}  ")));
        } else {
            spans.push(Span::styled(format!("({key})"), style::key()));
            spans.push(Span::raw(format!(" {what}  ")));
        }
    }
    Line::from(spans)
}

/// `1.0s +/- │ BPF 85ns/ev │ self 0.31% `: the refresh interval and what iommutop costs.
fn overhead(state: &State) -> Vec<Span<'static>> {
    let interval = state.interval().as_secs_f64();
    let interval = if interval < 1.0 {
        format!("{interval:.2}s")
    } else {
        format!("{interval:.1}s")
    };
    let bpf = match state.bpf_ns_per_event() {
        Some(ns) => format!("{}/ev", format::ns_f64(Some(ns))),
        None => "n/a".to_string(),
    };
    let tool = state
        .tool_cpu
        .map_or_else(|| format::NONE.to_string(), format::percent);
    let mut spans = Vec::new();
    if let Some(losses) = state.losses() {
        // Calls no program saw are missing from the counts; calls counted but untimed, from
        // the latencies (docs/probes.md, "How the loss figures are computed").
        let lost = losses.lost();
        if lost > 0 {
            spans.push(Span::styled(
                format!("⚠ {} calls lost ", format::rate(lost as f64)),
                style::warn(),
            ));
            spans.push(Span::styled("│ ", style::dim()));
        }
        // The worst operation, as the report warns per operation: a share over every
        // operation's calls could hide one over the limit.
        let worst = losses
            .untimed_over_limit()
            .max_by(|a, b| a.2.total_cmp(&b.2));
        if let Some((op, _, share)) = worst {
            spans.push(Span::styled(
                format!("⚠ {} {} untimed ", op.name(), format::percent(share)),
                style::warn(),
            ));
            spans.push(Span::styled("│ ", style::dim()));
        }
    }
    spans.extend([
        Span::raw(interval),
        Span::styled(" +/-", style::key()),
        Span::styled(" │ BPF ", style::dim()),
        Span::raw(bpf),
        Span::styled(" │ self ", style::dim()),
        Span::raw(tool),
        Span::raw(" "),
    ]);
    spans
}
