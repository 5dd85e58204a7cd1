//! `iommutop run --runs N`: the report of a workload run N times under the probes keeps each
//! run's own numbers ([`RepeatRun`]) and their mean and sample standard deviation
//! ([`RepeatSummary`]), so that `compare` can measure noise from repeats instead of inferring it
//! from the seconds of one run.

use crate::results::WorkloadResults;
use crate::sample::Op;
use crate::snapshot::{Device, RowKey};
use iommutop_abi::workload::{Headline, WORK_KEY};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The measured runs of a repeated workload (`repeats` in the report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Repeats {
    /// Runs made first and discarded (`--warmup`).
    pub warmup: u32,
    /// One entry per measured run, in order.
    pub runs: Vec<RepeatRun>,
    /// Mean and sample standard deviation of every number over `runs`.
    pub summary: RepeatSummary,
}

/// One measured run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatRun {
    /// Seconds since the measurement began (after the warm-up runs), at the run's start.
    pub t_s: f64,
    /// The run's wall time, preparation and restore included.
    pub duration_s: f64,
    /// The run's numeric workload results (the top-level numbers of `results`), by key.
    pub workload: BTreeMap<String, f64>,
    /// Units of work the run did (`results.work.count`); `None` when the workload does not count
    /// them.
    pub work_count: Option<f64>,
    /// Per row that made DMA maps or completed I/O during the run, by key.
    pub devices: BTreeMap<RowKey, RepeatDevice>,
}

/// What one device did during one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatDevice {
    pub dma_maps: u64,
    pub completions: u64,
    /// Translation time (as `derived.translation_ns`); `None` when nothing was timed.
    pub translation_ns: Option<u64>,
}

/// Mean and sample standard deviation of a number over the runs that have it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeanStddev {
    /// Runs that had the number.
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (divided by n - 1); `None` for a single run.
    pub stddev: Option<f64>,
}

impl MeanStddev {
    /// Over `values`; `None` when there are none or one is not finite.
    pub fn of(values: &[f64]) -> Option<MeanStddev> {
        if values.is_empty() || !values.iter().all(|v| v.is_finite()) {
            return None;
        }
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let stddev = (values.len() > 1).then(|| {
            let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
            variance.sqrt()
        });
        Some(MeanStddev {
            n: values.len(),
            mean,
            stddev,
        })
    }
}

/// [`MeanStddev`] of each number of [`RepeatRun`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RepeatSummary {
    pub workload: BTreeMap<String, MeanStddev>,
    pub devices: BTreeMap<RowKey, DeviceSummary>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceSummary {
    pub dma_maps: MeanStddev,
    /// `None` when no run timed this device's translation.
    pub translation_ns: Option<MeanStddev>,
}

impl RepeatRun {
    /// A run's entry from its workload results and the devices' work over the run.
    pub fn new(
        t_s: f64,
        duration_s: f64,
        results: &WorkloadResults,
        devices: &[Device],
    ) -> RepeatRun {
        let workload = results.numbers();
        let devices = devices
            .iter()
            .map(|d| {
                let entry = RepeatDevice {
                    dma_maps: d.op(Op::DmaMap).count,
                    completions: d.completions,
                    translation_ns: d.derived.translation_ns,
                };
                (d.key.clone(), entry)
            })
            .filter(|(_, d)| d.dma_maps > 0 || d.completions > 0)
            .collect();
        RepeatRun {
            t_s,
            duration_s,
            workload,
            work_count: results.headline().and_then(|h| h.count),
            devices,
        }
    }

    /// Completed I/Os per second over all devices (compare's `completions_per_s`).
    pub fn completions_per_s(&self) -> Option<f64> {
        let completions: u64 = self.devices.values().map(|d| d.completions).sum();
        (self.duration_s > 0.0).then(|| completions as f64 / self.duration_s)
    }

