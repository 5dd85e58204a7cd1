//! Switching an IOMMU group's domain type for an experiment, and always switching it back.
//!
//! The kernel changes a group's type only while no driver is bound to its devices (`identity`
//! is refused while bound: EPERM on 6.12, EBUSY on 6.1), so a switch records the group's type,
//! each device's driver and each NIC's link state and addresses, unbinds the devices, writes
//! `/sys/kernel/iommu_groups/N/type`, binds every device to its own driver again, waits for its
//! netdevs and disks to come back and brings the NICs up again with their addresses.
//!
//! [`DomainSwitch`] is an RAII guard: [`DomainSwitch::restore`] puts the original type and
//! bindings back and says what failed; `Drop` does the same on every exit path that unwinds
//! (errors, panics, Ctrl-C through the caller's stop flag). While a switch is alive SIGINT,
//! SIGTERM, SIGHUP and SIGQUIT only set a flag, so neither a second Ctrl-C nor a closed terminal
//! can end the process before the restore. A SIGKILL cannot be caught: the switch is recorded in
//! `/run/iommutop/domain-PID.json` before anything changes, and [`restore_leftovers`] (run at the
//! start of every command that switches) puts back what a killed run left.
//!
//! Groups whose devices hold a mounted file system, swap or a device-mapper/md holder are never
//! touched, nor NICs that carry the host's default route.

use crate::sysinfo::{entry_names, link_name};
use iommutop_workloads::state::{leftovers, StateRecord, STATE_DIR};
use serde::{Deserialize, Serialize};
use signal_hook::SigId;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Domain types a switch accepts (what `/sys/kernel/iommu_groups/N/type` takes).
pub const TYPES: [&str; 4] = ["identity", "DMA", "DMA-FQ", "auto"];

/// How long a device may take to bind again and show its netdevs and disks.
const BIND_TIMEOUT: Duration = Duration::from_secs(15);

const RECORD_KIND: &str = "domain";

#[derive(Debug, thiserror::Error)]
pub enum DomainError {
    #[error("`{0}` is not a domain type (one of: identity, DMA, DMA-FQ, auto)")]
    UnknownType(String),
    #[error("no PCI device {0} (see `lspci -D` or /sys/bus/pci/devices)")]
    NoDevice(String),
    #[error("switching an IOMMU group's domain type needs root (it unbinds and binds drivers)")]
    NotRoot,
    #[error("{0} is in no IOMMU group: no IOMMU translates it, so it has no domain to switch")]
    NoGroup(String),
    #[error(
        "this kernel cannot change IOMMU group {group}'s domain type at run time (its `type` is \
         read-only: Linux 5.11 or later is needed)"
    )]
    ReadOnly { group: String },
    #[error("refusing to unbind {device}: {why}")]
    InUse { device: String, why: String },
    #[error("the kernel refused `{wanted}` for IOMMU group {group} ({errno}): {hint}")]
    Refused {
        group: String,
        wanted: String,
        errno: String,
        hint: &'static str,
    },
    #[error("IOMMU group {group} is `{now}` after writing `{wanted}`")]
    Unchanged {
        group: String,
        wanted: String,
        now: String,
    },
    #[error("{device} did not {what} within {seconds} s")]
    Timeout {
        device: String,
        what: String,
        seconds: u64,
    },
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Network(String),
    #[error("restoring IOMMU group {group} to `{original}`: {problems}")]
    Restore {
        group: String,
        original: String,
        problems: String,
    },
}

impl DomainError {
    /// What the user asked for cannot be (exit code 2).
    pub fn is_usage(&self) -> bool {
        matches!(self, DomainError::UnknownType(_) | DomainError::NoDevice(_))
    }

    /// Whether the system, not iommutop or the user, is what stands in the way (exit code 3).
    pub fn is_environment(&self) -> bool {
        matches!(
            self,
            DomainError::NoGroup(_)
                | DomainError::NotRoot
                | DomainError::ReadOnly { .. }
                | DomainError::Refused { .. }
                | DomainError::InUse { .. }
        )
    }
}

/// What the sysfs write's errno means for a domain type change.
fn refusal_hint(error: &std::io::Error) -> (String, &'static str) {
    let errno = error.raw_os_error().unwrap_or(0);
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::EBUSY => "EBUSY",
        libc::EINVAL => "EINVAL",
        libc::EACCES => "EACCES",
        libc::ENODEV => "ENODEV",
        libc::EIO => "EIO",
        _ => "",
    };
    let hint = match errno {
        libc::EPERM | libc::EBUSY => {
            "a device of the group is still bound to a driver or in use (the kernel changes the \
             type only of a group with no driver bound): something bound it again, or a VFIO \
             user holds it open"
        }
        libc::EINVAL => {
            "the kernel does not allow this type for the group: the device may require \
             translation (untrusted or external-facing), or the IOMMU cannot give it this domain"
        }
        libc::EACCES => "changing a group's type needs root",
        _ => "see the kernel log (`dmesg`)",
    };
    let errno = if name.is_empty() {
        error.to_string()
    } else {
        name.to_string()
    };
    (errno, hint)
}

