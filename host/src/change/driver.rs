//! A PCI function moved to another driver, as recorded, and moving it back.

use crate::block;
use crate::error::HostError;
use crate::root::HostRoot;
use crate::sysfs::{link_name, write};
use crate::wait;
use iommutop_abi::pci::PciAddress;
use serde::{Deserialize, Serialize};

/// A PCI function moved to another driver: what it was on, so that it goes back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverChange {
    pub pci_address: PciAddress,
    /// The driver before (`None`: unbound).
    pub from: Option<String>,
    /// `driver_override` before.
    pub override_before: Option<String>,
    pub to: String,
    /// The disks it had, which must come back after.
    pub disks: Vec<String>,
}

impl DriverChange {
    /// One line: what was changed.
    pub fn summary(&self) -> String {
        format!(
            "{} back on {}",
            self.pci_address,
            self.from.as_deref().unwrap_or("no driver")
        )
    }

    /// Puts the device back on its driver and waits for its disks.
    pub fn undo(&self, root: &HostRoot) -> Result<(), HostError> {
        let address = &self.pci_address.to_string();
        let dir = root.pci_device(address);
        let current = link_name(&dir.join("driver"));
        if current.is_some() && current != self.from {
            write(&dir.join("driver/unbind"), address)?;
        }
        // An empty write clears driver_override.
        write(
            &dir.join("driver_override"),
            self.override_before.as_deref().unwrap_or("\n"),
        )?;
        let Some(driver) = &self.from else {
            return Ok(());
        };
        if link_name(&dir.join("driver")).as_ref() != Some(driver) {
            write(&root.sys("bus/pci/drivers_probe"), address)?;
            if link_name(&dir.join("driver")).as_ref() != Some(driver) {
                let bind = root.sys("bus/pci/drivers").join(driver).join("bind");
                if bind.exists() {
                    // It may have bound asynchronously meanwhile; the wait below decides.
                    let _ = write(&bind, address);
                }
            }
        }
        let bound = wait::until(root.bind_timeout, || {
            link_name(&dir.join("driver")).as_ref() == Some(driver)
        });
        if !bound {
            return Err(HostError::Timeout {
                device: address.clone(),
                what: format!("bind to {driver} again"),
                seconds: root.bind_timeout.as_secs(),
            });
        }
        let back = wait::until(root.disk_timeout, || {
            let now = block::disks_of(root, address);
            now.len() >= self.disks.len() && now.iter().all(|d| root.dev(d).exists())
        });
        if !back {
            return Err(HostError::Timeout {
                device: address.clone(),
                what: format!("show its disks ({}) again", self.disks.join(", ")),
                seconds: root.disk_timeout.as_secs(),
            });
        }
        Ok(())
    }
}
