//! What `iommutop diagnose` found, as data: the system facts, the verdict, the `--ab` outcome,
//! the comparison with `--baseline` and the run's report. Every `--format` is rendered from it:
//! the text here, the JSON by serde (docs/diagnose.schema.json), the Markdown in [`markdown`] and
//! the page in `crate::html::render_diagnosis`.

pub mod markdown;

use super::{dma_devices, per, render_system, verdict, AbOutcome};
use crate::compare::work::{label, work_units, DeviceWork, WorkUnits};
use crate::compare::{compare, Comparison};
use crate::facts::HostFacts;
use crate::report::Report;
use serde::Serialize;

/// The verdict of a machine whose DMA no IOMMU translates (nothing is run).
pub const NO_IOMMU_VERDICT: &str = "verdict: no IOMMU translates DMA on this machine, so \
translation costs nothing here. To measure it, boot with intel_iommu=on (or amd_iommu=on), or run \
`sudo scripts/demo` for the lab.";

#[derive(Debug, Clone, Serialize)]
pub struct Diagnosis {
    /// What sysfs and procfs say about the host.
    pub facts: HostFacts,
    /// The system section, as the text prints it, a line each.
    pub system: Vec<String>,
    /// The verdict, as the text prints it, a line each.
    pub verdict: Vec<String>,
    /// What the work figures of the devices the workload drove are per: the workload's unit
    /// (`transaction`), or `completed I/O` when it counted none. Each device's own is its
    /// `work.unit`: a device the workload did not drive counts per its own I/O.
    pub unit: String,
    /// The devices the verdict is about, busiest first, with their work per unit.
    pub devices: Vec<DiagnosedDevice>,
    /// `--ab`: the workload translated and in identity.
    pub ab: Option<AbOutcome>,
    /// `--baseline`: the earlier report against this run.
    pub baseline: Option<Baseline>,
    /// The run's report; `None` when nothing ran (no IOMMU).
    pub report: Option<Report>,
}

/// A device of the verdict and its work per unit of the workload.
#[derive(Debug, Clone, Serialize)]
pub struct DiagnosedDevice {
    pub key: String,
    /// `0000:00:05.0 (eth0, e1000e)`.
    pub label: String,
    pub work: DeviceWork,
}

/// `--baseline OLD.json`: that report (A) against this run (B).
#[derive(Debug, Clone, Serialize)]
pub struct Baseline {
    /// The file, as given.
    pub file: String,
    pub comparison: Comparison,
}

/// The name of this run in the comparison with the baseline.
pub const THIS_RUN: &str = "this run";

impl Diagnosis {
    /// A machine without an IOMMU: its facts and the verdict that translation costs nothing.
    pub fn without_iommu(facts: HostFacts) -> Diagnosis {
        Diagnosis {
            system: lines(&render_system(&facts)),
            facts,
            verdict: vec![NO_IOMMU_VERDICT.to_string()],
            unit: per(&WorkUnits::completions()),
            devices: Vec::new(),
            ab: None,
            baseline: None,
            report: None,
        }
    }

    /// The diagnosis of a run: `device` narrows the verdict to one device, `ab` is `--ab`'s
    /// outcome, `baseline` the earlier report (and its file name) to compare the run with.
    pub fn of_run(
        facts: HostFacts,
        report: Report,
        device: Option<&str>,
        ab: Option<AbOutcome>,
        baseline: Option<(&str, &Report)>,
    ) -> Diagnosis {
        let units = work_units(&report);
        let devices = dma_devices(&report, device)
            .into_iter()
            .map(|d| DiagnosedDevice {
                key: d.key.to_string(),
                label: label(d),
                work: DeviceWork::of(d, &units),
            })
            .collect();
        Diagnosis {
            system: lines(&render_system(&facts)),
            facts,
            verdict: lines(&verdict(&report, device, ab.as_ref())),
            unit: per(&units),
            devices,
            ab,
            baseline: baseline.map(|(file, old)| Baseline {
                file: file.to_string(),
                comparison: compare(old, &report),
            }),
            report: Some(report),
        }
    }

    /// The whole text: the system section, then [`Diagnosis::render_outcome`].
    pub fn render_text(&self) -> String {
        joined(&self.system) + &self.render_outcome()
    }

    /// What the text prints after the system section (which `diagnose` prints before it runs
    /// anything): the verdict, the A/B section and the comparison with the baseline.
    pub fn render_outcome(&self) -> String {
        let mut out = format!("\n{}", joined(&self.verdict));
        if let Some(ab) = &self.ab {
            out.push('\n');
            out.push_str(&ab.render());
        }
        if let Some(baseline) = &self.baseline {
            out.push_str(&format!(
                "\nagainst the baseline (A: {}, B: {THIS_RUN}):\n",
                baseline.file
            ));
            out.push_str(
                &baseline
                    .comparison
                    .render((baseline.file.as_str(), THIS_RUN)),
            );
        }
        out
    }
}

impl Diagnosis {
    /// The devices of the verdict as a table, for the Markdown and the page: the headers, each
    /// naming its unit, and a row of cells per device (`-` where not measured). Devices that
    /// count in different units get a `per` column, and the headers say `per unit`.
    pub fn devices_table(&self) -> (Vec<String>, Vec<Vec<String>>) {
        let first = self.devices.first().map(|d| d.work.unit.as_str());
        let one_unit = self
            .devices
            .iter()
            .all(|d| Some(d.work.unit.as_str()) == first);
        let unit = match first {
            Some(unit) if one_unit => unit,
            _ => "unit",
        };
        let mut headers = vec![
            "device".to_string(),
            "domain".to_string(),
            "translated".to_string(),
            format!("DMA maps per {unit}"),
            format!("IOTLB syncs per {unit}"),
            format!("DMA map+unmap, ns per {unit}"),
            format!("IOMMU work, ns per {unit}"),
            "CPU, % of one".to_string(),
            "switched out, % of DMA map+unmap".to_string(),
        ];
        if !one_unit {
            headers.insert(3, "per".to_string());
        }
        let number = |value: Option<f64>, decimals: usize| {
            value.map_or("-".into(), |v| format!("{v:.decimals$}"))
        };
        let rows = self
            .devices
            .iter()
            .map(|device| {
                let w = &device.work;
                let mut row = vec![
                    device.label.clone(),
                    w.domain_type
                        .clone()
                        .unwrap_or_else(|| "no IOMMU group".into()),
                    if w.translated { "yes" } else { "no" }.to_string(),
                    number(w.dma_maps, 2),
                    number(w.iotlb_syncs, 2),
                    number(w.dma_ns, 0),
                    number(w.iommu_ns, 0),
                    number(w.cpu_share.map(|s| s * 100.0), 2),
                    number(w.dma_waiting_share.map(|s| s * 100.0), 1),
                ];
                if !one_unit {
                    row.insert(3, w.unit.clone());
                }
                row
            })
            .collect();
        (headers, rows)
    }
}

/// Text as lines, without their line breaks.
fn lines(text: &str) -> Vec<String> {
    text.lines().map(str::to_string).collect()
}

/// Lines as text, each ending in a line break.
fn joined(lines: &[String]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[cfg(test)]
mod tests;
