//! Small readers and writers of sysfs and procfs files, with the path in every error.

use crate::error::HostError;
use std::path::Path;

/// A file's text, trimmed.
pub fn read(path: &Path) -> Result<String, HostError> {
    std::fs::read_to_string(path)
        .map(|text| text.trim().to_string())
        .map_err(|source| HostError::io("reading", path, source))
}

/// A file's text, trimmed; empty if it cannot be read.
pub fn read_or_empty(path: &Path) -> String {
    read(path).unwrap_or_default()
}

/// Writes `value` to a sysfs attribute.
pub fn write(path: &Path, value: &str) -> Result<(), HostError> {
    std::fs::write(path, value).map_err(|source| HostError::io("writing", path, source))
}

/// A decimal count (`nr_hugepages`).
pub fn read_count(path: &Path) -> Result<u64, HostError> {
    let text = read(path)?;
    text.parse().map_err(|_| HostError::Unexpected {
        path: path.to_path_buf(),
        content: text,
    })
}

/// A sysfs hex number (`0x010802`).
pub fn read_hex(path: &Path) -> Option<u32> {
    u32::from_str_radix(read(path).ok()?.trim_start_matches("0x"), 16).ok()
}

/// The last component of a symlink's target (`driver` → `nvme`).
pub fn link_name(path: &Path) -> Option<String> {
    let target = std::fs::read_link(path).ok()?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}

/// Names of a directory's entries, sorted; empty if it cannot be read.
pub fn entry_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
