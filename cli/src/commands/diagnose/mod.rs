//! `iommutop diagnose [--profile P | --baseline OLD.json] [--device ADDR] [--ab] [--json FILE]
//! [--format text|json|markdown|html] [-- COMMAND...]`: the
//! system facts that decide translation, then a workload under the probes, and a verdict per
//! device: what translation costs per unit of work and in CPU share, where the time goes, which
//! call paths pay it, and what to try — with `--ab`, the gain of identity measured on the same
//! kernel (the group switched, the workload run again, the group restored).
//!
//! The verdict's words come from `iommutop_model::diagnose`; this module runs things.

mod ab;
mod plan;

use crate::cli::{DiagnoseArgs, OutputFormat};
use crate::commands::record::{command_outcome, record_while, require_runnable};
use crate::commands::run::{run_under_measurement, Finished};
use crate::commands::workload::{
    checked_profile_workload, profile_workload, restore_leftovers, workload_failure,
};
use crate::commands::{call_paths, html};
use crate::exit::{Failure, Outcome};
use crate::measurement::{Detach, Measurement, RunDescription};
use crate::output::{print_text, JsonTarget, ReportSink};
use crate::stop::StopSignal;
use anyhow::{anyhow, Context};
use iommutop_loader::sysinfo;
use iommutop_loader::PointSelection;
use iommutop_model::diagnose::diagnosis::markdown::render_markdown_diagnosis;
use iommutop_model::diagnose::{render_system, Diagnosis};
use iommutop_model::html::render_diagnosis;
use iommutop_model::report::Report;
use iommutop_model::results::WorkloadResults;
use plan::Plan;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Sampling interval of a diagnosis: one second, so that `compare` can estimate noise.
const INTERVAL: Duration = Duration::from_secs(1);

