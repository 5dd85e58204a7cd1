//! Devices each per its own unit of work: a workload's change set against only the devices it
//! drove, and no finding that adds one unit to another.

use super::*;

/// A run with two workloads (netperf on the NICs, the report's workload, while something else
/// read the NVMe) compared with the same run without translation: each device is per its own
/// unit in every figure, and no finding adds one unit to another.
#[test]
fn compare_puts_each_device_per_its_own_unit_and_never_adds_units() {
    use crate::report::fixtures::two_workloads_report;
    let (a, b) = (
        two_workloads_report("identity"),
        two_workloads_report("DMA-FQ"),
    );
    let c = compare(&a, &b);
    let change = |key: &str| {
        c.devices
            .iter()
            .find(|d| d.key == key)
            .unwrap_or_else(|| panic!("no {key}"))
    };
    let nvme = change("0000:00:04.0");
    assert_eq!(nvme.unit(), "completed I/O");
    let work = nvme.b.as_ref().expect("in B");
    assert_eq!(
        (work.unit.as_str(), work.dma_ns),
        ("completed I/O", Some(15_300.0))
    );
    assert_eq!(nvme.workload_gap_ns, None, "netperf did not drive it");
    for key in ["0000:00:05.0", "0000:00:06.0"] {
        assert_eq!(change(key).unit(), "transaction");
        assert!(change(key).workload_gap_ns.is_some(), "{key}");
    }
    assert_eq!(c.device_unit, OWN_UNITS);
    assert_eq!(
        c.unit, "second",
        "gaps in different units compare per second"
    );
    // A finding per unit: the NVMe's per completed I/O, the NICs' per transaction.
    let translation: Vec<&Finding> = c
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::Translation)
        .collect();
    let numbers: Vec<(&str, Option<f64>)> = translation
        .iter()
        .map(|f| (f.unit.as_str(), f.numbers.b))
        .collect();
    assert_eq!(
        numbers,
        [
            ("ns per completed I/O", Some(15_300.0)),
            ("ns per transaction", Some(30_000.0))
        ]
    );
    for finding in c
        .findings
        .iter()
        .filter(|f| f.kind != FindingKind::Workload)
    {
        let unit = finding.unit.trim_start_matches("ns ");
        for figure in &finding.figures {
            assert!(
                figure.unit == finding.unit || figure.unit == unit,
                "{}: a figure {} in a finding {}",
                finding.headline,
                figure.unit,
                finding.unit
            );
        }
    }
    let text = c.render(("a", "b"));
    assert!(
        text.contains("\ndevices, each per its own unit (A → B):\n  0000:00:04.0 (nvme0n1, nvme), per completed I/O\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "0000:00:04.0 (nvme0n1, nvme) per completed I/O, A → B: DMA maps 1.00 → 1.00"
        ),
        "{text}"
    );
    assert!(
        text.contains("0000:00:05.0 (eth0, e1000e) per transaction, A → B: DMA maps 3.00 → 3.00"),
        "{text}"
    );
    let json = serde_json::to_value(&c).expect("serializes");
    let units: Vec<&str> = json["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .filter_map(|d| d["b"]["unit"].as_str())
        .collect();
    assert_eq!(units, ["completed I/O", "transaction", "transaction"]);
    // The same run twice: translation is the same, and its numbers add no units together.
    let same = compare(&b, &b);
    let finding = same
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::Same)
        .expect("the same");
    assert_eq!((finding.numbers.a, finding.numbers.b), (None, None));
    assert_eq!(finding.unit, format!("ns per {OWN_UNITS}"));
    assert!(!kinds(&same).contains(&FindingKind::Counts));
}

/// The workload's change is set against the translation time per unit of the devices it drove
/// only: a device it did not drive has no time per its unit.
#[test]
fn the_workload_s_change_is_set_against_the_devices_it_drove_only() {
    use crate::report::fixtures::two_workloads_report;
    use crate::results::WorkloadResults;
    let steady = |mut report: Report, tps: f64| {
        if let Some(WorkloadResults::Netperf(netperf)) =
            report.run.workload.as_mut().map(|w| &mut w.results)
        {
            netperf.transactions_per_s = tps;
        }
        let point = report.intervals[0].clone();
        report.intervals = [tps - 1.0, tps + 1.0, tps, tps - 1.0, tps + 1.0]
            .iter()
            .enumerate()
            .map(|(i, &rate)| IntervalPoint {
                t_s: i as f64 + 1.0,
                workload: Some(json!({ "transactions_per_s": rate })),
                ..point.clone()
            })
            .collect();
        report
    };
    let a = steady(two_workloads_report("DMA-FQ"), 1_000.0);
    let mut b = steady(two_workloads_report("DMA-FQ"), 900.0);
    // Only the NVMe's translation grew: nothing per transaction.
    let nvme = b
        .devices
        .iter_mut()
        .find(|d| d.key == "0000:00:04.0")
        .expect("the NVMe");
    nvme.derived.translation_ns = nvme.derived.translation_ns.map(|ns| ns * 2);
    let c = compare(&a, &b);
    let workload = &c.findings[0];
    assert!(
        workload.headline.contains("beyond run-to-run noise"),
        "{}",
        workload.headline
    );
    assert!(
        workload.details[0].contains("translation time per transaction only by +0ns"),
        "{:?}",
        workload.details
    );
}
