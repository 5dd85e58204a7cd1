//! Two NICs in two network namespaces, and back: the NICs' state (up or down, addresses) is
//! recorded before anything moves, and restored by [`Namespaces::restore`], on drop, or by the
//! next run if this one was killed ([`restore_leftovers`]).
//!
//! Uses iproute2's `ip` (`ip netns`, `ip -n`, `ip -j`); busybox's `ip` has no netns support.

use crate::error::WorkloadError;
use crate::process::run_quiet;
use crate::state::{leftovers, StateRecord};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const RECORD_KIND: &str = "netns";

/// Where one NIC goes and the address it gets there (`10.77.0.1/24`).
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    pub nic: String,
    pub namespace: String,
    pub address: String,
}

/// A NIC as it was before it moved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NicState {
    pub name: String,
    pub up: bool,
    /// Global and site addresses with their prefix (`192.0.2.7/24`, `fd00::7/64`).
    pub addresses: Vec<String>,
    /// The namespace it was moved to.
    pub namespace: String,
}

/// What was changed so far: namespaces created, NICs moved.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Record {
    namespaces: Vec<String>,
    nics: Vec<NicState>,
}

/// Network namespaces this process created, with the NICs it moved into them.
#[derive(Debug)]
pub struct Namespaces {
    record: Record,
    state: Option<StateRecord>,
}

/// The state of `nic` from `ip -j addr show dev NIC`: whether it is up, and its global and site
/// addresses.
pub fn parse_nic_state(ip_json: &str, nic: &str) -> Result<(bool, Vec<String>), String> {
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
    Ok((up, addresses))
}

