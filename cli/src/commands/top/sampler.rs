//! The sampler thread: owns the probe measurement, samples every interval, runs a profile's
//! workload beside it, and writes the report at the end.

use crate::commands::workload::{checked_profile_workload, load_profile, workload_failure};
use crate::exit::{Failure, Outcome};
use crate::measurement::{Detach, Measurement, RunDescription};
use crate::output::ReportSink;
use anyhow::anyhow;
use iommutop_model::params::{ParamValue, WorkloadParams};
use iommutop_model::results::WorkloadResults;
use iommutop_model::snapshot::Snapshot;
use iommutop_tui::WorkloadEvent;
use iommutop_workloads::{
    ProbeWindow, RunControl, WindowAccumulator, Workload, WorkloadError, WorkloadKind,
    WorkloadOutput,
};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(super) enum ToSampler {
    Interval(Duration),
    /// Quit: cancel the workload, build the report, end.
    Stop,
    Workload(FromWorkload),
}

pub(super) enum FromSampler {
    Sample(Box<Snapshot>),
    Workload(WorkloadEvent),
    /// The measurement ended and the report is written (if asked for): a line for the status bar.
    Done(String),
    /// The measurement ended in a failure: the view closes and the failure is printed.
    Failed,
}

/// Asks the sampler to stop when the view ends, however it ends.
pub(super) struct StopOnDrop(pub(super) Sender<ToSampler>);

impl StopOnDrop {
    pub(super) fn send(&self, message: ToSampler) {
        let _ = self.0.send(message);
    }
    pub(super) fn stop(&self) {
        self.send(ToSampler::Stop);
    }
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A profile, loaded and checked before anything is attached.
pub(super) struct ProfileRun {
    pub(super) name: String,
    pub(super) kind: WorkloadKind,
    pub(super) workload: Box<dyn Workload>,
    pub(super) expected: Option<Duration>,
}

impl ProfileRun {
    /// The profile with `--set` and `--duration` applied, its workload built and checked (as
    /// `iommutop run` does).
    pub(super) fn load(name: &str, sets: &[String], duration: Option<f64>) -> Outcome<ProfileRun> {
        let profile = load_profile(name, sets, duration)?;
        let workload = checked_profile_workload(&profile)?;
        let expected = expected_duration(profile.workload, &workload.params());
        Ok(ProfileRun {
            name: profile.name,
            kind: profile.workload,
            workload,
            expected,
        })
    }
}

/// How long a workload with these parameters should run: its duration, times its steps for
/// dma-contention; `None` when it runs until done (tlb).
pub(super) fn expected_duration(kind: WorkloadKind, params: &WorkloadParams) -> Option<Duration> {
    let seconds = |key: &str| params.get(key).and_then(ParamValue::as_f64);
    let total = match kind {
        WorkloadKind::DmaContention => {
            let steps = params
                .get("threads")
                .and_then(ParamValue::as_list)
                .map_or(1, <[ParamValue]>::len);
            seconds("step_s")? * steps as f64
        }
        WorkloadKind::Tlb => return None,
        _ => seconds("duration_s")?,
    };
    (total.is_finite() && total > 0.0).then(|| Duration::from_secs_f64(total))
}

/// What the workload thread tells the sampler.
pub(super) enum FromWorkload {
    Live(Value),
    Note(String),
    Checkpoint(String),
    Done(Box<Finished>),
}

pub(super) struct Finished {
    pub(super) result: Result<WorkloadOutput, WorkloadError>,
    pub(super) params: WorkloadParams,
    pub(super) not_restored: Vec<String>,
}

/// The workload's side: cancellation from a flag, everything else to the sampler.
pub(super) struct Control {
    pub(super) sampler: Sender<ToSampler>,
    pub(super) windows: Receiver<Option<ProbeWindow>>,
    pub(super) cancel: Arc<AtomicBool>,
}

impl RunControl for Control {
    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
    fn live(&mut self, numbers: Value) {
        let _ = self
            .sampler
            .send(ToSampler::Workload(FromWorkload::Live(numbers)));
    }
    fn note(&mut self, line: &str) {
        let _ = self
            .sampler
            .send(ToSampler::Workload(FromWorkload::Note(line.to_string())));
    }
    fn checkpoint(&mut self, label: &str) -> Option<ProbeWindow> {
        self.sampler
            .send(ToSampler::Workload(FromWorkload::Checkpoint(
                label.to_string(),
            )))
            .ok()?;
        self.windows.recv().ok().flatten()
    }
}

pub(super) struct Sampler {
    pub(super) measurement: Measurement,
    pub(super) sink: ReportSink,
    pub(super) interval: Duration,
    pub(super) control: Receiver<ToSampler>,
    /// Handed to the workload's [`Control`]; dropped otherwise, so that `control` disconnects
    /// once the view and the workload are gone.
    pub(super) control_tx: Option<Sender<ToSampler>>,
    pub(super) out: SyncSender<FromSampler>,
    pub(super) profile: Option<ProfileRun>,
}

/// How the sampling loop ended.
pub(super) enum Ended {
    /// The view quit (or went away).
    Stopped,
    /// Sampling failed.
    Failed(Failure),
}

impl Sampler {
    /// Samples until told to stop (or until the profile's workload ends), then writes the
    /// report; the outcome is the command's.
    pub(super) fn run(mut self) -> Outcome {
        let out = self.out.clone();
        let initial_interval = self.interval;
        let outcome = match self.profile.take() {
            None => {
                self.control_tx = None;
                let ended = self.sample_until_stopped(None);
                self.conclude(
                    ended,
                    RunDescription {
                        interval: initial_interval,
                        ..RunDescription::default()
                    },
                )
            }
            Some(profile) => self.run_profile(profile, initial_interval),
        };
        let _ = out.send(match &outcome {
            Ok(line) => FromSampler::Done(line.clone()),
            Err(_) => FromSampler::Failed,
        });
        outcome.map(|_| ())
    }

