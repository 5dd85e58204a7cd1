//! What a vfio-nvme run did, as `run.workload.results` holds it: an I/O run's numbers (totals,
//! then each thread, with latency percentiles, the CCDF and the histogram's buckets) or an IOTLB
//! sweep's curves, each with the device, the set-up cost and what was changed on the host.
//!
//! The driver makes these types itself (its worker sends them back whole), and runs from these
//! parameters ([`params::RunParams`], [`params::SweepParams`]), which the results repeat as given.

pub mod host;
pub mod params;

use host::HostChanges;
use iommutop_abi::pci::PciAddress;
use iommutop_abi::workload::Headline;
use params::{PageSize, RunParams, SweepParams};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use std::fmt::Write as _;

/// A vfio-nvme run's results: an I/O run's or a sweep's (boxed: both are large). A sweep's
/// are the ones with `series`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum VfioNvmeResults {
    Run(Box<VfioNvmeRun>),
    Sweep(Box<VfioNvmeSweep>),
}

impl<'de> Deserialize<'de> for VfioNvmeResults {
    /// Read by what they hold, not by trying each (serde's untagged enums cannot read the
    /// histogram's `u128` sum).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<VfioNvmeResults, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let results = if value.get("series").is_some() {
            VfioNvmeSweep::deserialize(value).map(|sweep| VfioNvmeResults::Sweep(Box::new(sweep)))
        } else {
            VfioNvmeRun::deserialize(value).map(|run| VfioNvmeResults::Run(Box::new(run)))
        };
        results.map_err(D::Error::custom)
    }
}

impl VfioNvmeResults {
    pub fn interrupted(&self) -> bool {
        match self {
            VfioNvmeResults::Run(run) => run.interrupted,
            VfioNvmeResults::Sweep(sweep) => sweep.interrupted,
        }
    }

    pub fn work(&self) -> Option<&Headline> {
        match self {
            VfioNvmeResults::Run(run) => run.work.as_ref(),
            VfioNvmeResults::Sweep(sweep) => sweep.work.as_ref(),
        }
    }

    /// The controller the run or the sweep drove.
    pub fn device(&self) -> &DeviceInfo {
        match self {
            VfioNvmeResults::Run(run) => &run.device,
            VfioNvmeResults::Sweep(sweep) => &sweep.device,
        }
    }

    pub fn set_work(&mut self, work: Option<Headline>) {
        match self {
            VfioNvmeResults::Run(run) => run.work = work,
            VfioNvmeResults::Sweep(sweep) => sweep.work = work,
        }
    }
}

/// What the IOMMU side of the VFIO set-up turned out to be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IommuInfo {
    /// `"legacy-type1v2"`, `"legacy-type1"` or `"iommufd"`.
    pub backend: String,
    /// Valid IOVA ranges (inclusive ends), as the kernel reported them.
    pub iova_ranges: Vec<IovaRange>,
    /// True if the kernel reported no ranges and the 32-bit fallback was used.
    pub ranges_assumed: bool,
    /// IOMMU page sizes the domain supports (bitmap; type1 only, 0 if unknown).
    pub iova_pgsizes: u64,
}

/// A valid IOVA interval, `last` inclusive (as the kernel reports it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IovaRange {
    pub start: u64,
    pub last: u64,
}

/// The controller and namespace, as identified, and the IOMMU side of the VFIO set-up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub pci_address: PciAddress,
    pub iommu_group: u32,
    pub model: String,
    pub serial: String,
    pub firmware: String,
    pub nvme_version: String,
    pub nsid: u32,
    pub lba_size: u32,
    pub namespace_blocks: u64,
    pub capacity_bytes: u64,
    /// From MDTS (`None`: no limit).
    pub max_transfer_bytes: Option<u64>,
    pub max_queue_entries: u32,
    pub iommu: IommuInfo,
}

/// One DMA mapping made at set-up, and what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MapCost {
    /// `"queues"` (admin and I/O queues, PRP lists, identify page) or `"data"`.
    pub what: String,
    pub bytes: u64,
    pub page_size: PageSize,
    pub iova: u64,
    /// The VFIO map ioctl (pinning plus IOMMU page-table writes).
    pub map_ns: u64,
    /// The unmap ioctl at teardown.
    pub unmap_ns: Option<u64>,
    /// Physically contiguous runs of the buffer's pages when mapped: VFIO type1 writes the IOMMU
    /// page tables with one `iommu_map` call per run, so this is how many the map made (what
    /// iommutop counts on this process's row). Absent when the frame numbers are hidden (not
    /// root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical_runs: Option<u64>,
}

/// Set-up and teardown costs, in ns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SetupCost {
    /// Container/group (or iommufd) open, IOMMU set, device fd.
    pub vfio_open_ns: u64,
    /// Controller reset and enable until CSTS.RDY.
    pub controller_enable_ns: u64,
    pub maps: Vec<MapCost>,
    pub map_total_ns: u64,
    pub unmap_total_ns: u64,
}

impl SetupCost {
    /// Adds a mapping and its costs to the totals.
    pub fn add_map(&mut self, map: MapCost) {
        self.map_total_ns += map.map_ns;
        self.unmap_total_ns += map.unmap_ns.unwrap_or(0);
        self.maps.push(map);
    }
}

/// The latency percentiles of a run or a thread, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

/// One point of the complementary CDF: the share of I/Os slower than `latency_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CcdfPoint {
    pub latency_ns: u64,
    pub ccdf: f64,
}

