//! "Where the time goes": a row's translation time split into parts that do not overlap, drawn as
//! one bar that sums to 100%.
//!
//! The report's `of_which` shares overlap: an `iotlb_sync` runs inside `iommu_map`, the slow IOVA
//! path inside `iova_alloc`, a strict-mode `iotlb_flush` inside `iommu_unmap`. Drawn side by side
//! they would show the same nanoseconds twice. So a nested part's share is taken out of the part
//! it runs inside ([`PARTS`] says which), and what the parts leave of the translation time — the
//! DMA API's own work around them, or the flush-queue timer's — is a segment of its own. Where a
//! nested share exceeds its parent's, the calls did not all nest (the kernel made them one after
//! the other) and nothing is taken out. Should the parts still add up to more than the whole,
//! they are scaled to it and the bar has no remainder.

use crate::derive::Derived;
use crate::sample::Op;

/// The parts of translation time, in the order drawn: the operation, what it is, and the part it
/// runs inside of (whose share it is taken out of).
const PARTS: [(Op, &str, Option<Op>); 7] = [
    (Op::IovaAlloc, "IOVA allocation (per-CPU caches)", None),
    (
        Op::IovaAllocSlow,
        "IOVA allocation through the rbtree",
        Some(Op::IovaAlloc),
    ),
    (Op::IommuMap, "page-table updates (map)", None),
    (Op::IotlbSync, "IOTLB sync after map", Some(Op::IommuMap)),
    (Op::IommuUnmap, "page-table updates (unmap)", None),
    (
        Op::IotlbFlush,
        "IOTLB invalidation and its wait",
        Some(Op::IommuUnmap),
    ),
    (Op::IovaFree, "IOVA release", None),
];

/// What the remainder segment is called.
pub const REST: &str = "the rest of the timed calls (DMA API, driver, flush-queue timer)";

/// One segment of the bar.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// The operation drawn, `None` for the remainder.
    pub op: Option<Op>,
    pub label: &'static str,
    /// Its fraction of the row's translation time; the segments' fractions sum to 1.
    pub share: f64,
}

/// The bar of a row, or nothing when its translation time was not measured.
pub fn segments(derived: &Derived) -> Vec<Segment> {
    if derived.translation_ns.is_none() || derived.of_which.is_empty() {
        return Vec::new();
    }
    let share = |op: Op| {
        derived
            .of_which
            .get(&op)
            .copied()
            .filter(|s| s.is_finite() && *s > 0.0)
            .unwrap_or(0.0)
    };
    let mut parts: Vec<Segment> = PARTS
        .iter()
        .map(|&(op, label, _)| {
            let nested: f64 = PARTS
                .iter()
                .filter(|(_, _, parent)| *parent == Some(op))
                .map(|&(child, _, _)| share(child))
                .filter(|&child| child <= share(op))
                .sum();
            Segment {
                op: Some(op),
                label,
                share: (share(op) - nested).max(0.0),
            }
        })
        .filter(|s| s.share > 0.0)
        .collect();
    let sum: f64 = parts.iter().map(|s| s.share).sum();
    if sum > 1.0 {
        for part in &mut parts {
            part.share /= sum;
        }
    } else {
        parts.push(Segment {
            op: None,
            label: REST,
            share: 1.0 - sum,
        });
    }
    parts
}
