//! What each function a multi-function program serves is (ebpf/progs/multi.bpf.c): the cookie
//! its links give it, which says what the function's own fentry and fexit programs say in their
//! code (its operation, how its call is known, its bytes, its entry's flags, when it failed).
//! Keyed by the name of the function's fentry program, whose place a multi-function program takes
//! where the kernel links one program to many functions.

use crate::abi::{
    iommutop_multi_bytes as bytes, iommutop_multi_call as call, iommutop_multi_failed as failed,
    iommutop_op as op, IOMMUTOP_MULTI_ARG_SHIFT, IOMMUTOP_MULTI_BYTES_SHIFT,
    IOMMUTOP_MULTI_CALL_SHIFT, IOMMUTOP_MULTI_DIRECTION_ARG, IOMMUTOP_MULTI_DIRECTION_SHIFT,
    IOMMUTOP_MULTI_ENTER_FULL, IOMMUTOP_MULTI_ENTER_RANGE_MAY_BE_FULL, IOMMUTOP_MULTI_ENTER_SHIFT,
    IOMMUTOP_MULTI_ENTER_TWIN, IOMMUTOP_MULTI_FAILED_SHIFT, IOMMUTOP_MULTI_OP_SHIFT,
};

/// Which pair of multi-function programs serves a function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Family {
    /// DMA API calls: a frame keyed by the device, their first argument.
    Device,
    /// Calls on an IOMMU-side object (page tables, IOVA, IOTLB) that inherit the key of the
    /// call they are nested in, and make a mapping: page-table maps, IOVA allocation, syncs
    /// after a map (tasks make most).
    Mapping,
    /// The same, taking a mapping down: unmaps, IOVA release, IOTLB invalidations (interrupts
    /// make many). A family apart, so that an interrupt's call landing in a task's is not
    /// skipped as a run of the same program (ebpf/progs/multi.bpf.c).
    Releasing,
}

impl Family {
    pub(crate) const ALL: [Family; 3] = [Family::Device, Family::Mapping, Family::Releasing];

    /// The family of a call on an IOMMU-side object of operation `op`.
    const fn owning(op: op::Type) -> Family {
        match op {
            op::IOMMUTOP_OP_IOMMU_MAP
            | op::IOMMUTOP_OP_IOVA_ALLOC
            | op::IOMMUTOP_OP_IOVA_ALLOC_SLOW
            | op::IOMMUTOP_OP_IOTLB_SYNC => Family::Mapping,
            _ => Family::Releasing,
        }
    }

    /// Every family's entry and exit programs.
    pub(crate) fn every_program() -> impl Iterator<Item = &'static str> {
        Family::ALL.into_iter().flat_map(|family| {
            let (entry, exit) = family.programs();
            [entry, exit]
        })
    }

    /// The family's entry and exit programs.
    pub(crate) const fn programs(self) -> (&'static str, &'static str) {
        match self {
            Family::Device => ("multi__device__fentry", "multi__device__fexit"),
            Family::Mapping => ("multi__mapping__fentry", "multi__mapping__fexit"),
            Family::Releasing => ("multi__releasing__fentry", "multi__releasing__fexit"),
        }
    }
}

/// A function's family and cookie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    pub family: Family,
    pub cookie: u64,
}

impl Shape {
    const fn new(family: Family, op: op::Type) -> Shape {
        Shape {
            family,
            cookie: (op as u64) << IOMMUTOP_MULTI_OP_SHIFT,
        }
    }

    const fn device(op: op::Type) -> Shape {
        Shape::new(Family::Device, op)
    }

    const fn owned(op: op::Type) -> Shape {
        Shape::new(Family::owning(op), op).known_as(call::IOMMUTOP_MULTI_CALL_OWNED, 0)
    }

    /// A call known by its position alone (no IOMMU-side object names its device).
    const fn positioned(op: op::Type) -> Shape {
        Shape::new(Family::owning(op), op)
    }

    const fn with(self, shift: u32, byte: u64) -> Shape {
        Shape {
            cookie: self.cookie & !(0xff << shift) | (byte & 0xff) << shift,
            ..self
        }
    }

    const fn known_as(self, how: call::Type, arg: u32) -> Shape {
        self.with(
            IOMMUTOP_MULTI_CALL_SHIFT,
            how as u64 | (arg as u64) << IOMMUTOP_MULTI_ARG_SHIFT,
        )
    }

    /// A DMA API call tagged with argument `arg` (DMA_CALL in ebpf/progs/dma.bpf.c).
    const fn tagged(self, arg: u32) -> Shape {
        self.known_as(call::IOMMUTOP_MULTI_CALL_TAGGED, arg)
    }

    const fn bytes(self, what: bytes::Type, arg: u32) -> Shape {
        self.with(
            IOMMUTOP_MULTI_BYTES_SHIFT,
            what as u64 | (arg as u64) << IOMMUTOP_MULTI_ARG_SHIFT,
        )
    }

