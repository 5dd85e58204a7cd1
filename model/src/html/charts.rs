//! The charts of an HTML report, drawn by plotters into inline SVG: latency distributions from a
//! histogram's log-linear slots, and lines over the run's intervals. Text in a chart (titles,
//! legends, tick labels) is escaped by plotters' SVG backend.

use super::escape::escape;
use crate::hist::{slot_lower_bound, slot_upper_bound, Histogram};
use iommutop_abi::units::human_ns;
use plotters::prelude::*;

/// The colours of series in order: A (or the only one), then B.
pub const COLORS: [RGBColor; 4] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xe6, 0x6a, 0x00),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
];

const LATENCY_SIZE: (u32, u32) = (440, 250);
const LINE_SIZE: (u32, u32) = (560, 250);
const FONT: &str = "sans-serif";

/// One histogram of a latency chart.
pub struct HistSeries<'a> {
    pub label: &'a str,
    pub hist: &'a Histogram,
}

/// One line of a chart over time: `(seconds, value)` points.
pub struct Line<'a> {
    pub label: &'a str,
    pub points: Vec<(f64, f64)>,
}

/// A slot's span in ns on a log axis (slot 0 holds exactly 0 ns: drawn from half a ns).
fn slot_span(slot: usize) -> (f64, f64) {
    let low = slot_lower_bound(slot) as f64;
    let high = slot_upper_bound(slot).map_or(low * 1.25, |h| h as f64);
    (low.max(0.5), high)
}

/// Each non-empty slot of `hist` as `(from_ns, to_ns, percent of the calls)`.
pub fn slot_percentages(hist: &Histogram) -> Vec<(f64, f64, f64)> {
    let total = hist.total();
    if total == 0 {
        return Vec::new();
    }
    hist.slots()
        .iter()
        .enumerate()
        .filter(|(_, count)| **count > 0)
        .map(|(slot, count)| {
            let (low, high) = slot_span(slot);
            (low, high, 100.0 * *count as f64 / total as f64)
        })
        .collect()
}

/// The distribution of one operation's latency, one histogram per series on the same axes (log
/// ns across, percent of the series' calls up), as an `<svg>` element.
pub fn latency_chart(title: &str, series: &[HistSeries]) -> String {
    let bars: Vec<Vec<(f64, f64, f64)>> = series.iter().map(|s| slot_percentages(s.hist)).collect();
    let all = || bars.iter().flatten();
    let low = all().map(|b| b.0).fold(f64::INFINITY, f64::min);
    let high = all().map(|b| b.1).fold(0.0, f64::max);
    let top = all().map(|b| b.2).fold(0.0, f64::max);
    if !low.is_finite() || high <= low {
        return String::new();
    }
    // A little room either side, so that the outer slots are not on the frame.
    let range = (low / 1.5)..(high * 1.5);
    draw(LATENCY_SIZE, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 16))
            .margin(8)
            .x_label_area_size(36)
            .y_label_area_size(44)
            .build_cartesian_2d(range.log_scale(), 0.0..(top * 1.1))
            .map_err(text)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .max_light_lines(0)
            .x_desc("latency (log)")
            .y_desc("% of calls")
            .x_label_formatter(&|ns| human_ns(ns.round() as u64))
            .y_label_formatter(&|p| format!("{p:.0}"))
            .label_style((FONT, 11))
            .draw()
            .map_err(text)?;
        for (index, (s, bars)) in series.iter().zip(&bars).enumerate() {
            let color = COLORS[index % COLORS.len()];
            let fill = color.mix(if series.len() > 1 { 0.35 } else { 0.6 });
            let drawn = chart
                .draw_series(bars.iter().map(|&(from, to, percent)| {
                    Rectangle::new([(from, 0.0), (to, percent)], fill.filled())
                }))
                .map_err(text)?;
            if series.len() > 1 {
                drawn.label(s.label).legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
                chart
                    .draw_series(bars.iter().map(|&(from, to, percent)| {
                        Rectangle::new([(from, 0.0), (to, percent)], color.stroke_width(1))
                    }))
                    .map_err(text)?;
            }
        }
        if series.len() > 1 {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.4))
                .label_font((FONT, 12))
                .draw()
                .map_err(text)?;
        }
        Ok(())
    })
}

/// Lines over the run's seconds on one chart (value up from 0), as an `<svg>` element; empty when
/// no line has a point.
pub fn line_chart(title: &str, y_desc: &str, lines: &[Line]) -> String {
    let all = || lines.iter().flat_map(|l| l.points.iter());
    if all().next().is_none() {
        return String::new();
    }
    let end = all().map(|p| p.0).fold(0.0, f64::max).max(1.0);
    let top = all().map(|p| p.1).fold(0.0, f64::max);
    let top = if top > 0.0 { top * 1.1 } else { 1.0 };
    draw(LINE_SIZE, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 16))
            .margin(8)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..end, 0.0..top)
            .map_err(text)?;
        chart
            .configure_mesh()
            .max_light_lines(0)
            .x_desc("seconds since the start")
            .y_desc(y_desc)
            .y_label_formatter(&|v| short_number(*v))
            .label_style((FONT, 11))
            .draw()
            .map_err(text)?;
        for (index, line) in lines.iter().enumerate() {
            let color = COLORS[index % COLORS.len()];
            chart
                .draw_series(LineSeries::new(
                    line.points.iter().copied(),
                    color.stroke_width(2),
                ))
                .map_err(text)?
                .label(line.label)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 14, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .label_font((FONT, 12))
            .draw()
            .map_err(text)?;
        Ok(())
    })
}

/// `950`, `12.3k`, `4.57M`: tick labels that fit.
fn short_number(value: f64) -> String {
    match value.abs() {
        v if v >= 1e6 => format!("{:.2}M", value / 1e6),
        v if v >= 1e4 => format!("{:.1}k", value / 1e3),
        v if v >= 10.0 || v == 0.0 => format!("{value:.0}"),
        _ => format!("{value:.2}"),
    }
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// Draws one chart into an SVG string; a drawing failure (none is expected writing to memory)
/// becomes a sentence in its place.
fn draw(size: (u32, u32), paint: impl FnOnce(&Area) -> Result<(), String>) -> String {
    let mut svg = String::new();
    let outcome = {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE)
            .map_err(text)
            .and_then(|()| paint(&root))
            .and_then(|()| root.present().map_err(text))
    };
    match outcome {
        Ok(()) => svg,
        Err(error) => format!("<p class=\"note\">chart not drawn: {}</p>", escape(&error)),
    }
}

fn text(error: impl std::fmt::Display) -> String {
    error.to_string()
}
