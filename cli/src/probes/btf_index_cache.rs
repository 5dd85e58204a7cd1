//! What a walk of the kernel's BTF found ([`BtfIndex`]) kept for the rest of the boot (issue 30):
//! the walk costs a CPU 0.3–0.6 s under emulation before anything can be relocated (the fexit
//! programs' return slots are set before load), and the kernel's own BTF does not change while
//! it runs. An entry is used only by the same boot, the same BTF file (path, size and time of
//! change) and the same functions and tracepoints asked about. Delete `/run/iommutop/probes/` to
//! walk it again.

use super::boot_cache;
use super::btf_index::BtfIndex;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::UNIX_EPOCH;

/// What one walk of a BTF file is valid for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conditions {
    pub boot_id: String,
    pub path: String,
    pub size: u64,
    /// When the file last changed, in nanoseconds since the epoch.
    pub changed_ns: u128,
    /// The functions and tracepoints asked about, in hex ([`boot_cache::fingerprint`]).
    pub asked: String,
}

const ENTRY: &str = "btf-index.json";

impl Conditions {
    /// Now, for the BTF at `path` and the names asked about; `None` without a boot id or the
    /// file.
    pub fn now(
        path: &str,
        functions: &BTreeSet<&str>,
        tracepoints: &BTreeSet<&str>,
    ) -> Option<Conditions> {
        let metadata = std::fs::metadata(path).ok()?;
        let changed = metadata.modified().ok()?.duration_since(UNIX_EPOCH).ok()?;
        Some(Conditions {
            boot_id: boot_cache::boot_id()?,
            path: path.to_string(),
            size: metadata.len(),
            changed_ns: changed.as_nanos(),
            asked: format!("{:016x}", asked_fingerprint(functions, tracepoints)),
        })
    }
}

/// The kept index under `conditions` if there is one, else `walk()`'s, kept. Says which at -v.
pub fn kept_or_walked<E>(
    dir: &Path,
    conditions: Option<&Conditions>,
    walk: impl FnOnce() -> Result<BtfIndex, E>,
) -> Result<BtfIndex, E> {
    let Some(conditions) = conditions else {
        return walk();
    };
    let path = dir.join(ENTRY);
    if let Some(index) = boot_cache::kept(&path, conditions) {
        log::info!(
            "kernel BTF: the ids and prototypes this boot's first walk of {} found, kept in {}",
            conditions.path,
            path.display()
        );
        return Ok(index);
    }
    let index = walk()?;
    if let Err(e) = boot_cache::keep(dir, &path, conditions, &index) {
        log::debug!("kernel BTF index not kept in {}: {e}", path.display());
    }
    Ok(index)
}

fn asked_fingerprint(functions: &BTreeSet<&str>, tracepoints: &BTreeSet<&str>) -> u64 {
    let names: Vec<&str> = functions.iter().copied().collect();
    let events: Vec<&str> = tracepoints.iter().copied().collect();
    boot_cache::fingerprint(format!("{}\n\n{}", names.join("\n"), events.join("\n")).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probes::btf_index::HookedFunction;
    use std::cell::Cell;
    use std::convert::Infallible;

    fn conditions(boot_id: &str, size: u64) -> Conditions {
        Conditions {
            boot_id: boot_id.into(),
            path: "/sys/kernel/btf/vmlinux".into(),
            size,
            changed_ns: 1,
            asked: format!(
                "{:016x}",
                asked_fingerprint(&BTreeSet::from(["iommu_map"]), &BTreeSet::new())
            ),
        }
    }

    fn index(id: u32) -> BtfIndex {
        BtfIndex {
            functions: [("iommu_map".to_string(), HookedFunction { id, arity: None })].into(),
            ..BtfIndex::default()
        }
    }

    #[test]
    fn the_first_run_of_a_boot_walks_the_btf_and_the_next_reads_what_it_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let walks = Cell::new(0);
        let walk = || {
            walks.set(walks.get() + 1);
            Ok::<_, Infallible>(index(7))
        };
        let here = conditions("boot-a", 100);
        let first = kept_or_walked(dir.path(), Some(&here), walk);
        let second = kept_or_walked(dir.path(), Some(&here), walk);
        assert_eq!((first, walks.get()), (Ok(index(7)), 1));
        assert_eq!(second, Ok(index(7)));
    }

    #[test]
    fn another_boot_another_btf_or_other_names_walk_it_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let walks = Cell::new(0);
        let walk = || {
            walks.set(walks.get() + 1);
            Ok::<_, Infallible>(index(7))
        };
        let kept = conditions("boot-a", 100);
        let _ = kept_or_walked(dir.path(), Some(&kept), walk);
        let mut other_names = kept.clone();
        other_names.asked = format!(
            "{:016x}",
            asked_fingerprint(&BTreeSet::from(["iommu_map"]), &BTreeSet::from(["x"]))
        );
        for other in [
            conditions("boot-b", 100),
            conditions("boot-a", 200),
            other_names,
        ] {
            let before = walks.get();
            let _ = kept_or_walked(dir.path(), Some(&other), walk);
            assert_eq!(walks.get(), before + 1, "{other:?} walked the BTF again");
        }
    }

    #[test]
    fn a_walk_that_fails_keeps_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let here = conditions("boot-a", 100);
        assert_eq!(
            kept_or_walked(dir.path(), Some(&here), || Err("not BTF")),
            Err("not BTF")
        );
        assert!(!dir.path().join(ENTRY).exists());
    }
}
