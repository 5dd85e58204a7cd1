//! [`render`]: the whole screen from the state, nothing else. Each part is a module.

mod detail;
mod footer;
mod header;
mod help;
mod histogram;
mod table;
mod workload;

use crate::state::State;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::Frame;

/// Rows the detail pane needs to be worth showing.
const DETAIL_MIN_HEIGHT: u16 = 10;

/// Draws the whole screen.
pub fn render(state: &State, frame: &mut Frame) {
    let [top, body, bottom] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    header::render(state, frame, top);
    footer::render(state, frame, bottom);

    let rows = state.rows();
    // Table: its rows plus borders, header and totals, at least 5 rows and at most half the body
    // when the detail pane is shown; the detail pane (and a profile's workload pane beside it)
    // takes the rest.
    let wanted = (rows.len() as u16).saturating_add(4);
    let table_height = wanted.min(body.height / 2).max(5);
    let detail_shown = state.detail && body.height >= table_height + DETAIL_MIN_HEIGHT;
    if detail_shown {
        let [table_area, lower] =
            Layout::vertical([Constraint::Length(table_height), Constraint::Min(0)]).areas(body);
        table::render(state, &rows, frame, table_area);
        match state.workload() {
            Some(view) => {
                let [d, w] = Layout::horizontal([
                    Constraint::Min(0),
                    Constraint::Length(side_width(lower.width)),
                ])
                .areas(lower);
                detail::render(state, frame, d);
                workload::render(state, view, frame, w);
            }
            None => detail::render(state, frame, lower),
        }
    } else {
        match state.workload() {
            // Without the detail pane the workload goes beside the table, if that leaves room.
            Some(view) if body.width >= 100 => {
                let [t, w] = Layout::horizontal([
                    Constraint::Min(0),
                    Constraint::Length(side_width(body.width)),
                ])
                .areas(body);
                table::render(state, &rows, frame, t);
                workload::render(state, view, frame, w);
            }
            _ => table::render(state, &rows, frame, body),
        }
    }

    if state.help_shown() {
        help::render(frame, frame.area());
    }
}

/// Width of the workload pane beside a part `width` wide.
fn side_width(width: u16) -> u16 {
    (width / 3).clamp(26, 40).min(width / 2)
}

/// Styles shared by the parts.
pub(crate) mod style {
    use super::*;

    pub fn title() -> Style {
        Style::new().add_modifier(Modifier::BOLD)
    }
    pub fn dim() -> Style {
        Style::new().fg(Color::DarkGray)
    }
    pub fn key() -> Style {
        Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }
    pub fn selected() -> Style {
        Style::new().add_modifier(Modifier::REVERSED)
    }
    pub fn warn() -> Style {
        Style::new().fg(Color::Yellow)
    }
    pub fn bar() -> Style {
        Style::new().fg(Color::Green)
    }
    pub fn header_bar() -> Style {
        Style::new().bg(Color::Blue).fg(Color::White)
    }
    pub fn paused() -> Style {
        Style::new()
            .bg(Color::Yellow)
            .fg(Color::Black)
            .add_modifier(Modifier::BOLD)
    }
}

/// `text` cut to `width` characters, with `…` when cut.
pub(crate) fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut cut: String = text.chars().take(width - 1).collect();
    cut.push('…');
    cut
}
