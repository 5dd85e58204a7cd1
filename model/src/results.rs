//! A workload's results, typed: one variant per built-in workload, a run that failed or was
//! interrupted before it had any, and the results of a workload this build does not know
//! (a third party's, or an older build's whose keys differ) kept as they were written.
//!
//! In a report they are a JSON object, keys in name order, the headline as `work`: exactly what
//! the map of results the workloads built before they were typed was. Reading keeps a typed
//! variant only when it writes back exactly what was read, so no report changes on a round trip.

pub mod dma_contention;
pub mod fio;
pub mod netperf;
pub mod tlb;
pub use iommutop_vfio_nvme_results as vfio_nvme;

use crate::sample::Op;
use dma_contention::DmaContentionResults;
use fio::FioResults;
use iommutop_abi::pci::PciAddress;
use iommutop_abi::workload::{Headline, WORK_KEY};
use netperf::NetperfResults;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use tlb::TlbResults;
use vfio_nvme::VfioNvmeResults;

/// The key of a failed run's error among its results.
const ERROR_KEY: &str = "error";
/// The key that marks a run interrupted before it finished.
const INTERRUPTED_KEY: &str = "interrupted";

/// What a workload's run did, as `run.workload.results` holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadResults {
    Netperf(Box<NetperfResults>),
    Fio(Box<FioResults>),
    DmaContention(Box<DmaContentionResults>),
    Tlb(Box<TlbResults>),
    /// An I/O run's or an IOTLB sweep's.
    VfioNvme(VfioNvmeResults),
    /// The workload failed before it had results: `{"error": …}`.
    Failed {
        error: String,
    },
    /// Interrupted before the workload had results: `{"interrupted": true}`.
    Interrupted,
    /// The results of a series' complete runs, typed, with the `error` or `interrupted` of a
    /// later run that did not complete beside them (in the JSON, keys among theirs).
    Marked {
        results: Box<WorkloadResults>,
        error: Option<String>,
        interrupted: bool,
    },
    /// Results of a workload this build has no type for, or that its type does not write back
    /// as they were written: kept as read.
    Other(Map<String, Value>),
}

impl WorkloadResults {
    /// The results of workload `name` as a report holds them: typed when the workload's type
    /// reads them and writes back the same JSON, else as they are.
    pub fn read(name: &str, results: Map<String, Value>) -> WorkloadResults {
        failure(&results)
            .or_else(|| read_typed(name, &results))
            .or_else(|| read_marked(name, &results))
            .unwrap_or(WorkloadResults::Other(results))
    }

    /// These results of workload `name` with the `error` or `interrupted` of `failed`, a later
    /// run of the series that did not complete, so that whoever reads the report's JSON sees it:
    /// a type with an `interrupted` of its own sets it; otherwise the mark sits beside the typed
    /// results ([`WorkloadResults::Marked`]).
    pub fn marked_by(self, name: &str, failed: &WorkloadResults) -> WorkloadResults {
        let (Ok(mut results), Ok(failed)) = (self.to_map(), failed.to_map()) else {
            return self;
        };
        for key in [ERROR_KEY, INTERRUPTED_KEY] {
            if let Some(value) = failed.get(key) {
                results.insert(key.to_string(), value.clone());
            }
        }
        WorkloadResults::read(name, results)
    }

