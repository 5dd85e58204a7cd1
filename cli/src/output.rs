//! Where a report goes: a JSON file (written atomically), NDJSON on stdout, or a table.

use crate::cli::OutputFormat;
use crate::exit::{Failure, Outcome};
use crate::measurement::Measurement;
use anyhow::{anyhow, Context};
use iommutop_model::report::Report;
use iommutop_model::snapshot::Snapshot;
use iommutop_model::time::rfc3339_utc;
use iommutop_model::DeviceFilter;
use iommutop_tui::batch::render_interval;
use iommutop_tui::Column;
use serde_json::Value;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

#[derive(Debug, Clone)]
pub enum JsonTarget {
    /// One JSON object per interval on stdout, then the report.
    Stream,
    File(PathBuf),
}

impl JsonTarget {
    pub fn parse(path: &Path) -> JsonTarget {
        if path == Path::new("-") {
            JsonTarget::Stream
        } else {
            JsonTarget::File(path.to_path_buf())
        }
    }
}

pub enum ReportSink {
    Summary,
    /// The caller prints its own view; nothing is written.
    Silent,
    /// NDJSON on stdout; `start_ns` is CLOCK_MONOTONIC at the start of the first interval.
    Stream {
        start_ns: Option<u64>,
    },
    /// The report is written to `temporary` and renamed over `path` when complete; without a
    /// `temporary` (a device or a pipe), to `path` itself.
    File {
        path: PathBuf,
        temporary: Option<PathBuf>,
        file: Option<File>,
    },
}

/// Whether a file for `path` is written beside it and renamed over it when complete (so that
/// readers never see half of it): yes for a regular file or a new one; not for a device or a pipe
/// (`/dev/null`, `/dev/stdout`, a FIFO), which the rename would replace by a regular file.
pub fn written_by_rename(path: &Path) -> bool {
    std::fs::metadata(path).map_or(true, |m| m.is_file())
}

impl ReportSink {
    /// Opens the destination now, so that an unwritable path fails before anything is attached.
    pub fn open(target: Option<JsonTarget>) -> Outcome<ReportSink> {
        match target {
            None => Ok(ReportSink::Summary),
            Some(JsonTarget::Stream) => Ok(ReportSink::Stream { start_ns: None }),
            Some(JsonTarget::File(path)) => {
                let temporary = written_by_rename(&path).then(|| {
                    let mut temporary = path.clone().into_os_string();
                    temporary.push(".iommutop-tmp");
                    PathBuf::from(temporary)
                });
                let file = File::create(temporary.as_ref().unwrap_or(&path)).map_err(|e| {
                    Failure::usage(anyhow!(
                        "cannot write the report to {}: {e} (choose a writable path for --json)",
                        path.display()
                    ))
                })?;
                Ok(ReportSink::File {
                    path,
                    temporary,
                    file: Some(file),
                })
            }
        }
    }

    /// One interval's numbers: streamed as a JSON line in stream mode (with the time, the
    /// seconds since the probes attached and the workload's live numbers), silent otherwise.
    pub fn interval(&mut self, snapshot: &Snapshot, workload: Option<&Value>) -> Outcome {
        if let ReportSink::Stream { start_ns } = self {
            let start =
                *start_ns.get_or_insert(snapshot.monotonic_ns.saturating_sub(snapshot.interval_ns));
            let line = serde_json::json!({
                "type": "interval",
                "time": rfc3339_utc(SystemTime::now()),
                "t_s": snapshot.monotonic_ns.saturating_sub(start) as f64 / 1e9,
                "interval_s": snapshot.interval_s(),
                "devices": snapshot.devices,
                "workload": workload,
            });
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{line}").context("writing to stdout")?;
            stdout.flush().context("writing to stdout")?;
        }
        Ok(())
    }

