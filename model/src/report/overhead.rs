//! The report's `self_overhead`: what the probes cost, apart from the rest of the report so that
//! what reads the programs' runs (the cross-check) need not depend on the whole report.

use serde::{Deserialize, Serialize};

/// What the probes cost, from the kernel's BPF run-time statistics.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SelfOverhead {
    /// iommutop turned `kernel.bpf_stats_enabled` on for the run (and off again after).
    pub bpf_stats_enabled_by_iommutop: bool,
    pub programs: Vec<ProgramOverhead>,
    /// All programs' run time over all events counted (an event may run two programs).
    pub total_ns_per_event: Option<f64>,
    /// The kernel's dispatch around a probe program, calibrated at attach, that self times take
    /// out once per timed call; absent when not calibrated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_ns: Option<u64>,
    /// What a probed call costs the call it is nested in beyond its programs' runs, calibrated at
    /// attach, that self times take out per nested call; absent when not calibrated (two
    /// `dispatch_ns` are taken out instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_dispatch_ns: Option<u64>,
    /// Whether each timed program had an understudy (a copy that acts where the kernel skipped
    /// the program's run: docs/tracker.md), and why; absent in reports of builds before them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub understudies: Option<UnderstudiesUsed>,
}

/// Whether the timed programs had understudies, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnderstudiesUsed {
    pub on: bool,
    /// Why (`the kernel's preemption is lazy: ...`, `IOMMUTOP_UNDERSTUDIES=off`).
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgramOverhead {
    /// BPF program name (`dma__map_page__fentry`).
    pub name: String,
    pub run_count: u64,
    pub run_time_ns: u64,
    /// Run time per run; `None` if it never ran.
    pub ns_per_event: Option<f64>,
    /// Runs the kernel skipped because the program was already running on that CPU; absent in
    /// reports written before it was reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursion_misses: Option<u64>,
}