    /// The results as a JSON object, keys in name order.
    pub fn to_map(&self) -> Result<Map<String, Value>, serde_json::Error> {
        let value = match self {
            WorkloadResults::Netperf(results) => serde_json::to_value(results)?,
            WorkloadResults::Fio(results) => serde_json::to_value(results)?,
            WorkloadResults::DmaContention(results) => serde_json::to_value(results)?,
            WorkloadResults::Tlb(results) => serde_json::to_value(results)?,
            WorkloadResults::VfioNvme(results) => serde_json::to_value(results)?,
            WorkloadResults::Failed { error } => serde_json::json!({ ERROR_KEY: error }),
            WorkloadResults::Interrupted => serde_json::json!({ INTERRUPTED_KEY: true }),
            WorkloadResults::Marked {
                results,
                error,
                interrupted,
            } => {
                let mut map = results.to_map()?;
                if let Some(error) = error {
                    map.insert(ERROR_KEY.to_string(), Value::from(error.as_str()));
                }
                if *interrupted {
                    map.insert(INTERRUPTED_KEY.to_string(), Value::Bool(true));
                }
                return Ok(map);
            }
            WorkloadResults::Other(results) => return Ok(results.clone()),
        };
        results_object(value)
    }

    /// The unit of work and headline numbers, if the workload stated them.
    pub fn headline(&self) -> Option<Headline> {
        match self {
            WorkloadResults::Netperf(results) => results.work.clone(),
            WorkloadResults::Fio(results) => results.run.work.clone(),
            WorkloadResults::DmaContention(results) => results.work.clone(),
            WorkloadResults::Tlb(results) => results.work.clone(),
            WorkloadResults::VfioNvme(results) => results.work().cloned(),
            WorkloadResults::Failed { .. } | WorkloadResults::Interrupted => None,
            WorkloadResults::Marked { results, .. } => results.headline(),
            WorkloadResults::Other(results) => {
                serde_json::from_value(results.get(WORK_KEY)?.clone()).ok()
            }
        }
    }

    /// The probes' counts per unit of work over the workload's own window (from its first unit
    /// to its last: no set-up, such as a NIC's receive ring filled when its link comes up), by
    /// PCI address; empty when the workload measured none.
    pub fn window_counts(&self) -> BTreeMap<PciAddress, PerUnit> {
        match self {
            WorkloadResults::Netperf(results) => results
                .per_transaction
                .iter()
                .flatten()
                .map(|(pci, nic)| (*pci, nic.counts))
                .collect(),
            WorkloadResults::Fio(results) => results.run.per_io.clone().unwrap_or_default(),
            WorkloadResults::Marked { results, .. } => results.window_counts(),
            _ => BTreeMap::new(),
        }
    }

    /// The devices the workload drove, as its results name them: netperf's NICs, the file or
    /// device fio and dma-contention read, the NVMe controller vfio-nvme drove, and every device
    /// it counted per unit ([`WorkloadResults::window_counts`]). PCI addresses and NIC or disk
    /// names, which [`crate::snapshot::Device::answers_to`] takes; empty when they name none.
    pub fn devices(&self) -> BTreeSet<String> {
        let mut names: BTreeSet<String> = self
            .window_counts()
            .into_keys()
            .map(|pci| pci.to_string())
            .collect();
        let mut add = |name: Option<String>| names.extend(name.filter(|n| !n.is_empty()));
        match self {
            WorkloadResults::Netperf(results) => {
                for nic in &results.nics {
                    add(Some(nic.name.clone()));
                    add(nic.pci_address.as_ref().map(ToString::to_string));
                }
            }
            WorkloadResults::Fio(results) => {
                if let Some(target) = &results.run.target {
                    add(target.disk.clone());
                    add(target.pci_address.as_ref().map(ToString::to_string));
                }
            }
            WorkloadResults::DmaContention(results) => {
                add(results.target.disk.clone());
                add(results.target.pci_address.as_ref().map(ToString::to_string));
            }
            WorkloadResults::VfioNvme(results) => {
                add(Some(results.device().pci_address.to_string()));
            }
            WorkloadResults::Marked { results, .. } => names.extend(results.devices()),
            WorkloadResults::Other(results) => names.extend(named_devices(results)),
            WorkloadResults::Tlb(_)
            | WorkloadResults::Failed { .. }
            | WorkloadResults::Interrupted => {}
        }
        names
    }

