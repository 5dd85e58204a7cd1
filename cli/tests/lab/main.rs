//! The lab tests: the real `iommutop` binary in QEMU guests booting stock Debian kernels behind an
//! emulated IOMMU (docs/lab.md). One test binary, so that libtest's threads (3 in `scripts/test`)
//! keep the cores busy across every module's guests instead of idling at each file's last test.
//!
//! Each module's guest scripts sit beside it (`exact.rs` runs `exact.sh`). A lab test fails, saying
//! why, when the lab cannot run here; with `IOMMUTOP_SKIP_LAB=1` it names itself as skipped.
//! Run one module: `cargo test -p iommutop --test lab -- exact::`.

#[path = "../support/mod.rs"]
mod support;

mod arm64;
mod detach;
mod diagnose;
mod eras;
mod exact;
mod probes;
mod serve;
mod server;
mod smoke;
mod tasks;
mod tui;
mod vendors;
mod vfio_nvme;
mod workloads;
