//! Block devices and files as I/O targets: which disk and PCI function they are on (so that the
//! workload's numbers can sit beside that device's probe numbers), and whether writing to them
//! is safe (never a device that is mounted, partitioned with a mounted partition, held by
//! another driver such as dm or md, or used as swap: [`iommutop_host::block`] decides).

use crate::error::WorkloadError;
use iommutop_host::block::{disk_uses, exclusively_busy, DiskUse};
use iommutop_host::pci_device::pci_address_in;
use iommutop_host::HostRoot;
use iommutop_model::pci::PciAddress;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// What an I/O target is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetKind {
    /// A block device (`/dev/nvme0n1`, or a partition of one).
    BlockDevice,
    /// A regular file (created by fio at `size` if it does not exist yet).
    File { exists: bool },
}

/// An I/O target resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub path: PathBuf,
    pub kind: TargetKind,
    /// The block device holding it (`nvme0n1`, `nvme0n1p1`), if the kernel says.
    pub disk: Option<String>,
    /// The whole disk (`nvme0n1` for `nvme0n1p1`).
    pub whole_disk: Option<String>,
    /// The PCI function under the disk (`0000:00:04.0`).
    pub pci_address: Option<PciAddress>,
}

fn sysfs_of_devnum(major: u64, minor: u64) -> Option<PathBuf> {
    std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()
}

fn major_minor(dev: u64) -> (u64, u64) {
    (libc::major(dev) as u64, libc::minor(dev) as u64)
}

/// Resolves `path` as an I/O target.
pub fn resolve(path: &Path) -> Result<Target, WorkloadError> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => Some(meta),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(WorkloadError::param(
                "filename",
                format!("{}: {e}", path.display()),
            ))
        }
    };
    let (kind, devnum) = match &meta {
        Some(m) if m.file_type().is_block_device() => (TargetKind::BlockDevice, Some(m.rdev())),
        Some(m) if m.is_file() => (TargetKind::File { exists: true }, Some(m.dev())),
        Some(_) => {
            return Err(WorkloadError::param(
                "filename",
                format!(
                    "{} is neither a block device nor a regular file",
                    path.display()
                ),
            ))
        }
        None => {
            let parent = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let dev = std::fs::metadata(parent)
                .map_err(|e| {
                    WorkloadError::param("filename", format!("{}: {e}", parent.display()))
                })?
                .dev();
            (TargetKind::File { exists: false }, Some(dev))
        }
    };
    let sysfs = devnum.and_then(|d| {
        let (major, minor) = major_minor(d);
        sysfs_of_devnum(major, minor)
    });
    let disk = sysfs
        .as_ref()
        .and_then(|s| s.file_name())
        .map(|n| n.to_string_lossy().into_owned());
    let whole_disk = sysfs.as_ref().and_then(|s| {
        if s.join("partition").exists() {
            s.parent()?
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        } else {
            s.file_name().map(|n| n.to_string_lossy().into_owned())
        }
    });
    Ok(Target {
        path: path.to_path_buf(),
        kind,
        disk,
        whole_disk,
        pci_address: sysfs.as_deref().and_then(pci_address_in),
    })
}

/// The first NVMe namespace (`/dev/nvme0n1`), for workloads that only read.
pub fn first_nvme_namespace() -> Option<PathBuf> {
    let mut names: Vec<String> = std::fs::read_dir("/sys/block")
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("nvme") && n.contains('n') && !n.contains('p'))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|n| PathBuf::from("/dev").join(n))
        .find(|p| p.exists())
}

/// Refuses to write to a block device that is in use: mounted (itself or a partition), held by
/// another driver (dm, md, ...), swap, or a whole disk with partitions. `key` names the
/// parameter in the message.
pub fn check_device_free_for_writing(target: &Target, key: &str) -> Result<(), WorkloadError> {
    if target.kind != TargetKind::BlockDevice {
        return Ok(());
    }
    let refuse = |why: String| {
        WorkloadError::Refused(format!(
            "will not write to {} ({key}): {why}; writes go only to a device nobody uses",
            target.path.display()
        ))
    };
    let Some(disk) = target.disk.as_deref() else {
        return Err(refuse("the kernel does not say which disk it is".into()));
    };
    let uses = disk_uses(&HostRoot::system(), &[disk.to_string()]);
    let (partitioned, in_use): (Vec<DiskUse>, Vec<DiskUse>) = uses
        .into_iter()
        .partition(|u| matches!(u, DiskUse::Partitions { .. }));
    if let Some(first) = in_use.first() {
        return Err(refuse(first.to_string()));
    }
    match exclusively_busy(&target.path) {
        Ok(false) => {}
        Ok(true) => return Err(refuse("it is in use (exclusive open: device busy)".into())),
        Err(e) => {
            return Err(WorkloadError::Environment(format!(
                "cannot open {}: {e}",
                target.path.display()
            )))
        }
    }
    if let Some(partitions) = partitioned.first() {
        return Err(refuse(format!("{partitions}: name one, or remove them")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_resolves_and_is_never_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data");
        let target = resolve(&file).unwrap();
        assert_eq!(target.kind, TargetKind::File { exists: false });
        std::fs::write(&file, b"x").unwrap();
        let target = resolve(&file).unwrap();
        assert_eq!(target.kind, TargetKind::File { exists: true });
        assert!(check_device_free_for_writing(&target, "filename").is_ok());
        assert!(resolve(dir.path()).is_err(), "a directory is no target");
    }
}
