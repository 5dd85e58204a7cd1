//! What one unit of work cost each device: DMA maps, IOMMU page-table maps, IOTLB syncs and
//! invalidations, and time, per transaction (TCP_RR), per read (fio, dd), or per the device's
//! own completed I/O or packet.
//!
//! The workload's unit is what it stated ([`Headline`] in `results.work`). Reports written before
//! workloads stated it are read by [`legacy_units`], which recognises the result keys those builds
//! wrote; nothing else reads units from key names.
//!
//! Each device's unit is decided on its own ([`WorkUnits::of_device`]): the workload's unit for a
//! device the workload drove (its results name it: netperf's NICs, fio's target, ...), else the
//! device's own I/O as its row counts them ([`crate::derive::io_count`]: completed I/Os, packets
//! for a NIC). A run with two workloads (TCP_RR on the NICs while something else reads the NVMe)
//! thus never puts one device's cost per another workload's transaction.

use crate::derive::{enclosing, io_count};
use crate::facts::DomainType;
use crate::report::{Report, WorkloadReport};
use crate::results::PerUnit;
use crate::sample::Op;
use crate::snapshot::Device;
use crate::waiting::DmaWaiting;
use iommutop_abi::pci::PciAddress;
use iommutop_abi::workload::Headline;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The workload "metric" every report has: completed I/Os per second over all devices.
pub const COMPLETIONS_PER_S: &str = "completions_per_s";

/// How a run's work is counted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkUnits {
    /// `transaction`, `read`, `I/O`, or `completed I/O` (the fallback).
    pub unit: String,
    /// How many the run did; `None` when not known (then per-unit figures are per completion).
    pub count: Option<f64>,
    /// The workload's headline rate (`transactions_per_s`, `read_iops`, ...), if it reported one.
    pub rate_metric: Option<String>,
    /// That rate's value, units per second.
    pub rate: Option<f64>,
    /// The probes' counts per unit over the workload's own window, by PCI address
    /// ([`crate::results::WorkloadResults::window_counts`]): what a device did per unit without
    /// the run's set-up.
    #[serde(skip)]
    pub window: BTreeMap<PciAddress, PerUnit>,
    /// The devices the workload drove, as its results and parameters name them (PCI addresses,
    /// NIC and disk names): only their figures are per the workload's unit.
    #[serde(skip)]
    pub driven: BTreeSet<String>,
}

/// What one device's figures are per.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceUnit {
    /// The workload's unit (`transaction`), or the device's own I/O: `completed I/O`, `packet`
    /// (a NIC's, sent and received), `DMA map` (a device that completed nothing the probes saw).
    pub name: String,
    /// How many the run did; `None` when not known.
    pub count: Option<f64>,
    /// The workload's unit: the workload drove the device and counted its units.
    pub workload: bool,
}

impl WorkUnits {
    /// Per completed I/O: what figures are per when the workload counted nothing.
    pub fn completions() -> WorkUnits {
        WorkUnits {
            unit: "completed I/O".into(),
            count: None,
            rate_metric: None,
            rate: None,
            window: BTreeMap::new(),
            driven: BTreeSet::new(),
        }
    }

    /// Whether the workload drove `device` and counted its units: then the device's figures are
    /// per the workload's unit.
    pub fn drove(&self, device: &Device) -> bool {
        self.count.is_some_and(|c| c > 0.0)
            && self.driven.iter().any(|name| device.answers_to(name))
    }

    /// What `device`'s figures are per: the workload's unit if it drove the device, else the
    /// device's own I/O (completions, a NIC's packets, else its DMA maps).
    pub fn of_device(&self, device: &Device) -> DeviceUnit {
        if self.drove(device) {
            return DeviceUnit {
                name: self.unit.clone(),
                count: self.count,
                workload: true,
            };
        }
        match io_count(&device.ops) {
            Some((count, basis)) => DeviceUnit {
                name: basis.unit().into(),
                count: Some(count as f64),
                workload: false,
            },
            None => DeviceUnit {
                name: "completed I/O".into(),
                count: None,
                workload: false,
            },
        }
    }
}

