//! The logical probe points and, for each, the kernel functions and tracepoints that implement
//! it on the kernels we know, with the BPF programs that hook them. Data, not `if`s: when a
//! kernel renames a function, add a row here with the range of kernels it holds for.

use iommutop_model::facts::IommuVendor;
use iommutop_model::sample::Op;

/// How a hook is attached, cheapest first: the report's tier.
pub use iommutop_model::report::Tier;

/// The programs of one tier that hook a function: at its entry (none where the function only
/// ends a call another hook opened: `dma_iova_sync` closes the map `dma_iova_try_alloc` began)
/// and at its exit.
#[derive(Debug, Clone, Copy)]
pub struct Programs {
    pub entry: Option<&'static str>,
    pub exit: &'static str,
}

impl Programs {
    const fn pair((entry, exit): (&'static str, &'static str)) -> Programs {
        Programs {
            entry: Some(entry),
            exit,
        }
    }

    const fn exit_only(exit: &'static str) -> Programs {
        Programs { entry: None, exit }
    }

    /// Every program, entry first.
    pub fn names(&self) -> impl Iterator<Item = &'static str> {
        self.entry.into_iter().chain([self.exit])
    }
}

/// A kernel function hooked at entry and exit.
#[derive(Debug, Clone, Copy)]
pub struct FunctionHook {
    pub symbol: &'static str,
    /// Kernels the symbol exists in, for humans (the loader checks the running kernel).
    pub kernels: &'static str,
    /// fentry and fexit programs (each bound to this one function when loaded); None where the
    /// function only exists on kernels whose fexit cannot read a return value (before 5.17).
    pub fentry: Option<Programs>,
    /// kprobe and kretprobe programs (may be shared with other functions of the same shape).
    pub kprobe: Programs,
    /// Attach only on kernels that have this function too: an era's own code path, whose
    /// function names live on in later kernels with other callers (VT-d's `__domain_mapping`
    /// is hooked only where `intel_map_page`, the pre-5.11 DMA ops, exists).
    pub only_with: Option<&'static str>,
    /// Not attached on kernels that have this function: there the hooked function only wraps
    /// it (6.18's `dma_map_page_attrs` calls `dma_map_phys` for every map), so hooking the inner
    /// one alone counts every call at half the cost.
    pub unless: Option<&'static str>,
    /// The IOMMU driver the function belongs to; `None` for the DMA API and the IOMMU core,
    /// which every vendor's devices go through. Left out on machines whose IOMMUs are all of
    /// other vendors: never called there, each would only cost two programs to verify and attach.
    pub vendor: Option<IommuVendor>,
}

impl FunctionHook {
    /// The same hook, left out where `inner` exists (see [`FunctionHook::unless`]).
    const fn unless(self, inner: &'static str) -> FunctionHook {
        FunctionHook {
            unless: Some(inner),
            ..self
        }
    }

    /// The same hook, a function of `vendor`'s driver (see [`FunctionHook::vendor`]).
    const fn of(self, vendor: IommuVendor) -> FunctionHook {
        FunctionHook {
            vendor: Some(vendor),
            ..self
        }
    }
}

/// A kernel tracepoint, attached as a BTF-typed tracepoint (`tp_btf`).
#[derive(Debug, Clone, Copy)]
pub struct TracepointHook {
    pub category: &'static str,
    pub name: &'static str,
    pub kernels: &'static str,
    pub program: &'static str,
}

/// One logical probe point: what it measures and every way to hook it.
#[derive(Debug, Clone, Copy)]
pub struct Point {
    pub name: &'static str,
    pub op: Op,
    pub what: &'static str,
    pub functions: &'static [FunctionHook],
    pub tracepoints: &'static [TracepointHook],
    /// What the point misses on the kernels of an era, said in every report made there.
    pub caveats: &'static [EraCaveat],
}

/// A known gap of a point on the kernels that have `era_marker`, on every tier or only on one.
#[derive(Debug, Clone, Copy)]
pub struct EraCaveat {
    pub era_marker: &'static str,
    pub says: &'static str,
    /// Only where the point got this tier (what the count-only tier cannot see).
    pub on_tier: Option<Tier>,
}

/// What the count-only tier of the DMA API points cannot see on kernels with the IOVA API.
const IOVA_API_UNSEEN_BY_TRACEPOINTS: EraCaveat = EraCaveat {
    era_marker: "dma_iova_try_alloc",
    says: "on the tracepoint tier, maps and unmaps made through the IOVA API (the block layer's \
           multi-segment requests, 6.17+) have no dma: event and are not counted, and \
           scatter-gather maps count no bytes; fentry or kprobes see them",
    on_tier: Some(Tier::Tracepoint),
};

