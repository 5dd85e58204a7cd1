//! What a run measured: per thread and in total, with the latency histogram's buckets and its
//! CCDF, the set-up cost (VFIO open, DMA map per buffer, controller enable) and what the tool
//! changed on the host and put back: the report's own types ([`iommutop_vfio_nvme_results`]),
//! made by the worker and sent back whole.

pub use iommutop_vfio_nvme_results::{
    DeviceInfo, MapCost, SetupCost, ThreadResult, VerifySummary, VfioNvmeRun,
};

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
