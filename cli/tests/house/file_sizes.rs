//! No file grows past what one reader holds at once: a Rust file over 800 lines or a
//! BPF source over 500 does more than one job, and is split by job rather than trimmed.

use std::path::{Path, PathBuf};

/// Where each kind of source lives, the extensions it has and the most lines a file may have.
const KINDS: [(&[&str], &[&str], usize); 2] = [
    (
        &["abi", "cli", "host", "loader", "model", "tui", "workloads"],
        &["rs"],
        800,
    ),
    (&["ebpf"], &["c", "h"], 500),
];

/// The files under `dir` (not in a `target` folder) with one of `extensions`, into `found`.
pub(crate) fn sources(dir: &Path, extensions: &[&str], found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() && !path.ends_with("target") {
            sources(&path, extensions, found);
        } else if path
            .extension()
            .is_some_and(|e| extensions.iter().any(|x| e == *x))
        {
            found.push(path);
        }
    }
}

#[test]
fn no_source_file_is_longer_than_its_limit() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut too_long = Vec::new();
    for (dirs, extensions, limit) in KINDS {
        let mut files = Vec::new();
        for dir in dirs {
            sources(&workspace.join(dir), extensions, &mut files);
        }
        assert!(
            files.len() >= 10,
            "only {} {extensions:?} sources",
            files.len()
        );
        for path in files {
            let lines = std::fs::read_to_string(&path)
                .expect("readable")
                .lines()
                .count();
            if lines > limit {
                too_long.push(format!("{} ({lines} lines, limit {limit})", path.display()));
            }
        }
    }
    assert!(too_long.is_empty(), "split by job: {too_long:#?}");
}
