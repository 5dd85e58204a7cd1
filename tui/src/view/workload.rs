//! The workload pane of a profile run: progress, the workload's own live numbers, its notes.

use super::{fit, style};
use crate::format;
use crate::state::{State, WorkloadView};
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};
use ratatui::Frame;
use serde_json::Value;

pub fn render(state: &State, view: &WorkloadView, frame: &mut Frame, area: Rect) {
    let block = Block::bordered().title(Line::from(vec![
        Span::styled(format!(" {} ", view.profile), style::title()),
        Span::styled(format!("· {} ", view.workload), style::dim()),
    ]));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let width = inner.width as usize;

    let elapsed = view.finished_at.unwrap_or(state.elapsed);
    let mut lines: Vec<Line> = Vec::new();
    match view.expected {
        Some(expected) if !expected.is_zero() => {
            let done = (elapsed.as_secs_f64() / expected.as_secs_f64()).clamp(0.0, 1.0);
            let done = if view.finished.is_some() { 1.0 } else { done };
            lines.push(Line::from(vec![
                Span::styled("elapsed ", style::dim()),
                Span::raw(format::clock(elapsed.as_secs())),
                Span::styled(" of ", style::dim()),
                Span::raw(format::clock(expected.as_secs())),
            ]));
            lines.push(progress(done, width));
            if view.finished.is_none() {
                let left = expected.saturating_sub(elapsed);
                lines.push(Line::from(vec![
                    Span::styled("remaining ", style::dim()),
                    Span::raw(format::clock(left.as_secs_f64().ceil() as u64)),
                ]));
            }
        }
        _ => lines.push(Line::from(vec![
            Span::styled("elapsed ", style::dim()),
            Span::raw(format::clock(elapsed.as_secs())),
        ])),
    }
    if let Some(finished) = &view.finished {
        lines.push(Line::styled(
            format!("finished: {finished}"),
            style::title(),
        ));
    } else if view.stopping {
        lines.push(Line::styled(
            "stopping: restoring what it changed…",
            style::warn(),
        ));
    }
    lines.push(Line::default());
    match &view.live {
        Some(Value::Object(numbers)) => {
            for (key, value) in numbers {
                let Some(text) = scalar(value) else { continue };
                let key_width = width.saturating_sub(text.len() + 1);
                lines.push(Line::from(vec![
                    Span::styled(format!("{:<key_width$}", fit(key, key_width)), style::dim()),
                    Span::raw(format!(" {text}")),
                ]));
            }
        }
        Some(other) => lines.extend(scalar(other).map(Line::from)),
        None if view.finished.is_none() => {
            lines.push(Line::styled("waiting for its first numbers…", style::dim()))
        }
        None => {}
    }
    if !view.notes.is_empty() {
        lines.push(Line::default());
        lines.extend(
            view.notes
                .iter()
                .map(|n| Line::styled(n.clone(), style::dim())),
        );
    }
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
}

/// `███████░░░░░░░░  40%`.
fn progress(done: f64, width: usize) -> Line<'static> {
    let bar = width.saturating_sub(5);
    let filled = (done * bar as f64).round() as usize;
    Line::from(vec![
        Span::styled("█".repeat(filled), style::bar()),
        Span::styled("░".repeat(bar - filled.min(bar)), style::dim()),
        Span::raw(format!("{:>5}", format!("{:.0}%", done * 100.0))),
    ])
}

/// A live value as a short string; `None` for nested structure.
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::Number(n) => n.as_f64().map(format::number),
        Value::Bool(b) => Some(b.to_string()),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}
