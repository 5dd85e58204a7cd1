//! `iommutop top --batch [-n COUNT]`: the live view's table as text, one timestamped block per
//! interval on stdout, for pipes and logs (as `top -b` prints), sorted and filtered as
//! `--sort` and `--filter` say; Ctrl-C or COUNT blocks end it. With `--format json`, the
//! intervals and the report as JSON instead, as `record --json -` streams them; with markdown or
//! html, no table but the report at the end, as `iommutop report --format` prints it.

use super::StartView;
use crate::cli::{OutputFormat, TopArgs};
use crate::exit::{Failure, Outcome};
use crate::measurement::{Detach, Measurement, RunDescription};
use crate::output::{print_text, recording, IntervalText, ReportSink};
use crate::stop::StopSignal;
use anyhow::anyhow;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// How often the wait between intervals looks at Ctrl-C.
const POLL: Duration = Duration::from_millis(50);

pub fn run(args: &TopArgs, start: &StartView, interval: Duration) -> Outcome<ExitCode> {
    if args.profile.is_some() {
        return Err(Failure::usage(anyhow!(
            "--batch runs no workload: for a profile's numbers with the probes', use \
             `iommutop run PROFILE --json -`"
        )));
    }
    let output = recording("top --batch", args.format, args.json.as_deref())?;
    let streams = output.streams();
    if streams && args.format == OutputFormat::Text {
        return Err(Failure::usage(anyhow!(
            "`--json -` would mix into the table on stdout: give `top --batch --json` a file, \
             or --format json for JSON alone"
        )));
    }
    let mut sink = match output.json {
        Some(_) => output.sink()?,
        None => ReportSink::Silent,
    };
    let stop = StopSignal::install()?;
    let mut measurement = Measurement::start(
        &args.points.clone().unwrap_or_default(),
        start.tasks.clone(),
        start.netdevs,
        false,
    )?
    .with_device_filter(start.device.clone());
    let text = IntervalText::of(&measurement, start.sort, start.filter.clone());
    let mut printed = 0u64;
    let mut stdout = std::io::stdout();
    while args.iterations.is_none_or(|count| printed < count) {
        if !wait(interval, &stop) {
            break;
        }
        let snapshot = measurement.sample(None)?;
        // The JSON stream's lines, or nothing until the report for a document.
        if streams || output.document.is_some() {
            sink.interval(&snapshot, None)?;
            printed += 1;
            continue;
        }
        let block = text.render(&snapshot);
        if stdout
            .write_all(block.as_bytes())
            .and_then(|()| stdout.flush())
            .is_err()
        {
            break; // the reader went away (`| head`)
        }
        printed += 1;
    }
    let report = measurement.finish(
        RunDescription {
            interval,
            ..RunDescription::default()
        },
        Detach::Behind,
    )?;
    sink.report(&report)?;
    if let Some(document) = output.document(&report, "iommutop top --batch")? {
        print_text(&document)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Sleeps one interval; false when Ctrl-C came first.
fn wait(interval: Duration, stop: &StopSignal) -> bool {
    let until = Instant::now() + interval;
    while Instant::now() < until {
        if stop.requested() {
            return false;
        }
        std::thread::sleep(POLL.min(until.saturating_duration_since(Instant::now())));
    }
    !stop.requested()
}
