//! `iommutop compare A B`: lines up two reports (two kernels, two modes, two dates) and explains
//! the difference.
//!
//! - **Host** ([`HostDifference`]): the kernel, the IOMMU, the default domain type, the IOMMU
//!   parameters of the command line and the IOMMU kernel config, each with the [`Role`] it plays:
//!   deciding whether DMA is translated at all, strict or lazy invalidation, translation cost, or
//!   only context.
//! - **Devices** ([`DeviceChange`]): per device, the work per unit in A and B — DMA maps, IOMMU
//!   page-table maps, IOTLB syncs and invalidations, time — and each device's share of the
//!   translation-time gap. A device's unit is the workload's (transaction, read) where the
//!   workload drove it, else its own completed I/O or packet ([`WorkUnits::of_device`]).
//! - **Workload** ([`MetricChange`]): the workload's own numbers, judged against the run-to-run
//!   noise measured in each report's interval samples ([`noise`]).
//! - **Findings** ([`explain`]): the sentences, ranked by share of the gap, that name a cause only
//!   where the reports show one; `render` prints them with the tables as text.
//!
//! Thresholds for CI are in [`threshold`].

pub mod counts;
pub mod explain;
pub mod host;
pub mod markdown;
pub mod noise;
pub mod numbers;
pub mod path;
pub mod text;
pub mod threshold;
pub mod untimed;
pub mod work;

pub use counts::{count_changed, uncounted};
pub use explain::{Figure, Finding, FindingKind};
pub use host::{
    config_role, config_role_for, config_vendor, iommu_description, HostDifference, Role, DMA_PATH,
};
pub use noise::{NoiseSource, Significance, Spread};
pub use numbers::Numbers;
pub use threshold::{Evaluation, Threshold, ThresholdError};
pub use work::{work_units, DeviceWork, WorkUnits, COMPLETIONS_PER_S};

use crate::report::Report;
use crate::sample::Op;
use crate::snapshot::Device;
use counts::{counts_changed, CountSlack};
use host::{host_differences, iommu_params};
use serde::Serialize;
use std::collections::BTreeMap;
use work::{label, same_device};

/// How a device's translation differs between the runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Transition {
    /// Translated in both runs.
    Both,
    /// Translated in neither.
    Neither,
    /// Translated only in B.
    OnlyB,
    /// Translated only in A.
    OnlyA,
}

/// One device in both runs (or in one of them).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceChange {
    pub key: String,
    /// `0000:00:05.0 (eth0, e1000e)`
    pub label: String,
    pub is_nic: bool,
    pub a: Option<DeviceWork>,
    pub b: Option<DeviceWork>,
    pub transition: Transition,
    /// Translation differs beyond noise: translated in one run only, another domain type, more
    /// or fewer maps, syncs or invalidations per unit, or time per unit beyond its noise.
    pub changed: bool,
    /// Change in translation time per unit (B - A), ns, in the comparison's `unit`: per second
    /// when the devices do not all count in one unit.
    pub gap_ns: f64,
    /// `|gap_ns|` over the sum over the devices that changed; `None` for the others.
    pub share_of_gap: Option<f64>,
    /// Time in DMA map and unmap per unit, A vs B, judged against its interval noise.
    pub dma_time: Option<Significance>,
    /// A count per unit differs by more than the runs' probes may have missed of it.
    pub counts_changed: bool,
    /// Change in translation time per unit of the workload (B - A), ns, when the workload drove
    /// the device in each run it is in: what the time per unit of the workload can owe it.
    #[serde(skip)]
    pub workload_gap_ns: Option<f64>,
}

impl DeviceChange {
    /// What the device's figures are per: its unit in both runs (`transaction`, `completed
    /// I/O`), or `packet in A, transaction in B` when the runs count it in different units.
    pub fn unit(&self) -> String {
        match (&self.a, &self.b) {
            (Some(a), Some(b)) if a.unit != b.unit => format!("{} in A, {} in B", a.unit, b.unit),
            (Some(w), _) | (None, Some(w)) => w.unit.clone(),
            (None, None) => "completed I/O".into(),
        }
    }

