//! A report in each `--format`: what `iommutop report FILE --format F` prints, and what `record`,
//! `run` and `top --batch` print with `--format markdown|html` (through this one function, so the
//! two are the same).

use crate::cli::OutputFormat;
use crate::exit::Outcome;
use iommutop_model::diagnose::verdict;
use iommutop_model::html::render_report;
use iommutop_model::report::Report;
use iommutop_model::summary::{render_histograms, render_summary_fitted};
use iommutop_model::text::wrap;

/// What `--device` and `--hist` ask of the text (and of the Markdown, which holds the text).
#[derive(Debug, Default, Clone, Copy)]
pub struct TextOptions<'a> {
    pub device: Option<&'a str>,
    pub hist: bool,
}

/// A report in one `--format`, `name` saying where it came from; the text fitted to `width`.
pub fn render(
    report: &Report,
    name: &str,
    format: OutputFormat,
    options: &TextOptions,
    width: Option<u16>,
) -> Outcome<String> {
    Ok(match format {
        OutputFormat::Text => text(report, options, width),
        OutputFormat::Json => report.to_json()?,
        OutputFormat::Markdown => format!(
            "### iommutop report `{name}`\n\n```text\n{}```\n",
            text(report, options, None)
        ),
        OutputFormat::Html => render_report(report, name),
    })
}

/// The summary, the verdict and (with --hist) the histograms, fitted to `width`.
fn text(report: &Report, options: &TextOptions, width: Option<u16>) -> String {
    let mut text = render_summary_fitted(report, width);
    text.push('\n');
    text.push_str(&wrap(&verdict(report, options.device, None), width));
    if options.hist {
        text.push_str(&render_histograms(report, options.device));
    }
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}
