//! `iommutop report FILE|- [--format text|json|markdown|html] [--json FILE|-] [--hist]
//! [--device DEV] [--folded F] [--flamegraph F.svg] [--html F.html]`: a saved report (or the NDJSON
//! stream `record --json -` wrote) shown again — its summary and verdict, its latency histograms,
//! the report itself (in the current schema), its sampled call paths, a page with its charts —
//! without the probes, root or the machine it came from.

use crate::cli::{OutputFormat, ReportArgs};
use crate::commands::{call_paths, html};
use crate::exit::{Failure, Outcome};
use crate::output::{emit, stdout_width};
use crate::report_format::{render, TextOptions};
use anyhow::anyhow;
use iommutop_model::html::render_report;
use iommutop_model::report::Report;
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
    let options = TextOptions {
        device: args.device.as_deref(),
        hist: args.hist,
    };
    let form = match args.format {
        OutputFormat::Json => json.clone(),
        format => render(&report, &name, format, &options, stdout_width())?,
    };
    emit(&form, args.json.as_deref().map(|p| (p, json.as_str())))?;
    call_paths::write(&report, args.folded.as_deref(), args.flamegraph.as_deref())?;
    if let Some(path) = &args.html {
        html::write(path, &render_report(&report, &name))?;
    }
    Ok(ExitCode::SUCCESS)
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