    pub fn report(&mut self, report: &Report) -> Outcome {
        match self {
            ReportSink::Summary => {
                print!(
                    "{}",
                    iommutop_model::summary::render_summary_fitted(report, stdout_width())
                );
            }
            ReportSink::Silent => {}
            ReportSink::Stream { .. } => {
                // Wrapped, so that the report itself is exactly what the schema describes.
                let line = serde_json::json!({ "type": "report", "report": report });
                println!("{line}");
            }
            ReportSink::File {
                path,
                temporary,
                file,
            } => {
                let mut file = file
                    .take()
                    .ok_or_else(|| anyhow!("report already written"))?;
                let mut text = serde_json::to_string_pretty(report)?;
                text.push('\n');
                match temporary {
                    Some(temporary) => {
                        file.write_all(text.as_bytes())
                            .and_then(|()| file.sync_all())
                            .with_context(|| format!("writing {}", temporary.display()))?;
                        std::fs::rename(&*temporary, &*path).with_context(|| {
                            format!("renaming {} to {}", temporary.display(), path.display())
                        })?;
                    }
                    None => file
                        .write_all(text.as_bytes())
                        .with_context(|| format!("writing {}", path.display()))?,
                }
                eprintln!("iommutop: report written to {}", path.display());
            }
        }
        Ok(())
    }
}

impl Drop for ReportSink {
    /// A run that failed before its report leaves no half-written file behind.
    fn drop(&mut self) {
        if let ReportSink::File {
            temporary: Some(temporary),
            file: Some(_),
            ..
        } = self
        {
            let _ = std::fs::remove_file(&*temporary);
        }
    }
}

/// One interval as the table `top --batch` and `record --print` print: a `time` line naming the
/// sort, the filter, the device and the tasks the rows are limited to, then the rows and their
/// totals, in as many columns as the terminal (or `COLUMNS`) holds.
pub struct IntervalText {
    sort: Column,
    filter: String,
    device: Option<String>,
    scope: Option<String>,
    width: Option<usize>,
}

impl IntervalText {
    pub fn of(measurement: &Measurement, sort: Column, filter: String) -> IntervalText {
        IntervalText {
            sort,
            filter,
            device: measurement.device_filter().map(DeviceFilter::label),
            scope: measurement.task_filter().map(|f| f.describe()),
            width: stdout_width().map(usize::from),
        }
    }

    pub fn render(&self, snapshot: &Snapshot) -> String {
        render_interval(
            &rfc3339_utc(SystemTime::now()),
            snapshot,
            self.sort,
            &self.filter,
            self.device.as_deref(),
            self.scope.as_deref(),
            self.width,
        )
    }
}

/// The width text is fitted to: `COLUMNS` when it is set to a number (as shells export it, and as
/// tests and scripts ask for a width), else the terminal's when stdout is one. `None` for files
/// and pipes: their lines are as long as their content.
pub fn stdout_width() -> Option<u16> {
    use std::io::IsTerminal;
    if let Some(columns) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<u16>().ok())
        .filter(|c| *c > 0)
    {
        return Some(columns);
    }
    if !std::io::stdout().is_terminal() {
        return None;
    }
    ratatui::crossterm::terminal::size()
        .ok()
        .map(|(columns, _)| columns)
}

/// Prints `text` to stdout; a reader that stops early (`| head`) is not an error.
pub fn print_text(text: &str) -> Outcome {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow!("writing to stdout: {e}").into())
        }
        _ => Ok(()),
    }
}

/// [`emit`] of a command that prints a table or JSON: the table, or with `json_form` the JSON, to
/// standard output, and the JSON to `--json`'s FILE (`-`: standard output, the table to stderr).
pub fn emit_table_or_json(
    json_form: bool,
    table: &str,
    json: &serde_json::Value,
    target: Option<&Path>,
) -> Outcome {
    let json = serde_json::to_string_pretty(json)? + "\n";
    let form = if json_form { &json } else { table };
    emit(form, target.map(|p| (p, json.as_str())))
}

