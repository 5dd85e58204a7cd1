//! fio: the passthrough-vs-native case (4 KiB random reads and writes at iodepth 32 × 4 jobs,
//! 128 KiB sequential at iodepth 128). Launches the real fio with JSON output and reads IOPS,
//! bandwidth and latency percentiles from it, and puts the probe counts per I/O of the device it
//! ran on beside them.
//!
//! Reads default to the first NVMe namespace. Writes go only to a device or file the user names
//! (`filename`), never to a block device that is mounted, has a mounted partition, is held by
//! another driver or is swap.

pub mod parse;

use crate::block::{self, Target, TargetKind};
use crate::control::RunControl;
use crate::error::WorkloadError;
use crate::params::{DefaultValue, Kind, ParamSpec, ParamValues, WorkloadParams};
use crate::process::{require_tool, Launched};
use crate::window::{per_unit, ProbeWindow};
use crate::{Workload, WorkloadOutput};
use iommutop_model::results::fio;
use iommutop_model::units::format_size;
use iommutop_model::workload::{Headline, WorkUnit};
use parse::{parse_report, Direction, FioResult, ObjectSplitter};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

pub const INSTALL: &str =
    "install fio (Debian/Ubuntu: apt-get install fio; Fedora: dnf install fio)";

pub const RW: &[&str] = &["randread", "randwrite", "read", "write", "randrw", "rw"];

pub const SPECS: &[ParamSpec] = &[
    ParamSpec {
        key: "filename",
        kind: Kind::Str,
        default: DefaultValue::Unset,
        help: "device or file; reads default to the first NVMe namespace, writes need it named",
    },
    ParamSpec {
        key: "rw",
        kind: Kind::Choice(RW),
        default: DefaultValue::Str("randread"),
        help: "access pattern (fio `--rw`)",
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
        default: DefaultValue::Int(1),
        help: "I/Os in flight per job",
    },
    ParamSpec {
        key: "numjobs",
        kind: Kind::Int { min: 1, max: 1024 },
        default: DefaultValue::Int(1),
        help: "jobs (processes) doing I/O at once",
    },
    ParamSpec {
        key: "ioengine",
        kind: Kind::Choice(&["libaio", "io_uring", "psync", "pvsync2", "sync"]),
        default: DefaultValue::Str("libaio"),
        help: "fio I/O engine",
    },
    ParamSpec {
        key: "direct",
        kind: Kind::Bool,
        default: DefaultValue::Bool(true),
        help: "O_DIRECT: bypass the page cache, so every I/O reaches the device",
    },
    ParamSpec {
        key: "duration_s",
        kind: Kind::Float {
            min: 1.0,
            max: 86_400.0,
        },
        default: DefaultValue::Float(10.0),
        help: "run time in seconds",
    },
    ParamSpec {
        key: "size",
        kind: Kind::Size {
            min: 4096,
            max: 1 << 50,
        },
        default: DefaultValue::Unset,
        help: "bytes of the device or file to use (a file that does not exist is created at this size)",
    },
    ParamSpec {
        key: "rwmixread",
        kind: Kind::Int { min: 0, max: 100 },
        default: DefaultValue::Unset,
        help: "randrw/rw: percent of I/Os that read",
    },
];

/// Whether an fio `rw` pattern writes.
pub fn writes(rw: &str) -> bool {
    !matches!(rw, "randread" | "read")
}

/// One fio job as iommutop runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct FioJob {
    pub filename: PathBuf,
    pub rw: String,
    pub bs: u64,
    pub iodepth: u64,
    pub numjobs: u64,
    pub ioengine: String,
    pub direct: bool,
    pub runtime_s: f64,
    pub size: Option<u64>,
    pub rwmixread: Option<u64>,
    /// Pass `--readonly` (reads of a block device: fio then refuses to issue any write). Not for
    /// files, which fio may have to lay out first.
    pub readonly: bool,
}

