//! What translation costs a device: time per I/O, share of a CPU, maps and flushes per I/O.
//!
//! # Translation time
//! The probed calls nest: a timed `dma_map` already contains the IOVA allocation (and its slow
//! path, `iova_alloc_slow`, inside `iova_alloc`), `iommu_map` and
//! the IOTLB sync it caused; a timed `dma_unmap` contains `iommu_unmap`, the IOVA release and a
//! strict-mode IOTLB flush; the flush-queue timer (`fq_flush`) contains its flushes and releases.
//! Adding them all up would count the same nanoseconds two or three times. So a row's
//! **translation time** is the sum of the measured time of its *outermost timed* operations: an
//! operation counts when it was timed and none of the operations it runs inside of
//! ([`enclosing`]) was timed in the same row. With the DMA API timed that is
//! `dma_map + dma_unmap` (plus anything timed that cannot nest in them); with only `iommu_map`
//! timed (VFIO maps directly, or the DMA API is only counted) it is `iommu_map + iommu_unmap + ...`.
//! Completions are not translation work and never count.
//!
//! The **of which** shares give every timed translation operation's own time as a fraction of the
//! translation time: `iova_alloc: 0.2` means a fifth of it was spent allocating IOVAs. Nested
//! shares overlap (`iotlb_sync` is inside `iommu_map`) and need not add up to 1.
//!
//! # Per I/O
//! The I/O count is the number of completions when there were any (NVMe or block requests), for a
//! NIC (a row with transmitted packets) the packets it sent and received, else the number of
//! `dma_map` calls (each map then stands for one I/O); which one was used is [`IoBasis`]. `cpu_share` is translation time over the interval's wall time: 1.0 means
//! one CPU busy translating all the time (several CPUs can add up to more than 1).

use crate::op_stats::OpStats;
use iommutop_abi::op::Op;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What an I/O was counted as for the per-I/O figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IoBasis {
    /// Completed I/Os (NVMe or block requests, NAPI polls).
    Completions,
    /// No completions were seen: each DMA map counts as one I/O.
    DmaMaps,
    /// A NIC: packets sent and received.
    Packets,
}

impl IoBasis {
    /// One such I/O as sentences name it: `per completed I/O`, `per packet`, `per DMA map`.
    pub fn unit(self) -> &'static str {
        match self {
            IoBasis::Completions => "completed I/O",
            IoBasis::DmaMaps => "DMA map",
            IoBasis::Packets => "packet",
        }
    }
}

/// Overhead figures of one row over one interval; `None` where a denominator or timing is missing.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Derived {
    /// Sum of the outermost timed translation operations, in ns (see the module documentation).
    pub translation_ns: Option<u64>,
    pub translation_ns_per_io: Option<f64>,
    /// Translation time over wall time (1.0 = one CPU).
    pub cpu_share: Option<f64>,
    /// DMA API maps per completed I/O.
    pub maps_per_io: Option<f64>,
    /// IOMMU page-table maps per completed I/O (0 with an identity domain).
    pub iommu_maps_per_io: Option<f64>,
    /// IOTLB invalidations per I/O, on the same basis as `translation_ns_per_io`.
    pub iotlb_flushes_per_io: Option<f64>,
    pub io_basis: Option<IoBasis>,
    /// Each timed translation operation's time as a fraction of `translation_ns`.
    #[serde(deserialize_with = "crate::ops_map::skip_unknown")]
    pub of_which: BTreeMap<Op, f64>,
}

/// The operations `op` can run inside of; its time is part of theirs when they are timed.
pub fn enclosing(op: Op) -> &'static [Op] {
    match op {
        Op::IovaAlloc | Op::IommuMap => &[Op::DmaMap, Op::DmaAlloc],
        Op::IovaAllocSlow => &[Op::IovaAlloc, Op::DmaMap, Op::DmaAlloc],
        Op::IotlbSync => &[Op::IommuMap, Op::DmaMap, Op::DmaAlloc],
        Op::IommuUnmap => &[Op::DmaUnmap, Op::DmaFree],
        Op::IovaFree => &[Op::DmaUnmap, Op::DmaFree, Op::FqFlush],
        Op::IotlbFlush => &[Op::IommuUnmap, Op::DmaUnmap, Op::DmaFree, Op::FqFlush],
        Op::DmaMap
        | Op::DmaUnmap
        | Op::DmaAlloc
        | Op::DmaFree
        | Op::FqFlush
        | Op::Completion
        | Op::IotlbFlushFull
        | Op::TxPackets
        | Op::Requeue => &[],
    }
}

/// Operations whose time is translation time: everything but I/O counts and the count-only
/// subset of full flushes.
pub fn is_translation_time(op: Op) -> bool {
    !matches!(
        op,
        Op::Completion | Op::TxPackets | Op::IotlbFlushFull | Op::Requeue
    )
}

