//! `--html FILE`: a report (`report`) or a comparison (`compare`) as one self-contained page,
//! from the real lab reports in `examples/`; and that page as a browser shows it (headless
//! Chromium), with no network.

mod support;

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;
use support::{assert_one_line_error, assert_success, project_root};

fn example(name: &str) -> PathBuf {
    project_root().join("examples").join(name)
}

const NEWEST: &str = "load-7.3-intel.json";
const OLDEST: &str = "load-5.10-intel.json";

fn iommutop() -> Command {
    Command::cargo_bin("iommutop").expect("built")
}

/// A fresh directory under target/html-report/, kept after the test as its artifacts.
fn artifact_dir(name: &str) -> PathBuf {
    let dir = project_root().join("target/html-report").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create artifact dir");
    dir.canonicalize().expect("canonical artifact dir")
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("readable")).expect("JSON")
}

/// The rows a page has a section for: those with anything counted.
fn shown_rows(report: &Value) -> Vec<&Value> {
    report["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .filter(|d| {
            d["completions"].as_u64().unwrap_or(0) > 0
                || d["ops"]
                    .as_object()
                    .is_some_and(|ops| ops.values().any(|s| s["count"].as_u64().unwrap_or(0) > 0))
        })
        .collect()
}

/// Every row of `report` is in `page` with its names and its `dma_map` count as the JSON has it.
fn assert_rows_in(page: &str, report: &Value) {
    for d in shown_rows(report) {
        let key = d["key"].as_str().expect("key");
        let row = format!("<tr data-device=\"{key}\">");
        let start = page
            .find(&row)
            .unwrap_or_else(|| panic!("no overview row for {key}"));
        let end = start + page[start..].find("</tr>").expect("row closed");
        let count = d["ops"]["dma_map"]["count"].as_u64().expect("count");
        let cell = format!("data-field=\"dma_map\">{count}</td>");
        assert!(page[start..end].contains(&cell), "{key}: no `{cell}`");
        for name in d["names"].as_array().expect("names") {
            let name = name.as_str().expect("name");
            assert!(page[start..end].contains(name), "{key}: no name {name}");
        }
    }
}

fn write_report_page(dir: &Path, report: &str) -> PathBuf {
    let page = dir.join(report.replace(".json", ".html"));
    let output = iommutop()
        .arg("report")
        .arg(example(report))
        .arg("--html")
        .arg(&page)
        .output()
        .expect("runs");
    assert_success(&output);
    page
}

#[test]
fn report_html_writes_one_page_with_every_device_and_its_charts() {
    let dir = artifact_dir("report");
    for name in [OLDEST, "load-6.12-intel-preempt_full.json", NEWEST] {
        let page = std::fs::read_to_string(write_report_page(&dir, name)).expect("page");
        assert!(page.starts_with("<!DOCTYPE html>"), "{name}");
        assert!(page.trim_end().ends_with("</html>"), "{name}");
        let report = read_json(&example(name));
        assert_rows_in(&page, &report);
        assert!(page.contains("<figure data-op=\"dma_map\"><svg"), "{name}");
        assert!(page.contains("class=\"timebar\""), "{name}");
        assert!(
            page.contains("<table class=\"paths\">"),
            "{name}: no call paths"
        );
    }
}

#[test]
fn compare_html_writes_the_findings_and_a_and_b_on_the_same_charts() {
    let dir = artifact_dir("compare");
    let page = dir.join("5.10-vs-7.3.html");
    let output = iommutop()
        .arg("compare")
        .arg(example(OLDEST))
        .arg(example(NEWEST))
        .arg("--html")
        .arg(&page)
        .output()
        .expect("runs");
    assert_success(&output);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("1. "), "no findings printed: {text}");
    let page = std::fs::read_to_string(page).expect("page");
    assert!(page.contains("<h2>Findings</h2>"));
    assert!(page.contains("load-5.10-intel.json") && page.contains("load-7.3-intel.json"));
    for key in ["0000:00:04.0", "0000:00:05.0", "0000:00:06.0"] {
        assert!(page.contains(&format!("data-device=\"{key}\"")), "{key}");
    }
    // The same op of A and B on one chart: A's colour and B's in the same figure.
    let start = page
        .find("<figure data-op=\"dma_map\">")
        .expect("a dma_map chart");
    let chart = &page[start..start + page[start..].find("</figure>").expect("closed")];
    assert!(chart.contains("#1F77B4") && chart.contains("#E66A00"));
}

