//! What the report holds of a run's results: the model's [`WorkloadResults`], typed for every
//! built-in workload, with the unit of work among them as `work`.

use iommutop_model::results::WorkloadResults;
use iommutop_model::workload::Headline;

/// `results` with `work`, the headline, among them where their type keeps one (a failed or
/// interrupted run's results have none).
pub fn with_work(results: WorkloadResults, work: Option<Headline>) -> WorkloadResults {
    match results {
        WorkloadResults::Netperf(mut results) => {
            results.work = work;
            WorkloadResults::Netperf(results)
        }
        WorkloadResults::Fio(mut results) => {
            results.run.work = work;
            WorkloadResults::Fio(results)
        }
        WorkloadResults::DmaContention(mut results) => {
            results.work = work;
            WorkloadResults::DmaContention(results)
        }
        WorkloadResults::Tlb(mut results) => {
            results.work = work;
            WorkloadResults::Tlb(results)
        }
        WorkloadResults::VfioNvme(mut results) => {
            results.set_work(work);
            WorkloadResults::VfioNvme(results)
        }
        WorkloadResults::Marked {
            results,
            error,
            interrupted,
        } => WorkloadResults::Marked {
            results: Box::new(with_work(*results, work)),
            error,
            interrupted,
        },
        other @ (WorkloadResults::Failed { .. }
        | WorkloadResults::Interrupted
        | WorkloadResults::Other(_)) => other,
    }
}

/// A run's output as the report holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportedOutput {
    pub results: WorkloadResults,
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
            if path.extension().is_none_or(|e| e != "json") {
                continue; // the guest console logs beside them
            }
            let text = std::fs::read_to_string(&path).expect("readable");
            let report: serde_json::Value = serde_json::from_str(&text).expect("JSON");
            let Some(workload) = report["run"]["workload"].as_object() else {
                continue;
            };
            let name = workload["name"].as_str().expect("name");
            let held = workload["results"].as_object().expect("results").clone();
            let typed = WorkloadResults::read(name, held.clone());
            assert!(
                !matches!(typed, WorkloadResults::Other(_)),
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
            let reported = with_work(WorkloadResults::from(results), Some(headline));
            assert!(matches!(reported, WorkloadResults::Fio(_)));
            let read = WorkloadResults::read("fio", reported.to_map().expect("encodes"));
            assert_eq!(read, reported);
        }
    }
}
