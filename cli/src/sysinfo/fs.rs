//! Reading sysfs and procfs files where absence is an answer, not an error.

use std::path::Path;

/// The file's contents without surrounding whitespace; `None` if unreadable or empty.
pub fn read_trimmed(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// The last component of where a symlink points (`driver` → `nvme`); `None` if not a link.
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

/// A sysfs hex number (`0x8086`, `0x010802`).
pub fn read_hex(path: &Path) -> Option<u32> {
    let text = read_trimmed(path)?;
    let digits = text.strip_prefix("0x").unwrap_or(&text);
    u32::from_str_radix(digits, 16).ok()
}