/// The run's unit of work and how many it did.
pub fn work_units(report: &Report) -> WorkUnits {
    let Some(workload) = &report.run.workload else {
        return WorkUnits::completions();
    };
    let units = match workload.headline() {
        Some(headline) => stated_units(&headline),
        None => legacy_units(workload),
    };
    WorkUnits {
        window: units
            .count
            .map(|_| workload.results.window_counts())
            .unwrap_or_default(),
        driven: driven_devices(workload),
        ..units
    }
}

/// The devices `workload` drove: those its results name, and the block device its `filename`
/// parameter names (`/dev/nvme0n1`: `nvme0n1`).
fn driven_devices(workload: &WorkloadReport) -> BTreeSet<String> {
    let mut names = workload.results.devices();
    let device_file = workload
        .params
        .get("filename")
        .and_then(|value| value.as_str())
        .and_then(|path| path.strip_prefix("/dev/"))
        .filter(|name| !name.is_empty() && !name.contains('/'));
    names.extend(device_file.map(str::to_string));
    names
}

/// What the workload stated; per completion when it counted neither units nor their rate.
fn stated_units(headline: &Headline) -> WorkUnits {
    if headline.count.is_none() && headline.rate_per_s.is_none() {
        return WorkUnits::completions();
    }
    WorkUnits {
        unit: headline.unit.name().into(),
        count: headline.count,
        rate_metric: headline.rate_metric.clone(),
        rate: headline.rate_per_s,
        window: BTreeMap::new(),
        driven: BTreeSet::new(),
    }
}

/// Counts with their unit name, and rates that multiply by the elapsed time into counts, as
/// builds before [`Headline`] wrote them.
const LEGACY_COUNTS: [(&str, &str); 5] = [
    ("transactions", "transaction"),
    ("reads", "read"),
    ("read_ios", "read"),
    ("ios", "I/O"),
    ("requests", "request"),
];
const LEGACY_RATES: [(&str, &str); 4] = [
    ("transactions_per_s", "transaction"),
    ("read_iops", "read"),
    ("iops", "I/O"),
    ("requests_per_s", "request"),
];

fn number(results: &BTreeMap<String, f64>, key: &str) -> Option<f64> {
    results.get(key).copied()
}

/// The units of a report written before workloads stated them: recognised from the result keys
/// of those builds.
fn legacy_units(workload: &WorkloadReport) -> WorkUnits {
    let results = &workload.results.numbers();
    let rate = LEGACY_RATES
        .iter()
        .find(|(key, _)| number(results, key).is_some());
    let rate_metric = rate.map(|(k, _)| (*k).to_string());
    let rate_value = rate.and_then(|(k, _)| number(results, k));
    let elapsed = ["elapsed_s", "duration_s"]
        .iter()
        .find_map(|key| number(results, key))
        .or_else(|| {
            ["duration_s", "length_s", "runtime_s"]
                .iter()
                .find_map(|key| {
                    workload
                        .params
                        .get(*key)?
                        .as_f64()
                        .filter(|v| v.is_finite())
                })
        });
    if let Some((key, unit)) = LEGACY_COUNTS
        .iter()
        .find(|(key, _)| number(results, key).is_some())
    {
        return WorkUnits {
            unit: (*unit).into(),
            count: number(results, key),
            rate_metric,
            rate: rate_value,
            window: BTreeMap::new(),
            driven: BTreeSet::new(),
        };
    }
    match rate {
        Some((_, unit)) => WorkUnits {
            unit: (*unit).into(),
            count: rate_value
                .zip(elapsed)
                .map(|(rate, seconds)| rate * seconds),
            rate_metric,
            rate: rate_value,
            window: BTreeMap::new(),
            driven: BTreeSet::new(),
        },
        None => WorkUnits::completions(),
    }
}

