//! Where the device is: what the parent, which did the binding, tells the worker.

/// The device's PCI address and IOMMU group, and the roots its files are under.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Located {
    pub pci: iommutop_abi::pci::PciAddress,
    pub group: u32,
    /// `/sys` and `/dev` (other roots only in tests).
    pub sys_root: std::path::PathBuf,
    pub dev_root: std::path::PathBuf,
}