impl FioJob {
    pub fn argv(&self) -> Vec<String> {
        let mut argv = vec![
            "fio".to_string(),
            "--name=iommutop".into(),
            format!("--filename={}", self.filename.display()),
            format!("--rw={}", self.rw),
            format!("--bs={}", self.bs),
            format!("--iodepth={}", self.iodepth),
            format!("--numjobs={}", self.numjobs),
            format!("--ioengine={}", self.ioengine),
            format!("--direct={}", u8::from(self.direct)),
            "--time_based".into(),
            format!("--runtime={}", self.runtime_s.round().max(1.0)),
            "--group_reporting".into(),
            "--output-format=json".into(),
            "--status-interval=1".into(),
        ];
        if self.readonly && !writes(&self.rw) {
            // fio's own guard: it refuses to issue a write with --readonly.
            argv.push("--readonly".into());
        }
        if let Some(size) = self.size {
            argv.push(format!("--size={size}"));
        }
        if let Some(mix) = self.rwmixread {
            argv.push(format!("--rwmixread={mix}"));
        }
        argv
    }

    /// `randread 4k qd32×4`
    pub fn describe(&self) -> String {
        format!(
            "{} {} qd{}×{}",
            self.rw,
            format_size(self.bs),
            self.iodepth,
            self.numjobs
        )
    }
}

/// How one fio run went.
pub struct FioRun {
    pub result: FioResult,
    /// The probe numbers over the run (`None` without probes).
    pub window: Option<ProbeWindow>,
    pub interrupted: bool,
    /// fio's notes (text it printed outside its JSON).
    pub notes: Vec<String>,
}

/// Runs `job` under `ctl`: a checkpoint before and after (the window covers exactly the run),
/// live IOPS and bandwidth every second from fio's status objects. On cancel fio gets SIGINT
/// and reports what it did.
pub fn run_job(
    job: &FioJob,
    ctl: &mut dyn RunControl,
    label: &str,
) -> Result<FioRun, WorkloadError> {
    let argv = job.argv();
    ctl.checkpoint(&format!("{label} start"));
    let mut launched = Launched::spawn(&argv, true)?;
    let mut splitter = ObjectSplitter::new();
    let mut last: Option<Value> = None;
    let mut previous: Option<FioResult> = None;
    let mut bad_json: Option<serde_json::Error> = None;
    let finished = launched.wait(ctl, libc::SIGINT, Duration::from_secs(10), |line, ctl| {
        for object in splitter.push_line(line) {
            match object {
                Ok(value) => {
                    if let Ok(now) = parse_report(&value) {
                        if let Some(live) = interval_numbers(previous.as_ref(), &now) {
                            ctl.live(live);
                        }
                        previous = Some(now);
                    }
                    last = Some(value);
                }
                Err(e) => bad_json = Some(e),
            }
        }
    })?;
    let window = ctl.checkpoint(label);
    if !finished.status.success() && !finished.cancelled {
        return Err(finished.failure("fio"));
    }
    let Some(last) = last else {
        if finished.cancelled {
            return Err(WorkloadError::Cancelled);
        }
        return Err(WorkloadError::Output {
            tool: "fio".into(),
            message: bad_json
                .map_or_else(|| "no JSON object in its output".into(), |e| e.to_string()),
        });
    };
    let result = parse_report(&last).map_err(|m| WorkloadError::tool("fio", m.to_string()))?;
    Ok(FioRun {
        result,
        window,
        interrupted: finished.cancelled,
        notes: splitter.other,
    })
}

/// IOPS and bandwidth between two of fio's cumulative status objects.
pub fn interval_numbers(previous: Option<&FioResult>, now: &FioResult) -> Option<Value> {
    let (ios, bytes, ms) = match previous {
        Some(p) => (
            now.ios().checked_sub(p.ios())?,
            now.bytes().checked_sub(p.bytes())?,
            now.timestamp_ms?.checked_sub(p.timestamp_ms?)?,
        ),
        None => (now.ios(), now.bytes(), (now.runtime_s * 1000.0) as u64),
    };
    if ms == 0 {
        return None;
    }
    let s = ms as f64 / 1000.0;
    Some(json!({
        "iops": ios as f64 / s,
        "bw_bytes_per_s": bytes as f64 / s,
    }))
}

fn us(ns: Option<f64>) -> Option<f64> {
    ns.map(|v| (v / 10.0).round() / 100.0)
}

pub use iommutop_model::results::fio::{
    DirectionNumbers, DirectionResults, FioDetails, FioResults, TargetResult,
};

/// One direction's numbers among fio's results, latencies in µs to 0.01.
fn direction_results(direction: fio::Direction, d: &Direction) -> DirectionResults {
    let mut numbers = DirectionNumbers::new(d.iops, d.bw_bytes_per_s, d.ios, d.bytes);
    numbers.lat_mean_us = us(d.lat_mean_ns);
    numbers.clat_mean_us = us(d.clat_mean_ns);
    numbers.clat_p50_us = us(d.clat_p50_ns);
    numbers.clat_p90_us = us(d.clat_p90_ns);
    numbers.clat_p99_us = us(d.clat_p99_ns);
    numbers.clat_p99_9_us = us(d.clat_p99_9_ns);
    DirectionResults { direction, numbers }
}

