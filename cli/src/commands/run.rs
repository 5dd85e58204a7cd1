//! `iommutop run PROFILE [--json FILE|-] [--format text|json|markdown|html] [--html F.html] [--duration S] [--set KEY=VALUE]...
//! [--interval S]`: a profile's workload under the probes, its own numbers and the probes' in one
//! report.
//!
//! The workload runs on a thread of its own; this thread owns the measurement, samples it every
//! interval and whenever the workload ends a step ([`RunControl::checkpoint`]), and hands the
//! workload the probe numbers of the step. Ctrl-C asks the workload to stop; it restores what it
//! changed and the report is written all the same.

use crate::cli::RunArgs;
use crate::commands::workload::{
    checked_profile_workload, load_profile, restore_leftovers, workload_failure,
};
use crate::exit::{Code, Failure, Outcome};
use crate::measurement::{Detach, Measurement, RunDescription};
use crate::output::{print_text, recording, ReportSink};
use crate::stop::StopSignal;
use anyhow::anyhow;
use iommutop_model::html::render_report;
use iommutop_model::params::WorkloadParams;
use iommutop_model::report::repeats::RepeatRun;
use iommutop_model::report::{Repeats, Report};
use iommutop_model::results::WorkloadResults;
use iommutop_workloads::profile::PROBE_GROUPS;
use iommutop_workloads::{
    ProbeWindow, RunControl, WindowAccumulator, Workload, WorkloadError, WorkloadOutput,
};
use serde_json::{Map, Value};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the workload thread tells the measurement.
enum Event {
    Live(Value),
    Note(String),
    Checkpoint(String),
    Done(Finished),
}

/// The workload thread's last word.
pub(crate) struct Finished {
    pub(crate) result: Result<WorkloadOutput, WorkloadError>,
    pub(crate) params: WorkloadParams,
    /// What its restore could not put back.
    pub(crate) not_restored: Vec<String>,
}

/// The workload's side of the line.
struct ChannelControl {
    events: Sender<Event>,
    windows: Receiver<Option<ProbeWindow>>,
    cancel: Arc<AtomicBool>,
}

impl RunControl for ChannelControl {
    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
    fn live(&mut self, numbers: Value) {
        let _ = self.events.send(Event::Live(numbers));
    }
    fn note(&mut self, line: &str) {
        let _ = self.events.send(Event::Note(line.to_string()));
    }
    fn checkpoint(&mut self, label: &str) -> Option<ProbeWindow> {
        self.events
            .send(Event::Checkpoint(label.to_string()))
            .ok()?;
        self.windows.recv().ok().flatten()
    }
}