    const fn bytes_arg(self, arg: u32) -> Shape {
        self.bytes(bytes::IOMMUTOP_MULTI_BYTES_ARG, arg)
    }

    const fn entering(self, flags: u32) -> Shape {
        self.with(IOMMUTOP_MULTI_ENTER_SHIFT, flags as u64)
    }

    const fn twin(self) -> Shape {
        self.entering(IOMMUTOP_MULTI_ENTER_TWIN)
    }

    /// An IOTLB invalidation, counted once with a wrapper that is one too; a range beyond any
    /// address width is the whole domain's.
    const fn invalidation(self) -> Shape {
        self.entering(IOMMUTOP_MULTI_ENTER_TWIN | IOMMUTOP_MULTI_ENTER_RANGE_MAY_BE_FULL)
    }

    /// A DMA map whose direction (`enum dma_data_direction`) is argument `arg`.
    const fn directed(self, arg: u32) -> Shape {
        self.with(
            IOMMUTOP_MULTI_DIRECTION_SHIFT,
            IOMMUTOP_MULTI_DIRECTION_ARG as u64 | (arg as u64) << IOMMUTOP_MULTI_ARG_SHIFT,
        )
    }

    const fn fails_when(self, rule: failed::Type) -> Shape {
        self.with(IOMMUTOP_MULTI_FAILED_SHIFT, rule as u64)
    }
}

const MAP: op::Type = op::IOMMUTOP_OP_DMA_MAP;
const UNMAP: op::Type = op::IOMMUTOP_OP_DMA_UNMAP;
const ALLOC: op::Type = op::IOMMUTOP_OP_DMA_ALLOC;
const FREE: op::Type = op::IOMMUTOP_OP_DMA_FREE;
const MAPPING_ERROR: failed::Type = failed::IOMMUTOP_MULTI_FAILED_MAPPING_ERROR;
const ZERO: failed::Type = failed::IOMMUTOP_MULTI_FAILED_ZERO;

/// The shapes several functions share: every coherent allocator and release starts (struct
/// device *, size_t); page-table maps (domain, iova, paddr, size); unmaps (domain, iova, size);
/// the vendors' syncs after a map (domain, iova, size); their unmap-side flushes of a gather
/// (domain, gather); SMMUv3's range invalidations (first, iova, size); and whole-domain flushes.
const ALLOCATION: Shape = Shape::device(ALLOC)
    .tagged(1)
    .bytes_arg(1)
    .twin()
    .fails_when(ZERO);
const RELEASE: Shape = Shape::device(FREE).tagged(1).bytes_arg(1).twin();
const PAGE_TABLE_MAP: Shape = Shape::owned(op::IOMMUTOP_OP_IOMMU_MAP)
    .bytes_arg(3)
    .fails_when(failed::IOMMUTOP_MULTI_FAILED_NONZERO);
const PAGE_TABLE_MAP_SG: Shape = Shape::owned(op::IOMMUTOP_OP_IOMMU_MAP)
    .twin()
    .fails_when(failed::IOMMUTOP_MULTI_FAILED_NOT_POSITIVE_BYTES);
const PAGE_TABLE_UNMAP: Shape = Shape::owned(op::IOMMUTOP_OP_IOMMU_UNMAP)
    .bytes_arg(2)
    .fails_when(ZERO);
const SYNC_AFTER_MAP: Shape = Shape::owned(op::IOMMUTOP_OP_IOTLB_SYNC).bytes_arg(2);
const GATHER_FLUSH: Shape = Shape::owned(op::IOMMUTOP_OP_IOTLB_FLUSH)
    .bytes(bytes::IOMMUTOP_MULTI_BYTES_GATHER, 1)
    .invalidation();
const RANGE_INVALIDATION: Shape = Shape::positioned(op::IOMMUTOP_OP_IOTLB_FLUSH)
    .bytes_arg(2)
    .invalidation();
const WHOLE_DOMAIN_FLUSH: Shape = Shape::owned(op::IOMMUTOP_OP_IOTLB_FLUSH)
    .entering(IOMMUTOP_MULTI_ENTER_TWIN | IOMMUTOP_MULTI_ENTER_FULL);

