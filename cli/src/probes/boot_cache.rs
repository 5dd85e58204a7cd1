//! Files in `/run/iommutop/probes/` (a tmpfs: gone at the next boot) that keep what one run
//! learnt about this boot for the next runs: each is JSON, written whole or not at all.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::Path;

/// This boot's id (`/proc/sys/kernel/random/boot_id`), which every kept entry names.
pub fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(id.trim().to_string())
}

/// The entry at `path`, if there is one and it reads as a `T`.
pub fn read<T: DeserializeOwned>(path: &Path) -> Option<T> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text)
        .inspect_err(|e| log::debug!("{}: {e}: not used", path.display()))
        .ok()
}

/// Writes `entry` to a file of this process's in `dir`, renamed over `path`.
pub fn write<T: Serialize>(dir: &Path, path: &Path, entry: &T) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let partial = dir.join(format!(".partial.{}", std::process::id()));
    std::fs::write(&partial, serde_json::to_vec(entry)?)?;
    std::fs::rename(&partial, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&partial);
    })
}

/// FNV-1a of `bytes`: a fingerprint that stays the same from run to run.
pub fn fingerprint(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}