    /// Whether A's and B's figures of the device are in the same unit (or it is in one run).
    pub fn like_for_like(&self) -> bool {
        match (&self.a, &self.b) {
            (Some(a), Some(b)) => a.unit == b.unit,
            _ => true,
        }
    }
}

/// `device_unit` when the devices count in different units.
pub const OWN_UNITS: &str = "device's own unit";

/// A workload number in A and B.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricChange {
    pub metric: String,
    pub a: f64,
    pub b: f64,
    /// `(b - a) / a`, when `a` is not zero.
    pub change: Option<f64>,
    pub significance: Option<Significance>,
    /// The workload's headline rate (transactions per second, reads per second).
    pub headline: bool,
}

/// One side of the comparison, in a line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    pub kernel: Option<String>,
    /// `intel (dmar0), default domain DMA-FQ` or `none`.
    pub iommu: String,
    /// `intel_iommu=on iommu.passthrough=1`, the IOMMU parameters of the command line.
    pub iommu_parameters: String,
    /// `netperf`, `fio`, or the command.
    pub workload: Option<String>,
    pub started_at: String,
    pub duration_s: f64,
    pub units: WorkUnits,
}

impl Side {
    /// What this run was, for a line that introduces it: kernel, IOMMU, its parameters, workload.
    pub fn description(&self) -> Vec<String> {
        let mut parts = vec![
            format!("kernel {}", self.kernel.as_deref().unwrap_or("unknown")),
            format!("IOMMU {}", self.iommu),
        ];
        if !self.iommu_parameters.is_empty() {
            parts.push(self.iommu_parameters.clone());
        }
        if let Some(workload) = &self.workload {
            parts.push(format!("workload {workload}"));
        }
        parts
    }
}

/// Everything `compare` found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub a: Side,
    pub b: Side,
    pub host: Vec<HostDifference>,
    /// Devices with DMA in either run, largest share of the gap first.
    pub devices: Vec<DeviceChange>,
    pub workload: Vec<MetricChange>,
    /// What the differences mean, most important first.
    pub findings: Vec<Finding>,
    /// What the per-device gaps (`devices[].gap_ns`) are per: the unit every device counts in
    /// (`transaction`, `read`, `completed I/O`, `packet`), or `second` when they count in
    /// different units (a device the workload drove and one it did not, or A and B in different
    /// units).
    pub unit: String,
    /// What the per-device figures (`devices[].a`, `devices[].b`) are per: the unit every device
    /// counts in, `completed I/O in A, transaction in B` when every device counts so, else
    /// [`OWN_UNITS`] (each device's `a.unit` and `b.unit` say it).
    pub device_unit: String,
    /// A and B are not like for like: they ran different workloads or measured different devices.
    pub warnings: Vec<String>,
    /// A report came from the iommutop lab (emulated: times vary with the build host's load).
    pub lab: bool,
    /// What the noise judgements were measured over.
    pub noise: NoiseBasis,
}

/// Where `compare` took its noise from: the spread across repeated runs when both reports have
/// at least two (`run --runs N`), else the spread of each run's interval samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NoiseBasis {
    pub source: NoiseSource,
    /// Measured runs in A and B (1 for a report of one run).
    pub runs_a: usize,
    pub runs_b: usize,
}

impl NoiseBasis {
    pub fn of(a: &Report, b: &Report) -> NoiseBasis {
        let runs = |r: &Report| r.repeats.as_ref().map_or(1, |r| r.runs.len());
        NoiseBasis {
            source: if noise::repeats_of(a, b).is_some() {
                NoiseSource::Repeats
            } else {
                NoiseSource::Intervals
            },
            runs_a: runs(a),
            runs_b: runs(b),
        }
    }

