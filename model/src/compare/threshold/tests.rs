use super::*;
use crate::report::fixtures::full_report;

fn eval(expr: &str, a: &Report, b: &Report) -> Evaluation {
    Threshold::parse(expr)
        .unwrap_or_else(|e| panic!("{expr}: {e}"))
        .evaluate(a, b)
        .unwrap_or_else(|e| panic!("{expr}: {e}"))
}

#[test]
fn parses_relative_and_absolute_thresholds() {
    let t = Threshold::parse("workload.transactions_per_s < -2%").expect("parses");
    assert_eq!(t.cmp, Cmp::Lt);
    assert_eq!(
        t.expected,
        Expected::Number {
            value: -0.02,
            relative: true
        }
    );
    let t = Threshold::parse("device[nvme0n1].translation_ns_per_io>800").expect("parses");
    assert_eq!(
        t.path,
        Path::Device {
            selector: "nvme0n1".into(),
            field: DeviceField::Derived("translation_ns_per_io")
        }
    );
    assert_eq!(t.cmp, Cmp::Gt);
    let t = Threshold::parse("host.cmdline.intel_iommu != on").expect("parses");
    assert_eq!(t.expected, Expected::Text("on".into()));
    let t = Threshold::parse("device[eth0].dma_map.mean_ns <= 2e3").expect("parses");
    assert_eq!(t.cmp, Cmp::Le);
}

#[test]
fn bad_expressions_say_what_is_expected() {
    for (text, needle) in [
        ("workload.x", "is not PATH OP VALUE"),
        ("workload.x < fast", "is not PATH OP VALUE"),
        ("workload.x <", "is not PATH OP VALUE"),
        ("< 3", "is not PATH OP VALUE"),
        ("workload.x < inf", "is not PATH OP VALUE"),
        ("run.duration_s > 1", "unknown path"),
        ("device[].cpu_share > 1", "unknown path"),
        ("device[x].speed > 1", "unknown device field `speed`"),
        (
            "device[x].dma_flip.count > 1",
            "unknown operation `dma_flip`",
        ),
        (
            "device[x].dma_map.median > 1",
            "unknown operation statistic `median`",
        ),
        (
            "device[x].per_unit.bogus > 1",
            "unknown device field `per_unit.bogus`",
        ),
        ("host.colour == red", "unknown host field `colour`"),
        ("host.kernel_release > 6", "is text: only == and != apply"),
        ("host.iommu.present == maybe", "is not PATH OP VALUE"),
        (
            "device[x].domain_type == 5%",
            "only == and != apply, without %",
        ),
    ] {
        let error = Threshold::parse(text).expect_err(text).to_string();
        assert!(error.contains(needle), "{text}: {error}");
    }
}

#[test]
fn devices_are_found_by_address_name_controller_or_driver() {
    let r = full_report();
    for selector in ["0000:00:02.0", "nvme0n1", "nvme0", "nvme"] {
        let e = eval(&format!("device[{selector}].completions == 4000"), &r, &r);
        assert!(e.crossed, "{selector}: {e:?}");
    }
    let error = Threshold::parse("device[nope].cpu_share > 0")
        .expect("parses")
        .evaluate(&r, &r)
        .expect_err("no such device")
        .to_string();
    assert!(error.contains("device `nope` not found in B"), "{error}");
    assert!(!is_namespace_of("nvme10n1", "nvme1"));
    assert!(is_namespace_of("nvme1c0n1", "nvme1"));
}

/// A latency threshold on a tracepoint-tier point said "not found in B" instead of why.
#[test]
fn a_latency_the_tier_cannot_time_says_why() {
    let r = full_report();
    let error = Threshold::parse("device[nvme0n1].iommu_map.p99_ns > 1000")
        .expect("parses")
        .evaluate(&r, &r)
        .expect_err("iommu_map is on the tracepoint tier")
        .to_string();
    assert!(
        error.contains(
            "B counts iommu_map but has no timing for it: the `iommu_map` probe \
             point got the tracepoint tier, which counts calls but cannot time them"
        ),
        "{error}"
    );
    assert!(!error.contains("not found"), "{error}");
}

#[test]
fn a_driver_shared_by_two_busy_devices_is_ambiguous() {
    let mut r = full_report();
    let mut twin = r.devices[0].clone();
    twin.key = "0000:00:03.0".into();
    twin.names = vec!["nvme1n1".into()];
    r.devices.push(twin);
    let error = Threshold::parse("device[nvme].completions > 0")
        .expect("parses")
        .evaluate(&r, &r)
        .expect_err("two nvme devices")
        .to_string();
    assert!(error.contains("is ambiguous in B"), "{error}");
}

