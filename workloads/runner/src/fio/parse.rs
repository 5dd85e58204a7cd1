//! fio's JSON output (`--output-format=json`), as fio 3.x writes it: one object at the end, and
//! with `--status-interval=N` one more every N seconds before it — concatenated on stdout, with
//! the occasional note in plain text between them.

use serde_json::Value;

/// Cuts a stream of text into the JSON objects in it, whatever stands between them.
#[derive(Debug, Default)]
pub struct ObjectSplitter {
    current: String,
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// Text outside any object (fio's notes), one entry per line.
    pub other: Vec<String>,
    outside: String,
}

impl ObjectSplitter {
    pub fn new() -> ObjectSplitter {
        ObjectSplitter::default()
    }

    /// Feeds one line (without its newline); returns the objects it completed.
    pub fn push_line(&mut self, line: &str) -> Vec<Result<Value, serde_json::Error>> {
        let mut done = Vec::new();
        for c in line.chars().chain(std::iter::once('\n')) {
            if self.depth == 0 {
                if c == '{' {
                    self.depth = 1;
                    self.current.push(c);
                } else if c == '\n' {
                    let text = std::mem::take(&mut self.outside);
                    if !text.trim().is_empty() {
                        self.other.push(text.trim().to_string());
                    }
                } else {
                    self.outside.push(c);
                }
                continue;
            }
            self.current.push(c);
            if self.in_string {
                match (self.escaped, c) {
                    (true, _) => self.escaped = false,
                    (false, '\\') => self.escaped = true,
                    (false, '"') => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match c {
                '"' => self.in_string = true,
                '{' | '[' => self.depth += 1,
                '}' | ']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        let text = std::mem::take(&mut self.current);
                        done.push(serde_json::from_str(&text));
                    }
                }
                _ => {}
            }
        }
        done
    }
}

/// All objects in `text`, and the text outside them.
pub fn split_objects(text: &str) -> (Vec<Value>, Vec<String>) {
    let mut splitter = ObjectSplitter::new();
    let mut objects = Vec::new();
    for line in text.lines() {
        objects.extend(splitter.push_line(line).into_iter().filter_map(Result::ok));
    }
    (objects, splitter.other)
}

/// One direction (read or write) of a run, summed over the jobs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Direction {
    pub ios: u64,
    pub bytes: u64,
    pub iops: f64,
    pub bw_bytes_per_s: f64,
    /// Submission to completion (`lat_ns`), mean in ns.
    pub lat_mean_ns: Option<f64>,
    /// Completion latency (`clat_ns`): mean and percentiles in ns.
    pub clat_mean_ns: Option<f64>,
    pub clat_p50_ns: Option<f64>,
    pub clat_p90_ns: Option<f64>,
    pub clat_p99_ns: Option<f64>,
    pub clat_p99_9_ns: Option<f64>,
}

/// What one fio run measured.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FioResult {
    pub fio_version: Option<String>,
    /// `None` when no I/O was done in that direction.
    pub read: Option<Direction>,
    pub write: Option<Direction>,
    pub usr_cpu_percent: Option<f64>,
    pub sys_cpu_percent: Option<f64>,
    /// Wall time of the longest direction, s.
    pub runtime_s: f64,
    /// Milliseconds since the epoch when fio wrote the object (for interval rates).
    pub timestamp_ms: Option<u64>,
    pub jobs: usize,
    /// fio's per-disk utilisation (`disk_util`), as it gave it.
    pub disk_util: Vec<Value>,
}

impl FioResult {
    pub fn ios(&self) -> u64 {
        self.read.as_ref().map_or(0, |d| d.ios) + self.write.as_ref().map_or(0, |d| d.ios)
    }
    pub fn bytes(&self) -> u64 {
        self.read.as_ref().map_or(0, |d| d.bytes) + self.write.as_ref().map_or(0, |d| d.bytes)
    }
    pub fn iops(&self) -> f64 {
        self.read.as_ref().map_or(0.0, |d| d.iops) + self.write.as_ref().map_or(0.0, |d| d.iops)
    }
    pub fn bw_bytes_per_s(&self) -> f64 {
        self.read.as_ref().map_or(0.0, |d| d.bw_bytes_per_s)
            + self.write.as_ref().map_or(0.0, |d| d.bw_bytes_per_s)
    }
}

