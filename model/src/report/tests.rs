use super::fixtures::{full_report, minimal_report, repeated_report};
use super::*;
use crate::sample::{Health, Op};
use serde_json::json;

fn validator() -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(schema_text()).expect("the schema is JSON");
    jsonschema::draft202012::new(&schema).expect("the schema is a valid 2020-12 schema")
}

fn violations(instance: &Value) -> Vec<String> {
    validator()
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect()
}

fn as_json(report: &Report) -> Value {
    let text = report.to_json().expect("encodes");
    serde_json::from_str(&text).expect("reads back as JSON")
}

#[test]
fn a_full_report_matches_the_schema() {
    let report = as_json(&full_report());
    assert_eq!(violations(&report), Vec::<String>::new());
    // It really is full: the optional parts are there.
    assert!(report["run"]["workload"].is_object());
    assert!(report["devices"][0]["ops"]["dma_map"]["latency"]["p99_ns"].is_u64());
    assert!(!report["probes"][1]["refused"]
        .as_array()
        .expect("array")
        .is_empty());
    assert!(!report["self_overhead"]["programs"]
        .as_array()
        .expect("array")
        .is_empty());
}

/// `run --runs N` keeps each run's numbers; the strict schema must describe them.
#[test]
fn a_report_of_repeated_runs_matches_the_schema_and_round_trips() {
    let report = repeated_report();
    let json = as_json(&report);
    assert_eq!(violations(&json), Vec::<String>::new());
    assert_eq!(json["repeats"]["warmup"], json!(1));
    assert_eq!(
        json["repeats"]["runs"][1]["workload"],
        json!({"read_iops": 2100.0})
    );
    let summary = &json["repeats"]["summary"]["workload"]["read_iops"];
    assert_eq!(summary["mean"], json!(2000.0));
    assert!(summary["stddev"]
        .as_f64()
        .is_some_and(|s| (s - 141.42).abs() < 0.01));
    assert_eq!(
        Report::from_json(&report.to_json().expect("encodes")).expect("reads"),
        report
    );
    let mut broken = json.clone();
    broken["repeats"]["runs"][0]["extra"] = json!(1);
    assert!(
        !violations(&broken).is_empty(),
        "the schema is strict inside repeats too"
    );
}

/// A VF's row names its PF in `physfn`; no other row has the field, so a report without VFs
/// is written as before.
#[test]
fn a_vfs_row_names_its_physical_function_and_no_other_row_has_the_field() {
    let report = super::fixtures::sriov_report();
    let json = as_json(&report);
    assert_eq!(violations(&json), Vec::<String>::new());
    let physfns: Vec<(&str, Option<&str>)> = json["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .map(|d| {
            (
                d["key"].as_str().unwrap_or(""),
                d.get("physfn").and_then(Value::as_str),
            )
        })
        .collect();
    let vf = |key| (key, Some("0000:00:0c.0"));
    assert_eq!(
        physfns,
        [
            ("0000:00:02.0", None),
            ("0000:00:0c.0", None),
            ("0000:00:0d.0", None),
            vf("0000:00:1c.0"),
            vf("0000:00:1c.2"),
            vf("0000:00:1c.4"),
            ("deferred", None),
        ]
    );
    assert_eq!(
        Report::from_json(&report.to_json().expect("encodes")).expect("reads"),
        report
    );
    let mut broken = json.clone();
    broken["devices"][3]["physfn"] = json!("eth0");
    assert!(!violations(&broken).is_empty(), "physfn is a PCI address");
}

#[test]
fn a_minimal_report_matches_the_schema() {
    let report = as_json(&minimal_report());
    assert_eq!(violations(&report), Vec::<String>::new());
    assert_eq!(report["devices"], json!([]));
    assert_eq!(report["host"]["iommu"]["vendor"], Value::Null);
}

#[test]
fn a_report_missing_a_required_field_fails_validation() {
    let mut report = as_json(&full_report());
    report
        .as_object_mut()
        .expect("object")
        .remove("self_overhead");
    assert!(!violations(&report).is_empty());

    let mut report = as_json(&full_report());
    report["devices"][0]["ops"]
        .as_object_mut()
        .expect("object")
        .remove("iotlb_flush");
    let found = violations(&report);
    assert!(found.iter().any(|v| v.contains("iotlb_flush")), "{found:?}");
}

