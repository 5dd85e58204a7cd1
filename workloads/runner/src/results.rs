//! Every workload's results as one enum ([`WorkloadResults`]), and what the report holds of
//! them: a JSON object, keys in name order (as a map of results was written before they were
//! typed), the unit of work among them as `work`.

use crate::dma_contention::DmaContentionResults;
use crate::tlb::TlbResults;
use crate::vfio_nvme::VfioNvmeResults;
use iommutop_model::results::{results_object, WorkloadResults as ReportResults};
use iommutop_model::workload::{Headline, WORK_KEY};
use serde::Serialize;

/// What a built-in workload's run did: netperf's and fio's already as the report types them,
/// the others one variant each (boxed: they are hundreds of bytes each, and one is made per
/// run).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum WorkloadResults {
    Typed(ReportResults),
    DmaContention(Box<DmaContentionResults>),
    Tlb(Box<TlbResults>),
    VfioNvme(Box<VfioNvmeResults>),
}

impl WorkloadResults {
    /// The results as `run.workload.results` holds them, `work` the headline when there is
    /// one: netperf's and fio's typed; the other workloads' as the JSON object their types
    /// write (keys in name order), until their types move into the model.
    pub fn to_report(self, work: Option<Headline>) -> Result<ReportResults, serde_json::Error> {
        Ok(match self {
            WorkloadResults::Typed(ReportResults::Netperf(mut results)) => {
                results.work = work;
                ReportResults::Netperf(results)
            }
            WorkloadResults::Typed(ReportResults::Fio(mut results)) => {
                results.run.work = work;
                ReportResults::Fio(results)
            }
            WorkloadResults::Typed(other) => other,
            other => {
                let mut results = results_object(serde_json::to_value(&other)?)?;
                if let Some(work) = work {
                    results.insert(WORK_KEY.to_string(), serde_json::to_value(work)?);
                }
                ReportResults::Other(results)
            }
        })
    }
}

impl From<ReportResults> for WorkloadResults {
    fn from(results: ReportResults) -> WorkloadResults {
        WorkloadResults::Typed(results)
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
    pub results: ReportResults,
    pub warnings: Vec<String>,
}

#[cfg(test)]
mod examples;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fio::parse::{parse_report, split_objects};

    /// Every CLI fixture report's workload results (lab reports of TCP_RR between two NICs,
    /// written by the map-building code) read into their workload's type, not kept as a map;
    /// the reports with no workload are counted out.
    #[test]
    fn fixture_reports_results_read_typed() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../cli/tests/fixtures");
        let mut read = 0;
        for entry in std::fs::read_dir(&dir).expect("fixtures") {
            let path = entry.expect("entry").path();
            let text = std::fs::read_to_string(&path).expect("readable");
            let report: serde_json::Value = serde_json::from_str(&text).expect("JSON");
            let Some(workload) = report["run"]["workload"].as_object() else {
                continue;
            };
            let name = workload["name"].as_str().expect("name");
            let held = workload["results"].as_object().expect("results").clone();
            let typed = ReportResults::read(name, held.clone());
            assert!(
                !matches!(typed, ReportResults::Other(_)),
                "{}: {name} results kept as a map",
                path.display()
            );
            assert_eq!(typed.to_map().expect("encodes"), held, "{}", path.display());
            read += 1;
        }
        assert!(read >= 3, "only {read} fixture reports with a workload");
    }

    /// fio's results, with their headline, read back from their JSON into the same value.
    #[test]
    fn fio_results_read_back_typed() {
        for text in [
            include_str!("../testdata/fio-randread-4k-qd32x4.json"),
            include_str!("../testdata/fio-randwrite-4k-qd32x4.json"),
            include_str!("../testdata/fio-two-jobs-with-note.json"),
        ] {
            let (objects, _) = split_objects(text);
            let result = parse_report(objects.last().expect("an object")).expect("fio JSON");
            let mut results = crate::fio::results_of(&result);
            results.run.command = vec!["fio".into()];
            let headline = crate::fio::headline(&result);
            let reported = WorkloadResults::from(ReportResults::from(results))
                .to_report(Some(headline))
                .expect("encodes");
            assert!(matches!(reported, ReportResults::Fio(_)));
            let read = ReportResults::read("fio", reported.to_map().expect("encodes"));
            assert_eq!(read, reported);
        }
    }
}
