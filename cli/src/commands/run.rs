//! `iommutop run PROFILE [--json FILE|-] [--duration S] [--set KEY=VALUE]... [--interval S]`:
//! a profile's workload under the probes, its own numbers and the probes' in one report.
//!
//! The workload runs on a thread of its own; this thread owns the session, samples it every
//! interval and whenever the workload ends a step ([`RunControl::checkpoint`]), and hands the
//! workload the probe numbers of the step. Ctrl-C asks the workload to stop; it restores what it
//! changed and the report is written all the same.

use crate::cli::RunArgs;
use crate::commands::workload::{
    checked_profile_workload, load_profile, restore_leftovers, workload_failure,
};
use crate::exit::{Code, Failure, Outcome};
use crate::output::{JsonTarget, ReportSink};
use crate::session::{RunDescription, Session};
use crate::stop::StopSignal;
use anyhow::anyhow;
use iommutop_model::report::Report;
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

/// What the workload thread tells the session.
enum Event {
    Live(Value),
    Note(String),
    Checkpoint(String),
    Done(Finished),
}

/// The workload thread's last word.
pub(crate) struct Finished {
    pub(crate) result: Result<WorkloadOutput, WorkloadError>,
    pub(crate) params: Map<String, Value>,
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
    let device_filter = crate::device_filter::resolve(args.device.as_deref())?;
    let task_filter = crate::task_filter::resolve(&args.tasks)?;
    let profile = load_profile(&args.profile, &args.set, args.duration)?;
    let workload = checked_profile_workload(&profile)?;
    let interval = Duration::from_secs_f64(args.interval);
    let mut sink = ReportSink::open(args.json.as_deref().map(JsonTarget::parse))?;
    let stop = StopSignal::install()?;
    restore_leftovers();
    let mut session = Session::start(&args.points.clone().unwrap_or_default(), task_filter)?
        .with_device_filter(device_filter);
    eprintln!(
        "iommutop: probes attached; running profile {} ({})",
        profile.name,
        profile.workload.name()
    );
    let (finished, sampling_failure) =
        run_under_session(&mut session, workload, interval, &stop, &mut sink);
    let Finished {
        result,
        params,
        not_restored,
    } = finished;
    for line in &not_restored {
        eprintln!("iommutop: not restored: {line}");
    }
    if let Some(failure) = sampling_failure {
        return Err(failure);
    }
    let (results, mut warnings, error) = match result {
        Ok(output) => (output.results, output.warnings, None),
        Err(WorkloadError::Cancelled) => {
            let mut results = Map::new();
            results.insert("interrupted".into(), Value::Bool(true));
            let why = "interrupted before the workload had results".to_string();
            (results, vec![why], None)
        }
        Err(e) => {
            let mut results = Map::new();
            results.insert("error".into(), e.to_string().into());
            (results, vec![format!("the workload failed: {e}")], Some(e))
        }
    };
    warnings.extend(not_restored.iter().map(|l| format!("not restored: {l}")));
    if profile.probe_groups.len() < PROBE_GROUPS.len() {
        warnings.push(format!(
            "the profile names probe groups {}: this build attaches all of them",
            profile.probe_groups.join(", ")
        ));
    }
    let summary = (results.len() > 1 || !results.contains_key("interrupted"))
        .then(|| profile.workload.summarize(&results));
    let report = session.finish(RunDescription::profile(
        &profile.name,
        profile.workload,
        params,
        results,
        interval,
        warnings,
    ))?;
    if let Some(summary) = summary.filter(|_| !matches!(sink, ReportSink::Stream { .. })) {
        if error.is_none() {
            print!("{summary}");
        }
    }
    sink.report(&report)?;
    if let Some(e) = error {
        return Err(workload_failure(e));
    }
    if report
        .run
        .workload
        .as_ref()
        .and_then(|w| w.results.get("interrupted"))
        == Some(&Value::Bool(true))
    {
        return Err(Failure::from(anyhow!(
            "interrupted (the report covers the run up to then)"
        )));
    }
    if !not_restored.is_empty() {
        return Err(Failure::from(anyhow!(
            "could not restore everything: {}",
            not_restored.join("; ")
        )));
    }
    check_thresholds(&profile.thresholds(), &report)
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
    session: &mut Session,
    live: Option<Value>,
    accumulator: &mut WindowAccumulator,
    sink: &mut ReportSink,
) -> Outcome {
    let snapshot = session.sample(live.clone())?;
    accumulator.add(&snapshot);
    sink.interval(&snapshot, live.as_ref())
}

/// A userspace driver's IOMMU work (its VFIO mappings) goes under the device it drives; if the
/// probes cannot be told, it stays `unattributed` and the run goes on.
pub(crate) fn charge_userspace_driver(session: &mut Session, workload: &dyn Workload) {
    if let Some(pci) = workload.userspace_driver_of() {
        if let Err(e) = session.charge_children_to(&pci) {
            eprintln!("iommutop: warning: {e:#}: its VFIO mappings stay `unattributed`");
        }
    }
}

/// Runs the workload on its own thread while this one samples; returns how the workload ended
/// and, if sampling failed, that failure (the workload was then cancelled).
/// Also used by `diagnose`, which runs profiles the same way.
pub(crate) fn run_under_session(
    session: &mut Session,
    mut workload: Box<dyn Workload>,
    interval: Duration,
    stop: &StopSignal,
    sink: &mut ReportSink,
) -> (Finished, Option<Failure>) {
    charge_userspace_driver(session, workload.as_ref());
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
                        match sample(session, live.take(), &mut accumulator, sink) {
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
                if let Err(e) = sample(session, live.take(), &mut accumulator, sink) {
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
        params: Map::new(),
        not_restored: Vec::new(),
    });
    (finished, failure)
}
