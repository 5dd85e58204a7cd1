//! Metric names per operation: the plural a counter of calls takes (`iommutop_dma_maps_total`)
//! and the singular its time and latency take (`iommutop_dma_map_seconds_total`,
//! `iommutop_dma_map_duration_seconds`). A new [`Op`] does not compile until it is named here.

use iommutop_model::Op;

/// How an operation appears in metric names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpNames {
    /// What one call is, for a counter of calls: `dma_maps`.
    pub calls: &'static str,
    /// One call, for its time: `dma_map`.
    pub call: &'static str,
    /// What the help text says it counts.
    pub what: &'static str,
    /// Whether the probes can time it (fentry or kprobe tier); tracepoint-only counts are not.
    pub timed: bool,
}

pub fn op_names(op: Op) -> OpNames {
    let (calls, call, what, timed) = match op {
        Op::DmaMap => ("dma_maps", "dma_map", "DMA API streaming maps", true),
        Op::DmaUnmap => ("dma_unmaps", "dma_unmap", "DMA API streaming unmaps", true),
        Op::IommuMap => ("iommu_maps", "iommu_map", "IOMMU page-table maps", true),
        Op::IommuUnmap => (
            "iommu_unmaps",
            "iommu_unmap",
            "IOMMU page-table unmaps",
            true,
        ),
        Op::IovaAlloc => ("iova_allocs", "iova_alloc", "IOVA allocations", true),
        Op::IovaFree => ("iova_frees", "iova_free", "IOVA releases", true),
        Op::IotlbSync => ("iotlb_syncs", "iotlb_sync", "IOTLB syncs after a map", true),
        Op::IotlbFlush => (
            "iotlb_invalidations",
            "iotlb_invalidation",
            "IOTLB invalidations",
            true,
        ),
        Op::FqFlush => (
            "flush_queue_flushes",
            "flush_queue_flush",
            "deferred flush-queue timer runs",
            true,
        ),
        Op::Completion => (
            "completions",
            "completion",
            "completed I/Os (block requests; NAPI packets received for a NIC)",
            false,
        ),
        Op::IovaAllocSlow => (
            "iova_slow_allocs",
            "iova_slow_alloc",
            "IOVA allocations that missed the per-CPU caches",
            true,
        ),
        Op::IotlbFlushFull => (
            "iotlb_full_invalidations",
            "iotlb_full_invalidation",
            "IOTLB invalidations of a whole domain (a subset of iotlb_invalidations)",
            false,
        ),
        Op::DmaAlloc => (
            "dma_coherent_allocs",
            "dma_coherent_alloc",
            "coherent DMA buffers allocated",
            true,
        ),
        Op::DmaFree => (
            "dma_coherent_frees",
            "dma_coherent_free",
            "coherent DMA buffers released",
            true,
        ),
        Op::TxPackets => (
            "tx_packets",
            "tx_packet",
            "packets a NIC driver accepted for transmit",
            false,
        ),
        Op::Requeue => (
            "block_requeues",
            "block_requeue",
            "block requests requeued, each mapped again when issued again",
            false,
        ),
    };
    OpNames {
        calls,
        call,
        what,
        timed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn every_op_has_its_own_names() {
        let calls: BTreeSet<_> = Op::ALL.iter().map(|&op| op_names(op).calls).collect();
        let call: BTreeSet<_> = Op::ALL.iter().map(|&op| op_names(op).call).collect();
        assert_eq!(calls.len(), Op::ALL.len());
        assert_eq!(call.len(), Op::ALL.len());
    }
}
