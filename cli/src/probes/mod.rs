//! Probe points, their attach tiers, and the BPF loader.

mod abi;
mod convert;
mod kallsyms;
pub mod loader;
pub mod selection;
pub mod status;
pub mod table;

pub use loader::{verify_all_programs, LoadError, Probes, ProgramVerdict};
pub use selection::PointSelection;
pub use status::PointStatus;
pub use table::Tier;
