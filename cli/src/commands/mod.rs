//! One module per subcommand.

pub mod call_paths;
pub mod compare;
pub mod completions;
pub mod diagnose;
pub mod docs;
pub mod html;
pub mod probes;
pub mod profiles;
pub mod record;
pub mod report;
pub mod run;
pub mod serve;
pub mod top;
pub mod workload;
