//! DMA mapping under contention: fio reads through the kernel driver from 1, 2, 4 … N jobs at
//! once, one step per job count, and per step the probes' numbers for the device: IOVA
//! allocations (fast and slow path) and DMA map/unmap with their latency. One checkpoint (a
//! probe sample) ends each step, so contention shows as a curve.
//!
//! Reads only: the device defaults to the first NVMe namespace.

use crate::block::Target;
use crate::control::RunControl;
use crate::error::WorkloadError;
use crate::fio::{self, run_job, FioJob};
use crate::params::{DefaultValue, Kind, ParamSpec, ParamValues};
use crate::process::require_tool;
use crate::window::{per_unit, ProbeWindow, WindowOp};
use crate::{Workload, WorkloadOutput};
use iommutop_model::sample::Op;
use iommutop_model::workload::{Headline, WorkUnit};
use serde_json::json;
use std::path::PathBuf;

pub use iommutop_model::results::dma_contention::{DmaContentionResults, Step, StepProbes};

pub const SPECS: &[ParamSpec] = &[
    ParamSpec {
        key: "filename",
        kind: Kind::Str,
        default: DefaultValue::Unset,
        help: "device or file to read (default: the first NVMe namespace)",
    },
    ParamSpec {
        key: "threads",
        kind: Kind::IntList { min: 1, max: 1024 },
        default: DefaultValue::Ints(&[1, 2, 4, 8]),
        help: "job counts, one step each",
    },
    ParamSpec {
        key: "step_s",
        kind: Kind::Float {
            min: 1.0,
            max: 3600.0,
        },
        default: DefaultValue::Float(5.0),
        help: "seconds per step",
    },
    ParamSpec {
        key: "rw",
        kind: Kind::Choice(&["randread", "read"]),
        default: DefaultValue::Str("randread"),
        help: "access pattern (reads only)",
    },
    ParamSpec {
        key: "bs",
        kind: Kind::Size {
            min: 512,
            max: 64 << 20,
        },
        default: DefaultValue::Int(4096),
        help: "bytes per I/O",
    },
    ParamSpec {
        key: "iodepth",
        kind: Kind::Int { min: 1, max: 65536 },
        default: DefaultValue::Int(4),
        help: "I/Os in flight per job",
    },
    ParamSpec {
        key: "ioengine",
        kind: Kind::Choice(&["libaio", "io_uring", "psync", "pvsync2"]),
        default: DefaultValue::Str("libaio"),
        help: "fio I/O engine",
    },
];

pub struct DmaContention {
    params: ParamValues,
    threads: Vec<u64>,
    job: FioJob,
    target: Option<Target>,
}

impl DmaContention {
    pub fn new(params: ParamValues) -> Result<DmaContention, WorkloadError> {
        let mut threads = params.u64s("threads")?;
        threads.sort_unstable();
        threads.dedup();
        Ok(DmaContention {
            threads,
            job: FioJob {
                filename: PathBuf::new(),
                rw: params.str("rw")?.to_string(),
                bs: params.u64("bs")?,
                iodepth: params.u64("iodepth")?,
                numjobs: 1,
                ioengine: params.str("ioengine")?.to_string(),
                direct: true,
                runtime_s: params.f64("step_s")?,
                size: None,
                rwmixread: None,
                readonly: false,
            },
            params,
            target: None,
        })
    }

    fn resolve(&self) -> Result<Target, WorkloadError> {
        fio::resolve_target(
            self.params.opt_str("filename")?,
            false,
            None,
            "dma-contention",
        )
    }
}

/// The probe numbers of one step for the device at `pci`; `None` when the probes saw nothing
/// of it.
pub(crate) fn step_probes(window: &ProbeWindow, pci: &str, ios: u64) -> Option<StepProbes> {
    let device = window.device(pci)?;
    let op = |op: Op| {
        device
            .ops
            .get(&op)
            .cloned()
            .unwrap_or_else(WindowOp::unseen)
    };
    Some(StepProbes {
        dma_map: op(Op::DmaMap),
        dma_unmap: op(Op::DmaUnmap),
        iova_alloc: op(Op::IovaAlloc),
        iova_alloc_slow: op(Op::IovaAllocSlow),
        iova_free: op(Op::IovaFree),
        iommu_map: op(Op::IommuMap),
        iotlb_flush: op(Op::IotlbFlush),
        per_io: per_unit(window, pci, ios),
        window_s: window.duration_s,
    })
}