/// Breaks one thing in a valid report.
type Breakage = fn(&mut Value);

#[test]
fn wrong_types_and_values_fail_validation() {
    let cases: [(&str, Breakage); 7] = [
        ("tier", |r| r["probes"][0]["tier"] = json!("uprobe")),
        ("version", |r| r["schema_version"] = json!(2)),
        ("hist", |r| {
            r["devices"][0]["ops"]["dma_map"]["latency"]["hist"] = json!([1, 2])
        }),
        ("extra", |r| r["devices"][0]["colour"] = json!("blue")),
        ("count", |r| r["devices"][0]["completions"] = json!(-1)),
        ("time", |r| r["run"]["started_at"] = json!("yesterday")),
        ("of_which", |r| {
            r["devices"][0]["derived"]["of_which"]["completion"] = json!(0.5)
        }),
    ];
    for (what, break_it) in cases {
        let mut report = as_json(&full_report());
        break_it(&mut report);
        assert!(!violations(&report).is_empty(), "{what} should be rejected");
    }
}

#[test]
fn the_schema_names_every_operation() {
    let schema: Value = serde_json::from_str(schema_text()).expect("JSON");
    let ops = &schema["$defs"]["device"]["properties"]["ops"];
    let names: Vec<&str> = Op::ALL.iter().map(|op| op.name()).collect();
    let required: Vec<&str> = ops["required"]
        .as_array()
        .expect("required list")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // Ops added after version 1 was published are listed but not required, so that reports of
    // older builds still validate.
    let properties: Vec<&str> = ops["properties"]
        .as_object()
        .expect("properties")
        .keys()
        .map(String::as_str)
        .collect();
    let mut sorted_names = names.clone();
    sorted_names.sort_unstable();
    let mut sorted_properties = properties.clone();
    sorted_properties.sort_unstable();
    assert_eq!(
        sorted_properties, sorted_names,
        "docs/report.schema.json describes every op of Op::ALL"
    );
    assert_eq!(
        required,
        names[..required.len()],
        "docs/report.schema.json requires the version-1 ops of Op::ALL, in order"
    );
    assert_eq!(required.len(), 11, "version 1 had eleven ops");
    let enumerated: Vec<&str> = schema["$defs"]["op_name"]["enum"]
        .as_array()
        .expect("enum")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(enumerated, names);
}

#[test]
fn reports_round_trip() {
    for report in [full_report(), minimal_report()] {
        let text = report.to_json().expect("encodes");
        assert!(text.ends_with("}\n"));
        assert_eq!(Report::from_json(&text).expect("reads"), report);
    }
}

#[test]
fn the_builder_computes_devices_and_overhead_over_the_whole_run() {
    let report = full_report();
    assert_eq!(report.schema_version, 1);
    assert_eq!(report.tool.name, "iommutop");
    assert_eq!(
        report.host.iommu.vendor,
        Some(crate::facts::IommuVendor::Intel)
    );
    assert_eq!(
        report.host.iommu.dma_mode,
        Some(crate::facts::DomainType::DmaFq)
    );
    assert!(report.host.lab);
    let keys: Vec<String> = report.devices.iter().map(|d| d.key.to_string()).collect();
    assert_eq!(keys, ["0000:00:02.0", "deferred"]);
    let nvme = &report.devices[0];
    assert_eq!(nvme.completions, 4_000);
    assert_eq!(nvme.names, ["nvme0n1"]);
    assert_eq!(nvme.derived.translation_ns, Some(12_000_000));
    assert_eq!(nvme.derived.translation_ns_per_io, Some(3_000.0));
    assert_eq!(nvme.derived.cpu_share, Some(0.006));
    assert_eq!(nvme.derived.of_which[&Op::IovaAlloc], 0.1);
    let overhead = &report.self_overhead;
    assert_eq!(overhead.programs[0].ns_per_event, Some(150.0));
    assert_eq!(overhead.total_ns_per_event, Some(2_800_000.0 / 24_020.0));
    assert_eq!(
        report.intervals[0].devices[&"0000:00:02.0".into()].completions_per_s,
        2_000.0
    );
}

