//! What can go wrong changing the host or putting it back; each message names the file, device
//! or command, and the fix where there is one.

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
    Domain(#[from] Box<crate::domain::DomainError>),

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

impl From<crate::domain::DomainError> for HostError {
    fn from(error: crate::domain::DomainError) -> HostError {
        HostError::Domain(Box::new(error))
    }
}
