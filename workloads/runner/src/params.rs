//! Workload parameters, declared once per workload. The system itself lives in
//! [`iommutop_model::params`], so that the VFIO driver declares its parameters with it too.

pub use iommutop_model::params::{
    markdown_table, unknown_key_message, BadValue, DefaultValue, Kind, ParamError, ParamSpec,
    ParamValue, ParamValues, WorkloadParams,
};
