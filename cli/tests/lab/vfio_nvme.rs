//! `iommutop workload vfio-nvme` in the lab (QEMU's NVMe behind the emulated Intel VT-d, Debian
//! 6.1 and 6.12): data integrity at QD1 and QD32 x 2 threads with 4 KiB and 2 MiB pages; the controller
//! back on nvme after every run, after SIGINT and SIGKILL of the worker and of the parent; and
//! the refusals. The guest side is tests/lab/vfio-nvme/*.sh; each check there prints `ok NAME` or
//! `not ok NAME: why`.
//!
//! Needs root, qemu-system-x86_64 and the lab's kernels (lab/run fetches them). Without them the
//! tests fail saying what is missing; only IOMMUTOP_SKIP_LAB=1 skips them, and says so.

use crate::support;

use crate::support::{lab_iommutop_bin, lab_out_dir, lab_run, lab_skipped, op_count, project_root};
use serde_json::Value;
use std::path::Path;

/// Boots `kernel` with the Intel IOMMU, runs `script` with iommutop, returns the `ok`/`not ok`
/// lines.
fn boot(kernel: &str, script: &str, out: &Path) -> Vec<String> {
    let script = project_root().join("cli/tests/lab/vfio-nvme").join(script);
    let started = std::time::Instant::now();
    let bin = lab_iommutop_bin();
    let script = script.to_string_lossy();
    let out_arg = out.to_string_lossy();
    let output = lab_run(
        &["--kernel", kernel, "--iommu", "intel", "--timeout", "900"],
        &["sh", &script, &bin, &out_arg],
    );
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    eprintln!(
        "{script:?} on {kernel}: {:.0} s\n{stdout}",
        started.elapsed().as_secs_f64()
    );
    assert!(
        output.status.success(),
        "guest script failed ({:?}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(
        stdout.lines().any(|l| l == "done"),
        "the guest script did not finish:\n{stdout}\n{stderr}"
    );
    stdout
        .lines()
        .filter(|l| l.starts_with("ok ") || l.starts_with("not ok "))
        .map(str::to_string)
        .collect()
}

fn assert_all_ok(lines: &[String], expected_at_least: usize) {
    let failed: Vec<&String> = lines.iter().filter(|l| l.starts_with("not ok")).collect();
    assert!(
        failed.is_empty(),
        "failed checks:\n{}",
        failed
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        lines.len() >= expected_at_least,
        "only {} checks ran: {lines:#?}",
        lines.len()
    );
}

/// The driver's result in an `iommutop workload vfio-nvme --json` file.
fn json(path: &Path) -> Value {
    let file = support::read_json(path);
    assert_eq!(file["name"], "vfio-nvme", "{}", path.display());
    file["results"].clone()
}

fn integrity(kernel: &str) {
    let out = lab_out_dir(&format!("vfio-nvme-integrity-{kernel}"));
    let lines = boot(kernel, "integrity.sh", &out);
    assert_all_ok(&lines, 60);
    for (combo, threads) in [
        ("qd1-4k", 1),
        ("qd1-2m", 1),
        ("qd32x2-4k", 2),
        ("qd32x2-2m", 2),
    ] {
        let write = json(&out.join(format!("{combo}-write.json")));
        let read = json(&out.join(format!("{combo}-read.json")));
        let blocks = 3_000 * (4096 / write["device"]["lba_size"].as_u64().expect("lba size"));
        assert_eq!(write["ios"], 3_000, "{combo}");
        assert_eq!(write["verify"]["blocks_written"], blocks, "{combo}");
        assert_eq!(read["ios"], 3_000, "{combo}");
        assert_eq!(read["verify"]["blocks_checked"], blocks, "{combo}");
        assert_eq!(read["verify"]["blocks_mismatched"], 0, "{combo}");
        assert_eq!(
            read["threads"].as_array().map(Vec::len),
            Some(threads),
            "{combo}"
        );
        assert_eq!(
            read["device"]["iommu"]["backend"], "legacy-type1v2",
            "{combo}"
        );
        let ranges = read["device"]["iommu"]["iova_ranges"]
            .as_array()
            .expect("ranges");
        let top = ranges
            .iter()
            .filter_map(|r| r["last"].as_u64())
            .max()
            .expect("a range");
        assert_eq!(
            top,
            (1 << 39) - 1,
            "the emulated VT-d has a 39-bit address width"
        );
        for map in read["setup"]["maps"].as_array().expect("maps") {
            let iova = map["iova"].as_u64().expect("iova");
            assert!(
                iova + map["bytes"].as_u64().expect("bytes") <= 1 << 39,
                "{combo}: IOVA {iova:#x} outside 39 bits"
            );
        }
        assert_eq!(read["host"]["rebind"]["restored"], true, "{combo}");
        let csv = std::fs::read_to_string(out.join(format!("{combo}-read.csv"))).expect("ccdf csv");
        assert!(csv.starts_with("thread,latency_ns,ccdf\nall,"), "{combo}");
        let p = &read["latency"];
        let ordered = ["min_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"]
            .map(|k| p[k].as_u64().expect(k));
        assert!(
            ordered.windows(2).all(|w| w[0] <= w[1]),
            "{combo}: percentiles out of order {ordered:?}"
        );
        eprintln!(
            "{kernel} {combo}: write {:.0} IOPS, read {:.0} IOPS, read p50 {} us p99 {} us, data map {} us",
            write["iops"].as_f64().unwrap_or(0.0),
            read["iops"].as_f64().unwrap_or(0.0),
            p["p50_ns"].as_u64().unwrap_or(0) / 1000,
            p["p99_ns"].as_u64().unwrap_or(0) / 1000,
            read["setup"]["maps"][1]["map_ns"].as_u64().unwrap_or(0) / 1000,
        );
    }
    assert_profile_report_has_the_setup_mappings(&out.join("profile-qd1.json"));
    let sweep = json(&out.join("sweep.json"));
    let series = sweep["series"].as_array().expect("series");
    assert_eq!(series.len(), 2);
    assert_eq!(
        series[0]["steps"].as_array().map(Vec::len),
        Some(11),
        "1, 2, 4 ... 1024 pages"
    );
    assert_eq!(
        series[1]["steps"].as_array().map(Vec::len),
        Some(5),
        "1 ... 16 pages"
    );
    let svg = std::fs::read_to_string(out.join("sweep.svg")).expect("sweep plot");
    // plotters draws each page size as one <polyline> through its steps with a <circle> on each;
    // the axes, ticks, knee dashes and legend swatches are two-point polylines.
    let lines = polyline_points(&svg);
    for steps in [11, 5] {
        assert_eq!(
            lines.iter().filter(|&&n| n == steps).count(),
            1,
            "one line through {steps} steps: {lines:?}"
        );
    }
    assert_eq!(svg.matches("<circle").count(), 11 + 5, "a dot per step");
}

