//! The vfio-nvme workload: the `iommutop-vfio-nvme` driver behind [`Workload`]. Its parameters
//! are the driver's command-line options without the dashes (`qd = 32` is `--qd 32`);
//! [`options`] turns checked parameters back into them. The driver does its I/O in a worker
//! process and binds, reserves and restores around it; this side relays cancellation and turns
//! its result into the report's workload numbers.

use crate::control::RunControl;
use crate::error::WorkloadError;
use crate::params::{DefaultValue, Kind, ParamSpec, Params};
use crate::{Workload, WorkloadOutput};
use iommutop_model::workload::{Headline, WorkUnit};
use iommutop_vfio_nvme as driver;
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub const SPECS: &[ParamSpec] = &[
    ParamSpec {
        key: "mode",
        kind: Kind::Choice(&["run", "iotlb-sweep"]),
        default: DefaultValue::Str("run"),
        help: "`run`: I/O at a queue depth; `iotlb-sweep`: QD1 reads over 1, 2, 4 … pages per page size",
    },
    ParamSpec {
        key: "device",
        kind: Kind::Str,
        default: DefaultValue::Unset,
        help: "PCI address, nvme0 or /dev/nvme0n1 (default: the only NVMe controller; writes need it named)",
    },
    ParamSpec {
        key: "bind",
        kind: Kind::Bool,
        default: DefaultValue::Unset,
        help: "bind the controller to vfio-pci for the run and back to its driver after",
    },
    ParamSpec {
        key: "reserve_hugepages",
        kind: Kind::Bool,
        default: DefaultValue::Unset,
        help: "raise nr_hugepages as the run needs and put it back after",
    },
    ParamSpec {
        key: "backend",
        kind: Kind::Choice(&["auto", "legacy", "iommufd"]),
        default: DefaultValue::Unset,
        help: "VFIO interface: the legacy container/group or iommufd (default auto)",
    },
    ParamSpec {
        key: "nsid",
        kind: Kind::Int {
            min: 1,
            max: 0xffff_fffe,
        },
        default: DefaultValue::Unset,
        help: "namespace (default 1)",
    },
    ParamSpec {
        key: "pattern",
        kind: Kind::Choice(&["randread", "randwrite", "read", "write"]),
        default: DefaultValue::Unset,
        help: "access pattern (default randread)",
    },
    ParamSpec {
        key: "bs",
        kind: Kind::Size {
            min: 512,
            max: 2 << 20,
        },
        default: DefaultValue::Unset,
        help: "bytes per I/O (default 4k)",
    },
    ParamSpec {
        key: "qd",
        kind: Kind::Int { min: 1, max: 1024 },
        default: DefaultValue::Unset,
        help: "commands in flight per thread (default 1)",
    },
    ParamSpec {
        key: "threads",
        kind: Kind::Int { min: 1, max: 64 },
        default: DefaultValue::Unset,
        help: "threads, one I/O queue pair each (default 1)",
    },
    ParamSpec {
        key: "duration_s",
        kind: Kind::Float {
            min: 0.001,
            max: 86_400.0,
        },
        default: DefaultValue::Unset,
        help: "how long a run does I/O (default 10)",
    },
    ParamSpec {
        key: "ios",
        kind: Kind::Int {
            min: 1,
            max: i64::MAX,
        },
        default: DefaultValue::Unset,
        help: "I/Os in total instead of a duration; the sweep: I/Os per step",
    },
    ParamSpec {
        key: "pages",
        kind: Kind::Str,
        default: DefaultValue::Unset,
        help: "distinct buffer pages per thread; the sweep: the largest count, or per size (`4k=4096,2m=128`)",
    },
    ParamSpec {
        key: "page_size",
        kind: Kind::ChoiceList(&["4k", "2m", "1g"]),
        default: DefaultValue::Unset,
        help: "page size of the DMA buffers; the sweep takes a list",
    },
    ParamSpec {
        key: "allow_write",
        kind: Kind::Bool,
        default: DefaultValue::Unset,
        help: "writes overwrite the device: needed for randwrite and write, with `device`",
    },
    ParamSpec {
        key: "verify",
        kind: Kind::Bool,
        default: DefaultValue::Unset,
        help: "writes a pattern derived from the LBA and seed; reads check it",
    },
    ParamSpec {
        key: "ccdf_csv",
        kind: Kind::Str,
        default: DefaultValue::Unset,
        help: "also write the latency CCDF here as CSV (thread,latency_ns,ccdf)",
    },
    ParamSpec {
        key: "svg",
        kind: Kind::Str,
        default: DefaultValue::Unset,
        help: "the sweep: also write its latency-per-pages plot here as SVG",
    },
    ParamSpec {
        key: "seed",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        default: DefaultValue::Unset,
        help: "seeds the random LBAs and the verify pattern (default 1)",
    },
];

/// Whether the parameters ask for the IOTLB sweep.
pub fn is_sweep(params: &Params) -> bool {
    params.str("mode").is_ok_and(|m| m == "iotlb-sweep")
}

/// Keys that are not driver options: the mode ([`is_sweep`]) and where extra outputs go.
const OUTPUT_KEYS: &[&str] = &["mode", "ccdf_csv", "svg"];