#[test]
fn relative_thresholds_compare_b_with_a() {
    let a = full_report();
    let mut b = a.clone();
    b.devices[0].derived.translation_ns_per_io =
        a.devices[0].derived.translation_ns_per_io.map(|v| v * 1.5);
    let e = eval("device[nvme0n1].translation_ns_per_io > 20%", &a, &b);
    assert!(e.crossed, "{e:?}");
    assert!(e.observed.starts_with("+50.00%"), "{}", e.observed);
    assert_eq!(e.numbers.a, a.devices[0].derived.translation_ns_per_io);
    assert_eq!(e.numbers.b, b.devices[0].derived.translation_ns_per_io);
    assert_eq!(e.numbers.delta_pct, Some(50.0));
    let json = serde_json::to_value(&e).expect("serializes");
    assert_eq!(
        json["delta_pct"], 50.0,
        "numbers sit beside `observed`: {json}"
    );
    assert!(!eval("device[nvme0n1].translation_ns_per_io > 60%", &a, &b).crossed);
    assert!(!eval("device[nvme0n1].translation_ns_per_io > 1%", &a, &a).crossed);
    assert!(eval("device[nvme0n1].translation_ns_per_io > 0", &a, &a).crossed);
}

#[test]
fn workload_host_and_per_unit_paths_read_the_report() {
    let r = full_report();
    assert!(eval("workload.read_iops == 2000", &r, &r).crossed);
    assert!(eval("workload.completions_per_s >= 1999", &r, &r).crossed);
    assert!(eval("host.cmdline.intel_iommu == on", &r, &r).crossed);
    assert!(eval("host.cmdline.iommu.passthrough == \"(not set)\"", &r, &r).crossed);
    assert!(eval("host.kernel_config.CONFIG_INTEL_IOMMU == y", &r, &r).crossed);
    assert!(eval("host.iommu.present == true", &r, &r).crossed);
    assert!(eval("host.iommu.units == 1", &r, &r).crossed);
    assert!(eval("host.iommu.dma_mode != strict", &r, &r).crossed);
    assert!(eval("device[nvme0n1].domain_type == DMA-FQ", &r, &r).crossed);
    // read_iops 2000 over the 2 s run: 4000 reads, one IOTLB sync each.
    assert!(eval("device[nvme0n1].per_unit.iotlb_syncs == 1", &r, &r).crossed);
    assert!(eval("device[nvme0n1].dma_map.count == 4000", &r, &r).crossed);
    let missing = Threshold::parse("workload.transactions_per_s < -2%")
        .expect("parses")
        .evaluate(&r, &r)
        .expect_err("no such result")
        .to_string();
    assert!(
        missing.contains("workload result `transactions_per_s` not found in B"),
        "{missing}"
    );
}

/// A threshold's numbers carry their unit, as findings do (`compare --format markdown` shows it
/// beside A and B): from the path and the report's unit of work, a device's figures per unit in
/// the device's own unit (the fixture's fio counted no reads: per completed I/O, as the figures
/// are); text and yes/no have none.
#[test]
fn a_thresholds_numbers_carry_their_unit() {
    let report = full_report();
    let key = report.devices[0].key.clone();
    let units = crate::compare::work_units(&report);
    let per = units.unit.clone();
    let per_device = units.of_device(&report.devices[0]).name;
    assert_eq!(per_device, "completed I/O");
    let rate = units
        .rate_metric
        .clone()
        .expect("the fixture states its rate");
    for (expr, unit) in [
        (format!("workload.{rate} < -2%"), Some(format!("{per}/s"))),
        (
            format!("device[{key}].translation_ns_per_io > 1"),
            Some("ns per I/O".to_string()),
        ),
        (
            format!("device[{key}].dma_map.p99_ns > 1"),
            Some("ns".into()),
        ),
        (
            format!("device[{key}].dma_map.count > 1"),
            Some("calls".into()),
        ),
        (
            format!("device[{key}].per_unit.dma_ns > 1"),
            Some(format!("ns per {per_device}")),
        ),
        (
            format!("device[{key}].per_unit.iotlb_syncs > 1"),
            Some(format!("per {per_device}")),
        ),
        (format!("device[{key}].domain_type == DMA"), None),
        ("host.lab == yes".to_string(), None),
    ] {
        assert_eq!(eval(&expr, &report, &report).unit, unit, "{expr}");
    }
}