#[test]
fn the_builder_keeps_the_health_counters_for_ci_to_gate_on() {
    let report = full_report();
    assert_eq!(report.health.get(&Health::NestingOverflow), Some(&2));
    let json = serde_json::to_value(&report).expect("JSON");
    assert_eq!(json["health"]["nesting_overflow"], 2);
}

#[test]
fn the_builder_adds_warnings_it_can_see() {
    let report = full_report();
    assert_eq!(
        report.warnings,
        [
            "kprobes unavailable: CONFIG_KPROBES is off",
            "probe iotlb_flush unavailable: no vendor IOTLB function in kallsyms",
            "latency not measured for iommu_map: attached at a tier that only counts",
            "2 calls of dma_map or dma_unmap were seen by no probe program (the kernel skipped every program that could have seen them; one group of programs serves these operations, so which of them each was, it cannot say): their counts together are short by that many (of which devices, nothing tells: neither end was seen)",
            "3 iommu_map events were seen by no probe program (the kernel skipped every program that could have seen them): the counts are short by that many (of which devices, nothing tells: neither end was seen)",
            "1 dma_unmap call of 0000:00:02.0 was still open when the recording ended (its exit was never seen): counted nowhere, so 0000:00:02.0's dma_unmap count is short by one",
            "2 calls nested deeper than the tracker follows (8): counted by their exits, not timed; their nested work was charged to the call below them",
        ]
    );
    let minimal = minimal_report();
    assert_eq!(minimal.warnings.len(), 1);
    assert!(minimal.warnings[0].starts_with("no IOMMU is active"));
}

#[test]
fn the_builder_writes_the_losses_and_each_programs_skipped_runs() {
    let json = as_json(&full_report());
    let losses = &json["losses"];
    assert_eq!(
        losses["ops"]["dma_map"],
        json!({
            "calls": 4000, "untimed": 0, "untimed_share": 0.0, "lost": 2,
            "lost_with": ["dma_unmap"], "open_at_end": 0, "understudy_entries": 6,
            "understudy_exits": 0, "devices": {}
        })
    );
    assert_eq!(
        losses["ops"]["dma_unmap"]["devices"],
        json!({"0000:00:02.0": {"untimed": null, "open_at_end": 1}}),
        "dma_unmap is not timed on this run: no untimed figure"
    );
    assert_eq!(losses["ops"]["iommu_map"]["lost"], 3);
    assert_eq!(
        losses["groups"][0],
        json!({
            "programs": ["dma__map_page__fentry", "multi__device__fentry"],
            "ops": ["dma_map", "dma_unmap"], "skipped": 12, "understudy_entries": 6,
            "unseen_entries": 4, "unpushed": 0, "lost": 2
        })
    );
    let programs = &json["self_overhead"]["programs"];
    assert_eq!(programs[0]["name"], "dma__map_page__fentry");
    assert_eq!(programs[0]["recursion_misses"], 8);
    assert_eq!(programs[1]["recursion_misses"], 0);
}

