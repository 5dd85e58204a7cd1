//! What a workload says its work is: the unit (a transaction, a read, an I/O, an access), how
//! many it did and at what rate. Typed, so that compare and diagnose read fields instead of
//! guessing from the names of result keys; a report keeps it in `run.workload.results.work`.

use serde::{Deserialize, Serialize};

/// The key of [`Headline`] among a workload's results.
pub const WORK_KEY: &str = "work";

/// One unit of a workload's work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkUnit {
    /// A request and its response (netperf TCP_RR).
    Transaction,
    /// A read (fio reading, dd).
    Read,
    /// A read or a write (fio mixed or writing, the VFIO NVMe driver).
    Io,
    /// A request of a request-response workload other than TCP_RR.
    Request,
    /// A memory access (the TLB pointer chase).
    Access,
}

impl WorkUnit {
    /// The unit as sentences name it: `per transaction`, `per I/O`.
    pub fn name(self) -> &'static str {
        match self {
            WorkUnit::Transaction => "transaction",
            WorkUnit::Read => "read",
            WorkUnit::Io => "I/O",
            WorkUnit::Request => "request",
            WorkUnit::Access => "access",
        }
    }
}

/// A workload's unit of work and its headline numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    pub unit: WorkUnit,
    /// How many units the run did; `None` when the workload does not count them.
    pub count: Option<f64>,
    /// The result key of the headline rate (`transactions_per_s`, `read_iops`, `iops`), which
    /// `--fail-if workload.KEY` and compare's metrics name.
    pub rate_metric: Option<String>,
    /// Units per second.
    pub rate_per_s: Option<f64>,
}

impl Headline {
    /// A headline of `count` units at `rate_per_s`, the rate kept in results as `rate_metric`.
    pub fn counted(unit: WorkUnit, count: f64, rate_metric: &str, rate_per_s: f64) -> Headline {
        Headline {
            unit,
            count: Some(count).filter(|c| c.is_finite()),
            rate_metric: Some(rate_metric.to_string()),
            rate_per_s: Some(rate_per_s).filter(|r| r.is_finite()),
        }
    }

    /// A unit of work the workload does not count (its figures are per completion then).
    pub fn uncounted(unit: WorkUnit) -> Headline {
        Headline {
            unit,
            count: None,
            rate_metric: None,
            rate_per_s: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_headline_is_written_as_results_hold_it() {
        let headline = Headline::counted(WorkUnit::Transaction, 5000.0, "transactions_per_s", 1e3);
        assert_eq!(
            serde_json::to_value(&headline).expect("encodes"),
            serde_json::json!({"unit": "transaction", "count": 5000.0,
                               "rate_metric": "transactions_per_s", "rate_per_s": 1000.0})
        );
        assert_eq!(WorkUnit::Io.name(), "I/O");
    }
}
