//! Where the host's files are: `/sys`, `/proc`, `/dev` and the record directory, all under one
//! root so that tests run on a fake tree.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The record directory on a real machine (a tmpfs: a reboot undoes changes and records alike).
pub const RECORD_DIR: &str = "run/iommutop";

/// How long a device may take to bind again and show its netdevs and disks.
const BIND_TIMEOUT: Duration = Duration::from_secs(15);

/// How long an NVMe controller's namespaces may take to come back after a rebind.
const DISK_TIMEOUT: Duration = Duration::from_secs(60);

/// The machine iommutop changes, as a set of path prefixes and patience.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRoot {
    root: PathBuf,
    /// Whether NIC state is read and restored with `ip` (not in a fake tree).
    pub manage_network: bool,
    /// How long a device may take to bind again.
    pub bind_timeout: Duration,
    /// How long a device's disks may take to come back once bound.
    pub disk_timeout: Duration,
}

impl HostRoot {
    /// The machine this process runs on.
    pub fn system() -> HostRoot {
        HostRoot {
            root: PathBuf::from("/"),
            manage_network: true,
            bind_timeout: BIND_TIMEOUT,
            disk_timeout: DISK_TIMEOUT,
        }
    }

    /// A fake tree (tests): `ip` is never run, and waits give up after 300 ms.
    pub fn at(root: impl Into<PathBuf>) -> HostRoot {
        HostRoot {
            root: root.into(),
            manage_network: false,
            bind_timeout: Duration::from_millis(300),
            disk_timeout: Duration::from_millis(300),
        }
    }

    /// Whether this is the real machine (privilege checks apply only there).
    pub fn is_system(&self) -> bool {
        self.root == Path::new("/")
    }

    /// The root itself (`/`).
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// `/sys/RELATIVE`.
    pub fn sys(&self, relative: &str) -> PathBuf {
        self.root.join("sys").join(relative)
    }

    /// `/proc/RELATIVE`.
    pub fn proc(&self, relative: &str) -> PathBuf {
        self.root.join("proc").join(relative)
    }

    /// `/dev/RELATIVE`.
    pub fn dev(&self, relative: &str) -> PathBuf {
        self.root.join("dev").join(relative)
    }

    /// `/run/RELATIVE`.
    pub fn run(&self, relative: &str) -> PathBuf {
        self.root.join("run").join(relative)
    }

    /// Where change records are kept (`/run/iommutop`).
    pub fn record_dir(&self) -> PathBuf {
        self.root.join(RECORD_DIR)
    }

    /// `/sys/bus/pci/devices/ADDRESS`.
    pub fn pci_device(&self, address: &str) -> PathBuf {
        self.sys("bus/pci/devices").join(address)
    }
}