/// A row's completed I/Os: for a NIC (a row with transmitted packets) the packets it sent and
/// received, else its completions.
fn completed_ios(ops: &BTreeMap<Op, OpStats>) -> (u64, IoBasis) {
    let count = |op: Op| ops.get(&op).map_or(0, |s| s.count);
    let sent = count(Op::TxPackets);
    if sent > 0 {
        (count(Op::Completion).saturating_add(sent), IoBasis::Packets)
    } else {
        (count(Op::Completion), IoBasis::Completions)
    }
}

/// How many I/Os a row did and what they were counted as (see the module documentation):
/// its completions or packets, else its DMA maps; `None` when it did neither.
pub fn io_count(ops: &BTreeMap<Op, OpStats>) -> Option<(u64, IoBasis)> {
    let maps = ops.get(&Op::DmaMap).map_or(0, |s| s.count);
    match completed_ios(ops) {
        (n, basis) if n > 0 => Some((n, basis)),
        _ if maps > 0 => Some((maps, IoBasis::DmaMaps)),
        _ => None,
    }
}

/// The overhead figures of a row from its per-op stats over `interval_ns`.
pub fn derive(ops: &BTreeMap<Op, OpStats>, interval_ns: u64) -> Derived {
    let timed_ns = |op: Op| ops.get(&op).and_then(OpStats::total_ns);
    let count = |op: Op| ops.get(&op).map_or(0, |s| s.count);
    let outermost_ns: Vec<u64> = Op::ALL
        .into_iter()
        .filter(|&op| is_translation_time(op))
        .filter(|&op| enclosing(op).iter().all(|&outer| timed_ns(outer).is_none()))
        .filter_map(timed_ns)
        .collect();
    let translation_ns = (!outermost_ns.is_empty()).then(|| {
        outermost_ns
            .iter()
            .fold(0u64, |sum, &ns| sum.saturating_add(ns))
    });

    let completions = completed_ios(ops).0;
    let (ios, io_basis) = io_count(ops).map_or((0, None), |(n, basis)| (n, Some(basis)));
    let per = |numerator: u64, denominator: u64| {
        (denominator > 0).then(|| numerator as f64 / denominator as f64)
    };

    let of_which = match translation_ns {
        Some(total) if total > 0 => Op::ALL
            .into_iter()
            .filter(|&op| is_translation_time(op))
            .filter_map(|op| Some((op, timed_ns(op)? as f64 / total as f64)))
            .collect(),
        _ => BTreeMap::new(),
    };

    Derived {
        translation_ns,
        translation_ns_per_io: translation_ns.and_then(|ns| per(ns, ios)),
        cpu_share: translation_ns.and_then(|ns| per(ns, interval_ns)),
        maps_per_io: per(count(Op::DmaMap), completions),
        iommu_maps_per_io: per(count(Op::IommuMap), completions),
        iotlb_flushes_per_io: per(count(Op::IotlbFlush), ios),
        io_basis,
        of_which,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op_stats::OpDelta;

    /// Stats of an op with `count` calls, all timed, taking `timed_total_ns` together (if given).
    fn op(count: u64, timed_total_ns: Option<u64>) -> OpStats {
        let mut delta = OpDelta {
            count,
            ..OpDelta::default()
        };
        if let Some(ns) = timed_total_ns {
            delta.timed = count.max(1);
            delta.total_ns = ns;
            delta
                .hist
                .add(crate::hist::slot_of(ns / delta.timed), delta.timed);
        }
        delta.stats(1_000_000_000)
    }

    fn ops(list: &[(Op, OpStats)]) -> BTreeMap<Op, OpStats> {
        list.iter().cloned().collect()
    }

    /// A NIC's I/O is a packet, sent or received: TCP_RR's three maps per transaction and side
    /// (two to send, one to refill the receive ring) are 1.5 per packet.
    #[test]
    fn a_nic_counts_packets_sent_and_received() {
        let row = ops(&[
            (Op::DmaMap, op(300, Some(300_000))),
            (Op::DmaUnmap, op(300, Some(150_000))),
            (Op::Completion, op(100, None)),
            (Op::TxPackets, op(100, None)),
        ]);
        let d = derive(&row, 1_000_000_000);
        assert_eq!(d.io_basis, Some(IoBasis::Packets));
        assert_eq!(d.maps_per_io, Some(1.5));
        assert_eq!(d.translation_ns_per_io, Some(450_000.0 / 200.0));
    }

    /// Full flushes are a count-only subset of `iotlb_flush`, and coherent allocations enclose
    /// the IOMMU work they cause, like a map does.
    #[test]
    fn full_flushes_are_not_time_and_allocations_enclose_their_page_tables() {
        let row = ops(&[
            (Op::DmaAlloc, op(2, Some(10_000))),
            (Op::IommuMap, op(2, Some(4_000))),
            (Op::IotlbFlushFull, op(5, None)),
        ]);
        let d = derive(&row, 1_000_000_000);
        assert_eq!(d.translation_ns, Some(10_000));
        assert!(!d.of_which.contains_key(&Op::IotlbFlushFull));
    }

    #[test]
    fn nested_work_is_not_counted_twice_when_the_dma_api_is_timed() {
        let row = ops(&[
            (Op::DmaMap, op(100, Some(100_000))),
            (Op::DmaUnmap, op(100, Some(60_000))),
            (Op::IovaAlloc, op(100, Some(20_000))),
            (Op::IommuMap, op(100, Some(40_000))),
            (Op::IotlbSync, op(100, Some(16_000))),
            (Op::IotlbFlush, op(100, Some(30_000))),
            (Op::Completion, op(100, Some(9_000_000))),
        ]);
        let d = derive(&row, 1_000_000_000);
        assert_eq!(d.translation_ns, Some(160_000));
        assert_eq!(d.translation_ns_per_io, Some(1_600.0));
        assert_eq!(d.io_basis, Some(IoBasis::Completions));
        assert_eq!(d.cpu_share, Some(0.000_16));
        assert_eq!(d.maps_per_io, Some(1.0));
        assert_eq!(d.iotlb_flushes_per_io, Some(1.0));
        assert_eq!(d.of_which[&Op::DmaMap], 0.625);
        assert_eq!(d.of_which[&Op::IovaAlloc], 0.125);
        assert_eq!(d.of_which[&Op::IotlbSync], 0.1);
        assert!(!d.of_which.contains_key(&Op::Completion));
        assert!(!d.of_which.contains_key(&Op::IommuUnmap));
    }

    #[test]
    fn without_dma_api_timing_the_iommu_layer_is_the_outermost() {
        // VFIO: iommu_map/unmap called directly; the sync inside iommu_map is not added again.
        let row = ops(&[
            (Op::DmaMap, op(0, None)),
            (Op::IommuMap, op(10, Some(300_000))),
            (Op::IotlbSync, op(10, Some(50_000))),
            (Op::IommuUnmap, op(10, Some(200_000))),
            (Op::IotlbFlush, op(10, Some(100_000))),
        ]);
        let d = derive(&row, 2_000_000_000);
        assert_eq!(d.translation_ns, Some(500_000));
        assert_eq!(d.io_basis, None);
        assert_eq!(d.translation_ns_per_io, None);
        assert_eq!(d.cpu_share, Some(0.000_25));
        assert_eq!(d.iommu_maps_per_io, None);
    }

    #[test]
    fn deferred_flushes_count_once_inside_the_timer() {
        let row = ops(&[
            (Op::FqFlush, op(2, Some(80_000))),
            (Op::IotlbFlush, op(2, Some(60_000))),
            (Op::IovaFree, op(256, Some(10_000))),
        ]);
        let d = derive(&row, 1_000_000_000);
        assert_eq!(d.translation_ns, Some(80_000));
        assert_eq!(d.of_which[&Op::IotlbFlush], 0.75);
    }

    #[test]
    fn counted_only_ops_give_counts_but_no_times() {
        let row = ops(&[
            (Op::DmaMap, op(6, None)),
            (Op::IommuMap, op(6, None)),
            (Op::Completion, op(4, None)),
        ]);
        let d = derive(&row, 1_000_000_000);
        assert_eq!(d.translation_ns, None);
        assert_eq!(d.translation_ns_per_io, None);
        assert_eq!(d.cpu_share, None);
        assert_eq!(d.maps_per_io, Some(1.5));
        assert_eq!(d.iommu_maps_per_io, Some(1.5));
        assert!(d.of_which.is_empty());
    }

    #[test]
    fn dma_maps_stand_in_for_ios_without_completions() {
        let row = ops(&[(Op::DmaMap, op(50, Some(50_000)))]);
        let d = derive(&row, 1_000_000_000);
        assert_eq!(d.io_basis, Some(IoBasis::DmaMaps));
        assert_eq!(d.translation_ns_per_io, Some(1_000.0));
        assert_eq!(d.maps_per_io, None);
    }

    #[test]
    fn every_nesting_parent_is_a_translation_op() {
        for op in Op::ALL {
            for &outer in enclosing(op) {
                assert!(is_translation_time(outer));
                assert!(
                    !enclosing(outer).contains(&op),
                    "{op:?} and {outer:?} enclose each other"
                );
            }
        }
    }
}