/// What a device did per unit of work.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceWork {
    /// What the figures are per ([`WorkUnits::of_device`]): the workload's unit (`transaction`)
    /// for a device the workload drove, else the device's own `completed I/O`, `packet` or `DMA
    /// map`.
    pub unit: String,
    /// The figures are per the workload's unit.
    #[serde(skip)]
    pub of_workload: bool,
    pub domain_type: Option<String>,
    /// Its DMA went through IOMMU translation: a `DMA`/`DMA-FQ` domain, or page-table maps seen.
    pub translated: bool,
    pub dma_maps: Option<f64>,
    pub iommu_maps: Option<f64>,
    pub iotlb_syncs: Option<f64>,
    pub iotlb_flushes: Option<f64>,
    /// On-CPU time in DMA map and unmap calls (everything they contain), ns per unit.
    pub dma_ns: Option<f64>,
    /// Time in work that exists only because of translation (IOVA allocation and release,
    /// page-table updates, IOTLB syncs and invalidations), ns per unit; 0 in an identity domain.
    pub iommu_ns: Option<f64>,
    /// Translation time over the run's wall time (1.0 = one CPU).
    pub cpu_share: Option<f64>,
    /// Time the DMA map and unmap calls spent switched out (preempted, asleep on a lock), ns per
    /// unit: waiting, which `dma_ns` and `cpu_share` (on-CPU time) leave out; `None` when not
    /// measured.
    pub dma_offcpu_ns: Option<f64>,
    /// That waiting over the calls' measured time (see [`crate::waiting`]): from
    /// [`crate::waiting::WAITING_FINDING`] it is a finding of its own.
    pub dma_waiting_share: Option<f64>,
    /// DMA map and unmap calls that were switched out at least once.
    pub dma_waited_calls: Option<u64>,
    /// Whether that waiting is a finding of its own ([`DmaWaiting::is_finding`]).
    pub dma_waiting_is_finding: bool,
}

impl DeviceWork {
    /// A device's work per its unit ([`WorkUnits::of_device`]: the workload's if it drove the
    /// device, else the device's own I/O). Its counts are the workload's own window's where the
    /// workload measured them ([`WorkUnits::window`]): a run's set-up (a NIC's receive ring
    /// filled as its link comes up) spread over fewer units would otherwise read as more work
    /// per unit. Its times are the whole run's.
    pub fn of(device: &Device, units: &WorkUnits) -> DeviceWork {
        let unit = units.of_device(device);
        let divisor = unit.count.filter(|c| *c > 0.0);
        let per = |value: f64| divisor.map(|u| value / u);
        let window = device
            .key
            .pci_address()
            .and_then(|pci| units.window.get(&pci))
            .filter(|_| unit.workload);
        let counted = |op: Op| match window.and_then(|w| w.of(op)) {
            Some(in_window) => Some(in_window),
            None => per(device.op(op).count as f64),
        };
        let domain_type = device.domain_type.clone();
        let translated = device.op(Op::IommuMap).count > 0
            || domain_type
                .as_deref()
                .and_then(|t| t.parse::<DomainType>().ok())
                .is_some_and(DomainType::is_translated);
        let dma_ns = [Op::DmaMap, Op::DmaUnmap]
            .iter()
            .map(|&op| device.op(op).total_ns())
            .try_fold(0u64, |sum, ns| ns.map(|ns| sum.saturating_add(ns)))
            .and_then(|ns| per(ns as f64));
        let waiting = DmaWaiting::of(device);
        DeviceWork {
            unit: unit.name,
            of_workload: unit.workload,
            dma_offcpu_ns: waiting.and_then(|w| per(w.offcpu_ns as f64)),
            dma_waiting_share: waiting.map(|w| w.share()),
            dma_waited_calls: waiting.map(|w| w.waited_calls),
            dma_waiting_is_finding: waiting.is_some_and(|w| w.is_finding()),
            translated,
            dma_maps: counted(Op::DmaMap),
            iommu_maps: counted(Op::IommuMap),
            iotlb_syncs: counted(Op::IotlbSync),
            iotlb_flushes: counted(Op::IotlbFlush),
            dma_ns,
            iommu_ns: iommu_ns(device).and_then(|ns| per(ns as f64)),
            cpu_share: device.derived.cpu_share,
            domain_type,
        }
    }
}

