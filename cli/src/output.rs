//! Where a report goes: a JSON file (written atomically), NDJSON on stdout, or a table.

use crate::exit::{Failure, Outcome};
use anyhow::{anyhow, Context};
use iommutop_model::report::Report;
use iommutop_model::snapshot::Snapshot;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

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
    Stream,
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
            Some(JsonTarget::Stream) => Ok(ReportSink::Stream),
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

    /// One interval's numbers: streamed as a JSON line in stream mode, kept silent otherwise.
    pub fn interval(&mut self, snapshot: &Snapshot) -> Outcome {
        if let ReportSink::Stream = self {
            let line = serde_json::json!({
                "type": "interval",
                "interval_s": snapshot.interval_s(),
                "devices": snapshot.devices,
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
            ReportSink::Stream => {
                let mut value = serde_json::to_value(report)?;
                if let Some(object) = value.as_object_mut() {
                    object.insert("type".into(), "report".into());
                }
                println!("{value}");
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
