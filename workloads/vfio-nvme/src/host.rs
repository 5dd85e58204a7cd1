//! What the tool reads and changes on the host, and how it puts it back.
//!
//! Changes: the controller's driver binding (nvme → vfio-pci and back, through `driver_override`,
//! `unbind` and `drivers_probe`) and the huge page reservation (`nr_hugepages`). Each is
//! recorded — in memory and in a state file under /run/iommutop — before it is made, and undone
//! by [`HostGuard::restore`], by the guard's `Drop` on a panic, or, if the parent itself was
//! killed, by the next run, which finds the state file of a dead process and restores from it.
//!
//! Refusals: a controller with a namespace that is mounted (/proc/self/mountinfo major:minor),
//! partitioned (/sys/block/X/Xp*), held (/sys/block/X/holders/*) or used as swap is not touched.

use crate::engine::Located;
use crate::error::Error;
use crate::mem::reserve_advice;
use crate::params::{PageSize, Target};
use iommutop_model::facts::is_pci_address;
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// PCI class of an NVMe controller (mass storage, non-volatile memory, NVMe interface).
pub const NVME_CLASS: u32 = 0x01_08_02;
const VFIO_PCI: &str = "vfio-pci";
const BIND_TIMEOUT: Duration = Duration::from_secs(15);
const NAMESPACE_TIMEOUT: Duration = Duration::from_secs(60);

/// The file system roots the tool reads and writes (`/` outside tests).
#[derive(Debug, Clone)]
pub struct Host {
    root: PathBuf,
}

/// A driver binding change, as made and as undone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rebind {
    pub pci_address: String,
    /// The driver before the run (`None`: unbound).
    pub from: Option<String>,
    /// `driver_override` before the run.
    pub override_before: Option<String>,
    pub to: String,
    /// Namespace block devices the controller had, which must come back.
    pub namespaces: Vec<String>,
    pub restored: bool,
}

/// A huge page reservation change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HugeChange {
    pub page_size: PageSize,
    pub from: u64,
    pub to: u64,
    pub restored: bool,
}

/// What the tool changed on the host for a run, and whether each was put back.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostChanges {
    pub rebind: Option<Rebind>,
    pub hugepages: Vec<HugeChange>,
    /// A state left by an earlier run that was killed, restored before this one started.
    pub recovered: Option<String>,
}

impl HostChanges {
    pub fn is_empty(&self) -> bool {
        self.rebind.is_none() && self.hugepages.is_empty() && self.recovered.is_none()
    }

    /// One sentence per change.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if let Some(r) = &self.recovered {
            notes.push(r.clone());
        }
        if let Some(b) = &self.rebind {
            let from = b.from.as_deref().unwrap_or("no driver");
            notes.push(if b.restored {
                format!(
                    "{} was bound to {} for the run and is back on {from}",
                    b.pci_address, b.to
                )
            } else {
                format!(
                    "{} is bound to {} (was {from}): NOT restored",
                    b.pci_address, b.to
                )
            });
        }
        for h in &self.hugepages {
            notes.push(format!(
                "{} huge pages raised from {} to {} for the run{}",
                h.page_size,
                h.from,
                h.to,
                if h.restored {
                    " and put back"
                } else {
                    ": NOT put back"
                }
            ));
        }
        notes
    }
}

/// The state file's contents: enough to undo everything if this process dies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct SavedState {
    pid: u32,
    rebind: Option<Rebind>,
    hugepages: Vec<HugeChange>,
}

/// The driver state of a PCI device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceState {
    pub driver: Option<String>,
    pub driver_override: Option<String>,
    pub group: Option<u32>,
    pub class: u32,
}

impl Host {
    pub fn system() -> Host {
        Host {
            root: PathBuf::from("/"),
        }
    }

    /// A host rooted elsewhere (tests build a fake sysfs there).
    pub fn at(root: impl Into<PathBuf>) -> Host {
        Host { root: root.into() }
    }

    fn sys(&self, rel: &str) -> PathBuf {
        self.root.join("sys").join(rel)
    }

    fn dev(&self) -> PathBuf {
        self.root.join("dev")
    }

    fn pci(&self, pci: &str) -> PathBuf {
        self.sys(&format!("bus/pci/devices/{pci}"))
    }

    fn read(&self, path: &Path) -> Result<String, Error> {
        fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .map_err(|e| Error::file(path, e))
    }

