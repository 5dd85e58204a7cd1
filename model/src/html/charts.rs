//! The charts of an HTML report, drawn by plotters into inline SVG: latency distributions from a
//! histogram's log-linear slots, and lines over the run's intervals; and the IOTLB sweep's chart,
//! a standalone SVG file. Text in a chart (titles, legends, tick labels) is escaped by plotters'
//! SVG backend; the note that stands in for a chart not drawn goes through [`escape`].

use super::escape::escape;
use crate::hist::{slot_lower_bound, slot_upper_bound, Histogram};
use crate::results::vfio_nvme::{SweepSeries, SweepStep};
use iommutop_abi::units::human_ns;
use plotters::coord::types::RangedCoordf64;
use plotters::drawing::DrawingAreaErrorKind;
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
const SWEEP_SIZE: (u32, u32) = (760, 440);
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
            .build_cartesian_2d(range.log_scale(), 0.0..(top * 1.1))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .max_light_lines(0)
            .x_desc("latency (log)")
            .y_desc("% of calls")
            .x_label_formatter(&|ns| human_ns(ns.round() as u64))
            .y_label_formatter(&|p| format!("{p:.0}"))
            .label_style((FONT, 11))
            .draw()?;
        for (index, (s, bars)) in series.iter().zip(&bars).enumerate() {
            let color = COLORS[index % COLORS.len()];
            let fill = color.mix(if series.len() > 1 { 0.35 } else { 0.6 });
            let drawn = chart.draw_series(bars.iter().map(|&(from, to, percent)| {
                Rectangle::new([(from, 0.0), (to, percent)], fill.filled())
            }))?;
            if series.len() > 1 {
                drawn.label(s.label).legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
                chart.draw_series(bars.iter().map(|&(from, to, percent)| {
                    Rectangle::new([(from, 0.0), (to, percent)], color.stroke_width(1))
                }))?;
            }
        }
        if series.len() > 1 {
            draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
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
            .build_cartesian_2d(0.0..end, 0.0..top)?;
        chart
            .configure_mesh()
            .max_light_lines(0)
            .x_desc("seconds since the start")
            .y_desc(y_desc)
            .y_label_formatter(&|v| short_number(*v))
            .label_style((FONT, 11))
            .draw()?;
        for (index, line) in lines.iter().enumerate() {
            let color = COLORS[index % COLORS.len()];
            chart
                .draw_series(LineSeries::new(
                    line.points.iter().copied(),
                    color.stroke_width(2),
                ))?
                .label(line.label)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 14, y)], color.stroke_width(2))
                });
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        Ok(())
    })
}

/// Pages (log2) across, median latency in us up.
type SweepChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<LogCoord<f64>, RangedCoordf64>>;

/// The IOTLB sweep: median latency against distinct pages touched (log2 axis), one line with a
/// dot on each step per page size, and each knee a dashed line with its IOTLB-entries estimate;
/// a standalone SVG document.
pub fn sweep_chart(series: &[SweepSeries]) -> String {
    let us = |step: &SweepStep| step.median_ns as f64 / 1e3;
    let steps = || series.iter().flat_map(|s| &s.steps);
    let max_pages = steps().map(|s| s.pages).max().unwrap_or(1).max(2) as f64;
    let low = steps().map(us).fold(f64::INFINITY, f64::min);
    let low = if low.is_finite() { low * 0.9 } else { 0.0 };
    let high = (steps().map(us).fold(0.0, f64::max) * 1.1).max(low + 0.001);
    draw(SWEEP_SIZE, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(
                "Median QD1 read latency vs. distinct buffer pages (IOTLB sweep)",
                (FONT, 16),
            )
            .margin(8)
            .x_label_area_size(36)
            .y_label_area_size(56)
            // A little room either side, so that the first and last steps are not on the frame.
            .build_cartesian_2d((0.75..max_pages * 1.33).log_scale().base(2.0), low..high)?;
        chart
            .configure_mesh()
            .max_light_lines(0)
            .x_desc("distinct pages touched (log2)")
            .y_desc("median latency (us)")
            .x_label_formatter(&|pages| format!("{pages:.0}"))
            .y_label_formatter(&|v| format!("{v:.1}"))
            .label_style((FONT, 11))
            .draw()?;
        for (index, s) in series.iter().enumerate() {
            sweep_line(&mut chart, index, s, (low, high))?;
        }
        draw_legend(&mut chart, SeriesLabelPosition::LowerRight)?;
        Ok(())
    })
}

