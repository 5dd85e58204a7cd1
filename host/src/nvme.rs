//! NVMe controllers and the block devices of their namespaces (multipath heads included).

use crate::pci_device::functions_of_class;
use crate::root::HostRoot;
use crate::sysfs::entry_names;
use std::path::Path;

/// PCI class of an NVMe controller (mass storage, non-volatile memory, NVMe interface).
pub const NVME_CLASS: u32 = 0x01_08_02;

/// Every NVMe controller's PCI address, sorted.
pub fn controllers(root: &HostRoot) -> Vec<String> {
    functions_of_class(root, NVME_CLASS)
}

/// The block devices of a controller's namespaces (`nvme0n1`, …), including the multipath heads
/// the controller is a path of; sorted.
pub fn namespaces(root: &HostRoot, address: &str) -> Vec<String> {
    namespaces_in(root, &root.pci_device(address))
}

/// [`namespaces`] of the device whose sysfs directory is `device_dir`.
pub fn namespaces_in(root: &HostRoot, device_dir: &Path) -> Vec<String> {
    let dir = device_dir.join("nvme");
    let mut names = Vec::new();
    for controller in entry_names(&dir) {
        for name in entry_names(&dir.join(controller)) {
            match namespace_kind(&name) {
                Some(NamespaceKind::Block) if root.sys("block").join(&name).exists() => {
                    names.push(name)
                }
                Some(NamespaceKind::Path) => names.extend(head_of_path(root, &name)),
                _ => {}
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

/// The multipath head (`nvme0n1`) that a path (`nvme0c0n1`) belongs to.
fn head_of_path(root: &HostRoot, path_name: &str) -> Option<String> {
    entry_names(&root.sys("block")).into_iter().find(|head| {
        root.sys("block")
            .join(head)
            .join("multipath")
            .join(path_name)
            .exists()
    })
}

/// What a name under `/sys/class/nvme/nvmeX` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamespaceKind {
    /// A namespace's block device (`nvme0n1`).
    Block,
    /// One path of a multipath namespace (`nvme0c0n1`).
    Path,
}

pub fn namespace_kind(name: &str) -> Option<NamespaceKind> {
    let rest = name.strip_prefix("nvme")?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (controller, namespace) = rest.split_once('n')?;
    if !digits(namespace) {
        return None;
    }
    if digits(controller) {
        return Some(NamespaceKind::Block);
    }
    let (instance, path) = controller.split_once('c')?;
    (digits(instance) && digits(path)).then_some(NamespaceKind::Path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_names_are_classified() {
        assert_eq!(namespace_kind("nvme0n1"), Some(NamespaceKind::Block));
        assert_eq!(namespace_kind("nvme12n3"), Some(NamespaceKind::Block));
        assert_eq!(namespace_kind("nvme0c0n1"), Some(NamespaceKind::Path));
        assert_eq!(namespace_kind("ng0n1"), None);
        assert_eq!(namespace_kind("nvme0"), None);
        assert_eq!(namespace_kind("nvme0n1p1"), None);
    }
}