/// Time in translation-only work: the timed translation-work operations that run inside no other
/// timed translation-work operation (so an IOTLB sync inside a timed `iommu_map` counts once).
/// `Some(0)` when translation work was probed with timing but never ran (identity domain);
/// `None` when none of it was timed.
fn iommu_ns(device: &Device) -> Option<u64> {
    let timed = |op: Op| device.op(op).total_ns();
    let translation_work = || Op::ALL.into_iter().filter(|op| op.is_translation_work());
    let any_timed = translation_work().any(|op| device.op(op).is_timed());
    let total = translation_work()
        .filter(|&op| {
            enclosing(op)
                .iter()
                .all(|&outer| !outer.is_translation_work() || timed(outer).is_none())
        })
        .filter_map(timed)
        .fold(0u64, u64::saturating_add);
    // An identity domain runs no translation work at all: nothing was timed, but nothing was
    // due. A DMA API that was timed tells the probes were there to see it.
    if any_timed || device.op(Op::DmaMap).is_timed() {
        Some(total)
    } else {
        None
    }
}

/// A device row as people name it: `0000:00:05.0 (eth0, e1000e)`.
pub fn label(device: &Device) -> String {
    let mut parts: Vec<&str> = device.names.iter().map(String::as_str).collect();
    if let Some(driver) = device.driver.as_deref() {
        parts.push(driver);
    }
    if parts.is_empty() {
        device.key.to_string()
    } else {
        format!("{} ({})", device.key, parts.join(", "))
    }
}

