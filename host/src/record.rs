//! The record format: what a `/run/iommutop/PID-N.json` file holds. Each change's data comes from
//! its kind ([`crate::change`]); writing records and undoing them is [`crate::journal`].

use crate::change::{DomainChange, DriverChange, HugePageChange, NamespaceChange, NicState};
use serde::{Deserialize, Serialize};

/// The record format; a file of another format is reported, not read.
pub const FORMAT: u32 = 1;

/// One change to the machine, with what it takes to undo it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    /// A PCI function moved to another driver.
    Driver(DriverChange),
    /// A huge page pool raised.
    HugePages(HugePageChange),
    /// An IOMMU group switched to another domain type.
    Domain(DomainChange),
    /// A network namespace created.
    Namespace(NamespaceChange),
    /// A NIC moved into a network namespace.
    NicMove(NicState),
}

impl Change {
    /// What undoing it does, in a few words.
    pub fn summary(&self) -> String {
        match self {
            Change::Driver(c) => c.summary(),
            Change::HugePages(c) => c.summary(),
            Change::Domain(c) => c.summary(),
            Change::Namespace(c) => c.summary(),
            Change::NicMove(c) => c.summary(),
        }
    }
}

/// A change and whether it has been undone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub change: Change,
    pub undone: bool,
}

/// The file's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub format: u32,
    pub pid: u32,
    /// Who made the changes (`vfio-nvme 0000:00:04.0`, `record --domain`), for people reading it.
    pub purpose: String,
    pub changes: Vec<Entry>,
}
