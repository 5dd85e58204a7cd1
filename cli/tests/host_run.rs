//! `iommutop run --runs N --warmup K` on the build machine: the tlb workload needs no IOMMU, so
//! a repeated run works here. The report keeps each measured run's numbers and their spread, and
//! `compare` of two such reports measures noise across the runs. Attaches probes: needs root,
//! like host_probes.rs.

mod support;

use assert_cmd::Command;
use std::path::Path;
use std::time::Duration;
use support::{
    assert_one_line_error, assert_success, assert_valid_report, read_json, scratch_file,
};

fn iommutop() -> Command {
    Command::cargo_bin("iommutop").expect("binary built")
}

/// A short tlb sweep run `runs` times after `warmup` discarded runs, its report in `json`.
fn repeated_tlb_run(json: &Path, runs: &str, warmup: &str) -> String {
    let output = iommutop()
        .args([
            "run",
            "tlb-sweep",
            "--set",
            "max_size=64k",
            "--set",
            "page_sizes=4k",
        ])
        .args([
            "--interval",
            "0.2",
            "--runs",
            runs,
            "--warmup",
            warmup,
            "--json",
        ])
        .arg(json)
        .timeout(Duration::from_secs(300))
        .output()
        .expect("runs");
    assert_success(&output);
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn runs_are_measured_one_by_one_after_discarded_warm_ups() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let stdout = repeated_tlb_run(&a, "3", "1");
    assert!(
        stdout.contains("over 3 runs (after 1 warm-up): mean ± sample standard deviation"),
        "{stdout}"
    );
    let report = read_json(&a);
    assert_valid_report(&report);
    let repeats = &report["repeats"];
    assert_eq!(repeats["warmup"], 1, "{repeats}");
    let runs = repeats["runs"].as_array().expect("runs[]");
    assert_eq!(runs.len(), 3, "the warm-up is not among them: {repeats}");
    let values: Vec<f64> = runs
        .iter()
        .map(|r| {
            r["workload"]["ns_per_access_4k_largest"]
                .as_f64()
                .expect("per run")
        })
        .collect();
    let mean = values.iter().sum::<f64>() / 3.0;
    let summary = &repeats["summary"]["workload"]["ns_per_access_4k_largest"];
    assert_eq!(summary["n"], 3);
    assert!(
        (summary["mean"].as_f64().expect("mean") - mean).abs() < 1e-9,
        "{summary}"
    );
    assert!(summary["stddev"].as_f64().is_some(), "{summary}");
    assert!(
        runs.windows(2)
            .all(|w| w[0]["t_s"].as_f64() < w[1]["t_s"].as_f64()),
        "one after the other: {repeats}"
    );
    // The results are the runs' mean; the report's duration covers the measured runs only.
    let result = &report["run"]["workload"]["results"]["ns_per_access_4k_largest"];
    assert!(
        (result.as_f64().expect("number") - mean).abs() < 1e-9,
        "{result}"
    );
    let measured: f64 = runs
        .iter()
        .map(|r| r["duration_s"].as_f64().unwrap_or(0.0))
        .sum();
    assert!(report["run"]["duration_s"].as_f64().expect("duration") < measured + 1.0);

    repeated_tlb_run(&b, "2", "0");
    let output = iommutop()
        .arg("compare")
        .args([&a, &b])
        .args(["--json", "-"])
        .output()
        .expect("runs");
    assert_success(&output);
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let noise = &value["comparison"]["noise"];
    assert_eq!(noise["source"], "repeats", "{noise}");
    assert_eq!(
        (noise["runs_a"].as_u64(), noise["runs_b"].as_u64()),
        (Some(3), Some(2))
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("noise: measured across repeated runs (3 in A, 2 in B"),
        "{stderr}"
    );
}

