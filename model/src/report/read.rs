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
    #[error(
        "unsupported schema_version {found} (this build reads {})",
        readable_versions()
    )]
    UnsupportedVersion { found: u64 },
    #[error("invalid iommutop report of schema_version {version}: {message}")]
    Upgraded { version: u64, message: String },
    #[error("invalid iommutop report: {message} at line {line}, column {column}")]
    Invalid {
        message: String,
        line: usize,
        column: usize,
    },
    #[error("cannot encode the report as JSON: {0}")]
    Encode(String),
    #[error(
        "an NDJSON stream of {intervals} interval objects without its closing `report` object (the \
         recording was stopped before it ended): record again, or let `record --json -` finish"
    )]
    StreamWithoutReport { intervals: usize },
}

/// A report file that could not be read: names the file.
#[derive(Debug, thiserror::Error)]
pub enum ReadReportError {
    #[error("{}: cannot read: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: {problem}", path.display())]
    Report { path: PathBuf, problem: ReportError },
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
    /// versions and reports with wrong fields. Reports of an older (or newer) schema version are
    /// read through their entry in [`READERS`].
    pub fn from_json(text: &str) -> Result<Report, ReportError> {
        read_with(text, READERS)
    }

    /// Reads a report file; errors name the file.
    pub fn read(path: &Path) -> Result<Report, ReadReportError> {
        let text = std::fs::read_to_string(path).map_err(|error| ReadReportError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        Report::from_json(&text).map_err(|problem| ReadReportError::Report {
            path: path.to_path_buf(),
            problem,
        })
    }

    /// Reads a report, or the NDJSON stream `record --json -` writes (interval objects, then one
    /// `{"type": "report", "report": ...}`): the stream's report.
    pub fn from_json_or_stream(text: &str) -> Result<Report, ReportError> {
        let whole = Report::from_json(text);
        if whole.is_ok() || !looks_like_stream(text) {
            return whole;
        }
        let mut intervals = 0;
        let mut report = None;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let Ok(Value::Object(mut object)) = serde_json::from_str::<Value>(line) else {
                return whole;
            };
            match object.get("type").and_then(Value::as_str) {
                Some("interval") => intervals += 1,
                Some("report") => report = object.remove("report"),
                _ => return whole,
            }
        }
        match report {
            Some(report) => Report::from_json(&report.to_string()),
            None => Err(ReportError::StreamWithoutReport { intervals }),
        }
    }

    /// A report or an NDJSON stream, from a file or, for `-`, standard input;
    /// errors name the file (or `standard input`).
    pub fn read_any(path: &Path) -> Result<Report, ReadReportError> {
        let text = if path == Path::new("-") {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .map(|_| text)
                .map_err(|error| ReadReportError::Io {
                    path: PathBuf::from("standard input"),
                    error,
                })?
        } else {
            std::fs::read_to_string(path).map_err(|error| ReadReportError::Io {
                path: path.to_path_buf(),
                error,
            })?
        };
        let name = if path == Path::new("-") {
            PathBuf::from("standard input")
        } else {
            path.to_path_buf()
        };
        Report::from_json_or_stream(&text).map_err(|problem| ReadReportError::Report {
            path: name,
            problem,
        })
    }
}

/// Whether the first line of `text` is a JSON object with a string `type`: an NDJSON stream.
fn looks_like_stream(text: &str) -> bool {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let typed = |line: Option<&str>| {
        line.and_then(|l| serde_json::from_str::<Value>(l).ok())
            .is_some_and(|v| v.get("type").is_some_and(Value::is_string))
    };
    typed(lines.next())
}

/// [`Report::from_json`] with a given set of readers for other versions.
fn read_with(text: &str, readers: &[(u64, Upgrade)]) -> Result<Report, ReportError> {
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
    let version = check_identity(&value, readers)?;
    if version == u64::from(SCHEMA_VERSION) {
        // Parsed from the text again so that errors carry the field's path, line and column.
        let mut deserializer = serde_json::Deserializer::from_str(text);
        return serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
            let field = field_prefix(e.path());
            let e = e.into_inner();
            ReportError::Invalid {
                message: format!("{field}{}", bare_message(&e)),
                line: e.line(),
                column: e.column(),
            }
        });
    }
    let upgrade =
        reader_for(readers, version).ok_or(ReportError::UnsupportedVersion { found: version })?;
    let mut current = upgrade(value)?;
    if let Some(object) = current.as_object_mut() {
        object.insert("schema_version".into(), SCHEMA_VERSION.into());
    }
    serde_path_to_error::deserialize(current).map_err(|e| ReportError::Upgraded {
        version,
        message: format!("{}{}", field_prefix(e.path()), e.inner()),
    })
}

