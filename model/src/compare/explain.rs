//! What the differences between two reports mean, in sentences, ranked by their share of the
//! translation-time gap (the text `iommutop compare` prints them in is in [`super::text`]).
//!
//! The rules keep to what the reports show:
//! - A device translated in one run and not the other is the strongest finding; its cause is the
//!   host difference that decides translation (command line, kernel config, IOMMU presence,
//!   default domain type), else the device's own group type (changed at run time), else none is
//!   named.
//! - Strict against lazy invalidation is named with the host difference that decides it.
//! - A change in a device's translation time per unit is reported only beyond its interval
//!   noise; host differences that can change that cost are listed as candidates, not as the cause.
//! - Counts per unit (maps, syncs, invalidations) repeat run to run, so a change in them is real.
//! - A finding about devices is about devices that count in one unit (the workload's, or each
//!   one's own completed I/O or packet): devices in different units make a finding each, so
//!   that no figure adds one unit to another.
//! - The workload's change is judged against its noise. Within noise, no cause is claimed.
//!   Beyond noise, translation is credited only with the share of the time per unit that its own
//!   change accounts for.

use super::{Comparison, DeviceChange, HostDifference, MetricChange, Numbers, Role, Transition};
use iommutop_abi::units::human_ns;
use serde::Serialize;
use std::fmt::Write;

/// What kind of difference a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// Devices translated in one run only.
    Translation,
    /// Strict against lazy invalidation.
    Invalidation,
    /// Both runs translate, through different kernel code (an era's own DMA ops).
    CodePath,
    /// Translation time per unit changed beyond noise.
    Cost,
    /// Maps, syncs or invalidations per unit changed.
    Counts,
    /// The workload's headline number.
    Workload,
    /// No translation difference at all.
    Same,
    /// A device's DMA calls spent a notable share of their time switched out in either run:
    /// waiting, apart from the on-CPU times compared.
    Waiting,
}

/// One thing `compare` says, with the evidence under it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub kind: FindingKind,
    /// Share of the translation-time gap of the devices it is about.
    pub share_of_gap: Option<f64>,
    pub headline: String,
    pub details: Vec<String>,
    /// What `a` and `b` measure: the workload's number, or the time in DMA map and unmap per
    /// unit of the finding's devices (summed).
    pub quantity: String,
    /// The unit of `a`, `b` and `change`: `ns per transaction`, `transaction/s`, `%`.
    pub unit: String,
    #[serde(flatten)]
    pub numbers: Numbers,
    /// The numbers the details give in sentences, one per figure.
    pub figures: Vec<Figure>,
}

/// One number of a finding's details, for machines: what it is, in A and B, and its change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    /// The device it is of (its key); `None` for a figure of the whole run.
    pub device: Option<String>,
    /// What it counts or times, as the details name it (`IOTLB syncs`, `IOMMU work`).
    pub what: String,
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// `b - a`; `None` when either side is unknown.
    pub change: Option<f64>,
    /// `per transaction`, `ns per transaction`, `%`.
    pub unit: String,
}

impl Figure {
    fn new(
        device: Option<&str>,
        what: &str,
        (a, b): (Option<f64>, Option<f64>),
        unit: String,
    ) -> Figure {
        Figure {
            device: device.map(str::to_string),
            what: what.to_string(),
            a,
            b,
            change: a.zip(b).map(|(a, b)| b - a),
            unit,
        }
    }
}

/// Said under a time or throughput change between lab runs.
const LAB_CAVEAT: &str = "the runs are emulated (iommutop lab): their times and rates follow the \
build host's load at the time of each run, which no interval sample shows; counts do not";

/// The findings of a comparison, most important first.
pub fn findings(c: &Comparison) -> Vec<Finding> {
    let mut out = Vec::new();
    for (transition, on, off) in [(Transition::OnlyB, "B", "A"), (Transition::OnlyA, "A", "B")] {
        let devices = by_key(
            c.devices
                .iter()
                .filter(|d| d.transition == transition)
                .collect(),
        );
        for (unit, devices) in by_unit(&devices) {
            out.push(translation_finding(c, &devices, &unit, (on, off)));
        }
    }
    out.extend(code_path_findings(c));
    out.extend(invalidation_findings(c));
    out.extend(cost_findings(c));
    out.extend(count_findings(c));
    out.sort_by(|x, y| {
        y.share_of_gap
            .unwrap_or(0.0)
            .total_cmp(&x.share_of_gap.unwrap_or(0.0))
    });
    if out.is_empty() {
        out.push(same_finding(c));
    }
    out.extend(waiting_findings(c));
    if let Some(metric) = c.workload.iter().find(|m| m.headline) {
        out.insert(0, workload_finding(c, metric));
    }
    out
}