    /// Whether the run was interrupted (the numbers cover it up to then).
    pub fn interrupted(&self) -> bool {
        match self {
            WorkloadResults::Netperf(_) | WorkloadResults::Failed { .. } => false,
            WorkloadResults::Fio(results) => results.run.interrupted,
            WorkloadResults::DmaContention(results) => results.interrupted,
            WorkloadResults::Tlb(results) => results.interrupted,
            WorkloadResults::VfioNvme(results) => results.interrupted(),
            WorkloadResults::Interrupted => true,
            WorkloadResults::Marked {
                results,
                interrupted,
                ..
            } => *interrupted || results.interrupted(),
            WorkloadResults::Other(results) => {
                results.get(INTERRUPTED_KEY) == Some(&Value::Bool(true))
            }
        }
    }

    /// Why the workload failed, if it did.
    pub fn error(&self) -> Option<&str> {
        match self {
            WorkloadResults::Failed { error } => Some(error),
            WorkloadResults::Marked { error, .. } => error.as_deref(),
            WorkloadResults::Other(results) => results.get(ERROR_KEY)?.as_str(),
            _ => None,
        }
    }

    /// Every finite number at the top level by its key (`transactions_per_s`, `read_iops`):
    /// what `compare`, `--fail-if workload.KEY` and repeated runs read.
    pub fn numbers(&self) -> BTreeMap<String, f64> {
        self.to_map()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(key, value)| Some((key, value.as_f64()?)))
            .filter(|(_, value)| value.is_finite())
            .collect()
    }

    /// The top-level number `key`, if it is one and finite.
    pub fn metric(&self, key: &str) -> Option<f64> {
        self.numbers().remove(key)
    }
}

/// The devices results this build has no type for name where the built-in workloads name
/// theirs: `nics[].name` and `.pci_address`, `target.disk` and `.pci_address`,
/// `device.pci_address`, and the keys of `per_transaction` and `per_io`.
fn named_devices(results: &Map<String, Value>) -> BTreeSet<String> {
    let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_string);
    let mut names = BTreeSet::new();
    let nics = results.get("nics").and_then(Value::as_array);
    for nic in nics.into_iter().flatten() {
        names.extend(text(nic.get("name")));
        names.extend(text(nic.get("pci_address")));
    }
    for object in ["target", "device"] {
        if let Some(target) = results.get(object) {
            names.extend(text(target.get("disk")));
            names.extend(text(target.get("pci_address")));
        }
    }
    for per_unit in ["per_transaction", "per_io"] {
        if let Some(Value::Object(map)) = results.get(per_unit) {
            names.extend(map.keys().cloned());
        }
    }
    names.retain(|name| !name.is_empty());
    names
}

/// `value` as the JSON object every workload's results are, or an error saying it is not one.
pub fn results_object(value: Value) -> Result<Map<String, Value>, serde_json::Error> {
    match value {
        Value::Object(map) => Ok(map),
        other => Err(serde::ser::Error::custom(format!(
            "workload results must be a JSON object, not {other}"
        ))),
    }
}

/// `results` of workload `name` read as its type, if they read as one and write back as they are.
fn read_typed(name: &str, results: &Map<String, Value>) -> Option<WorkloadResults> {
    let typed = match name {
        "netperf" => typed::<NetperfResults>(results),
        "fio" => typed::<FioResults>(results),
        "dma-contention" => typed::<DmaContentionResults>(results),
        "tlb" => typed::<TlbResults>(results),
        "vfio-nvme" => typed::<VfioNvmeResults>(results),
        _ => None,
    }?;
    (typed.to_map().as_ref().ok() == Some(results)).then_some(typed)
}