/// The file or device fio was pointed at, as the results show it.
pub fn target_result(t: &Target) -> TargetResult {
    TargetResult {
        filename: t.path.display().to_string(),
        kind: match t.kind {
            TargetKind::BlockDevice => fio::TargetKind::BlockDevice,
            TargetKind::File { .. } => fio::TargetKind::File,
        },
        disk: t.disk.clone(),
        pci_address: t.pci_address,
    }
}

/// fio's own numbers; what was run is filled in by the caller.
pub fn results_of(r: &FioResult) -> FioResults {
    FioResults {
        iops: r.iops(),
        bw_bytes_per_s: r.bw_bytes_per_s(),
        ios: r.ios(),
        read: r
            .read
            .as_ref()
            .map(|d| direction_results(fio::Direction::Read, d)),
        write: r
            .write
            .as_ref()
            .map(|d| direction_results(fio::Direction::Write, d)),
        run: FioDetails {
            usr_cpu_percent: r.usr_cpu_percent,
            sys_cpu_percent: r.sys_cpu_percent,
            runtime_s: r.runtime_s,
            fio_version: r.fio_version.clone(),
            disk_util: r.disk_util.clone(),
            ..FioDetails::default()
        },
    }
}

/// What a fio run did: reads when it read (its reads are what a read job is about, and a mixed
/// job is compared by its reads), else I/Os.
pub fn headline(r: &FioResult) -> Headline {
    match &r.read {
        Some(read) => Headline::counted(WorkUnit::Read, read.ios as f64, "read_iops", read.iops),
        None => Headline::counted(WorkUnit::Io, r.ios() as f64, "iops", r.iops()),
    }
}

/// Resolves the target of a job: `filename` if given; else, for reads only, the first NVMe
/// namespace. Writes need `filename` and a device nobody uses. `what` names the job in errors
/// (`randwrite`).
pub fn resolve_target(
    filename: Option<&str>,
    writing: bool,
    size: Option<u64>,
    what: &str,
) -> Result<Target, WorkloadError> {
    let path = match filename {
        Some(f) => PathBuf::from(f),
        None if writing => {
            return Err(WorkloadError::param(
                "filename",
                format!(
                    "{what} overwrites data: name the device or file it may write \
                     (--set filename=/dev/nvme0n1, or a file)"
                ),
            ))
        }
        None => block::first_nvme_namespace().ok_or_else(|| {
            WorkloadError::Environment(
                "no NVMe namespace here to read from: name a device or file with filename=PATH"
                    .into(),
            )
        })?,
    };
    let target = block::resolve(&path)?;
    if target.kind == (TargetKind::File { exists: false }) && size.is_none() {
        return Err(WorkloadError::param(
            "size",
            format!(
                "{} does not exist: give size=BYTES to have fio create it",
                path.display()
            ),
        ));
    }
    if writing {
        block::check_device_free_for_writing(&target, "filename")?;
    }
    Ok(target)
}

pub struct Fio {
    params: ParamValues,
    job: FioJob,
    target: Option<Target>,
}

impl Fio {
    pub fn new(params: ParamValues) -> Result<Fio, WorkloadError> {
        let job = FioJob {
            filename: PathBuf::new(),
            rw: params.str("rw")?.to_string(),
            bs: params.u64("bs")?,
            iodepth: params.u64("iodepth")?,
            numjobs: params.u64("numjobs")?,
            ioengine: params.str("ioengine")?.to_string(),
            direct: params.bool("direct")?,
            runtime_s: params.f64("duration_s")?,
            size: params.has("size").then(|| params.u64("size")).transpose()?,
            rwmixread: params
                .has("rwmixread")
                .then(|| params.u64("rwmixread"))
                .transpose()?,
            readonly: false,
        };
        if job.direct && !job.bs.is_multiple_of(512) {
            return Err(WorkloadError::param(
                "bs",
                "direct I/O needs a multiple of 512 bytes",
            ));
        }
        Ok(Fio {
            params,
            job,
            target: None,
        })
    }

