//! `iommutop report FILE|- [--format text|json|markdown|html] [--json FILE|-] [--hist]
//! [--device DEV] [--folded F] [--flamegraph F.svg] [--html F.html]`: a saved report (or the NDJSON
//! stream `record --json -` wrote) shown again — its summary and verdict, its latency histograms,
//! the report itself (in the current schema), its sampled call paths, a page with its charts —
//! without the probes, root or the machine it came from.

use crate::cli::{OutputFormat, ReportArgs};
use crate::commands::{call_paths, html};
use crate::exit::{Failure, Outcome};
use crate::output::{emit, stdout_width};
use anyhow::anyhow;
use iommutop_model::diagnose::verdict;
use iommutop_model::html::render_report;
use iommutop_model::report::Report;
use iommutop_model::summary::{render_histograms, render_summary_fitted};
use iommutop_model::text::wrap;
use iommutop_model::RowKind;
use std::path::Path;
use std::process::ExitCode;

pub fn run(args: &ReportArgs) -> Outcome<ExitCode> {
    let report = Report::read_any(&args.file).map_err(Failure::usage)?;
    let name = if args.file == Path::new("-") {
        "standard input".to_string()
    } else {
        args.file.display().to_string()
    };
    if let Some(device) = &args.device {
        check_device(&report, &name, device)?;
    }
    let json = report.to_json()?;
    let form = match args.format {
        OutputFormat::Text => text(&report, args, stdout_width()),
        OutputFormat::Json => json.clone(),
        OutputFormat::Markdown => format!(
            "### iommutop report `{name}`\n\n```text\n{}```\n",
            text(&report, args, None)
        ),
        OutputFormat::Html => render_report(&report, &name),
    };
    emit(&form, args.json.as_deref().map(|p| (p, json.as_str())))?;
    call_paths::write(&report, args.folded.as_deref(), args.flamegraph.as_deref())?;
    if let Some(path) = &args.html {
        html::write(path, &render_report(&report, &name))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The summary, the verdict and (with --hist) the histograms, fitted to `width`.
fn text(report: &Report, args: &ReportArgs, width: Option<u16>) -> String {
    let mut text = render_summary_fitted(report, width);
    text.push('\n');
    text.push_str(&wrap(&verdict(report, args.device.as_deref(), None), width));
    if args.hist {
        text.push_str(&render_histograms(report, args.device.as_deref()));
    }
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// `--device` must name a row of the report: a usage error naming the report and its devices
/// otherwise (it printed "no device mapped memory" and exited 0).
pub fn check_device(report: &Report, name: &str, device: &str) -> Outcome {
    if report.devices.iter().any(|d| d.answers_to(device)) {
        return Ok(());
    }
    let known: Vec<String> = report
        .devices
        .iter()
        .filter(|d| d.kind == RowKind::Pci)
        .map(|d| match d.names.first() {
            Some(n) => format!("{} ({n})", d.key),
            None => d.key.to_string(),
        })
        .collect();
    let fix = if known.is_empty() {
        "it has no PCI device rows; leave --device out".to_string()
    } else {
        format!("give --device one of {}", known.join(", "))
    };
    Err(Failure::usage(anyhow!(
        "{name} has no device `{device}`: {fix}"
    )))
}
