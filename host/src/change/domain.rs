//! An IOMMU group's domain type switched, as recorded (the type it had, each device's driver,
//! each NIC's link state and addresses), and switching it: unbind the group, write the type, bind
//! every device again and bring its NICs back up. Switching back is the same with the original
//! type.

use crate::block;
use crate::command::run_quiet;
use crate::error::{DomainError, HostError};
use crate::root::HostRoot;
use crate::sysfs::{entry_names, link_name, read, write};
use crate::wait;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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

/// Unbinds the group, writes the type, binds every device again (whatever the kernel said
/// about the type), and checks the type took.
pub(crate) fn set_type(
    root: &HostRoot,
    change: &DomainChange,
    wanted: &str,
) -> Result<(), DomainError> {
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
        run_quiet(&["ip", "addr", "replace", address, "dev", nic])?;
    }
    run_quiet(&["ip", "link", "set", "dev", nic, "up"]).map(|_| ())
}