    fn resolve(&self) -> Result<Target, WorkloadError> {
        resolve_target(
            self.params.opt_str("filename")?,
            writes(&self.job.rw),
            self.job.size,
            &format!("fio --rw={}", self.job.rw),
        )
    }
}

/// The parameters as given, with the device or file fio was pointed at once it is resolved.
pub fn params_with_target(params: &ParamValues, target: Option<&Target>) -> WorkloadParams {
    let mut map = params.to_params();
    if let Some(t) = target {
        map.insert("filename".into(), t.path.display().to_string().into());
    }
    map
}

/// Points `job` at `target`: read-only when it is a block device.
pub fn aim(job: &mut FioJob, target: &Target) {
    job.filename = target.path.clone();
    job.readonly = target.kind == TargetKind::BlockDevice;
}

impl Workload for Fio {
    fn name(&self) -> &'static str {
        "fio"
    }

    fn params(&self) -> WorkloadParams {
        params_with_target(&self.params, self.target.as_ref())
    }

    fn check(&self) -> Result<(), WorkloadError> {
        require_tool("fio", INSTALL)?;
        self.resolve().map(|_| ())
    }

    fn prepare(&mut self) -> Result<(), WorkloadError> {
        // Checked again: the device may have been mounted since.
        let target = self.resolve()?;
        aim(&mut self.job, &target);
        self.target = Some(target);
        Ok(())
    }

    fn run(&mut self, ctl: &mut dyn RunControl) -> Result<WorkloadOutput, WorkloadError> {
        if self.target.is_none() {
            self.prepare()?;
        }
        let target = self.target.clone().ok_or(WorkloadError::Cancelled)?;
        ctl.note(&format!(
            "fio {} on {} for {} s",
            self.job.describe(),
            target.path.display(),
            self.job.runtime_s.round()
        ));
        let run = run_job(&self.job, ctl, "fio")?;
        let mut results = results_of(&run.result);
        results.run.target = Some(target_result(&target));
        let mut warnings: Vec<String> = run.notes.iter().map(|n| format!("fio: {n}")).collect();
        if run.interrupted {
            results.run.interrupted = true;
            warnings.push("fio was interrupted: its numbers cover the run up to then".into());
        }
        if let Some(window) = &run.window {
            match target.pci_address {
                Some(pci) => match per_unit(window, &pci.to_string(), run.result.ios()) {
                    Some(row) => {
                        results.run.dma_maps_per_io = Some(row.dma_map);
                        results.run.iommu_maps_per_io = Some(row.iommu_map);
                        results.run.per_io = Some(BTreeMap::from([(pci, row)]));
                    }
                    None => warnings.push(format!(
                        "the probes saw no DMA work on {pci} during the run: no per-I/O counts"
                    )),
                },
                None => warnings.push(format!(
                    "{} is on no PCI device the probes can name: no per-I/O counts",
                    target.path.display()
                )),
            }
            results.run.probe_window_s = Some(window.duration_s);
        }
        results.run.command = self.job.argv();
        Ok(WorkloadOutput::new(
            iommutop_model::results::WorkloadResults::from(results),
            headline(&run.result),
            warnings,
        ))
    }

    fn restore(&mut self) -> Vec<String> {
        Vec::new()
    }
}

