//! Which kernel code translates a run's DMA, read from the hooks its probes attached: a hook of
//! one era's own code path is attached only on the kernels of that era (see the probe table's
//! `only_with`), so the report shows the era it was made on.

use crate::report::Report;

/// The code between the DMA API and the IOMMU's page tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DmaPath {
    /// VT-d's own DMA ops (5.10 and before): `intel_map_page` → `__domain_mapping`, IOTLB
    /// flushes by `intel_unmap`, the lazy flush queue in iova.c.
    VtdOwnOps,
    /// dma-iommu (every vendor since 5.11): `iommu_dma_map_*` → `iommu_map`, an IOTLB sync after
    /// each map where the driver asks for one, the lazy flush queue in dma-iommu.c.
    DmaIommu,
}

/// The hook that exists only where VT-d has DMA ops of its own.
const VTD_OWN_OPS_HOOK: &str = "__domain_mapping";

impl DmaPath {
    pub fn describe(self) -> &'static str {
        match self {
            DmaPath::VtdOwnOps => {
                "VT-d's own DMA ops (intel_map_page → __domain_mapping; flush queue in iova.c)"
            }
            DmaPath::DmaIommu => {
                "dma-iommu (iommu_dma_map_* → iommu_map, IOTLB sync after a map; flush queue in \
                 dma-iommu.c)"
            }
        }
    }
}

/// The path of a run whose host has an IOMMU; `None` without one.
pub fn dma_path(report: &Report) -> Option<DmaPath> {
    if !report.host.iommu.present {
        return None;
    }
    let own_ops = report.probes.iter().any(|p| {
        p.point == "iommu_map"
            && p.symbol.as_deref().is_some_and(|symbols| {
                symbols
                    .split(", ")
                    .any(|s| s.split_whitespace().next() == Some(VTD_OWN_OPS_HOOK))
            })
    });
    Some(if own_ops {
        DmaPath::VtdOwnOps
    } else {
        DmaPath::DmaIommu
    })
}
