//! A device named on the command line (a PCI address, a NIC or a disk) to the PCI function it
//! is. Reads only.

use crate::nic::nic_pci_address;
use crate::pci_device::pci_address_of;
use crate::root::HostRoot;
use crate::sysfs::entry_names;
use iommutop_abi::pci::PciAddress;
use std::fmt;

/// Why a name is no PCI function here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceNameError {
    #[error("no PCI device, NIC or disk named `{name}` here ({known})")]
    NotFound { name: String, known: KnownDevices },
    #[error("`{name}` is a {kind} but not a PCI function, so no row is its own ({known})")]
    NotPci {
        name: String,
        kind: &'static str,
        known: KnownDevices,
    },
}

/// The NICs and disks that are PCI functions, with their addresses, for an error to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnownDevices {
    /// `(name, PCI address)`, NICs then disks, each sorted by name.
    pub named: Vec<(String, PciAddress)>,
}

impl fmt::Display for KnownDevices {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.named.is_empty() {
            let listed: Vec<String> = self
                .named
                .iter()
                .map(|(name, address)| format!("{name} ({address})"))
                .collect();
            write!(f, "PCI NICs and disks: {}; ", listed.join(", "))?;
        }
        f.write_str("PCI addresses: `lspci -D`")
    }
}

/// The PCI address of `name`: a PCI address this host has, a NIC (`eth0`) or a disk or
/// partition (`nvme0n1`, `vda1`) on a PCI function.
pub fn pci_address_named(root: &HostRoot, name: &str) -> Result<PciAddress, DeviceNameError> {
    if let Ok(address) = name.parse() {
        if root.pci_device(name).exists() {
            return Ok(address);
        }
    }
    let not_pci = |kind| DeviceNameError::NotPci {
        name: name.to_string(),
        kind,
        known: known_devices(root),
    };
    let plain_name = !name.is_empty() && !name.contains('/') && name != "." && name != "..";
    if plain_name && root.sys("class/net").join(name).exists() {
        return nic_pci_address(root, name).ok_or_else(|| not_pci("NIC"));
    }
    if let Some(dir) = plain_name.then(|| block_dir(root, name)).flatten() {
        return pci_address_of(&dir).ok_or_else(|| not_pci("disk"));
    }
    Err(DeviceNameError::NotFound {
        name: name.to_string(),
        known: known_devices(root),
    })
}

fn block_dir(root: &HostRoot, name: &str) -> Option<std::path::PathBuf> {
    [root.sys("class/block"), root.sys("block")]
        .into_iter()
        .map(|dir| dir.join(name))
        .find(|dir| dir.exists())
}

/// The NICs and disks that are PCI functions.
pub fn known_devices(root: &HostRoot) -> KnownDevices {
    let nics = entry_names(&root.sys("class/net"))
        .into_iter()
        .filter_map(|nic| nic_pci_address(root, &nic).map(|address| (nic, address)));
    let disks = entry_names(&root.sys("block"))
        .into_iter()
        .filter_map(|disk| {
            pci_address_of(&root.sys("block").join(&disk)).map(|address| (disk, address))
        });
    KnownDevices {
        named: nics.chain(disks).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{Fake, NIC, NVME};
    use std::os::unix::fs::symlink;

    #[test]
    fn an_address_a_nic_and_a_disk_resolve_to_their_pci_function() {
        let fake = Fake::new();
        let root = fake.root();
        assert_eq!(
            pci_address_named(&root, NVME),
            Ok(NVME.parse().expect("address"))
        );
        assert_eq!(
            pci_address_named(&root, "eth0"),
            Ok(NIC.parse().expect("address"))
        );
        assert_eq!(
            pci_address_named(&root, "nvme0n1"),
            Ok(NVME.parse().expect("address"))
        );
    }

    #[test]
    fn a_partition_resolves_to_its_disks_function() {
        let fake = Fake::new();
        let partition = fake.path(&format!(
            "sys/devices/pci0000:00/{NVME}/nvme/nvme0/nvme0n1/nvme0n1p1"
        ));
        std::fs::create_dir_all(&partition).expect("partition");
        symlink(&partition, fake.path("sys/class/block/nvme0n1p1")).expect("link");
        assert_eq!(
            pci_address_named(&fake.root(), "nvme0n1p1"),
            Ok(NVME.parse().expect("address"))
        );
    }

    #[test]
    fn an_unknown_name_is_named_with_what_exists() {
        let fake = Fake::new();
        let error = pci_address_named(&fake.root(), "nvme9n1").expect_err("unknown");
        assert_eq!(
            error.to_string(),
            format!(
                "no PCI device, NIC or disk named `nvme9n1` here (PCI NICs and disks: eth0 \
                 ({NIC}), nvme0n1 ({NVME}); PCI addresses: `lspci -D`)"
            )
        );
        // A well-formed address this host lacks is unknown too.
        assert!(matches!(
            pci_address_named(&fake.root(), "0000:00:1f.0"),
            Err(DeviceNameError::NotFound { .. })
        ));
        // Paths are names of nothing.
        assert!(matches!(
            pci_address_named(&fake.root(), "../block/nvme0n1"),
            Err(DeviceNameError::NotFound { .. })
        ));
        assert!(pci_address_named(&fake.root(), "").is_err());
    }

    #[test]
    fn a_nic_on_no_pci_function_says_so() {
        let fake = Fake::new();
        let lo = fake.path("sys/devices/virtual/net/lo");
        std::fs::create_dir_all(&lo).expect("lo");
        symlink(&lo, fake.path("sys/class/net/lo")).expect("link");
        let error = pci_address_named(&fake.root(), "lo").expect_err("not PCI");
        assert!(
            error
                .to_string()
                .starts_with("`lo` is a NIC but not a PCI function"),
            "{error}"
        );
    }
}
