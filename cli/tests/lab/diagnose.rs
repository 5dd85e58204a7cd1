//! `diagnose` in the lab (4 boots): with no workload named (it picks TCP_RR between the
//! two e1000e; fio reads for `--device nvme0n1`) on a boot without translation for the NICs
//! (passthrough), on one with the Intel IOMMU translating, and on 6.1;
//! `compare` of those reports names what differs and claims no cause it did not measure;
//! `diagnose --ab` measures both modes on one NIC and restores its group, also when interrupted;
//! `record --domain identity` switches the NVMe's group for a recording and back.
//!
//! Throughput under TCG is noise (LAB.md): these tests assert attribution, counts and restored
//! state, and only that the noise verdict is stated, never a throughput delta.

use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Boots `kernel` with `append` and diagnoses TCP_RR; returns the report's path.
fn diagnose_boot(out: &Path, name: &str, kernel: &str, append: &str, extra: &[&str]) -> PathBuf {
    let script = project_root().join("cli/tests/lab/diagnose-rr.sh");
    let mut lab = vec!["--kernel", kernel, "--iommu", "intel"];
    if !append.is_empty() {
        lab.extend(["--append", append]);
    }
    let out_dir = out.to_string_lossy();
    let bin = lab_iommutop_bin();
    let mut command = vec![
        "sh",
        script.to_str().expect("utf-8 path"),
        &bin,
        &out_dir,
        name,
    ];
    command.extend(extra);
    let output = lab_run(&lab, &command);
    assert_succeeded(&output, name);
    let text = read(&out.join(format!("{name}.txt")));
    let errors = read(&out.join(format!("{name}.err")));
    assert_eq!(
        read(&out.join(format!("{name}.rc"))).trim(),
        "0",
        "{name}: {text}\n{errors}"
    );
    let report = out.join(format!("{name}.json"));
    let value = read_json(&report);
    assert_valid_report(&value);
    assert_eq!(
        value["run"]["profile"], "tcp-rr-1k",
        "{name}: two free NICs get TCP_RR"
    );
    assert_eq!(value["run"]["workload"]["name"], "netperf", "{name}");
    assert!(
        value["run"]["workload"]["results"]["transactions_per_s"]
            .as_f64()
            .is_some_and(|t| t > 0.0),
        "{name}: no transactions: {}",
        value["run"]["workload"]
    );
    report
}

