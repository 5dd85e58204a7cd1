//! Files in `/run/iommutop/probes/` (a tmpfs: gone at the next boot) that keep what one run
//! learnt about this boot for the next runs: each is JSON, a value and the conditions it holds
//! under (this boot, and what else it depends on), written whole or not at all.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Serialize, Deserialize)]
struct Entry<C, V> {
    conditions: C,
    value: V,
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`), which every kept entry names.
pub fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(id.trim().to_string())
}

/// The value kept at `path` under `conditions`, if there is one: an entry kept under other
/// conditions, or that does not read as such, is not used.
pub fn kept<C, V>(path: &Path, conditions: &C) -> Option<V>
where
    C: DeserializeOwned + PartialEq,
    V: DeserializeOwned,
{
    let text = std::fs::read_to_string(path).ok()?;
    let entry: Entry<C, V> = serde_json::from_str(&text)
        .inspect_err(|e| log::debug!("{}: {e}: not used", path.display()))
        .ok()?;
    (entry.conditions == *conditions).then_some(entry.value)
}

/// Keeps `value` at `path` (in `dir`) under `conditions`: written to a file of this process's
/// for this entry (two entries may be kept at once), renamed over it.
pub fn keep<C: Serialize, V: Serialize>(
    dir: &Path,
    path: &Path,
    conditions: &C,
    value: &V,
) -> std::io::Result<()> {
    write_whole(
        dir,
        path,
        &serde_json::to_vec(&Entry { conditions, value })?,
    )
}

/// Writes `bytes` to a file of this process's for `path`, renamed over it: whole or not at all.
fn write_whole(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let partial = dir.join(format!(".{name}.{}", std::process::id()));
    std::fs::write(&partial, bytes)?;
    std::fs::rename(&partial, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&partial);
    })
}

/// The bytes kept at `path` under `conditions` ([`keep_bytes`]), if there are some.
pub fn kept_bytes<C>(path: &Path, conditions: &C) -> Option<Vec<u8>>
where
    C: DeserializeOwned + PartialEq,
{
    let file = std::fs::read(path).ok()?;
    let newline = file.iter().position(|&b| b == b'\n')?;
    let kept: C = serde_json::from_slice(&file[..newline])
        .inspect_err(|e| log::debug!("{}: {e}: not used", path.display()))
        .ok()?;
    (kept == *conditions).then(|| file[newline + 1..].to_vec())
}

/// Keeps `bytes` at `path` (in `dir`) under `conditions`: the conditions as one line of JSON,
/// then the bytes, written as [`keep`] writes.
pub fn keep_bytes<C: Serialize>(
    dir: &Path,
    path: &Path,
    conditions: &C,
    bytes: &[u8],
) -> std::io::Result<()> {
    let mut file = serde_json::to_vec(conditions)?;
    file.push(b'\n');
    file.extend_from_slice(bytes);
    write_whole(dir, path, &file)
}

/// FNV-1a of `bytes`: a fingerprint that stays the same from run to run.
pub fn fingerprint(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}