/// A latency histogram's non-empty buckets, as `[low_ns, high_ns, count]`, with the exact
/// count, extremes and sum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistogramBuckets {
    /// Buckets per power of two, as a power of two.
    pub sub_bucket_bits: u32,
    pub count: u64,
    pub min_ns: Option<u64>,
    pub max_ns: Option<u64>,
    pub sum_ns: u128,
    pub buckets: Vec<[u64; 3]>,
}

/// One thread's I/O on its queue pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadResult {
    pub thread: u16,
    pub qid: u16,
    /// Distinct data pages this thread's buffers lie in.
    pub pages: u64,
    pub ios: u64,
    pub bytes: u64,
    pub elapsed_s: f64,
    pub iops: f64,
    /// 10^6 bytes per second.
    pub mb_s: f64,
    pub latency: Option<LatencySummary>,
    pub ccdf: Vec<CcdfPoint>,
    pub histogram: HistogramBuckets,
}

/// Data verification over the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifySummary {
    /// Blocks written with the pattern.
    pub blocks_written: u64,
    /// Blocks read back and checked.
    pub blocks_checked: u64,
    pub blocks_mismatched: u64,
}

/// An I/O run: totals over all threads, then each thread, with the set-up mapping cost on top
/// so that `compare` and `--fail-if workload.setup_map_ns` find it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VfioNvmeRun {
    pub params: RunParams,
    pub device: DeviceInfo,
    pub setup: SetupCost,
    /// From the first submission to the last completion, the longest thread's.
    pub elapsed_s: f64,
    pub ios: u64,
    pub bytes: u64,
    pub iops: f64,
    pub mb_s: f64,
    pub latency: Option<LatencySummary>,
    pub ccdf: Vec<CcdfPoint>,
    pub histogram: HistogramBuckets,
    pub threads: Vec<ThreadResult>,
    pub verify: Option<VerifySummary>,
    /// Stopped early; the numbers cover what ran.
    pub interrupted: bool,
    pub host: HostChanges,
    pub setup_maps: usize,
    pub setup_map_ns: u64,
    /// `latency` again, under a name that says its unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<LatencySummary>,
    /// The unit of work and headline numbers (I/Os, `iops`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<Headline>,
    /// The process that mapped the buffers and ran the I/O (the driver's worker): the pid of its
    /// row among iommutop's unattributed VFIO work. Absent from reports made before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_pid: Option<u32>,
}

impl VfioNvmeRun {
    /// The CCDF as CSV: `thread,latency_ns,ccdf`, the total first (`thread` = `all`).
    pub fn ccdf_csv(&self) -> String {
        let mut out = String::from("thread,latency_ns,ccdf\n");
        let mut rows = |label: &str, points: &[CcdfPoint]| {
            for p in points {
                let _ = writeln!(out, "{label},{},{:.9}", p.latency_ns, p.ccdf);
            }
        };
        rows("all", &self.ccdf);
        for t in &self.threads {
            rows(&t.thread.to_string(), &t.ccdf);
        }
        out
    }
}

/// One working-set size of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepStep {
    /// Distinct pages the I/Os cycle through.
    pub pages: u64,
    /// Bytes those pages span.
    pub bytes_covered: u64,
    /// Measured I/Os (after a warm-up pass over the pages).
    pub ios: u64,
    pub median_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub mean_ns: f64,
}

/// Where the median latency steps up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Knee {
    /// The largest working set before the step (its pages still fit).
    pub pages_before: u64,
    /// The smallest working set after it.
    pub pages_after: u64,
    /// The IOTLB-entries estimate: at least `pages_before`, fewer than `pages_after` (the
    /// queue pages take a few entries too).
    pub entries_estimate: u64,
    /// Mean of the step medians below and above the knee, in ns.
    pub below_ns: f64,
    pub above_ns: f64,
    /// (above − below) / below.
    pub jump_ratio: f64,
    /// Pooled standard deviation of the step medians around the two levels, in ns.
    pub noise_ns: f64,
}

/// The sweep over one page size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepSeries {
    pub page_size: PageSize,
    /// The data buffer's mapping (made once for the whole series).
    pub map: MapCost,
    pub steps: Vec<SweepStep>,
    pub knee: Option<Knee>,
    /// One sentence: the knee and its evidence, or why there is none.
    pub verdict: String,
}

/// An IOTLB sweep, with each page size's IOTLB-entries estimate on top where it found a knee.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VfioNvmeSweep {
    pub params: SweepParams,
    pub device: DeviceInfo,
    pub setup: SetupCost,
    pub series: Vec<SweepSeries>,
    pub interrupted: bool,
    pub host: HostChanges,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iotlb_entries_4k: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iotlb_entries_2m: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iotlb_entries_1g: Option<u64>,
    /// The unit of work (uncounted: I/Os).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<Headline>,
}

impl VfioNvmeSweep {
    /// The IOTLB-entries estimate of each series' knee, on top under its page size.
    pub fn with_knees_on_top(mut self) -> VfioNvmeSweep {
        for series in &self.series {
            let entries = series.knee.as_ref().map(|knee| knee.entries_estimate);
            let slot = match series.page_size {
                PageSize::Size4K => &mut self.iotlb_entries_4k,
                PageSize::Size2M => &mut self.iotlb_entries_2m,
                PageSize::Size1G => &mut self.iotlb_entries_1g,
            };
            if entries.is_some() {
                *slot = entries;
            }
        }
        self
    }
}