/// The headline for a person.
pub fn summarize(results: &FioResults) -> String {
    let target = results
        .run
        .target
        .as_ref()
        .map_or("?", |t| t.filename.as_str());
    let mut out = format!(
        "fio on {target}: {:.0} IOPS, {:.1} MiB/s, {} I/Os in {:.1} s\n",
        results.iops,
        results.bw_bytes_per_s / f64::from(1 << 20),
        results.ios,
        results.run.runtime_s,
    );
    for direction in [&results.read, &results.write].into_iter().flatten() {
        let d = &direction.numbers;
        let p = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
        out.push_str(&format!(
            "  {}: {:.0} IOPS, completion latency µs: mean {}  p50 {}  p90 {}  p99 {}  p99.9 {}\n",
            direction.direction.name(),
            d.iops,
            p(d.clat_mean_us),
            p(d.clat_p50_us),
            p(d.clat_p90_us),
            p(d.clat_p99_us),
            p(d.clat_p99_9_us),
        ));
    }
    if let (Some(u), Some(s)) = (results.run.usr_cpu_percent, results.run.sys_cpu_percent) {
        out.push_str(&format!("  CPU: usr {u:.1} %, sys {s:.1} %\n"));
    }
    for (pci, row) in results.run.per_io.iter().flatten() {
        out.push_str(&format!(
            "  {pci}: {:.2} DMA maps, {:.2} IOMMU maps, {:.2} IOVA allocations, {:.3} IOTLB flushes per I/O\n",
            row.dma_map, row.iommu_map, row.iova_alloc, row.iotlb_flush,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::WorkloadKind;

    fn fio(given: Value) -> Fio {
        Fio::new(
            WorkloadKind::Fio
                .params(given.as_object().cloned().unwrap())
                .unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn reads_are_readonly_and_writes_are_not() {
        let mut f = fio(json!({"rw": "randread", "iodepth": 32, "numjobs": 4}));
        f.job.filename = "/dev/nvme0n1".into();
        f.job.readonly = true;
        let argv = f.job.argv().join(" ");
        assert!(
            argv.contains(
                "--rw=randread --bs=4096 --iodepth=32 --numjobs=4 --ioengine=libaio --direct=1"
            ),
            "{argv}"
        );
        assert!(argv.contains("--readonly"), "{argv}");
        assert!(
            argv.contains("--output-format=json --status-interval=1"),
            "{argv}"
        );
        let w = fio(json!({"rw": "write", "bs": "128k"}));
        assert!(!w.job.argv().contains(&"--readonly".to_string()));
        assert_eq!(w.job.describe(), "write 128k qd1×1");
    }

    #[test]
    fn writes_need_a_named_target() {
        let err = resolve_target(None, true, None, "fio --rw=randwrite")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "parameter `filename`: fio --rw=randwrite overwrites data: name the device"
            ),
            "{err}"
        );
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("f");
        let err = resolve_target(missing.to_str(), true, None, "fio")
            .unwrap_err()
            .to_string();
        assert!(err.contains("give size=BYTES"), "{err}");
        assert!(resolve_target(missing.to_str(), true, Some(1 << 20), "fio").is_ok());
    }

    #[test]
    fn interval_numbers_come_from_consecutive_status_objects() {
        let (objects, _) =
            parse::split_objects(include_str!("../../testdata/fio-randread-4k-qd32x4.json"));
        let a = parse_report(&objects[0]).unwrap();
        let b = parse_report(&objects[1]).unwrap();
        let live = interval_numbers(Some(&a), &b).unwrap();
        let expect = (b.ios() - a.ios()) as f64
            / ((b.timestamp_ms.unwrap() - a.timestamp_ms.unwrap()) as f64 / 1000.0);
        assert!((live["iops"].as_f64().unwrap() - expect).abs() < 1e-6);
        assert!(
            interval_numbers(Some(&b), &a).is_none(),
            "counters going back give nothing"
        );
    }

    #[test]
    fn a_read_job_counts_reads_and_a_write_job_ios() {
        let (objects, _) =
            parse::split_objects(include_str!("../../testdata/fio-randread-4k-qd32x4.json"));
        let mut r = parse_report(objects.last().unwrap()).unwrap();
        let read = headline(&r);
        assert_eq!(read.unit, WorkUnit::Read);
        assert_eq!(read.count, Some(110463.0));
        assert_eq!(read.rate_metric.as_deref(), Some("read_iops"));
        r.write = r.read.take();
        let written = headline(&r);
        assert_eq!(written.unit, WorkUnit::Io);
        assert_eq!(written.rate_metric.as_deref(), Some("iops"));
    }

    #[test]
    fn results_are_flat_and_in_microseconds() {
        let (objects, _) =
            parse::split_objects(include_str!("../../testdata/fio-randread-4k-qd32x4.json"));
        let r = parse_report(objects.last().unwrap()).unwrap();
        let mut results = results_of(&r);
        let m = iommutop_model::results::WorkloadResults::from(results.clone())
            .to_map()
            .expect("encodes");
        assert_eq!(m["read_ios"], json!(110463));
        assert_eq!(m["read_clat_p99_us"], json!(6520.83));
        assert!(m.get("write_iops").is_none());
        results.run.target = Some(TargetResult {
            filename: "/tmp/f".into(),
            kind: fio::TargetKind::File,
            disk: None,
            pci_address: None,
        });
        let text = summarize(&results);
        assert!(text.starts_with("fio on /tmp/f: 54929 IOPS"), "{text}");
        assert!(text.contains("p99 6520.8"), "{text}");
    }
}
