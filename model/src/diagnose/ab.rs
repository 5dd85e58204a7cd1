//! `diagnose --ab`: the same workload on the same kernel with one device's group translated and
//! in identity, and the difference in the workload's own numbers.

use crate::compare::noise::{judge, workload_spread, Significance};
use crate::compare::work::{label, same_device, work_units, DeviceWork, COMPLETIONS_PER_S};
use crate::report::Report;
use iommutop_abi::units::human_ns;
use serde::Serialize;
use std::fmt::Write;

/// One mode of the experiment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AbMode {
    /// The group's domain type in this run (`DMA-FQ`, `identity`).
    pub domain_type: String,
    /// The workload's headline number (`transactions_per_s`), or completions per second.
    pub rate: Option<f64>,
    pub work: Option<DeviceWork>,
}

/// The outcome of running the workload translated and in identity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AbOutcome {
    pub device_key: String,
    pub device: String,
    pub metric: String,
    /// What the work figures of both modes are per: the device's unit in the translated run.
    pub unit: String,
    pub translated: AbMode,
    pub identity: AbMode,
    /// Identity against translated, `(identity - translated) / translated`, with its noise.
    pub change: Option<f64>,
    pub significance: Option<Significance>,
    /// Run in the iommutop lab: rates follow the emulating host's load too.
    pub lab: bool,
}

/// Lines up the translated run and the identity run of `device_key`.
pub fn ab_outcome(translated: &Report, identity: &Report, device_key: &str) -> AbOutcome {
    let units = work_units(translated);
    let metric = units
        .rate_metric
        .clone()
        .filter(|m| rate(identity, m).is_some())
        .unwrap_or_else(|| COMPLETIONS_PER_S.to_string());
    let mode = |report: &Report, fallback: &str| {
        let row = report.devices.iter().find(|d| d.key == device_key);
        let units = work_units(report);
        AbMode {
            domain_type: row
                .and_then(|d| d.domain_type.clone())
                .unwrap_or_else(|| fallback.to_string()),
            rate: rate(report, &metric),
            work: row.map(|d| DeviceWork::of(d, &units)),
        }
    };
    let t = mode(translated, "translated");
    let i = mode(identity, "identity");
    // The device's own unit in the translated run (the workload's if it drove the device).
    let unit = t
        .work
        .as_ref()
        .or(i.work.as_ref())
        .map_or_else(|| units.unit.clone(), |w| w.unit.clone());
    let (change, significance) = match (t.rate, i.rate) {
        (Some(a), Some(b)) if a > 0.0 => (
            Some((b - a) / a),
            judge(
                a,
                b,
                workload_spread(translated, &metric),
                workload_spread(identity, &metric),
            ),
        ),
        _ => (None, None),
    };
    let device = translated
        .devices
        .iter()
        .find(|d| d.key == device_key)
        .or_else(|| {
            identity
                .devices
                .iter()
                .find(|d| d.key == device_key)
                .and_then(|d| same_device(&translated.devices, d))
        })
        .map_or_else(|| device_key.to_string(), label);
    AbOutcome {
        device_key: device_key.to_string(),
        device,
        unit,
        metric,
        translated: t,
        identity: i,
        change,
        significance,
        lab: translated.host.lab || identity.host.lab,
    }
}

/// A workload result, or completions per second over all devices.
fn rate(report: &Report, metric: &str) -> Option<f64> {
    if metric == COMPLETIONS_PER_S {
        let completions: u64 = report.devices.iter().map(|d| d.completions).sum();
        return (report.run.duration_s > 0.0).then(|| completions as f64 / report.run.duration_s);
    }
    report.run.workload.as_ref()?.results.metric(metric)
}

impl AbOutcome {
    /// `+10.4% transactions_per_s in identity, within run-to-run noise (±35.0%)`.
    pub fn gain_sentence(&self) -> String {
        let Some(change) = self.change else {
            return format!("{} not measured in both modes", self.metric);
        };
        let noise = match self.significance {
            Some(s) if s.beyond_noise => {
                format!("beyond run-to-run noise (±{:.1}%)", s.band * 100.0)
            }
            Some(s) => format!(
                "within run-to-run noise (±{:.1}%): this run cannot tell the gain from noise",
                s.band * 100.0
            ),
            None => "run-to-run noise not measurable".into(),
        };
        let lab = if self.lab && self.significance.is_some_and(|s| s.beyond_noise) {
            " (emulated lab: the rates also follow the build host's load at the time of each run)"
        } else {
            ""
        };
        format!(
            "{:+.1}% {} in identity, {noise}{lab}",
            change * 100.0,
            self.metric
        )
    }

