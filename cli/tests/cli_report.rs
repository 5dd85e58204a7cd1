//! `iommutop report FILE`: a saved report shown again without probes or root — its summary and
//! verdict, the report in the current schema, its call paths as folded stacks.

mod support;

use assert_cmd::Command;
use std::path::PathBuf;
use support::{assert_one_line_error, assert_success, assert_valid_report};

fn lab_report() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tcp-rr-intel-6.12.json")
}

fn iommutop() -> Command {
    Command::cargo_bin("iommutop").expect("built")
}

#[test]
fn a_saved_report_is_shown_again_as_summary_and_verdict() {
    let output = iommutop()
        .arg("report")
        .arg(lab_report())
        .output()
        .expect("runs");
    assert_success(&output);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("DEVICE"), "no summary table: {text}");
    assert!(text.contains("0000:00:05.0"), "{text}");
    assert!(text.contains("verdict:"), "no verdict: {text}");
}

#[test]
fn a_saved_report_is_written_again_in_the_current_schema_with_its_call_paths() {
    let dir = tempfile::tempdir().expect("tempdir");
    let folded = dir.path().join("paths.folded");
    let output = iommutop()
        .arg("report")
        .arg(lab_report())
        .args(["--format", "json", "--folded"])
        .arg(&folded)
        .output()
        .expect("runs");
    assert_success(&output);
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_valid_report(&report);
    let lines = std::fs::read_to_string(&folded).expect("folded stacks");
    assert!(
        lines.lines().all(|l| l
            .rsplit_once(' ')
            .is_some_and(|(_, n)| n.parse::<u64>().is_ok())),
        "not `frame;frame COUNT` lines: {lines}"
    );
}

#[test]
fn a_missing_report_is_one_line_and_exit_2() {
    let output = iommutop()
        .args(["report", "/nonexistent/r.json"])
        .output()
        .expect("runs");
    assert_one_line_error(&output, 2, &["/nonexistent/r.json"]);
}

/// A report with a wrong field is refused in one line that names the field by its path, the
/// same from `report` and `compare`.
#[test]
fn a_wrong_field_is_named_by_its_path_in_one_line() {
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(lab_report()).expect("fixture"))
            .expect("JSON");
    value["devices"][0]["ops"]["dma_map"]["count"] = "many".into();
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, serde_json::to_string_pretty(&value).expect("JSON")).expect("write");
    let needles = [
        "bad.json: invalid iommutop report: devices[0].ops.dma_map.count: invalid type: string \"many\", expected u64 at line",
    ];
    let output = iommutop().arg("report").arg(&bad).output().expect("runs");
    assert_one_line_error(&output, 2, &needles);
    let output = iommutop()
        .arg("compare")
        .arg(lab_report())
        .arg(&bad)
        .output()
        .expect("runs");
    assert_one_line_error(&output, 2, &needles);
}

/// A report a newer iommutop wrote, with a health counter this build does not know, is refused
/// in one line that names the counter and says which version reads it: a count of what the
/// probes lost is never dropped unread.
#[test]
fn a_health_counter_this_build_does_not_know_is_named_in_one_line() {
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(lab_report()).expect("fixture"))
            .expect("JSON");
    value["health"]["counter_of_a_later_build"] = 3.into();
    let dir = tempfile::tempdir().expect("tempdir");
    let newer = dir.path().join("newer.json");
    std::fs::write(&newer, serde_json::to_string(&value).expect("JSON")).expect("write");
    let output = iommutop().arg("report").arg(&newer).output().expect("runs");
    assert_one_line_error(
        &output,
        2,
        &[
            "newer.json: invalid iommutop report: health.counter_of_a_later_build:",
            "a report a newer iommutop wrote reads with that version",
        ],
    );
}

/// A report with the calls its probes did not see whole (`losses`): read, written again as it
/// was and valid against the schema; its text shows them in a table and says, before the verdict,
/// what the counts and the latencies lack.
#[test]
fn a_report_with_losses_shows_them_and_writes_them_back() {
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(lab_report()).expect("fixture"))
            .expect("JSON");
    let losses = serde_json::json!({
        "ops": {
            "dma_map": {
                "calls": 19567, "untimed": 40, "untimed_share": 40.0 / 19567.0, "lost": 7,
                "lost_with": [], "open_at_end": 0, "understudy_entries": 3,
                "understudy_exits": 1,
                "devices": {"0000:00:05.0": {"untimed": 40, "open_at_end": 0}}
            }
        },
        "groups": [{
            "programs": ["dma__map_phys__fentry"], "ops": ["dma_map"], "skipped": 20,
            "understudy_entries": 3, "unseen_entries": 10, "unpushed": 0, "lost": 7
        }]
    });
    value["losses"] = losses.clone();
    value["self_overhead"]["programs"][0]["recursion_misses"] = 20.into();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("lossy.json");
    std::fs::write(&path, serde_json::to_string_pretty(&value).expect("JSON")).expect("write");

    let output = iommutop()
        .arg("report")
        .arg(&path)
        .args(["--format", "json"])
        .output()
        .expect("runs");
    assert_success(&output);
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_valid_report(&report);
    assert_eq!(report["losses"], losses);
    assert_eq!(
        report["self_overhead"]["programs"][0]["recursion_misses"],
        20
    );

    let output = iommutop()
        .arg("report")
        .arg(&path)
        .env("COLUMNS", "80")
        .output()
        .expect("runs");
    assert_success(&output);
    let text = String::from_utf8_lossy(&output.stdout);
    let row = text
        .lines()
        .find(|l| l.starts_with("dma_map "))
        .unwrap_or_else(|| panic!("no losses row: {text}"));
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        ["dma_map", "19567", "40", "(0.20%)", "7", "0"]
    );
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains(
            "numbers may be incomplete: calls seen by no probe program: 7 dma_map (the counts \
             are short by that many); the latencies leave out 0.20% of dma_map calls"
        ),
        "{text}"
    );
}

/// Every report in examples/ (made again by `scripts/examples`) reads back with this build: its
/// summary and verdict print, and written again in the current schema it is the file, byte for
/// byte. A change that stops an example reading, or changes its JSON, fails here, not in a lab.
#[test]
fn every_example_reads_back_as_text_and_as_the_same_json() {
    let examples = support::project_root().join("examples");
    let mut reports: Vec<PathBuf> = std::fs::read_dir(&examples)
        .expect("examples/")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    reports.sort();
    assert!(!reports.is_empty(), "no report in {}", examples.display());
    for path in reports {
        let name = path.display();
        let text = iommutop().arg("report").arg(&path).output().expect("runs");
        assert_success(&text);
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(text.contains("DEVICE"), "{name}: no summary table: {text}");
        assert!(text.contains("verdict:"), "{name}: no verdict: {text}");

        let json = iommutop()
            .arg("report")
            .arg(&path)
            .args(["--format", "json"])
            .output()
            .expect("runs");
        assert_success(&json);
        let report: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
        assert_valid_report(&report);
        let file = std::fs::read(&path).expect("readable");
        assert!(
            json.stdout == file,
            "{name}: `report --format json` does not write the file back as it is"
        );
    }
}
