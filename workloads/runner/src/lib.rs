//! Workloads iommutop runs under its probes, and the profiles that name them.
//!
//! Every workload is one type behind [`Workload`]: built from checked parameters
//! ([`params::ParamValues`], declared once per workload as [`params::ParamSpec`]s), it is
//! [checked](Workload::check) before anything is attached or changed, [prepared](Workload::prepare)
//! (network namespaces, huge pages, a netserver), [run](Workload::run) with a [`RunControl`]
//! through which it reports live numbers and asks the recording for probe numbers at step
//! boundaries, and [restored](Workload::restore) — also when dropped, so that an error or Ctrl-C
//! unwinds what it changed. Every change goes through the host layer ([`iommutop_host`]), whose
//! one sweep puts back what a killed run left behind.
//!
//! The workloads launch the real tools (netperf and netserver, fio) and parse their output with
//! pure functions tested on real output (`testdata/`), or run in-process (the TLB pointer chase).
//!
//! [`profile`] loads `profiles/*.toml`: a workload, its parameters, the probe groups, a duration
//! and thresholds, with errors that name the file, line and key.

pub mod block;
pub mod control;
pub mod dma_contention;
pub mod error;
pub mod fio;
pub mod netns;
pub mod netperf;
pub mod params;
pub mod process;
pub mod profile;
pub mod registry;
pub mod results;
pub mod tlb;
pub mod vfio_nvme;
pub mod window;

pub use control::{BasicControl, RunControl};
pub use error::{ErrorClass, WorkloadError};
pub use params::{ParamSpec, ParamValues};
pub use profile::{Profile, ProfileError, ProfileSet};
pub use registry::WorkloadKind;
pub use window::{ProbeWindow, WindowAccumulator};

pub use iommutop_model::results::WorkloadResults;
use iommutop_model::workload::Headline;
pub use results::ReportedOutput;

/// What a run produced: the workload's own numbers, its unit of work, and sentences about
/// their limits.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadOutput {
    /// Numbers at the top level (`transactions_per_s`, `read_iops`) so that `iommutop compare`
    /// and `--fail-if workload.<key>` find them; structure (curves, per-device tables) below.
    pub results: WorkloadResults,
    /// The unit of work and the headline numbers, which compare and diagnose read; the report
    /// keeps it among the results as `work`.
    pub work: Option<Headline>,
    pub warnings: Vec<String>,
}

impl WorkloadOutput {
    /// The output of a run that did `work`.
    pub fn new(
        results: impl Into<WorkloadResults>,
        work: Headline,
        warnings: Vec<String>,
    ) -> WorkloadOutput {
        WorkloadOutput {
            results: results.into(),
            work: Some(work),
            warnings,
        }
    }

    /// The output as the report holds it: the results with the unit of work among them.
    pub fn reported(self) -> Result<ReportedOutput, WorkloadError> {
        let results = results::with_work(self.results, self.work);
        results.to_map().map_err(|e| WorkloadError::Output {
            tool: "iommutop".into(),
            message: format!("encoding the workload's results: {e}"),
        })?;
        Ok(ReportedOutput {
            results,
            warnings: self.warnings,
        })
    }
}

/// One workload: prepare → run → restore.
pub trait Workload: Send {
    /// The workload's name (`netperf`, `fio`, `dma-contention`, `tlb`).
    fn name(&self) -> &'static str;

    /// Every parameter with the value used (defaults included), for the report.
    fn params(&self) -> params::WorkloadParams;

    /// Checks what can be checked without changing anything: tools installed, targets present
    /// and safe to use, privileges. Runs before the probes attach, so a mistake fails fast.
    fn check(&self) -> Result<(), WorkloadError>;

    /// Changes the system as the run needs (namespaces, huge pages, servers). Everything changed
    /// is recorded first and undone by [`Workload::restore`] or on drop.
    fn prepare(&mut self) -> Result<(), WorkloadError>;

    /// Runs to completion, or until `ctl` says the run is cancelled (then returns the results
    /// it has, marked `"interrupted": true`, or [`WorkloadError::Cancelled`]).
    fn run(&mut self, ctl: &mut dyn RunControl) -> Result<WorkloadOutput, WorkloadError>;

    /// Undoes what [`Workload::prepare`] changed; returns what could not be restored. Idempotent;
    /// also done on drop.
    fn restore(&mut self) -> Vec<String>;

    /// The PCI device this workload drives from user space, if it does: IOMMU work its
    /// processes do outside the DMA API (VFIO mappings) is then charged to that device.
    fn userspace_driver_of(&self) -> Option<String> {
        None
    }
}
