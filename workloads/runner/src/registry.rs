//! The workloads by name: their parameters, descriptions, and constructors.

use crate::error::WorkloadError;
use crate::params::{ParamSpec, ParamValues};
use crate::{dma_contention, fio, netperf, tlb, vfio_nvme, Workload};
use iommutop_model::results::WorkloadResults as ReportResults;
use serde_json::{Map, Value};

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::EnumCount,
    strum::VariantArray,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[strum(serialize_all = "kebab-case")]
pub enum WorkloadKind {
    Netperf,
    Fio,
    DmaContention,
    Tlb,
    /// The userspace NVMe driver over VFIO (crate `iommutop-vfio-nvme`), run by the CLI.
    VfioNvme,
}

impl WorkloadKind {
    pub const ALL: [WorkloadKind; <WorkloadKind as strum::EnumCount>::COUNT] =
        WorkloadKind::in_declaration_order();

    const fn in_declaration_order() -> [WorkloadKind; <WorkloadKind as strum::EnumCount>::COUNT] {
        let variants = <WorkloadKind as strum::VariantArray>::VARIANTS;
        let mut all = [WorkloadKind::Netperf; <WorkloadKind as strum::EnumCount>::COUNT];
        let mut i = 0;
        while i < all.len() {
            all[i] = variants[i];
            i += 1;
        }
        all
    }

    pub fn name(self) -> &'static str {
        self.into()
    }

    pub fn from_name(name: &str) -> Option<WorkloadKind> {
        name.parse().ok()
    }

    /// All names, for messages.
    pub fn names() -> String {
        WorkloadKind::ALL.map(WorkloadKind::name).join(", ")
    }

    pub fn description(self) -> &'static str {
        match self {
            WorkloadKind::Netperf => {
                "netperf request/response (TCP_RR) between two NICs in two network namespaces, \
                 against a remote netserver, or on loopback"
            }
            WorkloadKind::Fio => "fio with JSON output: IOPS, bandwidth, latency percentiles",
            WorkloadKind::DmaContention => {
                "fio reads from 1, 2, 4 … N threads; IOVA allocation and map/unmap latency per \
                 thread count, from the probes"
            }
            WorkloadKind::Tlb => {
                "pointer chase over growing working sets with 4 KiB and 2 MiB pages; TLB and \
                 cache reach from the steps"
            }
            WorkloadKind::VfioNvme => {
                "the userspace NVMe driver over VFIO: I/O at a queue depth, or the IOTLB sweep"
            }
        }
    }

    pub fn specs(self) -> &'static [ParamSpec] {
        match self {
            WorkloadKind::Netperf => netperf::SPECS,
            WorkloadKind::Fio => fio::SPECS,
            WorkloadKind::DmaContention => dma_contention::SPECS,
            WorkloadKind::Tlb => tlb::SPECS,
            WorkloadKind::VfioNvme => vfio_nvme::SPECS,
        }
    }

    /// The spec of one parameter.
    pub fn spec(self, key: &str) -> Option<&'static ParamSpec> {
        self.specs().iter().find(|s| s.key == key)
    }

    /// The parameter a profile's `duration_s` (and `--duration`) sets, if the workload runs for
    /// a time: `duration_s`, or for dma-contention `step_s` (each step's duration).
    pub fn duration_key(self) -> Option<&'static str> {
        match self {
            WorkloadKind::Netperf | WorkloadKind::Fio | WorkloadKind::VfioNvme => {
                Some("duration_s")
            }
            WorkloadKind::DmaContention => Some("step_s"),
            WorkloadKind::Tlb => None,
        }
    }

    /// Checks `given` against the workload's parameters and fills in the defaults.
    pub fn params(self, given: Map<String, Value>) -> Result<ParamValues, WorkloadError> {
        Ok(ParamValues::new(self.name(), self.specs(), given)?)
    }

    /// The workload, ready to check, prepare and run.
    pub fn build(self, params: ParamValues) -> Result<Box<dyn Workload>, WorkloadError> {
        Ok(match self {
            WorkloadKind::Netperf => Box::new(netperf::Netperf::new(params)?),
            WorkloadKind::Fio => Box::new(fio::Fio::new(params)?),
            WorkloadKind::DmaContention => Box::new(dma_contention::DmaContention::new(params)?),
            WorkloadKind::Tlb => Box::new(tlb::Tlb::new(params)?),
            WorkloadKind::VfioNvme => Box::new(vfio_nvme::VfioNvme::new(params)?),
        })
    }

    /// A few lines for a person: the headline numbers of `results` (none when the workload
    /// failed or was interrupted before it had any; a series' complete runs' when a later run
    /// did not complete).
    pub fn summarize(self, results: &ReportResults) -> String {
        match (self, results) {
            (_, ReportResults::Marked { results, .. }) => self.summarize(results),
            (_, ReportResults::Netperf(results)) => netperf::summarize(results),
            (_, ReportResults::Fio(results)) => fio::summarize(results),
            (_, ReportResults::DmaContention(results)) => dma_contention::summarize(results),
            (_, ReportResults::Tlb(results)) => tlb::summarize(results),
            (_, ReportResults::VfioNvme(results)) => vfio_nvme::summarize(results),
            _ => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_is_found_by_its_name_and_has_distinct_keys() {
        for kind in WorkloadKind::ALL {
            assert_eq!(WorkloadKind::from_name(kind.name()), Some(kind));
            let mut keys: Vec<&str> = kind.specs().iter().map(|s| s.key).collect();
            keys.sort();
            let n = keys.len();
            keys.dedup();
            assert_eq!(keys.len(), n, "{} declares a key twice", kind.name());
            if let Some(key) = kind.duration_key() {
                assert!(kind.spec(key).is_some(), "{}: {key}", kind.name());
            }
            for spec in kind.specs() {
                assert!(
                    !spec.help.is_empty(),
                    "{}.{} has no help",
                    kind.name(),
                    spec.key
                );
            }
        }
        assert_eq!(WorkloadKind::from_name("nope"), None);
    }

    #[test]
    fn docs_profiles_md_has_every_workloads_parameter_table() {
        let docs = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/profiles.md"),
        )
        .unwrap();
        for kind in WorkloadKind::ALL {
            let table = crate::params::markdown_table(kind.specs());
            assert!(
                docs.contains(&table),
                "docs/profiles.md lacks the current parameter table of {}:\n{table}",
                kind.name()
            );
        }
    }

    #[test]
    fn defaults_are_valid_values() {
        for kind in WorkloadKind::ALL {
            for spec in kind.specs() {
                let Some(text) = spec.default_text() else {
                    continue;
                };
                let value: Value = serde_json::from_str(&text).unwrap();
                assert!(
                    spec.check(&value).is_ok(),
                    "{}.{}: default {text} rejected",
                    kind.name(),
                    spec.key
                );
            }
        }
    }
}