impl Workload for DmaContention {
    fn name(&self) -> &'static str {
        "dma-contention"
    }

    fn params(&self) -> crate::params::WorkloadParams {
        fio::params_with_target(&self.params, self.target.as_ref())
    }

    fn check(&self) -> Result<(), WorkloadError> {
        require_tool("fio", fio::INSTALL)?;
        self.resolve().map(|_| ())
    }

    fn prepare(&mut self) -> Result<(), WorkloadError> {
        let target = self.resolve()?;
        fio::aim(&mut self.job, &target);
        self.target = Some(target);
        Ok(())
    }

    fn run(&mut self, ctl: &mut dyn RunControl) -> Result<WorkloadOutput, WorkloadError> {
        if self.target.is_none() {
            self.prepare()?;
        }
        let target = self.target.clone().ok_or(WorkloadError::Cancelled)?;
        let mut curve = Vec::new();
        let mut warnings = Vec::new();
        let mut probed = false;
        let mut interrupted = false;
        for &threads in &self.threads {
            if ctl.cancelled() {
                interrupted = true;
                break;
            }
            let job = FioJob {
                numjobs: threads,
                ..self.job.clone()
            };
            ctl.note(&format!(
                "dma-contention: {threads} job(s), {} on {} for {} s",
                job.describe(),
                target.path.display(),
                job.runtime_s.round()
            ));
            let run = match run_job(&job, ctl, &format!("threads={threads}")) {
                Ok(run) => run,
                Err(WorkloadError::Cancelled) => {
                    interrupted = true;
                    break;
                }
                Err(e) => return Err(e),
            };
            let r = &run.result;
            let read = r.read.clone().unwrap_or_default();
            let mut point = Step {
                threads,
                iops: r.iops(),
                ios: r.ios(),
                clat_mean_us: read.clat_mean_ns.map(|v| v / 1000.0),
                clat_p99_us: read.clat_p99_ns.map(|v| v / 1000.0),
                sys_cpu_percent: r.sys_cpu_percent,
                probes: None,
            };
            if let (Some(window), Some(pci)) = (&run.window, target.pci_address) {
                probed = true;
                point.probes = Some(step_probes(window, &pci.to_string(), r.ios()));
            }
            ctl.live(json!({"threads": threads, "iops": r.iops()}));
            curve.push(point);
            if run.interrupted {
                interrupted = true;
                break;
            }
        }
        if !probed {
            warnings.push(if target.pci_address.is_none() {
                format!(
                    "{} is on no PCI device the probes can name: the curve has fio's numbers only",
                    target.path.display()
                )
            } else {
                "no probes attached (run it with `iommutop run dma-contention`, as root): the \
                 curve has fio's numbers only"
                    .into()
            });
        }
        if interrupted {
            warnings.push("interrupted: the curve stops at the last step completed".into());
        }
        let results = DmaContentionResults::of(curve, fio::target_result(&target), interrupted);
        Ok(WorkloadOutput::new(
            results,
            Headline::uncounted(WorkUnit::Io),
            warnings,
        ))
    }

    fn restore(&mut self) -> Vec<String> {
        Vec::new()
    }
}

fn ns(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.0}"))
}

/// The curve as a table.
pub fn summarize(results: &DmaContentionResults) -> String {
    let mut out = format!(
        "dma-contention on {}\n{:>7} {:>10} {:>12} {:>12} {:>12} {:>12} {:>10}\n",
        results.target.filename,
        "threads",
        "IOPS",
        "map ns avg",
        "map ns p99",
        "iova ns avg",
        "unmap ns avg",
        "iova slow"
    );
    for step in &results.curve {
        let probes = step.probes.as_ref().and_then(Option::as_ref);
        out.push_str(&format!(
            "{:>7} {:>10.0} {:>12} {:>12} {:>12} {:>12} {:>10}\n",
            step.threads,
            step.iops,
            ns(probes.and_then(|p| p.dma_map.mean_ns)),
            ns(probes.and_then(|p| p.dma_map.p99_ns).map(|v| v as f64)),
            ns(probes.and_then(|p| p.iova_alloc.mean_ns)),
            ns(probes.and_then(|p| p.dma_unmap.mean_ns)),
            probes.map_or("-".into(), |p| p.iova_alloc_slow.count.to_string()),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::WorkloadKind;
    use crate::window::{WindowDevice, WindowOp};

    #[test]
    fn steps_are_sorted_and_distinct() {
        let params = WorkloadKind::DmaContention
            .params(
                json!({"threads": [4, 1, 2, 2]})
                    .as_object()
                    .cloned()
                    .unwrap(),
            )
            .unwrap();
        let d = DmaContention::new(params).unwrap();
        assert_eq!(d.threads, [1, 2, 4]);
        assert!(!fio::writes(&d.job.rw));
    }

    #[test]
    fn a_step_reports_latency_and_per_io_counts_from_the_window() {
        let mut window = ProbeWindow {
            label: "threads=2".into(),
            duration_s: 2.0,
            ..ProbeWindow::default()
        };
        let mut device = WindowDevice {
            names: vec!["nvme0n1".into()],
            ..WindowDevice::default()
        };
        device.ops.insert(
            Op::IovaAlloc,
            WindowOp {
                count: 400,
                per_s: 200.0,
                mean_ns: Some(350.0),
                p50_ns: Some(300),
                p90_ns: Some(500),
                p99_ns: Some(900),
            },
        );
        window.devices.insert("0000:00:04.0".into(), device);
        let probes = step_probes(&window, "0000:00:04.0", 400);
        let step = json!(probes);
        assert_eq!(step["iova_alloc"]["mean_ns"], json!(350.0));
        assert_eq!(step["iova_alloc"]["p99_ns"], json!(900));
        assert_eq!(step["dma_map"]["count"], json!(0));
        assert_eq!(step["per_io"]["iova_alloc"], json!(1.0));
        assert_eq!(step_probes(&window, "0000:00:09.0", 1), None);
        let step = Step {
            threads: 2,
            iops: 200.0,
            ios: 400,
            clat_mean_us: None,
            clat_p99_us: None,
            sys_cpu_percent: None,
            probes: Some(probes),
        };
        let target = iommutop_model::results::fio::TargetResult {
            filename: "/dev/nvme0n1".into(),
            kind: iommutop_model::results::fio::TargetKind::BlockDevice,
            disk: None,
            pci_address: None,
        };
        let text = summarize(&DmaContentionResults::of(vec![step], target, false));
        assert!(text.contains("      2        200"), "{text}");
        assert!(text.contains("350"), "{text}");
    }
}
