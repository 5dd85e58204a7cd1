//! Two NICs in two network namespaces, and back, through the host layer
//! ([`iommutop_host::netns`], [`iommutop_host::nic`]): what this module adds is the workload's side — checking that
//! `ip` can do it and naming the parameter at fault.

use crate::error::WorkloadError;
use crate::process::run_quiet;
use iommutop_host::netns as host_netns;
use iommutop_host::nic::{self as host_nic, Unmovable};
use iommutop_host::HostRoot;
use std::time::Duration;

pub use iommutop_host::netns::Placement;

/// Checks that `nic` exists here and may be moved: not the way this host reaches its network.
pub fn check_movable(nic: &str) -> Result<(), WorkloadError> {
    host_nic::check_movable(&HostRoot::system(), nic).map_err(|why| match why {
        Unmovable::DefaultRoute(_) => WorkloadError::Refused(why.to_string()),
        Unmovable::NoSuchNic(_) | Unmovable::Loopback => {
            WorkloadError::param("nics", why.to_string())
        }
    })
}

/// Checks that `ip` can manage network namespaces (iproute2, not busybox).
pub fn check_ip_netns() -> Result<(), WorkloadError> {
    crate::process::require_tool(
        "ip",
        "install iproute2 (Debian/Ubuntu: apt-get install iproute2)",
    )?;
    run_quiet(&["ip", "netns", "list"])
        .map(|_| ())
        .map_err(|_| {
            WorkloadError::Environment(
                "`ip netns` does not work here: local mode needs iproute2's ip (busybox's has no \
             netns support) and root"
                    .into(),
            )
        })
}

/// The PCI address of a NIC (`/sys/class/net/NIC/device`), if it is a PCI function.
pub fn nic_pci_address(nic: &str) -> Option<iommutop_model::pci::PciAddress> {
    host_nic::nic_pci_address(&HostRoot::system(), nic)
}

/// Network namespaces this process created, with the NICs it moved into them; put back by
/// [`Namespaces::restore`] or on drop.
#[derive(Debug)]
pub struct Namespaces(host_netns::Namespaces);

impl Namespaces {
    /// Creates the namespaces and moves each NIC into its own with its address, up; on error,
    /// what was done is undone before returning.
    pub fn set_up(
        placements: &[Placement],
        link_timeout: Duration,
    ) -> Result<Namespaces, WorkloadError> {
        host_netns::Namespaces::set_up(&HostRoot::system(), placements, link_timeout)
            .map(Namespaces)
            .map_err(WorkloadError::from)
    }

    /// Moves the NICs back and deletes the namespaces; returns what could not be restored.
    pub fn restore(&mut self) -> Vec<String> {
        self.0.restore()
    }
}