/// The devices of one finding in address order (the findings themselves go by share of the gap).
fn by_key(mut devices: Vec<&DeviceChange>) -> Vec<&DeviceChange> {
    devices.sort_by(|a, b| a.key.cmp(&b.key));
    devices
}

/// `devices` (in address order) in groups that count in one unit, each with that unit, the
/// groups in the order of their first device.
fn by_unit<'a>(devices: &[&'a DeviceChange]) -> Vec<(String, Vec<&'a DeviceChange>)> {
    let mut groups: Vec<(String, Vec<&DeviceChange>)> = Vec::new();
    for d in devices {
        let unit = d.unit();
        match groups.iter_mut().find(|(u, _)| *u == unit) {
            Some((_, group)) => group.push(d),
            None => groups.push((unit, vec![d])),
        }
    }
    groups
}

/// `the NICs 0000:00:05.0 (eth0, e1000e) and 0000:00:06.0 (eth1, e1000e)`.
fn who(devices: &[&DeviceChange]) -> String {
    let labels: Vec<&str> = devices.iter().map(|d| d.label.as_str()).collect();
    let kind = match (devices.iter().all(|d| d.is_nic), devices.len()) {
        (true, 1) => "the NIC ",
        (true, _) => "the NICs ",
        _ => "",
    };
    let list = match labels.as_slice() {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    };
    format!("{kind}{list}")
}

fn host_causes(c: &Comparison, role: Role) -> Vec<&HostDifference> {
    c.host.iter().filter(|h| h.role == role).collect()
}

/// `identity in A, DMA-FQ in B` for the devices' group types, if they differ.
fn domain_change(devices: &[&DeviceChange]) -> Vec<String> {
    devices
        .iter()
        .filter_map(|d| {
            let ta =
                d.a.as_ref()?
                    .domain_type
                    .clone()
                    .unwrap_or_else(|| "no IOMMU group".into());
            let tb =
                d.b.as_ref()?
                    .domain_type
                    .clone()
                    .unwrap_or_else(|| "no IOMMU group".into());
            (ta != tb).then(|| format!("{}: group type {ta} in A, {tb} in B", d.key))
        })
        .collect()
}

pub(super) fn f2(value: Option<f64>) -> String {
    value.map_or("-".into(), |v| format!("{v:.2}"))
}

pub(super) fn ns(value: Option<f64>) -> String {
    value.map_or("-".into(), |v| human_ns(v.max(0.0).round() as u64))
}

/// A device's figures per unit, A and B: the counts, then the times (ns) either run measured.
fn work_figures(d: &DeviceChange) -> Vec<Figure> {
    let pick = |f: fn(&super::DeviceWork) -> Option<f64>| {
        (d.a.as_ref().and_then(f), d.b.as_ref().and_then(f))
    };
    let unit = d.unit();
    let per = format!("per {unit}");
    let ns_per = format!("ns per {unit}");
    let counts = [
        ("DMA maps", pick(|w| w.dma_maps)),
        ("IOMMU page-table maps", pick(|w| w.iommu_maps)),
        ("IOTLB syncs", pick(|w| w.iotlb_syncs)),
        ("IOTLB invalidations", pick(|w| w.iotlb_flushes)),
    ];
    let times = [
        ("IOMMU work", pick(|w| w.iommu_ns)),
        ("time in DMA map+unmap", pick(|w| w.dma_ns)),
    ];
    let counts = counts
        .into_iter()
        .map(|(what, pair)| Figure::new(Some(d.key.as_str()), what, pair, per.clone()));
    let times = times
        .into_iter()
        .filter(|(_, (a, b))| a.is_some() || b.is_some())
        .map(|(what, pair)| Figure::new(Some(d.key.as_str()), what, pair, ns_per.clone()));
    counts.chain(times).collect()
}

/// `per transaction, A → B: IOMMU page-table maps 0.00 → 3.00, ...`: [`work_figures`] as text.
pub(super) fn work_line(d: &DeviceChange) -> String {
    let parts: Vec<String> = work_figures(d)
        .iter()
        .map(|f| {
            let show = if f.unit.starts_with("ns ") { ns } else { f2 };
            format!("{} {} → {}", f.what, show(f.a), show(f.b))
        })
        .collect();
    format!("{} per {}, A → B: {}", d.label, d.unit(), parts.join(", "))
}

