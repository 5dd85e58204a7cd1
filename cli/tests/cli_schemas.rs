//! One output contract: what `compare --json` and `profiles --json` print is valid against its
//! schema in docs/, and each schema refuses output that lacks what it requires (else a schema
//! accepting anything would pass). Needs no root; `probes --json` and the `--json -` stream are
//! checked on real output in host_probes.rs.

mod support;

use assert_cmd::Command;
use serde_json::Value;
use std::path::PathBuf;
use support::{assert_success, assert_valid, schema_violations};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/{name}.json"))
}

fn iommutop() -> Command {
    Command::cargo_bin("iommutop").expect("built")
}

/// What `compare A B --json - FLAGS...` writes to stdout, after checking it exited as `code`.
fn compare_json(a: &str, b: &str, flags: &[&str], code: i32) -> Value {
    let output = iommutop()
        .arg("compare")
        .arg(fixture(a))
        .arg(fixture(b))
        .args(["--json", "-"])
        .args(flags)
        .output()
        .expect("runs");
    assert_eq!(
        output.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("compare --json - prints JSON")
}

/// `value` with the field at `path` (object keys and array indices) removed.
fn without(value: &Value, path: &[&str]) -> Value {
    let mut value = value.clone();
    let (last, parents) = path.split_last().expect("a path");
    let mut node = &mut value;
    for key in parents {
        node = match key.parse::<usize>() {
            Ok(i) => &mut node[i],
            Err(_) => &mut node[*key],
        };
    }
    let removed = node.as_object_mut().and_then(|o| o.remove(*last));
    assert!(removed.is_some(), "no {path:?} to remove in the output");
    value
}

/// Fails unless docs/SCHEMA refuses `value`, saying that it accepted what it should not.
#[track_caller]
fn assert_refused(schema: &str, value: &Value, what: &str) {
    assert!(
        !schema_violations(schema, value).is_empty(),
        "docs/{schema} accepts output {what}"
    );
}

#[test]
fn compare_json_is_valid_against_its_schema_and_the_schema_refuses_what_lacks_a_field() {
    // Translation gained (passthrough against DMA-FQ), and a kernel upgrade with a threshold.
    let gained = compare_json("tcp-rr-pt-6.12", "tcp-rr-intel-6.12", &[], 0);
    assert_valid("compare.schema.json", &gained);
    let upgrade = compare_json(
        "tcp-rr-intel-6.1",
        "tcp-rr-intel-6.12",
        &["--fail-if", "workload.transactions_per_s < -50%"],
        0,
    );
    assert_valid("compare.schema.json", &upgrade);
    assert_eq!(upgrade["thresholds"].as_array().map(Vec::len), Some(1));
    assert_eq!(upgrade["thresholds"][0]["unit"], "transaction/s");

    for path in [
        &["comparison"][..],
        &["comparison", "findings", "0", "unit"],
        &["comparison", "findings", "0", "figures"],
        &["comparison", "devices", "0", "transition"],
        &["thresholds", "0", "change"],
        &["thresholds", "0", "unit"],
    ] {
        assert_refused(
            "compare.schema.json",
            &without(&upgrade, path),
            &format!("without {path:?}"),
        );
    }
    let mut extra = gained.clone();
    extra["comparison"]["findings"][0]["surprise"] = Value::Bool(true);
    assert_refused(
        "compare.schema.json",
        &extra,
        "with a field it does not describe",
    );
}

/// The numbers of a finding were only in its sentences: each figure now carries A, B, their
/// change and its unit, and those agree with the devices' own figures.
#[test]
fn compare_json_findings_carry_their_figures_as_numbers() {
    let json = compare_json("tcp-rr-pt-6.12", "tcp-rr-intel-6.12", &[], 0);
    let comparison = &json["comparison"];
    let findings = comparison["findings"].as_array().expect("findings");
    let translation = findings
        .iter()
        .find(|f| f["kind"] == "translation")
        .expect("passthrough against DMA-FQ is a translation finding");
    let unit = comparison["unit"].as_str().expect("unit");
    assert_eq!(translation["unit"], format!("ns per {unit}"));
    let (a, b) = (&translation["a"], &translation["b"]);
    let change = translation["change"].as_f64().expect("a change");
    let expected = b.as_f64().expect("b") - a.as_f64().expect("a");
    assert!((change - expected).abs() < 1e-6, "{translation}");

    let figures = translation["figures"].as_array().expect("figures");
    assert!(!figures.is_empty(), "{translation}");
    for figure in figures {
        let key = figure["device"].as_str().expect("a device's figure");
        let device = comparison["devices"]
            .as_array()
            .and_then(|d| d.iter().find(|d| d["key"] == key))
            .unwrap_or_else(|| panic!("figure of {key}, a device the comparison lacks"));
        let field = match figure["what"].as_str().expect("what") {
            "DMA maps" => "dma_maps",
            "IOMMU page-table maps" => "iommu_maps",
            "IOTLB syncs" => "iotlb_syncs",
            "IOTLB invalidations" => "iotlb_flushes",
            "IOMMU work" => "iommu_ns",
            "time in DMA map+unmap" => "dma_ns",
            other => panic!("a figure no device field holds: {other}"),
        };
        assert_eq!(figure["a"], device["a"][field], "{figure}");
        assert_eq!(figure["b"], device["b"][field], "{figure}");
        if let (Some(a), Some(b)) = (figure["a"].as_f64(), figure["b"].as_f64()) {
            let change = figure["change"].as_f64().expect("change");
            assert!((change - (b - a)).abs() < 1e-9, "{figure}");
        }
    }
    // The details still say it in sentences.
    let details = translation["details"].to_string();
    assert!(details.contains("IOTLB syncs"), "{details}");
}

#[test]
fn profiles_json_is_valid_against_its_schema_with_an_invalid_profile_listed_too() {
    let output = iommutop()
        .args(["profiles", "--json"])
        .output()
        .expect("runs");
    assert_success(&output);
    let listed: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_valid("profiles.schema.json", &listed);
    let built_in = std::fs::read_dir(support::project_root().join("profiles"))
        .expect("profiles/")
        .count();
    assert_eq!(listed.as_array().map(Vec::len), Some(built_in));

    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("broken.toml"), "description = 3\n").expect("write");
    let output = iommutop()
        .args(["profiles", "--format", "json"])
        .env("IOMMUTOP_PROFILES", dir.path())
        .output()
        .expect("runs");
    assert_eq!(
        output.status.code(),
        Some(2),
        "an invalid profile is bad input"
    );
    let listed: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_valid("profiles.schema.json", &listed);
    let broken = listed
        .as_array()
        .and_then(|l| l.iter().position(|p| p["name"] == "broken"))
        .expect("the broken profile is listed");
    assert!(listed[broken]["error"].is_string(), "{}", listed[broken]);

    let valid = (broken + 1).to_string();
    assert_refused(
        "profiles.schema.json",
        &without(&listed, &[&valid, "workload"]),
        "of a profile without its workload",
    );
    assert_refused(
        "profiles.schema.json",
        &without(&listed, &[&broken.to_string(), "error"]),
        "of an invalid profile without its error",
    );
}

