//! What the host is: kernel, command line, kernel config, IOMMU units and groups, PCI devices.
//!
//! Every function takes the root of the file system to read (`/` in production) so that tests
//! build a fake `/proc` and `/sys` in a temporary directory. A missing or unreadable file means
//! "not known" (`None`, empty list), never an error: only a root that cannot be read at all is.
//!
//! The lab marks its guests with `iommutop.lab=1` on the kernel command line.

mod fs;
mod iommu;
mod kernel;
mod pci;

use iommu::iommu_groups;
pub(crate) use iommu::iommu_units;
use kernel::{cmdline, config_text, is_lab, kernel_config, kernel_release};
use pci::pci_devices;

use iommutop_model::facts::{effective_domain_type, HostFacts};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum SysinfoError {
    #[error("cannot read system information under {}: {source}", root.display())]
    Root {
        root: PathBuf,
        source: std::io::Error,
    },
}

/// The running kernel's whole config (None: not readable) and its command line, under `root`.
pub(crate) fn kernel_config_and_cmdline(root: &Path) -> (Option<String>, String) {
    let release = kernel_release(root);
    (
        config_text(root, release.as_deref()),
        cmdline(root).unwrap_or_default(),
    )
}

/// Everything sysinfo knows about the host under `root`.
pub fn collect(root: &Path) -> Result<HostFacts, SysinfoError> {
    std::fs::read_dir(root).map_err(|source| SysinfoError::Root {
        root: root.to_path_buf(),
        source,
    })?;
    let kernel_release = kernel_release(root);
    let cmdline = cmdline(root);
    let mut groups = iommu_groups(root);
    for group in &mut groups {
        group.domain_type = group.domain_type.take().map(|raw| {
            effective_domain_type(
                &raw,
                kernel_release.as_deref(),
                cmdline.as_deref().unwrap_or(""),
            )
        });
    }
    Ok(HostFacts {
        kernel_config: kernel_config(root, kernel_release.as_deref()),
        lab: cmdline.as_deref().is_some_and(is_lab),
        iommu_units: iommu_units(root),
        devices: pci_devices(root, &groups),
        groups,
        kernel_release,
        cmdline,
    })
}

#[cfg(test)]
mod tests;
