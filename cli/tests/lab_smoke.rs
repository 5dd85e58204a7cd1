//! The lab itself (issue 2): what `lab/run` promises a user — exit status, clean stdout, the
//! IOMMU choices, and one-line errors for bad input.

mod support;

use std::process::Command;
use support::*;

#[test]
fn lab_without_iommu_has_no_groups_and_propagates_the_exit_status() {
    if lab_skipped("lab smoke") {
        return;
    }
    let output = lab_run(
        &["--kernel", "6.12", "--iommu", "none"],
        &[
            "sh",
            "-c",
            "ls /sys/kernel/iommu_groups | wc -l; uname -r; echo to-stderr >&2; exit 7",
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(7), "stderr: {stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        ["0", "6.12.95+deb12-amd64"],
        "stdout carries only the command's output"
    );
    assert_eq!(stderr.trim(), "to-stderr");
}

fn lab_command(args: &[&str]) -> std::process::Output {
    Command::new(project_root().join("lab/run"))
        .args(args)
        .output()
        .expect("lab/run starts")
}

fn assert_one_line(output: &std::process::Output, code: i32, needle: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains(needle), "`{stderr}` lacks `{needle}`");
}

#[test]
fn lab_bad_input_is_one_line_and_exit_2() {
    assert_one_line(
        &lab_command(&["--kernel", "5.4", "--", "true"]),
        2,
        "unknown kernel '5.4'",
    );
    assert_one_line(
        &lab_command(&["--iommu", "arm", "--", "true"]),
        2,
        "unknown iommu 'arm'",
    );
    assert_one_line(&lab_command(&["--kernel", "6.1"]), 2, "no COMMAND after --");
    assert_one_line(
        &lab_command(&["--frobnicate"]),
        2,
        "unknown argument '--frobnicate'",
    );
}

#[test]
fn lab_without_qemu_says_which_package_to_install() {
    let output = Command::new(project_root().join("lab/run"))
        .env("IOMMUTOP_QEMU", "/nonexistent/qemu-system-x86_64")
        .args(["--", "true"])
        .output()
        .expect("lab/run starts");
    assert_one_line(&output, 3, "apt-get install qemu-system-x86");
}

#[test]
fn lab_without_root_says_so() {
    let output = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(project_root().join("lab/run"))
        .args(["--", "true"])
        .output()
        .expect("setpriv runs");
    assert_one_line(&output, 3, "needs root");
}

#[test]
fn lab_kills_a_hanging_guest_at_the_timeout() {
    if lab_skipped("lab timeout") {
        return;
    }
    let output = Command::new(project_root().join("lab/run"))
        .args(["--timeout", "8", "--", "sleep", "600"])
        .output()
        .expect("lab/run starts");
    assert_one_line(&output, 124, "guest did not finish within 8 s; kernel log:");
}