/// The kernel skipped program runs, and every call they concerned was seen at its other end or
/// by an understudy: the health counters rise, and no warning says a count may be short.
#[test]
fn a_run_that_lost_nothing_warns_of_no_loss() {
    use crate::sample::{EntryGroup, OpHealth};
    let mut last = super::fixtures::last_sample();
    last.health.clear();
    for (name, count) in [
        (Health::RecursionMisses, 15),
        (Health::ExitWithoutEntry, 4),
        (Health::AbandonedFrames, 3),
    ] {
        last.health.insert(name, count);
    }
    last.open_calls.clear();
    last.entry_groups = vec![EntryGroup {
        programs: vec!["dma__map_page__fentry".into()],
        ops: vec![Op::DmaMap],
        skipped: 12,
    }];
    last.op_health = [(
        Op::DmaMap,
        OpHealth {
            unseen_entries: 4,
            understudy_entries: 8,
            ..OpHealth::default()
        },
    )]
    .into_iter()
    .collect();
    let host = super::fixtures::host();
    let report = Report::build(ReportInputs {
        tool_version: "0.1.0",
        host: &host,
        run: minimal_report().run,
        first: &super::fixtures::first_sample(),
        last: &last,
        probes: super::fixtures::probes(),
        bpf_stats_enabled_by_iommutop: false,
        intervals: vec![],
        warnings: vec![],
    });
    assert_eq!(
        report.warnings,
        [
            "probe iotlb_flush unavailable: no vendor IOTLB function in kallsyms",
            "latency not measured for iommu_map: attached at a tier that only counts",
        ]
    );
    assert_eq!(
        report.losses.as_ref().map(|l| l.ops[&Op::DmaMap].lost),
        Some(Some(0))
    );
    assert_eq!(
        report.health[&Health::RecursionMisses],
        15,
        "kept for CI to gate on"
    );
}

#[test]
fn a_device_filter_keeps_the_losses_of_the_rows_it_keeps() {
    let mut report = full_report();
    report.apply_device_filter(&crate::device_filter::DeviceFilter {
        device: "eth0".into(),
        pci_address: "0000:00:05.0".parse().expect("address"),
    });
    let losses = report.losses.as_ref().expect("losses");
    assert!(losses.ops[&Op::DmaUnmap].devices.is_empty());
    assert_eq!(
        losses.ops[&Op::DmaUnmap].open_at_end,
        1,
        "the run's figure: a lost call has no device to filter it by, an open one stays counted"
    );
}

#[test]
fn the_schema_refuses_losses_without_their_fields() {
    let report = as_json(&full_report());
    assert_eq!(violations(&report), Vec::<String>::new());
    for (what, break_it) in [
        (
            "lost",
            (|r: &mut Value| {
                r["losses"]["ops"]["dma_map"]
                    .as_object_mut()
                    .map(|o| o.remove("lost"));
            }) as Breakage,
        ),
        ("op", |r| {
            r["losses"]["ops"]["teleport"] = r["losses"]["ops"]["dma_map"].clone()
        }),
        ("group", |r| r["losses"]["groups"][0]["lost"] = json!(-1)),
        ("share", |r| {
            r["losses"]["ops"]["dma_map"]["untimed_share"] = json!(2.0)
        }),
        ("misses", |r| {
            r["self_overhead"]["programs"][0]["recursion_misses"] = json!("many")
        }),
    ] {
        let mut broken = report.clone();
        break_it(&mut broken);
        assert!(!violations(&broken).is_empty(), "{what} should be rejected");
    }
}

