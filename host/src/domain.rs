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
use crate::error::HostError;
use crate::netns;
use crate::record::{Change, Journal};
use crate::root::HostRoot;
use crate::sysfs::{entry_names, link_name, read, write};
use crate::wait;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Domain types a switch accepts (what `/sys/kernel/iommu_groups/N/type` takes).
pub const TYPES: [&str; 4] = ["identity", "DMA", "DMA-FQ", "auto"];

#[derive(Debug, thiserror::Error)]
pub enum DomainError {
    #[error("`{0}` is not a domain type (one of: identity, DMA, DMA-FQ, auto)")]
    UnknownType(String),
    #[error("no PCI device {0} (see `lspci -D` or /sys/bus/pci/devices)")]
    NoDevice(String),
    #[error("switching an IOMMU group's domain type needs root (it unbinds and binds drivers)")]
    NotRoot,
    #[error("{0} is in no IOMMU group: no IOMMU translates it, so it has no domain to switch")]
    NoGroup(String),
    #[error(
        "this kernel cannot change IOMMU group {group}'s domain type at run time (its `type` is \
         read-only: Linux 5.11 or later is needed)"
    )]
    ReadOnly { group: String },
    #[error("refusing to unbind {device}: {why}")]
    InUse { device: String, why: String },
    #[error("the kernel refused `{wanted}` for IOMMU group {group} ({errno}): {hint}")]
    Refused {
        group: String,
        wanted: String,
        errno: String,
        hint: &'static str,
    },
    #[error("IOMMU group {group} is `{now}` after writing `{wanted}`")]
    Unchanged {
        group: String,
        wanted: String,
        now: String,
    },
    #[error(transparent)]
    Host(#[from] HostError),
    #[error("restoring IOMMU group {group} to `{original}`: {problems}")]
    Restore {
        group: String,
        original: String,
        problems: String,
    },
}

impl DomainError {
    /// What the user asked for cannot be (exit code 2).
    pub fn is_usage(&self) -> bool {
        matches!(self, DomainError::UnknownType(_) | DomainError::NoDevice(_))
    }

    /// Whether the system, not iommutop or the user, is what stands in the way (exit code 3).
    pub fn is_environment(&self) -> bool {
        matches!(
            self,
            DomainError::NoGroup(_)
                | DomainError::NotRoot
                | DomainError::ReadOnly { .. }
                | DomainError::Refused { .. }
                | DomainError::InUse { .. }
        )
    }
}

/// What the sysfs write's errno means for a domain type change: its name and a hint.
pub fn refusal_hint(error: &std::io::Error) -> (String, &'static str) {
    let errno = error.raw_os_error().unwrap_or(0);
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::EBUSY => "EBUSY",
        libc::EINVAL => "EINVAL",
        libc::EACCES => "EACCES",
        libc::ENODEV => "ENODEV",
        libc::EIO => "EIO",
        _ => "",
    };
    let hint = match errno {
        libc::EPERM | libc::EBUSY => {
            "a device of the group is still bound to a driver or in use (the kernel changes the \
             type only of a group with no driver bound): something bound it again, or a VFIO \
             user holds it open"
        }
        libc::EINVAL => {
            "the kernel does not allow this type for the group: the device may require \
             translation (untrusted or external-facing), or the IOMMU cannot give it this domain"
        }
        libc::EACCES => "changing a group's type needs root",
        _ => "see the kernel log (`dmesg`)",
    };
    let errno = if name.is_empty() {
        error.to_string()
    } else {
        name.to_string()
    };
    (errno, hint)
}

/// One device of the group, as it was before the switch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Its name in the group (a PCI address for PCI devices).
    pub name: String,
    /// Its bus (`pci`): drivers live in `/sys/bus/BUS/drivers`.
    pub bus: String,
    pub driver: Option<String>,
    /// How many netdevs and disks it had: rebinding is complete when they are back.
    pub netdevs: usize,
    pub disks: usize,
    /// Its NICs that were up, with their addresses, to bring back after rebinding.
    pub links: Vec<Link>,
}

impl Member {
    fn device_dir(&self, root: &HostRoot) -> PathBuf {
        root.sys("bus")
            .join(&self.bus)
            .join("devices")
            .join(&self.name)
    }
}

/// A NIC that was up, with its global addresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub name: String,
    pub addresses: Vec<String>,
}

/// A group's type switched: the type it had and its devices as they were.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainChange {
    pub group: String,
    pub original_type: String,
    pub members: Vec<Member>,
}