fn percentile(clat: &Value, key: &str) -> Option<f64> {
    clat.get("percentile")?.get(key)?.as_f64()
}

/// What a fio JSON object lacks to be a run's result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FioReportError {
    #[error("no `jobs` in fio's JSON output")]
    NoJobs,
    #[error("fio ran no jobs")]
    RanNoJobs,
    /// A job's name and its error number (as fio wrote it).
    #[error("job {job} ended with error {error}")]
    JobFailed { job: String, error: u64 },
    /// A field fio always writes, by its place (`jobs[0].read.iops`).
    #[error("no `{0}` in fio's JSON output")]
    Missing(String),
    /// A field of the wrong kind: its place, what it held and what it should be.
    #[error("`{at}` in fio's JSON output is {value}, not {wanted}")]
    WrongKind {
        at: String,
        value: String,
        wanted: &'static str,
    },
}

/// A field fio always writes, at `at` (`jobs[0].read`), or an error that names it: an output
/// that lacks one is not read as a 0.
fn field<'a>(value: &'a Value, at: &str, key: &str) -> Result<&'a Value, FioReportError> {
    value
        .get(key)
        .ok_or_else(|| FioReportError::Missing(format!("{at}.{key}")))
}

fn wrong_kind(at: &str, key: &str, value: &Value, wanted: &'static str) -> FioReportError {
    FioReportError::WrongKind {
        at: format!("{at}.{key}"),
        value: value.to_string(),
        wanted,
    }
}

fn whole(value: &Value, at: &str, key: &str) -> Result<u64, FioReportError> {
    let v = field(value, at, key)?;
    v.as_u64()
        .ok_or_else(|| wrong_kind(at, key, v, "a whole number"))
}

fn number(value: &Value, at: &str, key: &str) -> Result<f64, FioReportError> {
    let v = field(value, at, key)?;
    v.as_f64().ok_or_else(|| wrong_kind(at, key, v, "a number"))
}

/// `jobs[i].NAME` summed over the jobs; `None` when no job did I/O in that direction.
fn direction(jobs: &[Value], name: &str) -> Result<Option<Direction>, FioReportError> {
    let mut d = Direction::default();
    let weighted = |sum: &mut Option<f64>, mean: Option<f64>, n: u64| {
        if let Some(mean) = mean {
            *sum = Some(sum.unwrap_or(0.0) + mean * n as f64);
        }
    };
    let (mut lat_sum, mut clat_sum) = (None, None);
    for (i, job) in jobs.iter().enumerate() {
        let s = field(job, &format!("jobs[{i}]"), name)?;
        let at = format!("jobs[{i}].{name}");
        let ios = whole(s, &at, "total_ios")?;
        if ios == 0 {
            continue;
        }
        d.ios += ios;
        d.bytes += whole(s, &at, "io_bytes")?;
        d.iops += number(s, &at, "iops")?;
        d.bw_bytes_per_s += number(s, &at, "bw_bytes")?;
        weighted(&mut lat_sum, s["lat_ns"]["mean"].as_f64(), ios);
        weighted(&mut clat_sum, s["clat_ns"]["mean"].as_f64(), ios);
        // Percentiles do not add up: with several job reports, the worst one stands.
        let worst = |now: Option<f64>, key: &str| match (now, percentile(&s["clat_ns"], key)) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        d.clat_p50_ns = worst(d.clat_p50_ns, "50.000000");
        d.clat_p90_ns = worst(d.clat_p90_ns, "90.000000");
        d.clat_p99_ns = worst(d.clat_p99_ns, "99.000000");
        d.clat_p99_9_ns = worst(d.clat_p99_9_ns, "99.900000");
    }
    if d.ios == 0 {
        return Ok(None);
    }
    d.lat_mean_ns = lat_sum.map(|s| s / d.ios as f64);
    d.clat_mean_ns = clat_sum.map(|s| s / d.ios as f64);
    Ok(Some(d))
}