    /// Builds the report and writes it; a status line saying so.
    pub(super) fn conclude(self, ended: Ended, run: RunDescription) -> Outcome<String> {
        if let Ended::Failed(failure) = ended {
            return Err(failure);
        }
        let Sampler {
            measurement,
            mut sink,
            ..
        } = self;
        let report = measurement.finish(run, Detach::Behind)?;
        let written = match &sink {
            ReportSink::File { path, .. } => Some(path.display().to_string()),
            _ => None,
        };
        sink.report(&report)?;
        Ok(match written {
            Some(path) => {
                format!("report written to {path} · probes detaching in the background · q quits")
            }
            None => "probes detaching in the background · q quits".to_string(),
        })
    }

    /// The sampling loop. `workload` handles the workload's messages; it returns `true` when
    /// the workload has ended.
    pub(super) fn sample_until_stopped(
        &mut self,
        mut workload: Option<&mut WorkloadSide>,
    ) -> Ended {
        let mut next = Instant::now() + self.interval;
        let mut stopping = false;
        loop {
            let wait = next.saturating_duration_since(Instant::now());
            match self.control.recv_timeout(wait) {
                Ok(ToSampler::Interval(interval)) => {
                    next = next - self.interval + interval;
                    self.interval = interval;
                }
                Ok(ToSampler::Stop) => match workload.as_deref_mut() {
                    None => return Ended::Stopped,
                    Some(side) if !stopping => {
                        stopping = true;
                        side.cancel.store(true, Ordering::Relaxed);
                        let _ = self
                            .out
                            .send(FromSampler::Workload(WorkloadEvent::Stopping));
                    }
                    Some(_) => {}
                },
                Ok(ToSampler::Workload(message)) => {
                    let Some(side) = workload.as_deref_mut() else {
                        continue;
                    };
                    match message {
                        FromWorkload::Live(numbers) => {
                            side.live = Some(numbers.clone());
                            let _ = self
                                .out
                                .send(FromSampler::Workload(WorkloadEvent::Live(numbers)));
                        }
                        FromWorkload::Note(line) => {
                            let _ = self
                                .out
                                .send(FromSampler::Workload(WorkloadEvent::Note(line)));
                        }
                        FromWorkload::Checkpoint(label) => {
                            let window = match self.sample(Some(side)) {
                                Ok(()) => Some(side.accumulator.take(&label)),
                                Err(failure) => {
                                    side.cancel.store(true, Ordering::Relaxed);
                                    let _ = side.windows.send(None);
                                    return Ended::Failed(failure);
                                }
                            };
                            let _ = side.windows.send(window);
                        }
                        FromWorkload::Done(finished) => {
                            side.finished = Some(*finished);
                            return Ended::Stopped;
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Ended::Stopped,
            }
            if Instant::now() >= next {
                if let Err(failure) = self.sample(workload.as_deref_mut()) {
                    if let Some(side) = workload.as_deref_mut() {
                        side.cancel.store(true, Ordering::Relaxed);
                    }
                    return Ended::Failed(failure);
                }
                next += self.interval;
                // After a stall (the view stopped reading), the next interval starts now.
                next = next.max(Instant::now());
            }
        }
    }

    /// One sample, to the view (waiting if it is behind) and to the workload's window.
    pub(super) fn sample(&mut self, side: Option<&mut WorkloadSide>) -> Outcome {
        let (live, accumulator) = match side {
            Some(side) => (side.live.take(), Some(&mut side.accumulator)),
            None => (None, None),
        };
        let snapshot = self.measurement.sample(live)?;
        if let Some(accumulator) = accumulator {
            accumulator.add(&snapshot);
        }
        // A closed view is not a sampling failure: the loop learns of it from `control`.
        let _ = self.out.send(FromSampler::Sample(Box::new(snapshot)));
        Ok(())
    }

    /// The profile's workload on a thread of its own while this one samples.
    pub(super) fn run_profile(
        mut self,
        profile: ProfileRun,
        interval: Duration,
    ) -> Outcome<String> {
        let ProfileRun {
            name,
            kind,
            mut workload,
            ..
        } = profile;
        crate::commands::run::charge_userspace_driver(&mut self.measurement, workload.as_ref());
        let (window_tx, windows) = mpsc::channel();
        let cancel = Arc::new(AtomicBool::new(false));
        let mut side = WorkloadSide {
            cancel: Arc::clone(&cancel),
            windows: window_tx,
            accumulator: WindowAccumulator::new(),
            live: None,
            finished: None,
        };
        let Some(sampler) = self.control_tx.take() else {
            return Err(Failure::from(anyhow!(
                "the sampler has no line for the workload"
            )));
        };
        let mut control = Control {
            sampler,
            windows,
            cancel,
        };
        let ended = std::thread::scope(|scope| {
            let worker = scope.spawn(move || {
                let result = workload.prepare().and_then(|()| workload.run(&mut control));
                let not_restored = workload.restore();
                let params = workload.params();
                drop(workload);
                let _ = control
                    .sampler
                    .send(ToSampler::Workload(FromWorkload::Done(Box::new(
                        Finished {
                            result,
                            params,
                            not_restored,
                        },
                    ))));
            });
            let mut ended = self.sample_until_stopped(Some(&mut side));
            if side.finished.is_none() {
                // Stopped by the view or a failure: wait for the workload to restore and end.
                side.cancel.store(true, Ordering::Relaxed);
                let _ = side.windows.send(None);
                while side.finished.is_none() {
                    match self.control.recv() {
                        Ok(ToSampler::Workload(FromWorkload::Done(finished))) => {
                            side.finished = Some(*finished);
                        }
                        Ok(ToSampler::Workload(FromWorkload::Checkpoint(_))) => {
                            let _ = side.windows.send(None);
                        }
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
            }
            if worker.join().is_err() && matches!(ended, Ended::Stopped) {
                ended = Ended::Failed(Failure::from(anyhow!("the workload thread panicked")));
            }
            ended
        });
        drop(side.windows);
        let finished = side.finished.unwrap_or_else(|| Finished {
            result: Err(WorkloadError::Tool {
                tool: "iommutop".into(),
                message: "the workload thread ended without a word".into(),
            }),
            params: WorkloadParams::new(),
            not_restored: Vec::new(),
        });
        let Finished {
            result,
            params,
            not_restored,
        } = finished;
        let (results, mut warnings, error) = match result.and_then(WorkloadOutput::reported) {
            Ok(output) => (output.results, output.warnings, None),
            Err(e) => {
                let results = WorkloadResults::Failed {
                    error: e.to_string(),
                };
                (results, vec![format!("the workload failed: {e}")], Some(e))
            }
        };
        warnings.extend(not_restored.iter().map(|l| format!("not restored: {l}")));
        let summary = match &error {
            Some(e) => format!("failed: {e}"),
            None => first_line(&kind.summarize(&results)),
        };
        let _ = self
            .out
            .send(FromSampler::Workload(WorkloadEvent::Finished(summary)));
        let line = self.conclude(
            ended,
            RunDescription::profile(&name, kind, params, results, interval, warnings),
        )?;
        if let Some(e) = error {
            return Err(workload_failure(e));
        }
        if !not_restored.is_empty() {
            return Err(Failure::from(anyhow!(
                "could not restore everything: {}",
                not_restored.join("; ")
            )));
        }
        Ok(line)
    }
}

/// The sampler's side of a running workload.
pub(super) struct WorkloadSide {
    pub(super) cancel: Arc<AtomicBool>,
    pub(super) windows: Sender<Option<ProbeWindow>>,
    pub(super) accumulator: WindowAccumulator,
    /// The workload's numbers for the interval under way, kept with the next sample.
    pub(super) live: Option<Value>,
    pub(super) finished: Option<Finished>,
}

pub(super) fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("done")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn expected_durations_follow_the_workload() {
        let params = |v: Value| -> WorkloadParams { serde_json::from_value(v).expect("params") };
        assert_eq!(
            expected_duration(
                WorkloadKind::Netperf,
                &params(serde_json::json!({"duration_s": 30}))
            ),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            expected_duration(
                WorkloadKind::DmaContention,
                &params(serde_json::json!({"step_s": 5, "threads": [1, 2, 4, 8]}))
            ),
            Some(Duration::from_secs(20))
        );
        assert_eq!(
            expected_duration(WorkloadKind::Tlb, &WorkloadParams::new()),
            None
        );
    }
}
