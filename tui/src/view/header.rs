//! The top line: what host this is (kernel, IOMMU vendor and units, DMA mode), and on the right
//! whether the view is paused and how long it has been running.

use super::{fit, style};
use crate::format;
use crate::state::State;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

pub fn render(state: &State, frame: &mut Frame, area: Rect) {
    let host = &state.host;
    let mut parts: Vec<String> = vec![host.kernel.as_deref().unwrap_or("kernel ?").to_string()];
    if host.iommu_present {
        let vendor = host.vendor.map_or("unknown", |v| v.name());
        if host.units.is_empty() {
            parts.push(format!("{vendor} IOMMU"));
        } else {
            parts.push(format!("{vendor} IOMMU ({})", host.units.join(",")));
        }
        match (host.mode, host.default_domain_type.as_deref()) {
            (Some(mode), Some(domain)) => parts.push(format!("{} ({domain})", mode.name())),
            (Some(mode), None) => parts.push(mode.name().to_string()),
            (None, Some(domain)) => parts.push(format!("domain {domain}")),
            (None, None) => {}
        }
    } else {
        parts.push("no IOMMU".to_string());
    }
    if host.lab {
        parts.push("lab".to_string());
    }
    if let Some(scope) = &host.scope {
        // --pid/--cgroup: interrupt-context work (completions, ...) is no task's, and not counted.
        parts.push(format!("only {scope}, task context"));
    }

    let mut right: Vec<Span> = Vec::new();
    if state.is_paused() {
        right.push(Span::styled(" PAUSED ", style::paused()));
        right.push(Span::raw(" "));
    }
    right.push(Span::raw(format!(
        "up {} ",
        format::clock(state.elapsed.as_secs())
    )));
    let right_width = right.iter().map(Span::width).sum::<usize>() as u16;

    let [left_area, right_area] =
        Layout::horizontal([Constraint::Min(0), Constraint::Length(right_width)]).areas(area);
    // One cell between the host and the right part, which always shows whole.
    let room = (left_area.width as usize).saturating_sub(" iommutop ".len() + 1);
    let left = Line::from(vec![
        Span::styled(" iommutop ", style::title()),
        Span::raw(fit(&parts.join(" · "), room)),
    ]);
    frame.render_widget(Paragraph::new(left).style(style::header_bar()), left_area);
    frame.render_widget(
        Paragraph::new(Line::from(right)).style(style::header_bar()),
        right_area,
    );
}
