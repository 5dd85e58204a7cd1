//! Reading sysfs and procfs files where absence is an answer, not an error.

use std::path::Path;

/// The same readers the host layer uses.
pub use iommutop_host::sysfs::{entry_names, link_name, read_hex};

/// The file's contents without surrounding whitespace; `None` if unreadable or empty.
pub fn read_trimmed(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}
