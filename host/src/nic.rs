//! NICs as `ip` and sysfs show them: up or down, their addresses, the default routes' interfaces,
//! and whether one may be moved into a network namespace. Reads only; moving NICs is
//! [`crate::netns`].

use crate::command::run_quiet;
use crate::error::HostError;
use crate::pci_device::pci_address_of;
use crate::root::HostRoot;
use crate::sysfs::read;
use iommutop_abi::pci::PciAddress;
use serde_json::Value;
use std::fmt;

/// A NIC's state as `ip -j addr show dev NIC` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkState {
    pub up: bool,
    pub addresses: Vec<String>,
}

/// What `ip -j addr` output lacks to tell a NIC's state.
#[derive(Debug, thiserror::Error)]
pub enum IpOutputError {
    #[error("unexpected `ip -j` output: {0}")]
    NotJson(#[from] serde_json::Error),
    #[error("no link {0} in `ip -j addr` output")]
    NoLink(String),
}

/// The state of `nic` in `ip -j addr show dev NIC` output: whether it is up, and its global and
/// site addresses.
pub fn parse_nic_state(ip_json: &str, nic: &str) -> Result<LinkState, IpOutputError> {
    let links: Vec<Value> = serde_json::from_str(ip_json)?;
    let link = links
        .iter()
        .find(|l| l["ifname"] == nic)
        .ok_or_else(|| IpOutputError::NoLink(nic.to_string()))?;
    let up = link["flags"]
        .as_array()
        .is_some_and(|flags| flags.iter().any(|f| f == "UP"));
    let addresses = link["addr_info"]
        .as_array()
        .map(|infos| {
            infos
                .iter()
                .filter(|a| matches!(a["scope"].as_str(), Some("global" | "site")))
                .filter_map(|a| {
                    Some(format!(
                        "{}/{}",
                        a["local"].as_str()?,
                        a["prefixlen"].as_u64()?
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(LinkState { up, addresses })
}

/// `operstate` of the link in `ip -j link show` output (`UP`, `DOWN`, `UNKNOWN`).
pub fn parse_operstate(ip_json: &str) -> Option<String> {
    serde_json::from_str::<Vec<Value>>(ip_json)
        .ok()?
        .first()?
        .get("operstate")?
        .as_str()
        .map(str::to_string)
}

/// A NIC's state now (runs `ip -j addr show dev NIC`).
pub fn nic_state(nic: &str) -> Result<LinkState, HostError> {
    let json = run_quiet(&["ip", "-j", "addr", "show", "dev", nic])?;
    parse_nic_state(&json, nic).map_err(|e| HostError::Command {
        program: "ip".into(),
        message: e.to_string(),
    })
}

/// Whether the interface's `IFF_UP` flag is set (`/sys/class/net/NIC/flags`).
pub fn is_up(root: &HostRoot, nic: &str) -> bool {
    read(&root.sys("class/net").join(nic).join("flags"))
        .ok()
        .and_then(|f| u32::from_str_radix(f.trim_start_matches("0x"), 16).ok())
        .is_some_and(|flags| flags & 1 != 0)
}

/// Interfaces of the default IPv4 and IPv6 routes (`/proc/net/route`, `/proc/net/ipv6_route`).
pub fn default_route_interfaces(root: &HostRoot) -> Vec<String> {
    let v4 = read(&root.proc("net/route")).unwrap_or_default();
    let v6 = read(&root.proc("net/ipv6_route")).unwrap_or_default();
    let mut devices: Vec<String> = v4
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                [name, "00000000", _, _, _, _, _, "00000000", ..] => Some(name.to_string()),
                _ => None,
            }
        })
        .collect();
    devices.extend(v6.lines().filter_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [destination, "00", _, _, _, _, _, _, _, name]
                if destination.bytes().all(|b| b == b'0') && *name != "lo" =>
            {
                Some(name.to_string())
            }
            _ => None,
        }
    }));
    devices
}

/// The PCI address of a NIC (`/sys/class/net/NIC/device`), if it is a PCI function.
pub fn nic_pci_address(root: &HostRoot, nic: &str) -> Option<PciAddress> {
    pci_address_of(&root.sys("class/net").join(nic).join("device"))
}

/// Why a NIC may not be moved into a namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unmovable {
    NoSuchNic(String),
    Loopback,
    DefaultRoute(String),
}

impl fmt::Display for Unmovable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unmovable::NoSuchNic(nic) => {
                write!(f, "no network interface `{nic}` here (see `ip link`)")
            }
            Unmovable::Loopback => f.write_str("`lo` cannot be moved"),
            Unmovable::DefaultRoute(nic) => write!(
                f,
                "{nic} carries this host's default route: moving it into a network namespace \
                 would cut the host off; name two NICs that are free for testing"
            ),
        }
    }
}

/// Checks that `nic` exists here and may be moved: not the way this host reaches its network.
pub fn check_movable(root: &HostRoot, nic: &str) -> Result<(), Unmovable> {
    if !root.sys("class/net").join(nic).exists() {
        return Err(Unmovable::NoSuchNic(nic.to_string()));
    }
    if nic == "lo" {
        return Err(Unmovable::Loopback);
    }
    if default_route_interfaces(root).iter().any(|dev| dev == nic) {
        return Err(Unmovable::DefaultRoute(nic.to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
