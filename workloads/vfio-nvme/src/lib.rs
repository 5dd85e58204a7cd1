//! A userspace NVMe driver over VFIO, for measuring what the IOMMU's translation costs.
//!
//! With VFIO, DMA mappings are made once, at set-up, so during I/O the only IOMMU cost left is
//! the hardware's translation: IOTLB hits and misses. That makes it the clean experiment for
//! IOTLB reach and page size: [`run`] does 4 KiB random reads or writes at a chosen queue depth
//! over a chosen number of distinct buffer pages of 4 KiB, 2 MiB or 1 GiB, and reports IOPS,
//! latency percentiles and the latency CCDF; [`iotlb_sweep`] doubles the pages touched at QD1
//! and finds the step in median latency where they stop fitting the IOTLB.
//!
//! How a run goes:
//! 1. The parent (the caller's process) resolves the controller, refuses one the host uses
//!    (mounted, partitioned, held, swap), reserves huge pages if asked, and binds it to
//!    vfio-pci if asked ([`Target::bind`]); everything is recorded first ([`host`]).
//! 2. A worker process (this executable re-run with [`worker::WORKER_ARG`]) opens VFIO
//!    (legacy container/group with type1, or iommufd), maps the DMA memory once at IOVAs from
//!    our own allocator inside the IOMMU's valid ranges, brings the controller up from the
//!    spec, creates one I/O queue pair per thread and does the I/O with polled completions.
//! 3. When the worker exits — normally, on error, on a signal, or killed — the parent restores
//!    the binding and the huge page count, and returns the worker's results.
//!
//! The embedding program must call [`worker::maybe_run`] first thing in `main`.

pub mod changes;
pub mod engine;
pub mod error;
pub mod hist;
pub mod host;
pub mod iova;
pub mod located;
pub mod mem;
pub mod mmio;
pub mod nvme;
pub mod options;
pub mod params;
pub mod report;
pub mod rng;
pub mod sweep;
pub mod sys;
pub mod verify;
pub mod vfio;
pub mod worker;

pub use changes::{HostChanges, HugeChange, Rebind};
pub use error::{Error, ParamError};
pub use hist::{CcdfPoint, LatencyHistogram, LatencySummary};
pub use params::{Backend, PageSize, Params, Pattern, Stop, SweepParams, Target};
pub use report::{DeviceInfo, MapCost, SetupCost, ThreadResult, VerifySummary, VfioNvmeRun};
pub use sweep::{Knee, SweepSeries, SweepStep, VfioNvmeSweep};
pub use worker::{iotlb_sweep, run};