/// One device of the group, as it was before the switch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Member {
    /// Its name in the group (a PCI address for PCI devices).
    name: String,
    /// Its bus (`pci`): drivers live in `/sys/bus/BUS/drivers`.
    bus: String,
    driver: Option<String>,
    /// How many netdevs and disks it had: rebinding is complete when they are back.
    netdevs: usize,
    disks: usize,
    /// Its NICs that were up, with their addresses, to bring back after rebinding.
    links: Vec<Link>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Link {
    name: String,
    addresses: Vec<String>,
}

/// What is written to the state directory before anything changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Record {
    group: String,
    original_type: String,
    members: Vec<Member>,
}

/// Where the switch reads and writes: `/` and `/run/iommutop` in production; a fake tree in tests.
#[derive(Debug, Clone)]
pub struct Host {
    pub root: PathBuf,
    /// Where the record for [`restore_leftovers`] goes; `None` writes none.
    pub state_dir: Option<PathBuf>,
    /// Whether NIC addresses are read and restored with `ip` (not in a fake tree).
    pub manage_addresses: bool,
    /// How long a device may take to bind again and show its netdevs and disks.
    pub bind_timeout: Duration,
}

impl Host {
    pub fn system() -> Host {
        Host {
            root: PathBuf::from("/"),
            state_dir: Some(PathBuf::from(STATE_DIR)),
            manage_addresses: true,
            bind_timeout: BIND_TIMEOUT,
        }
    }

    fn sys(&self, path: &str) -> PathBuf {
        self.root.join(path)
    }

    fn device_dir(&self, member: &Member) -> PathBuf {
        self.root
            .join("sys/bus")
            .join(&member.bus)
            .join("devices")
            .join(&member.name)
    }
}

/// While alive, SIGINT, SIGTERM, SIGHUP and SIGQUIT set a flag instead of ending the process.
/// signal-hook cannot put the default action back when the last flag goes: a SIGHUP or SIGQUIT
/// after the restore is ignored (the commands that switch end right after; SIGINT and SIGTERM
/// keep their stop flag).
struct SignalShield {
    ids: Vec<SigId>,
    raised: Arc<AtomicBool>,
}

impl SignalShield {
    fn raise() -> SignalShield {
        let raised = Arc::new(AtomicBool::new(false));
        let ids = [
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGHUP,
            signal_hook::consts::SIGQUIT,
        ]
        .into_iter()
        .filter_map(|signal| signal_hook::flag::register(signal, Arc::clone(&raised)).ok())
        .collect();
        SignalShield { ids, raised }
    }
}

impl Drop for SignalShield {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// An IOMMU group in another domain type until restored or dropped.
pub struct DomainSwitch {
    host: Host,
    record: Record,
    current_type: String,
    restored: bool,
    state: Option<StateRecord>,
    // Dropped last, after the restore in `Drop::drop`.
    shield: SignalShield,
}

impl DomainSwitch {
    /// Puts the group of the PCI device `address` in `new_type`.
    pub fn apply(host: &Host, address: &str, new_type: &str) -> Result<DomainSwitch, DomainError> {
        if !TYPES.contains(&new_type) {
            return Err(DomainError::UnknownType(new_type.to_string()));
        }
        let device_dir = host.sys("sys/bus/pci/devices").join(address);
        if !device_dir.exists() {
            return Err(DomainError::NoDevice(address.to_string()));
        }
        // SAFETY: geteuid has no preconditions.
        if host.root == Path::new("/") && unsafe { libc::geteuid() } != 0 {
            return Err(DomainError::NotRoot);
        }
        let group = link_name(&device_dir.join("iommu_group"))
            .ok_or_else(|| DomainError::NoGroup(address.to_string()))?;
        let group_dir = host.sys("sys/kernel/iommu_groups").join(&group);
        let type_file = group_dir.join("type");
        let original_type = read(&type_file, "reading")?;
        check_writable(&type_file, &group)?;
        let mut members = Vec::new();
        for name in entry_names(&group_dir.join("devices")) {
            members.push(survey(host, &group_dir.join("devices").join(&name), &name)?);
        }
        let record = Record {
            group,
            original_type: original_type.clone(),
            members,
        };
        let state = match &host.state_dir {
            Some(dir) => Some(StateRecord::write(dir, RECORD_KIND, &record).map_err(|e| {
                DomainError::Network(format!("recording the switch before making it: {e}"))
            })?),
            None => None,
        };
        let mut switch = DomainSwitch {
            host: host.clone(),
            record,
            current_type: original_type,
            restored: false,
            state,
            shield: SignalShield::raise(),
        };
        // On error the switch is dropped here, which restores what was changed.
        switch.set_type(new_type)?;
        Ok(switch)
    }

