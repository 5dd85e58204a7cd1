//! Probe points, their attach tiers, and the BPF loader.

mod abi;
mod convert;
pub mod loader;
pub mod status;
pub mod table;

pub use loader::{LoadError, Probes};
pub use status::PointStatus;
pub use table::Tier;
