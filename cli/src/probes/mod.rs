//! Probe points, their attach tiers, and the BPF loader.

mod abi;
mod arity;
mod capacity;
mod convert;
mod dispatch;
mod kallsyms;
pub mod loader;
pub mod selection;
pub mod selftest;
pub mod status;
pub mod table;
#[cfg(test)]
mod tracker_test;

use crate::exit::Failure;
pub use loader::{verify_all_programs, LoadError, Probes, ProgramVerdict};
pub use selection::PointSelection;
pub use status::PointStatus;

/// Load errors that mean "this system can't" rather than "this run failed".
pub fn load_failure(error: LoadError) -> Failure {
    match error {
        LoadError::NoBtf { .. } | LoadError::NothingAttached(_) => Failure::environment(error),
        LoadError::BadSetting(_) => Failure::usage(error),
        other => Failure::from(other),
    }
}
