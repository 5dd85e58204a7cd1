//! The last minute of each row's headline numbers, for the detail pane's sparklines.

use iommutop_model::sample::Op;
use iommutop_model::snapshot::{RowKey, Snapshot};
use std::collections::{BTreeMap, VecDeque};

/// How far back the sparklines reach.
pub const WINDOW_NS: u64 = 60_000_000_000;

/// One row's numbers at the end of one interval.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Point {
    pub monotonic_ns: u64,
    pub maps_per_s: f64,
    pub ios_per_s: f64,
    pub ns_per_io: Option<f64>,
    pub cpu_share: Option<f64>,
}

/// Points per row key, oldest first, at most [`WINDOW_NS`] old.
#[derive(Debug, Clone, Default)]
pub struct History {
    rows: BTreeMap<RowKey, VecDeque<Point>>,
}

impl History {
    /// Adds every row of `snapshot` and forgets what fell out of the window.
    pub fn record(&mut self, snapshot: &Snapshot) {
        let now = snapshot.monotonic_ns;
        for device in &snapshot.devices {
            let points = self.rows.entry(device.key.clone()).or_default();
            // A snapshot older than the last point (clock reset) starts the row over.
            if points.back().is_some_and(|p| p.monotonic_ns > now) {
                points.clear();
            }
            points.push_back(Point {
                monotonic_ns: now,
                maps_per_s: device.op(Op::DmaMap).rate_per_s,
                ios_per_s: device.op(Op::Completion).rate_per_s,
                ns_per_io: device.derived.translation_ns_per_io,
                cpu_share: device.derived.cpu_share,
            });
        }
        let oldest = now.saturating_sub(WINDOW_NS);
        self.rows.retain(|_, points| {
            while points.front().is_some_and(|p| p.monotonic_ns <= oldest) {
                points.pop_front();
            }
            !points.is_empty()
        });
    }

    /// A row's points, oldest first (empty if the row was not seen in the window).
    pub fn points(&self, key: &RowKey) -> impl Iterator<Item = &Point> {
        self.rows.get(key).into_iter().flatten()
    }

    /// The last `n` values of one series, oldest first; missing values count as 0.
    pub fn series(
        &self,
        key: &RowKey,
        n: usize,
        value: impl Fn(&Point) -> Option<f64>,
    ) -> Vec<u64> {
        let points: Vec<&Point> = self.points(key).collect();
        let start = points.len().saturating_sub(n);
        points[start..]
            .iter()
            .map(|p| {
                value(p)
                    .filter(|v| v.is_finite() && *v > 0.0)
                    .map_or(0, |v| v.round() as u64)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iommutop_model::snapshot::Device;

    fn snapshot(at_s: u64, keys: &[&str]) -> Snapshot {
        Snapshot {
            monotonic_ns: at_s * 1_000_000_000,
            interval_ns: 1_000_000_000,
            devices: keys
                .iter()
                .map(|k| Device {
                    key: (*k).into(),
                    kind: iommutop_model::RowKind::Pci,
                    pci_address: None,
                    driver: None,
                    names: vec![],
                    iommu_group: None,
                    domain_type: None,
                    iommu_unit: None,
                    physfn: None,
                    ops: Default::default(),
                    completions: 0,
                    derived: Default::default(),
                    pid: None,
                    dma_map_directions: Default::default(),
                })
                .collect(),
            ..Snapshot::default()
        }
    }

    #[test]
    fn keeps_one_minute_and_forgets_rows_gone_that_long() {
        let mut h = History::default();
        for t in 1..=100 {
            let keys: &[&str] = if t <= 10 { &["a", "b"] } else { &["a"] };
            h.record(&snapshot(t, keys));
        }
        assert_eq!(h.points(&"a".into()).count(), 60);
        assert_eq!(h.points(&"b".into()).count(), 0);
        assert_eq!(h.series(&"a".into(), 10, |p| Some(p.maps_per_s)).len(), 10);
    }

    #[test]
    fn a_clock_going_backwards_starts_over() {
        let mut h = History::default();
        h.record(&snapshot(50, &["a"]));
        h.record(&snapshot(51, &["a"]));
        h.record(&snapshot(2, &["a"]));
        assert_eq!(h.points(&"a".into()).count(), 1);
    }
}