impl DomainChange {
    pub fn summary(&self) -> String {
        format!(
            "IOMMU group {} back to `{}`",
            self.group, self.original_type
        )
    }

    /// Puts the original type back and every device on its driver (nothing to do if the group
    /// already is as it was).
    pub fn undo(&self, root: &HostRoot) -> Result<(), DomainError> {
        let type_file = type_file(root, &self.group);
        let as_before = read(&type_file).is_ok_and(|now| now == self.original_type)
            && self
                .members
                .iter()
                .all(|m| link_name(&m.device_dir(root).join("driver")) == m.driver);
        if as_before {
            return Ok(());
        }
        set_type(root, self, &self.original_type).map_err(|e| DomainError::Restore {
            group: self.group.clone(),
            original: self.original_type.clone(),
            problems: e.to_string(),
        })
    }
}

fn type_file(root: &HostRoot, group: &str) -> PathBuf {
    root.sys("kernel/iommu_groups").join(group).join("type")
}

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

/// Unbinds the group, writes the type, binds every device again (whatever the kernel said
/// about the type), and checks the type took.
fn set_type(root: &HostRoot, change: &DomainChange, wanted: &str) -> Result<(), DomainError> {
    let type_file = type_file(root, &change.group);
    for member in &change.members {
        let driver_link = member.device_dir(root).join("driver");
        if driver_link.exists() {
            write(&driver_link.join("unbind"), &member.name)?;
        }
    }
    let written = std::fs::write(&type_file, wanted).map_err(|e| {
        let (errno, hint) = refusal_hint(&e);
        DomainError::Refused {
            group: change.group.clone(),
            wanted: wanted.to_string(),
            errno,
            hint,
        }
    });
    let mut problems = Vec::new();
    for member in &change.members {
        if let Err(e) = rebind(root, member) {
            problems.push(e);
        }
    }
    written?;
    if let Some(problem) = problems.into_iter().next() {
        return Err(problem.into());
    }
    let now = read(&type_file)?;
    if now != wanted {
        return Err(DomainError::Unchanged {
            group: change.group.clone(),
            wanted: wanted.to_string(),
            now,
        });
    }
    Ok(())
}

/// Binds a member to its own driver again and waits for it, its netdevs and disks; brings its
/// NICs back up with their addresses.
fn rebind(root: &HostRoot, member: &Member) -> Result<(), HostError> {
    let Some(driver) = member.driver.as_deref() else {
        return Ok(());
    };
    let device_dir = member.device_dir(root);
    let bus_dir = root.sys("bus").join(&member.bus);
    if link_name(&device_dir.join("driver")).as_deref() != Some(driver) {
        let bind = bus_dir.join("drivers").join(driver).join("bind");
        if write(&bind, &member.name).is_err() {
            write(&bus_dir.join("drivers_probe"), &member.name)?;
        }
    }
    let timeout = |what: String| HostError::Timeout {
        device: member.name.clone(),
        what,
        seconds: root.bind_timeout.as_secs(),
    };
    if !wait::until(root.bind_timeout, || {
        link_name(&device_dir.join("driver")).as_deref() == Some(driver)
    }) {
        return Err(timeout(format!("bind to {driver} again")));
    }
    if !wait::until(root.bind_timeout, || {
        entry_names(&device_dir.join("net")).len() >= member.netdevs
            && block::disks_in(root, &device_dir).len() >= member.disks
    }) {
        return Err(timeout(
            "show its network interfaces and disks again".into(),
        ));
    }
    let now = entry_names(&device_dir.join("net"));
    for (index, link) in member.links.iter().enumerate() {
        // A netdev may come back under another name: the same position among the device's.
        let name = if now.contains(&link.name) {
            link.name.clone()
        } else {
            now.get(index).cloned().unwrap_or_else(|| link.name.clone())
        };
        bring_up(root, &name, &link.addresses)?;
    }
    Ok(())
}

fn bring_up(root: &HostRoot, nic: &str, addresses: &[String]) -> Result<(), HostError> {
    if !root.manage_network {
        return Ok(());
    }
    for address in addresses {
        crate::command::run_quiet(&["ip", "addr", "replace", address, "dev", nic])?;
    }
    crate::command::run_quiet(&["ip", "link", "set", "dev", nic, "up"]).map(|_| ())
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
    let routes = netns::default_route_interfaces(root);
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
        if !netns::is_up(root, nic) {
            continue;
        }
        let addresses = if root.manage_network {
            netns::nic_state(nic)?.addresses
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
