//! What can go wrong changing the host or putting it back; each message names the file, device
//! or command, and the fix where there is one. A leaf: every module may use it, it uses none.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("{}: unexpected content `{content}`", path.display())]
    Unexpected { path: PathBuf, content: String },

    /// A command (`ip`) failed or could not start.
    #[error("{program} failed: {message}")]
    Command { program: String, message: String },

    #[error("{device} did not {what} within {seconds} s")]
    Timeout {
        device: String,
        what: String,
        seconds: u64,
    },

    /// A driver the change needs is not loaded.
    #[error("the {driver} driver is not loaded: run `modprobe {driver}`")]
    DriverMissing { driver: String },

    /// No pool of huge pages of this size.
    #[error("this kernel has no {size_kb} kB huge pages ({} missing)", dir.display())]
    NoHugePages { size_kb: u64, dir: PathBuf },

    #[error(
        "{nic} did not come up within {seconds} s in namespace {namespace} (state {state}): is it \
         cabled to the other NIC?"
    )]
    LinkDown {
        nic: String,
        namespace: String,
        seconds: u64,
        state: String,
    },

    #[error("{nic} is not back in this namespace (renamed or still in {namespace})")]
    NicMissing { nic: String, namespace: String },

    #[error(transparent)]
    Domain(#[from] Box<DomainError>),

    /// Several undo steps failed: each one's message.
    #[error("{}", .0.join("; "))]
    Several(Vec<String>),
}

impl HostError {
    pub fn io(what: &'static str, path: &Path, source: std::io::Error) -> HostError {
        HostError::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    }
}

impl From<DomainError> for HostError {
    fn from(error: DomainError) -> HostError {
        HostError::Domain(Box::new(error))
    }
}

/// What can go wrong switching an IOMMU group's domain type, or putting it back.
#[derive(Debug, thiserror::Error)]
pub enum DomainError {
    #[error("`{0}` is not a domain type (one of: identity, DMA, DMA-FQ, auto)")]
    UnknownType(String),
    #[error("no PCI device {0} (see `lspci -D` or /sys/bus/pci/devices)")]
    NoDevice(String),
    #[error("switching an IOMMU group's domain type needs root (it unbinds and binds drivers)")]
    NotRoot,
    #[error("{0} is in no IOMMU group: no IOMMU translates it, so it has no domain to switch")]
    NoGroup(String),
    #[error(
        "this kernel cannot change IOMMU group {group}'s domain type at run time (its `type` is \
         read-only: Linux 5.11 or later is needed)"
    )]
    ReadOnly { group: String },
    #[error("refusing to unbind {device}: {why}")]
    InUse { device: String, why: String },
    #[error("the kernel refused `{wanted}` for IOMMU group {group} ({errno}): {hint}")]
    Refused {
        group: String,
        wanted: String,
        errno: String,
        hint: &'static str,
    },
    #[error("IOMMU group {group} is `{now}` after writing `{wanted}`")]
    Unchanged {
        group: String,
        wanted: String,
        now: String,
    },
    #[error(transparent)]
    Host(#[from] HostError),
    #[error("restoring IOMMU group {group} to `{original}`: {problems}")]
    Restore {
        group: String,
        original: String,
        problems: String,
    },
}

impl DomainError {
    /// What the user asked for cannot be (exit code 2).
    pub fn is_usage(&self) -> bool {
        matches!(self, DomainError::UnknownType(_) | DomainError::NoDevice(_))
    }

    /// Whether the system, not iommutop or the user, is what stands in the way (exit code 3).
    pub fn is_environment(&self) -> bool {
        matches!(
            self,
            DomainError::NoGroup(_)
                | DomainError::NotRoot
                | DomainError::ReadOnly { .. }
                | DomainError::Refused { .. }
                | DomainError::InUse { .. }
        )
    }
}