pub fn run(args: &RunArgs) -> Outcome<ExitCode> {
    if args.runs == 0 {
        return Err(Failure::usage(anyhow!(
            "--runs 0: at least one run is measured (--runs N with N ≥ 1; --warmup K adds \
             discarded runs before them)"
        )));
    }
    let output = recording("run", args.format, args.json.as_deref())?;
    let device_filter = crate::device_filter::resolve(args.device.as_deref())?;
    let task_filter = crate::task_filter::resolve(&args.tasks)?;
    let profile = load_profile(&args.profile, &args.set, args.duration)?;
    let mut first = Some(checked_profile_workload(&profile)?);
    let mut next_workload = || match first.take() {
        Some(workload) => Ok(workload),
        None => checked_profile_workload(&profile),
    };
    let interval = Duration::from_secs_f64(args.interval);
    let mut sink = output.sink()?;
    let stop = StopSignal::install()?;
    restore_leftovers();
    let mut measurement = Measurement::start(
        &args.points.clone().unwrap_or_default(),
        task_filter,
        crate::cli::NetdevScope::Physical,
        args.cross_check,
    )?
    .with_device_filter(device_filter);
    let repeated = series_description(args.runs, args.warmup);
    eprintln!(
        "iommutop: probes attached; running profile {} ({}{repeated})",
        profile.name,
        profile.workload.name()
    );
    for number in 1..=args.warmup {
        eprintln!("iommutop: warm-up run {number}/{}", args.warmup);
        let workload = next_workload()?;
        let (finished, sampling_failure) = run_under_measurement(
            &mut measurement,
            workload,
            interval,
            &stop,
            &mut ReportSink::Silent,
        );
        warm_up_ended(finished, sampling_failure, number)?;
    }
    if args.warmup > 0 {
        measurement.restart()?;
    }
    let Series {
        measured,
        params,
        failed,
    } = measure_runs(
        args,
        &mut measurement,
        &mut next_workload,
        interval,
        &stop,
        &mut sink,
    )?;
    let SeriesEnd {
        results,
        mut warnings,
        entries,
        error,
        not_restored,
        interrupted,
    } = series_end(args.runs, profile.workload.name(), measured, failed);
    if profile.probe_groups.len() < PROBE_GROUPS.len() {
        warnings.push(format!(
            "the profile names probe groups {}: this build attaches all of them",
            profile.probe_groups.join(", ")
        ));
    }
    let results = results.unwrap_or(WorkloadResults::Other(Map::new()));
    let summary =
        (results != WorkloadResults::Interrupted).then(|| profile.workload.summarize(&results));
    let mut report = measurement.finish(
        RunDescription::profile(
            &profile.name,
            profile.workload,
            params,
            results,
            interval,
            warnings,
        ),
        Detach::Behind,
    )?;
    if args.runs > 1 {
        report.repeats = Some(Repeats::new(args.warmup, entries));
    }
    // A document is the report alone, as `iommutop report` prints it; the text has these too.
    // A failed run has no summary; a series whose later run failed has its complete runs'.
    if !output.streams() && output.document.is_none() {
        if let Some(summary) = summary {
            print!("{summary}");
        }
        if let Some(repeats) = report.repeats.as_ref().filter(|r| !r.runs.is_empty()) {
            print!("{}", repeats_summary(repeats));
        }
    }
    sink.report(&report)?;
    let source = format!("iommutop run {}", profile.name);
    if let Some(document) = output.document(&report, &source)? {
        print_text(&document)?;
    }
    if let Some(path) = &args.html {
        crate::commands::html::write(path, &render_report(&report, &source))?;
    }
    if let Some(failure) = run_failure(&report, error, interrupted, &not_restored) {
        return Err(failure);
    }
    check_thresholds(&profile.thresholds(), &report)
}

/// How a series that reported ended in failure, if it did: its workload's error, an interrupt, or
/// what could not be restored.
fn run_failure(
    report: &Report,
    error: Option<WorkloadError>,
    interrupted: bool,
    not_restored: &[String],
) -> Option<Failure> {
    if let Some(e) = error {
        return Some(workload_failure(e));
    }
    if interrupted
        || report
            .run
            .workload
            .as_ref()
            .is_some_and(|w| w.results.interrupted())
    {
        return Some(Failure::from(anyhow!(
            "interrupted (the report covers the run up to then)"
        )));
    }
    if !not_restored.is_empty() {
        return Some(Failure::from(anyhow!(
            "could not restore everything: {}",
            not_restored.join("; ")
        )));
    }
    None
}

/// `, N measured runs after K warm-up runs` where there is more than one run, else nothing.
fn series_description(runs: u32, warmup: u32) -> String {
    if runs > 1 || warmup > 0 {
        format!(
            ", {} measured run{} after {} warm-up run{}",
            runs,
            plural(runs),
            warmup,
            plural(warmup)
        )
    } else {
        String::new()
    }
}

/// The measured runs of a series, in order: each complete one with its entry when there are
/// several, and the first that did not complete, which ends the series.
struct Series {
    measured: Vec<(MeasuredRun, Option<RepeatRun>)>,
    params: WorkloadParams,
    failed: Option<MeasuredRun>,
}

