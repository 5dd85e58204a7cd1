//! `--device DEV` on `record`, `run`, `top` and `serve`: the name resolved to its PCI function
//! before anything attaches, so that a name of nothing is a usage error (exit 2).

use crate::exit::{Failure, Outcome};
use iommutop_host::device_name::pci_address_named;
use iommutop_host::HostRoot;
use iommutop_model::DeviceFilter;

/// What `--device` says in every command's help.
pub const HELP: &str = "Show only this device: a PCI address (0000:00:04.0), a NIC (eth0) or a \
disk (nvme0n1). The `deferred` and `unattributed` rows stay, because they are not any one \
device's work. Nothing on the host is switched";

/// The filter `--device` asks for, if given.
pub fn resolve(given: Option<&str>) -> Outcome<Option<DeviceFilter>> {
    given
        .map(|name| {
            let pci_address = pci_address_named(&HostRoot::system(), name)
                .map_err(|e| Failure::usage(anyhow::anyhow!("--device: {e}")))?;
            Ok(DeviceFilter {
                device: name.to_string(),
                pci_address,
            })
        })
        .transpose()
}
