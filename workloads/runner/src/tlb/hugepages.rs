//! Reserving 2 MiB huge pages for a run and giving them back: `nr_hugepages` is recorded before
//! it is raised, and put back by [`Reservation::restore`], on drop, or by the next run.

use crate::error::{io_context, WorkloadError};
use crate::state::{leftovers, StateRecord};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

const RECORD_KIND: &str = "hugepages";

/// The sysfs directory of 2 MiB pages.
pub const DIR_2M: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB";

fn read_count(path: &Path) -> Result<u64, WorkloadError> {
    let text =
        std::fs::read_to_string(path).map_err(io_context(format!("reading {}", path.display())))?;
    text.trim().parse().map_err(|_| {
        WorkloadError::Environment(format!(
            "{}: unexpected content `{}`",
            path.display(),
            text.trim()
        ))
    })
}

/// Free 2 MiB pages now (0 if the kernel has no such pool).
pub fn free_2m() -> u64 {
    read_count(&Path::new(DIR_2M).join("free_hugepages")).unwrap_or(0)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Record {
    path: PathBuf,
    previous: u64,
}

/// A raised `nr_hugepages`, lowered again when restored or dropped.
#[derive(Debug)]
pub struct Reservation {
    record: Option<(Record, StateRecord)>,
    /// Free pages after the reservation.
    pub free: u64,
}

impl Reservation {
    /// Makes at least `pages` 2 MiB pages free, raising `nr_hugepages` if needed (root). The
    /// kernel may grant fewer (fragmented memory): `free` says what there is.
    pub fn ensure_2m(pages: u64, state_dir: &Path) -> Result<Reservation, WorkloadError> {
        let dir = Path::new(DIR_2M);
        let free = free_2m();
        if free >= pages {
            return Ok(Reservation { record: None, free });
        }
        let nr_path = dir.join("nr_hugepages");
        let previous = read_count(&nr_path)?;
        let record = Record {
            path: nr_path.clone(),
            previous,
        };
        let state = StateRecord::write(state_dir, RECORD_KIND, &record)?;
        let wanted = previous + (pages - free);
        if let Err(e) = std::fs::write(&nr_path, wanted.to_string()) {
            state.remove();
            return Err(WorkloadError::Environment(format!(
                "cannot reserve {pages} huge pages of 2 MiB ({}: {e}): run as root, or reserve them \
                 before the run",
                nr_path.display()
            )));
        }
        Ok(Reservation {
            record: Some((record, state)),
            free: free_2m(),
        })
    }

    /// Puts `nr_hugepages` back; returns what went wrong, if anything. Idempotent.
    pub fn restore(&mut self) -> Option<String> {
        let (record, state) = self.record.take()?;
        match std::fs::write(&record.path, record.previous.to_string()) {
            Ok(()) => {
                state.remove();
                None
            }
            Err(e) => Some(format!(
                "could not put {} back to {}: {e}",
                record.path.display(),
                record.previous
            )),
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let _ = self.restore();
    }
}

/// Puts back reservations that killed runs left.
pub fn restore_leftovers(state_dir: &Path) -> Vec<String> {
    let found: Vec<(PathBuf, Record)> = leftovers(state_dir, RECORD_KIND);
    found
        .into_iter()
        .map(
            |(path, record)| match std::fs::write(&record.path, record.previous.to_string()) {
                Ok(()) => {
                    let _ = std::fs::remove_file(&path);
                    format!(
                        "restored {} to {} (left raised by an interrupted run)",
                        record.path.display(),
                        record.previous
                    )
                }
                Err(e) => format!(
                    "could not restore {} to {} ({e}), recorded in {}",
                    record.path.display(),
                    record.previous,
                    path.display()
                ),
            },
        )
        .collect()
}
