//! What a vfio-nvme run changed on the host and whether each change was put back.

use crate::params::PageSize;
use iommutop_abi::pci::PciAddress;
use serde::{Deserialize, Serialize};

/// A driver binding change, as made and as undone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rebind {
    pub pci_address: PciAddress,
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
