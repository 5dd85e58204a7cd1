//! The one journal of what iommutop changed on the machine, and the one sweep that puts back
//! what a killed process left.
//!
//! A [`Journal`] is one JSON file, `/run/iommutop/PID-N.json` (its format is [`crate::record`]),
//! written whole (then renamed into place) each time a change is added — before the change is
//! made. Undoing goes newest first, marks each change undone and removes the file once all are; a
//! change that could not be undone stays in the file for the next try. [`sweep`] undoes the
//! records of processes that no longer run. Both undo through each kind's own undo
//! ([`crate::change`]), so this module sits above all of them.

use crate::error::HostError;
use crate::record::{Change, Entry, Record, FORMAT};
use crate::root::HostRoot;
use crate::sysfs::entry_names;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Numbers the journals of one process apart.
static NEXT_JOURNAL: AtomicU64 = AtomicU64::new(0);

/// The changes one owner made, recorded before each is made, undone on [`Journal::undo`] and on
/// drop.
#[derive(Debug)]
pub struct Journal {
    root: HostRoot,
    path: PathBuf,
    record: Record,
    /// Whether the file exists (it is written with the first change).
    written: bool,
}

impl Journal {
    /// An empty journal; nothing is written until the first change.
    pub fn new(root: &HostRoot, purpose: &str) -> Journal {
        let pid = std::process::id();
        let number = NEXT_JOURNAL.fetch_add(1, Ordering::Relaxed);
        Journal {
            root: root.clone(),
            path: root.record_dir().join(format!("{pid}-{number}.json")),
            record: Record {
                format: FORMAT,
                pid,
                purpose: purpose.to_string(),
                changes: Vec::new(),
            },
            written: false,
        }
    }

    pub fn root(&self) -> &HostRoot {
        &self.root
    }

    /// The record file (written with the first change).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every change recorded, undone or not, oldest first.
    pub fn entries(&self) -> &[Entry] {
        &self.record.changes
    }

    /// Adds `change` to the record on disk. Call it before making the change: if it fails, do
    /// not make the change.
    pub fn record(&mut self, change: Change) -> Result<(), HostError> {
        self.record.changes.push(Entry {
            change,
            undone: false,
        });
        if let Err(e) = self.save() {
            self.record.changes.pop();
            return Err(e);
        }
        Ok(())
    }

    fn save(&mut self) -> Result<(), HostError> {
        let dir = self.root.record_dir();
        std::fs::create_dir_all(&dir).map_err(|e| HostError::io("creating", &dir, e))?;
        write_whole(&self.path, &self.record)?;
        self.written = true;
        Ok(())
    }

    /// Undoes every change not yet undone, newest first, and removes the record once all are.
    /// A change that cannot be undone stays recorded (the sweep retries it); the error says
    /// what failed. Calling it again retries only what failed.
    pub fn undo(&mut self) -> Result<(), HostError> {
        let mut errors = undo_entries(&self.root, &mut self.record.changes);
        if errors.is_empty() {
            if self.written {
                let _ = std::fs::remove_file(&self.path);
                self.written = false;
            }
            return Ok(());
        }
        if self.written {
            if let Err(e) = write_whole(&self.path, &self.record) {
                errors.push(e);
            }
        }
        Err(one_error(errors))
    }
}

impl Drop for Journal {
    /// Every exit path that unwinds: undo what is left; what fails stays for the sweep.
    fn drop(&mut self) {
        let _ = self.undo();
    }
}

/// Puts the machine back as it was before `change`: the one place that calls every kind's undo.
fn undo_change(change: &Change, root: &HostRoot) -> Result<(), HostError> {
    match change {
        Change::Driver(c) => c.undo(root),
        Change::HugePages(c) => c.undo(root),
        Change::Domain(c) => c.undo(root).map_err(HostError::from),
        Change::Namespace(c) => c.undo(root),
        Change::NicMove(c) => c.undo(root),
    }
}

