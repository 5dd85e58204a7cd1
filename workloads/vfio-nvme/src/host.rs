//! What a run needs from the host, and what it changed there, for the report.
//!
//! The changes — the controller's driver binding (nvme → vfio-pci and back) and huge page
//! reservations — are made through the host layer ([`iommutop_host`]): each is recorded under
//! /run/iommutop before it is made and undone by [`HostGuard::restore`], by the guard's `Drop`
//! on a panic, or, if the parent itself was killed, by the next run's sweep.
//!
//! Refusals: a controller with a namespace that is mounted, partitioned, held or used as swap
//! is not touched ([`iommutop_host::block::disk_uses`]).

use crate::changes::HostChanges;
use crate::error::Error;
use crate::located::Located;
use crate::mem::reserve_advice;
use crate::params::{PageSize, Target};
use iommutop_abi::pci::PciAddress;
use iommutop_host::hugepages::{Counts, Pool};
use iommutop_host::journal::claimed_by_other;
use iommutop_host::nvme::NVME_CLASS;
use iommutop_host::pci;
use iommutop_host::pci_device::{self, pci_address_in, PciState};
use iommutop_host::{Change, HostError, HostRoot, Journal};
use std::fs;

const VFIO_PCI: &str = "vfio-pci";

/// The machine a run prepares (`/` outside tests).
#[derive(Debug, Clone)]
pub struct NvmeHost {
    root: HostRoot,
}

impl NvmeHost {
    pub fn system() -> NvmeHost {
        NvmeHost {
            root: HostRoot::system(),
        }
    }

    /// A host rooted elsewhere (tests build a fake sysfs there).
    pub fn at(root: HostRoot) -> NvmeHost {
        NvmeHost { root }
    }

    /// Every NVMe controller's PCI address.
    pub fn nvme_controllers(&self) -> Vec<PciAddress> {
        iommutop_host::nvme::controllers(&self.root)
            .iter()
            .filter_map(|address| address.parse().ok())
            .collect()
    }

