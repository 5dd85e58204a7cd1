//! The words every iommutop crate shares, below everything else: the Rust view of the kernel↔user
//! ABI header and its layout checks, the operations counted, the probes' health counters, PCI
//! addresses, row keys, the histogram's slots, and what a workload's parameters and work are.
//! Depends on no other crate of the workspace.

pub mod bindings;
pub mod domain;
pub mod health;
pub mod hist;
pub mod keyed_by_text;
mod layout;
pub mod op;
pub mod params;
pub mod pci;
#[cfg(feature = "aya")]
mod pod;
pub mod row_key;
pub mod units;
pub mod workload;

pub use domain::DomainType;
pub use health::Health;
pub use hist::{slot_of, HIST_SLOTS};
pub use op::Op;
pub use pci::PciAddress;
pub use row_key::{RowKey, RowKind};
