//! `iommutop report FILE [--format text|json] [--device DEV] [--folded F] [--flamegraph F.svg]
//! [--html F.html]`: a saved report shown again — its summary and verdict, the report itself (in
//! the current schema), its sampled call paths, a page with its charts — without the probes, root
//! or the machine it came from.

use crate::cli::{ReportArgs, ReportFormat};
use crate::commands::{call_paths, html};
use crate::exit::{Failure, Outcome};
use crate::output::stdout_width;
use iommutop_model::diagnose::verdict;
use iommutop_model::html::render_report;
use iommutop_model::report::Report;
use iommutop_model::summary::render_summary_fitted;
use std::io::Write;
use std::process::ExitCode;

pub fn run(args: &ReportArgs) -> Outcome<ExitCode> {
    let report = Report::read(&args.file).map_err(Failure::usage)?;
    let mut text = match args.format {
        ReportFormat::Text => format!(
            "{}\n{}",
            render_summary_fitted(&report, stdout_width()),
            verdict(&report, args.device.as_deref(), None)
        ),
        ReportFormat::Json => serde_json::to_string_pretty(&report)?,
    };
    if !text.ends_with('\n') {
        text.push('\n');
    }
    // A reader that stops early (`| head`) is not an error.
    match std::io::stdout().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            return Err(anyhow::anyhow!("writing to stdout: {e}").into())
        }
        _ => {}
    }
    call_paths::write(&report, args.folded.as_deref(), args.flamegraph.as_deref())?;
    if let Some(path) = &args.html {
        html::write(
            path,
            &render_report(&report, &args.file.display().to_string()),
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
