//! What a run changed on the host and whether each change was put back, as the report says it.

use crate::params::PageSize;
use iommutop_host::{Change, Journal};
pub use iommutop_vfio_nvme_results::host::{HostChanges, HugeChange, Rebind};

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
