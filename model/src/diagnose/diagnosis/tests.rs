use super::markdown::render_markdown_diagnosis;
use super::*;
use crate::compare::work::WorkUnits;
use crate::diagnose::ab_outcome;
use crate::html::{escape, render_diagnosis};
use crate::report::fixtures::host;
use std::path::PathBuf;

/// A real lab report: examples/ (the load cells) or cli/tests/fixtures/.
fn lab_report(path: &str) -> Report {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path);
    Report::from_json(&std::fs::read_to_string(&path).expect("readable")).expect("a report")
}

const EXAMPLES: [&str; 3] = [
    "examples/load-5.10-intel.json",
    "examples/load-6.12-intel-preempt_full.json",
    "examples/load-7.3-intel.json",
];

/// The NVMe's DMA calls waited 63.5% of their time on this 6.12-rt AMD-Vi run.
const WAITING: &str = "cli/tests/fixtures/load-6.12-rt-amd-waiting.json";

fn unit_of(report: &Report) -> String {
    let units: WorkUnits = work_units(report);
    per(&units)
}

/// The text is what `diagnose` printed before it had a Diagnosis: the system section, a blank
/// line, the verdict, then the A/B section and the comparison with the baseline.
#[test]
fn the_text_is_the_system_the_verdict_the_ab_and_the_baseline_in_that_order() {
    for path in EXAMPLES {
        let report = lab_report(path);
        let d = Diagnosis::of_run(host(), report.clone(), None, None, None);
        assert_eq!(
            d.render_text(),
            format!(
                "{}\n{}",
                render_system(&host()),
                verdict(&report, None, None)
            ),
            "{path}"
        );
    }
    let (translated, identity) = (lab_report(EXAMPLES[2]), lab_report(EXAMPLES[1]));
    let ab = ab_outcome(&translated, &identity, "0000:00:04.0");
    let d = Diagnosis::of_run(
        host(),
        translated.clone(),
        None,
        Some(ab.clone()),
        Some(("old.json", &identity)),
    );
    let comparison = compare(&identity, &translated);
    assert_eq!(
        d.render_outcome(),
        format!(
            "\n{}\n{}\nagainst the baseline (A: old.json, B: this run):\n{}",
            verdict(&translated, None, Some(&ab)),
            ab.render(),
            comparison.render(("old.json", "this run"))
        )
    );
}

#[test]
fn without_an_iommu_the_verdict_says_translation_costs_nothing() {
    let d = Diagnosis::without_iommu(host());
    assert_eq!(
        d.render_text(),
        format!("{}\n{NO_IOMMU_VERDICT}\n", render_system(&host()))
    );
    assert!(d.report.is_none() && d.devices.is_empty());
    let markdown = render_markdown_diagnosis(&d);
    assert!(
        markdown.contains(&format!("```text\n{NO_IOMMU_VERDICT}\n```")),
        "{markdown}"
    );
    let page = render_diagnosis(&d);
    assert!(page.contains(&escape(NO_IOMMU_VERDICT)), "{page}");
    assert!(!page.contains("<table class=\"diagnosed\""), "{page}");
}

