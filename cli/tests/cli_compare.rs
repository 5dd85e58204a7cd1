//! `iommutop compare` on the host: bad input gives one line naming the file and the problem, and
//! --fail-if sets exit code 4. Needs no root: it only reads reports.

mod support;

use assert_cmd::Command;
use std::path::{Path, PathBuf};
use support::assert_one_line_error;

fn dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-compare");
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

/// Written whole under a unique name, then renamed: tests running in parallel share the names.
fn write(name: &str, text: &str) -> PathBuf {
    let path = dir().join(name);
    let partial = dir().join(format!("{name}.{:?}", std::thread::current().id()));
    std::fs::write(&partial, text).expect("write fixture");
    std::fs::rename(&partial, &path).expect("rename fixture");
    path
}

/// A real report, from the schema's own minimal example built by the model's tests.
fn valid_report() -> PathBuf {
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report-minimal.json"),
    )
    .expect("fixture");
    write("valid.json", &text)
}

/// `iommutop compare A B FLAGS...`.
fn compare(a: &Path, b: &Path, flags: &[&str]) -> std::process::Output {
    Command::cargo_bin("iommutop")
        .expect("built")
        .arg("compare")
        .arg(a)
        .arg(b)
        .args(flags)
        .output()
        .expect("runs")
}

#[test]
fn corrupt_truncated_foreign_and_missing_reports_are_named() {
    let good = valid_report();
    let cases = [
        ("corrupt.json", "{\"schema_version\": 1, nope}", "not JSON"),
        (
            "truncated.json",
            "{\"schema_version\": 1, \"tool\": {\"name\": \"iommutop\"",
            "truncated",
        ),
        (
            "foreign.json",
            "{\"name\": \"fio\", \"jobs\": []}",
            "not an iommutop report",
        ),
        (
            "future.json",
            "{\"schema_version\": 9, \"tool\": {\"name\": \"iommutop\", \"version\": \"9\"}}",
            "unsupported schema_version 9 (this build reads 1)",
        ),
        ("empty.json", "", "truncated at line 1"),
        ("array.json", "[1, 2]", "not an iommutop report: the top level is an array"),
        (
            "other-tool.json",
            "{\"schema_version\": 1, \"tool\": {\"name\": \"bpftop\"}}",
            "not an iommutop report: tool.name is \"bpftop\"",
        ),
        (
            "text-version.json",
            "{\"schema_version\": \"one\"}",
            "schema_version is \"one\", not a whole number",
        ),
        (
            "unversioned.json",
            "{\"tool\": {\"name\": \"iommutop\"}}",
            "it has no schema_version field",
        ),
        (
            "wrong-field.json",
            "{\"schema_version\": 1, \"tool\": {\"name\": \"iommutop\", \"version\": \"0.1\"}, \"host\": 5}",
            "invalid iommutop report: host: invalid type: integer `5`",
        ),
    ];
    for (name, text, needle) in cases {
        let bad = write(name, text);
        let output = compare(&good, &bad, &[]);
        assert_one_line_error(&output, 2, &[name, needle]);
    }
    let missing = dir().join("missing.json");
    assert_one_line_error(
        &compare(&missing, &good, &[]),
        2,
        &["missing.json", "cannot read"],
    );
}

#[test]
fn a_bad_threshold_is_a_usage_error() {
    let good = valid_report();
    for (expression, needle) in [
        ("workload.x", "is not PATH OP VALUE"),
        ("run.duration_s > 1", "unknown path"),
        ("device[eth0].speed > 1", "unknown device field `speed`"),
        ("host.kernel_release < 6", "is text: only == and != apply"),
        // Well formed, but the reports lack it.
        (
            "workload.transactions_per_s < -2%",
            "workload result `transactions_per_s` not found in B",
        ),
        (
            "device[eth0].cpu_share > 0.1",
            "device `eth0` not found in B",
        ),
    ] {
        let output = compare(&good, &good, &["--fail-if", expression]);
        assert_one_line_error(&output, 2, &["--fail-if", expression, needle]);
    }
}

