//! `--points LIST`: which probe points to attach. Fewer points cost less; a point that charges
//! its work to the device of the DMA call it nests in brings the DMA API points with it, or
//! that work would land on `unattributed`.

use super::table::{Point, POINTS};
use std::collections::BTreeSet;

/// Points that the IOMMU-side points need to know whose work they see.
const ATTRIBUTION: [&str; 2] = ["dma_map", "dma_unmap"];

/// Points whose work is charged to the DMA call they nest in.
const NESTED: [&str; 8] = [
    "iommu_map",
    "iommu_unmap",
    "iova_alloc",
    "iova_alloc_slow",
    "iova_free",
    "iotlb_sync",
    "iotlb_flush",
    "fq_flush",
];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SelectionError {
    #[error("no point `{0}`: use a comma-separated list of {names}", names = point_names())]
    Unknown(String),
    #[error("the list is empty: name at least one of {}", point_names())]
    Empty,
}

fn point_names() -> String {
    POINTS.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

/// The points to attach: all of them, or a list and what it needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PointSelection {
    only: Option<BTreeSet<&'static str>>,
}

impl PointSelection {
    pub fn all() -> PointSelection {
        PointSelection::default()
    }

    /// `dma_map,iommu_map`: those points, plus the DMA API points that nested ones need.
    pub fn parse(list: &str) -> Result<PointSelection, SelectionError> {
        let mut chosen = BTreeSet::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let point = POINTS
                .iter()
                .find(|p| p.name == name)
                .ok_or_else(|| SelectionError::Unknown(name.to_string()))?;
            chosen.insert(point.name);
            if NESTED.contains(&point.name) {
                chosen.extend(ATTRIBUTION);
            }
        }
        if chosen.is_empty() {
            return Err(SelectionError::Empty);
        }
        Ok(PointSelection { only: Some(chosen) })
    }

    pub fn includes(&self, point: &Point) -> bool {
        self.only
            .as_ref()
            .is_none_or(|only| only.contains(point.name))
    }

    /// The points left out, for the report to say so (empty when all are attached).
    pub fn left_out(&self) -> Vec<&'static str> {
        POINTS
            .iter()
            .filter(|p| !self.includes(p))
            .map(|p| p.name)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(selection: &PointSelection) -> Vec<&'static str> {
        POINTS
            .iter()
            .filter(|p| selection.includes(p))
            .map(|p| p.name)
            .collect()
    }

    #[test]
    fn all_points_by_default() {
        assert_eq!(names(&PointSelection::all()).len(), POINTS.len());
        assert!(PointSelection::all().left_out().is_empty());
    }

    #[test]
    fn nested_points_bring_the_dma_api_points_that_attribute_them() {
        let s = PointSelection::parse("iommu_map").expect("valid");
        assert_eq!(names(&s), ["dma_map", "dma_unmap", "iommu_map"]);
        let s = PointSelection::parse("dma_map, block_complete").expect("valid");
        assert_eq!(names(&s), ["dma_map", "block_complete"]);
        assert!(s.left_out().contains(&"iommu_map"));
    }

    #[test]
    fn unknown_and_empty_lists_are_refused_with_the_valid_names() {
        let e = PointSelection::parse("dma_map,dma_mapp").expect_err("unknown");
        assert_eq!(e, SelectionError::Unknown("dma_mapp".into()));
        assert!(
            e.to_string().contains("dma_map, dma_unmap, iommu_map"),
            "{e}"
        );
        assert_eq!(PointSelection::parse(" , "), Err(SelectionError::Empty));
    }
}