    /// `noise: across repeated runs (5 in A, 5 in B), ...`, one line without a full stop.
    pub fn sentence(&self) -> String {
        match self.source {
            NoiseSource::Repeats => format!(
                "noise: measured across repeated runs ({} in A, {} in B; Welch's t at 95%)",
                self.runs_a, self.runs_b
            ),
            NoiseSource::Intervals if self.runs_a > 1 || self.runs_b > 1 => format!(
                "noise: estimated from each run's interval samples (repeats need two or more runs \
                 in both reports: {} in A, {} in B)",
                self.runs_a, self.runs_b
            ),
            NoiseSource::Intervals => "noise: estimated from each run's interval samples \
                                       (`iommutop run --runs N` measures it across repeats)"
                .to_string(),
        }
    }
}

/// Compares A (the baseline) with B.
pub fn compare(a: &Report, b: &Report) -> Comparison {
    let units = (work_units(a), work_units(b));
    let common = common_unit(&units.0, &units.1);
    let host = host_differences(a, b);
    let (devices, unit) = device_changes(a, b, &units);
    let unit = match unit {
        GapUnit::Common(unit) => Some(unit),
        GapUnit::Second => None,
        GapUnit::NoDevice => common.clone(),
    };
    let workload = workload_changes(a, b, &units.0, &units.1);
    let device_unit = device_unit(&devices).unwrap_or_else(|| {
        common
            .clone()
            .unwrap_or_else(|| format!("{} in A, {} in B", units.0.unit, units.1.unit))
    });
    let warnings = unlike_runs(a, b, &units, &devices);
    let mut comparison = Comparison {
        a: side(a, units.0),
        b: side(b, units.1),
        host,
        devices,
        workload,
        findings: Vec::new(),
        unit: unit.unwrap_or_else(|| "second".into()),
        device_unit,
        warnings,
        lab: a.host.lab || b.host.lab,
        noise: NoiseBasis::of(a, b),
    };
    comparison.findings = explain::findings(&comparison);
    comparison
}

/// What ran: the workload's name, or the command's program; `nothing` for neither.
fn workload_kind(report: &Report) -> String {
    if let Some(workload) = &report.run.workload {
        return workload.name.clone();
    }
    report
        .run
        .command
        .first()
        .map_or("nothing".into(), |program| {
            program.rsplit('/').next().unwrap_or(program).to_string()
        })
}

/// Warnings that A and B are not like for like: different workloads (or units of work), with
/// the devices whose figures are per one unit in A and another in B; or devices with DMA in one
/// run only.
fn unlike_runs(
    a: &Report,
    b: &Report,
    units: &(WorkUnits, WorkUnits),
    devices: &[DeviceChange],
) -> Vec<String> {
    let mut warnings = Vec::new();
    let (ka, kb) = (workload_kind(a), workload_kind(b));
    if ka != kb || units.0.unit != units.1.unit {
        let mut warning = format!("A and B ran different workloads ({ka} in A, {kb} in B)");
        // The devices counted in one unit in A and another in B, by that pair of units.
        let mut unlike: Vec<((&str, &str), Vec<&str>)> = Vec::new();
        for d in devices {
            let (Some(wa), Some(wb)) = (&d.a, &d.b) else {
                continue;
            };
            if wa.unit == wb.unit {
                continue;
            }
            let pair = (wa.unit.as_str(), wb.unit.as_str());
            match unlike.iter_mut().find(|(p, _)| *p == pair) {
                Some((_, keys)) => keys.push(&d.key),
                None => unlike.push((pair, vec![&d.key])),
            }
        }
        let clauses: Vec<String> = unlike
            .iter()
            .map(|((ua, ub), keys)| {
                format!(
                    "the figures of {} are per {ua} in A and per {ub} in B",
                    keys.join(" and ")
                )
            })
            .collect();
        if !clauses.is_empty() {
            warning.push_str(&format!(
                ": {}, which do not compare one to one",
                clauses.join("; ")
            ));
        }
        warnings.push(warning);
    }
    let with_dma = |r: &Report| -> Vec<String> {
        r.devices
            .iter()
            .filter(|d| d.kind == crate::snapshot::RowKind::Pci && d.op(Op::DmaMap).count > 0)
            .map(|d| d.key.to_string())
            .collect()
    };
    let (da, db) = (with_dma(a), with_dma(b));
    let only_a: Vec<&str> = da
        .iter()
        .filter(|k| !db.contains(k))
        .map(String::as_str)
        .collect();
    let only_b: Vec<&str> = db
        .iter()
        .filter(|k| !da.contains(k))
        .map(String::as_str)
        .collect();
    if !only_a.is_empty() || !only_b.is_empty() {
        let mut parts = Vec::new();
        if !only_a.is_empty() {
            parts.push(format!("{} only in A", only_a.join(", ")));
        }
        if !only_b.is_empty() {
            parts.push(format!("{} only in B", only_b.join(", ")));
        }
        warnings.push(format!(
            "A and B measured different devices ({}): a device in one run only is not like for like",
            parts.join("; ")
        ));
    }
    warnings
}

