//! Reserving 2 MiB huge pages for a run and giving them back, through the host layer: the
//! previous `nr_hugepages` is recorded before it is raised, and put back by
//! [`Reservation::restore`], on drop, or by the sweep after a kill.

use crate::error::WorkloadError;
use iommutop_host::hugepages::Pool;
use iommutop_host::{HostRoot, Journal};

/// The size of the pool, in kB.
const SIZE_2M_KB: u64 = 2048;

/// The sysfs directory of 2 MiB pages, for messages.
pub const DIR_2M: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB";

/// Free 2 MiB pages now (0 if the kernel has no such pool).
pub fn free_2m() -> u64 {
    Pool::of_size(&HostRoot::system(), SIZE_2M_KB)
        .and_then(|pool| pool.counts())
        .map(|counts| counts.free)
        .unwrap_or(0)
}

/// A raised `nr_hugepages`, lowered again when restored or dropped.
#[derive(Debug)]
pub struct Reservation {
    journal: Journal,
    /// Free pages after the reservation.
    pub free: u64,
}

impl Reservation {
    /// Makes at least `pages` 2 MiB pages free, raising `nr_hugepages` if needed (root). The
    /// kernel may grant fewer (fragmented memory): `free` says what there is.
    pub fn ensure_2m(pages: u64) -> Result<Reservation, WorkloadError> {
        let root = HostRoot::system();
        let mut journal = Journal::new(&root, "tlb huge pages");
        let free = free_2m();
        if free >= pages {
            return Ok(Reservation { journal, free });
        }
        let cannot = |e: iommutop_host::HostError| {
            WorkloadError::Environment(format!(
                "cannot reserve {pages} huge pages of 2 MiB ({e}): run as root, or reserve them \
                 before the run"
            ))
        };
        let pool = Pool::of_size(&root, SIZE_2M_KB).map_err(cannot)?;
        let total = pool.counts().map_err(cannot)?.total;
        pool.raise(&mut journal, total + (pages - free))
            .map_err(cannot)?;
        Ok(Reservation {
            journal,
            free: free_2m(),
        })
    }

    /// Puts `nr_hugepages` back; returns what went wrong, if anything. Idempotent.
    pub fn restore(&mut self) -> Option<String> {
        self.journal
            .undo()
            .err()
            .map(|e| format!("could not put {DIR_2M}/nr_hugepages back: {e}"))
    }
}
