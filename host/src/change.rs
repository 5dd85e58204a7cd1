//! Each kind of change iommutop makes to the machine, as it is recorded — what it was, with all it
//! takes to undo it — and its undoing. None of them knows the [`Journal`](crate::journal::Journal)
//! or the other kinds: making a change and recording it first is one layer up (`pci`,
//! `hugepages`, `domain`, `netns`); what calls every kind's undo is the journal and its sweep.

pub mod domain;
pub mod driver;
pub mod hugepages;
pub mod netns;

pub use domain::DomainChange;
pub use driver::DriverChange;
pub use hugepages::HugePageChange;
pub use netns::{NamespaceChange, NicState};