/// `results` as a series' complete results of workload `name` with a later run's `error` or
/// `interrupted` among them, if that is what they are: read typed without those keys, and the
/// mark put back writes exactly `results`. A type with an `interrupted` of its own keeps it (the
/// mark is then only the error, tried first).
fn read_marked(name: &str, results: &Map<String, Value>) -> Option<WorkloadResults> {
    let error = match results.get(ERROR_KEY) {
        Some(Value::String(error)) => Some(error.clone()),
        Some(_) => return None,
        None => None,
    };
    let interrupted = results.get(INTERRUPTED_KEY) == Some(&Value::Bool(true));
    let marks = [(error.is_some(), false), (interrupted, true)];
    marks
        .into_iter()
        .filter(|&(applies, _)| applies)
        .find_map(|(_, interrupted_is_the_mark)| {
            let mut kept = results.clone();
            kept.remove(ERROR_KEY);
            if interrupted_is_the_mark {
                kept.remove(INTERRUPTED_KEY);
            }
            let marked = WorkloadResults::Marked {
                results: Box::new(read_typed(name, &kept)?),
                error: error.clone(),
                interrupted: interrupted_is_the_mark,
            };
            (marked.to_map().as_ref().ok() == Some(results)).then_some(marked)
        })
}

/// `results` read as workload results of type `T`, if they read as one.
fn typed<T>(results: &Map<String, Value>) -> Option<WorkloadResults>
where
    T: DeserializeOwned + Into<WorkloadResults>,
{
    T::deserialize(results).ok().map(Into::into)
}

/// A failed or interrupted run's results: only `error`, or only `interrupted: true`.
fn failure(map: &Map<String, Value>) -> Option<WorkloadResults> {
    if map.len() != 1 {
        return None;
    }
    match (map.get(ERROR_KEY), map.get(INTERRUPTED_KEY)) {
        (Some(Value::String(error)), _) => Some(WorkloadResults::Failed {
            error: error.clone(),
        }),
        (_, Some(Value::Bool(true))) => Some(WorkloadResults::Interrupted),
        _ => None,
    }
}

impl Serialize for WorkloadResults {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_map()
            .map_err(serde::ser::Error::custom)?
            .serialize(serializer)
    }
}

impl From<NetperfResults> for WorkloadResults {
    fn from(results: NetperfResults) -> WorkloadResults {
        WorkloadResults::Netperf(Box::new(results))
    }
}

impl From<FioResults> for WorkloadResults {
    fn from(results: FioResults) -> WorkloadResults {
        WorkloadResults::Fio(Box::new(results))
    }
}

impl From<DmaContentionResults> for WorkloadResults {
    fn from(results: DmaContentionResults) -> WorkloadResults {
        WorkloadResults::DmaContention(Box::new(results))
    }
}

impl From<TlbResults> for WorkloadResults {
    fn from(results: TlbResults) -> WorkloadResults {
        WorkloadResults::Tlb(Box::new(results))
    }
}

impl From<VfioNvmeResults> for WorkloadResults {
    fn from(results: VfioNvmeResults) -> WorkloadResults {
        WorkloadResults::VfioNvme(results)
    }
}

/// One row's counts over a window per unit of work (transaction, I/O), each of the operations
/// below under its name (`dma_map`, …), zeros included.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct PerUnit {
    pub completion: f64,
    pub dma_map: f64,
    pub dma_unmap: f64,
    pub iommu_map: f64,
    pub iommu_unmap: f64,
    pub iotlb_flush: f64,
    pub iotlb_sync: f64,
    pub iova_alloc: f64,
    pub iova_free: f64,
}

