//! What a run measured: per thread and in total, with the latency histogram and its CCDF, the
//! set-up cost (VFIO open, DMA map per buffer, controller enable) and what the tool changed on
//! the host and put back. Everything serializes to JSON.

use crate::changes::HostChanges;
use crate::hist::{CcdfPoint, LatencyHistogram, LatencySummary};
use crate::params::{PageSize, Params};
use crate::vfio::IommuInfo;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// The controller and namespace, as identified, and the IOMMU side of the VFIO set-up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub pci_address: iommutop_model::pci::PciAddress,
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
    pub(crate) fn add_map(&mut self, map: MapCost) {
        self.map_total_ns += map.map_ns;
        self.unmap_total_ns += map.unmap_ns.unwrap_or(0);
        self.maps.push(map);
    }
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
    pub histogram: LatencyHistogram,
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

/// A whole run: totals over all threads, then each thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub params: Params,
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
    pub histogram: LatencyHistogram,
    pub threads: Vec<ThreadResult>,
    pub verify: Option<VerifySummary>,
    /// Stopped early by a signal or the caller's cancel flag; the numbers cover what ran.
    pub interrupted: bool,
    /// What the tool changed on the host for the run and whether it was put back.
    pub host: HostChanges,
}

impl RunResult {
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

/// Rates from counts and seconds (0 when no time passed).
pub(crate) fn rates(ios: u64, bytes: u64, secs: f64) -> (f64, f64) {
    if secs <= 0.0 {
        return (0.0, 0.0);
    }
    (ios as f64 / secs, bytes as f64 / 1e6 / secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_handle_zero_time() {
        assert_eq!(rates(10, 40960, 0.0), (0.0, 0.0));
        let (iops, mbs) = rates(2000, 2000 * 4096, 2.0);
        assert_eq!(iops, 1000.0);
        assert!((mbs - 4.096).abs() < 1e-9);
    }
}