fn error_of(text: &str) -> String {
    match Report::from_json(text) {
        Ok(_) => panic!("{text:?} was accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn reading_tells_what_is_wrong() {
    assert_eq!(
        error_of("{\"schema_version\": 1,, }"),
        "not JSON: key must be a string at line 1, column 22"
    );
    assert_eq!(
        error_of("{\n  \"schema_version\": 1,\n  \"tool\": {"),
        "truncated at line 3, column 11 (the JSON ends early)"
    );
    assert_eq!(
        error_of("[1, 2]"),
        "not an iommutop report: the top level is an array, not an object"
    );
    assert_eq!(
        error_of("{\"jobs\": []}"),
        "not an iommutop report: it has no schema_version field"
    );
    assert_eq!(
        error_of("{\"schema_version\": 1, \"tool\": {\"name\": \"fio\"}}"),
        "not an iommutop report: tool.name is \"fio\""
    );
    assert_eq!(
        error_of("{\"schema_version\": \"1\"}"),
        "not an iommutop report: schema_version is \"1\", not a whole number"
    );
    assert_eq!(
        error_of("{\"schema_version\": 2, \"tool\": {\"name\": \"iommutop\"}}"),
        "unsupported schema_version 2 (this build reads 1)"
    );
    assert_eq!(
        error_of("{\"schema_version\": 1}"),
        "invalid iommutop report: missing field `tool` at line 1, column 21"
    );
}

#[test]
fn a_version_1_report_from_a_newer_build_still_reads() {
    let mut report = as_json(&full_report());
    report["devices"][0]["ops"]["teleport"] = report["devices"][0]["ops"]["dma_map"].clone();
    report["devices"][0]["derived"]["of_which"]["teleport"] = json!(0.5);
    report["devices"][0]["new_field"] = json!(true);
    let text = serde_json::to_string(&report).expect("encodes");
    assert_eq!(Report::from_json(&text).expect("reads"), full_report());
}

#[test]
fn reading_a_file_names_it() {
    let dir = std::env::temp_dir().join(format!("iommutop-model-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let broken = dir.join("old.json");
    std::fs::write(&broken, "{\"schema_version\": 1").expect("write");
    let message = Report::read(&broken).expect_err("truncated").to_string();
    assert_eq!(
        message,
        format!(
            "{}: truncated at line 1, column 20 (the JSON ends early)",
            broken.display()
        )
    );
    let missing = dir.join("missing.json");
    let message = Report::read(&missing).expect_err("missing").to_string();
    assert!(
        message.starts_with(&format!("{}: cannot read: ", missing.display())),
        "{message}"
    );
    let good = dir.join("good.json");
    std::fs::write(&good, full_report().to_json().expect("encodes")).expect("write");
    assert_eq!(Report::read(&good).expect("reads"), full_report());
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// `report` could not read what `record --json -` writes: interval lines, then the report.
#[test]
fn an_ndjson_stream_reads_as_its_closing_report() {
    let report = full_report();
    let closing = json!({"type": "report", "report": as_json(&report)});
    let stream = format!(
        "{}\n{}\n{closing}\n",
        json!({"type": "interval", "t_s": 1.0, "devices": []}),
        json!({"type": "interval", "t_s": 2.0, "devices": []}),
    );
    assert_eq!(Report::from_json_or_stream(&stream).expect("reads"), report);
    // A report file is read as before.
    let file = report.to_json().expect("encodes");
    assert_eq!(Report::from_json_or_stream(&file).expect("reads"), report);
    // A stream cut before its report says so.
    let cut = stream.lines().take(2).collect::<Vec<_>>().join("\n");
    let error = Report::from_json_or_stream(&cut).expect_err("no report");
    assert!(
        matches!(error, ReportError::StreamWithoutReport { intervals: 2 }),
        "{error}"
    );
}

/// The tokens of a JSON text: strings (quotes and escapes as written), numbers and literals as
/// written, and punctuation; no whitespace.
fn json_tokens(text: &str) -> Vec<String> {
    let mut tokens: Vec<String> = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '"' => {
                let mut token = String::from('"');
                while let Some(c) = chars.next() {
                    token.push(c);
                    match c {
                        '\\' => token.extend(chars.next()),
                        '"' => break,
                        _ => {}
                    }
                }
                tokens.push(token);
            }
            '{' | '}' | '[' | ']' | ',' | ':' => tokens.push(c.to_string()),
            _ => {
                let mut token = String::from(c);
                while let Some(&next) = chars.peek() {
                    if next.is_whitespace() || "{}[],:".contains(next) {
                        break;
                    }
                    token.push(next);
                    chars.next();
                }
                tokens.push(token);
            }
        }
    }
    tokens
}

/// Tokens printed as `serde_json::to_string_pretty` prints, with a final newline.
fn pretty(tokens: &[String]) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.push_str(&"  ".repeat(depth));
    };
    let mut i = 0;
    while i < tokens.len() {
        let token = tokens[i].as_str();
        match token {
            "{" | "[" => {
                let close = if token == "{" { "}" } else { "]" };
                out.push_str(token);
                if tokens.get(i + 1).map(String::as_str) == Some(close) {
                    out.push_str(close);
                    i += 1;
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            "}" | "]" => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push_str(token);
            }
            "," => {
                out.push(',');
                newline(&mut out, depth);
            }
            ":" => out.push_str(": "),
            _ => out.push_str(token),
        }
        i += 1;
    }
    out.push('\n');
    out
}

/// `text` changed only in the whitespace between tokens, as iommutop writes reports: keys keep
/// their order, numbers and strings their spelling.
fn repretty(text: &str) -> String {
    pretty(&json_tokens(text))
}

/// The index after the value that starts at `tokens[i]`.
fn value_end(tokens: &[String], i: usize) -> usize {
    let mut depth = 0usize;
    let mut j = i;
    while j < tokens.len() {
        match tokens[j].as_str() {
            "{" | "[" => depth += 1,
            "}" | "]" => depth -= 1,
            _ => {}
        }
        j += 1;
        if depth == 0 {
            break;
        }
    }
    j
}

/// The tokens of the value at `path` (object keys) in the value that starts at `tokens[i]`.
fn member<'a>(tokens: &'a [String], i: usize, path: &[&str]) -> Option<&'a [String]> {
    let Some((key, rest)) = path.split_first() else {
        return Some(&tokens[i..value_end(tokens, i)]);
    };
    if tokens.get(i)? != "{" {
        return None;
    }
    let wanted = format!("\"{key}\"");
    let mut j = i + 1;
    while tokens.get(j)? != "}" {
        let value = j + 2;
        if tokens[j] == wanted {
            return member(tokens, value, rest);
        }
        j = value_end(tokens, value);
        if tokens.get(j).is_some_and(|t| t == ",") {
            j += 1;
        }
    }
    None
}

