//! Every workload's results as one enum ([`WorkloadResults`]), and what the report holds of
//! them: a JSON object, keys in name order (as a map of results was written before they were
//! typed), the unit of work among them as `work`.

use crate::dma_contention::DmaContentionResults;
use crate::fio::FioResults;
use crate::netperf::NetperfResults;
use crate::registry::WorkloadKind;
use crate::tlb::TlbResults;
use crate::vfio_nvme::VfioNvmeResults;
use iommutop_model::workload::Headline;
use serde::Serialize;
use serde_json::{Map, Value};

/// What a built-in workload's run did, one variant per workload (boxed: they are hundreds of
/// bytes each, and one is made per run).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum WorkloadResults {
    Netperf(Box<NetperfResults>),
    Fio(Box<FioResults>),
    DmaContention(Box<DmaContentionResults>),
    Tlb(Box<TlbResults>),
    VfioNvme(Box<VfioNvmeResults>),
}

impl WorkloadResults {
    /// The workload these are the results of.
    pub fn kind(&self) -> WorkloadKind {
        match self {
            WorkloadResults::Netperf(_) => WorkloadKind::Netperf,
            WorkloadResults::Fio(_) => WorkloadKind::Fio,
            WorkloadResults::DmaContention(_) => WorkloadKind::DmaContention,
            WorkloadResults::Tlb(_) => WorkloadKind::Tlb,
            WorkloadResults::VfioNvme(_) => WorkloadKind::VfioNvme,
        }
    }

    /// The results as `run.workload.results` holds them: a JSON object with keys in name order,
    /// `work` the headline when there is one.
    pub fn to_report(
        &self,
        work: Option<&Headline>,
    ) -> Result<Map<String, Value>, serde_json::Error> {
        let mut results = match serde_json::to_value(self)? {
            Value::Object(map) => map,
            other => {
                return Err(serde::ser::Error::custom(format!(
                    "{} results must be a JSON object, not {other}",
                    self.kind().name()
                )))
            }
        };
        if let Some(work) = work {
            work.store(&mut results);
        }
        Ok(results)
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
        WorkloadResults::VfioNvme(Box::new(results))
    }
}

/// A run's output as the report holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportedOutput {
    pub results: Map<String, Value>,
    pub warnings: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every CLI fixture report's workload results, read into their workload's type, write back
    /// exactly what the report holds: every key, and every number as it was spelt (lab reports of
    /// TCP_RR between two NICs, written by the map-building code). The reports with no workload
    /// are counted out; a workload the fixtures gain must be readable here too.
    #[test]
    fn fixture_reports_results_write_back_byte_for_byte() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../cli/tests/fixtures");
        let mut read = 0;
        for entry in std::fs::read_dir(&dir).expect("fixtures") {
            let path = entry.expect("entry").path();
            let text = std::fs::read_to_string(&path).expect("readable");
            let report: Value = serde_json::from_str(&text).expect("JSON");
            let Some(workload) = report["run"]["workload"].as_object() else {
                continue;
            };
            let held = workload["results"].as_object().expect("results").clone();
            let typed: WorkloadResults = match workload["name"].as_str() {
                Some("netperf") => {
                    serde_json::from_value::<NetperfResults>(Value::Object(held.clone()))
                        .expect("netperf results")
                        .into()
                }
                other => panic!("{}: no reader for workload {other:?}", path.display()),
            };
            let written = typed
                .to_report(Headline::of(&held).as_ref())
                .expect("encodes");
            assert_eq!(
                Value::Object(written).to_string(),
                Value::Object(held).to_string(),
                "{}",
                path.display()
            );
            read += 1;
        }
        assert!(read >= 3, "only {read} fixture reports with a workload");
    }
}
