//! PCI functions: driver, ids, IOMMU group and unit, the disks and netdevs on them, and an SR-IOV
//! virtual function's physical function.

use super::fs::{entry_names, link_name, read_hex, read_trimmed};
use iommutop_model::facts::{DeviceFacts, IommuGroup};
use iommutop_model::pci::PciAddress;
use std::path::Path;

/// Every function in `/sys/bus/pci/devices`, by address.
pub fn pci_devices(root: &Path, groups: &[IommuGroup]) -> Vec<DeviceFacts> {
    entry_names(&root.join("sys/bus/pci/devices"))
        .into_iter()
        .filter_map(|name| name.parse().ok())
        .map(|address| device_facts(root, address, groups))
        .collect()
}

/// What `/sys/bus/pci/devices/ADDRESS` says; the domain type comes from the device's group.
pub fn device_facts(root: &Path, address: PciAddress, groups: &[IommuGroup]) -> DeviceFacts {
    let dir = root.join("sys/bus/pci/devices").join(address.to_string());
    let iommu_group: Option<u32> =
        link_name(&dir.join("iommu_group")).and_then(|name| name.parse().ok());
    let domain_type = iommu_group.and_then(|id| {
        groups
            .iter()
            .find(|group| group.id == id)
            .and_then(|group| group.domain_type.clone())
    });
    let mut facts = DeviceFacts {
        pci_address: address,
        driver: link_name(&dir.join("driver")),
        vendor_id: read_hex(&dir.join("vendor")).and_then(|id| u16::try_from(id).ok()),
        device_id: read_hex(&dir.join("device")).and_then(|id| u16::try_from(id).ok()),
        class: read_hex(&dir.join("class")),
        iommu_group,
        domain_type,
        iommu_unit: link_name(&dir.join("iommu")),
        netdevs: entry_names(&dir.join("net")),
        disks: Vec::new(),
        children: Vec::new(),
        physfn: link_name(&dir.join("physfn")).and_then(|name| name.parse().ok()),
        sriov_numvfs: read_trimmed(&dir.join("sriov_numvfs")).and_then(|n| n.parse().ok()),
    };
    add_nvme(root, &dir, &mut facts);
    add_virtio(&dir, &mut facts);
    facts.disks.sort();
    facts.disks.dedup();
    facts.netdevs.sort();
    facts.netdevs.dedup();
    facts
}

/// `nvme/nvme0/nvme0n1` (or `nvme0c0n1` with native multipath, whose `nvme0n1` head lives in
/// `/sys/class/nvme-subsystem/nvme-subsysN/` next to links to its controllers).
fn add_nvme(root: &Path, dir: &Path, facts: &mut DeviceFacts) {
    let controllers = entry_names(&dir.join("nvme"));
    for controller in &controllers {
        facts.disks.extend(
            entry_names(&dir.join("nvme").join(controller))
                .into_iter()
                .filter(|name| is_nvme_namespace(name)),
        );
    }
    let subsystems = root.join("sys/class/nvme-subsystem");
    for subsystem in entry_names(&subsystems) {
        let entries = entry_names(&subsystems.join(subsystem));
        if entries.iter().any(|entry| controllers.contains(entry)) {
            facts.disks.extend(
                entries
                    .iter()
                    .filter(|name| is_nvme_namespace(name))
                    .cloned(),
            );
        }
    }
    facts.children.extend(controllers);
}

/// `virtio3/block/vda`, `virtio1/net/eth0`.
fn add_virtio(dir: &Path, facts: &mut DeviceFacts) {
    for child in entry_names(dir)
        .into_iter()
        .filter(|name| name.starts_with("virtio"))
    {
        facts
            .disks
            .extend(entry_names(&dir.join(&child).join("block")));
        facts
            .netdevs
            .extend(entry_names(&dir.join(&child).join("net")));
        facts.children.push(child);
    }
}

/// `nvme0n1` or `nvme0c1n2`: controller, optional path, namespace.
fn is_nvme_namespace(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("nvme") else {
        return false;
    };
    let (controller, namespace) = match rest.split_once('n') {
        Some(parts) => parts,
        None => return false,
    };
    let controller = match controller.split_once('c') {
        Some((instance, path)) => is_number(instance) && is_number(path),
        None => is_number(controller),
    };
    controller && is_number(namespace)
}

fn is_number(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::is_nvme_namespace;

    #[test]
    fn nvme_namespace_names() {
        for name in ["nvme0n1", "nvme12n3", "nvme0c0n1", "nvme1c2n10"] {
            assert!(is_nvme_namespace(name), "{name}");
        }
        for name in [
            "nvme0",
            "nvme-subsys0",
            "nvmen1",
            "nvme0n",
            "ng0n1",
            "nvme0c0",
            "nvme0cn1",
        ] {
            assert!(!is_nvme_namespace(name), "{name}");
        }
    }
}
