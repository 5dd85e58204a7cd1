//! Whether a disk is in use by the host: partitions, holders (dm, md), mounts and swap. Nothing
//! that is in use is unbound, rebound or written.

use crate::root::HostRoot;
use crate::sysfs::{entry_names, read_or_empty};
use std::fmt;
use std::path::{Path, PathBuf};

/// One way the host uses a disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiskUse {
    Partitions {
        disk: String,
        partitions: Vec<String>,
    },
    Holders {
        device: String,
        holders: Vec<String>,
    },
    Mounted {
        device: String,
        devnum: String,
        mount_point: String,
    },
    Swap {
        device: String,
    },
}

impl fmt::Display for DiskUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiskUse::Partitions { disk, partitions } => {
                write!(f, "{disk} has partitions ({})", partitions.join(", "))
            }
            DiskUse::Holders { device, holders } => {
                write!(f, "{device} has holders ({})", holders.join(", "))
            }
            DiskUse::Mounted {
                device,
                devnum,
                mount_point,
            } => write!(f, "{device} ({devnum}) is mounted at {mount_point}"),
            DiskUse::Swap { device } => write!(f, "{device} is in use as swap"),
        }
    }
}

/// The sysfs directory of a disk or partition (`/sys/class/block/NAME`, else `/sys/block/NAME`).
fn block_dir(root: &HostRoot, name: &str) -> PathBuf {
    let class = root.sys("class/block").join(name);
    if class.exists() {
        class
    } else {
        root.sys("block").join(name)
    }
}

/// The partitions of a disk (`nvme0n1p1`), sorted.
pub fn partitions(root: &HostRoot, disk: &str) -> Vec<String> {
    let dir = block_dir(root, disk);
    entry_names(&dir)
        .into_iter()
        .filter(|entry| dir.join(entry).join("partition").exists())
        .collect()
}

/// Every way the host uses these disks or their partitions: partitions first, then holders,
/// then swap and mounts; empty when they are free.
pub fn disk_uses(root: &HostRoot, disks: &[String]) -> Vec<DiskUse> {
    let mountinfo = read_or_empty(&root.proc("self/mountinfo"));
    let swaps = swap_devices(&read_or_empty(&root.proc("swaps")));
    let mut uses = Vec::new();
    for disk in disks {
        let dir = block_dir(root, disk);
        let parts = partitions(root, disk);
        if !parts.is_empty() {
            uses.push(DiskUse::Partitions {
                disk: disk.clone(),
                partitions: parts.clone(),
            });
        }
        let mut devices = vec![(disk.clone(), dir.clone())];
        devices.extend(parts.iter().map(|p| (p.clone(), dir.join(p))));
        for (device, device_dir) in &devices {
            let holders = entry_names(&device_dir.join("holders"));
            if !holders.is_empty() {
                uses.push(DiskUse::Holders {
                    device: device.clone(),
                    holders,
                });
            }
        }
        for (device, device_dir) in &devices {
            if swaps.contains(&format!("/dev/{device}")) {
                uses.push(DiskUse::Swap {
                    device: device.clone(),
                });
            }
            let devnum = read_or_empty(&device_dir.join("dev"));
            if devnum.is_empty() {
                continue;
            }
            for mount_point in mounts_of(&mountinfo, &devnum) {
                uses.push(DiskUse::Mounted {
                    device: device.clone(),
                    devnum: devnum.clone(),
                    mount_point,
                });
            }
        }
    }
    uses
}

/// Mount points of the device `major:minor` in a mountinfo text.
pub fn mounts_of(mountinfo: &str, devnum: &str) -> Vec<String> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.get(2) == Some(&devnum)).then(|| fields.get(4).map(|m| m.to_string()))?
        })
        .collect()
}

/// Device paths used as swap (`/proc/swaps`).
pub fn swap_devices(swaps: &str) -> Vec<String> {
    swaps
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// The disks of a PCI function: its NVMe namespaces (multipath heads included), its virtio
/// disks, and any block device whose sysfs directory lies under the function's (a SCSI host's).
pub fn disks_of(root: &HostRoot, address: &str) -> Vec<String> {
    disks_in(root, &root.pci_device(address))
}

/// [`disks_of`] the device whose sysfs directory is `dir` (on any bus).
pub fn disks_in(root: &HostRoot, dir: &Path) -> Vec<String> {
    let mut disks = crate::nvme::namespaces_in(root, dir);
    for child in entry_names(dir)
        .into_iter()
        .filter(|name| name.starts_with("virtio"))
    {
        disks.extend(entry_names(&dir.join(child).join("block")));
    }
    disks.extend(block_devices_under(root, dir));
    disks.retain(|d| root.sys("block").join(d).exists());
    disks.sort();
    disks.dedup();
    disks
}

fn block_devices_under(root: &HostRoot, device_dir: &Path) -> Vec<String> {
    let Ok(device) = std::fs::canonicalize(device_dir) else {
        return Vec::new();
    };
    entry_names(&root.sys("block"))
        .into_iter()
        .filter(|disk| {
            std::fs::canonicalize(root.sys("block").join(disk))
                .is_ok_and(|path| path.starts_with(&device))
        })
        .collect()
}

/// The kernel's own word on a block device node: whether an exclusive open fails with EBUSY
/// (something has it claimed). `Err` when it cannot be opened at all.
pub fn exclusively_busy(node: &Path) -> Result<bool, std::io::Error> {
    let path = std::ffi::CString::new(node.as_os_str().as_encoded_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: `path` is a valid NUL-terminated string; the descriptor is closed right after.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_EXCL | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let error = std::io::Error::last_os_error();
        if error.raw_os_error() == Some(libc::EBUSY) {
            return Ok(true);
        }
        return Err(error);
    }
    // SAFETY: `fd` was just opened by us and is closed once.
    unsafe { libc::close(fd) };
    Ok(false)
}

#[cfg(test)]
mod tests;
