//! What /proc/kallsyms told kept for the rest of the boot: reading it (megabytes of text the kernel
//! formats line by line) and walking it cost seconds of a CPU under emulation before anything
//! could be relocated (docs/measurements.md, "Where the CPUs went, and what changed"), and what the probes take from it (which of the functions
//! they ask about exist, where the preempt count is, whether KASAN is built in) changes only
//! when a module comes or goes. An entry is used only by the same boot, the same loaded modules
//! (a fingerprint of `/proc/modules`' names and addresses) and the same functions asked about.
//! Delete `/run/iommutop/probes/` to read the file again.

use super::kallsyms::KallsymsFacts;
use crate::boot_cache;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::Path;

/// What one walk of /proc/kallsyms is valid for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conditions {
    pub boot_id: String,
    /// The loaded modules: [`modules_fingerprint`] of `/proc/modules`, in hex.
    pub modules: String,
    /// The functions asked about, in hex ([`boot_cache::fingerprint`] of their sorted names).
    pub asked: String,
}

const ENTRY: &str = "kallsyms.json";

impl Conditions {
    /// Now, for the functions `asked` about; `None` without a boot id or `/proc/modules`.
    pub fn now(asked: &BTreeSet<&str>) -> Option<Conditions> {
        let modules = std::fs::read_to_string("/proc/modules").ok()?;
        Some(Conditions {
            boot_id: boot_cache::boot_id()?,
            modules: format!("{:016x}", modules_fingerprint(&modules)),
            asked: format!("{:016x}", asked_fingerprint(asked)),
        })
    }
}

/// The kept facts under `conditions` if there are some, else `scan()`'s, kept. Says which at -v.
pub fn kept_or_scanned(
    dir: &Path,
    conditions: Option<&Conditions>,
    scan: impl FnOnce() -> Option<KallsymsFacts>,
) -> Option<KallsymsFacts> {
    let Some(conditions) = conditions else {
        return scan();
    };
    let path = dir.join(ENTRY);
    if let Some(facts) = boot_cache::kept(&path, conditions) {
        log::info!(
            "kernel symbols: what this boot's /proc/kallsyms told, kept in {}",
            path.display()
        );
        return Some(facts);
    }
    let facts = scan()?;
    if let Err(e) = boot_cache::keep(dir, &path, conditions, &facts) {
        log::debug!("kernel symbols not kept in {}: {e}", path.display());
    }
    Some(facts)
}

/// The modules' names and load addresses (the first and sixth fields of each line): their
/// reference counts change with use, and do not change which functions there are.
fn modules_fingerprint(modules: &str) -> u64 {
    let identities: Vec<String> = modules
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let name = fields.first().copied().unwrap_or_default();
            let address = fields.get(5).copied().unwrap_or_default();
            format!("{name} {address}")
        })
        .collect();
    boot_cache::fingerprint(identities.join("\n").as_bytes())
}

fn asked_fingerprint(asked: &BTreeSet<&str>) -> u64 {
    let names: Vec<&str> = asked.iter().copied().collect();
    boot_cache::fingerprint(names.join("\n").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn conditions(boot_id: &str, modules: &str) -> Conditions {
        Conditions {
            boot_id: boot_id.into(),
            modules: format!("{:016x}", modules_fingerprint(modules)),
            asked: format!("{:016x}", asked_fingerprint(&BTreeSet::from(["iommu_map"]))),
        }
    }

    fn facts(function: &str) -> KallsymsFacts {
        KallsymsFacts {
            functions: BTreeSet::from([function.to_string()]),
            ..KallsymsFacts::default()
        }
    }

    const NVME: &str = "nvme 61440 2 - Live 0xffffffffc0a1c000\n";

    #[test]
    fn the_first_run_of_a_boot_reads_kallsyms_and_the_next_reads_what_it_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let scans = Cell::new(0);
        let scan = || {
            scans.set(scans.get() + 1);
            Some(facts("iommu_map"))
        };
        let here = conditions("boot-a", NVME);
        let first = kept_or_scanned(dir.path(), Some(&here), scan);
        let second = kept_or_scanned(dir.path(), Some(&here), scan);
        assert_eq!((first, scans.get()), (Some(facts("iommu_map")), 1));
        assert_eq!(second, Some(facts("iommu_map")));
    }

    #[test]
    fn another_boot_a_module_loaded_or_other_functions_read_kallsyms_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let scans = Cell::new(0);
        let scan = || {
            scans.set(scans.get() + 1);
            Some(facts("iommu_map"))
        };
        let kept = conditions("boot-a", NVME);
        kept_or_scanned(dir.path(), Some(&kept), scan);
        let mut other_functions = kept.clone();
        other_functions.asked = format!("{:016x}", asked_fingerprint(&BTreeSet::from(["x"])));
        let virtio = format!("{NVME}virtio_iommu 36864 0 - Live 0xffffffffc0b00000\n");
        for other in [
            conditions("boot-b", NVME),
            conditions("boot-a", &virtio),
            other_functions,
        ] {
            let before = scans.get();
            kept_or_scanned(dir.path(), Some(&other), scan);
            assert_eq!(scans.get(), before + 1, "{other:?} read kallsyms again");
        }
    }

    #[test]
    fn a_modules_use_count_is_not_a_change() {
        let in_use = NVME.replace(" 2 - ", " 5 nvme_core, ");
        assert_eq!(modules_fingerprint(NVME), modules_fingerprint(&in_use));
        let reloaded = NVME.replace("c0a1c000", "c0b2d000");
        assert_ne!(modules_fingerprint(NVME), modules_fingerprint(&reloaded));
    }

    #[test]
    fn nothing_is_kept_without_conditions_or_facts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let here = conditions("boot-a", NVME);
        assert_eq!(kept_or_scanned(dir.path(), Some(&here), || None), None);
        assert_eq!(
            kept_or_scanned(dir.path(), None, || Some(facts("iommu_map"))),
            Some(facts("iommu_map"))
        );
        assert!(std::fs::read_dir(dir.path()).expect("dir").next().is_none());
    }
}