fn example(name: &str) -> iommutop_model::Report {
    let path = support::project_root().join(format!("examples/{name}.json"));
    iommutop_model::Report::from_json(&std::fs::read_to_string(path).expect("readable"))
        .expect("a report")
}

/// Facts as sysinfo reads them on the lab's Intel machine, with an SR-IOV NIC and its VF.
fn lab_facts() -> iommutop_model::HostFacts {
    serde_json::from_value(serde_json::json!({
        "kernel_release": "7.3.4+deb13-amd64",
        "cmdline": "console=ttyS0 intel_iommu=on iommutop.lab=1",
        "kernel_config": {"INTEL_IOMMU": "y", "IOMMU_DEFAULT_DMA_LAZY": "y"},
        "iommu_units": [{"name": "dmar0", "vendor": "intel"}],
        "groups": [{"id": 3, "domain_type": "DMA-FQ", "devices": ["0000:00:04.0"]}],
        "devices": [{
            "pci_address": "0000:00:04.0", "driver": "nvme", "vendor_id": 6966,
            "device_id": 16, "class": 67586, "iommu_group": 3, "domain_type": "DMA-FQ",
            "iommu_unit": "dmar0", "netdevs": [], "disks": ["nvme0n1"], "children": ["nvme0"]
        }, {
            "pci_address": "0000:00:0c.0", "driver": "igb", "vendor_id": 32902,
            "device_id": 4297, "class": 131072, "iommu_group": 5, "domain_type": "DMA-FQ",
            "iommu_unit": "dmar0", "netdevs": ["eth1"], "disks": [], "children": [],
            "sriov_numvfs": 1
        }, {
            "pci_address": "0000:00:1c.0", "driver": "igbvf", "vendor_id": 32902,
            "device_id": 4298, "class": 131072, "iommu_group": 6, "domain_type": "DMA-FQ",
            "iommu_unit": "dmar0", "netdevs": ["eth2"], "disks": [], "children": [],
            "physfn": "0000:00:0c.0"
        }],
        "lab": true
    }))
    .expect("host facts")
}

