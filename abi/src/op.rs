//! The operations iommutop counts, in the order of `enum iommutop_op` in the ABI header.

use crate::bindings::iommutop_op;
use serde::{Deserialize, Serialize};

/// The operations iommutop counts: each variant's value is its `enum iommutop_op` value in the
/// ABI header (pinned one by one below).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    strum::EnumCount,
    strum::VariantArray,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[repr(u32)]
pub enum Op {
    /// DMA API map (`dma_map_page_attrs`, `dma_map_phys`, `dma_map_sg_attrs`).
    DmaMap = 0,
    /// DMA API unmap.
    DmaUnmap = 1,
    /// IOMMU page-table map (`iommu_map`, `iommu:map`).
    IommuMap = 2,
    /// IOMMU page-table unmap (`iommu_unmap`, `iommu:unmap`).
    IommuUnmap = 3,
    /// IOVA allocation (`alloc_iova_fast`).
    IovaAlloc = 4,
    /// IOVA release (`free_iova_fast`).
    IovaFree = 5,
    /// IOTLB sync after a map (`intel_iommu_iotlb_sync_map`, ...).
    IotlbSync = 6,
    /// IOTLB invalidation (`qi_submit_sync`, `cache_tag_flush_range`, AMD flushes).
    IotlbFlush = 7,
    /// Deferred flush-queue timer (`fq_flush_timeout`).
    FqFlush = 8,
    /// Completed I/O: block request (with bytes), NAPI poll (count is packets).
    Completion = 9,
    /// IOVA allocation through the rbtree, when the per-CPU caches miss (`alloc_iova`).
    IovaAllocSlow = 10,
    /// Of the IOTLB invalidations, those of a whole domain (count only: a subset of `IotlbFlush`).
    IotlbFlushFull = 11,
    /// Coherent DMA buffers allocated (`dma_alloc_attrs`, ...): not per-I/O maps.
    DmaAlloc = 12,
    /// Coherent DMA buffers released.
    DmaFree = 13,
    /// Packets a NIC's driver accepted for transmit (`net:net_dev_xmit`); a NIC's `Completion` is
    /// the packets it received.
    TxPackets = 14,
    /// Block requests requeued (`block:block_rq_requeue`): a request is mapped again when it is
    /// issued again, for one completion (a controller's reset cancels the requests in flight).
    Requeue = 15,
}

impl Op {
    /// All operations in ABI order.
    pub const ALL: [Op; <Op as strum::EnumCount>::COUNT] = Op::in_declaration_order();

    const fn in_declaration_order() -> [Op; <Op as strum::EnumCount>::COUNT] {
        let variants = <Op as strum::VariantArray>::VARIANTS;
        let mut all = [Op::DmaMap; <Op as strum::EnumCount>::COUNT];
        let mut i = 0;
        while i < all.len() {
            all[i] = variants[i];
            i += 1;
        }
        all
    }

    /// The name used in reports and on screen (`dma_map`, `iotlb_sync`, ...).
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Work that exists only because addresses are translated (what `identity` avoids).
    pub fn is_translation_work(self) -> bool {
        !matches!(
            self,
            Op::DmaMap
                | Op::DmaUnmap
                | Op::DmaAlloc
                | Op::DmaFree
                | Op::Completion
                | Op::TxPackets
                | Op::Requeue
        )
    }
}

/// Written as its name (`dma_map`), as in reports.
impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether `Op::ALL[i]` is the op of value `i`: the kernel counts op `i` at `ops[i]`.
const fn all_in_abi_order() -> bool {
    let mut i = 0;
    while i < Op::ALL.len() {
        if Op::ALL[i] as usize != i {
            return false;
        }
        i += 1;
    }
    true
}
const _: () = assert!(all_in_abi_order());
// Each op pinned to its C enum value.
const _: () = assert!(Op::DmaMap as u32 == iommutop_op::IOMMUTOP_OP_DMA_MAP);
const _: () = assert!(Op::DmaUnmap as u32 == iommutop_op::IOMMUTOP_OP_DMA_UNMAP);
const _: () = assert!(Op::IommuMap as u32 == iommutop_op::IOMMUTOP_OP_IOMMU_MAP);
const _: () = assert!(Op::IommuUnmap as u32 == iommutop_op::IOMMUTOP_OP_IOMMU_UNMAP);
const _: () = assert!(Op::IovaAlloc as u32 == iommutop_op::IOMMUTOP_OP_IOVA_ALLOC);
const _: () = assert!(Op::IovaFree as u32 == iommutop_op::IOMMUTOP_OP_IOVA_FREE);
const _: () = assert!(Op::IotlbSync as u32 == iommutop_op::IOMMUTOP_OP_IOTLB_SYNC);
const _: () = assert!(Op::IotlbFlush as u32 == iommutop_op::IOMMUTOP_OP_IOTLB_FLUSH);
const _: () = assert!(Op::FqFlush as u32 == iommutop_op::IOMMUTOP_OP_FQ_FLUSH);
const _: () = assert!(Op::Completion as u32 == iommutop_op::IOMMUTOP_OP_COMPLETION);
const _: () = assert!(Op::IovaAllocSlow as u32 == iommutop_op::IOMMUTOP_OP_IOVA_ALLOC_SLOW);
const _: () = assert!(Op::IotlbFlushFull as u32 == iommutop_op::IOMMUTOP_OP_IOTLB_FLUSH_FULL);
const _: () = assert!(Op::DmaAlloc as u32 == iommutop_op::IOMMUTOP_OP_DMA_ALLOC);
const _: () = assert!(Op::DmaFree as u32 == iommutop_op::IOMMUTOP_OP_DMA_FREE);
const _: () = assert!(Op::TxPackets as u32 == iommutop_op::IOMMUTOP_OP_TX_PACKETS);
const _: () = assert!(Op::Requeue as u32 == iommutop_op::IOMMUTOP_OP_REQUEUE);
const _: () = assert!(Op::ALL.len() == iommutop_op::IOMMUTOP_OP_COUNT as usize);

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Counts(#[serde(with = "crate::keyed_by_text")] BTreeMap<Op, u64>);

    #[test]
    fn a_map_by_op_is_written_by_name_in_the_names_order_and_read_back() {
        let counts = Counts(BTreeMap::from([
            (Op::DmaUnmap, 2),
            (Op::IovaAlloc, 3),
            (Op::DmaMap, 1),
            (Op::Completion, 4),
        ]));
        let text = serde_json::to_string(&counts).unwrap();
        assert_eq!(
            text,
            r#"{"completion":4,"dma_map":1,"dma_unmap":2,"iova_alloc":3}"#
        );
        assert_eq!(serde_json::from_str::<Counts>(&text).unwrap(), counts);
        assert!(serde_json::from_str::<Counts>(r#"{"no_such_op":1}"#).is_err());
    }
}
