//! Probe numbers over a window of the run (between two checkpoints), per device: what a workload
//! gets back from [`crate::RunControl::checkpoint`] and puts beside its own numbers (maps per
//! transaction, IOVA allocation latency per thread count).
//!
//! The recording samples at its interval and at every checkpoint; a [`WindowAccumulator`] adds up
//! the interval snapshots since the last checkpoint, so a window is exact whatever the interval.

use iommutop_model::hist::Histogram;
use iommutop_model::sample::Op;
use iommutop_model::snapshot::{RowKey, Snapshot};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use iommutop_model::results::dma_contention::WindowOp;

/// One device row over a window.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WindowDevice {
    /// Disks and netdevs folded into the row (`nvme0n1`, `eth0`).
    pub names: Vec<String>,
    /// By operation, written by name (`dma_map`, `iova_alloc`, ...); only operations that
    /// were counted.
    #[serde(with = "iommutop_model::keyed_by_text")]
    pub ops: BTreeMap<Op, WindowOp>,
}

impl WindowDevice {
    /// How many times `op` was counted (0 if never).
    pub fn count(&self, op: Op) -> u64 {
        self.ops.get(&op).map_or(0, |o| o.count)
    }
}

/// The probes' numbers over one window of the run.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ProbeWindow {
    /// What the workload called the step that ended the window.
    pub label: String,
    pub duration_s: f64,
    /// By device row key (PCI address, `deferred`, ...).
    pub devices: BTreeMap<RowKey, WindowDevice>,
}

impl ProbeWindow {
    /// The row with this key (a PCI address) or holding this name (`eth0`, `nvme0n1`).
    pub fn device(&self, key_or_name: &str) -> Option<&WindowDevice> {
        self.devices.get(&RowKey::parse(key_or_name)).or_else(|| {
            self.devices
                .values()
                .find(|d| d.names.iter().any(|n| n == key_or_name))
        })
    }
}

#[derive(Debug, Clone, Default)]
struct OpSum {
    count: u64,
    timed: u64,
    total_ns: u64,
    hist: Histogram,
}

/// Adds up interval snapshots until a checkpoint takes the window.
#[derive(Debug, Default)]
pub struct WindowAccumulator {
    duration_ns: u64,
    devices: BTreeMap<RowKey, (Vec<String>, BTreeMap<Op, OpSum>)>,
}

impl WindowAccumulator {
    pub fn new() -> WindowAccumulator {
        WindowAccumulator::default()
    }