#[test]
fn html_of_a_missing_report_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = dir.path().join("out.html");
    let output = iommutop()
        .args(["report", "/nonexistent/r.json", "--html"])
        .arg(&page)
        .output()
        .expect("runs");
    assert_one_line_error(&output, 2, &["/nonexistent/r.json"]);
    let output = iommutop()
        .arg("compare")
        .arg(example(NEWEST))
        .arg("/nonexistent/b.json")
        .arg("--html")
        .arg(&page)
        .output()
        .expect("runs");
    assert_one_line_error(&output, 2, &["/nonexistent/b.json"]);
    assert!(
        !page.exists(),
        "a page was written for a report that could not be read"
    );
}

/// Headless Chromium, fresh profile, every host name unresolvable: a page that needs the
/// network shows less than its numbers.
fn chromium(args: &[&str], page: &Path) -> Output {
    let profile = tempfile::tempdir().expect("profile dir");
    let found = std::process::Command::new("chromium")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "chromium is not installed: the HTML report's browser test needs it \
         (`sudo scripts/install-deps` installs it)"
    );
    let output = std::process::Command::new("timeout")
        .args([
            "180",
            "chromium",
            "--headless=new",
            "--disable-gpu",
            "--no-sandbox",
        ])
        .args(["--no-first-run", "--disable-background-networking"])
        .arg("--enable-logging=stderr")
        .arg("--v=0")
        .arg("--host-resolver-rules=MAP * ~NOTFOUND")
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    assert!(
        output.status.success(),
        "chromium failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// What the browser parsed must not reference anything outside the page.
fn assert_nothing_external(dom: &str) {
    let lower = dom.to_lowercase();
    for needle in [
        "<script", "<link", "<img", "<iframe", "url(", "@import", " src=",
    ] {
        assert!(!lower.contains(needle), "the page as parsed has `{needle}`");
    }
    for (i, _) in lower.match_indices(" href=\"") {
        let target = &lower[i + 7..];
        assert!(
            target.starts_with('#'),
            "a link off the page: {}",
            &lower[i..i + 60]
        );
    }
}

#[test]
fn html_page_renders_in_headless_chromium_without_the_network() {
    let dir = artifact_dir("chromium");
    let page = write_report_page(&dir, NEWEST);
    let report = read_json(&example(NEWEST));
    let dom = String::from_utf8(chromium(&["--dump-dom"], &page).stdout).expect("UTF-8 DOM");
    std::fs::write(dir.join("load-7.3-intel.dom.html"), &dom).expect("keep the DOM");
    assert!(
        dom.contains("iommutop report"),
        "no page: {}",
        &dom[..dom.len().min(500)]
    );
    assert_rows_in(&dom, &report);
    assert!(dom.contains("<svg"), "the charts are not in the DOM");
    assert_nothing_external(&dom);

    let screenshot = dir.join("load-7.3-intel.png");
    chromium(
        &[
            &format!("--screenshot={}", screenshot.display()),
            "--window-size=1200,2000",
        ],
        &page,
    );
    let png = std::fs::read(&screenshot).expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    assert!(
        png.len() > 20_000,
        "a blank screenshot? {} bytes",
        png.len()
    );
    eprintln!("screenshot: {}", screenshot.display());
}

#[test]
fn compare_html_renders_in_headless_chromium() {
    let dir = artifact_dir("chromium-compare");
    let page = dir.join("5.10-vs-7.3.html");
    let output = iommutop()
        .arg("compare")
        .arg(example(OLDEST))
        .arg(example(NEWEST))
        .arg("--html")
        .arg(&page)
        .output()
        .expect("runs");
    assert_success(&output);
    let dom = String::from_utf8(chromium(&["--dump-dom"], &page).stdout).expect("UTF-8 DOM");
    assert!(dom.contains("Findings"));
    for name in ["nvme0n1", "eth0", "eth1"] {
        assert!(dom.contains(name), "{name}");
    }
    assert_nothing_external(&dom);
    chromium(
        &[
            &format!("--screenshot={}", dir.join("5.10-vs-7.3.png").display()),
            "--window-size=1200,2000",
        ],
        &page,
    );
}
