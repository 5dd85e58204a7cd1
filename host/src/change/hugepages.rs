//! A huge page pool raised, as recorded, and lowering it back.

use crate::error::HostError;
use crate::hugepage_pool::Pool;
use crate::root::HostRoot;
use serde::{Deserialize, Serialize};

/// A pool's `nr_hugepages` raised from `from` to `to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HugePageChange {
    pub size_kb: u64,
    pub from: u64,
    pub to: u64,
}

impl HugePageChange {
    pub fn summary(&self) -> String {
        format!(
            "{} kB huge pages back to {} (were raised to {})",
            self.size_kb, self.from, self.to
        )
    }

    pub fn undo(&self, root: &HostRoot) -> Result<(), HostError> {
        let pool = Pool::of_size(root, self.size_kb)?;
        pool.set_total(self.from).map(|_| ())
    }
}
