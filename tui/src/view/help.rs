//! The help overlay (`?`): every key, and what the columns mean.

use super::style;
use crate::columns::Column;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};
use ratatui::Frame;

const KEYS: [(&str, &str); 11] = [
    ("↑ ↓  j k", "select a device"),
    ("PgUp PgDn", "page up / down"),
    ("Home End  g G", "first / last device"),
    ("s S  > <", "sort by the next / previous column"),
    ("r", "reverse the sort"),
    ("/", "filter by text (Enter keeps it, Esc clears it)"),
    ("p  space", "pause: freeze the view (sampling goes on)"),
    ("+ -", "refresh interval longer / shorter"),
    ("d", "detail pane on / off"),
    ("?", "this help (Esc closes it)"),
    ("q  Ctrl-C", "quit (writes the report with --json)"),
];

pub fn render(frame: &mut Frame, screen: Rect) {
    let width = screen.width.saturating_sub(4).min(76);
    let key_width = 14;
    let mut lines: Vec<Line> = vec![Line::styled("Keys", style::title())];
    for (key, what) in KEYS {
        lines.push(Line::from(vec![
            Span::styled(format!("  {key:<key_width$}"), style::key()),
            Span::raw(what.to_string()),
        ]));
    }
    lines.push(Line::styled("Columns", style::title()));
    // Two columns per line: the column titles are short.
    let inner_width = width.saturating_sub(2) as usize;
    let half = inner_width / 2;
    let described: Vec<(&str, &str)> = Column::ALL
        .iter()
        .filter(|c| !c.is_text())
        .map(|c| (c.title(), c.description()))
        .collect();
    for pair in described.chunks(2) {
        let mut spans = Vec::new();
        for (i, (title, description)) in pair.iter().enumerate() {
            let cell_width = if i == 0 { half } else { inner_width - half };
            let text = super::fit(description, cell_width.saturating_sub(10));
            spans.push(Span::styled(format!("  {title:<8}"), style::key()));
            spans.push(Span::raw(format!(
                "{text:<w$}",
                w = cell_width.saturating_sub(10)
            )));
        }
        lines.push(Line::from(spans));
    }
    lines.push(Line::styled(
        "  latency `-`: the probe counts but does not time (tracepoint tier)",
        style::dim(),
    ));

    let height = (lines.len() as u16 + 2).min(screen.height);
    let area = Rect {
        x: screen.x + (screen.width.saturating_sub(width)) / 2,
        y: screen.y + (screen.height.saturating_sub(height)) / 2,
        width,
        height,
    };
    frame.render_widget(Clear, area);
    frame.render_widget(
        Paragraph::new(lines).block(
            Block::bordered()
                .title(Span::styled(" iommutop help ", style::title()))
                .title_bottom(Line::from(" ? or Esc closes ").right_aligned()),
        ),
        area,
    );
}