fn undo_entries(root: &HostRoot, entries: &mut [Entry]) -> Vec<HostError> {
    let mut errors = Vec::new();
    for entry in entries.iter_mut().rev().filter(|e| !e.undone) {
        match undo_change(&entry.change, root) {
            Ok(()) => entry.undone = true,
            Err(e) => errors.push(e),
        }
    }
    errors
}

fn one_error(mut errors: Vec<HostError>) -> HostError {
    if errors.len() == 1 {
        if let Some(only) = errors.pop() {
            return only;
        }
    }
    HostError::Several(errors.iter().map(ToString::to_string).collect())
}

fn write_whole(path: &Path, record: &Record) -> Result<(), HostError> {
    let text = serde_json::to_string_pretty(record)
        .map_err(|e| HostError::io("encoding", path, std::io::Error::other(e)))?;
    let temporary = path.with_extension("json.tmp");
    std::fs::write(&temporary, text)
        .and_then(|()| std::fs::rename(&temporary, path))
        .map_err(|e| HostError::io("writing", path, e))
}

/// Whether a process runs (signal 0 checks without delivering anything).
fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Why a record file cannot be read.
#[derive(Debug, thiserror::Error)]
enum Unreadable {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("record format {0} (this iommutop reads {FORMAT})")]
    Format(u32),
}

/// Every record file, sorted, with its content or why it cannot be read.
fn records(root: &HostRoot) -> Vec<(PathBuf, Result<Record, Unreadable>)> {
    let dir = root.record_dir();
    let mut found: Vec<(PathBuf, Result<Record, Unreadable>)> = entry_names(&dir)
        .into_iter()
        .filter(|name| name.ends_with(".json"))
        .map(|name| {
            let path = dir.join(name);
            let record = read_record(&path);
            (path, record)
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

fn read_record(path: &Path) -> Result<Record, Unreadable> {
    let record: Record = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    if record.format == FORMAT {
        Ok(record)
    } else {
        Err(Unreadable::Format(record.format))
    }
}

/// Puts back what processes that no longer run left recorded: one line per record found (put
/// back, or what failed; a record that cannot be read is named and left for a person).
pub fn sweep(root: &HostRoot) -> Vec<String> {
    let mut lines = Vec::new();
    for (path, record) in records(root) {
        let mut record = match record {
            Ok(record) => record,
            Err(why) => {
                lines.push(format!(
                    "{} is unreadable ({why}): check what it names by hand, then delete it",
                    path.display()
                ));
                continue;
            }
        };
        if record.pid == std::process::id() || alive(record.pid) {
            continue;
        }
        let pending: Vec<String> = record
            .changes
            .iter()
            .rev()
            .filter(|e| !e.undone)
            .map(|e| e.change.summary())
            .collect();
        let errors = undo_entries(root, &mut record.changes);
        if errors.is_empty() {
            let _ = std::fs::remove_file(&path);
            if !pending.is_empty() {
                lines.push(format!(
                    "restored what a killed run (pid {}) left: {}",
                    record.pid,
                    pending.join("; ")
                ));
            }
        } else {
            let _ = write_whole(&path, &record);
            lines.push(format!(
                "could not restore all that a killed run (pid {}) left ({}): {} (record kept in {})",
                record.pid,
                record.purpose,
                one_error(errors),
                path.display()
            ));
        }
    }
    lines
}

/// The pid of another running process whose record holds a change `claims` picks (the same
/// device, say), if any.
pub fn claimed_by_other(root: &HostRoot, claims: impl Fn(&Change) -> bool) -> Option<u32> {
    records(root).into_iter().find_map(|(_, record)| {
        let record = record.ok()?;
        let theirs = record.pid != std::process::id() && alive(record.pid);
        let held = record
            .changes
            .iter()
            .any(|e| !e.undone && claims(&e.change));
        (theirs && held).then_some(record.pid)
    })
}

#[cfg(test)]
mod tests;