const fn function(
    symbol: &'static str,
    kernels: &'static str,
    fentry: (&'static str, &'static str),
    kprobe: (&'static str, &'static str),
) -> FunctionHook {
    FunctionHook {
        symbol,
        kernels,
        fentry: Some(Programs::pair(fentry)),
        kprobe: Programs::pair(kprobe),
        only_with: None,
        unless: None,
        vendor: None,
    }
}

/// A function hooked at its exit alone: it ends a call whose frame another hook opened.
const fn exit_function(
    symbol: &'static str,
    kernels: &'static str,
    fexit: &'static str,
    kretprobe: &'static str,
) -> FunctionHook {
    FunctionHook {
        symbol,
        kernels,
        fentry: Some(Programs::exit_only(fexit)),
        kprobe: Programs::exit_only(kretprobe),
        only_with: None,
        unless: None,
        vendor: None,
    }
}

/// A function of one kernel era's own code path, hooked only where `era_marker` exists (see
/// [`FunctionHook::only_with`]).
const fn era_function(
    symbol: &'static str,
    kernels: &'static str,
    era_marker: &'static str,
    fentry: (&'static str, &'static str),
    kprobe: (&'static str, &'static str),
) -> FunctionHook {
    FunctionHook {
        symbol,
        kernels,
        fentry: Some(Programs::pair(fentry)),
        kprobe: Programs::pair(kprobe),
        only_with: Some(era_marker),
        unless: None,
        vendor: None,
    }
}

const fn tracepoint(
    category: &'static str,
    name: &'static str,
    kernels: &'static str,
    program: &'static str,
) -> TracepointHook {
    TracepointHook {
        category,
        name,
        kernels,
        program,
    }
}