/// The Markdown holds the text's system and verdict as they print, and a row per device of the
/// verdict whose figures are that device's work per unit: each column names the unit when the
/// devices share one, else a `per` column gives each device's (the load cells' NICs count per
/// packet, their NVMe per completed I/O).
#[test]
fn the_markdown_holds_the_text_and_a_row_of_figures_per_device() {
    for path in EXAMPLES.iter().chain([&WAITING]) {
        let report = lab_report(path);
        let d = Diagnosis::of_run(host(), report.clone(), None, None, None);
        let markdown = render_markdown_diagnosis(&d);
        assert!(markdown.starts_with("### iommutop diagnose\n"), "{path}");
        assert!(
            markdown.contains(&format!("```text\n{}```", render_system(&host()))),
            "{path}: {markdown}"
        );
        assert!(
            markdown.contains(&format!("```text\n{}```", verdict(&report, None, None))),
            "{path}: {markdown}"
        );
        let header = markdown
            .lines()
            .find(|l| l.starts_with("| device |"))
            .unwrap_or_else(|| panic!("{path}: no devices table in {markdown}"));
        let devices = dma_devices(&report, None);
        assert!(!devices.is_empty(), "{path}");
        let units = work_units(&report);
        let works: Vec<DeviceWork> = devices.iter().map(|d| DeviceWork::of(d, &units)).collect();
        let one_unit = works.iter().all(|w| w.unit == works[0].unit);
        let unit = if one_unit {
            works[0].unit.as_str()
        } else {
            "unit"
        };
        assert!(
            header.contains(&format!("| DMA map+unmap, ns per {unit} |")),
            "{header}"
        );
        assert_eq!(header.contains("| per |"), !one_unit, "{header}");
        let shift = usize::from(!one_unit);
        for (device, work) in devices.iter().zip(&works) {
            let expected = if device.names.iter().any(|n| n.starts_with("eth")) {
                "packet"
            } else {
                "completed I/O"
            };
            assert_eq!(work.unit, expected, "{path}: {}", device.key);
            let row = markdown
                .lines()
                .find(|l| l.starts_with(&format!("| {} |", label(device))))
                .unwrap_or_else(|| panic!("{path}: no row of {}", device.key));
            let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
            if !one_unit {
                assert_eq!(cells[3], work.unit, "{row}");
            }
            let dma_ns = work.dma_ns.map_or("-".into(), |ns| format!("{ns:.0}"));
            assert_eq!(cells[5 + shift], dma_ns, "{row}");
            let waiting = work
                .dma_waiting_share
                .map_or("-".into(), |s| format!("{:.1}", s * 100.0));
            assert_eq!(cells[8 + shift], waiting, "{row}");
        }
    }
    let waited = Diagnosis::of_run(host(), lab_report(WAITING), None, None, None);
    let nvme = waited
        .devices
        .iter()
        .find(|d| d.key == "0000:00:04.0")
        .expect("the NVMe");
    assert!(
        nvme.work.dma_waiting_share.is_some_and(|s| s > 0.6),
        "the fixture's NVMe waited: {:?}",
        nvme.work
    );
}

/// The page says what the text says, tables the devices' figures, and draws the run's report.
#[test]
fn the_page_holds_the_text_the_figures_and_the_runs_report() {
    let (old, new) = (lab_report(EXAMPLES[0]), lab_report(EXAMPLES[2]));
    let d = Diagnosis::of_run(host(), new.clone(), None, None, Some(("a<b>.json", &old)));
    let page = render_diagnosis(&d);
    for line in d.system.iter().chain(&d.verdict) {
        assert!(page.contains(&escape(line)), "the page lacks `{line}`");
    }
    for device in &d.devices {
        assert!(
            page.contains(&format!("<tr data-device=\"{}\">", escape(&device.key))),
            "no row of {}",
            device.key
        );
    }
    // The run's report as `report --html` draws it: a section per row with DMA.
    for device in dma_devices(&new, None) {
        assert!(
            page.contains(&format!(
                "data-device=\"{}\">\n<details",
                escape(&device.key.to_string())
            )),
            "no section of {}",
            device.key
        );
    }
    let comparison = compare(&old, &new);
    assert!(page.contains("<code>a&lt;b&gt;.json</code>"), "escaped");
    for finding in &comparison.findings {
        assert!(
            page.contains(&escape(&finding.headline)),
            "{}",
            finding.headline
        );
    }
    let markdown = render_markdown_diagnosis(&d);
    let findings = markdown
        .lines()
        .skip_while(|l| !l.starts_with("| # | finding"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .count();
    assert_eq!(findings, comparison.findings.len(), "{markdown}");
    assert!(!markdown.contains("### iommutop compare"), "{markdown}");
}

/// The JSON holds the same data: the lines the text prints and the figures the tables show.
#[test]
fn the_json_holds_the_text_lines_and_the_devices_figures() {
    let report = lab_report(EXAMPLES[2]);
    let d = Diagnosis::of_run(host(), report.clone(), None, None, None);
    let json = serde_json::to_value(&d).expect("serializes");
    let verdict_lines: Vec<String> = verdict(&report, None, None)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(json["verdict"], serde_json::json!(verdict_lines));
    assert_eq!(json["unit"], unit_of(&report));
    let devices = dma_devices(&report, None);
    assert_eq!(
        json["devices"].as_array().map(Vec::len),
        Some(devices.len())
    );
    let first = DeviceWork::of(devices[0], &work_units(&report));
    assert_eq!(json["devices"][0]["key"], devices[0].key.to_string());
    assert_eq!(
        json["devices"][0]["work"]["dma_ns"],
        serde_json::json!(first.dma_ns)
    );
    assert_eq!(json["report"]["run"], serde_json::json!(report.run));
}
