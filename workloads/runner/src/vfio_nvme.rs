//! The vfio-nvme workload: the `iommutop-vfio-nvme` driver behind [`Workload`]. Its parameters
//! are the driver's own declaration ([`SPECS`], in `iommutop_vfio_nvme::options`), read back
//! typed by the driver. The driver does its I/O in a worker process and binds, reserves and
//! restores around it; this side relays cancellation and turns its result into the report's
//! workload numbers.

use crate::control::RunControl;
use crate::error::WorkloadError;
use crate::params::ParamValues;
use crate::{Workload, WorkloadOutput};
use iommutop_model::workload::{Headline, WorkUnit};
use iommutop_vfio_nvme as driver;
use iommutop_vfio_nvme::options::{RunFromValues as _, SweepFromValues as _};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

mod summary;

pub use driver::options::{is_sweep, SPECS};
pub use iommutop_model::results::vfio_nvme::VfioNvmeResults;

/// What the driver is asked to do.
enum Job {
    Run(driver::Params),
    Sweep(driver::SweepParams),
}

/// The vfio-nvme workload, parameters checked by the driver's own rules.
pub struct VfioNvme {
    params: ParamValues,
    job: Job,
    ccdf_csv: Option<PathBuf>,
    svg: Option<PathBuf>,
}

impl VfioNvme {
    pub fn new(params: ParamValues) -> Result<VfioNvme, WorkloadError> {
        let bad = |e: driver::ParamError| WorkloadError::param(param_key(&e), e.to_string());
        let job = if is_sweep(&params) {
            let sweep = driver::SweepParams::from_values(&params).map_err(bad)?;
            sweep.validate().map_err(bad)?;
            Job::Sweep(sweep)
        } else {
            let run = driver::Params::from_values(&params).map_err(bad)?;
            run.validate().map_err(bad)?;
            Job::Run(run)
        };
        let path = |key| params.opt_str(key).map(|p| p.map(PathBuf::from));
        Ok(VfioNvme {
            ccdf_csv: path("ccdf_csv")?,
            svg: path("svg")?,
            job,
            params,
        })
    }

    /// The controller's PCI address, as the driver will resolve it.
    fn device(&self) -> Result<String, WorkloadError> {
        let target = match &self.job {
            Job::Run(params) => &params.target,
            Job::Sweep(params) => &params.target,
        };
        driver::host::NvmeHost::system()
            .resolve_device(target.device.as_deref())
            .map(|address| address.to_string())
            .map_err(classify)
    }