/// Every figure of `devices`' work lines, device by device.
fn devices_figures(devices: &[&DeviceChange]) -> Vec<Figure> {
    devices.iter().flat_map(|d| work_figures(d)).collect()
}

/// `DMA map+unmap ns per transaction`: what a device finding's numbers measure.
fn dma_time_quantity(unit: &str) -> String {
    format!("DMA map+unmap ns per {unit}")
}

/// `ns per transaction`: the unit of a device finding's numbers.
fn dma_time_unit(unit: &str) -> String {
    format!("ns per {unit}")
}

/// The devices' time in DMA map and unmap per unit, summed, in A and B. The noise is judged
/// per device, so it is given for a finding about one device only. Devices counted in one unit
/// in A and another in B have no change: A's and B's are in different units.
fn dma_time_numbers(devices: &[&DeviceChange]) -> Numbers {
    let sum = |side: fn(&DeviceChange) -> Option<f64>| {
        devices
            .iter()
            .map(|d| side(d))
            .try_fold(0.0, |sum, v| v.map(|v| sum + v))
    };
    let significance = match devices {
        [one] => one.dma_time,
        _ => None,
    };
    let numbers = Numbers::of(
        sum(|d| d.a.as_ref().and_then(|w| w.dma_ns)),
        sum(|d| d.b.as_ref().and_then(|w| w.dma_ns)),
        significance,
    );
    if devices.iter().all(|d| d.like_for_like()) {
        numbers
    } else {
        Numbers {
            change: None,
            delta_pct: None,
            ..numbers
        }
    }
}

fn share_sum(devices: &[&DeviceChange]) -> Option<f64> {
    devices
        .iter()
        .map(|d| d.share_of_gap)
        .try_fold(0.0, |sum, s| s.map(|s| sum + s))
}

fn translation_finding(
    c: &Comparison,
    devices: &[&DeviceChange],
    unit: &str,
    (on, off): (&str, &str),
) -> Finding {
    let plural = devices.len() > 1;
    let headline = format!(
        "IOMMU translation on {} is the difference: {on} translates {} DMA, {off} does not",
        who(devices),
        if plural { "their" } else { "its" }
    );
    let mut details = Vec::new();
    let causes = host_causes(c, Role::Translation);
    let domains = domain_change(devices);
    if !causes.is_empty() {
        let list: Vec<String> = causes.iter().map(|h| h.sentence()).collect();
        details.push(format!("cause: {}", list.join("; ")));
    } else if !domains.is_empty() {
        details.push(format!(
            "cause: the IOMMU group's domain type ({}), set at run time through \
             /sys/kernel/iommu_groups: no command-line or kernel-config difference",
            domains.join("; ")
        ));
    } else {
        details.push(
            "no host or group difference in the reports explains it (different hardware or \
             firmware?)"
                .into(),
        );
    }
    for d in devices {
        details.push(work_line(d));
    }
    details.push(format!(
        "the page-table maps, IOTLB syncs and invalidations above are work only the translated \
         run ({on}) pays"
    ));
    Finding {
        kind: FindingKind::Translation,
        share_of_gap: share_sum(devices),
        headline,
        details,
        quantity: dma_time_quantity(unit),
        unit: dma_time_unit(unit),
        numbers: dma_time_numbers(devices),
        figures: devices_figures(devices),
    }
}

/// Both runs translate a device, through different code: the per-unit work and time each path
/// costs it, side by side (a finding per unit the devices count in).
fn code_path_findings(c: &Comparison) -> Vec<Finding> {
    let Some(path) = c.host.iter().find(|h| h.what == super::DMA_PATH) else {
        return Vec::new();
    };
    let devices = by_key(
        c.devices
            .iter()
            .filter(|d| d.transition == Transition::Both)
            .collect(),
    );
    by_unit(&devices)
        .into_iter()
        .map(|(unit, devices)| {
            let mut details = vec![format!("A: {}", path.a), format!("B: {}", path.b)];
            for d in &devices {
                details.push(work_line(d));
            }
            Finding {
                kind: FindingKind::CodePath,
                share_of_gap: share_sum(&devices),
                headline: format!(
                    "{} translated through different kernel code in A and B: the IOMMU work per \
                     {unit} below is what each path costs",
                    who(&devices),
                ),
                details,
                quantity: dma_time_quantity(&unit),
                unit: dma_time_unit(&unit),
                numbers: dma_time_numbers(&devices),
                figures: devices_figures(&devices),
            }
        })
        .collect()
}

