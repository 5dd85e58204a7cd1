//! Raising a huge page pool for a run, recorded in a [`Journal`] first. The pool itself (its
//! counts, its size) is [`crate::hugepage_pool`]; the change and its undoing are
//! [`HugePageChange`].

use crate::change::HugePageChange;
use crate::error::HostError;
use crate::journal::Journal;
use crate::record::Change;

pub use crate::hugepage_pool::{Counts, Pool};

impl Pool {
    /// Raises `nr_hugepages` to `total`, recorded in `journal` first; returns the change with
    /// what the kernel granted (it may give fewer: fragmented memory). Undone with the journal.
    pub fn raise(&self, journal: &mut Journal, total: u64) -> Result<Reserved, HostError> {
        let change = HugePageChange {
            size_kb: self.size_kb,
            from: self.counts()?.total,
            to: total,
        };
        journal.record(Change::HugePages(change.clone()))?;
        let granted = self.set_total(total)?;
        Ok(Reserved { change, granted })
    }
}

/// A pool raised for a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reserved {
    pub change: HugePageChange,
    /// `nr_hugepages` as the kernel set it.
    pub granted: u64,
}
