//! The crate's errors. Each message names what failed and, where there is one, the fix.

use crate::nvme::spec::Status;
use std::io;

pub use iommutop_vfio_nvme_results::params::ParamError;

/// Everything that can go wrong in a run, from parameters to the controller's status codes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Param(#[from] ParamError),

    /// A sysfs or procfs file could not be read or written.
    #[error("{path}: {source}")]
    File { path: String, source: io::Error },

    /// The named device cannot be used (not found, not NVMe, ambiguous).
    #[error("device `{input}`: {reason}")]
    Device { input: String, reason: String },

    /// The controller is in use by the host; one line, the reason and what to do.
    #[error("refusing {pci}: {reason}")]
    Refused {
        pci: iommutop_abi::pci::PciAddress,
        reason: String,
    },

    /// A system call failed; `hint` says what usually causes it.
    #[error("{what}: {source}{hint}")]
    Sys {
        what: String,
        source: io::Error,
        hint: String,
    },

    /// A change to the host (binding, huge pages) or its record failed.
    #[error(transparent)]
    Host(#[from] iommutop_host::HostError),

    /// VFIO set-up could not proceed (group not viable, no BAR mapping, ...).
    #[error("VFIO: {0}")]
    Vfio(String),

    /// Huge pages are missing; the message says how to reserve them.
    #[error("{0}")]
    HugePages(String),

    /// The IOVA allocator has no room left inside the IOMMU's valid ranges.
    #[error(transparent)]
    Iova(#[from] crate::iova::IovaError),

    /// A transfer could not be described with PRP entries.
    #[error(transparent)]
    Prp(#[from] crate::nvme::prp::PrpError),

    /// The controller completed a command with an error status.
    #[error("NVMe {context}: {status}")]
    Nvme { context: String, status: Status },

    /// The controller misbehaved (fatal status, not ready in time, short identify data).
    #[error("NVMe controller: {0}")]
    Controller(String),

    /// No completion arrived in time.
    #[error("NVMe {context}: no completion after {waited_ms} ms")]
    Timeout { context: String, waited_ms: u64 },

    /// Read-back found data other than what was written.
    #[error("data verification failed: {mismatched} of {checked} blocks differ; first at LBA {first_lba} byte {first_offset}: expected {expected:#018x}, found {found:#018x} (was the same --seed and --bs used for the write?)")]
    Verify {
        checked: u64,
        mismatched: u64,
        first_lba: u64,
        first_offset: u64,
        expected: u64,
        found: u64,
    },

    /// The worker process failed, died, or said something we could not read.
    #[error("worker: {0}")]
    Worker(String),

    /// Restoring the host (driver binding, huge pages) failed: the system is NOT as before.
    #[error("RESTORE FAILED, the host is not as before: {reason}{}", .run_error.as_ref().map(|e| format!(" (the run itself failed too: {e})")).unwrap_or_default())]
    Restore {
        reason: String,
        run_error: Option<Box<Error>>,
    },

    /// A run failed after the tool had changed the host; `restored` says it was put back.
    #[error("{source} ({restored})")]
    Restored {
        source: Box<Error>,
        restored: String,
    },
}

impl Error {
    pub(crate) fn file(path: &std::path::Path, source: io::Error) -> Error {
        Error::File {
            path: path.display().to_string(),
            source,
        }
    }

    /// The last OS error, for a system call named `what`.
    pub(crate) fn last_os(what: impl Into<String>, hint: &str) -> Error {
        Error::Sys {
            what: what.into(),
            source: io::Error::last_os_error(),
            hint: hint.to_string(),
        }
    }
}
