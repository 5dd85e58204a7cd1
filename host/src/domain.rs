//! Switching an IOMMU group's domain type for an experiment, and always switching it back.
//!
//! The kernel changes a group's type only while no driver is bound to its devices (`identity`
//! is refused while bound: EPERM on 6.12, EBUSY on 6.1), so a switch records the group's type,
//! each device's driver and each NIC's link state and addresses, unbinds the devices, writes
//! `/sys/kernel/iommu_groups/N/type`, binds every device to its own driver again, waits for its
//! netdevs and disks to come back and brings the NICs up again with their addresses.
//!
//! [`DomainSwitch`] holds the [`Journal`] with the switch recorded before anything changed:
//! [`DomainSwitch::restore`] puts the original type and bindings back and says what failed;
//! dropping it does the same; a killed process's switch is put back by the sweep.
//!
//! Groups whose devices hold a mounted file system, swap or a device-mapper/md holder are never
//! touched, nor NICs that carry the host's default route.

use crate::block::{self, DiskUse};
use crate::change::domain::{set_type, DomainChange, Link, Member};
use crate::error::{DomainError, HostError};
use crate::journal::Journal;
use crate::nic::{default_route_interfaces, is_up, nic_state};
use crate::record::Change;
use crate::root::HostRoot;
use crate::sysfs::{entry_names, link_name, read};
use std::path::Path;

/// Domain types a switch accepts (what `/sys/kernel/iommu_groups/N/type` takes).
pub const TYPES: [&str; 4] = ["identity", "DMA", "DMA-FQ", "auto"];

/// An IOMMU group in another domain type until restored or dropped.
#[derive(Debug)]
pub struct DomainSwitch {
    journal: Journal,
    change: DomainChange,
}

impl DomainSwitch {
    /// Puts the group of the PCI device `address` in `new_type`; on error, what was changed is
    /// put back before returning.
    pub fn apply(
        root: &HostRoot,
        address: &str,
        new_type: &str,
    ) -> Result<DomainSwitch, DomainError> {
        if !TYPES.contains(&new_type) {
            return Err(DomainError::UnknownType(new_type.to_string()));
        }
        let device_dir = root.pci_device(address);
        if !device_dir.exists() {
            return Err(DomainError::NoDevice(address.to_string()));
        }
        // SAFETY: geteuid has no preconditions.
        if root.is_system() && unsafe { libc::geteuid() } != 0 {
            return Err(DomainError::NotRoot);
        }
        let group = link_name(&device_dir.join("iommu_group"))
            .ok_or_else(|| DomainError::NoGroup(address.to_string()))?;
        let group_dir = root.sys("kernel/iommu_groups").join(&group);
        let original_type = read(&group_dir.join("type"))?;
        check_writable(&group_dir.join("type"), &group)?;
        let mut members = Vec::new();
        for name in entry_names(&group_dir.join("devices")) {
            members.push(survey(root, &group_dir.join("devices").join(&name), &name)?);
        }
        let change = DomainChange {
            group,
            original_type,
            members,
        };
        let mut journal = Journal::new(root, &format!("domain switch of {address}"));
        journal.record(Change::Domain(change.clone()))?;
        // On error the journal is dropped here, which puts back what was changed.
        set_type(root, &change, new_type)?;
        Ok(DomainSwitch { journal, change })
    }

    pub fn original_type(&self) -> &str {
        &self.change.original_type
    }

    pub fn group(&self) -> &str {
        &self.change.group
    }

    /// Puts the original type and bindings back; also done on drop. Safe to call twice.
    pub fn restore(&mut self) -> Result<(), DomainError> {
        self.journal.undo().map_err(|e| match e {
            HostError::Domain(domain) => *domain,
            other => DomainError::Restore {
                group: self.change.group.clone(),
                original: self.change.original_type.clone(),
                problems: other.to_string(),
            },
        })
    }
}

/// Records one device of the group, refusing devices that are in use.
fn survey(root: &HostRoot, link: &Path, name: &str) -> Result<Member, DomainError> {
    let bus = link_name(&link.join("subsystem")).unwrap_or_else(|| "pci".to_string());
    let device_dir = root.sys("bus").join(&bus).join("devices").join(name);
    let driver = link_name(&device_dir.join("driver"));
    let disks = block::disks_in(root, &device_dir);
    let in_use = block::disk_uses(root, &disks)
        .into_iter()
        .find(|u| !matches!(u, DiskUse::Partitions { .. }));
    if let Some(in_use) = in_use {
        return Err(DomainError::InUse {
            device: name.to_string(),
            why: in_use.to_string(),
        });
    }
    let netdevs = entry_names(&device_dir.join("net"));
    let links = if driver.is_some() {
        up_links(root, name, &netdevs)?
    } else {
        Vec::new()
    };
    Ok(Member {
        name: name.to_string(),
        bus,
        driver,
        netdevs: netdevs.len(),
        disks: disks.len(),
        links,
    })
}

/// The NICs that are up, with their addresses; refuses one that carries the default route.
fn up_links(root: &HostRoot, device: &str, netdevs: &[String]) -> Result<Vec<Link>, DomainError> {
    let routes = default_route_interfaces(root);
    let mut links = Vec::new();
    for nic in netdevs {
        if routes.contains(nic) {
            return Err(DomainError::InUse {
                device: device.to_string(),
                why: format!(
                    "its interface {nic} carries this host's default route: unbinding it would cut \
                     the host off (use a NIC that is free for testing)"
                ),
            });
        }
        if !is_up(root, nic) {
            continue;
        }
        let addresses = if root.manage_network {
            nic_state(nic)?.addresses
        } else {
            Vec::new()
        };
        links.push(Link {
            name: nic.clone(),
            addresses,
        });
    }
    Ok(links)
}

fn check_writable(type_file: &Path, group: &str) -> Result<(), DomainError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(type_file)
        .map_err(|source| HostError::io("reading", type_file, source))?
        .permissions()
        .mode();
    if mode & 0o222 == 0 {
        return Err(DomainError::ReadOnly {
            group: group.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