/// `diagnose --format json` needs a run under the probes (root, an IOMMU), so its JSON is made
/// here by the function the command prints it with, from real lab reports: a plain run, one
/// with `--ab` and one with `--baseline`.
#[test]
fn diagnose_json_is_valid_against_its_schema_and_the_schema_refuses_what_lacks_a_field() {
    use iommutop_model::diagnose::{ab_outcome, Diagnosis};
    let (old, new, rt) = (
        example("load-5.10-intel"),
        example("load-7.3-intel"),
        example("load-6.12-intel-preempt_full"),
    );
    let ab = ab_outcome(&new, &rt, "0000:00:04.0");
    let full = Diagnosis::of_run(
        lab_facts(),
        new.clone(),
        None,
        Some(ab),
        Some(("old.json", &old)),
    );
    let full = serde_json::to_value(&full).expect("serializes");
    assert_valid("diagnose.schema.json", &full);
    assert_eq!(full["facts"]["devices"][2]["physfn"], "0000:00:0c.0");
    assert_eq!(full["facts"]["devices"][1]["sriov_numvfs"], 1);
    assert!(full["facts"]["devices"][0].get("physfn").is_none());
    let mut numbered = full.clone();
    numbered["facts"]["devices"][1]["sriov_numvfs"] = Value::from("one");
    assert_refused(
        "diagnose.schema.json",
        &numbered,
        "with sriov_numvfs a word",
    );
    for plain in [
        Diagnosis::of_run(lab_facts(), new, Some("0000:00:04.0"), None, None),
        Diagnosis::without_iommu(iommutop_model::HostFacts::default()),
    ] {
        assert_valid(
            "diagnose.schema.json",
            &serde_json::to_value(&plain).expect("serializes"),
        );
    }
    for path in [
        &["verdict"][..],
        &["devices", "0", "work"],
        &["devices", "0", "work", "dma_ns"],
        &["ab", "identity"],
        &["baseline", "comparison", "findings"],
        &["facts", "groups", "0", "domain_type"],
        &["report", "schema_version"],
    ] {
        assert_refused(
            "diagnose.schema.json",
            &without(&full, path),
            &format!("without {path:?}"),
        );
    }
    let mut extra = full.clone();
    extra["devices"][0]["surprise"] = Value::Bool(true);
    assert_refused(
        "diagnose.schema.json",
        &extra,
        "with a field it does not describe",
    );
}

/// Where no IOMMU translates (the build machines), `diagnose --format json` runs nothing and
/// prints the diagnosis at once: checked on the binary's real output there.
#[test]
fn diagnose_json_without_an_iommu_is_valid_against_its_schema() {
    let iommus = std::fs::read_dir("/sys/class/iommu").map_or(0, |d| d.count());
    if iommus > 0 {
        eprintln!("skipped: this machine has an IOMMU, so diagnose would run a workload");
        return;
    }
    let output = iommutop()
        .args(["diagnose", "--format", "json"])
        .output()
        .expect("runs");
    assert_success(&output);
    let value: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_valid("diagnose.schema.json", &value);
    assert!(value["report"].is_null(), "{value}");
    let verdict = value["verdict"][0].as_str().expect("a verdict line");
    assert!(
        verdict.starts_with("verdict: no IOMMU translates DMA"),
        "{verdict}"
    );
}
