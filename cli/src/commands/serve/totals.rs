//! Counters since `serve` started, built from interval snapshots so that they never go backwards.
//!
//! Each scrape reads the maps once and adds the interval's [`Snapshot`] (deltas, already safe
//! against resets in the kernel's maps) to these totals. A series is keyed by all of its labels:
//! when a device changes driver, group or domain type (VFIO rebinding, a domain switch), the old
//! series keeps its last value and a new one counts from zero, for as long as the device is
//! there. A device that goes away (hot unplug, a process that exited, a netdev deleted) has its
//! series served once more at their last values and then dropped: Prometheus marks a series
//! stale when a scrape no longer has it, and a host whose devices come and go for weeks keeps
//! only the series of devices it has.

use iommutop_model::op_stats::OpDelta;
use iommutop_model::sample::Health;
use iommutop_model::snapshot::{Device, OpStats, ProgramDelta, Snapshot};
use iommutop_model::{Histogram, Op};
use std::collections::{BTreeMap, BTreeSet};

/// The labels of a device's series.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DeviceLabels {
    /// A PCI address, `deferred`, `unattributed`, or the kernel's name of another device.
    pub device: String,
    pub driver: String,
    /// The IOMMU group number, empty without one.
    pub group: String,
    /// `identity`, `DMA`, `DMA-FQ`, ...; empty without a group.
    pub domain: String,
    /// An SR-IOV virtual function's physical function (`0000:00:0c.0`); empty for every other
    /// device, whose series have no such label.
    pub physfn: String,
}

impl DeviceLabels {
    pub fn of(device: &Device) -> DeviceLabels {
        DeviceLabels {
            device: device.key.to_string(),
            driver: device.driver.clone().unwrap_or_default(),
            group: device
                .iommu_group
                .map(|group| group.to_string())
                .unwrap_or_default(),
            domain: device.domain_type.clone().unwrap_or_default(),
            physfn: device.physfn.map(|pf| pf.to_string()).unwrap_or_default(),
        }
    }
}

/// One device's totals.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceTotals {
    pub ops: BTreeMap<Op, OpDelta>,
    /// Outermost timed translation work (see `iommutop_model::derive`), in ns.
    pub translation_ns: u64,
}

/// Everything `serve` exports as counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    pub devices: BTreeMap<DeviceLabels, DeviceTotals>,
    /// Per BPF program: runs and run time (the kernel's BPF statistics).
    pub programs: BTreeMap<String, ProgramDelta>,
    /// Probe health counters (map full, nesting overflow, ...).
    pub health: BTreeMap<Health, u64>,
    /// Operations the probes counted, over all devices.
    pub events: u64,
    /// Series whose device was gone when they were last served.
    gone: BTreeSet<DeviceLabels>,
}

impl Totals {
    /// Adds one interval.
    pub fn add(&mut self, snapshot: &Snapshot) {
        for device in &snapshot.devices {
            let labels = DeviceLabels::of(device);
            if !self.devices.contains_key(&labels) && device.ops.values().all(|s| s.count == 0) {
                continue; // a series starts with its first count, never at 0
            }
            let totals = self.devices.entry(labels).or_default();
            for (&op, stats) in &device.ops {
                totals.ops.entry(op).or_default().merge(&delta_of(stats));
            }
            totals.translation_ns = totals
                .translation_ns
                .saturating_add(device.derived.translation_ns.unwrap_or(0));
        }
        for (program, delta) in &snapshot.programs {
            let total = self.programs.entry(program.clone()).or_default();
            total.run_count = total.run_count.saturating_add(delta.run_count);
            total.run_time_ns = total.run_time_ns.saturating_add(delta.run_time_ns);
        }
        for (counter, delta) in &snapshot.health {
            let total = self.health.entry(*counter).or_default();
            *total = total.saturating_add(*delta);
        }
        self.events = self.events.saturating_add(snapshot.events);
    }
}

impl Totals {
    /// Called after each scrape was served: drops the series whose device was already gone at
    /// the scrape before (so each was served at least once at its final value), and remembers
    /// those gone now. `still_there` tells by a series' `device` label.
    pub fn end_series_of_gone(&mut self, still_there: impl Fn(&str) -> bool) {
        let mut gone_now = BTreeSet::new();
        self.devices.retain(|labels, _| {
            if still_there(&labels.device) {
                return true;
            }
            let served_gone = self.gone.contains(labels);
            gone_now.insert(labels.clone());
            !served_gone
        });
        gone_now.retain(|labels| self.devices.contains_key(labels));
        self.gone = gone_now;
    }
}