    /// Runs the driver on a thread while this one relays Ctrl-C from `ctl` to it.
    fn drive<T: Send>(ctl: &mut dyn RunControl, work: impl FnOnce(&AtomicBool) -> T + Send) -> T {
        let cancel = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let worker = scope.spawn(|| work(&cancel));
            while !worker.is_finished() {
                if ctl.cancelled() {
                    cancel.store(true, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            match worker.join() {
                Ok(result) => result,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }
}

/// The profile key an option error is about (`--page-size` → `page_size`).
fn param_key(error: &driver::ParamError) -> String {
    match error.option.trim_start_matches('-') {
        "duration" => "duration_s".to_string(),
        other => other.replace('-', "_"),
    }
}

/// Whose move a driver error is: the user's, the system's, or the run's. A failure the driver
/// already restored after keeps its class and says what was put back.
fn classify(error: driver::Error) -> WorkloadError {
    use driver::Error as E;
    let message = error.to_string();
    let cause = match &error {
        E::Restored { source, .. } => source.as_ref(),
        other => other,
    };
    match cause {
        E::Param(e) => WorkloadError::param(param_key(e), message),
        E::Device { .. } => WorkloadError::param("device", message),
        E::HugePages(_) => WorkloadError::Environment(message),
        E::Refused { .. } => WorkloadError::Refused(message),
        _ => WorkloadError::Tool {
            tool: "vfio-nvme".into(),
            message,
        },
    }
}

fn write_file(path: &Option<PathBuf>, text: &str) -> Result<(), WorkloadError> {
    match path {
        Some(path) => std::fs::write(path, text).map_err(|source| WorkloadError::Io {
            context: format!("writing {}", path.display()),
            source,
        }),
        None => Ok(()),
    }
}

impl Workload for VfioNvme {
    fn name(&self) -> &'static str {
        "vfio-nvme"
    }

    fn params(&self) -> crate::params::WorkloadParams {
        self.params.to_params()
    }

    fn check(&self) -> Result<(), WorkloadError> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(WorkloadError::Environment(
                "vfio-nvme binds a controller to vfio-pci and maps DMA memory: run as root (sudo)"
                    .into(),
            ));
        }
        self.device().map(drop)
    }

    fn userspace_driver_of(&self) -> Option<String> {
        self.device().ok()
    }

    fn prepare(&mut self) -> Result<(), WorkloadError> {
        // The driver binds, reserves huge pages and restores around its worker itself.
        Ok(())
    }

    fn run(&mut self, ctl: &mut dyn RunControl) -> Result<WorkloadOutput, WorkloadError> {
        // What the driver changed on the host and put back is in the results (`host`) and in
        // the summary: a note, not a warning.
        match &self.job {
            Job::Run(params) => {
                let result =
                    Self::drive(ctl, |cancel| driver::run(params, cancel)).map_err(classify)?;
                write_file(&self.ccdf_csv, &result.ccdf_csv())?;
                let work = Headline::counted(WorkUnit::Io, result.ios as f64, "iops", result.iops);
                let results = VfioNvmeResults::Run(Box::new(result));
                Ok(WorkloadOutput::new(results, work, Vec::new()))
            }
            Job::Sweep(params) => {
                let result = Self::drive(ctl, |cancel| driver::iotlb_sweep(params, cancel))
                    .map_err(classify)?;
                write_file(
                    &self.svg,
                    &iommutop_model::html::sweep_chart(&result.series),
                )?;
                let work = Headline::uncounted(WorkUnit::Io);
                let results = VfioNvmeResults::Sweep(Box::new(result));
                Ok(WorkloadOutput::new(results, work, Vec::new()))
            }
        }
    }

    fn restore(&mut self) -> Vec<String> {
        Vec::new()
    }
}

/// The lines a person reads: a run's summary or a sweep's table.
pub fn summarize(results: &VfioNvmeResults) -> String {
    match results {
        VfioNvmeResults::Run(run) => summary::run_text(run),
        VfioNvmeResults::Sweep(sweep) => summary::sweep_text(sweep),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::WorkloadKind;
    use serde_json::json;

    #[test]
    fn the_drivers_own_declaration_checks_and_builds_the_job() {
        let given = json!({"qd": 32, "threads": 4, "bs": "4k", "bind": true, "verify": false,
                           "duration_s": 10, "page_size": ["2m"]});
        let params = WorkloadKind::VfioNvme
            .params(given.as_object().cloned().unwrap())
            .unwrap();
        assert!(!is_sweep(&params));
        let workload = VfioNvme::new(params).unwrap();
        let Job::Run(run) = &workload.job else {
            panic!("a run, not a sweep");
        };
        assert_eq!(
            (run.queue_depth, run.threads, run.block_size),
            (32, 4, 4096)
        );
        assert!(run.target.bind && !run.verify);
        assert_eq!(run.page_size, driver::PageSize::Size2M);
        let too_many = json!({"page_size": ["4k", "2m"]});
        let params = WorkloadKind::VfioNvme
            .params(too_many.as_object().cloned().unwrap())
            .unwrap();
        let refused = VfioNvme::new(params).err().map(|e| e.to_string());
        assert!(
            refused
                .as_deref()
                .is_some_and(|e| e.starts_with("parameter `page_size`")),
            "{refused:?}"
        );
    }
}