/// Each fentry program a multi-function program can stand in for, and the function's shape. Not
/// here: the single-page DMA maps and unmaps (`dma_map_page_attrs`, `dma_map_phys` and their
/// unmaps), which every block I/O and every packet calls: their own typed programs cost a call
/// less than the family's (docs/measurements.md, "Typed reads and the DMA page calls on their own
/// programs"), and they are what a device's mapping rate is made of; the calls that name a
/// `dma_iova_state` (dma_iova_try_alloc,
/// dma_iova_sync); the flush-queue timer (its own key); and VT-d's pre-5.11 page-table functions
/// (no kernel with multi-function links has them).
const SHAPES: &[(&str, Shape)] = &[
    (
        "dma__map_sg__fentry",
        Shape::device(MAP)
            .tagged(2)
            .bytes(bytes::IOMMUTOP_MULTI_BYTES_SG, 0)
            .twin()
            .directed(3)
            .fails_when(failed::IOMMUTOP_MULTI_FAILED_ZERO_U32),
    ),
    (
        "dma__map_sgtable__fentry",
        Shape::device(MAP)
            .tagged(2)
            .bytes(bytes::IOMMUTOP_MULTI_BYTES_SGTABLE, 0)
            .twin()
            .directed(2)
            .fails_when(failed::IOMMUTOP_MULTI_FAILED_NONZERO_INT),
    ),
    (
        "dma__unmap_sg__fentry",
        Shape::device(UNMAP)
            .tagged(2)
            .bytes(bytes::IOMMUTOP_MULTI_BYTES_SG, 0)
            .twin(),
    ),
    (
        "dma__map_resource__fentry",
        Shape::device(MAP)
            .tagged(1)
            .bytes_arg(2)
            .directed(3)
            .fails_when(MAPPING_ERROR),
    ),
    (
        "dma__unmap_resource__fentry",
        Shape::device(UNMAP).tagged(1).bytes_arg(2),
    ),
    (
        "dma__iova_destroy__fentry",
        Shape::device(UNMAP).tagged(2).bytes_arg(2),
    ),
    ("dma__alloc_attrs__fentry", ALLOCATION),
    ("dma__alloc_pages__fentry", ALLOCATION),
    ("dma__alloc_noncontig__fentry", ALLOCATION),
    ("dma__free_attrs__fentry", RELEASE),
    ("dma__free_pages__fentry", RELEASE),
    ("dma__free_noncontig__fentry", RELEASE),
    ("iommu__map__fentry", PAGE_TABLE_MAP),
    ("iommu__map_atomic__fentry", PAGE_TABLE_MAP),
    ("iommu__map_nosync__fentry", PAGE_TABLE_MAP.twin()),
    ("iommu__unmap__fentry", PAGE_TABLE_UNMAP),
    ("iommu__unmap_fast__fentry", PAGE_TABLE_UNMAP),
    ("iommu__map_sg__fentry", PAGE_TABLE_MAP_SG),
    ("iommu__map_sg_atomic__fentry", PAGE_TABLE_MAP_SG),
    (
        "iova__alloc_fast__fentry",
        Shape::owned(op::IOMMUTOP_OP_IOVA_ALLOC)
            .bytes(bytes::IOMMUTOP_MULTI_BYTES_GRANULES, 1)
            .fails_when(ZERO),
    ),
    (
        "iova__free_fast__fentry",
        Shape::owned(op::IOMMUTOP_OP_IOVA_FREE).bytes(bytes::IOMMUTOP_MULTI_BYTES_GRANULES, 2),
    ),
    (
        "iova__alloc_slow__fentry",
        Shape::owned(op::IOMMUTOP_OP_IOVA_ALLOC_SLOW)
            .bytes(bytes::IOMMUTOP_MULTI_BYTES_GRANULES, 1)
            .fails_when(ZERO),
    ),
    ("iotlb__intel_sync_map__fentry", SYNC_AFTER_MAP),
    ("iotlb__amd_sync_map__fentry", SYNC_AFTER_MAP),
    ("iotlb__virtio_sync_map__fentry", SYNC_AFTER_MAP),
    (
        "iotlb__qi_submit__fentry",
        Shape::positioned(op::IOMMUTOP_OP_IOTLB_FLUSH)
            .invalidation()
            .fails_when(failed::IOMMUTOP_MULTI_FAILED_NONZERO_INT),
    ),
    (
        "iotlb__flush_pages__fentry",
        Shape::owned(op::IOMMUTOP_OP_IOTLB_FLUSH)
            .bytes_arg(2)
            .invalidation(),
    ),
    ("iotlb__amd_iotlb_sync__fentry", GATHER_FLUSH),
    ("iotlb__virtio_iotlb_sync__fentry", GATHER_FLUSH),
    ("iotlb__smmu_inv_range__fentry", RANGE_INVALIDATION),
    ("iotlb__smmu_domain_inv__fentry", RANGE_INVALIDATION),
    ("iotlb__smmu_domain_inv_invs__fentry", RANGE_INVALIDATION),
    ("iotlb__intel_flush_all__fentry", WHOLE_DOMAIN_FLUSH),
    ("iotlb__amd_flush_all__fentry", WHOLE_DOMAIN_FLUSH),
    ("iotlb__virtio_flush_all__fentry", WHOLE_DOMAIN_FLUSH),
    ("iotlb__smmu_flush_all__fentry", WHOLE_DOMAIN_FLUSH),
];

