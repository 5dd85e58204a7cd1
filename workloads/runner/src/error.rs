//! What can go wrong running a workload, sorted by whose move it is: the user's (bad parameters),
//! the system's (a tool or a privilege is missing) or the run's (a tool failed).

use std::io;

/// Whose move it is after an error: decides the exit code at the binary's edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Bad input: a parameter, a file or device that cannot be used as asked.
    Usage,
    /// The system lacks something: a tool, a privilege, a device, huge pages.
    Environment,
    /// A run that started and failed.
    Runtime,
    /// Stopped by Ctrl-C or SIGTERM.
    Cancelled,
}

#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// A parameter is wrong. `key` is the parameter's name as written in a profile.
    #[error("parameter `{key}`: {message}")]
    Param { key: String, message: String },

    /// A tool the workload launches is not installed.
    #[error("`{tool}` not found in PATH: {install}")]
    MissingTool { tool: String, install: String },

    /// The system cannot run the workload as asked (privileges, devices, huge pages, ...).
    #[error("{0}")]
    Environment(String),

    /// The target is unsafe to use as asked (a mounted device to be written, ...).
    #[error("{0}")]
    Refused(String),

    /// A launched tool failed.
    #[error("{tool} failed: {message}")]
    Tool { tool: String, message: String },

    /// A launched tool's output could not be read.
    #[error("cannot read {tool}'s output: {message}")]
    Output { tool: String, message: String },

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },

    #[error("interrupted")]
    Cancelled,
}

impl WorkloadError {
    pub fn param(key: impl Into<String>, message: impl Into<String>) -> WorkloadError {
        WorkloadError::Param {
            key: key.into(),
            message: message.into(),
        }
    }

    pub fn io(context: impl Into<String>, source: io::Error) -> WorkloadError {
        WorkloadError::Io {
            context: context.into(),
            source,
        }
    }

    pub fn tool(tool: impl Into<String>, message: impl Into<String>) -> WorkloadError {
        WorkloadError::Tool {
            tool: tool.into(),
            message: message.into(),
        }
    }

    pub fn class(&self) -> ErrorClass {
        match self {
            WorkloadError::Param { .. } | WorkloadError::Refused(_) => ErrorClass::Usage,
            WorkloadError::MissingTool { .. } | WorkloadError::Environment(_) => {
                ErrorClass::Environment
            }
            WorkloadError::Tool { .. }
            | WorkloadError::Output { .. }
            | WorkloadError::Io { .. } => ErrorClass::Runtime,
            WorkloadError::Cancelled => ErrorClass::Cancelled,
        }
    }
}

/// A host change that failed: a command's failure stays a tool failure, the rest is the
/// system's (a device that would not bind, a link that did not come up, a file not writable).
impl From<iommutop_host::HostError> for WorkloadError {
    fn from(error: iommutop_host::HostError) -> WorkloadError {
        match error {
            iommutop_host::HostError::Command { program, message } => WorkloadError::Tool {
                tool: program,
                message,
            },
            other => WorkloadError::Environment(other.to_string()),
        }
    }
}

/// A parameter that does not fit its declaration.
impl From<iommutop_model::params::ParamError> for WorkloadError {
    fn from(error: iommutop_model::params::ParamError) -> WorkloadError {
        WorkloadError::Param {
            key: error.key,
            message: error.message,
        }
    }
}