/// How many points each `<polyline>` of `svg` passes through.
fn polyline_points(svg: &str) -> Vec<usize> {
    svg.split("<polyline")
        .skip(1)
        .map(|tag| {
            let points = tag.split("points=\"").nth(1).unwrap_or("");
            points[..points.find('"').unwrap_or(0)]
                .split_whitespace()
                .count()
        })
        .collect()
}

/// `iommutop run vfio-nvme-qd1`: the driver's numbers beside the probes', and the one-off VFIO
/// mappings both as the driver timed them and as the probes saw them: under the NVMe's own row
/// (VFIO maps do not pass through the DMA API; iommutop charges its driver's to the device).
fn assert_profile_report_has_the_setup_mappings(path: &Path) {
    let report = support::read_json(path);
    support::assert_valid_report(&report);
    assert_eq!(report["run"]["profile"], "vfio-nvme-qd1");
    let results = &report["run"]["workload"]["results"];
    assert!(results["iops"].as_f64().unwrap_or(0.0) > 0.0, "{results}");
    let setup_maps = results["setup_maps"].as_u64().expect("setup_maps");
    assert!(setup_maps >= 2, "queues and data mapped: {setup_maps}");
    assert!(results["setup_map_ns"].as_u64().unwrap_or(0) > 0);
    let row = |key: &str| {
        report["devices"]
            .as_array()
            .and_then(|d| d.iter().find(|d| d["key"] == key))
            .cloned()
    };
    // A row that is not there counted nothing; an op a row lacks is a wrong name, and fails.
    let count = |row: &Option<Value>, op: &str| row.as_ref().map_or(0, |r| op_count(r, op));
    let nvme = row("0000:00:04.0");
    assert!(
        count(&nvme, "iommu_map") >= setup_maps,
        "the NVMe's row has {} iommu_map calls for {setup_maps} VFIO mappings: {nvme:?}",
        count(&nvme, "iommu_map")
    );
    assert!(count(&nvme, "iommu_unmap") >= setup_maps, "{nvme:?}");
    let unattributed = row("unattributed");
    assert_eq!(
        count(&unattributed, "iommu_map"),
        0,
        "the driver's maps left unattributed: {unattributed:?}"
    );
}

fn safety(kernel: &str) {
    let out = lab_out_dir(&format!("vfio-nvme-safety-{kernel}"));
    let lines = boot(kernel, "safety.sh", &out);
    assert_all_ok(&lines, 60);
    let interrupted = json(&out.join("int-worker.json"));
    assert_eq!(interrupted["interrupted"], true);
    assert!(
        interrupted["ios"].as_u64().unwrap_or(0) > 0,
        "the worker ran I/O before it was stopped"
    );
}

#[test]
fn lab_vfio_nvme_integrity_on_6_12() {
    if !lab_skipped("integrity_on_6_12") {
        integrity("6.12");
    }
}

#[test]
#[ignore = "CI runs 6.12's for time; scripts/matrix runs this (cargo test -- --ignored)"]
fn lab_vfio_nvme_integrity_on_6_1() {
    if !lab_skipped("integrity_on_6_1") {
        integrity("6.1");
    }
}

#[test]
fn lab_vfio_nvme_restore_and_refusals_on_6_12() {
    if !lab_skipped("restore_and_refusals_on_6_12") {
        safety("6.12");
    }
}

#[test]
#[ignore = "CI runs 6.12's for time; scripts/matrix runs this (cargo test -- --ignored)"]
fn lab_vfio_nvme_restore_and_refusals_on_6_1() {
    if !lab_skipped("restore_and_refusals_on_6_1") {
        safety("6.1");
    }
}
