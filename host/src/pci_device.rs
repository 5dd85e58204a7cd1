//! PCI functions as sysfs shows them: addresses, and what driver, IOMMU group and class each
//! has. Reads only; moving a function to another driver is [`crate::pci::rebind`].

use crate::error::HostError;
use crate::root::HostRoot;
use crate::sysfs::{entry_names, link_name, read, read_hex};
use iommutop_abi::pci::PciAddress;
use std::path::Path;

/// The PCI address in a resolved sysfs path: the last component that is one.
pub fn pci_address_in(path: &Path) -> Option<PciAddress> {
    path.components()
        .rev()
        .find_map(|c| c.as_os_str().to_str()?.parse().ok())
}

/// The PCI address behind a sysfs link (`/sys/class/net/eth0/device`).
pub fn pci_address_of(sysfs_link: &Path) -> Option<PciAddress> {
    pci_address_in(&std::fs::canonicalize(sysfs_link).ok()?)
}

/// A PCI function's driver state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciState {
    pub driver: Option<String>,
    /// `driver_override`, `None` when unset (`(null)`).
    pub driver_override: Option<String>,
    pub iommu_group: Option<u32>,
    pub class: u32,
}

/// Reads `/sys/bus/pci/devices/ADDRESS`.
pub fn state(root: &HostRoot, address: &str) -> Result<PciState, HostError> {
    let dir = root.pci_device(address);
    read(&dir.join("class"))?;
    let driver_override = read(&dir.join("driver_override"))
        .ok()
        .filter(|s| !s.is_empty() && s != "(null)");
    Ok(PciState {
        driver: link_name(&dir.join("driver")),
        driver_override,
        iommu_group: link_name(&dir.join("iommu_group")).and_then(|g| g.parse().ok()),
        class: read_hex(&dir.join("class")).unwrap_or(0),
    })
}

/// Every PCI function of a class (`0x010802`: NVMe), sorted.
pub fn functions_of_class(root: &HostRoot, class: u32) -> Vec<String> {
    entry_names(&root.sys("bus/pci/devices"))
        .into_iter()
        .filter(|name| state(root, name).is_ok_and(|s| s.class == class))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_addresses_are_found_in_sysfs_paths() {
        let path = Path::new("/sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1");
        assert_eq!(
            pci_address_in(path).map(|a| a.to_string()).as_deref(),
            Some("0000:00:04.0")
        );
        let bridged = Path::new("/sys/devices/pci0000:00/0000:00:1c.0/0000:01:00.0/net/eth0");
        assert_eq!(
            pci_address_in(bridged).map(|a| a.to_string()).as_deref(),
            Some("0000:01:00.0")
        );
        assert_eq!(
            pci_address_in(Path::new("/sys/devices/virtual/block/loop0")),
            None
        );
    }
}
