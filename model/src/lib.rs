//! iommutop's plain data: what the sampler reads from the kernel, what reports carry, and the
//! arithmetic on both (histograms, deltas, rates, percentiles). Nothing here touches the kernel,
//! BPF or a terminal, so everything is unit-tested without root.

pub mod compare;
pub mod cross_check;
pub mod derive;
pub mod device_filter;
pub mod diagnose;
pub mod direction;
pub mod facts;
pub mod hist;
pub mod html;
pub mod losses;
pub mod map_directions;
pub mod op_stats;
mod ops_map;
pub mod report;
pub mod results;
pub mod sample;
pub mod shell;
pub mod snapshot;
pub mod sriov;
pub mod summary;
pub mod tail;
pub mod task_filter;
pub mod text;
pub mod time;
pub mod unseen;
pub mod waiting;

pub use iommutop_abi::{keyed_by_text, params, pci, row_key, units, workload};

pub use derive::{Derived, IoBasis};
pub use device_filter::DeviceFilter;
pub use facts::{DeviceFacts, DomainType, HostFacts, IommuGroup, IommuUnit, IommuVendor};
pub use hist::{slot_of, Histogram, SLOT_VECTORS};
pub use ops_map::op_named;
pub use report::{schema_text, Report, ReportError, ReportInputs, SCHEMA_VERSION};
pub use sample::{Op, OpCounters, RawSample, RawSource, SourceKind, HIST_SLOTS};
pub use snapshot::{Device, Latency, OpStats, RowKind, Snapshot};
pub use summary::{render_summary, render_summary_fitted};
pub use task_filter::TaskFilter;
pub use time::rfc3339_utc;
