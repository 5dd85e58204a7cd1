//! What the loader derived from the kernel's BTF kept for the rest of the boot, as each is slow to
//! make and stands before the first number: the index of the names the programs hook
//! ([`BtfIndex`]: a walk of the whole BTF, timed under emulation in docs/measurements.md, "What
//! the loader no longer does", before anything can be relocated, the fexit programs' return slots
//! being set before load) and the BTF the object is relocated against ([`super::core_target`]). The kernel's own
//! BTF does not change while it runs. An entry is used only by the same boot, the same BTF file
//! (path, size and time of change) and the same question (the names asked about, the object
//! relocated). Delete `/run/iommutop/probes/` to walk it again.

use super::btf_index::BtfIndex;
use super::btf_walk::BtfWalkError;
use super::core_target::CutError;
use crate::boot_cache;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::UNIX_EPOCH;

/// Why the index of the kernel's BTF, or the cut the object is relocated against, was not made:
/// the loader then loads against the whole BTF.
#[derive(Debug, thiserror::Error)]
pub enum KernelBtfError {
    /// The kernel's BTF file not read (the path is in the message where the reader says it).
    #[error("{0}")]
    Read(std::io::Error),
    #[error("{path}: {source}")]
    ReadAt {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Walk(#[from] BtfWalkError),
    #[error(transparent)]
    Cut(#[from] CutError),
    /// aya did not parse the cut.
    #[error("{0}")]
    Parse(String),
}

/// What one walk of a BTF file is valid for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conditions {
    pub boot_id: String,
    pub path: String,
    pub size: u64,
    /// When the file last changed, in nanoseconds since the epoch.
    pub changed_ns: u128,
    /// What was asked of it, in hex: the names looked up ([`names_asked`]), the object
    /// relocated (its fingerprint).
    pub asked: String,
}

const INDEX_ENTRY: &str = "btf-index.json";
const CORE_TARGET_ENTRY: &str = "core-target.btf";

impl Conditions {
    /// Now, for the BTF at `path` and what is `asked` of it; `None` without a boot id or the
    /// file.
    pub fn now(path: &str, asked: String) -> Option<Conditions> {
        let metadata = std::fs::metadata(path).ok()?;
        let changed = metadata.modified().ok()?.duration_since(UNIX_EPOCH).ok()?;
        Some(Conditions {
            boot_id: boot_cache::boot_id()?,
            path: path.to_string(),
            size: metadata.len(),
            changed_ns: changed.as_nanos(),
            asked,
        })
    }
}

/// The kept BTF to relocate against under `conditions` if there is one, else `make()`'s, kept.
/// Says which at -v.
pub fn kept_or_made_core_target<E>(
    dir: &Path,
    conditions: Option<&Conditions>,
    make: impl FnOnce() -> Result<Vec<u8>, E>,
) -> Result<Vec<u8>, E> {
    let Some(conditions) = conditions else {
        return make();
    };
    let path = dir.join(CORE_TARGET_ENTRY);
    if let Some(btf) = boot_cache::kept_bytes(&path, conditions) {
        log::info!(
            "relocation target: the part of {} this boot's first run cut out, kept in {}",
            conditions.path,
            path.display()
        );
        return Ok(btf);
    }
    let btf = make()?;
    if let Err(e) = boot_cache::keep_bytes(dir, &path, conditions, &btf) {
        log::debug!("relocation target not kept in {}: {e}", path.display());
    }
    Ok(btf)
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
    let path = dir.join(INDEX_ENTRY);
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

/// The functions and tracepoints an index is asked for, as [`Conditions::asked`].
pub fn names_asked(
    functions: &BTreeSet<&str>,
    tracepoints: &BTreeSet<&str>,
    structs: &BTreeSet<&str>,
) -> String {
    let listed = [functions, tracepoints, structs].map(|names| {
        let names: Vec<&str> = names.iter().copied().collect();
        names.join("\n")
    });
    let fingerprint = boot_cache::fingerprint(listed.join("\n\n").as_bytes());
    format!("{fingerprint:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::btf_index::HookedFunction;
    use std::cell::Cell;
    use std::convert::Infallible;

    fn conditions(boot_id: &str, size: u64) -> Conditions {
        Conditions {
            boot_id: boot_id.into(),
            path: "/sys/kernel/btf/vmlinux".into(),
            size,
            changed_ns: 1,
            asked: names_asked(
                &BTreeSet::from(["iommu_map"]),
                &BTreeSet::new(),
                &BTreeSet::new(),
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
        other_names.asked = names_asked(
            &BTreeSet::from(["iommu_map"]),
            &BTreeSet::from(["x"]),
            &BTreeSet::new(),
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
        assert!(!dir.path().join(INDEX_ENTRY).exists());
    }

    #[test]
    fn a_relocation_target_is_kept_byte_for_byte_and_read_back_by_the_same_conditions_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let blob = b"\x9f\xeb\x01\0\nnot text\n\0".to_vec();
        let here = conditions("boot-a", 100);
        let made = kept_or_made_core_target(dir.path(), Some(&here), || {
            Ok::<_, Infallible>(blob.clone())
        });
        assert_eq!(made, Ok(blob.clone()));
        let kept =
            kept_or_made_core_target(dir.path(), Some(&here), || Err("made again, not read"));
        assert_eq!(kept, Ok(blob));
        let elsewhere = conditions("boot-b", 100);
        let other = kept_or_made_core_target(dir.path(), Some(&elsewhere), || {
            Ok::<_, Infallible>(b"other".to_vec())
        });
        assert_eq!(other, Ok(b"other".to_vec()));
    }
}
