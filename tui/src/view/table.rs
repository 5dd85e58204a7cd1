//! The device table: one row per device, as many columns as fit, the sort column marked, and the
//! shown rows' totals on its last line.

use super::{fit, style};
use crate::columns::Column;
use crate::state::State;
use crate::{format, rows, totals};
use iommutop_model::snapshot::Device;
use ratatui::layout::{Alignment, Constraint, Rect};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table, TableState, Wrap};
use ratatui::Frame;

pub fn render(state: &State, rows: &[&Device], frame: &mut Frame, area: Rect) {
    let block = Block::bordered()
        .title(title(state, rows.len()))
        .title_bottom(status(state))
        .title_bottom(waiting(rows).right_aligned());
    let inner = block.inner(area);
    frame.render_widget(block, area);

    if rows.is_empty() {
        let message = Paragraph::new(empty_message(state))
            .style(style::dim())
            .alignment(Alignment::Center)
            .wrap(Wrap { trim: true });
        let y = inner.y + inner.height.saturating_sub(1) / 2;
        let line = Rect {
            y,
            height: inner.bottom().saturating_sub(y),
            ..inner
        };
        frame.render_widget(message, line);
        return;
    }

    let columns = Column::fitting(inner.width);
    let sort = state.sort_column();
    let header = Row::new(columns.iter().map(|&c| {
        let title = Line::from(c.title()).alignment(alignment(c));
        let cell = Cell::from(title);
        if c == sort {
            cell.style(style::title().add_modifier(ratatui::style::Modifier::UNDERLINED))
        } else {
            cell.style(style::title())
        }
    }));
    let widths = widths(&columns, rows, inner.width);
    let body = rows.iter().map(|device| {
        let row = Row::new(columns.iter().zip(&widths).map(|(&c, &width)| {
            let text = fit(&c.cell(device), width as usize);
            Cell::from(Line::from(text).alignment(alignment(c)))
        }));
        if is_idle(device) {
            row.style(style::dim())
        } else {
            row
        }
    });
    let totals = Row::new(columns.iter().zip(&widths).map(|(&c, &width)| {
        let text = fit(&totals::cell(c, rows), width as usize);
        Cell::from(Line::from(text).alignment(alignment(c)))
    }))
    .style(style::title());
    let constraints: Vec<Constraint> = widths.iter().copied().map(Constraint::Length).collect();
    let table = Table::new(body, constraints)
        .header(header)
        .footer(totals)
        .column_spacing(1)
        .row_highlight_style(style::selected());
    let mut table_state = TableState::default().with_selected(state.selected_index());
    frame.render_stateful_widget(table, inner, &mut table_state);
}

/// Each shown column's width: its own, and for DEVICE and NAMES as much more as their widest
/// cell needs (`unattributed:fio[1129]`, a NIC's several netdevs) out of what the columns leave
/// over in `width`, DEVICE first: it tells the rows apart. On a wide terminal the rest of the
/// room stays on the right.
fn widths(columns: &[Column], rows: &[&Device], width: u16) -> Vec<u16> {
    let widest = |column: Column| {
        rows.iter()
            .map(|d| column.cell(d).chars().count())
            .max()
            .unwrap_or(0)
    };
    let gaps = columns.len().saturating_sub(1) as u16;
    let used = columns.iter().map(|c| c.width()).sum::<u16>() + gaps;
    let mut spare = width.saturating_sub(used);
    columns
        .iter()
        .map(|&column| {
            let own = column.width();
            if !matches!(column, Column::Device | Column::Names) {
                return own;
            }
            let wanted = u16::try_from(widest(column)).unwrap_or(u16::MAX);
            let extra = wanted.saturating_sub(own).min(spare);
            spare -= extra;
            own + extra
        })
        .collect()
}

/// ` devices 3 · sort MAPS/s ▼ · filter "nv" `.
fn title(state: &State, shown: usize) -> Line<'static> {
    let total = state.snapshot().map_or(0, |s| s.devices.len());
    let count = if shown == total {
        format!("{total}")
    } else {
        format!("{shown} of {total}")
    };
    let arrow = if state.sort_descending() {
        "▼"
    } else {
        "▲"
    };
    let mut spans = vec![
        Span::styled(" Devices ", style::title()),
        Span::raw(format!("{count} · sort ")),
        Span::styled(
            format!("{} {arrow}", state.sort_column().title()),
            style::key(),
        ),
    ];
    if !state.filter().is_empty() {
        spans.push(Span::raw(" · filter "));
        spans.push(Span::styled(
            format!("\"{}\"", state.filter()),
            style::key(),
        ));
    }
    spans.push(Span::raw(" "));
    Line::from(spans)
}

/// The status line in the bottom border, if there is one.
fn status(state: &State) -> Line<'static> {
    match state.status() {
        Some(text) => Line::from(Span::styled(format!(" {text} "), style::warn())),
        None => Line::default(),
    }
}

/// Under the table, when a shown device's DMA calls waited 5% of their time or more: the one
/// that waited most, and how many more did. Its CPU% and NS/IO are on-CPU time only.
fn waiting(rows: &[&Device]) -> Line<'static> {
    let waiting = rows::waiting(rows);
    let Some((device, most)) = waiting.first() else {
        return Line::default();
    };
    let mut text = format!(
        " waiting: {}",
        format::waiting(&device.key.to_string(), most)
    );
    if waiting.len() > 1 {
        text.push_str(&format!(" (+{} more)", waiting.len() - 1));
    }
    text.push_str(", not in CPU% ");
    Line::from(Span::styled(text, style::warn()))
}

fn empty_message(state: &State) -> Text<'static> {
    let Some(snapshot) = state.snapshot() else {
        return Text::from(format!(
            "waiting for the first interval ({:.1} s)…",
            state.interval().as_secs_f64()
        ));
    };
    if !snapshot.devices.is_empty() {
        return Text::from(format!(
            "no device matches \"{}\" (Esc clears the filter)",
            state.filter()
        ));
    }
    Text::from(vec![
        Line::from("no DMA yet: no device has mapped memory since iommutop started"),
        Line::from("start the workload (dd, fio, netperf, …) and rows appear here"),
    ])
}

/// A row that did nothing this interval.
fn is_idle(device: &Device) -> bool {
    device.ops.values().all(|s| s.count == 0)
}

fn alignment(column: Column) -> Alignment {
    if column.is_text() {
        Alignment::Left
    } else {
        Alignment::Right
    }
}