pub const POINTS: &[Point] = &[
    Point {
        name: "dma_map",
        op: Op::DmaMap,
        what: "DMA API map calls, per device",
        functions: &[
            function(
                "dma_map_page_attrs",
                "all (not where dma_map_phys exists: 6.18+ wraps it)",
                ("dma__map_page__fentry", "dma__map_page__fexit"),
                ("dma__map_page__kprobe", "dma__map__kretprobe"),
            )
            .unless("dma_map_phys"),
            function(
                "dma_map_phys",
                "6.18+",
                ("dma__map_phys__fentry", "dma__map_phys__fexit"),
                ("dma__map_phys__kprobe", "dma__map__kretprobe"),
            ),
            function(
                "dma_map_sg_attrs",
                "all",
                ("dma__map_sg__fentry", "dma__map_sg__fexit"),
                ("dma__map_sg__kprobe", "dma__map_sg__kretprobe"),
            ),
            function(
                "dma_map_sgtable",
                "all (nvme-pci's multi-segment requests)",
                ("dma__map_sgtable__fentry", "dma__map_sgtable__fexit"),
                ("dma__map_sgtable__kprobe", "dma__map_sgtable__kretprobe"),
            ),
            function(
                "dma_map_resource",
                "all",
                ("dma__map_resource__fentry", "dma__map_resource__fexit"),
                ("dma__map_resource__kprobe", "dma__map__kretprobe"),
            ),
            function(
                "dma_iova_try_alloc",
                "6.16+ (opens a map of the IOVA API: multi-segment block requests, 6.17+)",
                ("dma__iova_try_alloc__fentry", "dma__iova_try_alloc__fexit"),
                (
                    "dma__iova_try_alloc__kprobe",
                    "dma__iova_try_alloc__kretprobe",
                ),
            ),
            exit_function(
                "dma_iova_sync",
                "6.16+ (closes the map dma_iova_try_alloc opened)",
                "dma__iova_sync__fexit",
                "dma__iova_sync__kretprobe",
            ),
        ],
        tracepoints: &[
            tracepoint("dma", "dma_map_page", "6.12-6.17", "dma__map__tp"),
            tracepoint("dma", "dma_map_phys", "6.18+", "dma__map__tp"),
            tracepoint("dma", "dma_map_sg", "6.12+", "dma__map_sg__tp"),
        ],
        caveats: &[IOVA_API_UNSEEN_BY_TRACEPOINTS],
    },
    Point {
        name: "dma_unmap",
        op: Op::DmaUnmap,
        what: "DMA API unmap calls, per device",
        functions: &[
            function(
                "dma_unmap_page_attrs",
                "all (not where dma_unmap_phys exists: 6.18+ wraps it)",
                ("dma__unmap_page__fentry", "dma__unmap_page__fexit"),
                ("dma__unmap__kprobe", "dma__unmap__kretprobe"),
            )
            .unless("dma_unmap_phys"),
            function(
                "dma_unmap_phys",
                "6.18+",
                ("dma__unmap_phys__fentry", "dma__unmap_phys__fexit"),
                ("dma__unmap_phys__kprobe", "dma__unmap__kretprobe"),
            ),
            function(
                "dma_unmap_sg_attrs",
                "all (also dma_unmap_sgtable, an inline)",
                ("dma__unmap_sg__fentry", "dma__unmap_sg__fexit"),
                ("dma__unmap_sg__kprobe", "dma__unmap__kretprobe"),
            ),
            function(
                "dma_unmap_resource",
                "all",
                ("dma__unmap_resource__fentry", "dma__unmap_resource__fexit"),
                ("dma__unmap__kprobe", "dma__unmap__kretprobe"),
            ),
            function(
                "dma_iova_destroy",
                "6.16+ (undoes a map of the IOVA API)",
                ("dma__iova_destroy__fentry", "dma__iova_destroy__fexit"),
                ("dma__iova_destroy__kprobe", "dma__unmap__kretprobe"),
            ),
        ],
        tracepoints: &[
            tracepoint("dma", "dma_unmap_page", "6.12-6.17", "dma__unmap__tp"),
            tracepoint("dma", "dma_unmap_phys", "6.18+", "dma__unmap__tp"),
            tracepoint("dma", "dma_unmap_sg", "6.12+", "dma__unmap_sg__tp"),
        ],
        caveats: &[IOVA_API_UNSEEN_BY_TRACEPOINTS],
    },
    Point {
        name: "iommu_map",
        op: Op::IommuMap,
        what: "IOMMU page-table map, charged to the device whose DMA map it serves",
        functions: &[
            function(
                "iommu_map",
                "all (not where iommu_map_nosync exists: 6.16+ wraps it)",
                ("iommu__map__fentry", "iommu__map__fexit"),
                ("iommu__map__kprobe", "iommu__map__kretprobe"),
            )
            .unless("iommu_map_nosync"),
            function(
                "iommu_map_nosync",
                "6.16+ (also dma_iova_link's page tables)",
                ("iommu__map_nosync__fentry", "iommu__map_nosync__fexit"),
                ("iommu__map_nosync__kprobe", "iommu__map__kretprobe"),
            ),
            function(
                "iommu_map_atomic",
                "<=6.2",
                ("iommu__map_atomic__fentry", "iommu__map_atomic__fexit"),
                ("iommu__map__kprobe", "iommu__map__kretprobe"),
            ),
            function(
                "iommu_map_sg",
                "6.3+ (scatter-gather maps of dma-iommu)",
                ("iommu__map_sg__fentry", "iommu__map_sg__fexit"),
                ("iommu__map_sg__kprobe", "iommu__map_sg__kretprobe"),
            ),
            function(
                "iommu_map_sg_atomic",
                "<=6.2 (scatter-gather maps of dma-iommu)",
                (
                    "iommu__map_sg_atomic__fentry",
                    "iommu__map_sg_atomic__fexit",
                ),
                ("iommu__map_sg__kprobe", "iommu__map_sg__kretprobe"),
            ),
            era_function(
                "__domain_mapping",
                "<=5.10 (VT-d's own DMA ops)",
                "intel_map_page",
                (
                    "iommu__intel_domain_mapping__fentry",
                    "iommu__intel_domain_mapping__fexit",
                ),
                (
                    "iommu__intel_domain_mapping__kprobe",
                    "iommu__map__kretprobe",
                ),
            )
            .of(IommuVendor::Intel),
        ],
        tracepoints: &[tracepoint("iommu", "map", "all", "iommu__map__tp")],
        caveats: &[],
    },
    Point {
        name: "iommu_unmap",
        op: Op::IommuUnmap,
        what: "IOMMU page-table unmap",
        functions: &[
            function(
                "iommu_unmap",
                "all",
                ("iommu__unmap__fentry", "iommu__unmap__fexit"),
                ("iommu__unmap__kprobe", "iommu__unmap__kretprobe"),
            ),
            function(
                "iommu_unmap_fast",
                "all",
                ("iommu__unmap_fast__fentry", "iommu__unmap_fast__fexit"),
                ("iommu__unmap__kprobe", "iommu__unmap__kretprobe"),
            ),
            era_function(
                "domain_unmap",
                "<=5.10 (VT-d's own DMA ops)",
                "intel_map_page",
                (
                    "iommu__intel_domain_unmap__fentry",
                    "iommu__intel_domain_unmap__fexit",
                ),
                (
                    "iommu__intel_domain_unmap__kprobe",
                    "iommu__intel_domain_unmap__kretprobe",
                ),
            )
            .of(IommuVendor::Intel),
        ],
        tracepoints: &[tracepoint("iommu", "unmap", "all", "iommu__unmap__tp")],
        caveats: &[],
    },
    Point {
        name: "iova_alloc",
        op: Op::IovaAlloc,
        what: "IOVA allocation, per-CPU cache path",
        functions: &[function(
            "alloc_iova_fast",
            "all",
            ("iova__alloc_fast__fentry", "iova__alloc_fast__fexit"),
            ("iova__alloc_fast__kprobe", "iova__alloc_fast__kretprobe"),
        )],
        tracepoints: &[],
        caveats: &[],
    },
    Point {
        name: "iova_alloc_slow",
        op: Op::IovaAllocSlow,
        what: "IOVA allocation through the rbtree (cache miss)",
        functions: &[function(
            "alloc_iova",
            "all",
            ("iova__alloc_slow__fentry", "iova__alloc_slow__fexit"),
            ("iova__alloc_slow__kprobe", "iova__alloc_slow__kretprobe"),
        )],
        tracepoints: &[],
        caveats: &[],
    },
    Point {
        name: "iova_free",
        op: Op::IovaFree,
        what: "IOVA release",
        functions: &[function(
            "free_iova_fast",
            "all",
            ("iova__free_fast__fentry", "iova__free_fast__fexit"),
            ("iova__free_fast__kprobe", "iova__free_fast__kretprobe"),
        )],
        tracepoints: &[],
        caveats: &[EraCaveat {
            era_marker: "init_iova_flush_queue",
            says: "IOVAs freed by a lazy domain's flush queue are not seen on this kernel \
                   (free_iova_fast is inlined into iova.c's fq_ring_free, before 5.17); \
                   strict unmaps' frees are counted",
            on_tier: None,
        }],
    },
    Point {
        name: "iotlb_sync",
        op: Op::IotlbSync,
        what: "IOTLB sync after a map (vendor driver)",
        functions: &[
            function(
                "intel_iommu_iotlb_sync_map",
                "all (VT-d)",
                (
                    "iotlb__intel_sync_map__fentry",
                    "iotlb__intel_sync_map__fexit",
                ),
                ("iotlb__sync_map__kprobe", "iotlb__sync_map__kretprobe"),
            )
            .of(IommuVendor::Intel),
            function(
                "amd_iommu_iotlb_sync_map",
                "AMD-Vi",
                ("iotlb__amd_sync_map__fentry", "iotlb__amd_sync_map__fexit"),
                ("iotlb__sync_map__kprobe", "iotlb__sync_map__kretprobe"),
            )
            .of(IommuVendor::Amd),
            function(
                "viommu_iotlb_sync_map",
                "virtio-iommu (a module: kprobe only)",
                (
                    "iotlb__virtio_sync_map__fentry",
                    "iotlb__virtio_sync_map__fexit",
                ),
                ("iotlb__sync_map__kprobe", "iotlb__sync_map__kretprobe"),
            )
            .of(IommuVendor::Virtio),
        ],
        tracepoints: &[],
        caveats: &[EraCaveat {
            era_marker: "arm_smmu_cmdq_issue_cmdlist",
            says: "the ARM SMMUv3 driver has no IOTLB sync after a map (it invalidates on unmap \
                   only): devices behind an SMMUv3 have none to count",
            on_tier: None,
        }],
    },
    Point {
        name: "iotlb_flush",
        op: Op::IotlbFlush,
        what: "IOTLB invalidation and the wait for it",
        functions: &[
            function(
                "qi_submit_sync",
                "all (VT-d)",
                ("iotlb__qi_submit__fentry", "iotlb__qi_submit__fexit"),
                ("iotlb__qi_submit__kprobe", "iotlb__qi_submit__kretprobe"),
            )
            .of(IommuVendor::Intel),
            function(
                "amd_iommu_domain_flush_pages",
                "6.7+ (AMD-Vi)",
                ("iotlb__flush_pages__fentry", "iotlb__flush_pages__fexit"),
                (
                    "iotlb__flush_pages__kprobe",
                    "iotlb__flush_pages__kretprobe",
                ),
            )
            .of(IommuVendor::Amd),
            function(
                "amd_iommu_iotlb_sync",
                "all (AMD-Vi)",
                (
                    "iotlb__amd_iotlb_sync__fentry",
                    "iotlb__amd_iotlb_sync__fexit",
                ),
                (
                    "iotlb__gather_sync__kprobe",
                    "iotlb__flush_pages__kretprobe",
                ),
            )
            .of(IommuVendor::Amd),
            function(
                "viommu_iotlb_sync",
                "virtio-iommu (a module: kprobe)",
                (
                    "iotlb__virtio_iotlb_sync__fentry",
                    "iotlb__virtio_iotlb_sync__fexit",
                ),
                (
                    "iotlb__gather_sync__kprobe",
                    "iotlb__flush_pages__kretprobe",
                ),
            )
            .of(IommuVendor::Virtio),
            function(
                "__arm_smmu_tlb_inv_range",
                "6.1-6.12 (SMMUv3)",
                (
                    "iotlb__smmu_inv_range__fentry",
                    "iotlb__smmu_inv_range__fexit",
                ),
                ("iotlb__range_inv__kprobe", "iotlb__flush_pages__kretprobe"),
            )
            .of(IommuVendor::SmmuV3),
            function(
                "arm_smmu_domain_inv_range",
                "7.3 (SMMUv3)",
                (
                    "iotlb__smmu_domain_inv__fentry",
                    "iotlb__smmu_domain_inv__fexit",
                ),
                ("iotlb__range_inv__kprobe", "iotlb__flush_pages__kretprobe"),
            )
            .of(IommuVendor::SmmuV3),
            function(
                "__arm_smmu_domain_inv_range",
                "7.3 (SMMUv3; inside arm_smmu_domain_inv_range, counted once with it)",
                (
                    "iotlb__smmu_domain_inv_invs__fentry",
                    "iotlb__smmu_domain_inv_invs__fexit",
                ),
                ("iotlb__range_inv__kprobe", "iotlb__flush_pages__kretprobe"),
            )
            .of(IommuVendor::SmmuV3),
            function(
                "intel_flush_iotlb_all",
                "all (VT-d; whole domain)",
                (
                    "iotlb__intel_flush_all__fentry",
                    "iotlb__intel_flush_all__fexit",
                ),
                ("iotlb__flush_all__kprobe", "iotlb__flush_pages__kretprobe"),
            )
            .of(IommuVendor::Intel),
            function(
                "amd_iommu_flush_iotlb_all",
                "all (AMD-Vi; whole domain)",
                (
                    "iotlb__amd_flush_all__fentry",
                    "iotlb__amd_flush_all__fexit",
                ),
                ("iotlb__flush_all__kprobe", "iotlb__flush_pages__kretprobe"),
            )
            .of(IommuVendor::Amd),
            function(
                "viommu_flush_iotlb_all",
                "virtio-iommu (a module: kprobe; whole domain)",
                (
                    "iotlb__virtio_flush_all__fentry",
                    "iotlb__virtio_flush_all__fexit",
                ),
                ("iotlb__flush_all__kprobe", "iotlb__flush_pages__kretprobe"),
            )
            .of(IommuVendor::Virtio),
            function(
                "arm_smmu_tlb_inv_context",
                "6.1+ (SMMUv3; whole context)",
                (
                    "iotlb__smmu_flush_all__fentry",
                    "iotlb__smmu_flush_all__fexit",
                ),
                ("iotlb__flush_all__kprobe", "iotlb__flush_pages__kretprobe"),
            )
            .of(IommuVendor::SmmuV3),
        ],
        tracepoints: &[tracepoint(
            "intel_iommu",
            "qi_submit",
            "6.1+ (VT-d)",
            "iotlb__qi_submit__tp",
        )],
        caveats: &[],
    },
    Point {
        name: "fq_flush",
        op: Op::FqFlush,
        what: "deferred flush-queue timer of lazy (DMA-FQ) domains",
        functions: &[function(
            "fq_flush_timeout",
            "5.17+",
            ("iotlb__fq_timeout__fentry", "iotlb__fq_timeout__fexit"),
            ("iotlb__fq_timeout__kprobe", "iotlb__fq_timeout__kretprobe"),
        )],
        tracepoints: &[],
        caveats: &[],
    },
    Point {
        name: "dma_alloc",
        op: Op::DmaAlloc,
        what: "coherent DMA buffers allocated, per device (not per-I/O maps)",
        functions: &[
            function(
                "dma_alloc_attrs",
                "all",
                ("dma__alloc_attrs__fentry", "dma__alloc_attrs__fexit"),
                ("dma__alloc__kprobe", "dma__alloc__kretprobe"),
            ),
            function(
                "dma_alloc_pages",
                "all",
                ("dma__alloc_pages__fentry", "dma__alloc_pages__fexit"),
                ("dma__alloc__kprobe", "dma__alloc__kretprobe"),
            ),
            function(
                "dma_alloc_noncontiguous",
                "all",
                (
                    "dma__alloc_noncontig__fentry",
                    "dma__alloc_noncontig__fexit",
                ),
                ("dma__alloc__kprobe", "dma__alloc__kretprobe"),
            ),
        ],
        tracepoints: &[],
        caveats: &[],
    },
    Point {
        name: "dma_free",
        op: Op::DmaFree,
        what: "coherent DMA buffers released, per device",
        functions: &[
            function(
                "dma_free_attrs",
                "all",
                ("dma__free_attrs__fentry", "dma__free_attrs__fexit"),
                ("dma__free__kprobe", "dma__free__kretprobe"),
            ),
            function(
                "dma_free_pages",
                "all",
                ("dma__free_pages__fentry", "dma__free_pages__fexit"),
                ("dma__free__kprobe", "dma__free__kretprobe"),
            ),
            function(
                "dma_free_noncontiguous",
                "all",
                ("dma__free_noncontig__fentry", "dma__free_noncontig__fexit"),
                ("dma__free__kprobe", "dma__free__kretprobe"),
            ),
        ],
        tracepoints: &[],
        caveats: &[],
    },
    Point {
        name: "block_complete",
        op: Op::Completion,
        what: "completed block requests, per disk",
        functions: &[],
        tracepoints: &[tracepoint(
            "block",
            "block_rq_complete",
            "all",
            "completion__block_rq__tp",
        )],
        caveats: &[],
    },
    Point {
        name: "block_requeue",
        op: Op::Requeue,
        what: "block requests requeued (mapped again when issued again), per disk",
        functions: &[],
        tracepoints: &[tracepoint(
            "block",
            "block_rq_requeue",
            "all",
            "completion__block_requeue__tp",
        )],
        caveats: &[],
    },
    Point {
        name: "napi_poll",
        op: Op::Completion,
        what: "packets received (NAPI polls' work), per NIC",
        functions: &[],
        tracepoints: &[tracepoint(
            "napi",
            "napi_poll",
            "all",
            "completion__napi_poll__tp",
        )],
        caveats: &[],
    },
    Point {
        name: "net_xmit",
        op: Op::TxPackets,
        what: "packets a NIC's driver accepted for transmit, per NIC",
        functions: &[],
        tracepoints: &[tracepoint(
            "net",
            "net_dev_xmit",
            "all",
            "completion__net_dev_xmit__tp",
        )],
        caveats: &[],
    },
];

/// Looks a point up by name (`dma_map`, ...).
pub fn point(name: &str) -> Option<&'static Point> {
    POINTS.iter().find(|p| p.name == name)
}

/// The kernels a hook (`dma_map_page_attrs`, `dma:dma_map_page`) is known to exist in.
pub fn hook_kernels(hook: &str) -> Option<&'static str> {
    POINTS.iter().find_map(|p| {
        p.functions
            .iter()
            .find(|f| f.symbol == hook)
            .map(|f| f.kernels)
            .or_else(|| {
                p.tracepoints
                    .iter()
                    .find(|t| hook.split_once(':') == Some((t.category, t.name)))
                    .map(|t| t.kernels)
            })
    })
}

/// Every kernel function the table asks whether the kernel has: the hooked ones, and those
/// that mark an era or a wrapper.
pub fn symbols_asked_about() -> std::collections::HashSet<&'static str> {
    POINTS
        .iter()
        .flat_map(|point| {
            let hooks = point.functions.iter().flat_map(|hook| {
                [Some(hook.symbol), hook.only_with, hook.unless]
                    .into_iter()
                    .flatten()
            });
            hooks.chain(point.caveats.iter().map(|caveat| caveat.era_marker))
        })
        .collect()
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
