//! Exit codes and the one place errors become a line on stderr.

use iommutop_loader::LoadError;
use std::fmt;
use std::process::ExitCode;

/// Exit codes, documented in the README.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// A runtime failure (the kernel refused, a file could not be written, ...).
    Failure,
    /// Bad input: arguments, files, a command that does not exist.
    Usage,
    /// The system lacks what is needed: root, BTF, a kernel feature.
    Environment,
    /// A threshold given with --fail-if was crossed.
    Threshold,
    /// What iommutop must own is taken by another program: `serve`'s listening port.
    InUse,
    /// The command run under the probes failed: its own status, passed on as `time` and
    /// `perf stat` do.
    Command(u8),
}

impl Code {
    pub fn value(self) -> u8 {
        match self {
            Code::Failure => 1,
            Code::Usage => 2,
            Code::Environment => 3,
            Code::Threshold => 4,
            Code::InUse => 5,
            Code::Command(status) => status,
        }
    }
}

/// An error on its way to `main`, with the exit code it ends in.
#[derive(Debug)]
pub struct Failure {
    pub code: Code,
    pub error: anyhow::Error,
}

impl Failure {
    pub fn usage(error: impl Into<anyhow::Error>) -> Failure {
        Failure {
            code: Code::Usage,
            error: error.into(),
        }
    }
    pub fn environment(error: impl Into<anyhow::Error>) -> Failure {
        Failure {
            code: Code::Environment,
            error: error.into(),
        }
    }
    pub fn in_use(error: impl Into<anyhow::Error>) -> Failure {
        Failure {
            code: Code::InUse,
            error: error.into(),
        }
    }
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(error: E) -> Failure {
        Failure {
            code: Code::Failure,
            error: error.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

impl Failure {
    /// Prints the error as one line and returns its exit code.
    pub fn report(&self) -> ExitCode {
        let line = self.to_string().replace('\n', " ");
        eprintln!("iommutop: {line}");
        ExitCode::from(self.code.value())
    }
}

pub type Outcome<T = ()> = Result<T, Failure>;

/// Load errors that mean "this system can't" rather than "this run failed".
pub fn load_failure(error: impl Into<LoadError>) -> Failure {
    let error: LoadError = error.into();
    match error {
        LoadError::NoBtf { .. } | LoadError::NothingAttached(_) => Failure::environment(error),
        LoadError::BadSetting(_) => Failure::usage(error),
        other => Failure::from(other),
    }
}