/// What the devices' figures are per, if they all count in one unit (or none is compared):
/// that unit, else [`OWN_UNITS`].
fn device_unit(devices: &[DeviceChange]) -> Option<String> {
    let first = devices.first()?.unit();
    Some(if devices.iter().all(|d| d.unit() == first) {
        first
    } else {
        OWN_UNITS.into()
    })
}

/// The workload's unit, if both runs count their work in the same one.
pub fn common_unit(a: &WorkUnits, b: &WorkUnits) -> Option<String> {
    match (a.count, b.count) {
        (Some(_), Some(_)) if a.unit == b.unit => Some(a.unit.clone()),
        (None, None) => Some(a.unit.clone()),
        _ => None,
    }
}

fn side(report: &Report, units: WorkUnits) -> Side {
    let host = &report.host;
    let iommu = iommu_description(host);
    let parameters: Vec<String> = iommu_params(report)
        .into_iter()
        .map(|(k, v)| if v.is_empty() { k } else { format!("{k}={v}") })
        .collect();
    Side {
        kernel: host.kernel_release.clone(),
        iommu,
        iommu_parameters: parameters.join(" "),
        workload: report
            .run
            .workload
            .as_ref()
            .map(|w| w.name.clone())
            .or_else(|| {
                (!report.run.command.is_empty()).then(|| crate::shell::join(&report.run.command))
            }),
        started_at: report.run.started_at.clone(),
        duration_s: report.run.duration_s,
        units,
    }
}

/// What the devices' gaps are per.
enum GapUnit {
    /// The unit every device counts in, in both runs.
    Common(String),
    /// The devices count in different units: translation time per second of each run.
    Second,
    /// No device to compare.
    NoDevice,
}

/// A device's translation time (ns) per `count` units, or per second of the run without one.
fn translation_per(d: &Device, report: &Report, count: Option<f64>) -> f64 {
    let ns = d.derived.translation_ns.unwrap_or(0) as f64;
    match count.filter(|c| *c > 0.0) {
        Some(count) => ns / count,
        None => ns / report.run.duration_s.max(f64::MIN_POSITIVE),
    }
}