    /// A device's translation time per unit, as compare's per-unit figures are: per unit of
    /// the run's work when `of_workload` (the workload drove the device), else per the device's
    /// own completions (else its DMA maps; a NIC's sent packets are not kept per run, so its
    /// received ones stand for them). `None` when not timed or not countable.
    pub fn translation_ns_per_unit(&self, key: &RowKey, of_workload: bool) -> Option<f64> {
        let device = self.devices.get(key)?;
        let own = [device.completions, device.dma_maps]
            .into_iter()
            .find(|&n| n > 0)
            .map(|n| n as f64);
        let units = if of_workload {
            self.work_count.filter(|c| *c > 0.0)
        } else {
            own
        }?;
        Some(device.translation_ns? as f64 / units)
    }
}

impl Repeats {
    /// The measured runs and their summary.
    pub fn new(warmup: u32, runs: Vec<RepeatRun>) -> Repeats {
        let summary = RepeatSummary::of(&runs);
        Repeats {
            warmup,
            runs,
            summary,
        }
    }

    /// Workload `name`'s results over the runs, for `run.workload.results`: each number the
    /// mean of the runs that have it (a whole number's rounded, so that the workload's type
    /// still holds it), everything else from the last run; the work count (`work.count`) is the
    /// runs' total, because `devices[]` hold the work of all of them.
    pub fn merged_results(name: &str, runs: &[WorkloadResults]) -> WorkloadResults {
        let Some(last) = runs.last() else {
            return WorkloadResults::Other(Map::new());
        };
        let numbers: Vec<BTreeMap<String, f64>> = runs.iter().map(|r| r.numbers()).collect();
        let mut merged = last.to_map().unwrap_or_default();
        for (key, value) in merged.iter_mut() {
            if value.is_number() {
                let values: Vec<f64> = numbers.iter().filter_map(|n| n.get(key).copied()).collect();
                if let Some(mean) = MeanStddev::of(&values) {
                    *value = match value.is_u64() {
                        true => Value::from(mean.mean.round() as u64),
                        false => Value::from(mean.mean),
                    };
                }
            }
        }
        let headlines: Vec<Headline> = runs.iter().filter_map(|r| r.headline()).collect();
        if let Some(mut headline) = headlines.last().cloned() {
            let counts: Option<Vec<f64>> = headlines.iter().map(|h| h.count).collect();
            headline.count = counts
                .filter(|c| c.len() == runs.len())
                .map(|c| c.iter().sum());
            let rates: Vec<f64> = headlines.iter().filter_map(|h| h.rate_per_s).collect();
            headline.rate_per_s = MeanStddev::of(&rates).map(|m| m.mean);
            if let Ok(work) = serde_json::to_value(&headline) {
                merged.insert(WORK_KEY.to_string(), work);
            }
        }
        WorkloadResults::read(name, merged)
    }
}