fn invalidation_findings(c: &Comparison) -> Vec<Finding> {
    let devices: Vec<&DeviceChange> = c
        .devices
        .iter()
        .filter(|d| d.transition == Transition::Both)
        .filter(|d| {
            let t = |w: &Option<super::DeviceWork>| w.as_ref().and_then(|w| w.domain_type.clone());
            t(&d.a) != t(&d.b)
        })
        .collect();
    let devices = by_key(devices);
    let causes = host_causes(c, Role::Invalidation);
    by_unit(&devices)
        .into_iter()
        .map(|(unit, devices)| {
            let mut details = Vec::new();
            if causes.is_empty() {
                details.push(format!(
                    "cause: the IOMMU group's domain type ({}), set at run time",
                    domain_change(&devices).join("; ")
                ));
            } else {
                let list: Vec<String> = causes.iter().map(|h| h.sentence()).collect();
                details.push(format!("cause: {}", list.join("; ")));
            }
            details.extend(devices.iter().map(|d| work_line(d)));
            Finding {
                kind: FindingKind::Invalidation,
                share_of_gap: share_sum(&devices),
                headline: format!(
                    "IOTLB invalidation differs on {}: DMA is strict (an invalidation per \
                     unmap), DMA-FQ lazy (batched by the flush queue)",
                    who(&devices)
                ),
                details,
                quantity: dma_time_quantity(&unit),
                unit: dma_time_unit(&unit),
                numbers: dma_time_numbers(&devices),
                figures: devices_figures(&devices),
            }
        })
        .collect()
}

fn cost_findings(c: &Comparison) -> Vec<Finding> {
    let devices: Vec<&DeviceChange> = c
        .devices
        .iter()
        .filter(|d| d.transition == Transition::Both)
        .filter(|d| d.dma_time.is_some_and(|s| s.beyond_noise))
        .collect();
    let devices = by_key(devices);
    let candidates: Vec<String> = c
        .host
        .iter()
        .filter(|h| h.role != Role::Context || h.what == "kernel")
        .map(HostDifference::sentence)
        .collect();
    by_unit(&devices)
        .into_iter()
        .map(|(unit, devices)| {
            let mut details: Vec<String> = devices
                .iter()
                .map(|d| {
                    let s = d.dma_time.map(|s| {
                        format!(
                            " ({:+.1}%, beyond its noise of ±{:.1}%)",
                            s.change * 100.0,
                            s.band * 100.0
                        )
                    });
                    format!("{}{}", work_line(d), s.unwrap_or_default())
                })
                .collect();
            if c.lab {
                details.push(LAB_CAVEAT.into());
            }
            if candidates.is_empty() {
                details.push(
                    "no host difference in the reports: same kernel and IOMMU settings".into(),
                );
            } else {
                details.push(format!(
                    "host differences that can change this cost (candidates, not a measured \
                     cause): {}",
                    candidates.join("; ")
                ));
            }
            Finding {
                kind: FindingKind::Cost,
                share_of_gap: share_sum(&devices),
                headline: format!(
                    "translation time per {unit} changed on {} beyond run-to-run noise",
                    who(&devices)
                ),
                details,
                quantity: dma_time_quantity(&unit),
                unit: dma_time_unit(&unit),
                numbers: dma_time_numbers(&devices),
                figures: devices_figures(&devices),
            }
        })
        .collect()
}

/// Devices whose counts per unit changed, a finding per unit they count in (a device counted in
/// different units in A and B never has changed counts: they do not compare).
fn count_findings(c: &Comparison) -> Vec<Finding> {
    let devices: Vec<&DeviceChange> = c
        .devices
        .iter()
        .filter(|d| d.transition == Transition::Both && d.counts_changed)
        .collect();
    let devices = by_key(devices);
    by_unit(&devices)
        .into_iter()
        .map(|(unit, devices)| {
            let mut details: Vec<String> = devices.iter().map(|d| work_line(d)).collect();
            details.push(
                "counts per unit repeat run to run (unlike times), so this is a change in how \
                 the driver or the IOMMU code maps"
                    .into(),
            );
            Finding {
                kind: FindingKind::Counts,
                share_of_gap: share_sum(&devices),
                headline: format!("translation work per {unit} changed on {}", who(&devices)),
                details,
                quantity: dma_time_quantity(&unit),
                unit: dma_time_unit(&unit),
                numbers: dma_time_numbers(&devices),
                figures: devices_figures(&devices),
            }
        })
        .collect()
}