    pub fn original_type(&self) -> &str {
        &self.record.original_type
    }

    pub fn group(&self) -> &str {
        &self.record.group
    }

    /// Whether a signal arrived while the switch was in place (the caller's stop flag sees it too).
    pub fn interrupted(&self) -> bool {
        self.shield.raised.load(Ordering::Relaxed)
    }

    /// Puts the original type and bindings back; also done by `Drop`. Safe to call twice.
    pub fn restore(&mut self) -> Result<(), DomainError> {
        if self.restored {
            return Ok(());
        }
        self.restored = true;
        let original = self.record.original_type.clone();
        let result = self.set_type(&original).map_err(|e| DomainError::Restore {
            group: self.record.group.clone(),
            original,
            problems: e.to_string(),
        });
        if result.is_ok() {
            if let Some(state) = self.state.take() {
                state.remove();
            }
        }
        result
    }

    /// Unbinds the group, writes the type, binds every device again (whatever the kernel said
    /// about the type), and checks the type took.
    fn set_type(&mut self, wanted: &str) -> Result<(), DomainError> {
        if self.current_type == wanted {
            return Ok(());
        }
        let type_file = self
            .host
            .sys("sys/kernel/iommu_groups")
            .join(&self.record.group)
            .join("type");
        let mut problems = Vec::new();
        for member in &self.record.members {
            let driver_link = self.host.device_dir(member).join("driver");
            if driver_link.exists() {
                write(&driver_link.join("unbind"), &member.name, "unbinding")?;
            }
        }
        let written = std::fs::write(&type_file, wanted).map_err(|e| {
            let (errno, hint) = refusal_hint(&e);
            DomainError::Refused {
                group: self.record.group.clone(),
                wanted: wanted.to_string(),
                errno,
                hint,
            }
        });
        for member in &self.record.members {
            if let Err(e) = rebind(&self.host, member) {
                problems.push(e.to_string());
            }
        }
        written?;
        if let Some(problem) = problems.into_iter().next() {
            return Err(DomainError::Network(problem));
        }
        let now = read(&type_file, "reading")?;
        self.current_type = now.clone();
        if now != wanted {
            return Err(DomainError::Unchanged {
                group: self.record.group.clone(),
                wanted: wanted.to_string(),
                now,
            });
        }
        Ok(())
    }
}

impl Drop for DomainSwitch {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("iommutop: {e}");
        }
    }
}

/// Binds a member to its own driver again and waits for it, its netdevs and disks; brings its
/// NICs back up with their addresses.
fn rebind(host: &Host, member: &Member) -> Result<(), DomainError> {
    let Some(driver) = member.driver.as_deref() else {
        return Ok(());
    };
    let device_dir = host.device_dir(member);
    let bus_dir = host.root.join("sys/bus").join(&member.bus);
    if link_name(&device_dir.join("driver")).as_deref() != Some(driver) {
        let bind = bus_dir.join("drivers").join(driver).join("bind");
        if write(&bind, &member.name, "binding").is_err() {
            write(
                &bus_dir.join("drivers_probe"),
                &member.name,
                "probing drivers for",
            )?;
        }
    }
    wait_for(
        host,
        &member.name,
        &format!("bind to {driver} again"),
        || link_name(&device_dir.join("driver")).as_deref() == Some(driver),
    )?;
    wait_for(
        host,
        &member.name,
        "show its network interfaces and disks again",
        || {
            entry_names(&device_dir.join("net")).len() >= member.netdevs
                && disk_count(host, &device_dir, &member.name) >= member.disks
        },
    )?;
    let now = entry_names(&device_dir.join("net"));
    for link in &member.links {
        // A netdev may come back under another name: the same position among the device's.
        let name = if now.contains(&link.name) {
            link.name.clone()
        } else {
            let index = member
                .links
                .iter()
                .position(|l| l.name == link.name)
                .unwrap_or(0);
            now.get(index).cloned().unwrap_or_else(|| link.name.clone())
        };
        bring_up(host, &name, &link.addresses)?;
    }
    Ok(())
}