    /// The PCI address of a controller named by PCI address, controller (`nvme0`) or namespace
    /// (`nvme0n1`, `/dev/nvme0n1`); with no name, the only NVMe controller there is.
    pub fn resolve_device(&self, name: Option<&str>) -> Result<PciAddress, Error> {
        let Some(name) = name else {
            let all = self.nvme_controllers();
            return match all.as_slice() {
                [one] => Ok(*one),
                [] => Err(Error::Device {
                    input: "(none given)".into(),
                    reason: "no NVMe controller found (PCI class 0x010802)".into(),
                }),
                many => Err(Error::Device {
                    input: "(none given)".into(),
                    reason: format!(
                        "{} NVMe controllers: name one with --device ({})",
                        many.len(),
                        many.iter()
                            .map(PciAddress::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                }),
            };
        };
        let bad = |reason: String| Error::Device {
            input: name.to_string(),
            reason,
        };
        let short = name.strip_prefix("/dev/").unwrap_or(name);
        let pci: PciAddress = if let Ok(address) = short.parse() {
            address
        } else if let Ok(address) = format!("0000:{short}").parse() {
            address
        } else if short.starts_with("nvme") {
            self.pci_of_nvme_name(short).ok_or_else(|| {
                bad(format!(
                    "no NVMe controller or namespace called {short} (see /sys/class/nvme)"
                ))
            })?
        } else {
            return Err(bad("give a PCI address (0000:01:00.0), a controller (nvme0) or a namespace (/dev/nvme0n1)".into()));
        };
        let state = self
            .device_state(&pci.to_string())
            .map_err(|_| bad(format!("no PCI device {pci}")))?;
        if state.class != NVME_CLASS {
            return Err(bad(format!(
                "{pci} is not an NVMe controller (PCI class {:#08x})",
                state.class
            )));
        }
        Ok(pci)
    }

    /// The PCI function under `/sys/class/nvme/NAME` or `/sys/class/block/NAME`, or under a
    /// path of the multipath head NAME.
    fn pci_of_nvme_name(&self, name: &str) -> Option<PciAddress> {
        let under =
            |path: std::path::PathBuf| fs::canonicalize(path).ok().and_then(|c| pci_address_in(&c));
        under(self.root.sys("class/nvme").join(name))
            .or_else(|| under(self.root.sys("class/block").join(name)))
            .or_else(|| {
                let paths = fs::read_dir(self.root.sys("block").join(name).join("multipath"));
                paths.ok()?.flatten().find_map(|e| under(e.path()))
            })
    }

    pub fn device_state(&self, pci: &str) -> Result<PciState, Error> {
        Ok(pci_device::state(&self.root, pci)?)
    }

    /// The block devices of the controller's namespaces (`nvme0n1`, …).
    pub fn namespaces(&self, pci: &str) -> Vec<String> {
        iommutop_host::nvme::namespaces(&self.root, pci)
    }

    /// Why the namespaces cannot be taken from the host, one reason per use; empty if free.
    pub fn namespace_uses(&self, namespaces: &[String]) -> Vec<String> {
        iommutop_host::block::disk_uses(&self.root, namespaces)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn pool(&self, page: PageSize) -> Result<Pool, Error> {
        if !page.is_huge() {
            return Err(Error::HugePages(format!("{page} pages are not huge pages")));
        }
        Pool::of_size(&self.root, page.kib()).map_err(|e| match e {
            HostError::NoHugePages { dir, .. } => Error::HugePages(format!(
                "this kernel has no {page} huge pages ({} missing): {}",
                dir.display(),
                reserve_advice(page, 1)
            )),
            other => Error::Host(other),
        })
    }

    /// (nr_hugepages, free_hugepages) for a huge page size.
    pub fn hugepage_counts(&self, page: PageSize) -> Result<(u64, u64), Error> {
        let Counts { total, free } = self.pool(page)?.counts()?;
        Ok((total, free))
    }

    /// Makes sure `needed` free huge pages of `page` exist: checks, and with `reserve` raises
    /// nr_hugepages, recorded in `journal` (which puts it back).
    pub fn ensure_hugepages(
        &self,
        journal: &mut Journal,
        page: PageSize,
        needed: u64,
        reserve: bool,
    ) -> Result<(), Error> {
        let pool = self.pool(page)?;
        let Counts { total, free } = pool.counts()?;
        if free >= needed {
            return Ok(());
        }
        let missing = needed - free;
        let want = total + missing;
        if !reserve {
            return Err(Error::HugePages(format!(
                "the run needs {needed} free {page} huge pages, {free} are free ({total} reserved): {}",
                reserve_advice(page, want)
            )));
        }
        let granted = pool.raise(journal, want)?.granted;
        if granted < want {
            let undone = journal.undo();
            let why = if page == PageSize::Size1G {
                reserve_advice(page, want)
            } else {
                format!("memory is too fragmented or too small; reserve them at boot with `hugepages={want}` on the kernel command line")
            };
            let put_back = match undone {
                Ok(()) => format!("nr_hugepages put back to {total}"),
                Err(e) => format!("putting nr_hugepages back to {total} failed: {e}"),
            };
            return Err(Error::HugePages(format!(
                "could reserve only {} of the {missing} more {page} huge pages the run needs ({put_back}): {why}",
                granted.saturating_sub(total)
            )));
        }
        Ok(())
    }
}

/// Holds the duty to restore what was changed for a run.
#[derive(Debug)]
pub struct HostGuard {
    journal: Journal,
    recovered: Option<String>,
}

impl HostGuard {
    /// Checks the device, puts back what killed earlier runs left, reserves huge pages and
    /// binds to vfio-pci as `target` allows. `huge` lists the huge pages the run will map.
    pub fn prepare(
        host: &NvmeHost,
        target: &Target,
        huge: &[(PageSize, u64)],
    ) -> Result<(HostGuard, Located), Error> {
        let pci = host.resolve_device(target.device.as_deref())?;
        let recovered = recover_leftovers(host, pci)?;
        let state = host.device_state(&pci.to_string())?;
        let group = state.iommu_group.ok_or_else(|| Error::Refused {
            pci,
            reason: "it has no IOMMU group: the IOMMU is off (boot with intel_iommu=on or amd_iommu=on) or the device is not behind one".into(),
        })?;
        let needs_bind = state.driver.as_deref() != Some(VFIO_PCI);
        if needs_bind {
            let driver = state.driver.clone().unwrap_or_else(|| "no driver".into());
            if !target.bind {
                return Err(Error::Refused {
                    pci,
                    reason: format!("it is bound to {driver}: pass --bind to let the tool bind it to vfio-pci for the run and back to {driver} after"),
                });
            }
            let uses = host.namespace_uses(&host.namespaces(&pci.to_string()));
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
        let mut guard = HostGuard {
            journal: Journal::new(&host.root, &format!("vfio-nvme {pci}")),
            recovered,
        };
        for &(page, count) in huge {
            host.ensure_hugepages(&mut guard.journal, page, count, target.reserve_hugepages)?;
        }
        if needs_bind {
            bind_vfio(host, &mut guard.journal, pci, group)?;
        }
        let located = Located {
            pci,
            group,
            sys_root: host.root.sys(""),
            dev_root: host.root.dev(""),
        };
        Ok((guard, located))
    }

    /// Undoes every change (binding first, then huge pages) and removes the record.
    pub fn restore(mut self) -> Result<HostChanges, Error> {
        let result = self.journal.undo();
        let changes = crate::changes::from_journal(&self.journal, self.recovered.take());
        result.map(|()| changes).map_err(Error::Host)
    }
}

/// Binds `pci` to vfio-pci (recorded first) and waits for its VFIO group node.
fn bind_vfio(
    host: &NvmeHost,
    journal: &mut Journal,
    pci: PciAddress,
    group: u32,
) -> Result<(), Error> {
    pci::rebind(journal, pci, VFIO_PCI).map_err(|e| match e {
        HostError::DriverMissing { .. } => {
            Error::Vfio("the vfio-pci driver is not loaded: run `modprobe vfio-pci`".into())
        }
        other => Error::Host(other),
    })?;
    let node = host.root.dev("vfio").join(group.to_string());
    if !iommutop_host::wait::until(host.root.bind_timeout, || node.exists()) {
        return Err(Error::Vfio(format!(
            "{pci} is bound to vfio-pci but {} did not appear within {} s",
            node.display(),
            host.root.bind_timeout.as_secs()
        )));
    }
    Ok(())
}

/// Puts back what killed runs left (the one sweep), and refuses a controller another running
/// process has bound.
fn recover_leftovers(host: &NvmeHost, pci: PciAddress) -> Result<Option<String>, Error> {
    let lines = iommutop_host::sweep(&host.root);
    let holder = claimed_by_other(
        &host.root,
        |change| matches!(change, Change::Driver(d) if d.pci_address == pci),
    );
    if let Some(pid) = holder {
        return Err(Error::Refused {
            pci,
            reason: format!(
                "another run (pid {pid}) is using it (its record is in {}); if that process is not ours, delete the record",
                host.root.record_dir().display()
            ),
        });
    }
    Ok((!lines.is_empty()).then(|| lines.join("; ")))
}

#[cfg(test)]
mod tests;