/// Devices that carry a default route, from `ip -j route show default`.
pub fn default_route_devices(ip_json: &str) -> Vec<String> {
    serde_json::from_str::<Vec<Value>>(ip_json)
        .unwrap_or_default()
        .iter()
        .filter_map(|r| r["dev"].as_str().map(str::to_string))
        .collect()
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

/// Checks that `nic` exists here and may be moved: not the way this host reaches its network.
pub fn check_movable(nic: &str) -> Result<(), WorkloadError> {
    if !Path::new("/sys/class/net").join(nic).exists() {
        return Err(WorkloadError::param(
            "nics",
            format!("no network interface `{nic}` here (see `ip link`)"),
        ));
    }
    if nic == "lo" {
        return Err(WorkloadError::param("nics", "`lo` cannot be moved"));
    }
    let mut carrying =
        default_route_devices(&run_quiet(&["ip", "-j", "route", "show", "default"])?);
    carrying.extend(default_route_devices(
        &run_quiet(&["ip", "-6", "-j", "route", "show", "default"]).unwrap_or_default(),
    ));
    if carrying.iter().any(|dev| dev == nic) {
        return Err(WorkloadError::Refused(format!(
            "{nic} carries this host's default route: moving it into a network namespace would \
             cut the host off; name two NICs that are free for testing"
        )));
    }
    Ok(())
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
pub fn nic_pci_address(nic: &str) -> Option<String> {
    crate::block::pci_address_of(&Path::new("/sys/class/net").join(nic).join("device"))
}

impl Namespaces {
    /// Creates the namespaces and moves each NIC into its own with its address, up; waits up to
    /// `link_timeout` for each link to come up. Records everything first in `state_dir`.
    /// On error, what was done is undone before returning.
    pub fn set_up(
        placements: &[Placement],
        state_dir: &Path,
        link_timeout: Duration,
    ) -> Result<Namespaces, WorkloadError> {
        let mut before = Vec::new();
        for p in placements {
            let (up, addresses) = parse_nic_state(
                &run_quiet(&["ip", "-j", "addr", "show", "dev", &p.nic])?,
                &p.nic,
            )
            .map_err(|m| WorkloadError::tool("ip", m))?;
            before.push(NicState {
                name: p.nic.clone(),
                up,
                addresses,
                namespace: p.namespace.clone(),
            });
        }
        let mut namespaces = Namespaces {
            record: Record::default(),
            state: Some(StateRecord::write(
                state_dir,
                RECORD_KIND,
                &Record::default(),
            )?),
        };
        if let Err(e) = namespaces.move_all(placements, before, link_timeout) {
            let problems = namespaces.restore();
            return Err(if problems.is_empty() {
                e
            } else {
                WorkloadError::Environment(format!("{e}; restoring: {}", problems.join("; ")))
            });
        }
        Ok(namespaces)
    }

    fn save(&self) -> Result<(), WorkloadError> {
        match &self.state {
            Some(state) => state.update(&self.record),
            None => Ok(()),
        }
    }

    fn move_all(
        &mut self,
        placements: &[Placement],
        before: Vec<NicState>,
        link_timeout: Duration,
    ) -> Result<(), WorkloadError> {
        for (p, state) in placements.iter().zip(before) {
            if !self.record.namespaces.contains(&p.namespace) {
                self.record.namespaces.push(p.namespace.clone());
                self.save()?;
                run_quiet(&["ip", "netns", "add", &p.namespace])?;
                run_quiet(&["ip", "-n", &p.namespace, "link", "set", "dev", "lo", "up"])?;
            }
            self.record.nics.push(state);
            self.save()?;
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

    /// Moves the NICs back, puts their state back, deletes the namespaces; returns what could
    /// not be restored (empty when all was). Idempotent.
    pub fn restore(&mut self) -> Vec<String> {
        let problems = restore_record(&self.record);
        self.record = Record::default();
        if let Some(state) = self.state.take() {
            if problems.is_empty() {
                state.remove();
            } else {
                // Keep the record: the next run tries again.
                let _ = state.update(&self.record);
            }
        }
        problems
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        let _ = self.restore();
    }
}

fn wait_link_up(namespace: &str, nic: &str, timeout: Duration) -> Result<(), WorkloadError> {
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
            return Err(WorkloadError::Environment(format!(
                "{nic} did not come up within {} s in namespace {namespace} (state {}): is it \
                 cabled to the other NIC?",
                timeout.as_secs(),
                state.as_deref().unwrap_or("unknown")
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Stops what still runs in one of our namespaces (a killed run's netserver).
fn kill_processes_in(namespace: &str) {
    let Ok(pids) = run_quiet(&["ip", "netns", "pids", namespace]) else {
        return;
    };
    for pid in pids
        .split_whitespace()
        .filter_map(|p| p.parse::<i32>().ok())
    {
        // SAFETY: kill() only sends a signal; these processes run in a namespace this tool
        // created for its own tools (named iommutop-PID-…).
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

fn restore_record(record: &Record) -> Vec<String> {
    let mut problems = Vec::new();
    let here = std::process::id().to_string();
    for namespace in &record.namespaces {
        if Path::new("/run/netns").join(namespace).exists() {
            kill_processes_in(namespace);
        }
    }
    for nic in record.nics.iter().rev() {
        let in_namespace =
            run_quiet(&["ip", "-n", &nic.namespace, "link", "show", "dev", &nic.name]).is_ok();
        if in_namespace {
            if let Err(e) = run_quiet(&[
                "ip",
                "-n",
                &nic.namespace,
                "link",
                "set",
                "dev",
                &nic.name,
                "netns",
                &here,
            ]) {
                problems.push(format!("moving {} back: {e}", nic.name));
                continue;
            }
        }
        if !Path::new("/sys/class/net").join(&nic.name).exists() {
            problems.push(format!(
                "{} is not back in this namespace (renamed or still in {})",
                nic.name, nic.namespace
            ));
            continue;
        }
        let _ = run_quiet(&["ip", "addr", "flush", "dev", &nic.name, "scope", "global"]);
        for address in &nic.addresses {
            if let Err(e) = run_quiet(&["ip", "addr", "add", address, "dev", &nic.name]) {
                problems.push(format!("restoring {address} on {}: {e}", nic.name));
            }
        }
        let updown = if nic.up { "up" } else { "down" };
        if let Err(e) = run_quiet(&["ip", "link", "set", "dev", &nic.name, updown]) {
            problems.push(format!("setting {} {updown}: {e}", nic.name));
        }
    }
    for namespace in record.namespaces.iter().rev() {
        if Path::new("/run/netns").join(namespace).exists() {
            if let Err(e) = run_quiet(&["ip", "netns", "delete", namespace]) {
                problems.push(format!("deleting namespace {namespace}: {e}"));
            }
        }
    }
    problems
}

/// Restores what killed runs left: NICs moved, namespaces created. Returns one line per
/// record restored or not.
pub fn restore_leftovers(state_dir: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    let found: Vec<(PathBuf, Record)> = leftovers(state_dir, RECORD_KIND);
    for (path, record) in found {
        let problems = restore_record(&record);
        let nics: Vec<&str> = record.nics.iter().map(|n| n.name.as_str()).collect();
        if problems.is_empty() {
            let _ = std::fs::remove_file(&path);
            if !record.namespaces.is_empty() {
                lines.push(format!(
                    "restored what an interrupted run left ({}; NICs {}): from {}",
                    record.namespaces.join(", "),
                    if nics.is_empty() {
                        "none".to_string()
                    } else {
                        nics.join(", ")
                    },
                    path.display()
                ));
            }
        } else {
            lines.push(format!(
                "could not restore what an interrupted run left ({}): {}",
                path.display(),
                problems.join("; ")
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    // `ip -j addr show dev eth0` on a Debian host (iproute2 6.1), addresses shortened.
    const ADDR: &str = r#"[{"ifindex":4,"ifname":"eth0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":1400,"qdisc":"pfifo_fast","operstate":"UP","group":"default","txqlen":1000,"link_type":"ether","address":"02:fc:00:00:00:01","broadcast":"ff:ff:ff:ff:ff:ff","addr_info":[{"family":"inet","local":"192.0.2.2","prefixlen":24,"broadcast":"192.0.2.255","scope":"global","label":"eth0","valid_life_time":4294967295,"preferred_life_time":4294967295},{"family":"inet6","local":"fd00::2","prefixlen":64,"scope":"global","nodad":true,"valid_life_time":4294967295,"preferred_life_time":4294967295},{"family":"inet6","local":"fe80::fc:ff:fe00:1","prefixlen":64,"scope":"link","valid_life_time":4294967295,"preferred_life_time":4294967295}]}]"#;
    const DOWN: &str = r#"[{"ifindex":5,"ifname":"eth1","flags":["BROADCAST","MULTICAST"],"mtu":1500,"qdisc":"noop","operstate":"DOWN","group":"default","txqlen":1000,"link_type":"ether","address":"52:54:00:12:34:57","broadcast":"ff:ff:ff:ff:ff:ff","addr_info":[]}]"#;

    #[test]
    fn nic_state_keeps_global_addresses_and_the_up_flag() {
        let (up, addresses) = parse_nic_state(ADDR, "eth0").unwrap();
        assert!(up);
        assert_eq!(addresses, ["192.0.2.2/24", "fd00::2/64"]);
        let (up, addresses) = parse_nic_state(DOWN, "eth1").unwrap();
        assert!(!up);
        assert!(addresses.is_empty());
        assert!(parse_nic_state(DOWN, "eth7").is_err());
    }

    #[test]
    fn default_route_devices_are_found() {
        let json = r#"[{"dst":"default","gateway":"192.0.2.1","dev":"eth0","flags":[]}]"#;
        assert_eq!(default_route_devices(json), ["eth0"]);
        assert!(default_route_devices("[]").is_empty());
        assert!(default_route_devices("").is_empty());
    }

    #[test]
    fn operstate_is_read() {
        assert_eq!(parse_operstate(DOWN).as_deref(), Some("DOWN"));
        assert_eq!(parse_operstate("[]"), None);
    }
}
