//! `iommutop compare` on the host: bad input gives one line naming the file and the problem, and
//! --fail-if sets exit code 4. Needs no root: it only reads reports.

mod support;

use assert_cmd::Command;
use std::path::PathBuf;
use support::assert_one_line_error;

fn dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-compare");
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

fn write(name: &str, text: &str) -> PathBuf {
    let path = dir().join(name);
    std::fs::write(&path, text).expect("write fixture");
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

fn compare(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::cargo_bin("iommutop")
        .expect("built")
        .arg("compare")
        .args(args)
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
            "unsupported schema_version 9",
        ),
    ];
    for (name, text, needle) in cases {
        let bad = write(name, text);
        let output = compare(&[good.as_os_str(), bad.as_os_str()]);
        assert_one_line_error(&output, 2, &[name, needle]);
    }
    let missing = dir().join("missing.json");
    assert_one_line_error(
        &compare(&[missing.as_os_str(), good.as_os_str()]),
        2,
        &["missing.json", "cannot read"],
    );
}

#[test]
fn a_bad_threshold_is_a_usage_error() {
    let good = valid_report();
    let output = compare(&[
        good.as_os_str(),
        good.as_os_str(),
        "--fail-if".as_ref(),
        "workload.x".as_ref(),
    ]);
    assert_one_line_error(&output, 2, &["--fail-if", "is not PATH OP VALUE"]);
}

#[test]
fn a_crossed_threshold_exits_4_and_an_uncrossed_one_0() {
    let good = valid_report();
    let crossed = compare(&[
        good.as_os_str(),
        good.as_os_str(),
        "--fail-if".as_ref(),
        "workload.completions_per_s >= 0".as_ref(),
    ]);
    assert_one_line_error(
        &crossed,
        4,
        &["threshold crossed: workload.completions_per_s >= 0"],
    );
    let fine = compare(&[
        good.as_os_str(),
        good.as_os_str(),
        "--fail-if".as_ref(),
        "workload.completions_per_s < -2%".as_ref(),
    ]);
    assert_eq!(
        fine.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&fine.stderr)
    );
}