/// Where a command's result goes, the same on every command: `form` (what `--format` chose) to
/// standard output, and the JSON to `--json`'s FILE; with `--json -` the JSON alone goes to
/// standard output and `form` to standard error (once, when `form` is that JSON).
pub fn emit(form: &str, json: Option<(&Path, &str)>) -> Outcome {
    match json {
        Some((path, json)) if path == Path::new("-") => {
            if form != json {
                eprint!("{form}");
            }
            print_text(json)
        }
        Some((path, json)) => {
            std::fs::write(path, json).map_err(|e| {
                Failure::usage(anyhow!(
                    "cannot write {}: {e} (choose a writable path for --json)",
                    path.display()
                ))
            })?;
            print_text(form)
        }
        None => print_text(form),
    }
}

/// For a command that prints a table or JSON (`probes`, `profiles`): whether `--format` asked for
/// JSON; markdown and html are refused (exit 2).
pub fn json_or_text(command: &str, format: OutputFormat) -> Outcome<bool> {
    match format {
        OutputFormat::Text => Ok(false),
        OutputFormat::Json => Ok(true),
        format => Err(unsupported_format(
            command,
            format,
            &[OutputFormat::Text, OutputFormat::Json],
        )),
    }
}

/// What a recording command (`record`, `run`, `top --batch`) writes, from `--format` and `--json`.
pub struct Recording {
    /// Where the JSON goes: `--json`'s file, or the NDJSON stream on stdout.
    pub json: Option<JsonTarget>,
    /// `--format markdown|html`: the report at the end, as `iommutop report --format` shows it.
    pub document: Option<OutputFormat>,
}

/// [`Recording`] from `--format` and `--json`, the same on `record`, `run` and `top --batch`:
/// `--format json` is `--json -`, the NDJSON stream on stdout; markdown and html print the report
/// when it is complete, beside `--json FILE` if given. Refused (exit 2): `--format json` beside
/// `--json FILE` (one JSON each), and a document beside `--json -` (both on stdout).
pub fn recording(command: &str, format: OutputFormat, json: Option<&Path>) -> Outcome<Recording> {
    let target = json.map(JsonTarget::parse);
    match (format, target) {
        (OutputFormat::Text, json) => Ok(Recording {
            json,
            document: None,
        }),
        (OutputFormat::Json, None | Some(JsonTarget::Stream)) => Ok(Recording {
            json: Some(JsonTarget::Stream),
            document: None,
        }),
        (OutputFormat::Json, Some(JsonTarget::File(path))) => Err(Failure::usage(anyhow!(
            "--format json streams the JSON to stdout and --json {} writes it to a file: give \
             one of them",
            path.display()
        ))),
        (format, Some(JsonTarget::Stream)) => Err(Failure::usage(anyhow!(
            "`{command} --json -` streams JSON to stdout, where --format {} prints the report: \
             give --json a file",
            format.name()
        ))),
        (format, json) => Ok(Recording {
            json,
            document: Some(format),
        }),
    }
}

impl Recording {
    pub fn streams(&self) -> bool {
        matches!(self.json, Some(JsonTarget::Stream))
    }

    /// The name a document gives its report: the file `--json` writes it to (so that the document
    /// is what `iommutop report FILE --format ...` prints), else `source` (`iommutop record`).
    pub fn document_name(&self, source: &str) -> String {
        match &self.json {
            Some(JsonTarget::File(path)) => path.display().to_string(),
            _ => source.to_string(),
        }
    }

    /// The document of `report` (markdown or html), if one was asked for.
    pub fn document(&self, report: &Report, source: &str) -> Outcome<Option<String>> {
        self.document
            .map(|format| {
                crate::report_format::render(
                    report,
                    &self.document_name(source),
                    format,
                    &Default::default(),
                    None,
                )
            })
            .transpose()
    }

    /// The sink of the report's JSON; without `--json`, the summary on stdout, unless a document
    /// takes its place.
    pub fn sink(&self) -> Outcome<ReportSink> {
        match (&self.json, self.document) {
            (None, Some(_)) => Ok(ReportSink::Silent),
            (json, _) => ReportSink::open(json.clone()),
        }
    }
}