/// The checked parameters as `iommutop-vfio-nvme` options (`("--qd", Some("32"))`, flags with
/// `None`), for its `Params::set` / `SweepParams::set`.
pub fn options(params: &Params) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for (key, value) in params.to_map() {
        if OUTPUT_KEYS.contains(&key.as_str()) {
            continue;
        }
        let option = match key.as_str() {
            "duration_s" => "--duration".to_string(),
            _ => format!("--{}", key.replace('_', "-")),
        };
        match value {
            Value::Bool(true) => out.push((option, None)),
            Value::Bool(false) => {}
            Value::Array(items) => {
                let joined: Vec<String> = items
                    .iter()
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                    .collect();
                out.push((option, Some(joined.join(","))));
            }
            Value::String(s) => out.push((option, Some(s))),
            other => out.push((option, Some(other.to_string()))),
        }
    }
    out
}

/// What the driver is asked to do.
enum Job {
    Run(driver::Params),
    Sweep(driver::SweepParams),
}

/// The vfio-nvme workload, parameters checked by the driver's own rules.
pub struct VfioNvme {
    params: Params,
    job: Job,
    ccdf_csv: Option<PathBuf>,
    svg: Option<PathBuf>,
}

impl VfioNvme {
    pub fn new(params: Params) -> Result<VfioNvme, WorkloadError> {
        let set = |result: Result<(), driver::ParamError>| {
            result.map_err(|e| WorkloadError::param(param_key(&e), e.to_string()))
        };
        let job = if is_sweep(&params) {
            let mut sweep = driver::SweepParams::default();
            for (option, value) in options(&params) {
                set(sweep.set(&option, value.as_deref()))?;
            }
            set(sweep.validate())?;
            Job::Sweep(sweep)
        } else {
            let mut run = driver::Params::default();
            for (option, value) in options(&params) {
                set(run.set(&option, value.as_deref()))?;
            }
            set(run.validate())?;
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

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// A run's numbers: the driver's result whole, with the set-up mapping cost on top so that
/// `compare` and `--fail-if workload.setup_map_ns` find it.
fn run_output(result: &driver::RunResult) -> Map<String, Value> {
    let mut results = object(json!(result));
    results.insert("setup_maps".into(), json!(result.setup.maps.len()));
    results.insert("setup_map_ns".into(), json!(result.setup.map_total_ns));
    if let Some(latency) = serde_json::to_value(result.latency)
        .ok()
        .filter(Value::is_object)
    {
        results.insert("latency_ns".into(), latency);
    }
    results
}

/// A sweep's numbers: the driver's result, and each page size's IOTLB-entries estimate on top.
fn sweep_output(result: &driver::SweepResult) -> Map<String, Value> {
    let mut results = object(json!(result));
    for series in &result.series {
        if let Some(knee) = &series.knee {
            results.insert(
                format!("iotlb_entries_{}", series.page_size.name()),
                json!(knee.entries_estimate),
            );
        }
    }
    results
}

impl Workload for VfioNvme {
    fn name(&self) -> &'static str {
        "vfio-nvme"
    }

    fn params(&self) -> Map<String, Value> {
        self.params.to_map()
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
        let (results, work) = match &self.job {
            Job::Run(params) => {
                let result =
                    Self::drive(ctl, |cancel| driver::run(params, cancel)).map_err(classify)?;
                write_file(&self.ccdf_csv, &result.ccdf_csv())?;
                let work = Headline::counted(WorkUnit::Io, result.ios as f64, "iops", result.iops);
                (run_output(&result), work)
            }
            Job::Sweep(params) => {
                let result = Self::drive(ctl, |cancel| driver::iotlb_sweep(params, cancel))
                    .map_err(classify)?;
                write_file(&self.svg, &result.svg())?;
                (sweep_output(&result), Headline::uncounted(WorkUnit::Io))
            }
        };
        Ok(WorkloadOutput::new(results, work, Vec::new()))
    }

    fn restore(&mut self) -> Vec<String> {
        Vec::new()
    }
}

/// The lines a person reads: the driver's own summary or sweep table.
pub fn summarize(results: &Map<String, Value>) -> String {
    let value = Value::Object(results.clone());
    if let Ok(run) = serde_json::from_value::<driver::RunResult>(value.clone()) {
        return run.summary_text();
    }
    match serde_json::from_value::<driver::SweepResult>(value) {
        Ok(sweep) => {
            let mut text = sweep.table();
            for note in sweep.host.notes() {
                text.push_str(&format!("host: {note}\n"));
            }
            text
        }
        Err(_) => serde_json::to_string_pretty(results).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::WorkloadKind;
    use serde_json::json;

    #[test]
    fn parameters_become_the_crates_options() {
        let given = json!({"qd": 32, "threads": 4, "bs": "4k", "bind": true, "verify": false,
                           "duration_s": 10, "page_size": ["4k", "2m"]});
        let params = WorkloadKind::VfioNvme
            .params(given.as_object().cloned().unwrap())
            .unwrap();
        assert!(!is_sweep(&params));
        let mut opts = options(&params);
        opts.sort();
        let expect: Vec<(String, Option<String>)> = vec![
            ("--bind".into(), None),
            ("--bs".into(), Some("4096".into())),
            ("--duration".into(), Some("10.0".into())),
            ("--page-size".into(), Some("4k,2m".into())),
            ("--qd".into(), Some("32".into())),
            ("--threads".into(), Some("4".into())),
        ];
        assert_eq!(opts, expect);
    }
}
