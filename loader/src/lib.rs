//! The BPF loader: probe points and their attach tiers, the kernel's BTF and symbols read for
//! them, the embedded BPF objects relocated, loaded and attached, and their maps read into samples.
//!
//! Its parts, one concern a folder:
//! - [`points`]: the probe table (the data), which points a run selects, what each one got.
//! - [`kernel`]: what the running kernel has, from /proc/kallsyms and its IOMMU units.
//! - [`btf`]: what the loader needs of the kernel's BTF, from one walk of it.
//! - [`object`]: the embedded object, relocated against this kernel and loaded; our own BPF
//!   syscalls for what aya does not load.
//! - [`links`]: fentry and fexit hooks verified and attached in parallel, and multi-function links.
//! - [`calibration`]: what a probe program cannot time from inside: the kernel's dispatch around
//!   it, and preemption inside it (understudies).
//! - [`maps`]: the object's maps, their sizes and memory, and reading them into samples.
//! - [`probes`]: the loaded probes ([`Probes`]): attaching, verifying, detaching.
//! - [`sysinfo`]: what the host is (kernel, command line, config, IOMMU units, PCI devices).

mod abi;
mod boot_cache;
mod btf;
mod calibration;
mod kernel;
mod links;
mod maps;
mod object;
mod points;
mod probes;
mod selftest;
mod settings;
pub mod sysinfo;
mod timing;
#[cfg(test)]
mod tracker_test;

pub use maps::map_memory::{
    MapKind, MapMemory, MapShape, LARGE_MACHINE_BUDGET, LARGE_MACHINE_CPUS, STATS_MAP,
};
pub use maps::rows::{ended_sources, HostNow, SourceId, SysfsHost};
pub use object::load::LoadError;
pub use points::selection::PointSelection;
pub use points::status::{PointStatus, Refusal};
pub use points::table::{hook_kernels, point};
pub use probes::cross_check::Attached as CrossCheckAttached;
pub use probes::loader::Probes;
pub use probes::verify::{verify_all_programs, ProgramVerdict};
pub use selftest::check_hist_slots;
pub use settings::ProbeSettings;

/// Where the probes keep what outlives a run until the next boot: the dispatch calibration
/// (calibration/dispatch_cache.rs) and the lock of runs still detaching (probes/detach.rs). A
/// directory of its own: the `.json` files directly in `/run/iommutop` are the host journal's
/// change records, which every sweep reads as such.
const RUN_DIR: &str = "/run/iommutop/probes";

/// The log target of every decision the loader makes, in whichever module (`RUST_LOG` names it).
const LOADER_LOG: &str = "iommutop::probes::loader";