/// An interval's op stats back as the plain sums they were computed from.
fn delta_of(stats: &OpStats) -> OpDelta {
    let latency = stats.latency.as_ref();
    OpDelta {
        count: stats.count,
        bytes: stats.bytes,
        failures: stats.failures,
        timed: latency.map_or(0, |l| l.timed),
        total_ns: latency.map_or(0, |l| l.total_ns),
        raw_total_ns: latency.map_or(0, |l| l.raw_total_ns.unwrap_or(l.total_ns)),
        offcpu_ns: latency.and_then(|l| l.offcpu).map_or(0, |w| w.offcpu_ns),
        waited: latency.and_then(|l| l.offcpu).map_or(0, |w| w.waited),
        hist: latency.map_or_else(Histogram::default, |l| l.hist),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iommutop_model::facts::DeviceFacts;
    use iommutop_model::sample::{OpCounters, RawSample, RawSource, SourceKind};

    fn nvme(driver: &str) -> DeviceFacts {
        DeviceFacts {
            pci_address: "0000:00:04.0".parse().expect("address"),
            driver: Some(driver.into()),
            iommu_group: Some(3),
            domain_type: Some("DMA-FQ".into()),
            ..DeviceFacts::default()
        }
    }

    fn sample(at_ns: u64, maps: u64) -> RawSample {
        let counters = OpCounters {
            count: maps,
            bytes: maps * 4096,
            timed: maps,
            total_ns: maps * 1_000,
            hist: {
                let mut slots = vec![0; 32];
                slots[9] = maps;
                slots
            },
            ..OpCounters::default()
        };
        RawSample {
            monotonic_ns: at_ns,
            sources: vec![RawSource {
                kind: SourceKind::Device,
                id: 1,
                name: "0000:00:04.0".into(),
                generation: 0,
                driver: None,
                row: 0,
                ops: [(Op::DmaMap, counters)].into_iter().collect(),
                map_directions: Default::default(),
            }],
            ..RawSample::default()
        }
    }

    fn maps(totals: &Totals, driver: &str) -> u64 {
        totals
            .devices
            .iter()
            .find(|(labels, _)| labels.driver == driver)
            .and_then(|(_, device)| device.ops.get(&Op::DmaMap))
            .map_or(0, |delta| delta.count)
    }

    #[test]
    fn counters_add_up_across_intervals() {
        let facts = [nvme("nvme")];
        let mut totals = Totals::default();
        let samples = [RawSample::default(), sample(1, 10), sample(2, 25)];
        for pair in samples.windows(2) {
            totals.add(&Snapshot::between(&pair[0], &pair[1], &facts));
        }
        assert_eq!(maps(&totals, "nvme"), 25);
        let device = totals.devices.values().next().expect("one device");
        assert_eq!(device.ops[&Op::DmaMap].total_ns, 25_000);
        assert_eq!(device.ops[&Op::DmaMap].hist.slots()[9], 25);
        assert_eq!(device.translation_ns, 25_000);
        assert_eq!(totals.events, 25);
    }

    /// The probes' maps were recreated (counts restart low): the totals keep growing.
    #[test]
    fn a_reset_in_the_kernel_never_lowers_a_total() {
        let facts = [nvme("nvme")];
        let mut totals = Totals::default();
        totals.add(&Snapshot::between(
            &RawSample::default(),
            &sample(1, 100),
            &facts,
        ));
        totals.add(&Snapshot::between(&sample(1, 100), &sample(2, 5), &facts));
        assert_eq!(maps(&totals, "nvme"), 105);
    }

    /// VFIO rebinding: the nvme series stays at its last value, the vfio-pci one starts at 0.
    #[test]
    fn a_rebound_device_keeps_its_old_series() {
        let mut totals = Totals::default();
        totals.add(&Snapshot::between(
            &RawSample::default(),
            &sample(1, 40),
            &[nvme("nvme")],
        ));
        totals.add(&Snapshot::between(
            &sample(1, 40),
            &sample(2, 47),
            &[nvme("vfio-pci")],
        ));
        assert_eq!(maps(&totals, "nvme"), 40);
        assert_eq!(maps(&totals, "vfio-pci"), 7);
        // Unplugged: no more samples name it, both series stay.
        totals.add(&Snapshot::between(
            &sample(2, 47),
            &RawSample::default(),
            &[],
        ));
        assert_eq!(totals.devices.len(), 2);
    }

    fn bound(generation: u32, driver: &str, maps: u64) -> RawSource {
        RawSource {
            generation,
            driver: Some(driver.into()),
            ..sample(0, maps).sources.remove(0)
        }
    }

    fn at(at_ns: u64, sources: Vec<RawSource>) -> RawSample {
        RawSample {
            monotonic_ns: at_ns,
            sources,
            ..RawSample::default()
        }
    }

    /// Rebound to vfio-pci and back within one interval, read with sysfs still saying
    /// vfio-pci: every map goes to the driver the kernel counted it under.
    #[test]
    fn maps_go_to_the_binding_the_kernel_counted_them_under() {
        let mut totals = Totals::default();
        let first = at(1, vec![bound(0x1000, "nvme", 40)]);
        totals.add(&Snapshot::between_by_binding(
            &RawSample::default(),
            &first,
            &[nvme("nvme")],
        ));
        let back = at(
            2,
            vec![bound(0x1000, "nvme", 90), bound(0x2000, "e1000e", 0)],
        );
        totals.add(&Snapshot::between_by_binding(
            &first,
            &back,
            &[nvme("vfio-pci")],
        ));
        assert_eq!(maps(&totals, "nvme"), 90);
        assert_eq!(maps(&totals, "vfio-pci"), 0);
        assert!(
            !totals.devices.keys().any(|labels| labels.driver != "nvme"),
            "no series for a driver that counted nothing: {:?}",
            totals.devices.keys()
        );
    }

    /// A row given back and taken again by the same key counts from zero: its series goes on.
    #[test]
    fn a_row_taken_again_continues_its_series() {
        let mut totals = Totals::default();
        let samples = [
            RawSample::default(),
            at(1, vec![bound(0x1000, "nvme", 40)]),
            at(2, vec![]),
            at(3, vec![bound(0x1000, "nvme", 5)]),
        ];
        for pair in samples.windows(2) {
            totals.add(&Snapshot::between_by_binding(
                &pair[0],
                &pair[1],
                &[nvme("nvme")],
            ));
        }
        assert_eq!(maps(&totals, "nvme"), 45);
    }

    /// A key that took a new row within one scrape, its counters already past the old row's:
    /// the new row's counts are all new.
    #[test]
    fn a_key_on_a_new_row_counts_from_zero_even_past_the_old_rows_counts() {
        let on_row = |row, maps| RawSource {
            row,
            ..bound(0x1000, "nvme", maps)
        };
        let mut totals = Totals::default();
        let samples = [
            RawSample::default(),
            at(1, vec![on_row(1 << 32, 14)]),
            at(2, vec![on_row(2 << 32, 1014)]),
        ];
        for pair in samples.windows(2) {
            totals.add(&Snapshot::between_by_binding(
                &pair[0],
                &pair[1],
                &[nvme("nvme")],
            ));
        }
        assert_eq!(maps(&totals, "nvme"), 14 + 1014);
    }

    #[test]
    fn a_gone_device_is_served_once_more_then_dropped() {
        let mut totals = Totals::default();
        totals.add(&Snapshot::between(
            &RawSample::default(),
            &sample(1, 40),
            &[nvme("nvme")],
        ));
        totals.end_series_of_gone(|_| true);
        assert_eq!(totals.devices.len(), 1);
        // Unplugged: the scrape that sees it gone still serves the series...
        totals.end_series_of_gone(|device| device != "0000:00:04.0");
        assert_eq!(maps(&totals, "nvme"), 40);
        // ...and the next has it no more.
        totals.end_series_of_gone(|device| device != "0000:00:04.0");
        assert!(totals.devices.is_empty(), "{:?}", totals.devices.keys());
    }

    #[test]
    fn a_device_back_before_its_series_ended_keeps_it() {
        let mut totals = Totals::default();
        totals.add(&Snapshot::between(
            &RawSample::default(),
            &sample(1, 40),
            &[nvme("nvme")],
        ));
        totals.end_series_of_gone(|_| false);
        totals.end_series_of_gone(|_| true);
        totals.end_series_of_gone(|_| false);
        assert_eq!(maps(&totals, "nvme"), 40, "gone twice, but back in between");
    }
}
