//! Huge page pools (`/sys/kernel/mm/hugepages/hugepages-SIZEkB`): how many pages there are and
//! are free, and raising a pool for a run (recorded first) and lowering it back.

use crate::error::HostError;
use crate::record::{Change, Journal};
use crate::root::HostRoot;
use crate::sysfs::{read_count, write};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The pool of huge pages of one size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    dir: PathBuf,
    size_kb: u64,
}

/// A pool's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// `nr_hugepages`: pages the pool holds.
    pub total: u64,
    /// `free_hugepages`: pages nobody has mapped.
    pub free: u64,
}

impl Pool {
    /// The pool of `size_kb` pages (2048, 1048576); an error if the kernel has none.
    pub fn of_size(root: &HostRoot, size_kb: u64) -> Result<Pool, HostError> {
        let dir = Pool::dir_for(root, size_kb);
        if !dir.exists() {
            return Err(HostError::NoHugePages { size_kb, dir });
        }
        Ok(Pool { dir, size_kb })
    }

    /// Where a pool of `size_kb` pages lives, whether or not this kernel has it.
    pub fn dir_for(root: &HostRoot, size_kb: u64) -> PathBuf {
        root.sys("kernel/mm/hugepages")
            .join(format!("hugepages-{size_kb}kB"))
    }

    pub fn counts(&self) -> Result<Counts, HostError> {
        Ok(Counts {
            total: read_count(&self.dir.join("nr_hugepages"))?,
            free: read_count(&self.dir.join("free_hugepages"))?,
        })
    }

    /// Sets `nr_hugepages` and returns what the kernel granted (it may give fewer).
    fn set_total(&self, pages: u64) -> Result<u64, HostError> {
        let path = self.dir.join("nr_hugepages");
        write(&path, &pages.to_string())?;
        read_count(&path)
    }

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
