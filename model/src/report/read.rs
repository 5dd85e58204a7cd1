//! Writing and reading report files, with errors that say what is wrong in one line.

use super::{Report, SCHEMA_VERSION, TOOL_NAME};
use serde_json::error::Category;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Why a text is not a report this build can read. One line each, without the file name: callers
/// prefix it (`old.json: truncated at line 40, column 3`), or use [`ReadReportError`].
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("not JSON: {message} at line {line}, column {column}")]
    NotJson {
        message: String,
        line: usize,
        column: usize,
    },
    #[error("truncated at line {line}, column {column} (the JSON ends early)")]
    Truncated { line: usize, column: usize },
    #[error("not an iommutop report: {0}")]
    NotAReport(String),
    #[error("unsupported schema_version {found} (this build reads {SCHEMA_VERSION})")]
    UnsupportedVersion { found: u64 },
    #[error("invalid iommutop report: {message} at line {line}, column {column}")]
    Invalid {
        message: String,
        line: usize,
        column: usize,
    },
    #[error("cannot encode the report as JSON: {0}")]
    Encode(String),
}

/// A report file that could not be read: names the file.
#[derive(Debug, thiserror::Error)]
pub enum ReadReportError {
    #[error("{}: cannot read: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Report { path: PathBuf, source: ReportError },
}

impl Report {
    /// Pretty JSON with a final newline, as written to report files.
    pub fn to_json(&self) -> Result<String, ReportError> {
        let mut text =
            serde_json::to_string_pretty(self).map_err(|e| ReportError::Encode(e.to_string()))?;
        text.push('\n');
        Ok(text)
    }

    /// Reads a report, telling apart broken JSON, truncated files, other JSON documents, other
    /// versions and version-1 reports with wrong fields.
    pub fn from_json(text: &str) -> Result<Report, ReportError> {
        let value: Value = serde_json::from_str(text).map_err(|e| match e.classify() {
            Category::Eof => ReportError::Truncated {
                line: e.line(),
                column: e.column(),
            },
            _ => ReportError::NotJson {
                message: bare_message(&e),
                line: e.line(),
                column: e.column(),
            },
        })?;
        check_identity(&value)?;
        serde_json::from_str(text).map_err(|e| ReportError::Invalid {
            message: bare_message(&e),
            line: e.line(),
            column: e.column(),
        })
    }

    /// Reads a report file; errors name the file.
    pub fn read(path: &Path) -> Result<Report, ReadReportError> {
        let text = std::fs::read_to_string(path).map_err(|source| ReadReportError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Report::from_json(&text).map_err(|source| ReadReportError::Report {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// An object whose `tool.name` (if present) is iommutop and whose `schema_version` this build reads.
fn check_identity(value: &Value) -> Result<(), ReportError> {
    let Some(object) = value.as_object() else {
        return Err(ReportError::NotAReport(format!(
            "the top level is {}, not an object",
            json_kind(value)
        )));
    };
    if let Some(tool) = object.get("tool").and_then(|t| t.get("name")) {
        if tool != TOOL_NAME {
            return Err(ReportError::NotAReport(format!("tool.name is {tool}")));
        }
    }
    let version = match object.get("schema_version") {
        None => {
            return Err(ReportError::NotAReport(
                "it has no schema_version field".to_string(),
            ))
        }
        Some(version) => version.as_u64().ok_or_else(|| {
            ReportError::NotAReport(format!("schema_version is {version}, not a whole number"))
        })?,
    };
    if version != u64::from(SCHEMA_VERSION) {
        return Err(ReportError::UnsupportedVersion { found: version });
    }
    Ok(())
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// serde_json's message without its trailing " at line L column C" (we say it our way).
fn bare_message(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    text.strip_suffix(&suffix).unwrap_or(&text).to_string()
}
