//! What a run measured: per thread and in total, with the latency histogram and its CCDF, the
//! set-up cost (VFIO open, DMA map per buffer, controller enable) and what the tool changed on
//! the host and put back. Everything serializes to JSON.

use crate::changes::HostChanges;
use crate::hist::{CcdfPoint, LatencyHistogram, LatencySummary};
use crate::params::Params;
pub use iommutop_vfio_nvme_results::{DeviceInfo, MapCost, SetupCost, VerifySummary};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

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
    /// The process that mapped the buffers and ran the I/O (the worker): the pid of its row
    /// among iommutop's unattributed VFIO work.
    pub worker_pid: u32,
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
