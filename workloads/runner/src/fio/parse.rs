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
    pub fn push_line(&mut self, line: &str) -> Vec<Result<Value, String>> {
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
                        done.push(serde_json::from_str(&text).map_err(|e| e.to_string()));
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

fn direction(jobs: &[Value], name: &str) -> Option<Direction> {
    let mut d = Direction::default();
    let weighted = |sum: &mut Option<f64>, mean: Option<f64>, n: u64| {
        if let Some(mean) = mean {
            *sum = Some(sum.unwrap_or(0.0) + mean * n as f64);
        }
    };
    let (mut lat_sum, mut clat_sum) = (None, None);
    for job in jobs {
        let s = job.get(name)?;
        let ios = s["total_ios"].as_u64().unwrap_or(0);
        if ios == 0 {
            continue;
        }
        d.ios += ios;
        d.bytes += s["io_bytes"].as_u64().unwrap_or(0);
        d.iops += s["iops"].as_f64().unwrap_or(0.0);
        d.bw_bytes_per_s += s["bw_bytes"].as_f64().unwrap_or(0.0);
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
        return None;
    }
    d.lat_mean_ns = lat_sum.map(|s| s / d.ios as f64);
    d.clat_mean_ns = clat_sum.map(|s| s / d.ios as f64);
    Some(d)
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
    JobFailed { job: String, error: String },
}

/// Reads one fio JSON object.
pub fn parse_report(report: &Value) -> Result<FioResult, FioReportError> {
    let jobs = report["jobs"].as_array().ok_or(FioReportError::NoJobs)?;
    if jobs.is_empty() {
        return Err(FioReportError::RanNoJobs);
    }
    if let Some(job) = jobs.iter().find(|j| j["error"].as_i64().unwrap_or(0) != 0) {
        return Err(FioReportError::JobFailed {
            job: job["jobname"].as_str().unwrap_or("?").to_string(),
            error: job["error"].to_string(),
        });
    }
    let mean = |key: &str| {
        let values: Vec<f64> = jobs.iter().filter_map(|j| j[key].as_f64()).collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    };
    Ok(FioResult {
        fio_version: report["fio version"].as_str().map(str::to_string),
        read: direction(jobs, "read"),
        write: direction(jobs, "write"),
        usr_cpu_percent: mean("usr_cpu"),
        sys_cpu_percent: mean("sys_cpu"),
        // Per direction, `runtime` is the wall time in ms (`job_runtime` sums the jobs'
        // runtimes under group_reporting).
        runtime_s: jobs
            .iter()
            .flat_map(|j| {
                [
                    j["read"]["runtime"].as_f64(),
                    j["write"]["runtime"].as_f64(),
                ]
            })
            .flatten()
            .fold(0.0, f64::max)
            / 1000.0,
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
        assert!(parse_report(&serde_json::json!({})).is_err());
        let failed = serde_json::json!({"jobs": [{"jobname": "x", "error": 5}]});
        assert_eq!(
            parse_report(&failed).unwrap_err().to_string(),
            "job x ended with error 5"
        );
    }
}
