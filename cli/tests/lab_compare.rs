//! Issue 7 in the lab: the same TCP_RR on a boot without translation for the NICs (passthrough)
//! and on one with the Intel IOMMU translating, then on 6.1 against 6.12: `compare` names what
//! differs and claims no cause it did not measure.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::*;

fn tcp_rr_report(out: &Path, name: &str, kernel: &str, append: &str) -> PathBuf {
    let report = out.join(format!("{name}.json"));
    let script = project_root().join("cli/tests/lab/tcp-rr.sh");
    let mut args = vec!["--kernel", kernel, "--iommu", "intel"];
    if !append.is_empty() {
        args.extend(["--append", append]);
    }
    let output = lab_run(
        &args,
        &[
            "sh",
            &script.to_string_lossy(),
            &iommutop_bin(),
            &report.to_string_lossy(),
        ],
    );
    assert!(
        output.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    report
}

fn compare(a: &Path, b: &Path) -> String {
    let output = Command::new(iommutop_bin())
        .arg("compare")
        .arg(a)
        .arg(b)
        .output()
        .expect("compare runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn lab_compare_names_translation_on_the_nics_and_stays_honest_across_kernels() {
    if lab_skipped("lab compare") {
        return;
    }
    let out = lab_out_dir("compare");
    let passthrough = tcp_rr_report(&out, "pt-6.12", "6.12", "iommu.passthrough=1");
    let translated = tcp_rr_report(&out, "intel-6.12", "6.12", "");
    let text = compare(&passthrough, &translated);
    let first = text.lines().next().unwrap_or("");
    assert!(
        first.starts_with("IOMMU translation is on in B and not in A for"),
        "{text}"
    );
    for nic in ["0000:00:05.0", "0000:00:06.0"] {
        assert!(first.contains(nic), "{nic} not named: {text}");
    }
    assert!(
        first.contains("command line iommu.passthrough: 1 → (not set)"),
        "{text}"
    );
    assert!(
        text.contains("IOMMU page-table maps per I/O: 0.00 →"),
        "{text}"
    );
    assert!(text.contains("IOTLB syncs per I/O: 0.00 →"), "{text}");
    assert!(
        text.contains("noise (±") || text.contains("noise not measurable"),
        "{text}"
    );

    let old = tcp_rr_report(&out, "intel-6.1", "6.1", "");
    let text = compare(&old, &translated);
    assert!(text.contains("kernel: 6.1.0-"), "{text}");
    assert!(
        !text.contains("IOMMU translation is on in"),
        "no device changed translation: {text}"
    );
    let throughput = text
        .lines()
        .find(|l| l.starts_with("completions_per_s:"))
        .expect("completions line");
    assert!(throughput.contains("noise"), "{throughput}");
}

#[test]
fn lab_diagnose_ab_measures_identity_and_restores_the_group_even_when_interrupted() {
    if lab_skipped("lab diagnose --ab") {
        return;
    }
    let out = lab_out_dir("diagnose-ab");
    let script = project_root().join("cli/tests/lab/ab-checks.sh");
    let output = lab_run(
        &["--kernel", "6.12", "--iommu", "intel"],
        &[
            "sh",
            &script.to_string_lossy(),
            &iommutop_bin(),
            &out.to_string_lossy(),
        ],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let ab = read(&out.join("ab.txt"));
    assert_eq!(read(&out.join("ab.rc")).trim(), "0", "{ab}");
    assert!(
        ab.contains("A/B on 0000:00:05.0: A = translated (DMA-FQ), B = identity"),
        "{ab}"
    );
    assert!(
        ab.contains("IOMMU page-table maps per I/O:") && ab.contains("→ 0.00"),
        "{ab}"
    );
    assert!(ab.contains("completions_per_s:"), "both modes' rates: {ab}");
    assert_eq!(read(&out.join("type-after")).trim(), "DMA-FQ");
    assert_eq!(read(&out.join("driver-after")).trim(), "e1000e");
    let interrupted = read(&out.join("ab-int.txt"));
    assert!(
        interrupted.contains("group restored to DMA-FQ"),
        "{interrupted}"
    );
    assert_eq!(
        read(&out.join("type-after-int")).trim(),
        "DMA-FQ",
        "{interrupted}"
    );
    assert_eq!(
        read(&out.join("driver-after-int")).trim(),
        "e1000e",
        "{interrupted}"
    );
}