    /// Adds one interval.
    pub fn add(&mut self, snapshot: &Snapshot) {
        self.duration_ns = self.duration_ns.saturating_add(snapshot.interval_ns);
        for device in &snapshot.devices {
            let (names, ops) = self.devices.entry(device.key.clone()).or_default();
            for name in &device.names {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
            for (&op, stats) in &device.ops {
                if stats.count == 0 {
                    continue;
                }
                let sum = ops.entry(op).or_default();
                sum.count = sum.count.saturating_add(stats.count);
                if let Some(latency) = &stats.latency {
                    sum.timed = sum.timed.saturating_add(latency.timed);
                    sum.total_ns = sum.total_ns.saturating_add(latency.total_ns);
                    sum.hist.merge(&latency.hist);
                }
            }
        }
    }

    /// The window since the last `take`, and a fresh start.
    pub fn take(&mut self, label: &str) -> ProbeWindow {
        let duration_ns = std::mem::take(&mut self.duration_ns);
        let duration_s = duration_ns as f64 / 1e9;
        let devices = std::mem::take(&mut self.devices)
            .into_iter()
            .map(|(key, (names, ops))| {
                let ops = ops
                    .into_iter()
                    .map(|(op, sum)| (op, window_op(&sum, duration_s)))
                    .collect();
                (key, WindowDevice { names, ops })
            })
            .collect();
        ProbeWindow {
            label: label.to_string(),
            duration_s,
            devices,
        }
    }
}

/// The operations reported per unit of work (per transaction, per I/O).
pub const PER_UNIT_OPS: [Op; 9] = [
    Op::DmaMap,
    Op::DmaUnmap,
    Op::IommuMap,
    Op::IommuUnmap,
    Op::IovaAlloc,
    Op::IovaFree,
    Op::IotlbSync,
    Op::IotlbFlush,
    Op::Completion,
];

pub use iommutop_model::results::PerUnit;

/// The row `key_or_name`'s counts over the window divided by `units` (transactions, I/Os);
/// `None` if the probes saw no such row or there were no units.
pub fn per_unit(window: &ProbeWindow, key_or_name: &str, units: u64) -> Option<PerUnit> {
    let device = window.device(key_or_name)?;
    if units == 0 {
        return None;
    }
    let ratio = |op: Op| device.count(op) as f64 / units as f64;
    Some(PerUnit {
        completion: ratio(Op::Completion),
        dma_map: ratio(Op::DmaMap),
        dma_unmap: ratio(Op::DmaUnmap),
        iommu_map: ratio(Op::IommuMap),
        iommu_unmap: ratio(Op::IommuUnmap),
        iotlb_flush: ratio(Op::IotlbFlush),
        iotlb_sync: ratio(Op::IotlbSync),
        iova_alloc: ratio(Op::IovaAlloc),
        iova_free: ratio(Op::IovaFree),
    })
}

fn window_op(sum: &OpSum, duration_s: f64) -> WindowOp {
    let percentiles = (sum.timed > 0).then(|| sum.hist.percentiles()).flatten();
    WindowOp {
        count: sum.count,
        per_s: if duration_s > 0.0 {
            sum.count as f64 / duration_s
        } else {
            0.0
        },
        mean_ns: (sum.timed > 0).then(|| sum.total_ns as f64 / sum.timed as f64),
        p50_ns: percentiles.map(|p| p.p50),
        p90_ns: percentiles.map(|p| p.p90),
        p99_ns: percentiles.map(|p| p.p99),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iommutop_model::snapshot::{Device, Latency, OpStats, RowKind};

    fn device(key: &str, name: &str, maps: u64, latency_ns: Option<u64>) -> Device {
        let latency = latency_ns.map(|ns| {
            let mut hist = Histogram::default();
            for _ in 0..maps {
                hist.record(ns);
            }
            Latency {
                timed: maps,
                total_ns: ns * maps,
                mean_ns: ns as f64,
                p50_ns: ns,
                p90_ns: ns,
                p99_ns: ns,
                p999_ns: ns,
                max_ns_bound: ns * 2,
                hist,
                raw_total_ns: Some(ns * maps),
                offcpu: None,
            }
        });
        let mut ops = BTreeMap::new();
        ops.insert(
            Op::DmaMap,
            OpStats {
                count: maps,
                latency,
                ..OpStats::default()
            },
        );
        ops.insert(Op::IotlbFlush, OpStats::default());
        Device {
            key: key.into(),
            kind: RowKind::Pci,
            pci_address: key.parse().ok(),
            driver: None,
            names: vec![name.into()],
            iommu_group: None,
            domain_type: None,
            iommu_unit: None,
            physfn: None,
            ops,
            completions: 0,
            derived: Default::default(),
            pid: None,
            dma_map_directions: Default::default(),
        }
    }

    fn snapshot(interval_ns: u64, devices: Vec<Device>) -> Snapshot {
        Snapshot {
            interval_ns,
            devices,
            ..Snapshot::default()
        }
    }

    #[test]
    fn a_window_adds_up_the_intervals_since_the_last_take() {
        let mut acc = WindowAccumulator::new();
        acc.add(&snapshot(
            500_000_000,
            vec![device("0000:00:05.0", "eth0", 300, Some(1000))],
        ));
        acc.add(&snapshot(
            500_000_000,
            vec![device("0000:00:05.0", "eth0", 100, Some(3000))],
        ));
        let window = acc.take("step 1");
        assert_eq!(window.label, "step 1");
        assert!((window.duration_s - 1.0).abs() < 1e-9);
        let nic = window.device("eth0").expect("found by name");
        assert_eq!(nic.count(Op::DmaMap), 400);
        assert_eq!(nic.count(Op::IotlbFlush), 0, "uncounted ops are left out");
        let map = &nic.ops[&Op::DmaMap];
        assert!((map.per_s - 400.0).abs() < 1e-9);
        assert_eq!(map.mean_ns, Some(1500.0));
        assert!(map.p99_ns.expect("timed") >= 2048);

        let next = acc.take("step 2");
        assert!(next.devices.is_empty(), "take starts afresh");
        assert_eq!(next.duration_s, 0.0);
    }

    #[test]
    fn per_unit_divides_every_reported_op() {
        let mut acc = WindowAccumulator::new();
        acc.add(&snapshot(
            1_000_000_000,
            vec![device("0000:00:05.0", "eth0", 3000, None)],
        ));
        let window = acc.take("w");
        let row = per_unit(&window, "0000:00:05.0", 1000).expect("row");
        assert_eq!(row.dma_map, 3.0);
        assert_eq!(row.iotlb_flush, 0.0);
        // Every op of PER_UNIT_OPS has its field, under its name, and nothing else is there.
        let json = serde_json::to_value(row).expect("encodes");
        let keys: Vec<&str> = json
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        let mut names: Vec<&str> = PER_UNIT_OPS.iter().map(|op| op.name()).collect();
        names.sort_unstable();
        assert_eq!(keys, names);
        for op in PER_UNIT_OPS {
            assert_eq!(json[op.name()].as_f64(), row.of(op), "{}", op.name());
        }
        assert!(per_unit(&window, "0000:00:05.0", 0).is_none());
        assert!(per_unit(&window, "eth9", 10).is_none());
    }

    #[test]
    fn counted_but_untimed_ops_have_no_latency() {
        let mut acc = WindowAccumulator::new();
        acc.add(&snapshot(
            1_000_000_000,
            vec![device("0000:00:04.0", "nvme0n1", 10, None)],
        ));
        let window = acc.take("w");
        let op = &window.devices[&RowKey::from("0000:00:04.0")].ops[&Op::DmaMap];
        assert_eq!(op.count, 10);
        assert_eq!(op.mean_ns, None);
        assert_eq!(op.p50_ns, None);
    }
}
