//! Huge page pools (`/sys/kernel/mm/hugepages/hugepages-SIZEkB`): how many pages there are and
//! are free, and setting a pool's size. Raising one for a run, recorded first, is `Pool::raise` in
//! [`crate::hugepages`].

use crate::error::HostError;
use crate::root::HostRoot;
use crate::sysfs::{read_count, write};
use std::path::PathBuf;

/// The pool of huge pages of one size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    dir: PathBuf,
    pub(crate) size_kb: u64,
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
    pub(crate) fn set_total(&self, pages: u64) -> Result<u64, HostError> {
        let path = self.dir.join("nr_hugepages");
        write(&path, &pages.to_string())?;
        read_count(&path)
    }
}
