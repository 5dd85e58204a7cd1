//! Records of what a workload changed on the host, written before the change and removed after
//! the restore: if iommutop is killed (SIGKILL, power cut of the terminal) the next run finds the
//! record of a process that no longer exists and puts things back.
//!
//! Records live in `/run/iommutop/` (a tmpfs: a reboot undoes the changes and the records alike),
//! one JSON file per change set: `<kind>-<pid>.json`.

use crate::error::{io_context, WorkloadError};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Where records are kept.
pub const STATE_DIR: &str = "/run/iommutop";

/// A written record; [`StateRecord::remove`] once the change is undone.
#[derive(Debug)]
pub struct StateRecord {
    path: PathBuf,
}

impl StateRecord {
    /// Writes `value` as this process's record of `kind` in `dir`.
    pub fn write<T: Serialize>(
        dir: &Path,
        kind: &str,
        value: &T,
    ) -> Result<StateRecord, WorkloadError> {
        std::fs::create_dir_all(dir).map_err(io_context(format!(
            "creating {} (where iommutop records what it changes)",
            dir.display()
        )))?;
        let path = dir.join(format!("{kind}-{}.json", std::process::id()));
        let record = StateRecord { path };
        record.update(value)?;
        Ok(record)
    }

    /// Replaces the record's content (written whole, then renamed into place).
    pub fn update<T: Serialize>(&self, value: &T) -> Result<(), WorkloadError> {
        let text = serde_json::to_string_pretty(value).map_err(|e| {
            WorkloadError::io(
                format!("encoding {}", self.path.display()),
                std::io::Error::other(e),
            )
        })?;
        let temporary = self.path.with_extension("json.tmp");
        std::fs::write(&temporary, text)
            .and_then(|()| std::fs::rename(&temporary, &self.path))
            .map_err(io_context(format!("writing {}", self.path.display())))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn remove(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Records of `kind` left by processes that no longer run, with their paths.
pub fn leftovers<T: DeserializeOwned>(dir: &Path, kind: &str) -> Vec<(PathBuf, T)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let prefix = format!("{kind}-");
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(".json"))
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let path = entry.path();
        if let Some(value) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
        {
            found.push((path, value));
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Change {
        what: String,
    }

    #[test]
    fn records_of_dead_processes_are_found_and_ours_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let ours = StateRecord::write(
            dir.path(),
            "thing",
            &Change {
                what: "ours".into(),
            },
        )
        .unwrap();
        // pid_max is at most 2^22: this pid cannot be running.
        std::fs::write(
            dir.path().join("thing-4999999.json"),
            r#"{"what": "left behind"}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("other-4999999.json"), r#"{"what": "x"}"#).unwrap();
        let found: Vec<(PathBuf, Change)> = leftovers(dir.path(), "thing");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].1.what, "left behind");
        assert!(ours.path().exists());
        let path = ours.path().to_path_buf();
        ours.remove();
        assert!(!path.exists());
    }
}