/// One page size's steps as a line with a dot on each, in the legend as `4k pages`; its knee, if
/// any, a dashed line between the two steps (on the log axis) labelled from the top down.
fn sweep_line(
    chart: &mut SweepChart,
    index: usize,
    series: &SweepSeries,
    (low, high): (f64, f64),
) -> Drawn {
    let color = COLORS[index % COLORS.len()];
    let points = series
        .steps
        .iter()
        .map(|step| (step.pages.max(1) as f64, step.median_ns as f64 / 1e3));
    chart
        .draw_series(LineSeries::new(points, color.stroke_width(2)).point_size(3))?
        .label(format!("{} pages", series.page_size.name()))
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 14, y)], color.stroke_width(2)));
    let Some(knee) = &series.knee else {
        return Ok(());
    };
    let x = ((knee.pages_before.max(1) * knee.pages_after.max(1)) as f64).sqrt();
    chart.draw_series(DashedLineSeries::new(
        [(x, low), (x, high)],
        5,
        4,
        color.stroke_width(1),
    ))?;
    let y = high - (high - low) * (0.04 + 0.06 * index as f64);
    let label = format!(
        "knee ({}): ~{} entries",
        series.page_size.name(),
        knee.entries_estimate
    );
    let style = TextStyle::from((FONT, 12).into_font()).color(&color);
    chart.draw_series(std::iter::once(Text::new(label, (x * 1.05, y), style)))?;
    Ok(())
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

/// What drawing into an SVG string can fail with.
type Drawn = Result<(), DrawingAreaErrorKind<std::io::Error>>;

/// Draws one chart into an SVG string; a drawing failure (none is expected writing to memory)
/// becomes a sentence in its place.
fn draw(size: (u32, u32), paint: impl FnOnce(&Area) -> Drawn) -> String {
    let mut svg = String::new();
    let outcome = {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE)
            .and_then(|()| paint(&root))
            .and_then(|()| root.present())
    };
    match outcome {
        Ok(()) => svg,
        Err(error) => format!(
            "<p class=\"note\">chart not drawn: {}</p>",
            escape(&error.to_string())
        ),
    }
}

/// The legend of a chart with more than one series, in the charts' one style.
fn draw_legend<'a, 'b: 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, CT>,
    position: SeriesLabelPosition,
) -> Drawn {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .label_font((FONT, 12))
        .draw()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::vfio_nvme::params::PageSize;
    use crate::results::vfio_nvme::{Knee, MapCost};

    fn series(page_size: PageSize, pages: &[u64], knee: Option<Knee>) -> SweepSeries {
        let steps = pages
            .iter()
            .map(|&pages| {
                let median_ns = if pages < 1024 { 100_000 } else { 112_000 };
                SweepStep {
                    pages,
                    bytes_covered: pages * page_size.bytes(),
                    ios: 1000,
                    median_ns,
                    p90_ns: median_ns + 1000,
                    p99_ns: median_ns + 5000,
                    mean_ns: median_ns as f64,
                }
            })
            .collect();
        SweepSeries {
            page_size,
            map: MapCost {
                what: "data".into(),
                bytes: 16 << 20,
                page_size,
                iova: 0x10000,
                map_ns: 1_000_000,
                unmap_ns: None,
                physical_runs: None,
            },
            steps,
            knee,
            verdict: String::new(),
        }
    }

    /// How many points each `<polyline>` of `svg` passes through.
    fn polyline_points(svg: &str) -> Vec<usize> {
        svg.split("<polyline")
            .skip(1)
            .map(|tag| {
                let points = tag.split("points=\"").nth(1).unwrap_or("");
                points[..points.find('"').unwrap_or(0)]
                    .split_whitespace()
                    .count()
            })
            .collect()
    }

    /// Each page size is one line through its steps with a dot on each (the axes, ticks, knee
    /// dashes and legend swatches are two-point lines), in the legend, and its knee labelled.
    #[test]
    fn the_sweep_chart_draws_each_series_through_its_steps_and_marks_the_knee() {
        let knee = Knee {
            pages_before: 512,
            pages_after: 1024,
            entries_estimate: 512,
            below_ns: 100_000.0,
            above_ns: 112_000.0,
            jump_ratio: 0.12,
            noise_ns: 100.0,
        };
        let four_k: Vec<u64> = (0..13).map(|i| 1 << i).collect();
        let svg = sweep_chart(&[
            series(PageSize::Size4K, &four_k, Some(knee)),
            series(PageSize::Size2M, &four_k[..5], None),
        ]);
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{svg}"
        );
        let lines = polyline_points(&svg);
        assert_eq!(lines.iter().filter(|&&n| n == 13).count(), 1, "{lines:?}");
        assert_eq!(lines.iter().filter(|&&n| n == 5).count(), 1, "{lines:?}");
        assert!(
            lines.iter().all(|&n| n == 13 || n == 5 || n == 2),
            "{lines:?}"
        );
        assert_eq!(svg.matches("<circle").count(), 13 + 5);
        assert!(
            svg.contains("4k pages") && svg.contains("2m pages"),
            "{svg}"
        );
        assert_eq!(svg.matches("knee (").count(), 1);
        assert!(svg.contains("knee (4k): ~512 entries"), "{svg}");
        let one = sweep_chart(&[series(PageSize::Size2M, &four_k[..5], None)]);
        assert_eq!(polyline_points(&one).iter().filter(|&&n| n > 2).count(), 1);
        assert_eq!(one.matches("<circle").count(), 5);
    }
}
