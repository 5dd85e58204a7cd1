//! NICs moved into network namespaces, and back: each namespace and each NIC's state (up or
//! down, global addresses) is recorded before it is created or moved, and put back by
//! [`Namespaces::restore`], on drop, or by the sweep if the process was killed.
//!
//! Uses iproute2's `ip` (`ip netns`, `ip -n`, `ip -j`); busybox's `ip` has no netns support.

use crate::command::run_quiet;
use crate::error::HostError;
use crate::record::{Change, Journal};
use crate::root::HostRoot;
use crate::sysfs::read;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use std::time::{Duration, Instant};

/// Where one NIC goes and the address it gets there (`10.77.0.1/24`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub nic: String,
    pub namespace: String,
    pub address: String,
}

/// A NIC as it was before it moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicState {
    pub name: String,
    pub up: bool,
    /// Global and site addresses with their prefix (`192.0.2.7/24`, `fd00::7/64`).
    pub addresses: Vec<String>,
    /// The namespace it was moved to.
    pub namespace: String,
}

/// A network namespace created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceChange {
    pub name: String,
}

/// A NIC's state as `ip -j addr show dev NIC` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkState {
    pub up: bool,
    pub addresses: Vec<String>,
}

/// The state of `nic` in `ip -j addr show dev NIC` output: whether it is up, and its global and
/// site addresses.
pub fn parse_nic_state(ip_json: &str, nic: &str) -> Result<LinkState, String> {
    let links: Vec<Value> =
        serde_json::from_str(ip_json).map_err(|e| format!("unexpected `ip -j` output: {e}"))?;
    let link = links
        .iter()
        .find(|l| l["ifname"] == nic)
        .ok_or_else(|| format!("no link {nic} in `ip -j addr` output"))?;
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
    parse_nic_state(&json, nic).map_err(|message| HostError::Command {
        program: "ip".into(),
        message,
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
pub fn nic_pci_address(root: &HostRoot, nic: &str) -> Option<String> {
    crate::pci::pci_address_of(&root.sys("class/net").join(nic).join("device"))
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

/// Network namespaces this process created, with the NICs it moved into them.
#[derive(Debug)]
pub struct Namespaces {
    journal: Journal,
}

impl Namespaces {
    /// Creates the namespaces and moves each NIC into its own with its address, up; waits up to
    /// `link_timeout` for each link to come up. Each step is recorded before it is taken; on
    /// error, what was done is undone before returning.
    pub fn set_up(
        root: &HostRoot,
        placements: &[Placement],
        link_timeout: Duration,
    ) -> Result<Namespaces, HostError> {
        let mut before = Vec::new();
        for p in placements {
            let state = nic_state(&p.nic)?;
            before.push(NicState {
                name: p.nic.clone(),
                up: state.up,
                addresses: state.addresses,
                namespace: p.namespace.clone(),
            });
        }
        let mut journal = Journal::new(root, "network namespaces");
        if let Err(e) = move_all(&mut journal, placements, before, link_timeout) {
            return Err(match journal.undo() {
                Ok(()) => e,
                Err(undo) => HostError::Several(vec![e.to_string(), format!("restoring: {undo}")]),
            });
        }
        Ok(Namespaces { journal })
    }

    /// Moves the NICs back, puts their state back, deletes the namespaces; returns what could
    /// not be restored (empty when all was). Idempotent.
    pub fn restore(&mut self) -> Vec<String> {
        match self.journal.undo() {
            Ok(()) => Vec::new(),
            Err(HostError::Several(problems)) => problems,
            Err(e) => vec![e.to_string()],
        }
    }
}

fn move_all(
    journal: &mut Journal,
    placements: &[Placement],
    before: Vec<NicState>,
    link_timeout: Duration,
) -> Result<(), HostError> {
    let mut created: Vec<String> = Vec::new();
    for (p, state) in placements.iter().zip(before) {
        if !created.contains(&p.namespace) {
            journal.record(Change::Namespace(NamespaceChange {
                name: p.namespace.clone(),
            }))?;
            created.push(p.namespace.clone());
            run_quiet(&["ip", "netns", "add", &p.namespace])?;
            run_quiet(&["ip", "-n", &p.namespace, "link", "set", "dev", "lo", "up"])?;
        }
        journal.record(Change::NicMove(state))?;
        run_quiet(&["ip", "link", "set", "dev", &p.nic, "netns", &p.namespace])?;
        run_quiet(&[
            "ip",
            "-n",
            &p.namespace,
            "addr",
            "add",
            &p.address,
            "dev",
            &p.nic,
        ])?;
        run_quiet(&["ip", "-n", &p.namespace, "link", "set", "dev", &p.nic, "up"])?;
    }
    for p in placements {
        wait_link_up(&p.namespace, &p.nic, link_timeout)?;
    }
    Ok(())
}

fn wait_link_up(namespace: &str, nic: &str, timeout: Duration) -> Result<(), HostError> {
    let deadline = Instant::now() + timeout;
    loop {
        let state = run_quiet(&["ip", "-n", namespace, "-j", "link", "show", "dev", nic])
            .ok()
            .and_then(|json| parse_operstate(&json));
        // Virtual links without carrier reporting say UNKNOWN once up.
        if matches!(state.as_deref(), Some("UP" | "UNKNOWN")) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(HostError::LinkDown {
                nic: nic.to_string(),
                namespace: namespace.to_string(),
                seconds: timeout.as_secs(),
                state: state.unwrap_or_else(|| "unknown".into()),
            });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl NamespaceChange {
    pub fn summary(&self) -> String {
        format!("network namespace {} deleted", self.name)
    }

    /// Stops what still runs in the namespace (a killed run's netserver) and deletes it.
    pub fn undo(&self, root: &HostRoot) -> Result<(), HostError> {
        if !root.manage_network || !root.run("netns").join(&self.name).exists() {
            return Ok(());
        }
        if let Ok(pids) = run_quiet(&["ip", "netns", "pids", &self.name]) {
            for pid in pids
                .split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok())
            {
                // SAFETY: kill() only sends a signal; these processes run in a namespace this
                // tool created for its own tools (named iommutop-PID-…).
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        run_quiet(&["ip", "netns", "delete", &self.name]).map(|_| ())
    }
}

impl NicState {
    pub fn summary(&self) -> String {
        format!("{} moved back from {}", self.name, self.namespace)
    }

    /// Moves the NIC back into this process's namespace with its addresses and up/down state.
    pub fn undo(&self, root: &HostRoot) -> Result<(), HostError> {
        if !root.manage_network {
            return Ok(());
        }
        let here = std::process::id().to_string();
        let in_namespace = run_quiet(&[
            "ip",
            "-n",
            &self.namespace,
            "link",
            "show",
            "dev",
            &self.name,
        ])
        .is_ok();
        if in_namespace {
            run_quiet(&[
                "ip",
                "-n",
                &self.namespace,
                "link",
                "set",
                "dev",
                &self.name,
                "netns",
                &here,
            ])?;
        }
        if !root.sys("class/net").join(&self.name).exists() {
            return Err(HostError::NicMissing {
                nic: self.name.clone(),
                namespace: self.namespace.clone(),
            });
        }
        let _ = run_quiet(&["ip", "addr", "flush", "dev", &self.name, "scope", "global"]);
        let mut problems = Vec::new();
        for address in &self.addresses {
            if let Err(e) = run_quiet(&["ip", "addr", "add", address, "dev", &self.name]) {
                problems.push(format!("restoring {address} on {}: {e}", self.name));
            }
        }
        let updown = if self.up { "up" } else { "down" };
        if let Err(e) = run_quiet(&["ip", "link", "set", "dev", &self.name, updown]) {
            problems.push(format!("setting {} {updown}: {e}", self.name));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(HostError::Several(problems))
        }
    }
}

#[cfg(test)]
mod tests;
