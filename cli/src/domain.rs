//! Switching an IOMMU group's domain type for an experiment, and always switching it back.
//!
//! The kernel accepts a new type only while no driver is bound to the group's devices, so a
//! switch unbinds them, writes `/sys/kernel/iommu_groups/N/type` and probes drivers again; the
//! restore does the same with the original type. The original state is recorded before anything
//! changes, and `Drop` restores it on every exit path that unwinds (errors, Ctrl-C through the
//! stop flag, panics).

use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub struct DomainSwitch {
    root: PathBuf,
    group: String,
    original_type: String,
    /// The group's devices and the drivers they had.
    devices: Vec<(String, Option<String>)>,
    restored: bool,
}

fn read(path: &Path) -> Result<String> {
    Ok(std::fs::read_to_string(path)
        .with_context(|| format!("reading {}", path.display()))?
        .trim()
        .to_string())
}

fn write(path: &Path, value: &str) -> Result<()> {
    std::fs::write(path, value).with_context(|| format!("writing `{value}` to {}", path.display()))
}

fn link_name(path: &Path) -> Option<String> {
    std::fs::read_link(path)
        .ok()?
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
}

impl DomainSwitch {
    /// Puts the group of the PCI device `address` in `new_type` (`identity`, `DMA`, `DMA-FQ`).
    pub fn apply(root: &Path, address: &str, new_type: &str) -> Result<DomainSwitch> {
        let device_dir = root.join("sys/bus/pci/devices").join(address);
        let group = link_name(&device_dir.join("iommu_group"))
            .ok_or_else(|| anyhow!("{address} is in no IOMMU group: no IOMMU translates it"))?;
        let group_dir = root.join("sys/kernel/iommu_groups").join(&group);
        let original_type = read(&group_dir.join("type"))?;
        let mut devices = Vec::new();
        for entry in std::fs::read_dir(group_dir.join("devices"))
            .with_context(|| format!("listing the devices of IOMMU group {group}"))?
        {
            let name = entry?.file_name().to_string_lossy().into_owned();
            let driver = link_name(&root.join("sys/bus/pci/devices").join(&name).join("driver"));
            refuse_if_mounted(root, &name)?;
            devices.push((name, driver));
        }
        let mut switch = DomainSwitch {
            root: root.to_path_buf(),
            group,
            original_type,
            devices,
            restored: false,
        };
        switch.set_type(new_type)?;
        Ok(switch)
    }

    pub fn original_type(&self) -> &str {
        &self.original_type
    }

    fn set_type(&mut self, domain_type: &str) -> Result<()> {
        let pci = self.root.join("sys/bus/pci");
        for (address, driver) in &self.devices {
            if let Some(driver) = driver {
                let unbind = pci.join("drivers").join(driver).join("unbind");
                if pci.join("devices").join(address).join("driver").exists() {
                    write(&unbind, address)?;
                }
            }
        }
        let type_file = self
            .root
            .join("sys/kernel/iommu_groups")
            .join(&self.group)
            .join("type");
        let written = write(&type_file, domain_type);
        // Bind the drivers again whatever the kernel said about the type.
        for (address, driver) in &self.devices {
            if driver.is_some() {
                let _ = write(&pci.join("drivers_probe"), address);
                self.wait_bound(address, driver.as_deref())?;
            }
        }
        written?;
        let now = read(&type_file)?;
        if now != domain_type {
            bail!(
                "IOMMU group {} is `{now}` after writing `{domain_type}`",
                self.group
            );
        }
        Ok(())
    }

    fn wait_bound(&self, address: &str, driver: Option<&str>) -> Result<()> {
        let link = self
            .root
            .join("sys/bus/pci/devices")
            .join(address)
            .join("driver");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if link_name(&link).as_deref() == driver {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!(
            "{address} did not bind to {} again",
            driver.unwrap_or("its driver")
        )
    }

    /// Puts the original type and bindings back; also done by `Drop`.
    pub fn restore(&mut self) -> Result<()> {
        if self.restored {
            return Ok(());
        }
        self.restored = true;
        let original = self.original_type.clone();
        self.set_type(&original)
            .with_context(|| format!("restoring IOMMU group {} to {original}", self.group))
    }
}

impl Drop for DomainSwitch {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("iommutop: {e:#}");
        }
    }
}

/// A device whose block devices carry a mounted file system is never unbound.
fn refuse_if_mounted(root: &Path, address: &str) -> Result<()> {
    let mounts = std::fs::read_to_string(root.join("proc/self/mounts")).unwrap_or_default();
    let facts = crate::sysinfo::collect(root).context("reading the devices' block devices")?;
    let disks = facts
        .device(address)
        .map(|d| d.disks.clone())
        .unwrap_or_default();
    for disk in disks {
        let dev = format!("/dev/{disk}");
        if mounts.lines().any(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|src| src.starts_with(&dev))
        }) {
            bail!("{address} holds {dev}, which has a mounted file system: refusing to unbind it");
        }
    }
    Ok(())
}
