//! Where a report goes: a JSON file (written atomically), NDJSON on stdout, or a table.

use crate::exit::{Failure, Outcome};
use anyhow::{anyhow, Context};
use iommutop_model::report::Report;
use iommutop_model::snapshot::Snapshot;
use iommutop_model::time::rfc3339_utc;
use serde_json::Value;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

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
    /// The report is written to `temporary` and renamed over `path` when complete.
    File {
        path: PathBuf,
        temporary: PathBuf,
        file: Option<File>,
    },
}

impl ReportSink {
    /// Opens the destination now, so that an unwritable path fails before anything is attached.
    pub fn open(target: Option<JsonTarget>) -> Outcome<ReportSink> {
        match target {
            None => Ok(ReportSink::Summary),
            Some(JsonTarget::Stream) => Ok(ReportSink::Stream { start_ns: None }),
            Some(JsonTarget::File(path)) => {
                let mut temporary = path.clone().into_os_string();
                temporary.push(".iommutop-tmp");
                let temporary = PathBuf::from(temporary);
                let file = File::create(&temporary).map_err(|e| {
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
                print!("{}", iommutop_model::summary::render_summary(report));
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
                file.write_all(text.as_bytes())
                    .and_then(|()| file.sync_all())
                    .with_context(|| format!("writing {}", temporary.display()))?;
                std::fs::rename(&*temporary, &*path).with_context(|| {
                    format!("renaming {} to {}", temporary.display(), path.display())
                })?;
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
            temporary,
            file: Some(_),
            ..
        } = self
        {
            let _ = std::fs::remove_file(&*temporary);
        }
    }
}
