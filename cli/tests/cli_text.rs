//! Text that fits and says the right thing: with COLUMNS=80 no line of a help, a
//! report, a comparison or the profile list is wider than 80; `report` reads a stream and
//! standard input; labels, warnings and refusals. Expected figures come from the fixtures' JSON.

mod support;

use assert_cmd::Command;
use serde_json::Value;
use std::path::PathBuf;
use support::{assert_one_line_error, assert_succeeded, read_json};

fn iommutop() -> Command {
    let mut command = Command::cargo_bin("iommutop").expect("built");
    command.env("COLUMNS", "80");
    command
}

fn example(name: &str) -> PathBuf {
    support::project_root().join("examples").join(name)
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

const EXAMPLES: [&str; 3] = [
    "load-5.10-intel.json",
    "load-6.12-intel-preempt_full.json",
    "load-7.3-intel.json",
];

/// Runs iommutop with `args`, expects success, and returns its stdout.
fn stdout_of(args: &[&str]) -> String {
    let output = iommutop().args(args).output().expect("runs");
    assert_succeeded(&output, &args.join(" "));
    String::from_utf8(output.stdout).expect("UTF-8")
}

fn assert_fits_80(text: &str, what: &str) {
    let wide: Vec<&str> = text.lines().filter(|l| l.chars().count() > 80).collect();
    assert!(
        wide.is_empty(),
        "{what}: {} lines wider than 80:\n{}",
        wide.len(),
        wide.join("\n")
    );
}

#[test]
fn every_help_fits_80_columns() {
    let top = stdout_of(&["--help"]);
    assert_fits_80(&top, "iommutop --help");
    let commands = [
        "probes",
        "record",
        "diagnose",
        "compare",
        "run",
        "workload",
        "profiles",
        "top",
        "report",
        "serve",
        "completions",
    ];
    for command in commands {
        assert!(top.contains(command), "--help lists no {command}");
        let help = stdout_of(&[command, "--help"]);
        assert_fits_80(&help, &format!("iommutop {command} --help"));
    }
}

#[test]
fn reports_comparisons_and_profiles_fit_80_columns() {
    for name in EXAMPLES {
        let path = example(name);
        let path = path.to_str().expect("path");
        assert_fits_80(&stdout_of(&["report", path, "--hist"]), name);
    }
    let a = example(EXAMPLES[0]);
    let b = example(EXAMPLES[2]);
    let tcp_rr = fixture("tcp-rr-intel-6.12.json");
    for (a, b) in [(&a, &b), (&b, &tcp_rr)] {
        let text = stdout_of(&["compare", a.to_str().expect("a"), b.to_str().expect("b")]);
        assert_fits_80(&text, "compare");
    }
    let profiles = stdout_of(&["profiles"]);
    assert!(profiles.starts_with("PROFILE"), "no header: {profiles}");
    assert_fits_80(&profiles, "profiles");
}

/// `report` could read neither standard input nor what `record --json -` writes.
#[test]
fn report_reads_an_ndjson_stream_from_a_file_and_from_standard_input() {
    let report = read_json(&example(EXAMPLES[2]));
    let mut stream = String::new();
    for t in 1..=3 {
        let line = serde_json::json!({"type": "interval", "t_s": t, "devices": []});
        stream.push_str(&format!("{line}\n"));
    }
    stream.push_str(&format!(
        "{}\n",
        serde_json::json!({"type": "report", "report": report})
    ));
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("stream.ndjson");
    std::fs::write(&file, &stream).expect("written");

    let from_file = stdout_of(&["report", file.to_str().expect("path"), "--format", "json"]);
    let output = iommutop()
        .args(["report", "-", "--format", "json"])
        .write_stdin(stream)
        .output()
        .expect("runs");
    assert_succeeded(&output, "report - (a stream on stdin)");
    for text in [
        from_file,
        String::from_utf8_lossy(&output.stdout).into_owned(),
    ] {
        let read: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(read["devices"], report["devices"]);
        assert_eq!(read["run"], report["run"]);
    }
}

/// `report r.json --device eth7` printed "no device mapped memory" and exited 0.
#[test]
fn an_unknown_device_is_a_usage_error_naming_the_report_and_its_devices() {
    let path = example(EXAMPLES[2]);
    let output = iommutop()
        .arg("report")
        .arg(&path)
        .args(["--device", "eth7"])
        .output()
        .expect("runs");
    assert_one_line_error(&output, 2, &["eth7", "load-7.3-intel.json", "--device"]);
    // A name the report has is taken, by NIC name as by address.
    let report = read_json(&path);
    let nic = report["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .find_map(|d| d["names"].as_array()?.first()?.as_str().map(String::from))
        .expect("a named device");
    stdout_of(&["report", path.to_str().expect("path"), "--device", &nic]);
}

/// `top --batch -n 0` attached the probes, printed nothing and exited 0.
#[test]
fn zero_intervals_are_refused() {
    let output = iommutop()
        .args(["top", "--batch", "-n", "0"])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
}

/// "where the time goes" added up to 43.6% with no line for the rest.
#[test]
fn where_the_time_goes_adds_up_to_100_percent() {
    let text = stdout_of(&["report", example(EXAMPLES[2]).to_str().expect("path")]);
    let mut blocks = 0;
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if !line.contains("where the time goes") {
            continue;
        }
        blocks += 1;
        let mut sum = 0.0;
        while let Some(share) = lines
            .peek()
            .and_then(|l| l.trim().split_once("%  "))
            .and_then(|(p, _)| p.trim().parse::<f64>().ok())
        {
            sum += share;
            lines.next();
        }
        // Each share is rounded to 0.1%.
        assert!((sum - 100.0).abs() < 0.5, "shares add up to {sum}:\n{text}");
    }
    assert_eq!(blocks, 3, "{text}");
}

/// The text report left out what the probes cost; the report's own figures say it.
#[test]
fn the_text_report_says_what_the_probes_cost() {
    let path = example(EXAMPLES[2]);
    let report = read_json(&path);
    let programs = report["self_overhead"]["programs"]
        .as_array()
        .expect("programs");
    let ns: f64 = programs
        .iter()
        .map(|p| p["run_time_ns"].as_f64().expect("ns"))
        .sum();
    let cpu = ns / (report["run"]["duration_s"].as_f64().expect("duration") * 1e9) * 100.0;
    let text = stdout_of(&["report", path.to_str().expect("path")]);
    let line = text.split("probe cost:").nth(1).expect("a probe cost line");
    let said: f64 = line
        .split("% of one CPU")
        .next()
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|p| p.parse().ok())
        .expect("a share of one CPU");
    assert!(
        (said - cpu).abs() < 0.01,
        "said {said}%, the JSON gives {cpu}%"
    );
}