/// The device of `devices` that is `wanted` in another report: same key, else a shared name.
pub fn same_device<'a>(devices: &'a [Device], wanted: &Device) -> Option<&'a Device> {
    devices.iter().find(|d| d.key == wanted.key).or_else(|| {
        devices
            .iter()
            .find(|d| d.names.iter().any(|n| wanted.names.contains(n)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::full_report;
    use crate::report::WorkloadReport;
    use crate::results::WorkloadResults;
    use serde_json::{json, Value};

    fn counted(count: f64) -> WorkUnits {
        WorkUnits {
            count: Some(count),
            ..WorkUnits::completions()
        }
    }

    fn with_results(results: Value, params: Value) -> Report {
        let mut report = full_report();
        report.run.workload = Some(WorkloadReport {
            name: "w".into(),
            params: serde_json::from_value(params).unwrap_or_default(),
            results: WorkloadResults::read("w", results.as_object().cloned().unwrap_or_default()),
        });
        report
    }

    #[test]
    fn legacy_units_come_from_counts_else_rates_times_elapsed_time() {
        let units = work_units(&with_results(
            json!({"transactions_per_s": 1000.0, "elapsed_s": 5.0}),
            json!({}),
        ));
        assert_eq!(units.unit, "transaction");
        assert_eq!(units.count, Some(5000.0));
        assert_eq!(units.rate_metric.as_deref(), Some("transactions_per_s"));
        let units = work_units(&with_results(
            json!({"read_iops": 2000.0, "reads": 3999}),
            json!({"duration_s": 2.0}),
        ));
        assert_eq!((units.unit.as_str(), units.count), ("read", Some(3999.0)));
        let units = work_units(&with_results(
            json!({"iops": 10.0}),
            json!({"duration_s": 3}),
        ));
        assert_eq!((units.unit.as_str(), units.count), ("I/O", Some(30.0)));
        let mut none = full_report();
        none.run.workload = None;
        assert_eq!(work_units(&none).unit, "completed I/O");
        assert_eq!(work_units(&none).count, None);
    }

    #[test]
    fn stated_units_are_read_before_any_key() {
        let work = Headline::counted(iommutop_abi::workload::WorkUnit::Io, 300.0, "iops", 100.0);
        let results = json!({"transactions": 1, "work": work});
        let units = work_units(&with_results(results, json!({})));
        assert_eq!(
            units,
            WorkUnits {
                unit: "I/O".into(),
                count: Some(300.0),
                rate_metric: Some("iops".into()),
                rate: Some(100.0),
                window: BTreeMap::new(),
                driven: BTreeSet::new(),
            }
        );
        let uncounted =
            json!({"work": Headline::uncounted(iommutop_abi::workload::WorkUnit::Access)});
        let units = work_units(&with_results(uncounted, json!({})));
        assert_eq!(
            units.unit, "completed I/O",
            "figures are per completion then"
        );
    }

    #[test]
    fn work_per_unit_counts_translation_only_work_once() {
        let report = full_report();
        let nvme = report
            .devices
            .iter()
            .find(|d| d.key == "0000:00:02.0")
            .expect("nvme");
        // 4000 reads: 1 map, 1 IOMMU map, 1 sync each; maps 2 us, unmaps 1 us, IOVA 300 ns.
        let work = DeviceWork::of(nvme, &counted(4000.0));
        assert!(work.translated);
        assert_eq!(work.dma_maps, Some(1.0));
        assert_eq!(work.iommu_maps, Some(1.0));
        assert_eq!(work.iotlb_syncs, Some(1.0));
        assert_eq!(work.dma_ns, Some(3000.0));
        // Only the IOVA allocation was timed of the translation-only work.
        assert_eq!(work.iommu_ns, Some(300.0));
        // Without a unit count, completions are the unit.
        let completions = WorkUnits::completions();
        assert_eq!(DeviceWork::of(nvme, &completions).dma_maps, Some(1.0));
    }

    #[test]
    fn an_identity_device_does_no_translation_work() {
        let mut report = full_report();
        let nvme = &mut report.devices[0];
        nvme.domain_type = Some("identity".into());
        for op in [Op::IommuMap, Op::IotlbSync, Op::IovaAlloc] {
            nvme.ops.insert(op, Default::default());
        }
        let work = DeviceWork::of(nvme, &counted(4000.0));
        assert!(!work.translated);
        assert_eq!(work.iommu_maps, Some(0.0));
        assert_eq!(work.iommu_ns, Some(0.0));
        assert_eq!(label(nvme), "0000:00:02.0 (nvme0n1, nvme)");
    }

    fn device<'a>(report: &'a Report, key: &str) -> &'a Device {
        report
            .devices
            .iter()
            .find(|d| d.key == key)
            .unwrap_or_else(|| panic!("no row {key}"))
    }

    /// In a run with two workloads, only the devices the report's workload drove count per its
    /// unit: netperf's NICs per transaction; the NVMe it did not drive per its own completed
    /// I/O; a NIC it did not name per its own packets, sent and received.
    #[test]
    fn a_device_the_workload_did_not_drive_counts_per_its_own_io() {
        let mut report = crate::report::fixtures::two_workloads_report("DMA-FQ");
        let units = work_units(&report);
        assert_eq!(units.unit, "transaction");
        let nvme = device(&report, "0000:00:04.0");
        assert!(!units.drove(nvme));
        assert_eq!(
            units.of_device(nvme),
            DeviceUnit {
                name: "completed I/O".into(),
                count: Some(8000.0),
                workload: false
            }
        );
        let work = DeviceWork::of(nvme, &units);
        assert_eq!(work.unit, "completed I/O");
        assert!(!work.of_workload);
        assert_eq!(work.dma_maps, Some(1.0));
        assert_eq!(work.iommu_maps, Some(1.0));
        assert_eq!(work.dma_ns, Some(15_300.0));
        assert_eq!(work.iommu_ns, Some(1_530.0));
        assert_eq!(
            work.dma_ns, nvme.derived.translation_ns_per_io,
            "the report's own figure per I/O"
        );
        for (key, dma_ns) in [("0000:00:05.0", 18_000.0), ("0000:00:06.0", 12_000.0)] {
            let nic = device(&report, key);
            assert!(units.drove(nic), "{key}");
            let work = DeviceWork::of(nic, &units);
            assert_eq!(work.unit, "transaction", "{key}");
            assert!(work.of_workload, "{key}");
            assert_eq!(work.dma_maps, Some(3.0), "{key}");
            assert_eq!(work.dma_ns, Some(dma_ns), "{key}");
        }
        // netperf names eth0 only: eth1 counts per its own packets.
        if let Some(WorkloadResults::Netperf(netperf)) =
            report.run.workload.as_mut().map(|w| &mut w.results)
        {
            netperf.nics.retain(|nic| nic.name == "eth0");
            if let Some(windows) = netperf.per_transaction.as_mut() {
                windows.remove(&"0000:00:06.0".parse().expect("an address"));
            }
        }
        let units = work_units(&report);
        let eth1 = device(&report, "0000:00:06.0");
        let work = DeviceWork::of(eth1, &units);
        assert_eq!(work.unit, "packet");
        assert_eq!(work.dma_maps, Some(0.75), "three maps for four packets");
        assert_eq!(work.dma_ns, Some(3_000.0));
        assert_eq!(work.dma_ns, eth1.derived.translation_ns_per_io);
        assert_eq!(
            DeviceWork::of(device(&report, "0000:00:05.0"), &units).unit,
            "transaction"
        );
    }

    /// The devices a workload drove are those its results name (typed or not), or the block
    /// device its `filename` names; results that name none drove none, whatever they counted.
    #[test]
    fn a_workload_drove_the_devices_its_results_or_its_filename_name() {
        let nvme = |report: &Report| DeviceWork::of(&report.devices[0], &work_units(report)).unit;
        let counted = json!({"reads": 4000, "read_iops": 2000.0});
        assert_eq!(
            nvme(&with_results(counted.clone(), json!({}))),
            "completed I/O"
        );
        let by_filename = with_results(counted.clone(), json!({"filename": "/dev/nvme0n1"}));
        assert_eq!(nvme(&by_filename), "read");
        assert_eq!(
            DeviceWork::of(&by_filename.devices[0], &work_units(&by_filename)).dma_maps,
            Some(1.0)
        );
        assert_eq!(
            nvme(&with_results(
                counted.clone(),
                json!({"filename": "/tmp/file"})
            )),
            "completed I/O"
        );
        for named in [
            json!({"target": {"disk": "nvme0n1"}}),
            json!({"target": {"pci_address": "0000:00:02.0"}}),
            json!({"per_io": {"0000:00:02.0": {}}}),
            json!({"device": {"pci_address": "0000:00:02.0"}}),
        ] {
            let mut results = counted.clone();
            if let (Some(results), Some(named)) = (results.as_object_mut(), named.as_object()) {
                results.extend(named.clone());
            }
            assert_eq!(nvme(&with_results(results, json!({}))), "read", "{named}");
        }
    }

    /// A NIC's set-up (its receive ring filled as the link came up) is in the run's counts but
    /// not in netperf's window. A lab report (TCP_RR, 6.12, VT-d): per transaction, the
    /// window's counts are each NIC's, and the whole run's are more.
    #[test]
    fn counts_per_unit_are_the_workload_windows_where_it_measured_them() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../cli/tests/fixtures/tcp-rr-intel-6.12.json");
        let report =
            Report::from_json(&std::fs::read_to_string(path).expect("readable")).expect("a report");
        let units = work_units(&report);
        let transactions = units.count.expect("netperf counted its transactions");
        assert_eq!(units.window.len(), 2, "both NICs' windows");
        for (pci, window) in &units.window {
            let nic = report
                .devices
                .iter()
                .find(|d| d.key.pci_address() == Some(*pci))
                .expect("the NIC's row");
            let work = DeviceWork::of(nic, &units);
            assert_eq!(work.dma_maps, Some(window.dma_map));
            assert_eq!(work.iommu_maps, Some(window.iommu_map));
            assert_eq!(work.iotlb_syncs, Some(window.iotlb_sync));
            let whole_run = nic.op(Op::DmaMap).count as f64 / transactions;
            assert!(
                whole_run > window.dma_map + 0.05,
                "{pci}: {whole_run} maps per transaction over the run, {} in netperf's window",
                window.dma_map
            );
            let without_window = WorkUnits {
                window: BTreeMap::new(),
                ..units.clone()
            };
            assert_eq!(
                DeviceWork::of(nic, &without_window).dma_maps,
                Some(whole_run)
            );
        }
    }
}