/// `devices[0].ops.dma_map.count: ` before the error of a field; nothing at the top level (serde
/// names a missing top-level field itself).
fn field_prefix(path: &serde_path_to_error::Path) -> String {
    let path = path.to_string();
    if path == "." {
        String::new()
    } else {
        format!("{path}: ")
    }
}

/// Turns a parsed report of an older (or newer) schema version into the current version's JSON.
pub type Upgrade = fn(Value) -> Result<Value, ReportError>;

/// The schema versions this build reads besides [`SCHEMA_VERSION`], each with the one function
/// that lifts it to the current version. Supporting v0 (or reading a v2 report with this build)
/// is one entry here, e.g. `(0, v0::upgrade)` renaming the fields that changed; compare reads the
/// last two versions (DESIGN.md). There is only version 1 today.
pub const READERS: &[(u64, Upgrade)] = &[];

/// The function that reads `version`, if this build reads it.
fn reader_for(readers: &[(u64, Upgrade)], version: u64) -> Option<Upgrade> {
    readers
        .iter()
        .find(|(v, _)| *v == version)
        .map(|(_, upgrade)| *upgrade)
}

/// `1` or `0, 1` for error messages.
fn readable_versions() -> String {
    let mut versions: Vec<u64> = READERS.iter().map(|(v, _)| *v).collect();
    versions.push(u64::from(SCHEMA_VERSION));
    versions.sort_unstable();
    versions
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// An object whose `tool.name` (if present) is iommutop and whose `schema_version` this build
/// reads; returns that version.
fn check_identity(value: &Value, readers: &[(u64, Upgrade)]) -> Result<u64, ReportError> {
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
    if version != u64::from(SCHEMA_VERSION) && reader_for(readers, version).is_none() {
        return Err(ReportError::UnsupportedVersion { found: version });
    }
    Ok(version)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::full_report;

    /// What a version-0 reader looks like: v0 (hypothetically) called `devices` `rows`.
    fn v0_upgrade(mut value: Value) -> Result<Value, ReportError> {
        let object = value
            .as_object_mut()
            .ok_or_else(|| ReportError::NotAReport("not an object".into()))?;
        let rows = object
            .remove("rows")
            .ok_or_else(|| ReportError::NotAReport("a v0 report without rows".into()))?;
        object.insert("devices".into(), rows);
        Ok(value)
    }

    fn full_text() -> String {
        full_report().to_json().expect("encodes")
    }

    #[test]
    fn a_v1_report_reads_as_it_was_written() {
        let report = full_report();
        assert_eq!(Report::from_json(&full_text()).expect("reads"), report);
        assert_eq!(
            read_with(&full_text(), &[(0, v0_upgrade)]).expect("reads"),
            report
        );
    }

    #[test]
    fn another_version_is_read_through_its_one_upgrade_function() {
        let mut v0: Value = serde_json::from_str(&full_text()).expect("json");
        let object = v0.as_object_mut().expect("object");
        let devices = object.remove("devices").expect("devices");
        object.insert("rows".into(), devices);
        object.insert("schema_version".into(), 0.into());
        let text = v0.to_string();
        let error = read_with(&text, READERS).expect_err("v0 has no reader here");
        assert_eq!(
            error.to_string(),
            "unsupported schema_version 0 (this build reads 1)"
        );
        let report = read_with(&text, &[(0, v0_upgrade)]).expect("v0 reads");
        assert_eq!(report, full_report());
        assert_eq!(report.schema_version, SCHEMA_VERSION);
    }

    /// The error named the line and column only: in a pretty report of many devices, which
    /// field was wrong took a search.
    #[test]
    fn a_wrong_field_is_named_by_its_path() {
        let mut value: Value = serde_json::from_str(&full_text()).expect("json");
        value["devices"][0]["ops"]["dma_map"]["count"] = "many".into();
        let text = serde_json::to_string_pretty(&value).expect("json");
        let message = Report::from_json(&text)
            .expect_err("wrong type")
            .to_string();
        assert!(
            message.starts_with(
                "invalid iommutop report: devices[0].ops.dma_map.count: invalid type: string \"many\", expected u64 at line "
            ),
            "{message}"
        );
        value["devices"][0]["ops"]["dma_map"]["count"] = 3.into();
        let object = value.as_object_mut().expect("object");
        object.remove("tool");
        let message = Report::from_json(&value.to_string())
            .expect_err("missing")
            .to_string();
        assert!(
            message.starts_with("invalid iommutop report: missing field `tool` at line"),
            "{message}"
        );
    }

    #[test]
    fn an_upgraded_report_with_wrong_fields_names_its_version() {
        let text = r#"{"schema_version": 0, "tool": {"name": "iommutop"}, "rows": []}"#;
        let error = read_with(text, &[(0, v0_upgrade)]).expect_err("incomplete");
        let message = error.to_string();
        assert!(
            message.starts_with(
                "invalid iommutop report of schema_version 0: tool: missing field `version`"
            ),
            "{message}"
        );
    }
}
