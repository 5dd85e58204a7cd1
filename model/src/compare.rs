//! `iommutop compare A B`: lines up two reports (two kernels, two modes, two dates) and explains
//! the difference — configuration first, then what each device paid for translation, then the
//! workload's numbers with the run-to-run noise measured in each report's interval samples.
//! Thresholds (`--fail-if`) turn a comparison into a CI gate.

mod threshold;

pub use threshold::{Threshold, ThresholdError};

use crate::report::Report;
use crate::sample::Op;
use crate::snapshot::Device;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One difference between A and B, with how much of the translation gap it explains.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    /// `host`, `device`, `workload`.
    pub area: String,
    /// What differs: `cmdline intel_iommu`, `0000:00:05.0 translation_ns_per_io`, ...
    pub what: String,
    pub a: String,
    pub b: String,
    /// Share of the summed change in translation time per second it accounts for (devices).
    pub share_of_gap: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadChange {
    pub metric: String,
    pub a: f64,
    pub b: f64,
    pub change: f64,
    /// Run-to-run noise, as a relative standard deviation from the interval samples (the larger
    /// of the two runs), when both have at least three intervals.
    pub noise: Option<f64>,
    /// The change exceeds twice the noise.
    pub beyond_noise: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub host: Vec<Difference>,
    pub devices: Vec<Difference>,
    pub workload: Vec<WorkloadChange>,
    /// The sentences a person reads first.
    pub summary: Vec<String>,
}

/// The host facts that decide translation: each difference between A and B.
fn host_differences(a: &Report, b: &Report) -> Vec<Difference> {
    let mut out = Vec::new();
    let mut push = |what: &str, va: String, vb: String| {
        if va != vb {
            out.push(Difference {
                area: "host".into(),
                what: what.into(),
                a: va,
                b: vb,
                share_of_gap: None,
            });
        }
    };
    let show = |v: Option<&str>| v.unwrap_or("-").to_string();
    push(
        "kernel",
        show(a.host.kernel_release.as_deref()),
        show(b.host.kernel_release.as_deref()),
    );
    push(
        "IOMMU present",
        a.host.iommu.present.to_string(),
        b.host.iommu.present.to_string(),
    );
    push(
        "default domain type",
        show(a.host.iommu.default_domain_type.as_deref()),
        show(b.host.iommu.default_domain_type.as_deref()),
    );
    let params_a = iommu_params(a);
    let params_b = iommu_params(b);
    for key in params_a
        .keys()
        .chain(params_b.keys())
        .collect::<std::collections::BTreeSet<_>>()
    {
        push(
            &format!("command line {key}"),
            params_a
                .get(key)
                .cloned()
                .unwrap_or_else(|| "(not set)".into()),
            params_b
                .get(key)
                .cloned()
                .unwrap_or_else(|| "(not set)".into()),
        );
    }
    let keys: std::collections::BTreeSet<&String> = a
        .host
        .kernel_config
        .keys()
        .chain(b.host.kernel_config.keys())
        .collect();
    for key in keys {
        push(
            &format!("CONFIG_{key}"),
            a.host
                .kernel_config
                .get(key)
                .cloned()
                .unwrap_or_else(|| "-".into()),
            b.host
                .kernel_config
                .get(key)
                .cloned()
                .unwrap_or_else(|| "-".into()),
        );
    }
    out
}

/// `intel_iommu=on` → (`intel_iommu`, `on`) for the parameters that decide translation.
fn iommu_params(report: &Report) -> BTreeMap<String, String> {
    const KEYS: [&str; 5] = [
        "intel_iommu",
        "amd_iommu",
        "iommu",
        "iommu.passthrough",
        "iommu.strict",
    ];
    report
        .host
        .cmdline
        .as_deref()
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|p| p.split_once('='))
        .filter(|(k, _)| KEYS.contains(k))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// How a device is recognised in both reports: its PCI address, else its kernel names.
fn same_device<'a>(devices: &'a [Device], wanted: &Device) -> Option<&'a Device> {
    devices.iter().find(|d| d.key == wanted.key).or_else(|| {
        devices
            .iter()
            .find(|d| d.names.iter().any(|n| wanted.names.contains(n)))
    })
}

/// Translation ns spent per second of the run: what a device's translation costs the machine.
fn translation_per_s(d: &Device, report: &Report) -> f64 {
    let seconds = report.run.duration_s.max(f64::MIN_POSITIVE);
    d.derived.translation_ns.unwrap_or(0) as f64 / seconds
}

