//! `iommutop record [--duration S] [--interval S] [--json FILE|-] [--format text|json|markdown|html]
//! [--device DEV [--domain TYPE]] [-- COMMAND ARGS...]`

use crate::cli::RecordArgs;
use crate::commands::call_paths;
use crate::domain::{DomainError, DomainSwitch};
use crate::exit::{Code, Failure, Outcome};
use crate::measurement::{Measurement, RunDescription};
use crate::output::{print_text, recording, IntervalText, ReportSink};
use crate::stop::StopSignal;
use anyhow::anyhow;
use iommutop_tui::Column;
use std::io::Write;
use std::process::{Child, Command, ExitCode};
use std::time::{Duration, Instant};

pub fn run(args: &RecordArgs) -> Outcome<ExitCode> {
    let interval = Duration::from_secs_f64(args.interval);
    let duration = args.duration.map(Duration::from_secs_f64);
    // Open the output before attaching anything, so a bad path fails fast.
    let output = recording("record", args.format, args.json.as_deref())?;
    if args.print && output.streams() {
        return Err(Failure::usage(anyhow!(
            "--print and the JSON stream (`--json -`, --format json) would both write to stdout: \
             give --json a file"
        )));
    }
    if let (true, Some(format)) = (args.print, output.document) {
        return Err(Failure::usage(anyhow!(
            "--print's tables would land in the {} report on stdout: leave out --print, or \
             --format text",
            format.name()
        )));
    }
    let mut sink = output.sink()?;
    if let Some(program) = args.command.first() {
        require_runnable(program)?;
    }
    let device_filter = crate::device_filter::resolve(args.device.as_deref())?;
    let task_filter = crate::task_filter::resolve(&args.tasks)?;
    let stop = StopSignal::install()?;
    // With --domain, the group is switched before the probes attach and restored after the
    // report is built (so that the report shows the type recorded under).
    let mut switch = match (&args.domain, &device_filter) {
        (Some(domain_type), Some(filter)) => {
            Some(switch_domain(&filter.pci_address.to_string(), domain_type)?)
        }
        _ => None,
    };
    let mut measurement = Measurement::start(
        &args.points.clone().unwrap_or_default(),
        task_filter,
        args.netdev,
        args.cross_check,
    )?
    .with_device_filter(device_filter);
    let printer = args
        .print
        .then(|| IntervalText::of(&measurement, Column::MapsPerS, String::new()));
    let recorded = record_while(
        &mut measurement,
        &args.command,
        interval,
        duration,
        &stop,
        &mut sink,
        printer.as_ref(),
    )?;
    // The report is out before the probes are let go of; they detach behind this process,
    // which takes the kernel seconds (Probes::detach_behind).
    let (report, probes) = measurement.finish_attached(RunDescription {
        command: args.command.clone(),
        exit_status: recorded,
        interval,
        ..RunDescription::default()
    })?;
    if let Some(switch) = switch.as_mut() {
        switch.restore().map_err(domain_failure)?;
        eprintln!(
            "iommutop: IOMMU group {} restored to {}",
            switch.group(),
            switch.original_type()
        );
    }
    sink.report(&report)?;
    if let Some(document) = output.document(&report, "iommutop record")? {
        print_text(&document)?;
    }
    call_paths::write(&report, args.folded.as_deref(), args.flamegraph.as_deref())?;
    probes.detach_behind();
    command_outcome(&args.command, recorded)
}

/// `--domain TYPE --device DEV`: the group of DEV's PCI function (`address`) switched, after
/// putting back what a killed run left switched.
fn switch_domain(address: &str, domain_type: &str) -> Outcome<DomainSwitch> {
    crate::commands::workload::restore_leftovers();
    let switch = DomainSwitch::apply(address, domain_type).map_err(domain_failure)?;
    eprintln!(
        "iommutop: IOMMU group {} of {address} is now {domain_type} (was {})",
        switch.group(),
        switch.original_type()
    );
    Ok(switch)
}