fn bring_up(host: &Host, nic: &str, addresses: &[String]) -> Result<(), DomainError> {
    if !host.manage_addresses {
        return Ok(());
    }
    let run = |args: &[&str]| {
        iommutop_workloads::process::run_quiet(args)
            .map(|_| ())
            .map_err(|e| DomainError::Network(format!("restoring {nic}: {e}")))
    };
    for address in addresses {
        run(&["ip", "addr", "replace", address, "dev", nic])?;
    }
    run(&["ip", "link", "set", "dev", nic, "up"])
}

fn wait_for(
    host: &Host,
    device: &str,
    what: &str,
    mut done: impl FnMut() -> bool,
) -> Result<(), DomainError> {
    let deadline = Instant::now() + host.bind_timeout;
    loop {
        if done() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(DomainError::Timeout {
                device: device.to_string(),
                what: what.to_string(),
                seconds: host.bind_timeout.as_secs(),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Records one device of the group, refusing devices that are in use.
fn survey(host: &Host, link: &Path, name: &str) -> Result<Member, DomainError> {
    let bus = link_name(&link.join("subsystem")).unwrap_or_else(|| "pci".to_string());
    let device_dir = host
        .root
        .join("sys/bus")
        .join(&bus)
        .join("devices")
        .join(name);
    let driver = link_name(&device_dir.join("driver"));
    let disks = disks_of(host, &device_dir, name);
    refuse_busy_disks(host, name, &disks)?;
    let netdevs = entry_names(&device_dir.join("net"));
    let links = if driver.is_some() {
        up_links(host, name, &netdevs)?
    } else {
        Vec::new()
    };
    Ok(Member {
        name: name.to_string(),
        bus,
        driver,
        netdevs: netdevs.len(),
        disks: disks.len(),
        links,
    })
}

/// The NICs that are up, with their addresses; refuses one that carries the default route.
fn up_links(host: &Host, device: &str, netdevs: &[String]) -> Result<Vec<Link>, DomainError> {
    let routes = default_route_devices(host);
    let mut links = Vec::new();
    for nic in netdevs {
        if routes.contains(nic) {
            return Err(DomainError::InUse {
                device: device.to_string(),
                why: format!(
                    "its interface {nic} carries this host's default route: unbinding it would cut \
                     the host off (use a NIC that is free for testing)"
                ),
            });
        }
        let flags = read(
            &host.sys("sys/class/net").join(nic).join("flags"),
            "reading",
        )
        .ok()
        .and_then(|f| u32::from_str_radix(f.trim_start_matches("0x"), 16).ok())
        .unwrap_or(0);
        if flags & 1 == 0 {
            continue;
        }
        let addresses = if host.manage_addresses {
            let json =
                iommutop_workloads::process::run_quiet(&["ip", "-j", "addr", "show", "dev", nic])
                    .map_err(|e| DomainError::Network(format!("reading {nic}'s addresses: {e}")))?;
            iommutop_workloads::netns::parse_nic_state(&json, nic)
                .map_err(DomainError::Network)?
                .1
        } else {
            Vec::new()
        };
        links.push(Link {
            name: nic.clone(),
            addresses,
        });
    }
    Ok(links)
}

/// Interfaces of the default IPv4 and IPv6 routes (`/proc/net/route`, `/proc/net/ipv6_route`).
fn default_route_devices(host: &Host) -> Vec<String> {
    let v4 = std::fs::read_to_string(host.sys("proc/net/route")).unwrap_or_default();
    let v6 = std::fs::read_to_string(host.sys("proc/net/ipv6_route")).unwrap_or_default();
    let mut devices: Vec<String> = v4
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.get(1) == Some(&"00000000") && fields.get(7) == Some(&"00000000"))
                .then(|| fields[0].to_string())
        })
        .collect();
    devices.extend(v6.lines().filter_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let default = fields.first().is_some_and(|d| d.bytes().all(|b| b == b'0'))
            && fields.get(1) == Some(&"00");
        (default && fields.len() == 10 && fields[9] != "lo").then(|| fields[9].to_string())
    }));
    devices
}

/// The disks of a device: for a PCI function what sysinfo finds (NVMe namespaces, also behind a
/// multipath head; virtio disks), else the /sys/block entries under its sysfs directory.
fn disks_of(host: &Host, device_dir: &Path, name: &str) -> Vec<String> {
    let mut disks = crate::sysinfo::device_facts(&host.root, name, &[]).disks;
    disks.retain(|d| host.sys("sys/block").join(d).exists());
    if disks.is_empty() {
        disks = block_devices(host, device_dir);
    }
    disks
}