/// `report --hist` prints biolatency-style histograms holding every timed call.
#[test]
fn report_hist_prints_each_log2_histogram() {
    let path = example(EXAMPLES[2]);
    let report = read_json(&path);
    let nvme = &report["devices"][0];
    let key = nvme["key"].as_str().expect("key");
    let hist = nvme["ops"]["dma_map"]["latency"]["hist"]
        .as_array()
        .expect("hist");
    let expected: u64 = hist.iter().map(|c| c.as_u64().expect("count")).sum();
    let text = stdout_of(&["report", path.to_str().expect("path"), "--hist"]);
    let counted: u64 = text
        .lines()
        .skip_while(|l| !(l.starts_with(key) && l.contains(" dma_map: ")))
        .skip(2)
        .take_while(|l| l.contains(" -> "))
        .map(|l| {
            let count = l.split(" : ").nth(1).expect("a count");
            count
                .split_whitespace()
                .next()
                .expect("count")
                .parse::<u64>()
                .expect("number")
        })
        .sum();
    assert_eq!(counted, expected, "{text}");
}

/// A dd-like run against a TCP_RR run said "devices, per second" over per-transaction figures
/// and never said the workloads differed.
#[test]
fn compare_of_different_workloads_says_so_and_labels_each_side_s_unit() {
    let a = example(EXAMPLES[2]);
    let b = fixture("tcp-rr-intel-6.12.json");
    let (ra, rb) = (read_json(&a), read_json(&b));
    // The fixtures: a command in A, netperf (transactions) in B, and an NVMe only in A.
    assert!(ra["run"]["workload"].is_null());
    assert_eq!(rb["run"]["workload"]["name"], "netperf");
    let text = stdout_of(&["compare", a.to_str().expect("a"), b.to_str().expect("b")]);
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("warning: A and B ran different workloads (sh in A, netperf in B)"),
        "{text}"
    );
    assert!(
        flat.contains("warning: A and B measured different devices (0000:00:04.0 only in A)"),
        "{text}"
    );
    // Each device says its own unit: the NICs per packet in A (no workload drove them) and per
    // transaction in B (netperf did), the NVMe per completed I/O.
    assert!(
        flat.contains("devices, each per its own unit (A → B):"),
        "{text}"
    );
    assert!(
        flat.contains("0000:00:05.0 (eth0, e1000e), per packet in A, transaction in B"),
        "{text}"
    );
    assert!(
        flat.contains("0000:00:04.0 (nvme0n1, nvme), per completed I/O"),
        "{text}"
    );
    assert!(
        flat.contains(
            "the figures of 0000:00:05.0 and 0000:00:06.0 are per packet in A and per \
             transaction in B, which do not compare one to one"
        ),
        "{text}"
    );
    assert!(!flat.contains("per second"), "{text}");
    let json = stdout_of(&[
        "compare",
        a.to_str().expect("a"),
        b.to_str().expect("b"),
        "--format",
        "json",
    ]);
    let json: Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(
        json["comparison"]["warnings"].as_array().map(Vec::len),
        Some(2)
    );
}