/// A domain switch error with the exit code it calls for.
pub fn domain_failure(error: DomainError) -> Failure {
    if error.is_usage() {
        Failure::usage(error)
    } else if error.is_environment() {
        Failure::environment(error)
    } else {
        Failure::from(error)
    }
}

/// Runs COMMAND (or waits for the duration or Ctrl-C) under the attached probes, sampling every
/// interval into the sink (and, with a printer, as a table on stdout); returns COMMAND's exit
/// status.
pub fn record_while(
    measurement: &mut Measurement,
    command: &[String],
    interval: Duration,
    duration: Option<Duration>,
    stop: &StopSignal,
    sink: &mut ReportSink,
    printer: Option<&IntervalText>,
) -> Outcome<Option<i32>> {
    let mut child = command
        .first()
        .map(|program| spawn(program, &command[1..]))
        .transpose()?;
    eprintln!(
        "iommutop: probes attached; recording{}",
        describe_end(command, duration)
    );
    let started = Instant::now();
    let mut next_sample = started + interval;
    let mut exit_status = None;
    loop {
        if let Some(child) = child.as_mut() {
            if let Some(status) = child.try_wait()? {
                exit_status = Some(status.code().unwrap_or(128 + signal_of(&status)));
                break;
            }
        }
        if stop.requested() || duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        if Instant::now() >= next_sample {
            let snapshot = measurement.sample(None)?;
            sink.interval(&snapshot, None)?;
            if let Some(printer) = printer {
                // A reader that went away (`| head`) is not an error: the recording goes on.
                let mut stdout = std::io::stdout().lock();
                let _ = stdout
                    .write_all(printer.render(&snapshot).as_bytes())
                    .and_then(|()| stdout.flush());
            }
            next_sample += interval;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if let Some(child) = child.as_mut() {
        if exit_status.is_none() {
            exit_status = Some(stop_child(child));
        }
    }
    Ok(exit_status)
}

/// A command that failed makes the run fail, after its report was written.
pub fn command_outcome(command: &[String], exit_status: Option<i32>) -> Outcome<ExitCode> {
    match exit_status {
        Some(code) if code != 0 => Err(Failure {
            code: Code::Command(u8::try_from(code).unwrap_or(1)),
            error: anyhow!(
                "`{}` exited with status {code} (the report covers the run up to then)",
                iommutop_model::shell::join(command)
            ),
        }),
        _ => Ok(ExitCode::SUCCESS),
    }
}

fn describe_end(command: &[String], duration: Option<Duration>) -> String {
    match (command.is_empty(), duration) {
        (false, _) => format!(" while `{}` runs", iommutop_model::shell::join(command)),
        (true, Some(d)) => format!(" for {:.1} s (Ctrl-C stops)", d.as_secs_f64()),
        (true, None) => " until Ctrl-C".to_string(),
    }
}

/// Finds COMMAND before anything is attached, the way the shell would.
pub fn require_runnable(program: &str) -> Outcome {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &std::path::Path| {
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let found = if program.contains('/') {
        executable(std::path::Path::new(program))
    } else {
        std::env::var_os("PATH").is_some_and(|paths| {
            std::env::split_paths(&paths).any(|dir| executable(&dir.join(program)))
        })
    };
    if found {
        Ok(())
    } else {
        Err(Failure::usage(anyhow!(
            "cannot run `{program}`: no such executable (check the command after --)"
        )))
    }
}

fn spawn(program: &str, args: &[String]) -> Outcome<Child> {
    Command::new(program).args(args).spawn().map_err(|e| {
        Failure::usage(anyhow!(
            "cannot run `{program}`: {e} (check the command after --)"
        ))
    })
}

/// Ends a command still running when recording stops (duration reached, Ctrl-C).
fn stop_child(child: &mut Child) -> i32 {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill() only sends a signal to our own child, whose pid we hold.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code().unwrap_or(128 + signal_of(&status));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child
        .wait()
        .map(|s| s.code().unwrap_or(128 + signal_of(&s)))
        .unwrap_or(-1)
}

fn signal_of(status: &std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.signal().unwrap_or(0)
}
