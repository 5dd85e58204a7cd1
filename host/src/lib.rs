//! Every change iommutop makes to the machine, and its undoing.
//!
//! The rules, which every module here keeps:
//! 1. **Record before change.** A change is written to a [`Journal`] (one JSON file under
//!    `/run/iommutop`) before sysfs or the network is touched, with everything needed to undo it.
//! 2. **Undo on every exit path.** A [`Journal`] undoes its changes, newest first, when asked
//!    ([`Journal::undo`]) and when dropped (errors, panics that unwind, a stop flag).
//! 3. **One recovery sweep.** What a killed process (SIGKILL) left is put back by [`sweep`],
//!    which reads every record of a process that no longer runs. There is no other format.
//!
//! Everything is rooted at a [`HostRoot`]: `/` on the machine, a temporary directory in tests,
//! where a fake sysfs and procfs stand in for the kernel's.
//!
//! The modules form layers; each imports only from the layers below it, so there is no import
//! circle (a unit test parses `src/` and fails on one):
//! 1. The host's files and tools: [`error`], [`root`], [`sysfs`], [`command`], [`wait`].
//! 2. What the machine has, read only: [`pci_device`] (addresses, driver, group), [`nvme`]
//!    (controllers, namespaces), [`block`] (a function's disks, whether one is in use),
//!    [`hugepage_pool`] (pool sizes), [`nic`] (link state, addresses, default routes),
//!    [`device_name`] (a PCI address, NIC or disk named on the command line to its function).
//! 3. Each kind of change as recorded, and its undoing: [`change`].
//! 4. The record format: [`record`].
//! 5. The journal that records and undoes, and the sweep: [`journal`].
//! 6. Making changes, each recorded in a journal first: [`pci`] (rebinding), [`hugepages`]
//!    (raising a pool), [`domain`] (switching a group's domain type), [`netns`] (NICs in
//!    network namespaces).

pub mod block;
pub mod change;
pub mod command;
pub mod device_name;
pub mod disk_stats;
pub mod domain;
pub mod error;
pub mod hugepage_pool;
pub mod hugepages;
pub mod journal;
pub mod netns;
pub mod nic;
pub mod nvme;
pub mod pci;
pub mod pci_device;
pub mod record;
pub mod root;
pub mod sysfs;
pub mod wait;

pub use error::{DomainError, HostError};
pub use journal::{sweep, Journal};
pub use record::Change;
pub use root::HostRoot;

#[cfg(test)]
mod fake;
