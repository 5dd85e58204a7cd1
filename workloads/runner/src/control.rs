//! The workload's line to whoever runs it: cancellation, live numbers, progress notes, and probe
//! checkpoints (the recording's per-device numbers at a step boundary).

use crate::window::ProbeWindow;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};

/// What a running workload may ask of the recording that runs it.
pub trait RunControl {
    /// Whether the run must stop now (Ctrl-C, SIGTERM). Workloads look at least every 100 ms,
    /// stop what they launched, and return [`crate::WorkloadError::Cancelled`] or the results
    /// they have.
    fn cancelled(&self) -> bool;

    /// The workload's numbers for the interval under way (same keys as its results, e.g.
    /// `transactions_per_s`); kept with the interval's probe sample in the report.
    fn live(&mut self, numbers: Value);

    /// One line of progress for the person watching.
    fn note(&mut self, line: &str);

    /// Ends a step: the recording takes a probe sample now and returns the probe numbers since the
    /// previous checkpoint (or the start), per device. `None` when no probes are attached
    /// (`iommutop workload`).
    fn checkpoint(&mut self, label: &str) -> Option<ProbeWindow>;
}

/// A control without probes: cancellation from a flag, live numbers and notes to callbacks.
/// Used by `iommutop workload` and by tests.
pub struct BasicControl<'a> {
    cancel: &'a AtomicBool,
    on_live: Box<dyn FnMut(&Value) + 'a>,
    on_note: Box<dyn FnMut(&str) + 'a>,
}

impl<'a> BasicControl<'a> {
    /// Live numbers and notes are dropped.
    pub fn new(cancel: &'a AtomicBool) -> BasicControl<'a> {
        BasicControl {
            cancel,
            on_live: Box::new(|_| {}),
            on_note: Box::new(|_| {}),
        }
    }

    pub fn on_live(mut self, f: impl FnMut(&Value) + 'a) -> BasicControl<'a> {
        self.on_live = Box::new(f);
        self
    }

    pub fn on_note(mut self, f: impl FnMut(&str) + 'a) -> BasicControl<'a> {
        self.on_note = Box::new(f);
        self
    }
}

impl RunControl for BasicControl<'_> {
    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
    fn live(&mut self, numbers: Value) {
        (self.on_live)(&numbers);
    }
    fn note(&mut self, line: &str) {
        (self.on_note)(line);
    }
    fn checkpoint(&mut self, _label: &str) -> Option<ProbeWindow> {
        None
    }
}