fn compare(a: &Path, b: &Path, json: &Path) -> String {
    let output = Command::new(lab_iommutop_bin())
        .arg("compare")
        .arg(a)
        .arg(b)
        .arg("--json")
        .arg(json)
        .arg("--fail-if")
        .arg("workload.transactions_per_s <= 0")
        .output()
        .expect("compare runs");
    assert_success(&output);
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The findings `compare --json` wrote, by kind.
fn findings(json: &Path) -> Vec<Value> {
    read_json(json)["comparison"]["findings"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn kind_of(finding: &Value) -> &str {
    finding["kind"].as_str().unwrap_or("")
}

#[test]
fn lab_compare_names_translation_on_the_nics_and_stays_honest_across_kernels() {
    if lab_skipped("lab compare") {
        return;
    }
    let out = lab_out_dir("diagnose-compare");
    let passthrough = diagnose_boot(&out, "pt-6.12", "6.12", "iommu.passthrough=1", &[]);
    let translated = diagnose_boot(&out, "intel-6.12", "6.12", "", &[]);
    let old = diagnose_boot(&out, "intel-6.1", "6.1", "", &["record-domain"]);

    // The diagnosis of the translated boot: the NICs are translated and pay maps and syncs.
    let verdict = read(&out.join("intel-6.12.txt"));
    assert!(
        verdict.contains("the Intel IOMMU is on: `intel_iommu=on` on the command line"),
        "{verdict}"
    );
    assert!(verdict.contains("workload: netperf"), "{verdict}");
    assert!(
        verdict.contains("0000:00:05.0 (") && verdict.contains("translated, lazy"),
        "{verdict}"
    );
    assert!(verdict.contains("per transaction: "), "{verdict}");
    assert!(verdict.contains("what to try:"), "{verdict}");

    // Passthrough against translated: translation on the NICs is the difference.
    let json = out.join("pt-vs-intel.json");
    let text = compare(&passthrough, &translated, &json);
    let found = findings(&json);
    assert_eq!(kind_of(&found[0]), "workload", "{text}");
    let workload = found[0]["headline"].as_str().unwrap_or("");
    assert!(workload.starts_with("transactions_per_s: "), "{text}");
    assert!(
        workload.contains("within run-to-run noise")
            || workload.contains("beyond run-to-run noise")
            || workload.contains("noise not measurable"),
        "the noise verdict is stated: {text}"
    );
    assert_eq!(kind_of(&found[1]), "translation", "{text}");
    let headline = found[1]["headline"].as_str().unwrap_or("");
    assert!(
        headline.starts_with("IOMMU translation on the NICs 0000:00:05.0")
            && headline.contains("0000:00:06.0")
            && headline.ends_with("B translates their DMA, A does not"),
        "{text}"
    );
    let details: Vec<&str> = found[1]["details"]
        .as_array()
        .map(|d| d.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(
        details[0].starts_with("cause: command line iommu.passthrough: 1 in A, (not set) in B"),
        "{text}"
    );
    for nic in ["0000:00:05.0", "0000:00:06.0"] {
        let line = details
            .iter()
            .find(|d| d.starts_with(nic))
            .unwrap_or_else(|| panic!("{nic}: {text}"));
        assert!(line.contains(" per transaction, A → B: "), "{line}");
        // Maps and syncs per transaction: none in A, some in B (counts, not times).
        assert!(line.contains("IOMMU page-table maps 0.00 → "), "{line}");
        assert!(
            !line.contains("IOMMU page-table maps 0.00 → 0.00"),
            "{line}"
        );
        assert!(line.contains("IOTLB syncs 0.00 → "), "{line}");
        assert!(!line.contains("IOTLB syncs 0.00 → 0.00"), "{line}");
    }

    // 6.1 against 6.12, same command line: no device gained or lost translation, and nothing is
    // blamed on a throughput gap within noise.
    let json = out.join("61-vs-612.json");
    let text = compare(&old, &translated, &json);
    let found = findings(&json);
    assert!(text.contains("kernel: 6.1.0-"), "{text}");
    assert!(
        found.iter().all(|f| kind_of(f) != "translation"),
        "no device changed translation: {text}"
    );
    let workload = found[0]["headline"].as_str().unwrap_or("");
    assert!(workload.starts_with("transactions_per_s: "), "{text}");
    if workload.contains("within run-to-run noise") || workload.contains("not measurable") {
        assert!(workload.ends_with("no cause is claimed for it"), "{text}");
        assert!(found[0]["details"] == Value::Array(vec![]), "{text}");
    }
    assert!(!text.contains("cause: "), "a cause from nothing: {text}");

    // diagnose --device nvme0n1 picked fio random reads, and the NVMe did the DMA.
    assert_eq!(
        read(&out.join("nvme-pick.rc")).trim(),
        "0",
        "{}",
        read(&out.join("nvme-pick.err"))
    );
    let picked = read_json(&out.join("nvme-pick.json"));
    assert_valid_report(&picked);
    assert_eq!(picked["run"]["profile"], "fio-randread-4k-qd32x4");
    assert!(
        picked["run"]["workload"]["results"]["iops"]
            .as_f64()
            .is_some_and(|iops| iops > 0.0),
        "{}",
        picked["run"]["workload"]
    );
    let nvme = picked["devices"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["key"] == "0000:00:04.0"))
        .expect("the NVMe in the report");
    assert!(op_count(nvme, "dma_map") > 0);

    // record --domain identity on the NVMe: recorded in identity, then restored.
    assert_eq!(
        read(&out.join("domain.rc")).trim(),
        "0",
        "{}",
        read(&out.join("domain.err"))
    );
    let before = read(&out.join("domain-before"));
    assert_eq!(read(&out.join("domain-after")), before);
    assert_eq!(read(&out.join("domain-driver-after")).trim(), "nvme");
    assert_eq!(read(&out.join("domain-disk-after")).trim(), "yes");
    let report = read_json(&out.join("domain.json"));
    let nvme = report["devices"]
        .as_array()
        .and_then(|d| {
            d.iter()
                .find(|d| d["driver"] == "nvme" && d["ops"]["dma_map"]["count"].as_u64() > Some(0))
        })
        .cloned()
        .unwrap_or_default();
    assert_eq!(nvme["domain_type"], "identity", "{nvme}");
    assert_eq!(op_count(&nvme, "iommu_map"), 0, "{nvme}");
    assert!(op_count(&nvme, "dma_map") >= 300, "{nvme}");
}

#[test]
fn lab_diagnose_ab_measures_both_modes_and_restores_the_group_even_when_interrupted() {
    if lab_skipped("lab diagnose --ab") {
        return;
    }
    let out = lab_out_dir("diagnose-ab");
    let script = project_root().join("cli/tests/lab/ab-checks.sh");
    let output = lab_run(
        &["--kernel", "6.12", "--iommu", "intel"],
        &[
            "sh",
            script.to_str().expect("utf-8 path"),
            &lab_iommutop_bin(),
            out.to_str().expect("utf-8 path"),
        ],
    );
    assert_success(&output);
    let ab = read(&out.join("ab.txt"));
    let errors = read(&out.join("ab.err"));
    assert_eq!(read(&out.join("ab.rc")).trim(), "0", "{ab}\n{errors}");
    assert_eq!(read(&out.join("type-before")).trim(), "DMA-FQ");
    // Both modes' transactions per second, and the counts that tell them apart.
    let line = |prefix: &str| {
        ab.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` line: {ab}"))
            .to_string()
    };
    assert!(ab.contains("A/B on 0000:00:05.0 ("), "{ab}");
    let translated = line("  translated (DMA-FQ): ");
    let identity = line("  identity   (identity): ");
    for mode in [&translated, &identity] {
        assert!(
            mode.contains(" transactions_per_s; per transaction: "),
            "{mode}"
        );
    }
    assert!(
        !translated.contains(" 0.00 IOMMU page-table maps"),
        "{translated}"
    );
    assert!(
        identity.contains(" 0.00 IOMMU page-table maps, 0.00 IOTLB syncs"),
        "{identity}"
    );
    let difference = line("  difference: ");
    assert!(
        difference.contains("% transactions_per_s in identity, "),
        "{difference}"
    );
    assert!(difference.contains("noise"), "{difference}");
    // The measured gain is in the advice too.
    assert!(ab.contains("gain: measured: "), "{ab}");
    // Both reports written; the group and binding are back.
    assert_valid_report(&read_json(&out.join("ab.json")));
    let identity_report = read_json(&out.join("ab-identity.json"));
    assert_valid_report(&identity_report);
    assert_eq!(read(&out.join("type-after")).trim(), "DMA-FQ");
    assert_eq!(read(&out.join("driver-after")).trim(), "e1000e");
    assert!(
        errors.contains("IOMMU group ") && errors.contains("restored to DMA-FQ"),
        "{errors}"
    );

    // Interrupted (twice) while switched: restored all the same, and it says so.
    let interrupted = read(&out.join("int.err"));
    assert_ne!(read(&out.join("int.rc")).trim(), "0", "{interrupted}");
    assert!(interrupted.contains("is now identity"), "{interrupted}");
    assert!(
        interrupted.contains("restored to DMA-FQ, its devices bound to their drivers again"),
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
    assert!(
        !read(&out.join("records-after")).contains(".json"),
        "no switch record left behind"
    );
}