/// Waiting inside translation, per device where either run's DMA calls waited enough to be a
/// finding ([`crate::waiting::DmaWaiting::is_finding`]): one line with both runs' figures. The
/// times the other findings compare are on-CPU; this is what they leave out.
fn waiting_findings(c: &Comparison) -> Vec<Finding> {
    let share = |w: &Option<super::DeviceWork>| w.as_ref().and_then(|w| w.dma_waiting_share);
    by_key(
        c.devices
            .iter()
            .filter(|d| {
                [&d.a, &d.b]
                    .iter()
                    .any(|w| w.as_ref().is_some_and(|w| w.dma_waiting_is_finding))
            })
            .collect(),
    )
    .into_iter()
    .map(|d| {
        let side = |tag: &str, w: &Option<super::DeviceWork>| {
            w.as_ref()
                .filter(|w| w.dma_waiting_share.is_some())
                .map_or(format!("{tag} did not measure it"), |w| {
                    format!("{tag} spent {} switched out", waiting_figure(w))
                })
        };
        Finding {
            kind: FindingKind::Waiting,
            share_of_gap: None,
            headline: format!(
                "waiting inside translation on {}: of its DMA map+unmap time (per {}), {}, {}; \
                 the times compared are on-CPU and leave it out",
                who(&[d]),
                d.unit(),
                side("A", &d.a),
                side("B", &d.b),
            ),
            details: Vec::new(),
            quantity: "DMA map+unmap time switched out, % of measured".into(),
            unit: "%".into(),
            numbers: Numbers::of(
                share(&d.a).map(|s| s * 100.0),
                share(&d.b).map(|s| s * 100.0),
                None,
            ),
            figures: vec![Figure::new(
                Some(d.key.as_str()),
                "DMA map+unmap time switched out",
                (
                    d.a.as_ref().and_then(|w| w.dma_offcpu_ns),
                    d.b.as_ref().and_then(|w| w.dma_offcpu_ns),
                ),
                format!("ns per {}", d.unit()),
            )],
        }
    })
    .collect()
}

/// `63.5% (248us)`: waiting as a share of the DMA calls' measured time, and per unit.
pub(crate) fn waiting_figure(w: &super::DeviceWork) -> String {
    match w.dma_waiting_share {
        Some(share) => format!("{:.1}% ({})", share * 100.0, ns(w.dma_offcpu_ns)),
        None => "-".to_string(),
    }
}

fn same_finding(c: &Comparison) -> Finding {
    let mut details = Vec::new();
    let translated: Vec<&DeviceChange> = c
        .devices
        .iter()
        .filter(|d| d.transition == Transition::Both)
        .collect();
    for d in &translated {
        let noise = match d.dma_time {
            Some(s) => format!(
                " ({:+.1}%, within its noise of ±{:.1}%)",
                s.change * 100.0,
                s.band * 100.0
            ),
            None => " (noise not measurable)".into(),
        };
        details.push(format!("{}{noise}", work_line(d)));
    }
    if !c.host.is_empty() {
        let list: Vec<String> = c.host.iter().map(HostDifference::sentence).collect();
        details.push(format!(
            "the hosts differ ({}), but the reports show no change in translation work that \
             follows from it",
            list.join("; ")
        ));
    }
    // Summed only over devices that count in one unit.
    let groups = by_unit(&translated);
    let (unit, numbers) = match groups.as_slice() {
        [(unit, _)] => (unit.clone(), dma_time_numbers(&translated)),
        [] => (c.device_unit.clone(), dma_time_numbers(&[])),
        _ => (super::OWN_UNITS.to_string(), Numbers::of(None, None, None)),
    };
    Finding {
        kind: FindingKind::Same,
        share_of_gap: None,
        headline: format!(
            "translation is the same in both runs: no device gained or lost it, and each \
             device's translation time per {unit} is the same within noise"
        ),
        details,
        quantity: dma_time_quantity(&unit),
        unit: dma_time_unit(&unit),
        numbers,
        figures: devices_figures(&translated),
    }
}