    fn write(&self, path: &Path, value: &str) -> Result<(), Error> {
        fs::write(path, value).map_err(|e| Error::file(path, e))
    }

    fn link_name(path: &Path) -> Option<String> {
        fs::read_link(path)
            .ok()?
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
    }

    /// Every NVMe controller's PCI address.
    pub fn nvme_controllers(&self) -> Vec<String> {
        let mut found: Vec<String> = fs::read_dir(self.sys("bus/pci/devices"))
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| self.device_state(name).is_ok_and(|s| s.class == NVME_CLASS))
            .collect();
        found.sort();
        found
    }

    /// The PCI address of a controller named by PCI address, controller (`nvme0`) or namespace
    /// (`nvme0n1`, `/dev/nvme0n1`); with no name, the only NVMe controller there is.
    pub fn resolve_device(&self, name: Option<&str>) -> Result<String, Error> {
        let Some(name) = name else {
            let all = self.nvme_controllers();
            return match all.as_slice() {
                [one] => Ok(one.clone()),
                [] => Err(Error::Device {
                    input: "(none given)".into(),
                    reason: "no NVMe controller found (PCI class 0x010802)".into(),
                }),
                many => Err(Error::Device {
                    input: "(none given)".into(),
                    reason: format!(
                        "{} NVMe controllers: name one with --device ({})",
                        many.len(),
                        many.join(", ")
                    ),
                }),
            };
        };
        let bad = |reason: String| Error::Device {
            input: name.to_string(),
            reason,
        };
        let short = name.strip_prefix("/dev/").unwrap_or(name);
        let pci = if is_pci_address(short) {
            short.to_string()
        } else if is_pci_address(&format!("0000:{short}")) {
            format!("0000:{short}")
        } else if short.starts_with("nvme") {
            let candidates = [
                self.sys(&format!("class/nvme/{short}")),
                self.sys(&format!("class/block/{short}")),
            ];
            let found = candidates
                .iter()
                .find_map(|p| fs::canonicalize(p).ok().and_then(|c| pci_in_path(&c)))
                .or_else(|| self.multipath_head_pci(short));
            found.ok_or_else(|| {
                bad(format!(
                    "no NVMe controller or namespace called {short} (see /sys/class/nvme)"
                ))
            })?
        } else {
            return Err(bad("give a PCI address (0000:01:00.0), a controller (nvme0) or a namespace (/dev/nvme0n1)".into()));
        };
        let state = self
            .device_state(&pci)
            .map_err(|_| bad(format!("no PCI device {pci}")))?;
        if state.class != NVME_CLASS {
            return Err(bad(format!(
                "{pci} is not an NVMe controller (PCI class {:#08x})",
                state.class
            )));
        }
        Ok(pci)
    }

    fn multipath_head_pci(&self, head: &str) -> Option<String> {
        let paths = fs::read_dir(self.sys(&format!("block/{head}/multipath"))).ok()?;
        paths.filter_map(|e| e.ok()).find_map(|e| {
            fs::canonicalize(e.path())
                .ok()
                .and_then(|c| pci_in_path(&c))
        })
    }

    pub fn device_state(&self, pci: &str) -> Result<DeviceState, Error> {
        let dir = self.pci(pci);
        let class_text = self.read(&dir.join("class"))?;
        let class = u32::from_str_radix(class_text.trim_start_matches("0x"), 16).unwrap_or(0);
        let driver_override = fs::read_to_string(dir.join("driver_override"))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty() && s != "(null)");
        Ok(DeviceState {
            driver: Host::link_name(&dir.join("driver")),
            driver_override,
            group: Host::link_name(&dir.join("iommu_group")).and_then(|g| g.parse().ok()),
            class,
        })
    }

    /// The block devices of the controller's namespaces (`nvme0n1`, …), including multipath
    /// heads the controller is a path of.
    pub fn namespaces(&self, pci: &str) -> Vec<String> {
        let mut names = Vec::new();
        let ctrls = fs::read_dir(self.pci(pci).join("nvme"))
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok());
        for ctrl in ctrls {
            for entry in fs::read_dir(ctrl.path())
                .into_iter()
                .flatten()
                .filter_map(|e| e.ok())
            {
                let name = entry.file_name().to_string_lossy().into_owned();
                match namespace_kind(&name) {
                    Some(NsKind::Block) if self.sys(&format!("block/{name}")).exists() => {
                        names.push(name)
                    }
                    Some(NsKind::Path) => {
                        if let Some(head) = self.head_of_path(&name) {
                            names.push(head);
                        }
                    }
                    _ => {}
                }
            }
        }
        names.sort();
        names.dedup();
        names
    }

    fn head_of_path(&self, path_name: &str) -> Option<String> {
        fs::read_dir(self.sys("block"))
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|head| {
                self.sys(&format!("block/{head}/multipath/{path_name}"))
                    .exists()
            })
    }

    /// Why the namespaces cannot be taken from the host, one reason per use; empty if free.
    pub fn namespace_uses(&self, namespaces: &[String]) -> Result<Vec<String>, Error> {
        let mountinfo_path = self.root.join("proc/self/mountinfo");
        let mountinfo =
            fs::read_to_string(&mountinfo_path).map_err(|e| Error::file(&mountinfo_path, e))?;
        let swaps = fs::read_to_string(self.root.join("proc/swaps")).unwrap_or_default();
        let mut uses = Vec::new();
        for ns in namespaces {
            let dir = self.sys(&format!("block/{ns}"));
            let mut devices = vec![(ns.clone(), self.read(&dir.join("dev")).unwrap_or_default())];
            let mut partitions: Vec<String> = fs::read_dir(&dir)
                .into_iter()
                .flatten()
                .filter_map(|e| e.ok())
                .filter(|e| e.path().join("partition").exists())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            partitions.sort();
            if !partitions.is_empty() {
                uses.push(format!("{ns} has partitions ({})", partitions.join(", ")));
            }
            for p in &partitions {
                devices.push((
                    p.clone(),
                    self.read(&dir.join(p).join("dev")).unwrap_or_default(),
                ));
            }
            for (name, _) in &devices {
                let holders_dir = if name == ns {
                    dir.join("holders")
                } else {
                    dir.join(name).join("holders")
                };
                let mut holders: Vec<String> = fs::read_dir(holders_dir)
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                holders.sort();
                if !holders.is_empty() {
                    uses.push(format!("{name} has holders ({})", holders.join(", ")));
                }
            }
            for (name, devno) in &devices {
                if devno.is_empty() {
                    continue;
                }
                for mount_point in mounts_of(&mountinfo, devno) {
                    uses.push(format!("{name} ({devno}) is mounted at {mount_point}"));
                }
                if swaps
                    .lines()
                    .skip(1)
                    .any(|l| l.split_whitespace().next() == Some(&format!("/dev/{name}")))
                {
                    uses.push(format!("{name} is in use as swap"));
                }
            }
        }
        Ok(uses)
    }

    /// (nr_hugepages, free_hugepages) for a huge page size.
    pub fn hugepage_counts(&self, page: PageSize) -> Result<(u64, u64), Error> {
        let dir = self.hugepages_dir(page)?;
        let number = |f: &str| -> Result<u64, Error> {
            let p = dir.join(f);
            self.read(&p)?
                .parse()
                .map_err(|_| Error::HugePages(format!("{}: not a number", p.display())))
        };
        Ok((number("nr_hugepages")?, number("free_hugepages")?))
    }

    fn hugepages_dir(&self, page: PageSize) -> Result<PathBuf, Error> {
        let name = page
            .hugepages_dir()
            .ok_or_else(|| Error::HugePages(format!("{page} pages are not huge pages")))?;
        let dir = self.sys(&format!("kernel/mm/hugepages/{name}"));
        if !dir.exists() {
            return Err(Error::HugePages(format!(
                "this kernel has no {page} huge pages ({} missing): {}",
                dir.display(),
                reserve_advice(page, 1)
            )));
        }
        Ok(dir)
    }

    fn set_nr_hugepages(&self, page: PageSize, n: u64) -> Result<u64, Error> {
        let path = self.hugepages_dir(page)?.join("nr_hugepages");
        self.write(&path, &n.to_string())?;
        self.read(&path)?
            .parse()
            .map_err(|_| Error::HugePages(format!("{}: not a number", path.display())))
    }

    /// Makes sure `needed` free huge pages of `page` exist: checks, and with `reserve` raises
    /// nr_hugepages (returning the change to undo).
    pub fn ensure_hugepages(
        &self,
        page: PageSize,
        needed: u64,
        reserve: bool,
    ) -> Result<Option<HugeChange>, Error> {
        let (nr, free) = self.hugepage_counts(page)?;
        if free >= needed {
            return Ok(None);
        }
        let missing = needed - free;
        if !reserve {
            return Err(Error::HugePages(format!(
                "the run needs {needed} free {page} huge pages, {free} are free ({nr} reserved): {}",
                reserve_advice(page, nr + missing)
            )));
        }
        let want = nr + missing;
        let got = self.set_nr_hugepages(page, want)?;
        if got < want {
            let _ = self.set_nr_hugepages(page, nr);
            let why = if page == PageSize::Size1G {
                reserve_advice(page, want)
            } else {
                format!("memory is too fragmented or too small; reserve them at boot with `hugepages={want}` on the kernel command line")
            };
            return Err(Error::HugePages(format!(
                "could reserve only {} of the {missing} more {page} huge pages the run needs (nr_hugepages put back to {nr}): {why}",
                got.saturating_sub(nr)
            )));
        }
        Ok(Some(HugeChange {
            page_size: page,
            from: nr,
            to: want,
            restored: false,
        }))
    }

    fn wait(
        &self,
        what: &str,
        timeout: Duration,
        mut done: impl FnMut() -> bool,
    ) -> Result<(), Error> {
        let start = Instant::now();
        while !done() {
            if start.elapsed() > timeout {
                return Err(Error::Vfio(format!(
                    "{what}: not done after {} s",
                    timeout.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Binds `pci` to vfio-pci: driver_override, unbind from the current driver, drivers_probe.
    fn bind_vfio(&self, pci: &str, group: u32) -> Result<(), Error> {
        if !self.sys("bus/pci/drivers/vfio-pci").exists() {
            return Err(Error::Vfio(
                "the vfio-pci driver is not loaded: run `modprobe vfio-pci`".into(),
            ));
        }
        let dir = self.pci(pci);
        self.write(&dir.join("driver_override"), VFIO_PCI)?;
        if dir.join("driver").exists() {
            self.write(&dir.join("driver/unbind"), pci)?;
        }
        self.write(&self.sys("bus/pci/drivers_probe"), pci)?;
        let node = self.dev().join(format!("vfio/{group}"));
        self.wait(&format!("binding {pci} to vfio-pci"), BIND_TIMEOUT, || {
            Host::link_name(&dir.join("driver")).as_deref() == Some(VFIO_PCI) && node.exists()
        })
    }

    /// Puts the binding back as it was before `bind_vfio`, and waits for the namespaces.
    fn unbind_vfio(&self, r: &Rebind) -> Result<(), Error> {
        let pci = &r.pci_address;
        let dir = self.pci(pci);
        let current = Host::link_name(&dir.join("driver"));
        if current.is_some() && current != r.from {
            self.write(&dir.join("driver/unbind"), pci)?;
        }
        // An empty write clears driver_override.
        self.write(
            &dir.join("driver_override"),
            r.override_before.as_deref().unwrap_or("\n"),
        )?;
        let Some(driver) = &r.from else {
            return Ok(());
        };
        if Host::link_name(&dir.join("driver")).as_ref() != Some(driver) {
            self.write(&self.sys("bus/pci/drivers_probe"), pci)?;
            if Host::link_name(&dir.join("driver")).as_ref() != Some(driver) {
                let bind = self.sys(&format!("bus/pci/drivers/{driver}/bind"));
                if bind.exists() {
                    // It may have bound asynchronously meanwhile; the wait below decides.
                    let _ = self.write(&bind, pci);
                }
            }
        }
        self.wait(
            &format!("binding {pci} back to {driver}"),
            BIND_TIMEOUT,
            || Host::link_name(&dir.join("driver")).as_ref() == Some(driver),
        )?;
        let want = r.namespaces.len();
        let dev = self.dev();
        self.wait(
            &format!(
                "{pci}'s namespaces ({}) coming back",
                r.namespaces.join(", ")
            ),
            NAMESPACE_TIMEOUT,
            || {
                let now = self.namespaces(pci);
                now.len() >= want && now.iter().all(|n| dev.join(n).exists())
            },
        )
    }
}

/// Whether a name under /sys/class/nvme/nvmeX is a namespace block device or a multipath path.
enum NsKind {
    Block,
    Path,
}

fn namespace_kind(name: &str) -> Option<NsKind> {
    let rest = name.strip_prefix("nvme")?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (ctrl, ns) = rest.split_once('n')?;
    if !digits(ns) {
        return None;
    }
    if digits(ctrl) {
        return Some(NsKind::Block);
    }
    let (a, b) = ctrl.split_once('c')?;
    (digits(a) && digits(b)).then_some(NsKind::Path)
}

/// The last PCI address among a sysfs path's components.
fn pci_in_path(path: &Path) -> Option<String> {
    path.components()
        .filter_map(|c| c.as_os_str().to_str())
        .rfind(|c| is_pci_address(c))
        .map(str::to_string)
}

/// Mount points of the device `major:minor` in a mountinfo text.
pub fn mounts_of(mountinfo: &str, devno: &str) -> Vec<String> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            (f.get(2) == Some(&devno)).then(|| f.get(4).map(|m| m.to_string()))?
        })
        .collect()
}

fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists; nothing is delivered.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Holds the duty to restore what was changed for a run.
#[derive(Debug)]
pub struct HostGuard {
    host: Host,
    state_path: PathBuf,
    state: SavedState,
    recovered: Option<String>,
    done: bool,
}

impl HostGuard {
    /// Checks the device, restores what a killed earlier run left, reserves huge pages and
    /// binds to vfio-pci as `target` allows. `huge` lists the huge pages the run will map.
    pub fn prepare(
        host: &Host,
        target: &Target,
        huge: &[(PageSize, u64)],
    ) -> Result<(HostGuard, Located), Error> {
        let pci = host.resolve_device(target.device.as_deref())?;
        let state_dir = host.root.join("run/iommutop");
        let state_path = state_dir.join(format!("vfio-nvme-{pci}.json"));
        let recovered = recover_stale(host, &state_path)?;
        let state = host.device_state(&pci)?;
        let group = state.group.ok_or_else(|| Error::Refused {
            pci: pci.clone(),
            reason: "it has no IOMMU group: the IOMMU is off (boot with intel_iommu=on or amd_iommu=on) or the device is not behind one".into(),
        })?;
        let mut guard = HostGuard {
            host: host.clone(),
            state_path,
            state: SavedState {
                pid: std::process::id(),
                rebind: None,
                hugepages: Vec::new(),
            },
            recovered,
            done: false,
        };
        let needs_bind = state.driver.as_deref() != Some(VFIO_PCI);
        let mut namespaces = Vec::new();
        if needs_bind {
            let driver = state.driver.clone().unwrap_or_else(|| "no driver".into());
            if !target.bind {
                return Err(Error::Refused {
                    pci,
                    reason: format!("it is bound to {driver}: pass --bind to let the tool bind it to vfio-pci for the run and back to {driver} after"),
                });
            }
            namespaces = host.namespaces(&pci);
            let uses = host.namespace_uses(&namespaces)?;
            if !uses.is_empty() {
                return Err(Error::Refused {
                    pci,
                    reason: format!(
                        "{}: the host uses it; pick a controller it does not use",
                        uses.join("; ")
                    ),
                });
            }
        }
        fs::create_dir_all(&state_dir).map_err(|e| Error::file(&state_dir, e))?;
        guard.save()?;
        for &(page, count) in huge {
            if let Some(change) = host.ensure_hugepages(page, count, target.reserve_hugepages)? {
                guard.state.hugepages.push(change);
                guard.save()?;
            }
        }
        if needs_bind {
            guard.state.rebind = Some(Rebind {
                pci_address: pci.clone(),
                from: state.driver.clone(),
                override_before: state.driver_override.clone(),
                to: VFIO_PCI.into(),
                namespaces,
                restored: false,
            });
            guard.save()?;
            host.bind_vfio(&pci, group)?;
        }
        let located = Located {
            pci,
            group,
            sys_root: host.root.join("sys"),
            dev_root: host.dev(),
        };
        Ok((guard, located))
    }

    fn save(&self) -> Result<(), Error> {
        let text = serde_json::to_string_pretty(&self.state)
            .map_err(|e| Error::Vfio(format!("state file: {e}")))?;
        let tmp = self.state_path.with_extension("tmp");
        fs::write(&tmp, text).map_err(|e| Error::file(&tmp, e))?;
        fs::rename(&tmp, &self.state_path).map_err(|e| Error::file(&self.state_path, e))
    }

    /// Undoes every change (binding first, then huge pages) and removes the state file.
    pub fn restore(mut self) -> Result<HostChanges, Error> {
        self.done = true;
        let result = restore_state(&self.host, &mut self.state);
        let changes = HostChanges {
            rebind: self.state.rebind.clone(),
            hugepages: self.state.hugepages.clone(),
            recovered: self.recovered.take(),
        };
        match result {
            Ok(()) => {
                let _ = fs::remove_file(&self.state_path);
                Ok(changes)
            }
            Err(e) => Err(e),
        }
    }
}

impl Drop for HostGuard {
    /// The panic path: restore without being asked (errors have nowhere to go; the state file
    /// stays for the next run if this fails).
    fn drop(&mut self) {
        if !self.done && restore_state(&self.host, &mut self.state).is_ok() {
            let _ = fs::remove_file(&self.state_path);
        }
    }
}

fn restore_state(host: &Host, state: &mut SavedState) -> Result<(), Error> {
    let mut errors = Vec::new();
    if let Some(r) = &mut state.rebind {
        if !r.restored {
            match host.unbind_vfio(r) {
                Ok(()) => r.restored = true,
                Err(e) => errors.push(e.to_string()),
            }
        }
    }
    for h in &mut state.hugepages {
        if !h.restored {
            match host.set_nr_hugepages(h.page_size, h.from) {
                Ok(_) => h.restored = true,
                Err(e) => errors.push(e.to_string()),
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::Vfio(errors.join("; ")))
    }
}

/// Restores from a state file whose process is gone; refuses if that process still runs.
fn recover_stale(host: &Host, path: &Path) -> Result<Option<String>, Error> {
    let Ok(text) = fs::read_to_string(path) else {
        return Ok(None);
    };
    let mut state: SavedState = match serde_json::from_str(&text) {
        Ok(s) => s,
        Err(e) => {
            return Err(Error::Vfio(format!(
                "{} is unreadable ({e}): check the device's binding by hand, then delete the file",
                path.display()
            )))
        }
    };
    if state.pid != std::process::id() && pid_alive(state.pid) {
        return Err(Error::Refused {
            pci: state.rebind.as_ref().map(|r| r.pci_address.clone()).unwrap_or_default(),
            reason: format!(
                "another run (pid {}) is using it (state file {}); if that process is not ours, delete the file",
                state.pid,
                path.display()
            ),
        });
    }
    restore_state(host, &mut state).map_err(|e| Error::Restore {
        reason: format!(
            "restoring what a killed run (pid {}) left in {}: {e}",
            state.pid,
            path.display()
        ),
        run_error: None,
    })?;
    let _ = fs::remove_file(path);
    let what = HostChanges {
        rebind: state.rebind,
        hugepages: state.hugepages,
        recovered: None,
    }
    .notes()
    .join("; ");
    Ok(Some(format!(
        "restored what a killed run (pid {}) left: {what}",
        state.pid
    )))
}

/// Restores what a killed run left for `device` (if anything), as the next run would.
pub fn restore_leftovers(device: Option<&str>) -> Result<Option<String>, Error> {
    let host = Host::system();
    let pci = host.resolve_device(device)?;
    recover_stale(
        &host,
        &host.root.join(format!("run/iommutop/vfio-nvme-{pci}.json")),
    )
}

/// Restores what killed runs left, for every controller with a state file; a state file of a
/// run still going is left alone. One line per device put back or failed.
pub fn restore_all_leftovers() -> Vec<String> {
    let host = Host::system();
    let Ok(entries) = fs::read_dir(host.root.join("run/iommutop")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vfio-nvme-") && n.ends_with(".json"))
        })
        .filter_map(|path| match recover_stale(&host, &path) {
            Ok(note) => note,
            Err(Error::Refused { .. }) => None,
            Err(e) => Some(format!("vfio-nvme: {e}")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A fake /sys, /proc and /dev with one NVMe controller at 0000:00:04.0 bound to nvme, its
    /// namespace nvme0n1 (259:0), and 2 MiB huge pages.
    fn fake_host() -> (tempfile::TempDir, Host) {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let mk = |p: &str| fs::create_dir_all(r.join(p)).unwrap();
        let put = |p: &str, s: &str| fs::write(r.join(p), s).unwrap();
        let dev = "sys/devices/pci0000:00/0000:00:04.0";
        mk(&format!("{dev}/nvme/nvme0/nvme0n1"));
        mk(&format!("{dev}/nvme/nvme0/ng0n1"));
        mk("sys/bus/pci/devices");
        mk("sys/bus/pci/drivers/nvme");
        mk("sys/kernel/iommu_groups/4");
        mk("sys/class/nvme");
        mk("sys/class/block");
        mk("sys/block/nvme0n1/holders");
        mk("sys/kernel/mm/hugepages/hugepages-2048kB");
        mk("proc/self");
        mk("dev");
        put(&format!("{dev}/class"), "0x010802\n");
        put(&format!("{dev}/driver_override"), "(null)\n");
        symlink(r.join(dev), r.join("sys/bus/pci/devices/0000:00:04.0")).unwrap();
        symlink(
            r.join("sys/bus/pci/drivers/nvme"),
            r.join(format!("{dev}/driver")),
        )
        .unwrap();
        symlink(
            r.join("sys/kernel/iommu_groups/4"),
            r.join(format!("{dev}/iommu_group")),
        )
        .unwrap();
        symlink(
            r.join(format!("{dev}/nvme/nvme0")),
            r.join("sys/class/nvme/nvme0"),
        )
        .unwrap();
        symlink(
            r.join(format!("{dev}/nvme/nvme0/nvme0n1")),
            r.join("sys/class/block/nvme0n1"),
        )
        .unwrap();
        put("sys/block/nvme0n1/dev", "259:0\n");
        put(
            "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
            "0\n",
        );
        put(
            "sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
            "0\n",
        );
        put(
            "proc/self/mountinfo",
            "22 1 0:21 / / rw - overlay overlay rw\n",
        );
        put("proc/swaps", "Filename Type Size Used Priority\n");
        let host = Host::at(r);
        (t, host)
    }

    #[test]
    fn devices_resolve_from_every_kind_of_name() {
        let (_t, host) = fake_host();
        for name in [
            "0000:00:04.0",
            "00:04.0",
            "nvme0",
            "nvme0n1",
            "/dev/nvme0n1",
        ] {
            assert_eq!(
                host.resolve_device(Some(name)).unwrap(),
                "0000:00:04.0",
                "{name}"
            );
        }
        assert_eq!(
            host.resolve_device(None).unwrap(),
            "0000:00:04.0",
            "the only controller"
        );
        let e = host.resolve_device(Some("nvme7")).unwrap_err().to_string();
        assert!(
            e.contains("no NVMe controller or namespace called nvme7"),
            "{e}"
        );
        let e = host.resolve_device(Some("sda")).unwrap_err().to_string();
        assert!(e.contains("give a PCI address"), "{e}");
    }

    #[test]
    fn a_non_nvme_device_is_refused() {
        let (t, host) = fake_host();
        fs::write(
            t.path().join("sys/devices/pci0000:00/0000:00:04.0/class"),
            "0x020000\n",
        )
        .unwrap();
        let e = host
            .resolve_device(Some("0000:00:04.0"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not an NVMe controller (PCI class 0x020000)"),
            "{e}"
        );
        let e = host.resolve_device(None).unwrap_err().to_string();
        assert!(e.contains("no NVMe controller found"), "{e}");
    }

    #[test]
    fn state_and_namespaces_are_read() {
        let (_t, host) = fake_host();
        let s = host.device_state("0000:00:04.0").unwrap();
        assert_eq!(s.driver.as_deref(), Some("nvme"));
        assert_eq!(s.driver_override, None, "(null) means none");
        assert_eq!(s.group, Some(4));
        assert_eq!(host.namespaces("0000:00:04.0"), vec!["nvme0n1".to_string()]);
        assert!(host.namespace_uses(&["nvme0n1".into()]).unwrap().is_empty());
    }

    #[test]
    fn mounted_partitioned_held_and_swapped_namespaces_are_refused() {
        let (t, host) = fake_host();
        let r = t.path();
        fs::create_dir_all(r.join("sys/block/nvme0n1/nvme0n1p1/holders/dm-0")).unwrap();
        fs::write(r.join("sys/block/nvme0n1/nvme0n1p1/partition"), "1\n").unwrap();
        fs::write(r.join("sys/block/nvme0n1/nvme0n1p1/dev"), "259:1\n").unwrap();
        fs::create_dir_all(r.join("sys/block/nvme0n1/holders/md0")).unwrap();
        fs::write(
            r.join("proc/self/mountinfo"),
            "22 1 0:21 / / rw - overlay overlay rw\n40 22 259:1 / /mnt/data rw,relatime - ext4 /dev/nvme0n1p1 rw\n",
        )
        .unwrap();
        fs::write(
            r.join("proc/swaps"),
            "Filename Type Size Used Priority\n/dev/nvme0n1 partition 1 0 -2\n",
        )
        .unwrap();
        let uses = host.namespace_uses(&["nvme0n1".into()]).unwrap();
        assert_eq!(
            uses,
            vec![
                "nvme0n1 has partitions (nvme0n1p1)".to_string(),
                "nvme0n1 has holders (md0)".to_string(),
                "nvme0n1p1 has holders (dm-0)".to_string(),
                "nvme0n1 is in use as swap".to_string(),
                "nvme0n1p1 (259:1) is mounted at /mnt/data".to_string(),
            ]
        );
        let target = Target {
            device: Some("nvme0n1".into()),
            bind: true,
            ..Target::default()
        };
        let e = HostGuard::prepare(&host, &target, &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("refusing 0000:00:04.0: nvme0n1 has partitions"),
            "{e}"
        );
        assert!(!e.contains('\n'), "one line: {e}");
    }

    #[test]
    fn a_bound_controller_needs_bind() {
        let (_t, host) = fake_host();
        let e = HostGuard::prepare(&host, &Target::default(), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("bound to nvme: pass --bind"), "{e}");
    }

    #[test]
    fn missing_huge_pages_say_how_to_reserve_them() {
        let (t, host) = fake_host();
        let e = host
            .ensure_hugepages(PageSize::Size2M, 3, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs 3 free 2m huge pages, 0 are free"), "{e}");
        assert!(
            e.contains("echo 3 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"),
            "{e}"
        );
        let e = host
            .ensure_hugepages(PageSize::Size1G, 1, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("hugepagesz=1G hugepages=1"), "{e}");
        // With --reserve-hugepages the count is raised (the fake file reads back what we wrote).
        let change = host
            .ensure_hugepages(PageSize::Size2M, 3, true)
            .unwrap()
            .unwrap();
        assert_eq!((change.from, change.to), (0, 3));
        let nr = fs::read_to_string(
            t.path()
                .join("sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"),
        )
        .unwrap();
        assert_eq!(nr.trim(), "3");
    }

    #[test]
    fn a_stale_state_of_a_live_process_is_refused_and_of_a_dead_one_restored() {
        let (t, host) = fake_host();
        let path = t.path().join("run/iommutop/vfio-nvme-0000:00:04.0.json");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        // pid 1 is alive.
        let live = SavedState {
            pid: 1,
            rebind: None,
            hugepages: vec![],
        };
        fs::write(&path, serde_json::to_string(&live).unwrap()).unwrap();
        let e = recover_stale(&host, &path).unwrap_err().to_string();
        assert!(e.contains("another run (pid 1)"), "{e}");
        // A dead pid with a huge page change: restored, file removed.
        fs::write(
            t.path()
                .join("sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"),
            "8\n",
        )
        .unwrap();
        let dead = SavedState {
            pid: u32::MAX - 1,
            rebind: None,
            hugepages: vec![HugeChange {
                page_size: PageSize::Size2M,
                from: 2,
                to: 8,
                restored: false,
            }],
        };
        fs::write(&path, serde_json::to_string(&dead).unwrap()).unwrap();
        let note = recover_stale(&host, &path).unwrap().unwrap();
        assert!(
            note.contains("killed run") && note.contains("put back"),
            "{note}"
        );
        assert!(!path.exists());
        let nr = fs::read_to_string(
            t.path()
                .join("sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"),
        )
        .unwrap();
        assert_eq!(nr.trim(), "2");
    }

    #[test]
    fn namespace_names_are_classified() {
        assert!(matches!(namespace_kind("nvme0n1"), Some(NsKind::Block)));
        assert!(matches!(namespace_kind("nvme12n3"), Some(NsKind::Block)));
        assert!(matches!(namespace_kind("nvme0c0n1"), Some(NsKind::Path)));
        assert!(namespace_kind("ng0n1").is_none());
        assert!(namespace_kind("nvme0").is_none());
        assert!(namespace_kind("nvme0n1p1").is_none());
    }

    #[test]
    fn mountinfo_is_matched_by_device_number() {
        let mi = "36 35 98:0 /mnt1 /mnt/a rw - ext3 /dev/root rw\n37 35 259:0 / /data rw - xfs /dev/nvme0n1 rw\n";
        assert_eq!(mounts_of(mi, "259:0"), vec!["/data".to_string()]);
        assert!(mounts_of(mi, "259:1").is_empty());
    }
}
