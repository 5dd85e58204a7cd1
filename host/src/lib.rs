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
//! The modules: [`pci`] (addresses, drivers, groups, binding), [`block`] (whether a disk is in
//! use), [`hugepages`] (pool sizes), [`domain`] (an IOMMU group's domain type), [`netns`] (NICs in
//! network namespaces), [`record`] (the journal and the sweep).

pub mod block;
pub mod command;
pub mod domain;
pub mod error;
pub mod hugepages;
pub mod netns;
pub mod nvme;
pub mod pci;
pub mod record;
pub mod root;
pub mod sysfs;
pub mod wait;

pub use error::HostError;
pub use record::{sweep, Change, Journal};
pub use root::HostRoot;

#[cfg(test)]
mod fake;