/// Every device with DMA in either run, in A and B, largest share of the gap first; and what
/// the gaps are per.
fn device_changes(
    a: &Report,
    b: &Report,
    units: &(WorkUnits, WorkUnits),
) -> (Vec<DeviceChange>, GapUnit) {
    let busy = |d: &&Device| d.op(Op::DmaMap).count > 0 && d.pci_address.is_some();
    let mut rows: Vec<&Device> = b.devices.iter().filter(busy).collect();
    rows.extend(
        a.devices
            .iter()
            .filter(busy)
            .filter(|d| same_device(&b.devices, d).is_none()),
    );
    let pairs: Vec<(&Device, Option<&Device>, Option<&Device>)> = rows
        .into_iter()
        .map(|row| {
            (
                row,
                same_device(&a.devices, row),
                same_device(&b.devices, row),
            )
        })
        .collect();
    let mut changes: Vec<DeviceChange> = pairs
        .iter()
        .map(|&(row, da, db)| {
            let wa = da.map(|d| DeviceWork::of(d, &units.0));
            let wb = db.map(|d| DeviceWork::of(d, &units.1));
            let translated = |w: &Option<DeviceWork>| w.as_ref().is_some_and(|w| w.translated);
            let transition = match (translated(&wa), translated(&wb)) {
                (true, true) => Transition::Both,
                (false, false) => Transition::Neither,
                (false, true) => Transition::OnlyB,
                (true, false) => Transition::OnlyA,
            };
            let mut change = DeviceChange {
                changed: false,
                key: row.key.to_string(),
                label: label(db.or(da).unwrap_or(row)),
                is_nic: db.or(da).is_some_and(is_nic),
                a: wa,
                b: wb,
                transition,
                gap_ns: 0.0,
                share_of_gap: None,
                dma_time: None,
                counts_changed: false,
                workload_gap_ns: None,
            };
            let like = change.like_for_like();
            // Per-unit figures judged against each other only when A's and B's are in one unit.
            change.dma_time = match (da, db, &change.a, &change.b) {
                (Some(da), Some(db), Some(wa), Some(wb)) if like => {
                    wa.dma_ns.zip(wb.dma_ns).and_then(|times| {
                        noise::judge_device((a, &da.key), (b, &db.key), times, wa.of_workload)
                    })
                }
                _ => None,
            };
            let divisor = |d: Option<&Device>, u: &WorkUnits| d.and_then(|d| u.of_device(d).count);
            change.counts_changed = like
                && counts_changed(
                    change.a.as_ref(),
                    change.b.as_ref(),
                    &CountSlack::of(
                        (a, da.map(|d| &d.key)),
                        (b, db.map(|d| &d.key)),
                        (divisor(da, &units.0), divisor(db, &units.1)),
                    ),
                );
            change.changed = transition == Transition::OnlyA
                || transition == Transition::OnlyB
                || change.a.as_ref().map(|w| &w.domain_type)
                    != change.b.as_ref().map(|w| &w.domain_type)
                || change.dma_time.is_some_and(|s| s.beyond_noise)
                || change.counts_changed;
            change.workload_gap_ns = workload_gap((a, da), (b, db), units);
            change
        })
        .collect();
    let first = changes.first().map(DeviceChange::unit);
    let gap_unit = match first {
        None => GapUnit::NoDevice,
        Some(unit)
            if changes
                .iter()
                .all(|c| c.like_for_like() && c.unit() == unit) =>
        {
            GapUnit::Common(unit)
        }
        Some(_) => GapUnit::Second,
    };
    for (change, &(_, da, db)) in changes.iter_mut().zip(&pairs) {
        let per = |d: Option<&Device>, report: &Report, u: &WorkUnits| {
            d.map_or(0.0, |d| {
                let count = match gap_unit {
                    GapUnit::Common(_) => u.of_device(d).count,
                    _ => None,
                };
                translation_per(d, report, count)
            })
        };
        change.gap_ns = per(db, b, &units.1) - per(da, a, &units.0);
    }
    let total: f64 = changes
        .iter()
        .filter(|c| c.changed)
        .map(|c| c.gap_ns.abs())
        .sum();
    for change in changes.iter_mut().filter(|c| c.changed) {
        change.share_of_gap = (total > 0.0).then(|| change.gap_ns.abs() / total);
    }
    changes.sort_by(|x, y| {
        y.share_of_gap
            .unwrap_or(0.0)
            .total_cmp(&x.share_of_gap.unwrap_or(0.0))
            .then_with(|| x.key.cmp(&y.key))
    });
    (changes, gap_unit)
}