pub fn run(args: &DiagnoseArgs) -> Outcome<ExitCode> {
    if args.json.as_deref() == Some(Path::new("-")) {
        return Err(Failure::usage(anyhow!(
            "diagnose --json -: the verdict goes to stdout, the report to a file: give --json a \
             file (FILE.json)"
        )));
    }
    let facts = sysinfo::collect(Path::new("/")).context("reading system facts")?;
    let baseline = match &args.baseline {
        Some(path) => Some((path, Report::read(path).map_err(Failure::usage)?)),
        None => None,
    };
    if !facts.iommu_present()
        && args.command.is_empty()
        && args.profile.is_none()
        && baseline.is_none()
    {
        print_text(&render(&Diagnosis::without_iommu(facts), args.format)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let plan = match &baseline {
        Some((path, report)) => plan::from_baseline(path, report, &args.set)?,
        None => plan::choose(args, &facts)?,
    };
    check(&plan)?;
    let ab_device = if args.ab {
        Some(ab::device_for(args, &plan, &facts)?)
    } else {
        None
    };
    // The text says what it looks at before the run; the other forms are whole at the end.
    if args.format == OutputFormat::Text {
        print!("{}", render_system(&facts));
    }
    let mut sink = match &args.json {
        Some(path) => ReportSink::open(Some(JsonTarget::File(path.clone())))?,
        None => ReportSink::Silent,
    };
    let stop = StopSignal::install()?;
    restore_leftovers();
    eprintln!("iommutop: diagnosing with {}", plan.describe());
    // With --ab a second measurement follows: the first's programs must be gone before it.
    let first_detach = if ab_device.is_some() {
        Detach::Here
    } else {
        Detach::Behind
    };
    let first = measure(&plan, args.duration, &stop, &mut sink, first_detach)?;
    sink.report(&first.report)?;
    write_call_paths(&first.report, args)?;
    let outcome = match (&ab_device, first.failure.is_none() && !stop.requested()) {
        (Some(device), true) => Some(ab::experiment(
            device,
            &first.report,
            &plan,
            args.duration,
            &stop,
            args.json.as_deref(),
        )),
        _ => None,
    };
    let (ab, ab_failure) = match outcome {
        Some(Ok(ab)) => (Some(ab), None),
        Some(Err(failure)) => (None, Some(failure)),
        None => (None, None),
    };
    let baseline_name = baseline
        .as_ref()
        .map(|(path, _)| path.display().to_string());
    let diagnosis = Diagnosis::of_run(
        facts,
        first.report,
        args.device.as_deref(),
        ab,
        baseline_name
            .as_deref()
            .zip(baseline.as_ref().map(|(_, r)| r)),
    );
    if let Some(path) = &args.html {
        html::write(path, &render_diagnosis(&diagnosis))?;
    }
    let form = match args.format {
        OutputFormat::Text => diagnosis.render_outcome(),
        format => render(&diagnosis, format)?,
    };
    print_text(&form)?;
    if let Some(failure) = first.failure {
        return Err(failure);
    }
    if let Some(failure) = ab_failure {
        return Err(failure);
    }
    if stop.requested() {
        return Err(Failure::from(anyhow!(
            "interrupted (the verdict covers the run up to then)"
        )));
    }
    Ok(ExitCode::SUCCESS)
}

/// The diagnosis in one `--format`.
pub fn render(diagnosis: &Diagnosis, format: OutputFormat) -> Outcome<String> {
    Ok(match format {
        OutputFormat::Text => diagnosis.render_text(),
        OutputFormat::Json => serde_json::to_string_pretty(diagnosis)? + "\n",
        OutputFormat::Markdown => render_markdown_diagnosis(diagnosis),
        OutputFormat::Html => render_diagnosis(diagnosis),
    })
}

/// What can be checked before anything is attached or changed.
fn check(plan: &Plan) -> Outcome {
    match plan {
        Plan::Command(argv) => require_runnable(&argv[0]),
        Plan::Profile(profile) => checked_profile_workload(profile).map(drop),
    }
}

/// One run under freshly attached probes: its report, and the failure to end with (a command
/// that failed, a workload error, something not restored) after the report is out.
pub struct Measured {
    pub report: Report,
    pub failure: Option<Failure>,
}

fn measure(
    plan: &Plan,
    duration: Option<f64>,
    stop: &StopSignal,
    sink: &mut ReportSink,
    detach: Detach,
) -> Outcome<Measured> {
    // Always with the kernel's own events beside the probes: a diagnosis says whether its
    // counts hold on this machine.
    let mut measurement = Measurement::start(
        &PointSelection::all(),
        None,
        crate::cli::NetdevScope::Physical,
        true,
    )?;
    match plan {
        Plan::Command(argv) => {
            let duration = duration.map(Duration::from_secs_f64);
            let exit_status =
                record_while(&mut measurement, argv, INTERVAL, duration, stop, sink, None)?;
            let report = measurement.finish(
                RunDescription {
                    profile: Some("diagnose".into()),
                    command: argv.clone(),
                    exit_status,
                    interval: INTERVAL,
                    ..RunDescription::default()
                },
                detach,
            )?;
            Ok(Measured {
                report,
                failure: command_outcome(argv, exit_status).err(),
            })
        }
        Plan::Profile(profile) => {
            let workload = profile_workload(profile)?;
            let (finished, sampling_failure) =
                run_under_measurement(&mut measurement, workload, INTERVAL, stop, sink);
            if let Some(failure) = sampling_failure {
                return Err(failure);
            }
            let Finished {
                result,
                params,
                not_restored,
            } = finished;
            let mut warnings: Vec<String> = not_restored
                .iter()
                .map(|l| format!("not restored: {l}"))
                .collect();
            let (results, failure) =
                match result.and_then(iommutop_workloads::WorkloadOutput::reported) {
                    Ok(output) => {
                        warnings.extend(output.warnings);
                        (output.results, None)
                    }
                    Err(e) => {
                        warnings.push(format!("the workload failed: {e}"));
                        let error = e.to_string();
                        (WorkloadResults::Failed { error }, Some(workload_failure(e)))
                    }
                };
            let failure = failure.or_else(|| {
                (!not_restored.is_empty()).then(|| {
                    Failure::from(anyhow!(
                        "could not restore everything: {}",
                        not_restored.join("; ")
                    ))
                })
            });
            let interrupted = results.interrupted();
            let report = measurement.finish(
                RunDescription::profile(
                    &profile.name,
                    profile.workload,
                    params,
                    results,
                    INTERVAL,
                    warnings,
                ),
                detach,
            )?;
            let failure = failure.or_else(|| {
                interrupted.then(|| {
                    Failure::from(anyhow!(
                        "interrupted (the verdict covers the run up to then)"
                    ))
                })
            });
            Ok(Measured { report, failure })
        }
    }
}

/// `--folded` and `--flamegraph`: the sampled call paths for flame-graph readers.
fn write_call_paths(report: &Report, args: &DiagnoseArgs) -> Outcome {
    call_paths::write(report, args.folded.as_deref(), args.flamegraph.as_deref())
}

/// `run.json` → `run-identity.json`: where the other mode's report of `--ab` goes.
pub fn sibling(path: &Path, mode: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report".into());
    let extension = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    path.with_file_name(format!("{stem}-{mode}{extension}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<Option<Command>, clap::Error> {
        Cli::try_parse_from(args).map(|cli| cli.command)
    }

    #[test]
    fn diagnose_takes_a_profile_sets_and_ab() {
        let Ok(Some(Command::Diagnose(args))) = parse(&[
            "iommutop",
            "diagnose",
            "--profile",
            "tcp-rr-1k",
            "--set",
            "nics=eth0,eth1",
            "--device",
            "eth0",
            "--ab",
            "--duration",
            "4",
        ]) else {
            panic!("not diagnose")
        };
        assert_eq!(args.profile.as_deref(), Some("tcp-rr-1k"));
        assert_eq!(args.set, ["nics=eth0,eth1"]);
        assert!(args.ab);
        assert_eq!(args.duration, Some(4.0));
    }

    #[test]
    fn record_switches_a_domain_only_with_a_device_and_a_known_type() {
        let Ok(Some(Command::Record(args))) = parse(&[
            "iommutop",
            "record",
            "--domain",
            "identity",
            "--device",
            "0000:00:04.0",
            "--",
            "dd",
        ]) else {
            panic!("not record")
        };
        assert_eq!(args.domain.as_deref(), Some("identity"));
        assert_eq!(args.device.as_deref(), Some("0000:00:04.0"));
        assert!(parse(&["iommutop", "record", "--domain", "identity"]).is_err());
        // --device alone filters whose work is counted; --domain still needs the device it
        // switches.
        assert!(parse(&["iommutop", "record", "--device", "0000:00:04.0"]).is_ok());
        let error = parse(&["iommutop", "record", "--domain", "pt", "--device", "x"])
            .expect_err("unknown type")
            .to_string();
        assert!(
            error.contains("possible values: identity, DMA, DMA-FQ, auto"),
            "{error}"
        );
    }

    #[test]
    fn the_other_modes_report_sits_beside_the_first() {
        assert_eq!(
            sibling(Path::new("out/run.json"), "identity"),
            Path::new("out/run-identity.json")
        );
        assert_eq!(sibling(Path::new("r"), "DMA-FQ"), Path::new("r-DMA-FQ"));
    }

    #[test]
    fn the_json_help_names_the_file_ab_really_writes() {
        let mut command = <Cli as clap::CommandFactory>::command();
        command.build();
        let help = command
            .find_subcommand_mut("diagnose")
            .expect("diagnose exists")
            .render_long_help()
            .to_string();
        for mode in ["identity", "DMA-FQ", "DMA"] {
            let written = sibling(Path::new("rr.json"), mode);
            assert!(
                help.contains(&format!("`{}`", written.display())),
                "{mode}: {help}"
            );
        }
        assert!(!help.contains("FILE-identity"), "{help}");
    }
}