/// The 5.10-vs-7.3 comparison repeated the same device lines under three findings.
#[test]
fn compare_shows_each_device_s_figures_under_one_finding_only() {
    let a = example(EXAMPLES[0]);
    let b = example(EXAMPLES[2]);
    let text = stdout_of(&["compare", a.to_str().expect("a"), b.to_str().expect("b")]);
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let report = read_json(&b);
    let devices = report["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .filter(|d| d["kind"] == "pci")
        .count();
    // Three devices, each with its figures under one finding (and once in the table below): the
    // NVMe per completed I/O, the NICs per packet.
    let lines = flat.matches(" per completed I/O, A → B: DMA maps").count()
        + flat.matches(" per packet, A → B: DMA maps").count();
    assert_eq!(lines, devices, "each device's figures once:\n{text}");
    assert!(flat.contains("figures as under 1. above"), "{text}");
}

/// `--json -` and `--format json` mean the same on `report`, `compare` and `profiles`: the JSON
/// alone on stdout (the text, with `--json -`, on stderr).
#[test]
fn json_to_stdout_is_the_same_on_report_compare_and_profiles() {
    let a = example(EXAMPLES[0]);
    let b = example(EXAMPLES[2]);
    let (a, b) = (a.to_str().expect("a"), b.to_str().expect("b"));
    for args in [vec!["report", b], vec!["compare", a, b], vec!["profiles"]] {
        let dash = iommutop()
            .args(&args)
            .args(["--json", "-"])
            .output()
            .expect("runs");
        assert_succeeded(&dash, "--json -");
        let format = stdout_of(&[args.clone(), vec!["--format", "json"]].concat());
        assert_eq!(String::from_utf8_lossy(&dash.stdout), format, "{args:?}");
        serde_json::from_str::<Value>(&format).expect("JSON");
        assert!(!dash.stderr.is_empty(), "the text goes to stderr");
    }
}

/// `--json FILE` writes the JSON to FILE and leaves the table on stdout, as on `report`.
#[test]
fn profiles_json_file_is_written_beside_the_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("profiles.json");
    let output = iommutop()
        .args(["profiles", "--json"])
        .arg(&path)
        .output()
        .expect("runs");
    assert_succeeded(&output, "profiles --json FILE");
    assert!(String::from_utf8_lossy(&output.stdout).contains("PROFILE"));
    let listed = read_json(&path);
    assert_eq!(
        listed,
        serde_json::from_str::<Value>(&stdout_of(&["profiles", "--format", "json"])).expect("JSON")
    );
}

/// Every command takes `--format`; one it has no form for is refused before anything runs (no
/// root needed to see it), in one line naming the command, the form and those it has.
#[test]
fn a_format_a_command_has_no_form_for_is_refused() {
    let cases: [(&[&str], &[&str]); 9] = [
        (
            &["profiles", "--format", "html"],
            &["profiles", "html", "--format text or json"],
        ),
        (
            &["probes", "--format", "markdown"],
            &["probes", "markdown", "--format text or json"],
        ),
        (
            &["top", "--format", "json"],
            &["top", "json", "--format text", "--batch --format json"],
        ),
        (
            &["record", "--format", "json", "--json", "r.json"],
            &["--format json", "--json r.json", "one of them"],
        ),
        (
            &["record", "--format", "markdown", "--json", "-"],
            &["record --json -", "--format markdown", "give --json a file"],
        ),
        (
            &["top", "--batch", "--format", "html", "--json", "-"],
            &[
                "top --batch --json -",
                "--format html",
                "give --json a file",
            ],
        ),
        (
            &["record", "--print", "--format", "html"],
            &["--print", "html report on stdout", "--format text"],
        ),
        (
            &["diagnose", "--json", "-"],
            &["diagnose --json -", "give --json a file"],
        ),
        (
            &["record", "--print", "--format", "json"],
            &["--print", "--format json", "give --json a file"],
        ),
    ];
    for (args, needles) in cases {
        let output = iommutop().args(args).output().expect("runs");
        assert_one_line_error(&output, 2, needles);
    }
}
