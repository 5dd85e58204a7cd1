//! Block devices and files as I/O targets: which disk and PCI function they are on (so that the
//! workload's numbers can sit beside that device's probe numbers), and whether writing to them
//! is safe (never a device that is mounted, partitioned with a mounted partition, held by
//! another driver such as dm or md, or used as swap).

use crate::error::WorkloadError;
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
    pub pci_address: Option<String>,
}

/// Whether `s` looks like a PCI address (`0000:00:04.0`).
pub fn is_pci_address(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && s.chars()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_hexdigit())
}

/// The PCI address in a sysfs path once resolved: the last component that is one.
pub fn pci_address_in(path: &Path) -> Option<String> {
    path.components()
        .filter_map(|c| c.as_os_str().to_str())
        .rfind(|c| is_pci_address(c))
        .map(str::to_string)
}

/// The PCI address of a sysfs device link (`/sys/class/net/eth0/device`).
pub fn pci_address_of(sysfs_link: &Path) -> Option<String> {
    pci_address_in(&std::fs::canonicalize(sysfs_link).ok()?)
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

/// `major:minor` of every mounted file system (`/proc/self/mountinfo`, field 3).
pub fn mounted_devnums(mountinfo: &str) -> Vec<String> {
    mountinfo
        .lines()
        .filter_map(|line| line.split_whitespace().nth(2))
        .map(str::to_string)
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

/// Refuses to write to a block device that is in use: mounted (itself or a partition), held by
/// another driver (dm, md, ...), or swap. `key` names the parameter in the message.
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
    // The device itself and, for a whole disk, every partition.
    let base = Path::new("/sys/class/block").join(disk);
    let mut parts = vec![disk.to_string()];
    if let Ok(entries) = std::fs::read_dir(&base) {
        for entry in entries.flatten() {
            if entry.path().join("partition").exists() {
                parts.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
    }
    let mounted =
        mounted_devnums(&std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default());
    let swaps = swap_devices(&std::fs::read_to_string("/proc/swaps").unwrap_or_default());
    for part in &parts {
        let sys = Path::new("/sys/class/block").join(part);
        let devnum = std::fs::read_to_string(sys.join("dev")).unwrap_or_default();
        if mounted.iter().any(|m| *m == devnum.trim()) {
            return Err(refuse(format!("/dev/{part} is mounted")));
        }
        if swaps.iter().any(|s| s == &format!("/dev/{part}")) {
            return Err(refuse(format!("/dev/{part} is swap")));
        }
        let holders: Vec<String> = std::fs::read_dir(sys.join("holders"))
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        if !holders.is_empty() {
            return Err(refuse(format!(
                "/dev/{part} is held by {}",
                holders.join(", ")
            )));
        }
    }
    // The kernel's own word: an exclusive open fails while anything has the device claimed.
    let path = std::ffi::CString::new(target.path.as_os_str().as_encoded_bytes())
        .map_err(|_| refuse("the path has a NUL byte".into()))?;
    // SAFETY: `path` is a valid NUL-terminated string; the descriptor is closed right after.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_EXCL | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EBUSY) {
            return Err(refuse("it is in use (exclusive open: device busy)".into()));
        }
        return Err(WorkloadError::Environment(format!(
            "cannot open {}: {err}",
            target.path.display()
        )));
    }
    // SAFETY: `fd` was just opened by us and is closed once.
    unsafe { libc::close(fd) };
    if parts.len() > 1 && target.whole_disk.as_deref() == Some(disk) {
        return Err(refuse(format!(
            "it has partitions ({}): name one, or remove them",
            parts[1..].join(", ")
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_addresses_are_found_in_sysfs_paths() {
        let path = Path::new("/sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1");
        assert_eq!(pci_address_in(path).as_deref(), Some("0000:00:04.0"));
        let bridged = Path::new("/sys/devices/pci0000:00/0000:00:1c.0/0000:01:00.0/net/eth0");
        assert_eq!(pci_address_in(bridged).as_deref(), Some("0000:01:00.0"));
        assert_eq!(
            pci_address_in(Path::new("/sys/devices/virtual/block/loop0")),
            None
        );
        assert!(!is_pci_address("pci0000:00"));
    }

    #[test]
    fn mountinfo_and_swaps_are_read() {
        let mountinfo = "22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw\n\
                         23 22 0:21 / /proc rw - proc proc rw\n";
        assert_eq!(mounted_devnums(mountinfo), ["259:1", "0:21"]);
        let swaps = "Filename\tType\tSize\tUsed\tPriority\n/dev/nvme0n1p2 partition 1048572 0 -2\n";
        assert_eq!(swap_devices(swaps), ["/dev/nvme0n1p2"]);
    }

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