/// The refusal of a `--format` a command has no form for (exit 2).
pub fn unsupported_format(command: &str, format: OutputFormat, forms: &[OutputFormat]) -> Failure {
    let forms: Vec<&str> = forms.iter().map(|f| f.name()).collect();
    Failure::usage(anyhow!(
        "`iommutop {command}` has no {} form: --format {}",
        format.name(),
        forms.join(" or ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `record --json /dev/null` renamed its temporary file over /dev/null: the device became a
    /// regular file, and everything on the machine that wrote to it filled that file instead.
    #[test]
    fn a_device_or_pipe_is_written_in_place_not_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let new = dir.path().join("r.json");
        assert!(written_by_rename(&new), "a new file");
        std::fs::write(&new, "{}").expect("write");
        assert!(written_by_rename(&new), "a regular file");
        assert!(!written_by_rename(Path::new("/dev/null")), "a device");
        let fifo = dir.path().join("fifo");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: c_path is a valid NUL-terminated path for the duration of the call.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        assert!(!written_by_rename(&fifo), "a pipe");

        // Written through the pipe (a reader on the other end), which stays a pipe.
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).expect("reads the pipe"))
        };
        let mut sink = ReportSink::open(Some(JsonTarget::File(fifo.clone()))).expect("open");
        let report = iommutop_model::report::Report::from_json(MINIMAL).expect("report");
        sink.report(&report).expect("written");
        drop(sink);
        let read = reader.join().expect("the reader read");
        assert_eq!(
            iommutop_model::report::Report::from_json(&read).expect("a report"),
            report
        );
        let meta = std::fs::metadata(&fifo).expect("the pipe");
        assert!(
            std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()),
            "still a pipe"
        );
        assert!(!dir.path().join("fifo.iommutop-tmp").exists());
    }

    const MINIMAL: &str = include_str!("../tests/fixtures/report-minimal.json");

    fn lab_report() -> Report {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/load-7.3-intel.json");
        Report::from_json(&std::fs::read_to_string(path).expect("readable")).expect("a report")
    }

    /// `record`, `run` and `top --batch --format markdown|html` print their report as `iommutop
    /// report FILE --format markdown|html` does, FILE being where `--json` wrote it.
    #[test]
    fn a_recordings_document_is_what_report_prints_for_its_report() {
        let report = lab_report();
        let to_file =
            recording("record", OutputFormat::Markdown, Some(Path::new("r.json"))).expect("ok");
        let markdown = to_file
            .document(&report, "iommutop record")
            .expect("renders")
            .expect("a document");
        let summary = iommutop_model::summary::render_summary_fitted(&report, None);
        let verdict = iommutop_model::diagnose::verdict(&report, None, None);
        assert_eq!(
            markdown,
            format!("### iommutop report `r.json`\n\n```text\n{summary}\n{verdict}```\n")
        );
        let page = recording("run", OutputFormat::Html, None)
            .expect("ok")
            .document(&report, "iommutop run tcp-rr-1k")
            .expect("renders")
            .expect("a document");
        assert_eq!(
            page,
            iommutop_model::html::render_report(&report, "iommutop run tcp-rr-1k")
        );
        for device in report.devices.iter().filter(|d| d.completions > 0) {
            assert!(page.contains(&format!("data-device=\"{}\"", device.key)));
        }
        let text = recording("record", OutputFormat::Text, None).expect("ok");
        assert!(text.document(&report, "x").expect("no error").is_none());
        assert!(matches!(text.sink(), Ok(ReportSink::Summary)));
        // The document takes the summary's place on stdout.
        let alone = recording("record", OutputFormat::Markdown, None).expect("ok");
        assert!(matches!(alone.sink(), Ok(ReportSink::Silent)));
    }

    /// A document and the JSON stream would both write to stdout; one JSON each.
    #[test]
    fn a_document_beside_the_stream_is_refused() {
        for format in [OutputFormat::Markdown, OutputFormat::Html] {
            let refused = recording("record", format, Some(Path::new("-")))
                .err()
                .expect("refused");
            assert_eq!(refused.code, crate::exit::Code::Usage);
            assert!(refused.error.to_string().contains("give --json a file"));
        }
        let streams = recording("run", OutputFormat::Json, None).expect("ok");
        assert!(streams.streams() && streams.document.is_none());
    }
}
