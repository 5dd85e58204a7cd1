//! The dispatch calibration kept for the rest of the boot: it attaches two pairs of programs of its
//! own and test-runs them 400 times, slow under emulation (docs/measurements.md, "The figures
//! behind the loader's layout"), and what it measures is a property of the kernel and the
//! machine, not of the run. The first run of a boot writes it to `/run/iommutop/probes/` (a
//! tmpfs: gone at the next boot), the next runs read it. An entry is used only by the same boot (`/proc/sys/kernel/random/boot_id`), the same
//! calibration programs (a fingerprint of their object) and the same state of the kernel's BPF
//! statistics, which add to the dispatch. Delete the directory to calibrate again.

use super::dispatch::{CalibrationError, Dispatch};
use crate::boot_cache;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What one calibration is valid for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conditions {
    pub boot_id: String,
    /// [`super::dispatch::object_fingerprint`], in hex.
    pub object: String,
    /// Whether the kernel's BPF run-time statistics were on.
    pub bpf_stats: bool,
    /// Whether the pair ran with its understudies' stand-ins.
    #[serde(default)]
    pub understudies: bool,
}

/// A calibration as kept: only one whose both figures were measured is.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Kept {
    gap_ns: u64,
    nested_ns: u64,
}

impl Conditions {
    /// This boot's, for the calibration object this binary carries; `None` without a boot id.
    pub fn now(bpf_stats: bool, understudies: bool) -> Option<Conditions> {
        Some(Conditions {
            boot_id: boot_cache::boot_id()?,
            object: format!("{:016x}", super::dispatch::object_fingerprint()),
            bpf_stats,
            understudies,
        })
    }
}

/// The kept calibration under `conditions` if there is one, else `calibrate()`'s result, kept
/// when both of its figures were measured. Says which at -v.
pub fn kept_or_calibrated(
    dir: &Path,
    conditions: Option<&Conditions>,
    calibrate: impl FnOnce() -> Result<Dispatch, CalibrationError>,
) -> Result<Dispatch, CalibrationError> {
    let Some(conditions) = conditions else {
        return calibrate();
    };
    let path = entry_path(dir, conditions);
    if let Some(kept) = boot_cache::kept::<_, Kept>(&path, conditions) {
        log::info!(
            "probe dispatch: this boot's calibration, kept in {}",
            path.display()
        );
        return Ok(Dispatch {
            gap_ns: kept.gap_ns,
            nested_ns: Ok(kept.nested_ns),
        });
    }
    let dispatch = calibrate()?;
    if let Ok(nested_ns) = dispatch.nested_ns {
        let kept = Kept {
            gap_ns: dispatch.gap_ns,
            nested_ns,
        };
        if let Err(e) = boot_cache::keep(dir, &path, conditions, &kept) {
            log::debug!(
                "the dispatch calibration not kept in {}: {e}",
                path.display()
            );
        }
    }
    Ok(dispatch)
}

fn entry_path(dir: &Path, conditions: &Conditions) -> PathBuf {
    let stats = if conditions.bpf_stats {
        "with"
    } else {
        "without"
    };
    let understudies = if conditions.understudies {
        "-understudies"
    } else {
        ""
    };
    dir.join(format!("dispatch-{stats}-bpf-stats{understudies}.json"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn conditions(boot_id: &str, bpf_stats: bool) -> Conditions {
        Conditions {
            boot_id: boot_id.into(),
            object: "00000000000000aa".into(),
            bpf_stats,
            understudies: false,
        }
    }

    fn measured(gap_ns: u64, nested: Result<u64, CalibrationError>) -> Dispatch {
        Dispatch {
            gap_ns,
            nested_ns: nested,
        }
    }

    #[test]
    fn the_first_run_of_a_boot_calibrates_and_the_next_reads_what_it_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let runs = Cell::new(0);
        let calibrate = || {
            runs.set(runs.get() + 1);
            Ok(measured(41, Ok(90)))
        };
        let here = conditions("boot-a", true);
        let first = kept_or_calibrated(dir.path(), Some(&here), calibrate).expect("first");
        let second = kept_or_calibrated(dir.path(), Some(&here), calibrate).expect("second");
        assert_eq!((first, runs.get()), (measured(41, Ok(90)), 1));
        assert_eq!(second, measured(41, Ok(90)));
    }

    #[test]
    fn another_boot_object_or_statistics_state_calibrates_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let runs = Cell::new(0);
        let calibrate = || {
            runs.set(runs.get() + 1);
            Ok(measured(40 + runs.get(), Ok(90)))
        };
        let kept = conditions("boot-a", true);
        kept_or_calibrated(dir.path(), Some(&kept), calibrate).expect("kept");
        let mut other_object = kept.clone();
        other_object.object = "00000000000000bb".into();
        let with_understudies = Conditions {
            understudies: true,
            ..kept.clone()
        };
        for other in [
            conditions("boot-b", true),
            other_object,
            conditions("boot-a", false),
            with_understudies,
        ] {
            let before = runs.get();
            kept_or_calibrated(dir.path(), Some(&other), calibrate).expect("other");
            assert_eq!(runs.get(), before + 1, "{other:?} calibrated again");
        }
    }

    #[test]
    fn a_calibration_without_its_nested_figure_or_a_boot_id_is_not_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let here = conditions("boot-a", false);
        let runs = Cell::new(0);
        let partial = || {
            runs.set(runs.get() + 1);
            Ok(measured(
                41,
                Err(CalibrationError::NoTests("bpf_prog_test_run_tracing")),
            ))
        };
        kept_or_calibrated(dir.path(), Some(&here), partial).expect("first");
        kept_or_calibrated(dir.path(), Some(&here), partial).expect("second");
        kept_or_calibrated(dir.path(), None, partial).expect("no boot id");
        assert_eq!(runs.get(), 3);
        assert!(std::fs::read_dir(dir.path()).expect("dir").next().is_none());
    }

    #[test]
    fn an_unreadable_entry_is_calibrated_over() {
        let dir = tempfile::tempdir().expect("tempdir");
        let here = conditions("boot-a", true);
        std::fs::write(entry_path(dir.path(), &here), "{ not json").expect("write");
        let got = kept_or_calibrated(dir.path(), Some(&here), || Ok(measured(7, Ok(8))));
        assert_eq!(got, Ok(measured(7, Ok(8))));
        let again = kept_or_calibrated(dir.path(), Some(&here), || {
            Err(CalibrationError::Load("not run".into()))
        });
        assert_eq!(again, Ok(measured(7, Ok(8))));
    }
}
