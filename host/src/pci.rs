//! Moving a PCI function to another driver, recorded in a [`Journal`] first. What a function is
//! (address, driver, group) is read by [`crate::pci_device`]; the change and its undoing are
//! [`DriverChange`].

use crate::block;
use crate::change::DriverChange;
use crate::error::HostError;
use crate::journal::Journal;
use crate::pci_device::state;
use crate::record::Change;
use crate::sysfs::{link_name, write};
use crate::wait;
use iommutop_abi::pci::PciAddress;

/// Moves `address` to `driver` through `driver_override`, `unbind` and `drivers_probe`, recorded
/// in `journal` first; waits until it is bound. Undone with the journal.
pub fn rebind(
    journal: &mut Journal,
    pci_address: PciAddress,
    driver: &str,
) -> Result<DriverChange, HostError> {
    let address = pci_address.to_string();
    let address = address.as_str();
    let root = journal.root().clone();
    if !root.sys("bus/pci/drivers").join(driver).exists() {
        return Err(HostError::DriverMissing {
            driver: driver.to_string(),
        });
    }
    let before = state(&root, address)?;
    let change = DriverChange {
        pci_address,
        from: before.driver.clone(),
        override_before: before.driver_override,
        to: driver.to_string(),
        disks: block::disks_of(&root, address),
    };
    journal.record(Change::Driver(change.clone()))?;
    let dir = root.pci_device(address);
    write(&dir.join("driver_override"), driver)?;
    if dir.join("driver").exists() {
        write(&dir.join("driver/unbind"), address)?;
    }
    write(&root.sys("bus/pci/drivers_probe"), address)?;
    let bound = wait::until(root.bind_timeout, || {
        link_name(&dir.join("driver")).as_deref() == Some(driver)
    });
    if !bound {
        return Err(HostError::Timeout {
            device: address.to_string(),
            what: format!("bind to {driver}"),
            seconds: root.bind_timeout.as_secs(),
        });
    }
    Ok(change)
}