fn per_io(d: &Device, op: Op) -> Option<f64> {
    (d.completions > 0).then(|| d.op(op).count as f64 / d.completions as f64)
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

fn device_differences(a: &Report, b: &Report) -> Vec<Difference> {
    let mut rows: Vec<(f64, Vec<Difference>)> = Vec::new();
    let mut keys: Vec<&Device> = b
        .devices
        .iter()
        .filter(|d| d.op(Op::DmaMap).count > 0)
        .collect();
    for d in a.devices.iter().filter(|d| d.op(Op::DmaMap).count > 0) {
        if same_device(&b.devices, d).is_none() {
            keys.push(d);
        }
    }
    let gap_total: f64 = keys
        .iter()
        .map(|d| {
            let in_a = same_device(&a.devices, d).map_or(0.0, |x| translation_per_s(x, a));
            let in_b = same_device(&b.devices, d).map_or(0.0, |x| translation_per_s(x, b));
            (in_b - in_a).abs()
        })
        .sum();
    for d in keys {
        let da = same_device(&a.devices, d);
        let db = same_device(&b.devices, d);
        let in_a = da.map_or(0.0, |x| translation_per_s(x, a));
        let in_b = db.map_or(0.0, |x| translation_per_s(x, b));
        let share = (gap_total > 0.0).then(|| (in_b - in_a).abs() / gap_total);
        let name = if d.names.is_empty() {
            d.key.clone()
        } else {
            format!("{} ({})", d.key, d.names.join(", "))
        };
        let mut diffs = Vec::new();
        let mut push = |what: &str, va: String, vb: String, share: Option<f64>| {
            if va != vb {
                diffs.push(Difference {
                    area: "device".into(),
                    what: format!("{name} {what}"),
                    a: va,
                    b: vb,
                    share_of_gap: share,
                });
            }
        };
        let domain = |x: Option<&Device>| {
            x.and_then(|x| x.domain_type.clone())
                .unwrap_or_else(|| "-".into())
        };
        push("domain type", domain(da), domain(db), None);
        let ns = |x: Option<&Device>| fmt_opt(x.and_then(|x| x.derived.translation_ns_per_io), 0);
        push("translation ns per I/O", ns(da), ns(db), share);
        for (op, label) in [
            (Op::DmaMap, "DMA maps per I/O"),
            (Op::IommuMap, "IOMMU page-table maps per I/O"),
            (Op::IotlbSync, "IOTLB syncs per I/O"),
            (Op::IotlbFlush, "IOTLB invalidations per I/O"),
        ] {
            push(
                label,
                fmt_opt(da.and_then(|x| per_io(x, op)), 2),
                fmt_opt(db.and_then(|x| per_io(x, op)), 2),
                None,
            );
        }
        rows.push(((in_b - in_a).abs(), diffs));
    }
    rows.sort_by(|x, y| y.0.total_cmp(&x.0));
    rows.into_iter().flat_map(|(_, d)| d).collect()
}

/// Relative standard deviation of a series (None below three samples or a zero mean).
pub fn relative_noise(values: &[f64]) -> Option<f64> {
    if values.len() < 3 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    if mean == 0.0 {
        return None;
    }
    let variance =
        values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (values.len() - 1) as f64;
    Some(variance.sqrt() / mean.abs())
}

/// The per-interval series of a workload metric, or of completions per second summed over devices.
fn interval_series(report: &Report, metric: &str) -> Vec<f64> {
    report
        .intervals
        .iter()
        .filter_map(|i| match metric {
            "completions_per_s" => Some(i.devices.values().map(|d| d.completions_per_s).sum()),
            _ => i
                .workload
                .as_ref()
                .and_then(|w| w.get(metric))
                .and_then(|v| v.as_f64()),
        })
        .collect()
}

fn workload_changes(a: &Report, b: &Report) -> Vec<WorkloadChange> {
    let mut metrics: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    if let (Some(wa), Some(wb)) = (&a.run.workload, &b.run.workload) {
        for (key, va) in &wa.results {
            if let (Some(va), Some(vb)) =
                (va.as_f64(), wb.results.get(key).and_then(|v| v.as_f64()))
            {
                metrics.insert(key.clone(), (va, vb));
            }
        }
    }
    let completions = |r: &Report| {
        r.devices.iter().map(|d| d.completions as f64).sum::<f64>()
            / r.run.duration_s.max(f64::MIN_POSITIVE)
    };
    metrics
        .entry("completions_per_s".into())
        .or_insert((completions(a), completions(b)));
    metrics
        .into_iter()
        .map(|(metric, (va, vb))| {
            let change = if va != 0.0 { (vb - va) / va } else { 0.0 };
            let noise = match (
                relative_noise(&interval_series(a, &metric)),
                relative_noise(&interval_series(b, &metric)),
            ) {
                (Some(x), Some(y)) => Some(x.max(y)),
                _ => None,
            };
            WorkloadChange {
                beyond_noise: noise.map(|n| change.abs() > 2.0 * n),
                metric,
                a: va,
                b: vb,
                change,
                noise,
            }
        })
        .collect()
}

/// Compares A (the baseline) with B.
pub fn compare(a: &Report, b: &Report) -> Comparison {
    let host = host_differences(a, b);
    let devices = device_differences(a, b);
    let workload = workload_changes(a, b);
    let mut summary = Vec::new();
    let translated = |r: &Report| {
        r.devices
            .iter()
            .filter(|d| d.op(Op::IommuMap).count > 0)
            .map(|d| d.key.clone())
            .collect::<Vec<_>>()
    };
    let (ta, tb) = (translated(a), translated(b));
    let only_b: Vec<&String> = tb.iter().filter(|k| !ta.contains(k)).collect();
    let only_a: Vec<&String> = ta.iter().filter(|k| !tb.contains(k)).collect();
    let causes: Vec<String> = host
        .iter()
        .filter(|d| {
            d.what.starts_with("command line")
                || d.what.starts_with("CONFIG_")
                || d.what == "IOMMU present"
                || d.what == "default domain type"
        })
        .map(|d| format!("{}: {} → {}", d.what, d.a, d.b))
        .collect();
    let because = if causes.is_empty() {
        String::new()
    } else {
        format!(" ({})", causes.join("; "))
    };
    for (keys, on, off) in [(&only_b, "B", "A"), (&only_a, "A", "B")] {
        if keys.is_empty() {
            continue;
        }
        let names: Vec<&str> = keys.iter().map(|s| s.as_str()).collect();
        // With the same host facts, the devices' own domain types are the cause.
        let because = if because.is_empty() {
            let changes: Vec<String> = devices
                .iter()
                .filter(|d| d.what.ends_with("domain type"))
                .map(|d| format!("{}: {} → {}", d.what, d.a, d.b))
                .collect();
            if changes.is_empty() {
                String::new()
            } else {
                format!(" ({})", changes.join("; "))
            }
        } else {
            because.clone()
        };
        summary.push(format!(
            "IOMMU translation is on in {on} and not in {off} for {}{because}",
            names.join(", ")
        ));
    }
    for d in devices
        .iter()
        .filter(|d| d.what.ends_with("translation ns per I/O"))
    {
        if let Some(share) = d.share_of_gap {
            if share >= 0.05 {
                summary.push(format!(
                    "{}: {} in A, {} in B ({:.0}% of the translation-time gap)",
                    d.what,
                    d.a,
                    d.b,
                    share * 100.0
                ));
            }
        }
    }
    if only_a.is_empty()
        && only_b.is_empty()
        && devices.iter().all(|d| d.share_of_gap.unwrap_or(0.0) < 0.05)
    {
        summary.push(
            "translation work is the same in both runs: no device gained or lost translation"
                .into(),
        );
    }
    for w in &workload {
        let verdict = match (w.noise, w.beyond_noise) {
            (Some(n), Some(true)) => {
                format!("beyond the measured noise (±{:.1}%)", 2.0 * n * 100.0)
            }
            (Some(n), Some(false)) => format!(
                "within the measured noise (±{:.1}%): no cause is claimed for it",
                2.0 * n * 100.0
            ),
            _ => "noise not measurable (fewer than three intervals)".into(),
        };
        summary.push(format!(
            "{}: {:.1} → {:.1} ({:+.1}%), {verdict}",
            w.metric,
            w.a,
            w.b,
            w.change * 100.0
        ));
    }
    Comparison {
        host,
        devices,
        workload,
        summary,
    }
}

impl Comparison {
    /// The text `iommutop compare` prints.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for line in &self.summary {
            let _ = writeln!(out, "{line}");
        }
        for (title, rows) in [("host", &self.host), ("devices", &self.devices)] {
            if rows.is_empty() {
                continue;
            }
            let _ = writeln!(out, "\n{title} (A → B):");
            for d in rows {
                let share = d
                    .share_of_gap
                    .map(|s| format!("  [{:.0}% of gap]", s * 100.0))
                    .unwrap_or_default();
                let _ = writeln!(out, "  {}: {} → {}{share}", d.what, d.a, d.b);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::full_report;

    #[test]
    fn identical_reports_claim_no_cause() {
        let r = full_report();
        let c = compare(&r, &r);
        assert!(c.host.is_empty());
        assert!(
            c.summary
                .iter()
                .any(|s| s.contains("translation work is the same")),
            "{:?}",
            c.summary
        );
    }

    #[test]
    fn translation_only_in_b_is_named_with_the_command_line_cause() {
        let b = full_report();
        let mut a = b.clone();
        a.host.cmdline = Some("console=ttyS0 iommu.passthrough=1".into());
        for d in &mut a.devices {
            d.ops.insert(Op::IommuMap, Default::default());
            d.derived.translation_ns = Some(0);
        }
        let c = compare(&a, &b);
        let first = &c.summary[0];
        assert!(
            first.starts_with("IOMMU translation is on in B and not in A for"),
            "{first}"
        );
        assert!(
            first.contains("command line iommu.passthrough: 1 → (not set)"),
            "{first}"
        );
    }

    #[test]
    fn noise_is_the_relative_standard_deviation() {
        assert_eq!(relative_noise(&[1.0, 1.0]), None);
        let n = relative_noise(&[90.0, 100.0, 110.0]).expect("three samples");
        assert!((n - 0.1).abs() < 1e-9, "{n}");
    }
}