/// `--fail-if` on a latency the tier could not time said "not found in B" instead of why.
#[test]
fn a_latency_threshold_on_a_counting_tier_says_the_tier_cannot_time() {
    let mut report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(valid_report()).expect("fixture"))
            .expect("JSON");
    for probe in report["probes"].as_array_mut().expect("probes") {
        if probe["point"] == "dma_map" {
            probe["tier"] = "tracepoint".into();
            probe["latency"] = false.into();
        }
    }
    report["devices"][0]["ops"]["dma_map"]["latency"] = serde_json::Value::Null;
    let counted = write("dma-map-counted.json", &report.to_string());
    let expression = "device[nvme0n1].dma_map.p99_ns > 1000";
    let output = compare(&counted, &counted, &["--fail-if", expression]);
    assert_one_line_error(
        &output,
        2,
        &[
            expression,
            "B counts dma_map but has no timing for it",
            "got the tracepoint tier, which counts calls but cannot time them",
        ],
    );
}

#[test]
fn a_threshold_is_checked_before_the_reports_are_read() {
    let missing = dir().join("never-read.json");
    let output = compare(&missing, &missing, &["--fail-if", "nonsense"]);
    assert_one_line_error(&output, 2, &["--fail-if `nonsense` is not PATH OP VALUE"]);
}

#[test]
fn a_crossed_threshold_exits_4_and_an_uncrossed_one_0() {
    let good = valid_report();
    let crossed = compare(
        &good,
        &good,
        &["--fail-if", "workload.completions_per_s >= 0"],
    );
    assert_one_line_error(
        &crossed,
        4,
        &["threshold crossed: workload.completions_per_s >= 0"],
    );
    let fine = compare(
        &good,
        &good,
        &[
            "--fail-if",
            "workload.completions_per_s < -2%",
            "--fail-if",
            "host.iommu.present == no",
        ],
    );
    assert_eq!(
        fine.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&fine.stderr)
    );
    let stdout = String::from_utf8_lossy(&fine.stdout);
    assert!(
        stdout.contains(
            "thresholds:\n  threshold held: workload.completions_per_s < -2% (observed +0.00%"
        ),
        "{stdout}"
    );
}

/// A report the lab wrote: TCP_RR between the two e1000e under `diagnose` (see
/// `lab/diagnose.rs`), on 6.12 with `iommu.passthrough=1`, on 6.12 translated, on 6.1 translated.
fn lab_report(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/tcp-rr-{name}.json"))
}