impl PerUnit {
    /// The figure of `op`, if it is one counted per unit.
    pub fn of(&self, op: Op) -> Option<f64> {
        Some(match op {
            Op::Completion => self.completion,
            Op::DmaMap => self.dma_map,
            Op::DmaUnmap => self.dma_unmap,
            Op::IommuMap => self.iommu_map,
            Op::IommuUnmap => self.iommu_unmap,
            Op::IotlbFlush => self.iotlb_flush,
            Op::IotlbSync => self.iotlb_sync,
            Op::IovaAlloc => self.iova_alloc,
            Op::IovaFree => self.iova_free,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(name: &str, results: Value) -> WorkloadResults {
        WorkloadResults::read(name, results.as_object().cloned().expect("an object"))
    }

    #[test]
    fn failures_read_as_their_variants_and_write_back() {
        let failed = read("fio", json!({"error": "fio exited with 1"}));
        assert_eq!(
            failed,
            WorkloadResults::Failed {
                error: "fio exited with 1".into()
            }
        );
        assert_eq!(failed.error(), Some("fio exited with 1"));
        let interrupted = read("netperf", json!({"interrupted": true}));
        assert_eq!(interrupted, WorkloadResults::Interrupted);
        assert!(interrupted.interrupted());
        for (value, results) in [
            (json!({"error": "fio exited with 1"}), failed),
            (json!({"interrupted": true}), interrupted),
        ] {
            assert_eq!(serde_json::to_value(&results).expect("encodes"), value);
        }
    }

    /// A series whose later run was interrupted or failed says so in the results it keeps.
    #[test]
    fn complete_results_marked_by_a_failed_run_carry_its_mark() {
        let complete = read("tlb-sweep", json!({"points": 4, "work": {"unit": "read"}}));
        let marked = complete.marked_by("tlb-sweep", &WorkloadResults::Interrupted);
        assert!(marked.interrupted());
        assert_eq!(marked.metric("points"), Some(4.0));
        let failed = WorkloadResults::Failed {
            error: "exited with 1".into(),
        };
        let marked = marked.marked_by("tlb-sweep", &failed);
        assert_eq!(marked.error(), Some("exited with 1"));
        assert!(marked.interrupted(), "the first mark stays");
    }

    /// netperf's results (no `interrupted` of their own) from a lab report, marked by a later
    /// run that failed, then by one interrupted: typed beside the marks, the JSON the complete
    /// results' with `error` and `interrupted` added, and read back as the same value.
    #[test]
    fn netperf_results_marked_by_a_later_run_stay_typed_beside_the_mark() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../cli/tests/fixtures/tcp-rr-intel-6.12.json");
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("readable")).expect("JSON");
        let map = report["run"]["workload"]["results"]
            .as_object()
            .cloned()
            .expect("an object");
        let complete = WorkloadResults::read("netperf", map.clone());
        assert!(matches!(complete, WorkloadResults::Netperf(_)));
        let failed = WorkloadResults::Failed {
            error: "netperf exited with 1".into(),
        };

        let marked = complete.clone().marked_by("netperf", &failed);
        let WorkloadResults::Marked {
            results,
            error,
            interrupted,
        } = &marked
        else {
            panic!("not marked: {marked:?}")
        };
        assert_eq!(**results, complete);
        assert_eq!(
            (error.as_deref(), *interrupted),
            (Some("netperf exited with 1"), false)
        );
        assert_eq!(marked.error(), Some("netperf exited with 1"));
        assert!(!marked.interrupted());
        assert_eq!(marked.headline(), complete.headline());
        let mut expected = map.clone();
        expected.insert("error".into(), json!("netperf exited with 1"));
        assert_eq!(marked.to_map().expect("encodes"), expected);
        assert_eq!(WorkloadResults::read("netperf", expected.clone()), marked);
        assert_eq!(
            marked.metric("transactions_per_s"),
            complete.metric("transactions_per_s")
        );

        let twice = marked.marked_by("netperf", &WorkloadResults::Interrupted);
        assert!(twice.interrupted(), "the later mark joins");
        assert_eq!(
            twice.error(),
            Some("netperf exited with 1"),
            "the first stays"
        );
        expected.insert("interrupted".into(), json!(true));
        assert_eq!(twice.to_map().expect("encodes"), expected);
        assert_eq!(WorkloadResults::read("netperf", expected), twice);
    }

    /// A mark that is not one (an `error` that is not text) or results that do not read as the
    /// workload's type without it stay as they were written.
    #[test]
    fn what_only_looks_marked_is_kept_as_written() {
        for value in [
            json!({"error": 3, "transactions": 1}),
            json!({"error": "x", "transactions": "many"}),
            json!({"interrupted": false, "transactions": 1}),
        ] {
            let map = value.as_object().cloned().expect("an object");
            assert_eq!(
                WorkloadResults::read("netperf", map.clone()),
                WorkloadResults::Other(map)
            );
        }
    }

    /// dma-contention's, tlb's and vfio-nvme's results as the build before their types wrote
    /// them (`model/tests/results/`) read as their types and write back the same text.
    #[test]
    fn results_written_before_their_types_read_typed_and_write_back_the_same_text() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/results");
        for (name, file) in [
            ("dma-contention", "dma-contention.json"),
            ("tlb", "tlb.json"),
            ("vfio-nvme", "vfio-nvme-run.json"),
            ("vfio-nvme", "vfio-nvme-sweep.json"),
        ] {
            let text = std::fs::read_to_string(dir.join(file)).expect("readable");
            let map: Map<String, Value> = serde_json::from_str(&text).expect("an object");
            let results = WorkloadResults::read(name, map);
            let typed = match &results {
                WorkloadResults::DmaContention(_) => "dma-contention",
                WorkloadResults::Tlb(_) => "tlb",
                WorkloadResults::VfioNvme(_) => "vfio-nvme",
                other => panic!("{file}: read as {other:?}"),
            };
            assert_eq!(typed, name, "{file}");
            let mut written = serde_json::to_string_pretty(&results).expect("encodes");
            written.push('\n');
            assert!(written == text, "{file} written back differs");
        }
    }