/// The shape of the function whose fentry program is `entry_program`, where a multi-function
/// program can stand in for it.
pub(crate) fn shape_of(entry_program: &str) -> Option<Shape> {
    SHAPES
        .iter()
        .find(|(name, _)| *name == entry_program)
        .map(|(_, shape)| *shape)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::points::table::POINTS;

    fn op_of(cookie: u64) -> u64 {
        (cookie >> IOMMUTOP_MULTI_OP_SHIFT) & 0xff
    }

    #[test]
    fn every_shape_stands_in_for_an_entry_program_of_the_table_and_counts_its_points_op() {
        for (program, shape) in SHAPES {
            let point = POINTS
                .iter()
                .find(|point| {
                    point
                        .functions
                        .iter()
                        .any(|hook| hook.fentry.and_then(|p| p.entry) == Some(*program))
                })
                .unwrap_or_else(|| panic!("{program}: no hook of the table has it"));
            assert_eq!(
                op_of(shape.cookie),
                point.op as u64,
                "{program}: its cookie's operation is not its point's ({})",
                point.name
            );
        }
    }

    #[test]
    fn calls_that_make_a_mapping_and_calls_that_take_one_down_are_families_apart() {
        let family = |program| shape_of(program).map(|shape| shape.family);
        for program in [
            "iommu__map_nosync__fentry",
            "iova__alloc_fast__fentry",
            "iotlb__intel_sync_map__fentry",
        ] {
            assert_eq!(family(program), Some(Family::Mapping), "{program}");
        }
        for program in [
            "iommu__unmap_fast__fentry",
            "iova__free_fast__fentry",
            "iotlb__qi_submit__fentry",
            "iotlb__intel_flush_all__fentry",
        ] {
            assert_eq!(family(program), Some(Family::Releasing), "{program}");
        }
        assert_eq!(family("dma__map_phys__fentry"), None, "on its own programs");
    }

    /// The exits read how a call is known without the entries' branch (ebpf/progs/multi.bpf.c):
    /// a DMA API exit always as tagged, an IOMMU-side exit as owned or positioned.
    #[test]
    fn a_device_call_is_tagged_and_an_iommu_side_call_never_is() {
        let how_of =
            |shape: &Shape| ((shape.cookie >> IOMMUTOP_MULTI_CALL_SHIFT) & 0xf) as call::Type;
        for (program, shape) in SHAPES {
            let how = how_of(shape);
            if shape.family == Family::Device {
                assert_eq!(how, call::IOMMUTOP_MULTI_CALL_TAGGED, "{program}");
            } else {
                assert_ne!(how, call::IOMMUTOP_MULTI_CALL_TAGGED, "{program}");
            }
        }
    }

    #[test]
    fn each_field_lands_in_its_own_byte() {
        let shape = Shape::device(MAP)
            .tagged(2)
            .bytes_arg(3)
            .twin()
            .fails_when(MAPPING_ERROR);
        assert_eq!(
            shape.cookie,
            u64::from(MAP)
                | (u64::from(call::IOMMUTOP_MULTI_CALL_TAGGED) | 2 << 4) << 8
                | (u64::from(bytes::IOMMUTOP_MULTI_BYTES_ARG) | 3 << 4) << 16
                | u64::from(IOMMUTOP_MULTI_ENTER_TWIN) << 24
                | u64::from(MAPPING_ERROR) << 32
        );
        assert_eq!(shape.family, Family::Device);
        assert_eq!(
            shape.directed(3).cookie >> 40,
            u64::from(IOMMUTOP_MULTI_DIRECTION_ARG) | 3 << 4
        );
    }

    /// Every DMA map of the device family names its direction's argument (the kernel's
    /// signatures: `dma_map_sg_attrs(dev, sg, nents, dir, attrs)`, `dma_map_sgtable(dev, sgt,
    /// dir, attrs)`, `dma_map_resource(dev, phys, size, dir, attrs)`), and nothing else does: a
    /// map without one would be counted as of no known direction.
    #[test]
    fn every_dma_map_of_the_family_reads_its_direction() {
        for (program, shape) in SHAPES {
            let direction = (shape.cookie >> IOMMUTOP_MULTI_DIRECTION_SHIFT) & 0xff;
            let op = (shape.cookie >> IOMMUTOP_MULTI_OP_SHIFT) & 0xff;
            let expected = match *program {
                "dma__map_sg__fentry" | "dma__map_resource__fentry" => 1 | 3 << 4,
                "dma__map_sgtable__fentry" => 1 | 2 << 4,
                _ => 0,
            };
            assert_eq!(direction, expected, "{program}");
            assert_eq!(direction != 0, op == u64::from(MAP), "{program}");
        }
    }
}