impl RepeatSummary {
    pub fn of(runs: &[RepeatRun]) -> RepeatSummary {
        let mut workload: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for run in runs {
            for (key, value) in &run.workload {
                workload.entry(key.clone()).or_default().push(*value);
            }
        }
        // A device that did nothing in a run made no maps in it: 0, not a missing sample.
        let keys: std::collections::BTreeSet<&RowKey> =
            runs.iter().flat_map(|r| r.devices.keys()).collect();
        let mut maps: BTreeMap<RowKey, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        for key in keys {
            let entry = maps.entry(key.clone()).or_default();
            for run in runs {
                let device = run.devices.get(key);
                entry.0.push(device.map_or(0.0, |d| d.dma_maps as f64));
                if let Some(ns) = device.and_then(|d| d.translation_ns) {
                    entry.1.push(ns as f64);
                }
            }
        }
        RepeatSummary {
            workload: workload
                .into_iter()
                .filter_map(|(k, v)| Some((k, MeanStddev::of(&v)?)))
                .collect(),
            devices: maps
                .into_iter()
                .filter_map(|(k, (maps, ns))| {
                    let summary = DeviceSummary {
                        dma_maps: MeanStddev::of(&maps)?,
                        translation_ns: MeanStddev::of(&ns),
                    };
                    Some((k, summary))
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iommutop_abi::workload::WorkUnit;
    use serde_json::json;

    #[test]
    fn mean_and_sample_standard_deviation() {
        let m = MeanStddev::of(&[90.0, 100.0, 110.0]).expect("three values");
        assert_eq!((m.n, m.mean), (3, 100.0));
        assert!((m.stddev.expect("n > 1") - 10.0).abs() < 1e-12);
        assert_eq!(
            MeanStddev::of(&[5.0]),
            Some(MeanStddev {
                n: 1,
                mean: 5.0,
                stddev: None
            })
        );
        assert_eq!(MeanStddev::of(&[]), None);
        assert_eq!(MeanStddev::of(&[1.0, f64::NAN]), None);
    }

    fn results(rate: f64, count: f64) -> WorkloadResults {
        let work = Headline::counted(WorkUnit::Transaction, count, "transactions_per_s", rate);
        let r = json!({"transactions_per_s": rate, "transactions": count, "host": "x",
                       "work": work});
        WorkloadResults::read("other", r.as_object().cloned().expect("object"))
    }

    #[test]
    fn merged_results_average_the_numbers_and_total_the_work() {
        let runs = [results(100.0, 1000.0), results(200.0, 2000.0)];
        let merged = Repeats::merged_results("other", &runs);
        assert_eq!(merged.metric("transactions_per_s"), Some(150.0));
        assert_eq!(merged.to_map().expect("encodes")["host"], json!("x"));
        let headline = merged.headline().expect("work");
        assert_eq!(
            headline.count,
            Some(3000.0),
            "devices[] hold both runs' work"
        );
        assert_eq!(headline.rate_per_s, Some(150.0));
    }

    /// A whole count's mean is written whole, so netperf's mean is still netperf's results.
    #[test]
    fn merged_netperf_results_stay_typed() {
        let run = |transactions: u64| {
            let r = json!({"transactions_per_s": transactions as f64 / 10.0,
                           "transactions": transactions, "elapsed_s": 10.0, "test": "TCP_RR",
                           "mode": "local", "nics": [], "command": []});
            WorkloadResults::read("netperf", r.as_object().cloned().expect("object"))
        };
        let merged = Repeats::merged_results("netperf", &[run(1000), run(2001)]);
        let WorkloadResults::Netperf(results) = merged else {
            panic!("{merged:?}")
        };
        assert_eq!(
            (results.transactions, results.transactions_per_s),
            (1501, 150.05)
        );
    }

    #[test]
    fn a_run_keeps_its_numbers_and_the_summary_spreads_them() {
        let run = |rate: f64| RepeatRun {
            t_s: 0.0,
            duration_s: 10.0,
            workload: BTreeMap::from([("transactions_per_s".to_string(), rate)]),
            work_count: Some(rate * 10.0),
            devices: BTreeMap::from([(
                "0000:00:02.0".into(),
                RepeatDevice {
                    dma_maps: 2000,
                    completions: 50,
                    translation_ns: Some(rate as u64 * 100),
                },
            )]),
        };
        let mut idle = run(100.0);
        idle.devices.clear();
        let with_idle = RepeatSummary::of(&[run(100.0), idle]);
        let maps = with_idle.devices[&"0000:00:02.0".into()].dma_maps;
        assert_eq!((maps.n, maps.mean), (2, 1000.0), "an idle run made 0 maps");
        let repeats = Repeats::new(1, vec![run(100.0), run(120.0)]);
        let w = repeats.summary.workload["transactions_per_s"];
        assert_eq!((w.n, w.mean), (2, 110.0));
        assert!((w.stddev.expect("two runs") - 200f64.sqrt()).abs() < 1e-9);
        let d = &repeats.summary.devices[&"0000:00:02.0".into()];
        assert_eq!(d.dma_maps.stddev, Some(0.0));
        assert_eq!(d.translation_ns.map(|t| t.mean), Some(11000.0));
        assert_eq!(repeats.runs[0].completions_per_s(), Some(5.0));
        assert_eq!(
            repeats.runs[0].translation_ns_per_unit(&"0000:00:02.0".into(), true),
            Some(10.0),
            "10000 ns over 1000 transactions"
        );
        assert_eq!(
            repeats.runs[0].translation_ns_per_unit(&"0000:00:02.0".into(), false),
            Some(200.0),
            "10000 ns over the device's own 50 completions"
        );
        assert_eq!(
            repeats.runs[0].translation_ns_per_unit(&"nope".into(), true),
            None
        );
    }
}