/// Runs the `--runs` measured runs under the probes until one does not complete; a sampling
/// failure of that run is the command's.
fn measure_runs(
    args: &RunArgs,
    measurement: &mut Measurement,
    next_workload: &mut dyn FnMut() -> Outcome<Box<dyn Workload>>,
    interval: Duration,
    stop: &StopSignal,
    sink: &mut ReportSink,
) -> Outcome<Series> {
    let mut measured = Vec::new();
    let mut params = WorkloadParams::new();
    let mut last_failure = None;
    for number in 1..=args.runs {
        if args.runs > 1 {
            eprintln!("iommutop: run {number}/{}", args.runs);
        }
        let workload = next_workload()?;
        let t_s = measurement.elapsed_s();
        let before = measurement.mark()?;
        let (finished, sampling_failure) =
            run_under_measurement(measurement, workload, interval, stop, sink);
        let after = measurement.mark()?;
        let run = MeasuredRun::of(finished, sampling_failure);
        if params.is_empty() {
            params = run.params.clone();
        }
        let complete = run.error.is_none()
            && run.sampling_failure.is_none()
            && run.not_restored.is_empty()
            && !run.results.interrupted();
        if complete && args.runs > 1 {
            let devices = measurement.between(&before, &after).devices;
            let entry = RepeatRun::new(t_s, measurement.elapsed_s() - t_s, &run.results, &devices);
            eprintln!(
                "iommutop: run {number}/{} ended{}",
                args.runs,
                headline_of(&run.results)
            );
            measured.push((run, Some(entry)));
        } else if complete {
            measured.push((run, None));
        } else {
            last_failure = Some(run);
            break;
        }
    }
    if let Some(failed) = last_failure.as_mut() {
        for line in &failed.not_restored {
            eprintln!("iommutop: not restored: {line}");
        }
        if let Some(failure) = failed.sampling_failure.take() {
            return Err(failure);
        }
    }
    Ok(Series {
        measured,
        params,
        failed: last_failure,
    })
}

/// What a series reports: its results (merged, or the failed run's, or marked by it), the
/// warnings of every run, the entries of its complete runs, and how the failed run ended.
struct SeriesEnd {
    results: Option<WorkloadResults>,
    warnings: Vec<String>,
    entries: Vec<RepeatRun>,
    error: Option<WorkloadError>,
    not_restored: Vec<String>,
    interrupted: bool,
}

fn series_end(
    runs: u32,
    workload: &str,
    measured: Vec<(MeasuredRun, Option<RepeatRun>)>,
    last_failure: Option<MeasuredRun>,
) -> SeriesEnd {
    let mut warnings = Vec::new();
    let mut all_results: Vec<WorkloadResults> = Vec::new();
    let mut entries = Vec::new();
    for (run, entry) in measured {
        warnings.extend(run.warnings);
        all_results.push(run.results);
        entries.extend(entry);
    }
    let mut results = match all_results.len() {
        0 => None,
        _ if runs > 1 => Some(Repeats::merged_results(workload, &all_results)),
        _ => all_results.pop(),
    };
    let (mut error, mut not_restored, mut interrupted) = (None, Vec::new(), false);
    if let Some(failed) = last_failure {
        if runs > 1 {
            let kept = match entries.len() {
                0 => "no run completed".to_string(),
                1 => "the numbers are those of the run before it".to_string(),
                n => format!("the numbers are those of the {n} runs before it"),
            };
            warnings.push(format!(
                "run {} of {} did not complete: {kept}",
                entries.len() + 1,
                runs
            ));
        }
        // Without a complete run, the failed run's results are the results; after complete
        // runs, its `error` or `interrupted` joins theirs.
        interrupted = failed.results.interrupted();
        results = Some(match results {
            None => failed.results,
            Some(complete) => complete.marked_by(workload, &failed.results),
        });
        warnings.extend(failed.warnings);
        error = failed.error;
        not_restored = failed.not_restored;
    }
    warnings.extend(not_restored.iter().map(|l| format!("not restored: {l}")));
    SeriesEnd {
        results,
        warnings,
        entries,
        error,
        not_restored,
        interrupted,
    }
}