    /// What identity spared the device per unit, from the probes (counts repeat run to run;
    /// the time is this pair of runs').
    pub fn saved_sentence(&self) -> Option<String> {
        let (t, i) = (self.translated.work.as_ref()?, self.identity.work.as_ref()?);
        let saved = t.dma_ns? - i.dma_ns?;
        let fewer = |a: Option<f64>, b: Option<f64>| a.zip(b).map_or(0.0, |(a, b)| a - b);
        Some(format!(
            "identity spared {} {} per {} in DMA map+unmap: {:.2} fewer IOMMU page-table maps \
             and {:.2} fewer IOTLB syncs",
            self.device_key,
            if saved >= 0.0 {
                human_ns(saved.round() as u64)
            } else {
                format!("-{}", human_ns((-saved).round() as u64))
            },
            self.unit,
            fewer(t.iommu_maps, i.iommu_maps),
            fewer(t.iotlb_syncs, i.iotlb_syncs),
        ))
    }

    /// The A/B section of `iommutop diagnose --ab`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "A/B on {}: the same workload on the same kernel, translated and in identity",
            self.device
        );
        for (name, mode) in [
            ("translated", &self.translated),
            ("identity", &self.identity),
        ] {
            let rate = mode
                .rate
                .map_or("not measured".into(), |r| format!("{r:.1} {}", self.metric));
            let work = mode.work.as_ref().map_or(String::new(), |w| {
                let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
                let t =
                    |v: Option<f64>| v.map_or("-".into(), |v| human_ns(v.max(0.0).round() as u64));
                format!(
                    "; per {}: {} DMA maps, {} IOMMU page-table maps, {} IOTLB syncs, {} in DMA \
                     map+unmap, {} of IOMMU work",
                    self.unit,
                    f(w.dma_maps),
                    f(w.iommu_maps),
                    f(w.iotlb_syncs),
                    t(w.dma_ns),
                    t(w.iommu_ns)
                )
            });
            let _ = writeln!(out, "  {:<10} ({}): {rate}{work}", name, mode.domain_type);
        }
        if let Some(line) = self.saved_sentence() {
            let _ = writeln!(out, "  {line}");
        }
        let _ = writeln!(out, "  difference: {}", self.gain_sentence());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::full_report;
    use crate::sample::Op;
    use serde_json::json;

    fn with_rate(mut report: Report, rate: f64, seconds: &[f64]) -> Report {
        if let Some(w) = report.run.workload.as_mut() {
            w.results = crate::results::WorkloadResults::read(
                "fio",
                json!({"read_iops": rate})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            );
        }
        let template = report.intervals[0].clone();
        report.intervals = seconds
            .iter()
            .map(|&r| {
                let mut point = template.clone();
                point.workload = Some(json!({ "read_iops": r }));
                point
            })
            .collect();
        report
    }

    #[test]
    fn both_modes_numbers_and_the_difference_are_shown() {
        let translated = with_rate(full_report(), 2000.0, &[2000.0, 2010.0, 1990.0]);
        let mut identity = with_rate(full_report(), 2400.0, &[2400.0, 2410.0, 2390.0]);
        identity.devices[0].domain_type = Some("identity".into());
        identity.devices[0]
            .ops
            .insert(Op::IommuMap, Default::default());
        let ab = ab_outcome(&translated, &identity, "0000:00:02.0");
        assert_eq!(ab.metric, "read_iops");
        assert_eq!(ab.translated.domain_type, "DMA-FQ");
        assert_eq!(ab.identity.domain_type, "identity");
        assert_eq!(ab.translated.rate, Some(2000.0));
        assert_eq!(ab.identity.rate, Some(2400.0));
        assert!(ab.significance.is_some_and(|s| s.beyond_noise));
        let text = ab.render();
        assert!(
            text.starts_with("A/B on 0000:00:02.0 (nvme0n1, nvme): the same workload"),
            "{text}"
        );
        // fio counted no reads here: the figures are per the NVMe's own completed I/O.
        assert_eq!(ab.unit, "completed I/O");
        assert!(text.contains("  translated (DMA-FQ): 2000.0 read_iops; per completed I/O: 1.00 DMA maps, 1.00 IOMMU page-table maps"), "{text}");
        assert!(text.contains("  identity   (identity): 2400.0 read_iops; per completed I/O: 1.00 DMA maps, 0.00 IOMMU page-table maps"), "{text}");
        assert!(
            text.contains("difference: +20.0% read_iops in identity, beyond run-to-run noise"),
            "{text}"
        );
    }

    #[test]
    fn a_noisy_difference_is_called_noise() {
        let translated = with_rate(full_report(), 2000.0, &[1000.0, 3000.0, 2000.0]);
        let identity = with_rate(full_report(), 2200.0, &[1200.0, 3200.0, 2200.0]);
        let ab = ab_outcome(&translated, &identity, "0000:00:02.0");
        assert!(
            ab.gain_sentence()
                .ends_with("this run cannot tell the gain from noise"),
            "{}",
            ab.gain_sentence()
        );
    }
}