    /// What compare, gates and run read of them comes from the typed fields.
    #[test]
    fn typed_results_answer_headline_interrupted_and_metrics() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/results");
        let read_file = |name: &str, file: &str| {
            let text = std::fs::read_to_string(dir.join(file)).expect("readable");
            WorkloadResults::read(name, serde_json::from_str(&text).expect("an object"))
        };
        let contention = read_file("dma-contention", "dma-contention.json");
        assert!(contention.interrupted());
        assert_eq!(contention.metric("dma_map_mean_ns_growth"), Some(2.5));
        assert_eq!(
            contention.headline().map(|h| h.unit),
            Some(iommutop_abi::workload::WorkUnit::Io)
        );
        let tlb = read_file("tlb", "tlb.json");
        assert!(!tlb.interrupted());
        assert_eq!(tlb.metric("ns_per_access_2m_largest"), Some(9.5));
        let run = read_file("vfio-nvme", "vfio-nvme-run.json");
        assert!(matches!(
            run,
            WorkloadResults::VfioNvme(VfioNvmeResults::Run(_))
        ));
        assert_eq!(run.metric("setup_map_ns"), Some(96_422.0));
        assert_eq!(run.headline().and_then(|h| h.count), Some(800.0));
        let sweep = read_file("vfio-nvme", "vfio-nvme-sweep.json");
        assert_eq!(sweep.metric("iotlb_entries_4k"), Some(64.0));
        assert_eq!(sweep.metric("iotlb_entries_2m"), None);
    }

    /// A key the type does not know would be dropped on the way back: such results stay a map.
    #[test]
    fn results_the_type_would_change_are_kept_as_read() {
        let unknown = json!({"transactions_per_s": 10.0, "transactions": 100, "elapsed_s": 10.0,
                             "test": "TCP_RR", "mode": "local", "nics": [], "command": [],
                             "from_a_newer_build": 1});
        let results = read("netperf", unknown.clone());
        assert!(matches!(results, WorkloadResults::Other(_)));
        assert_eq!(serde_json::to_value(&results).expect("encodes"), unknown);
        assert_eq!(results.metric("transactions_per_s"), Some(10.0));
        let mut known = unknown;
        known
            .as_object_mut()
            .expect("object")
            .remove("from_a_newer_build");
        assert!(matches!(
            read("netperf", known),
            WorkloadResults::Netperf(_)
        ));
    }
}
