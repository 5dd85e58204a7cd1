//! `iommutop diagnose [--device ADDR] [--json FILE] [--duration S] [-- COMMAND...]`: runs a
//! workload under the probes and explains what translation costs each device, where the time
//! goes, which call paths pay it and what to try.

use crate::cli::DiagnoseArgs;
use crate::commands::record::{command_outcome, record_while, require_runnable};
use crate::exit::{Failure, Outcome};
use crate::output::{JsonTarget, ReportSink};
use crate::session::{RunDescription, Session};
use crate::stop::StopSignal;
use crate::sysinfo;
use anyhow::{anyhow, Context};
use iommutop_model::explain::{system_facts, verdict};
use iommutop_model::facts::HostFacts;
use iommutop_model::report::{Report, ReportInputs, Run};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

/// Direct 4 KiB reads of an NVMe namespace: read-only, so safe on any disk.
const DEFAULT_READS: u32 = 2000;

pub fn run(args: &DiagnoseArgs) -> Outcome<ExitCode> {
    let interval = Duration::from_secs(1);
    let facts = sysinfo::collect(Path::new("/")).context("reading system facts")?;
    let mut sink = match &args.json {
        Some(path) => ReportSink::open(Some(JsonTarget::File(path.clone())))?,
        None => ReportSink::Silent,
    };
    if !facts.iommu_present() && args.command.is_empty() {
        print!("{}", system_facts(&facts_only_report(&facts)));
        println!("\nverdict: no IOMMU translates DMA on this machine, so translation costs nothing here.");
        println!("To compare with translation on, boot with intel_iommu=on / amd_iommu=on, or run `sudo scripts/demo` for the lab.");
        return Ok(ExitCode::SUCCESS);
    }
    let command = if args.command.is_empty() {
        default_workload(&facts)?
    } else {
        args.command.clone()
    };
    require_runnable(&command[0])?;
    eprintln!("iommutop: diagnosing with `{}`", command.join(" "));
    let stop = StopSignal::install()?;
    let mut session = Session::start()?;
    let duration = args.duration.map(Duration::from_secs_f64);
    let exit_status = record_while(&mut session, &command, interval, duration, &stop, &mut sink)?;
    let report = session.finish(RunDescription {
        profile: Some("diagnose".into()),
        command: command.clone(),
        exit_status,
        interval,
        ..RunDescription::default()
    })?;
    print!("{}", verdict(&report, args.device.as_deref()));
    sink.report(&report)?;
    command_outcome(&command, exit_status)
}

/// NVMe reads when a namespace is there; otherwise the user names the workload.
fn default_workload(facts: &HostFacts) -> Outcome<Vec<String>> {
    let disk = facts
        .devices
        .iter()
        .filter(|d| d.driver.as_deref() == Some("nvme"))
        .flat_map(|d| d.disks.iter())
        .next()
        .ok_or_else(|| {
            Failure::usage(anyhow!(
                "no NVMe namespace to read from: give the workload to diagnose after --, e.g. `iommutop diagnose -- netperf -H HOST -t TCP_RR`"
            ))
        })?;
    Ok(vec![
        "dd".into(),
        format!("if=/dev/{disk}"),
        "of=/dev/null".into(),
        "bs=4k".into(),
        format!("count={DEFAULT_READS}"),
        "iflag=direct".into(),
    ])
}

/// A report with the host facts and nothing measured, for the system half of the verdict.
fn facts_only_report(facts: &HostFacts) -> Report {
    let empty = iommutop_model::sample::RawSample::default();
    Report::build(ReportInputs {
        tool_version: env!("CARGO_PKG_VERSION"),
        host: facts,
        run: Run {
            started_at: iommutop_model::time::rfc3339_utc(SystemTime::now()),
            duration_s: 0.0,
            interval_s: 0.0,
            profile: Some("diagnose".into()),
            command: Vec::new(),
            exit_status: None,
            workload: None,
        },
        first: &empty,
        last: &empty,
        probes: Vec::new(),
        bpf_stats_enabled_by_iommutop: false,
        intervals: Vec::new(),
        warnings: Vec::new(),
    })
}