fn workload_finding(c: &Comparison, m: &MetricChange) -> Finding {
    let change = m
        .change
        .map(|x| format!(" ({:+.1}%)", x * 100.0))
        .unwrap_or_default();
    let mut headline = format!("{}: {:.1} in A, {:.1} in B{change}", m.metric, m.a, m.b);
    let mut details = Vec::new();
    let mut figures = Vec::new();
    match m.significance {
        None => headline.push_str(
            ": run-to-run noise not measurable (fewer than 3 steady interval samples in a \
             report, and not two runs in both), so no cause is claimed for the change",
        ),
        Some(s) if !s.beyond_noise => {
            let _ = write!(
                headline,
                ": within run-to-run noise (±{:.1}%, from {}), so no cause is claimed for it",
                s.band * 100.0,
                s.basis()
            );
        }
        Some(s) => {
            let _ = write!(
                headline,
                ": beyond run-to-run noise (±{:.1}%, from {})",
                s.band * 100.0,
                s.basis()
            );
            if let Some((line, numbers)) = attribution(c, m) {
                details.push(line);
                figures = numbers;
            }
            if c.lab {
                details.push(LAB_CAVEAT.into());
            }
        }
    }
    Finding {
        kind: FindingKind::Workload,
        share_of_gap: None,
        headline,
        details,
        quantity: m.metric.clone(),
        unit: workload_unit(c, m),
        numbers: Numbers::of(Some(m.a), Some(m.b), m.significance),
        figures,
    }
}

/// `transaction/s` for the workload's headline rate; the metric's name for another number (its
/// unit is not stated).
fn workload_unit(c: &Comparison, m: &MetricChange) -> String {
    match (
        c.a.units.rate_metric.as_deref(),
        super::common_unit(&c.a.units, &c.b.units),
    ) {
        (Some(rate), Some(unit)) if rate == m.metric => format!("{unit}/s"),
        _ => m.metric.clone(),
    }
}

/// How much of a rate's change translation accounts for: the change in translation time per
/// unit against the change in time per unit (1 / rate, one request at a time as in TCP_RR); the
/// sentence and its two figures.
fn attribution(c: &Comparison, m: &MetricChange) -> Option<(String, Vec<Figure>)> {
    let rate_metric = c.a.units.rate_metric.as_deref()?;
    let unit = &super::common_unit(&c.a.units, &c.b.units)?;
    if m.metric != rate_metric || m.a <= 0.0 || m.b <= 0.0 {
        return None;
    }
    let time_gap = 1e9 / m.b - 1e9 / m.a;
    // Only the devices the workload drove: another device's time is not per its unit.
    let driven: Vec<f64> = c.devices.iter().filter_map(|d| d.workload_gap_ns).collect();
    if time_gap == 0.0 || driven.is_empty() {
        return None;
    }
    let translation_gap: f64 = driven.iter().sum();
    let ratio = translation_gap / time_gap;
    let figures = vec![
        Figure::new(
            None,
            "time per unit (1 / rate)",
            (Some(1e9 / m.a), Some(1e9 / m.b)),
            format!("ns per {unit}"),
        ),
        Figure {
            change: Some(translation_gap),
            ..Figure::new(
                None,
                "translation time per unit",
                (None, None),
                format!("ns per {unit}"),
            )
        },
    ];
    let signed = |ns: f64| {
        let sign = if ns < 0.0 { "-" } else { "+" };
        format!("{sign}{}", human_ns(ns.abs().round() as u64))
    };
    let sentence = if ratio >= 0.1 {
        format!(
            "time per {unit} (1 / rate) changed by {}, translation time per {unit} by {}: \
             translation work in the kernel accounts for about {:.0}% of the change{}",
            signed(time_gap),
            signed(translation_gap),
            ratio.min(1.0) * 100.0,
            if ratio < 0.5 {
                "; the rest lies outside the kernel's translation code (it may include the \
                 device side of translation, IOTLB misses and page walks, which kernel probes \
                 cannot see)"
            } else {
                ""
            }
        )
    } else {
        format!(
            "time per {unit} (1 / rate) changed by {}, translation time per {unit} only by {}: \
             the change is not in the kernel's translation work (iommutop does not measure what \
             else changed, nor the device side of translation)",
            signed(time_gap),
            signed(translation_gap)
        )
    };
    Some((sentence, figures))
}
