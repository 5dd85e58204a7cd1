//! Which IOMMU drivers run on this machine, from its units in `/sys/class/iommu`: a vendor's
//! driver functions are hooked only where that vendor's IOMMU is (on a VT-d machine AMD-Vi's four
//! functions would cost eight programs to verify and attach, and are never called).

use iommutop_model::facts::IommuVendor;
use std::collections::BTreeSet;
use std::path::Path;

/// The vendors of this machine's IOMMU units, when every unit's vendor is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum MachineVendors {
    /// Every unit is of one of these vendors (at least one unit).
    Only(BTreeSet<IommuVendor>),
    /// No unit (no IOMMU, or a driver not yet loaded), or one of a vendor not known here: every
    /// vendor's functions are hooked, as absent ones cost nothing.
    Unknown,
}

impl MachineVendors {
    /// This machine's, from `root`'s `/sys/class/iommu`.
    pub(crate) fn of_machine(root: &Path) -> MachineVendors {
        let units = crate::sysinfo::iommu_units(root);
        let vendors: Option<BTreeSet<IommuVendor>> = units.iter().map(|u| u.vendor).collect();
        match vendors {
            Some(vendors) if !vendors.is_empty() => MachineVendors::Only(vendors),
            _ => MachineVendors::Unknown,
        }
    }

    /// Why `vendor`'s driver functions are left out here, or `None` where they are hooked.
    pub(crate) fn lacks(&self, vendor: IommuVendor) -> Option<String> {
        let MachineVendors::Only(vendors) = self else {
            return None;
        };
        if vendors.contains(&vendor) {
            return None;
        }
        let here: Vec<&str> = vendors.iter().map(|v| v.name()).collect();
        Some(format!(
            "a function of the {} driver, and this machine's IOMMUs are {}",
            vendor.name(),
            here.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine_with_units(names: &[&str]) -> (tempfile::TempDir, MachineVendors) {
        let root = tempfile::tempdir().expect("temporary directory");
        let class = root.path().join("sys/class/iommu");
        std::fs::create_dir_all(&class).expect("sys/class/iommu");
        for name in names {
            std::fs::create_dir(class.join(name)).expect("a unit");
        }
        let vendors = MachineVendors::of_machine(root.path());
        (root, vendors)
    }

    #[test]
    fn another_vendors_functions_are_left_out_and_the_machines_are_kept() {
        let (_root, vendors) = machine_with_units(&["dmar0", "dmar1"]);
        assert_eq!(vendors.lacks(IommuVendor::Intel), None);
        let why = vendors.lacks(IommuVendor::Amd).expect("AMD-Vi's left out");
        assert_eq!(
            why,
            "a function of the amd driver, and this machine's IOMMUs are intel"
        );
        assert!(vendors.lacks(IommuVendor::Virtio).is_some());
    }

    #[test]
    fn without_units_or_with_an_unknown_one_every_vendor_is_kept() {
        let (_root, none) = machine_with_units(&[]);
        assert_eq!(none, MachineVendors::Unknown);
        let (_root, unknown) = machine_with_units(&["dmar0", "arm-smmu.0"]);
        assert_eq!(unknown, MachineVendors::Unknown);
        for vendor in [IommuVendor::Intel, IommuVendor::Amd, IommuVendor::SmmuV3] {
            assert_eq!(unknown.lacks(vendor), None);
        }
    }

    #[test]
    fn two_vendors_keep_both() {
        let (_root, vendors) = machine_with_units(&["dmar0", "virtio0"]);
        assert_eq!(vendors.lacks(IommuVendor::Virtio), None);
        assert_eq!(vendors.lacks(IommuVendor::Intel), None);
        assert!(vendors.lacks(IommuVendor::Amd).is_some());
    }
}
