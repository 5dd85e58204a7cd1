//! What a run changed on the host and whether each change was put back, as the report says it.

use crate::params::PageSize;
use iommutop_host::{Change, Journal};
use serde::{Deserialize, Serialize};

/// A driver binding change, as made and as undone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rebind {
    pub pci_address: iommutop_model::pci::PciAddress,
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
    /// What earlier runs that were killed left, restored before this one started.
    pub recovered: Option<String>,
}

impl HostChanges {
    pub fn is_empty(&self) -> bool {
        self.rebind.is_none() && self.hugepages.is_empty() && self.recovered.is_none()
    }

    /// One sentence per change, as the report's summary says them.
    pub fn notes(&self) -> Vec<String> {
        self.reported().notes()
    }

    /// The changes a journal holds, each restored or not.
    pub(crate) fn from_journal(journal: &Journal, recovered: Option<String>) -> HostChanges {
        let mut changes = HostChanges {
            recovered,
            ..HostChanges::default()
        };
        for entry in journal.entries() {
            match &entry.change {
                Change::Driver(d) => {
                    changes.rebind = Some(Rebind {
                        pci_address: d.pci_address,
                        from: d.from.clone(),
                        override_before: d.override_before.clone(),
                        to: d.to.clone(),
                        namespaces: d.disks.clone(),
                        restored: entry.undone,
                    })
                }
                Change::HugePages(h) => {
                    changes
                        .hugepages
                        .extend(PageSize::of_kib(h.size_kb).map(|page_size| HugeChange {
                            page_size,
                            from: h.from,
                            to: h.to,
                            restored: entry.undone,
                        }))
                }
                _ => {}
            }
        }
        changes
    }
}