/// One measured run of the workload, as it ended.
struct MeasuredRun {
    results: WorkloadResults,
    warnings: Vec<String>,
    params: WorkloadParams,
    error: Option<WorkloadError>,
    not_restored: Vec<String>,
    sampling_failure: Option<Failure>,
}

impl MeasuredRun {
    fn of(finished: Finished, sampling_failure: Option<Failure>) -> MeasuredRun {
        let Finished {
            result,
            params,
            not_restored,
        } = finished;
        let (results, warnings, error) = match result.and_then(WorkloadOutput::reported) {
            Ok(output) => (output.results, output.warnings, None),
            Err(WorkloadError::Cancelled) => {
                let why = "interrupted before the workload had results".to_string();
                (WorkloadResults::Interrupted, vec![why], None)
            }
            Err(e) => {
                let results = WorkloadResults::Failed {
                    error: e.to_string(),
                };
                (results, vec![format!("the workload failed: {e}")], Some(e))
            }
        };
        MeasuredRun {
            results,
            warnings,
            params,
            error,
            not_restored,
            sampling_failure,
        }
    }
}

/// A warm-up run that did not end well ends the command: nothing has been measured yet.
fn warm_up_ended(finished: Finished, sampling_failure: Option<Failure>, number: u32) -> Outcome {
    for line in &finished.not_restored {
        eprintln!("iommutop: not restored: {line}");
    }
    if let Some(failure) = sampling_failure {
        return Err(failure);
    }
    match finished.result {
        Ok(_) if finished.not_restored.is_empty() => Ok(()),
        Ok(_) => Err(Failure::from(anyhow!(
            "warm-up run {number}: could not restore everything: {}",
            finished.not_restored.join("; ")
        ))),
        Err(WorkloadError::Cancelled) => Err(Failure::from(anyhow!(
            "interrupted during warm-up run {number}: nothing was measured, no report"
        ))),
        Err(e) => {
            let failure = workload_failure(e);
            Err(Failure {
                error: anyhow!("warm-up run {number}: {:#}", failure.error),
                code: failure.code,
            })
        }
    }
}

fn plural(n: u32) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// `: transactions_per_s 1234.5` when the workload states its headline rate.
fn headline_of(results: &WorkloadResults) -> String {
    results
        .headline()
        .and_then(|h| Some(format!(": {} {:.1}", h.rate_metric?, h.rate_per_s?)))
        .unwrap_or_default()
}

/// The mean ± standard deviation of each workload number over the runs, one a line.
fn repeats_summary(repeats: &Repeats) -> String {
    let mut out = format!(
        "\nover {} runs (after {} warm-up): mean ± sample standard deviation\n",
        repeats.runs.len(),
        repeats.warmup
    );
    for (key, m) in &repeats.summary.workload {
        let spread = m.stddev.map_or("-".to_string(), |s| format!("{s:.3}"));
        out.push_str(&format!("  {key:<28} {:>14.3} ± {spread}\n", m.mean));
    }
    out
}

/// The profile's `fail_if` thresholds against the report: exit 4 when one holds.
fn check_thresholds(
    thresholds: &[iommutop_model::compare::Threshold],
    report: &Report,
) -> Outcome<ExitCode> {
    let mut crossed = Vec::new();
    for threshold in thresholds {
        let evaluation = threshold
            .evaluate(report, report)
            .map_err(|e| Failure::from(anyhow!("threshold not evaluated: {e}")))?;
        if evaluation.crossed {
            crossed.push(evaluation.sentence());
        }
    }
    if crossed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(Failure {
            code: Code::Threshold,
            error: anyhow!("{}", crossed.join("; ")),
        })
    }
}