/// Every report kept in the repository reads and writes back to exactly its own JSON, byte for
/// byte once the whitespace is iommutop's: the typed report keeps every key, its order and the
/// spelling of every number. The reports of examples/ are this build's and round-trip whole; the
/// CLI's fixtures are older (a reader fills in fields added since, such as `hist_fine`), and
/// their workload (parameters and results, the part that is typed per workload) round-trips.
#[test]
fn reports_in_the_repository_round_trip_byte_for_byte() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut workloads = 0;
    for (dir, whole) in [("examples", true), ("cli/tests/fixtures", false)] {
        let mut paths: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .map(|entry| entry.expect("entry").path())
            .filter(|path| path.extension().is_some_and(|e| e == "json"))
            .collect();
        paths.sort();
        assert!(paths.len() >= 3, "{dir}: only {} reports", paths.len());
        for path in paths {
            let text = std::fs::read_to_string(&path).expect("readable");
            let report =
                Report::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let written = report.to_json().expect("encodes");
            let (read, wrote) = if whole {
                (repretty(&text), written)
            } else {
                let section = |text: &str| {
                    let tokens = json_tokens(text);
                    pretty(member(&tokens, 0, &["run", "workload"]).expect("run.workload"))
                };
                workloads += usize::from(report.run.workload.is_some());
                (section(&text), section(&written))
            };
            if let Some(line) = wrote.lines().zip(read.lines()).position(|(a, b)| a != b) {
                panic!(
                    "{} changes in a round trip at line {}: wrote {:?}, read {:?}",
                    path.display(),
                    line + 1,
                    wrote.lines().nth(line),
                    read.lines().nth(line)
                );
            }
            assert_eq!(wrote, read, "{}", path.display());
        }
    }
    assert!(workloads >= 3, "only {workloads} reports with a workload");
}

#[test]
fn the_round_trip_helpers_change_only_whitespace() {
    let text = "{\"a\":[1,2.0,{}],\"b\" : {\"c\":\"x, \\\"y\\\"\"},\"d\":[]}";
    assert_eq!(
        repretty(text),
        "{\n  \"a\": [\n    1,\n    2.0,\n    {}\n  ],\n  \"b\": {\n    \"c\": \"x, \\\"y\\\"\"\n  },\n  \"d\": []\n}\n"
    );
    let tokens = json_tokens(text);
    assert_eq!(pretty(member(&tokens, 0, &["d"]).expect("d")), "[]\n");
    assert_eq!(
        pretty(member(&tokens, 0, &["b", "c"]).expect("b.c")),
        "\"x, \\\"y\\\"\"\n"
    );
    assert_eq!(member(&tokens, 0, &["e"]), None);
}