fn stdout_of(output: &std::process::Output) -> String {
    support::assert_success(output);
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn lab_reports_passthrough_against_translated_name_the_nics_and_the_command_line() {
    let (a, b) = (lab_report("pt-6.12"), lab_report("intel-6.12"));
    let json = dir().join("pt-vs-intel.json");
    let text = stdout_of(&compare(&a, &b, &["--json", &json.to_string_lossy()]));
    assert!(
        text.contains(
            "\n1. [100% of the translation-time gap] IOMMU translation on the NICs 0000:00:05.0 \
             (eth0, e1000e) and 0000:00:06.0 (eth1, e1000e) is the difference: B translates their \
             DMA, A does not.\n     cause: command line iommu.passthrough: 1 in A, (not set) in B"
        ),
        "{text}"
    );
    assert!(
        text.contains("0000:00:05.0 (eth0, e1000e) per transaction, A → B: DMA maps 3.01 → 3.01, IOMMU page-table maps 0.00 → 3.01, IOTLB syncs 0.00 → 3.01"),
        "{text}"
    );
    assert!(text.starts_with("A: "), "{text}");
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written")).expect("json");
    assert_eq!(value["comparison"]["findings"][1]["kind"], "translation");
    assert_eq!(value["comparison"]["unit"], "transaction");
    assert_eq!(value["comparison"]["devices"][0]["transition"], "only_b");
}

#[test]
fn lab_reports_of_two_kernels_with_the_same_translation_claim_no_cause() {
    let (a, b) = (lab_report("intel-6.1"), lab_report("intel-6.12"));
    let text = stdout_of(&compare(&a, &b, &[]));
    assert!(
        text.contains("kernel: 6.1.0-56-amd64 → 6.12.95+deb12-amd64"),
        "{text}"
    );
    assert!(
        text.contains("\n1. translation is the same in both runs"),
        "{text}"
    );
    assert!(!text.contains("cause:"), "{text}");
    assert!(!text.contains("of the translation-time gap"), "{text}");
}

#[test]
fn thresholds_on_lab_reports_gate_ci() {
    let (a, b) = (lab_report("pt-6.12"), lab_report("intel-6.12"));
    let output = compare(
        &a,
        &b,
        &[
            "--fail-if",
            "device[eth0].per_unit.iommu_maps > 1",
            "--fail-if",
            "host.cmdline.iommu.passthrough == 1",
        ],
    );
    assert_one_line_error(
        &output,
        4,
        &["threshold crossed: device[eth0].per_unit.iommu_maps > 1 (observed 3.01)"],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("threshold held: host.cmdline.iommu.passthrough == 1 (observed (not set))"),
        "{stdout}"
    );
}

#[test]
fn json_dash_is_standard_output_with_the_text_on_stderr() {
    let output = compare(
        &lab_report("pt-6.12"),
        &lab_report("intel-6.12"),
        &["--json", "-"],
    );
    let stdout = stdout_of(&output);
    let value: serde_json::Value = serde_json::from_str(&stdout).expect("stdout is the JSON alone");
    assert!(value["comparison"]["findings"].is_array(), "{value}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("IOMMU translation on"),
        "the text goes to stderr"
    );
    assert!(!dir().join("-").exists(), "no file named `-`");
}

#[test]
fn json_gives_findings_and_thresholds_their_numbers() {
    let output = compare(
        &lab_report("pt-6.12"),
        &lab_report("intel-6.12"),
        &[
            "--json",
            "-",
            "--fail-if",
            "workload.transactions_per_s < -50%",
        ],
    );
    let value: serde_json::Value =
        serde_json::from_str(&stdout_of(&output)).expect("stdout is the JSON alone");
    let headline = &value["comparison"]["findings"][0];
    assert_eq!(headline["quantity"], "transactions_per_s", "{headline}");
    for field in ["a", "b", "delta_pct", "noise_pct"] {
        assert!(headline[field].is_f64(), "{field}: {headline}");
    }
    assert!(headline["beyond_noise"].is_boolean(), "{headline}");
    let threshold = &value["thresholds"][0];
    assert!(
        threshold["observed"].is_string(),
        "the text stays: {threshold}"
    );
    let (a, b) = (
        threshold["a"].as_f64().expect("a"),
        threshold["b"].as_f64().expect("b"),
    );
    let delta = threshold["delta_pct"].as_f64().expect("delta_pct");
    assert!(((b - a) / a * 100.0 - delta).abs() < 1e-9, "{threshold}");
    assert!(threshold["noise_pct"].is_f64(), "{threshold}");
    assert!(threshold["beyond_noise"].is_boolean(), "{threshold}");
}

#[test]
fn markdown_is_a_table_of_the_findings_for_a_pull_request() {
    let output = compare(
        &lab_report("pt-6.12"),
        &lab_report("intel-6.12"),
        &["--format", "markdown"],
    );
    let text = stdout_of(&output);
    assert!(text.starts_with("### iommutop compare\n"), "{text}");
    assert!(
        text.contains(
            "\n| # | finding | share of gap | measured | unit | A | B | change | noise | beyond \
             noise |\n"
        ),
        "{text}"
    );
    // Every finding's A and B carry the unit `--json` gives it.
    let json = dir().join("markdown-units.json");
    compare(
        &lab_report("pt-6.12"),
        &lab_report("intel-6.12"),
        &["--json", &json.to_string_lossy()],
    );
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written")).expect("json");
    let findings = value["comparison"]["findings"]
        .as_array()
        .expect("findings");
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("| # | finding"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect();
    assert_eq!(rows.len(), findings.len(), "{text}");
    for (row, finding) in rows.iter().zip(findings) {
        let unit = finding["unit"].as_str().expect("a unit");
        assert!(!unit.is_empty(), "{finding}");
        assert_eq!(row.split(" | ").nth(4), Some(unit), "{row}");
    }
    assert!(
        text.contains("| 1 | IOMMU translation on the NICs 0000:00:05.0 (eth0, e1000e)"),
        "{text}"
    );
    assert!(!text.contains("\nA: "), "no plain text: {text}");
    let bad = compare(
        &lab_report("pt-6.12"),
        &lab_report("intel-6.12"),
        &["--format", "pdf"],
    );
    assert_eq!(bad.status.code(), Some(2));
    // html is one of the formats every command that prints a result takes: the page, to stdout.
    let page = compare(
        &lab_report("pt-6.12"),
        &lab_report("intel-6.12"),
        &["--format", "html"],
    );
    assert!(String::from_utf8_lossy(&page.stdout).starts_with("<!DOCTYPE html>"));
}

/// A lab report as `run --runs N` would have written it: one entry per rate in `rates`, each
/// run's TCP_RR rate and its NICs' DMA maps and translation time scaled to it.
fn with_repeats(name: &str, out: &str, rates: &[f64]) -> PathBuf {
    let mut report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(lab_report(name)).expect("fixture"))
            .expect("JSON");
    let runs: Vec<serde_json::Value> = rates
        .iter()
        .enumerate()
        .map(|(i, rate)| {
            let transactions = rate * 5.0;
            let nic = serde_json::json!({
                "dma_maps": (transactions * 3.0) as u64,
                "completions": transactions as u64,
                "translation_ns": (transactions * 170_000.0) as u64,
            });
            serde_json::json!({
                "t_s": i as f64 * 6.0,
                "duration_s": 6.0,
                "workload": {"transactions_per_s": rate, "transactions": transactions},
                "work_count": transactions,
                "devices": {"0000:00:05.0": nic, "0000:00:06.0": nic},
            })
        })
        .collect();
    report["repeats"] = serde_json::json!({
        "warmup": 1,
        "runs": runs,
        "summary": {"workload": {}, "devices": {}},
    });
    support::assert_valid_report(&report);
    write(out, &report.to_string())
}

/// With two or more runs in both reports, the noise is their spread, and every output says so.
#[test]
fn reports_of_repeated_runs_are_judged_against_the_spread_of_their_runs() {
    let a = with_repeats("intel-6.1", "repeats-a.json", &[570.0, 580.0, 590.0]);
    let b = with_repeats("intel-6.12", "repeats-b.json", &[625.0, 630.0, 635.0]);
    let output = compare(&a, &b, &["--json", "-"]);
    let value: serde_json::Value = serde_json::from_str(&stdout_of(&output)).expect("JSON");
    let noise = &value["comparison"]["noise"];
    assert_eq!(
        noise,
        &serde_json::json!({"source": "repeats", "runs_a": 3, "runs_b": 3})
    );
    let headline = &value["comparison"]["findings"][0];
    assert_eq!(headline["quantity"], "transactions_per_s", "{headline}");
    assert_eq!(headline["noise_source"], "repeats", "{headline}");
    // Runs 580 ± 10 and 630 ± 5: Welch's t (df 2) gives ±4.7%, and +8.2% is beyond it.
    let band = headline["noise_pct"].as_f64().expect("noise");
    assert!((band - 4.72).abs() < 0.05, "{headline}");
    assert_eq!(headline["beyond_noise"], true, "{headline}");
    let text = String::from_utf8_lossy(&output.stderr);
    assert!(
        text.contains("noise: measured across repeated runs (3 in A, 3 in B; Welch's t at 95%)."),
        "{text}"
    );
    assert!(text.contains("; workload netperf; 3 runs; "), "{text}");
    assert!(
        text.contains("beyond run-to-run noise (±4.7%, from 3 and 3 runs)"),
        "{text}"
    );
    let output = compare(&a, &b, &["--format", "markdown"]);
    let markdown = stdout_of(&output);
    assert!(
        markdown.contains("\nNoise: measured across repeated runs (3 in A, 3 in B"),
        "{markdown}"
    );
}

/// One report of a single run: the repeats of the other cannot be matched, so the interval
/// samples measure the noise, and the text says why.
#[test]
fn repeats_in_one_report_only_fall_back_to_interval_noise() {
    let a = with_repeats("intel-6.1", "repeats-only-a.json", &[570.0, 580.0, 590.0]);
    let b = lab_report("intel-6.12");
    let output = compare(&a, &b, &["--json", "-"]);
    let value: serde_json::Value = serde_json::from_str(&stdout_of(&output)).expect("JSON");
    assert_eq!(value["comparison"]["noise"]["source"], "intervals");
    let headline = &value["comparison"]["findings"][0];
    assert_eq!(headline["noise_source"], "intervals", "{headline}");
    let text = String::from_utf8_lossy(&output.stderr);
    assert!(
        text.contains(
            "noise: estimated from each run's interval samples (repeats need two or more runs \
             in both reports: 3 in A, 1 in B)."
        ),
        "{text}"
    );
    assert!(text.contains("steady interval samples"), "{text}");
}

/// In the lab, TCP_RR's seconds differ by tens of percent: passthrough against translated is
/// 11% fewer transactions, within the noise, so only the plain threshold fails.
#[test]
fn a_beyond_noise_threshold_holds_for_a_drop_within_the_runs_noise() {
    let (a, b) = (lab_report("pt-6.12"), lab_report("intel-6.12"));
    let judged = compare(
        &a,
        &b,
        &[
            "--fail-if",
            "workload.transactions_per_s < -5% beyond-noise",
        ],
    );
    let text = stdout_of(&judged);
    assert!(
        text.contains(
            "threshold held: workload.transactions_per_s < -5% beyond-noise (observed -11.09%"
        ) && text.contains("within the noise (±"),
        "{text}"
    );
    let plain = compare(&a, &b, &["--fail-if", "workload.transactions_per_s < -5%"]);
    assert_one_line_error(
        &plain,
        4,
        &["threshold crossed: workload.transactions_per_s < -5%"],
    );
}

/// Waiting inside translation: the 6.12-rt AMD-Vi lab report (`load-6.12-rt-amd-waiting.json`, the
/// load cell: fio QD32x4 on the NVMe, TCP_RR on both NICs) has the NVMe's DMA calls switched out
/// for 7,056,693,138 + 478,004,475 of their 9,814,601,373 + 2,048,873,153 ns: 63.5%. Against a
/// report written before waiting was measured (the 6.12 preempt=full load cell as examples/ had
/// it before `scripts/examples` made it again), compare names it in one line with both runs.
#[test]
fn waiting_inside_translation_on_an_rt_kernel_is_a_finding() {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let (a, b) = (
        fixtures.join("load-6.12-intel-preempt_full-before-waiting.json"),
        fixtures.join("load-6.12-rt-amd-waiting.json"),
    );
    let json = dir().join("rt-waiting.json");
    let text = stdout_of(&compare(&a, &b, &["--json", &json.to_string_lossy()]));
    let line = text
        .lines()
        .find(|l| l.contains("waiting inside translation on 0000:00:04.0"))
        .unwrap_or_else(|| panic!("no waiting finding in:\n{text}"));
    assert!(
        line.contains(
            "of its DMA map+unmap time (per completed I/O), A did not measure it, B spent 63.5% \
             (248us) switched out;"
        ),
        "{line}"
    );
    assert!(
        text.contains("    switched out (waiting) - → 63.5% (248us)\n"),
        "{text}"
    );
    assert!(
        !text.contains("waiting inside translation on the NIC"),
        "the NICs waited under 5%: {text}"
    );
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written")).expect("json");
    let comparison = &value["comparison"];
    let finding = comparison["findings"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["kind"] == "waiting"))
        .expect("a waiting finding");
    assert!(finding["a"].is_null(), "{finding}");
    let b_share = finding["b"].as_f64().expect("B's share");
    assert!((b_share - 63.512).abs() < 1e-3, "{finding}");
    let nvme = comparison["devices"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["key"] == "0000:00:04.0"))
        .expect("the NVMe");
    assert_eq!(nvme["b"]["dma_waited_calls"], 3_264, "{nvme}");
    assert!(nvme["a"]["dma_waited_calls"].is_null(), "{nvme}");
}