/// One sample: into the report's intervals, the current window, and the sink.
fn sample(
    measurement: &mut Measurement,
    live: Option<Value>,
    accumulator: &mut WindowAccumulator,
    sink: &mut ReportSink,
) -> Outcome {
    let snapshot = measurement.sample(live.clone())?;
    accumulator.add(&snapshot);
    sink.interval(&snapshot, live.as_ref())
}

/// A userspace driver's IOMMU work (its VFIO mappings) goes under the device it drives; if the
/// probes cannot be told, it stays `unattributed` and the run goes on.
pub(crate) fn charge_userspace_driver(measurement: &mut Measurement, workload: &dyn Workload) {
    if let Some(pci) = workload.userspace_driver_of() {
        if let Err(e) = measurement.charge_children_to(&pci) {
            eprintln!("iommutop: warning: {e:#}: its VFIO mappings stay `unattributed`");
        }
    }
}

/// Runs the workload on its own thread while this one samples; returns how the workload ended
/// and, if sampling failed, that failure (the workload was then cancelled).
/// Also used by `diagnose`, which runs profiles the same way.
pub(crate) fn run_under_measurement(
    measurement: &mut Measurement,
    mut workload: Box<dyn Workload>,
    interval: Duration,
    stop: &StopSignal,
    sink: &mut ReportSink,
) -> (Finished, Option<Failure>) {
    charge_userspace_driver(measurement, workload.as_ref());
    let (events, event_rx) = mpsc::channel();
    let (window_tx, windows) = mpsc::channel();
    let cancel = Arc::new(AtomicBool::new(false));
    let thread_cancel = Arc::clone(&cancel);
    let mut accumulator = WindowAccumulator::new();
    let mut live: Option<Value> = None;
    let mut failure: Option<Failure> = None;
    let mut finished: Option<Finished> = None;

    std::thread::scope(|scope| {
        let worker = scope.spawn(move || {
            let mut ctl = ChannelControl {
                events: events.clone(),
                windows,
                cancel: thread_cancel,
            };
            let result = workload.prepare().and_then(|()| workload.run(&mut ctl));
            let not_restored = workload.restore();
            let params = workload.params();
            drop(workload);
            let _ = events.send(Event::Done(Finished {
                result,
                params,
                not_restored,
            }));
        });
        let mut next_sample = Instant::now() + interval;
        loop {
            if stop.requested() {
                cancel.store(true, Ordering::Relaxed);
            }
            let wait = next_sample
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(50));
            match event_rx.recv_timeout(wait) {
                Ok(Event::Live(numbers)) => live = Some(numbers),
                Ok(Event::Note(line)) => eprintln!("iommutop: {line}"),
                Ok(Event::Checkpoint(label)) => {
                    let window = if failure.is_none() {
                        match sample(measurement, live.take(), &mut accumulator, sink) {
                            Ok(()) => Some(accumulator.take(&label)),
                            Err(e) => {
                                failure = Some(e);
                                cancel.store(true, Ordering::Relaxed);
                                None
                            }
                        }
                    } else {
                        None
                    };
                    let _ = window_tx.send(window);
                }
                Ok(Event::Done(done)) => {
                    finished = Some(done);
                    break;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if failure.is_none() && Instant::now() >= next_sample {
                if let Err(e) = sample(measurement, live.take(), &mut accumulator, sink) {
                    failure = Some(e);
                    cancel.store(true, Ordering::Relaxed);
                }
                next_sample += interval;
            }
        }
        drop(window_tx);
        if worker.join().is_err() && failure.is_none() {
            failure = Some(Failure::from(anyhow!("the workload thread panicked")));
        }
    });
    let finished = finished.unwrap_or_else(|| Finished {
        result: Err(WorkloadError::Tool {
            tool: "iommutop".into(),
            message: "the workload thread ended without a word".into(),
        }),
        params: WorkloadParams::new(),
        not_restored: Vec::new(),
    });
    (finished, failure)
}
