//! The top line: what host this is (kernel, IOMMU vendor and units, DMA mode), and on the right
//! the one device shown when `--device` chose it, whether the view is paused and how long it has
//! been running.

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
        let mode = host.mode.and_then(|mode| mode.mode_name());
        match (mode, host.default_domain_type.as_deref()) {
            (Some(mode), Some(domain)) => parts.push(format!("{mode} ({domain})")),
            (Some(mode), None) => parts.push(mode.to_string()),
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
    if let Some(device) = &state.device {
        // Always whole, like PAUSED: it explains why other devices are missing.
        right.push(Span::styled(format!(" device {device} "), style::title()));
        right.push(Span::raw(" "));
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::HostSummary;
    use iommutop_model::DeviceFilter;
    use ratatui::backend::TestBackend;
    use ratatui::buffer::Buffer;
    use ratatui::Terminal;
    use std::time::Duration;

    fn header(state: &State, width: u16) -> Buffer {
        let mut terminal = Terminal::new(TestBackend::new(width, 1)).expect("test terminal");
        terminal
            .draw(|frame| render(state, frame, frame.area()))
            .expect("draws");
        let mut buffer = terminal.backend().buffer().clone();
        buffer.set_style(buffer.area, ratatui::style::Style::reset());
        buffer
    }

    fn state(device: Option<&DeviceFilter>) -> State {
        let host = HostSummary {
            kernel: Some("6.12.0".into()),
            ..HostSummary::default()
        };
        State::new(host, vec![], Duration::from_secs(1)).with_device(device)
    }

    /// `top --device eth0` showed an unmarked table: one row looked like a quiet host.
    #[test]
    fn the_header_names_the_device_the_rows_are_limited_to() {
        let filter = DeviceFilter {
            device: "eth0".into(),
            pci_address: "0000:00:05.0".parse().expect("address"),
        };
        let mut expected = Buffer::with_lines([
            " iommutop 6.12.0 · no IOMMU           device eth0 (0000:00:05.0)  up 0s ",
        ]);
        expected.set_style(expected.area, ratatui::style::Style::reset());
        assert_eq!(header(&state(Some(&filter)), 72), expected);
        // Narrow: the host is cut, the device is not.
        let narrow = header(&state(Some(&filter)), 50);
        let line: String = (0..50).map(|x| narrow[(x, 0)].symbol()).collect();
        assert!(line.contains("device eth0 (0000:00:05.0)"), "{line}");
        assert!(line.starts_with(" iommutop 6.1… "), "{line}");
        // A PCI address given as such is named once; without --device, nothing is said.
        let by_address = DeviceFilter {
            device: "0000:00:05.0".into(),
            pci_address: "0000:00:05.0".parse().expect("address"),
        };
        let line: String = {
            let b = header(&state(Some(&by_address)), 72);
            (0..72).map(|x| b[(x, 0)].symbol()).collect()
        };
        assert!(line.ends_with(" device 0000:00:05.0  up 0s "), "{line}");
        let line: String = {
            let b = header(&state(None), 72);
            (0..72).map(|x| b[(x, 0)].symbol()).collect()
        };
        assert!(!line.contains("device"), "{line}");
    }
}
