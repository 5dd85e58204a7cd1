//! Reports read and written again are the JSON the build before typed workload results wrote (a
//! restructuring changes no byte of a report): every report fixture and example, and the reports
//! the unit tests build, against golden copies in `model/tests/golden/` made by that build. A
//! report file that build wrote back unchanged has no golden copy: it is its own.

use super::fixtures;
use super::Report;
use std::path::{Path, PathBuf};

/// Set to write the golden copies instead of comparing with them.
const WRITE_GOLDEN: &str = "IOMMUTOP_WRITE_GOLDEN";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every report file the tests and docs keep: the CLI's fixtures and the examples.
fn report_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["cli/tests/fixtures", "examples"] {
        let dir = workspace().join(dir);
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("directory entry").path();
            if path.extension().is_some_and(|e| e == "json") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Each report as it is written again after reading, by golden file name, with the text read
/// (none for a report built in memory).
fn written_again() -> Vec<(String, String, Option<String>)> {
    let mut written = Vec::new();
    for path in report_files() {
        let text = std::fs::read_to_string(&path).expect("readable fixture");
        let report = Report::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let dir = path
            .parent()
            .and_then(Path::file_name)
            .expect("in a directory");
        let name = format!(
            "{}-{}",
            dir.to_string_lossy(),
            path.file_name().expect("named").to_string_lossy()
        );
        written.push((name, report.to_json().expect("encodes"), Some(text)));
    }
    for (name, report) in [
        ("built-full.json", fixtures::full_report()),
        ("built-minimal.json", fixtures::minimal_report()),
        ("built-repeated.json", fixtures::repeated_report()),
    ] {
        written.push((name.to_string(), report.to_json().expect("encodes"), None));
    }
    written
}

#[test]
fn reports_read_and_written_again_match_the_golden_copies() {
    let golden = workspace().join("model/tests/golden");
    let written = written_again();
    assert!(written.len() >= 11, "only {} reports", written.len());
    for (name, text, read) in written {
        let path = golden.join(&name);
        if std::env::var_os(WRITE_GOLDEN).is_some() {
            if read.as_ref() != Some(&text) {
                std::fs::write(&path, &text).expect("golden copy written");
            }
            continue;
        }
        let expected = match (std::fs::read_to_string(&path), read) {
            (Ok(golden), _) => golden,
            (Err(_), Some(read)) => read,
            (Err(e), None) => panic!(
                "{}: {e} (write it with {WRITE_GOLDEN}=1 on the commit before a change)",
                path.display()
            ),
        };
        assert!(text == expected, "{name} differs from {}", path.display());
    }
}