/// Reads one fio JSON object. A field fio always writes (a job's `error`, each direction's
/// `total_ios`, `io_bytes`, `iops`, `bw_bytes` and `runtime`) is an error when missing, naming
/// it; latencies, CPU shares and the timestamp are left out when fio did not give them.
pub fn parse_report(report: &Value) -> Result<FioResult, FioReportError> {
    let jobs = report["jobs"].as_array().ok_or(FioReportError::NoJobs)?;
    if jobs.is_empty() {
        return Err(FioReportError::RanNoJobs);
    }
    for (i, job) in jobs.iter().enumerate() {
        let error = whole(job, &format!("jobs[{i}]"), "error")?;
        if error != 0 {
            return Err(FioReportError::JobFailed {
                job: job["jobname"].as_str().unwrap_or("?").to_string(),
                error,
            });
        }
    }
    let mean = |key: &str| {
        let values: Vec<f64> = jobs.iter().filter_map(|j| j[key].as_f64()).collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    };
    // Per direction, `runtime` is the wall time in ms (`job_runtime` sums the jobs' runtimes
    // under group_reporting).
    let mut runtime_ms: f64 = 0.0;
    for (i, job) in jobs.iter().enumerate() {
        for name in ["read", "write"] {
            let at = format!("jobs[{i}]");
            let direction = field(job, &at, name)?;
            runtime_ms = runtime_ms.max(number(direction, &format!("{at}.{name}"), "runtime")?);
        }
    }
    Ok(FioResult {
        fio_version: report["fio version"].as_str().map(str::to_string),
        read: direction(jobs, "read")?,
        write: direction(jobs, "write")?,
        usr_cpu_percent: mean("usr_cpu"),
        sys_cpu_percent: mean("sys_cpu"),
        runtime_s: runtime_ms / 1000.0,
        timestamp_ms: report["timestamp_ms"].as_u64(),
        jobs: jobs.len(),
        disk_util: report["disk_util"].as_array().cloned().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fio 3.33 `--rw=randread --bs=4k --iodepth=32 --numjobs=4 --ioengine=libaio --direct=1
    /// --group_reporting --output-format=json --status-interval=1` on a file: two interim
    /// objects, then the final one.
    const RANDREAD_STREAM: &str = include_str!("../../testdata/fio-randread-4k-qd32x4.json");
    const RANDWRITE: &str = include_str!("../../testdata/fio-randwrite-4k-qd32x4.json");
    const READ_128K: &str = include_str!("../../testdata/fio-read-128k-qd128.json");
    const WRITE_128K: &str = include_str!("../../testdata/fio-write-128k-qd128.json");
    /// Two psync jobs reported separately (no group_reporting), with fio's notes on stdout
    /// before the JSON.
    const TWO_JOBS_NOTE: &str = include_str!("../../testdata/fio-two-jobs-with-note.json");

    fn last(text: &str) -> FioResult {
        let (objects, _) = split_objects(text);
        parse_report(objects.last().expect("an object")).unwrap()
    }

    #[test]
    fn the_stream_holds_interim_objects_then_the_final_one() {
        let (objects, other) = split_objects(RANDREAD_STREAM);
        assert_eq!(objects.len(), 3);
        assert!(other.is_empty(), "{other:?}");
        let ios: Vec<u64> = objects
            .iter()
            .map(|o| parse_report(o).unwrap().ios())
            .collect();
        assert!(ios.windows(2).all(|w| w[0] < w[1]), "cumulative: {ios:?}");
    }

    #[test]
    fn random_reads_give_iops_bandwidth_and_percentiles() {
        let r = last(RANDREAD_STREAM);
        assert_eq!(r.fio_version.as_deref(), Some("fio-3.33"));
        assert_eq!(r.jobs, 1);
        assert!(r.write.is_none());
        let read = r.read.clone().unwrap();
        assert_eq!(read.ios, 110463);
        assert_eq!(read.bytes, 452456448);
        assert!((read.iops - 54929.388364).abs() < 1e-6);
        assert_eq!(read.bw_bytes_per_s, 224990774.0);
        assert_eq!(read.clat_p50_ns, Some(1892352.0));
        assert_eq!(read.clat_p99_ns, Some(6520832.0));
        assert_eq!(read.clat_p99_9_ns, Some(12517376.0));
        assert!((read.clat_mean_ns.unwrap() - 2316315.224075).abs() < 1e-3);
        assert!((read.lat_mean_ns.unwrap() - 2325602.437694).abs() < 1e-3);
        assert_eq!(r.runtime_s, 2.011);
        assert_eq!(r.disk_util.len(), 1);
    }

    #[test]
    fn writes_and_sequential_runs_parse_the_same_way() {
        for text in [RANDWRITE, WRITE_128K] {
            let r = last(text);
            assert!(r.read.is_none());
            let w = r.write.unwrap();
            assert!(w.ios > 0 && w.iops > 0.0 && w.clat_p99_ns.is_some());
        }
        let r = last(READ_128K);
        let read = r.read.unwrap();
        assert_eq!(read.bytes, read.ios * 128 * 1024);
    }

    #[test]
    fn separate_job_reports_add_up_and_notes_are_kept_apart() {
        let (objects, other) = split_objects(TWO_JOBS_NOTE);
        assert_eq!(objects.len(), 1);
        assert_eq!(other.len(), 2, "one note per job: {other:?}");
        assert!(other.iter().all(|l| l.starts_with("note:")), "{other:?}");
        let r = parse_report(&objects[0]).unwrap();
        assert_eq!(r.jobs, 2);
        let jobs = objects[0]["jobs"].as_array().unwrap();
        let sum: u64 = jobs
            .iter()
            .map(|j| j["read"]["total_ios"].as_u64().unwrap())
            .sum();
        assert_eq!(r.read.unwrap().ios, sum);
    }

    #[test]
    fn braces_inside_strings_do_not_confuse_the_splitter() {
        let mut s = ObjectSplitter::new();
        assert!(s.push_line(r#"{"a": "} { \" }", "#).is_empty());
        let done = s.push_line(r#""b": [1, {"c": 2}]}"#);
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].as_ref().unwrap()["b"][1]["c"], 2);
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert_eq!(
            parse_report(&serde_json::json!({})).unwrap_err(),
            FioReportError::NoJobs
        );
        let failed = serde_json::json!({"jobs": [{"jobname": "x", "error": 5}]});
        assert_eq!(
            parse_report(&failed).unwrap_err().to_string(),
            "job x ended with error 5"
        );
    }

    /// fio's output missing a field it always writes is refused with the field's place, not
    /// read as a 0 (a run of no I/O would pass for a run whose numbers were lost).
    #[test]
    fn a_missing_field_is_an_error_that_names_it() {
        let (objects, _) = split_objects(RANDREAD_STREAM);
        let whole = objects.last().expect("an object").clone();
        for (path, named) in [
            (&["jobs", "0", "read", "iops"][..], "`jobs[0].read.iops`"),
            (
                &["jobs", "0", "read", "io_bytes"],
                "`jobs[0].read.io_bytes`",
            ),
            (
                &["jobs", "0", "read", "total_ios"],
                "`jobs[0].read.total_ios`",
            ),
            (
                &["jobs", "0", "write", "runtime"],
                "`jobs[0].write.runtime`",
            ),
            (&["jobs", "0", "write"], "`jobs[0].write`"),
            (&["jobs", "0", "error"], "`jobs[0].error`"),
        ] {
            let mut report = whole.clone();
            let (last, parents) = path.split_last().expect("a path");
            let mut at = &mut report;
            for key in parents {
                at = match key.parse::<usize>() {
                    Ok(i) => &mut at[i],
                    Err(_) => &mut at[*key],
                };
            }
            at.as_object_mut().expect("an object").remove(*last);
            let error = parse_report(&report).unwrap_err().to_string();
            assert_eq!(error, format!("no {named} in fio's JSON output"));
        }
        let mut report = whole;
        report["jobs"][0]["read"]["bw_bytes"] = serde_json::json!("fast");
        assert_eq!(
            parse_report(&report).unwrap_err().to_string(),
            "`jobs[0].read.bw_bytes` in fio's JSON output is \"fast\", not a number"
        );
    }
}