/// Block devices whose sysfs directory lies under a device's (`block/sda` under a SCSI host).
fn block_devices(host: &Host, device_dir: &Path) -> Vec<String> {
    let Ok(device) = std::fs::canonicalize(device_dir) else {
        return Vec::new();
    };
    entry_names(&host.sys("sys/block"))
        .into_iter()
        .filter(|disk| {
            std::fs::canonicalize(host.sys("sys/block").join(disk))
                .is_ok_and(|path| path.starts_with(&device))
        })
        .collect()
}

fn disk_count(host: &Host, device_dir: &Path, name: &str) -> usize {
    disks_of(host, device_dir, name).len()
}

/// Refuses disks (or their partitions) that are mounted, swap, or held by dm/md.
fn refuse_busy_disks(host: &Host, device: &str, disks: &[String]) -> Result<(), DomainError> {
    let mounted = iommutop_workloads::block::mounted_devnums(
        &std::fs::read_to_string(host.sys("proc/self/mountinfo")).unwrap_or_default(),
    );
    let swaps = iommutop_workloads::block::swap_devices(
        &std::fs::read_to_string(host.sys("proc/swaps")).unwrap_or_default(),
    );
    for disk in disks {
        let base = host.sys("sys/block").join(disk);
        let mut parts = vec![(disk.clone(), base.clone())];
        for entry in entry_names(&base) {
            if base.join(&entry).join("partition").exists() {
                parts.push((entry.clone(), base.join(&entry)));
            }
        }
        for (part, dir) in parts {
            let refuse = |why: String| DomainError::InUse {
                device: device.to_string(),
                why: format!("/dev/{part} {why}"),
            };
            let devnum = read(&dir.join("dev"), "reading").unwrap_or_default();
            if !devnum.is_empty() && mounted.contains(&devnum) {
                return Err(refuse("has a mounted file system".into()));
            }
            if swaps.contains(&format!("/dev/{part}")) {
                return Err(refuse("is in use as swap".into()));
            }
            let holders = entry_names(&dir.join("holders"));
            if !holders.is_empty() {
                return Err(refuse(format!("is held by {}", holders.join(", "))));
            }
        }
    }
    Ok(())
}

fn check_writable(type_file: &Path, group: &str) -> Result<(), DomainError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(type_file)
        .map_err(|source| DomainError::Io {
            what: "reading",
            path: type_file.to_path_buf(),
            source,
        })?
        .permissions()
        .mode();
    if mode & 0o222 == 0 {
        return Err(DomainError::ReadOnly {
            group: group.to_string(),
        });
    }
    Ok(())
}

/// The PCI address of a device named by its address, a netdev or a disk.
pub fn pci_address_of(host: &Host, name: &str) -> Result<String, DomainError> {
    if host.sys("sys/bus/pci/devices").join(name).exists() {
        return Ok(name.to_string());
    }
    let facts = crate::sysinfo::collect(&host.root).map_err(|e| DomainError::Io {
        what: "reading",
        path: host.root.clone(),
        source: std::io::Error::other(e.to_string()),
    })?;
    facts
        .owner_of(name)
        .map(|d| d.pci_address.clone())
        .ok_or_else(|| DomainError::NoDevice(name.to_string()))
}

/// Puts back what switches of killed runs left (their records in `/run/iommutop`); one line
/// per record found.
pub fn restore_leftovers(host: &Host) -> Vec<String> {
    let Some(dir) = &host.state_dir else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    for (path, record) in leftovers::<Record>(dir, RECORD_KIND) {
        let group = record.group.clone();
        let original = record.original_type.clone();
        let mut switch = DomainSwitch {
            host: Host {
                state_dir: None,
                ..host.clone()
            },
            current_type: String::new(),
            record,
            restored: false,
            state: None,
            shield: SignalShield::raise(),
        };
        match switch.restore() {
            Ok(()) => {
                let _ = std::fs::remove_file(&path);
                lines.push(format!(
                    "restored IOMMU group {group} to `{original}` (left switched by a killed run)"
                ));
            }
            Err(e) => lines.push(format!("{e} (record kept in {})", path.display())),
        }
    }
    lines
}

fn read(path: &Path, what: &'static str) -> Result<String, DomainError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|source| DomainError::Io {
            what,
            path: path.to_path_buf(),
            source,
        })
}

fn write(path: &Path, value: &str, what: &'static str) -> Result<(), DomainError> {
    std::fs::write(path, value).map_err(|source| DomainError::Io {
        what,
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests;
