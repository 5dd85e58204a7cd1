//! `iommutop diagnose [--device ADDR] [--json FILE] [--duration S] [-- COMMAND...]`: runs a
//! workload under the probes and explains what translation costs each device, where the time
//! goes, which call paths pay it and what to try.

use crate::cli::DiagnoseArgs;
use crate::commands::record::{command_outcome, record_while, require_runnable};
use crate::domain::DomainSwitch;
use crate::exit::{Failure, Outcome};
use crate::output::{JsonTarget, ReportSink};
use crate::session::{RunDescription, Session};
use crate::stop::StopSignal;
use crate::sysinfo;
use anyhow::{anyhow, Context};
use iommutop_model::compare::compare;
use iommutop_model::explain::{folded_stacks, system_facts, verdict};
use iommutop_model::facts::HostFacts;
use iommutop_model::report::{Report, ReportInputs, Run};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

/// Direct 4 KiB reads of an NVMe namespace: read-only, so safe on any disk.
const DEFAULT_READS: u32 = 2000;

pub fn run(args: &DiagnoseArgs) -> Outcome<ExitCode> {
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
    if args.ab && args.device.is_none() {
        return Err(Failure::usage(anyhow!(
            "--ab needs --device ADDR: the device whose IOMMU group runs once translated and once in identity"
        )));
    }
    let stop = StopSignal::install()?;
    eprintln!("iommutop: diagnosing with `{}`", command.join(" "));
    let (report, exit_status) = measure(&command, args.duration, &stop, &mut sink)?;
    print!("{}", verdict(&report, args.device.as_deref()));
    sink.report(&report)?;
    write_call_paths(&report, args)?;
    if let (true, Some(device)) = (args.ab, args.device.as_deref()) {
        ab_experiment(&report, device, &command, args.duration, &stop)?;
    }
    command_outcome(&command, exit_status)
}

/// `--folded` and `--flamegraph`: the sampled call paths for flame-graph readers.
fn write_call_paths(report: &Report, args: &DiagnoseArgs) -> Outcome {
    let folded = folded_stacks(report);
    if let Some(path) = &args.folded {
        let mut text = folded.join("\n");
        text.push('\n');
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("iommutop: folded call paths written to {}", path.display());
    }
    if let Some(path) = &args.flamegraph {
        if folded.is_empty() {
            return Err(anyhow!("no call path was sampled (stack sampling needs the fentry or kprobe tier): no flame graph written").into());
        }
        let file =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let mut options = inferno::flamegraph::Options::default();
        options.title = "iommutop: call paths of DMA API calls (sampled)".into();
        options.count_name = "samples".into();
        inferno::flamegraph::from_lines(
            &mut options,
            folded.iter().map(String::as_str),
            std::io::BufWriter::new(file),
        )
        .map_err(|e| anyhow!("rendering the flame graph: {e}"))?;
        eprintln!("iommutop: flame graph written to {}", path.display());
    }
    Ok(())
}

/// One run of the workload under freshly attached probes.
fn measure(
    command: &[String],
    duration: Option<f64>,
    stop: &StopSignal,
    sink: &mut ReportSink,
) -> Outcome<(Report, Option<i32>)> {
    let interval = Duration::from_secs(1);
    let mut session = Session::start()?;
    let duration = duration.map(Duration::from_secs_f64);
    let exit_status = record_while(&mut session, command, interval, duration, stop, sink)?;
    let report = session.finish(RunDescription {
        profile: Some("diagnose".into()),
        command: command.to_vec(),
        exit_status,
        interval,
        ..RunDescription::default()
    })?;
    Ok((report, exit_status))
}

/// `--ab`: the same workload again with the device's group in `identity`, then the original type
/// and bindings back, and the difference measured.
fn ab_experiment(
    translated: &Report,
    device: &str,
    command: &[String],
    duration: Option<f64>,
    stop: &StopSignal,
) -> Outcome {
    let address = translated
        .devices
        .iter()
        .find(|d| d.key == device || d.names.iter().any(|n| n == device))
        .and_then(|d| d.pci_address.clone())
        .unwrap_or_else(|| device.to_string());
    let mut switch = DomainSwitch::apply(Path::new("/"), &address, "identity")
        .map_err(|e| Failure::environment(e.context(format!("switching {address} to identity"))))?;
    eprintln!(
        "iommutop: A/B: {address}'s IOMMU group is now identity (was {}); running the workload again",
        switch.original_type()
    );
    let outcome = if stop.requested() {
        None
    } else {
        Some(measure(command, duration, stop, &mut ReportSink::Silent))
    };
    switch.restore()?;
    eprintln!(
        "iommutop: A/B: {address}'s IOMMU group restored to {}",
        switch.original_type()
    );
    let (identity, _) = match outcome {
        Some(result) => result?,
        None => {
            return Err(
                anyhow!("interrupted before the identity run; the group was restored").into(),
            )
        }
    };
    println!(
        "
A/B on {address}: A = translated ({}), B = identity",
        switch.original_type()
    );
    print!("{}", compare(translated, &identity).render());
    Ok(())
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