/// A device's change in translation time per unit of the workload, when A and B count their
/// work in the same unit and the workload drove the device in each run it is in (a run it is
/// absent from adds nothing); `None` otherwise.
fn workload_gap(
    (a, da): (&Report, Option<&Device>),
    (b, db): (&Report, Option<&Device>),
    units: &(WorkUnits, WorkUnits),
) -> Option<f64> {
    common_unit(&units.0, &units.1)?;
    let per = |d: Option<&Device>, report: &Report, u: &WorkUnits| match d {
        None => Some(0.0),
        Some(d) if u.drove(d) => Some(translation_per(d, report, u.count)),
        Some(_) => None,
    };
    Some(per(db, b, &units.1)? - per(da, a, &units.0)?)
}

/// A network device: its row folded in a netdev's completions, or its driver is a NIC's.
fn is_nic(d: &Device) -> bool {
    d.names.iter().any(|n| {
        n.starts_with("eth") || n.starts_with("en") || n.starts_with("wl") || n.starts_with("ib")
    }) || matches!(
        d.driver.as_deref(),
        Some(
            "e1000e"
                | "e1000"
                | "igb"
                | "ixgbe"
                | "i40e"
                | "ice"
                | "mlx5_core"
                | "bnxt_en"
                | "virtio_net"
        )
    )
}

fn workload_changes(a: &Report, b: &Report, ua: &WorkUnits, ub: &WorkUnits) -> Vec<MetricChange> {
    let mut metrics: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    if let (Some(wa), Some(wb)) = (&a.run.workload, &b.run.workload) {
        // How long the workload ran is a parameter of the comparison, not a result.
        let durations = ["elapsed_s", "duration_s", "runtime_s"];
        let numbers_b = wb.results.numbers();
        for (key, va) in wa
            .results
            .numbers()
            .into_iter()
            .filter(|(k, _)| !durations.contains(&k.as_str()))
        {
            if let Some(vb) = numbers_b.get(&key) {
                metrics.insert(key, (va, *vb));
            }
        }
    }
    let completions = |r: &Report| {
        r.devices.iter().map(|d| d.completions as f64).sum::<f64>()
            / r.run.duration_s.max(f64::MIN_POSITIVE)
    };
    metrics
        .entry(COMPLETIONS_PER_S.into())
        .or_insert((completions(a), completions(b)));
    let headline = ua
        .rate_metric
        .clone()
        .filter(|m| ub.rate_metric.as_ref() == Some(m) && metrics.contains_key(m))
        .unwrap_or_else(|| COMPLETIONS_PER_S.to_string());
    let mut changes: Vec<MetricChange> = metrics
        .into_iter()
        .map(|(metric, (va, vb))| MetricChange {
            change: (va != 0.0).then(|| (vb - va) / va),
            significance: noise::judge_workload(a, b, &metric, va, vb),
            headline: metric == headline,
            metric,
            a: va,
            b: vb,
        })
        .collect();
    share_verdicts_with_twins(&mut changes);
    changes.sort_by_key(|c| !c.headline);
    changes
}

/// Workload results derived from one measured rate: a count is the rate times the run's length,
/// a bandwidth the rate times the I/O size. They move together, so they carry the verdict of the
/// rate they come from (its interval samples are the ones that measure the noise).
const DERIVED_TWINS: &[(&str, &[&str])] = &[
    ("transactions_per_s", &["transactions"]),
    ("iops", &["bw_bytes_per_s", "ios"]),
];

fn share_verdicts_with_twins(changes: &mut [MetricChange]) {
    for (rate, twins) in DERIVED_TWINS {
        let Some(verdict) = changes
            .iter()
            .find(|c| c.metric == *rate)
            .map(|c| c.significance)
        else {
            continue;
        };
        for change in changes
            .iter_mut()
            .filter(|c| twins.contains(&c.metric.as_str()))
        {
            change.significance = verdict;
        }
    }
}

#[cfg(test)]
mod tests;