/// Ctrl-C during the second of three runs: the first run's numbers are kept, the report says
/// which run did not complete, and the exit status says it was interrupted.
#[test]
fn an_interrupted_series_keeps_the_runs_before_it() {
    use std::io::BufReader;
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("interrupted.json");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_iommutop"))
        .args([
            "run",
            "tlb-sweep",
            "--set",
            "max_size=16m",
            "--set",
            "page_sizes=4k",
        ])
        .args(["--runs", "3", "--json"])
        .arg(&json)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starts");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let said = read_until(&mut stderr, "iommutop: run 2/3\n");
    // SAFETY: kill has no memory preconditions; the pid is our own child's.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).expect("reads stderr");
    let status = child.wait().expect("ends");
    assert_eq!(status.code(), Some(1), "{said}{rest}");
    assert!(
        rest.contains("interrupted (the report covers the run up to then)"),
        "{rest}"
    );
    let report = read_json(&json);
    assert_valid_report(&report);
    assert_eq!(
        report["repeats"]["runs"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
    assert_eq!(report["run"]["workload"]["results"]["interrupted"], true);
    let warnings = report["warnings"].to_string();
    assert!(
        warnings
            .contains("run 2 of 3 did not complete: the numbers are those of the run before it"),
        "{warnings}"
    );
}

/// The workload crashes in the second of two runs (fio killed): the first run's numbers are the
/// results, typed (the summary a person reads is printed, IOPS and all), with the crash's error
/// beside them in the report, which says which run did not complete; the exit status is the
/// failure's.
#[test]
fn a_series_whose_later_run_crashes_keeps_and_summarizes_the_runs_before_it() {
    use std::io::{BufReader, Read};
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("crashed.json");
    let file = scratch_file("series-crash", 16);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_iommutop"))
        .args(["run", "fio-randread-4k-qd32x4", "--duration", "2", "--set"])
        .arg(format!("filename={}", file.display()))
        .args(["--runs", "2", "--json"])
        .arg(&json)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starts");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let said = read_until(&mut stderr, "iommutop: run 2/2\n");
    let killed = kill_descendants_named(child.id(), "fio", Duration::from_secs(20));
    assert!(killed > 0, "no fio ran in run 2: {said}");
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).expect("reads stderr");
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut stdout)
        .expect("reads stdout");
    let status = child.wait().expect("ends");
    assert_eq!(status.code(), Some(1), "{said}{rest}");

    let report = read_json(&json);
    assert_valid_report(&report);
    let results = &report["run"]["workload"]["results"];
    let error = results["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error: {results}"));
    assert!(error.contains("fio"), "the error names fio: {error}");
    let iops = results["iops"].as_f64().unwrap_or(0.0);
    assert!(iops > 0.0, "the first run's IOPS are kept: {results}");
    assert_eq!(
        report["repeats"]["runs"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
    let warnings = report["warnings"].to_string();
    assert!(
        warnings
            .contains("run 2 of 2 did not complete: the numbers are those of the run before it"),
        "{warnings}"
    );
    let headline = format!("fio on {}: {iops:.0} IOPS", file.display());
    assert!(
        stdout.contains(&headline),
        "the complete run's summary is printed ({headline}):\n{stdout}"
    );
}

/// What `stderr` says up to and including the line `line`; fails the test if it ends first.
fn read_until(stderr: &mut impl std::io::BufRead, line: &str) -> String {
    let mut said = String::new();
    while !said.contains(line) {
        let before = said.len();
        stderr.read_line(&mut said).expect("reads stderr");
        assert!(said.len() > before, "ended before {line:?}: {said}");
    }
    said
}

/// Sends SIGKILL to every process named `name` below `ancestor`, waiting up to `patience` for
/// one to appear; how many it killed.
fn kill_descendants_named(ancestor: u32, name: &str, patience: Duration) -> usize {
    let parent_of = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()
    };
    let descends = |mut pid: u32| {
        while let Some(parent) = parent_of(pid).filter(|&p| p > 1) {
            if parent == ancestor {
                return true;
            }
            pid = parent;
        }
        false
    };
    let deadline = std::time::Instant::now() + patience;
    loop {
        let victims: Vec<u32> = std::fs::read_dir("/proc")
            .expect("/proc")
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .filter(|&pid: &u32| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|comm| comm.trim_end() == name)
                    && descends(pid)
            })
            .collect();
        for &pid in &victims {
            // SAFETY: kill has no memory preconditions; the pid is our child's descendant.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
        if !victims.is_empty() || std::time::Instant::now() > deadline {
            return victims.len();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `--runs 0` measures nothing: refused before any probe attaches, in one line.
#[test]
fn zero_runs_is_a_one_line_usage_error() {
    let output = iommutop()
        .args(["run", "tlb-sweep", "--runs", "0"])
        .output()
        .expect("runs");
    assert_one_line_error(&output, 2, &["--runs 0", "at least one run"]);
}

/// `record --format markdown|html` prints its report as `report FILE --format markdown|html` prints
/// the report it wrote to FILE, byte for byte (one code path, so the two cannot drift apart).
#[test]
fn record_prints_its_report_as_report_prints_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    for format in ["markdown", "html"] {
        let json = dir.path().join(format!("r-{format}.json"));
        let recorded = iommutop()
            .args(["record", "--duration", "1", "--format", format, "--json"])
            .arg(&json)
            .timeout(Duration::from_secs(300))
            .output()
            .expect("runs");
        assert_success(&recorded);
        assert_valid_report(&read_json(&json));
        let shown = iommutop()
            .arg("report")
            .arg(&json)
            .args(["--format", format])
            .output()
            .expect("runs");
        assert_success(&shown);
        assert!(!recorded.stdout.is_empty(), "{format}: nothing printed");
        assert_eq!(
            String::from_utf8_lossy(&recorded.stdout),
            String::from_utf8_lossy(&shown.stdout),
            "{format}"
        );
    }
}
