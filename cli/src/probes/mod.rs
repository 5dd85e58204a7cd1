//! Probe points, their attach tiers, and the BPF loader.

mod abi;
mod attach;
mod bare_loader;
mod boot_cache;
mod bpf_syscalls;
mod btf_index;
mod btf_walk;
mod capacity;
mod convert;
mod core_target;
mod cross_check;
mod detach;
mod dispatch;
mod dispatch_cache;
mod entry_groups;
mod fdinfo;
mod fentry_jobs;
mod hook_error;
mod kallsyms;
mod kallsyms_cache;
mod kernel_btf_cache;
mod load;
pub mod loader;
pub mod map_memory;
mod maps;
mod multi;
mod multi_cast;
mod multi_shapes;
mod object_copy;
mod preemption;
mod relocate;
mod role;
pub mod rows;
pub mod selection;
pub mod selftest;
mod settings;
pub mod status;
pub mod table;
mod timing;
#[cfg(test)]
mod tracker_test;
mod understudy;
mod vendors;
mod verifier_log;
mod verify;

use crate::exit::Failure;
pub use load::LoadError;
pub use loader::Probes;
pub use selection::PointSelection;
pub use settings::ProbeSettings;
pub use status::PointStatus;
pub use verify::{verify_all_programs, ProgramVerdict};

/// Where the probes keep what outlives a run until the next boot: the dispatch calibration
/// (dispatch_cache.rs) and the lock of runs still detaching (detach.rs). A directory of its own:
/// the `.json` files directly in `/run/iommutop` are the host journal's change records, which
/// every sweep reads as such.
const RUN_DIR: &str = "/run/iommutop/probes";

/// The log target of every decision the loader makes, in whichever module (`RUST_LOG` names it).
const LOADER_LOG: &str = "iommutop::probes::loader";

/// Load errors that mean "this system can't" rather than "this run failed".
pub fn load_failure(error: impl Into<LoadError>) -> Failure {
    let error: LoadError = error.into();
    match error {
        LoadError::NoBtf { .. } | LoadError::NothingAttached(_) => Failure::environment(error),
        LoadError::BadSetting(_) => Failure::usage(error),
        other => Failure::from(other),
    }
}
