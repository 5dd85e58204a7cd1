//! IOMMU hardware units and groups.

use super::fs::{entry_names, link_name, read_trimmed};
use iommutop_model::facts::{IommuGroup, IommuUnit, IommuVendor};
use std::path::Path;

/// `/sys/class/iommu/*`: `dmar0` (Intel), `ivhd0` (AMD), `smmu3.0x…` (SMMUv3), and units named
/// after their device (virtio-iommu's, after its PCI function), told by the driver of the device
/// the unit's `device` link names.
pub fn iommu_units(root: &Path) -> Vec<IommuUnit> {
    let class = root.join("sys/class/iommu");
    entry_names(&class)
        .into_iter()
        .map(|name| IommuUnit {
            vendor: IommuVendor::from_unit_name(&name).or_else(|| {
                let driver = link_name(&class.join(&name).join("device/driver"))?;
                IommuVendor::from_driver_name(&driver)
            }),
            name,
        })
        .collect()
}

/// `/sys/kernel/iommu_groups/N/{type,devices/*}`, by group number.
pub fn iommu_groups(root: &Path) -> Vec<IommuGroup> {
    let dir = root.join("sys/kernel/iommu_groups");
    let mut groups: Vec<IommuGroup> = entry_names(&dir)
        .into_iter()
        .filter_map(|name| {
            let id = name.parse().ok()?;
            let group = dir.join(&name);
            Some(IommuGroup {
                id,
                domain_type: read_trimmed(&group.join("type")),
                devices: entry_names(&group.join("devices")),
            })
        })
        .collect();
    groups.sort_by_key(|group| group.id);
    groups
}
