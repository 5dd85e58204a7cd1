//! Cumulative counters as read from the kernel's per-CPU maps, already summed over CPUs.
//!
//! The loader (cli) produces a [`RawSample`] every interval; everything downstream works on
//! differences between two of them. Counters only ever grow while the probes stay attached.

use crate::map_directions::MapDirections;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use iommutop_abi::health::Health;
pub use iommutop_abi::hist::HIST_SLOTS;
pub use iommutop_abi::op::Op;

/// One operation's cumulative aggregate (mirror of `struct iommutop_op_stats`, summed over CPUs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpCounters {
    pub count: u64,
    pub bytes: u64,
    pub failures: u64,
    /// Calls whose latency was measured (the attach tier can time them).
    pub timed: u64,
    /// The timed calls' own time: what was measured less the probes' cost nested in them.
    pub total_ns: u64,
    /// The timed calls' time as measured between entry and exit.
    #[serde(default)]
    pub raw_total_ns: u64,
    /// Of `raw_total_ns`, the time the calling tasks spent switched out (waiting, not in
    /// `total_ns`), and how many timed calls waited at all.
    #[serde(default)]
    pub offcpu_ns: u64,
    #[serde(default)]
    pub waited: u64,
    /// Log-linear slots of the calls' own time in ns (`crate::hist`).
    pub hist: Vec<u64>,
}

/// What the kernel keyed a set of counters by (`enum iommutop_key_kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// A `struct device` doing DMA; the name is its `dev_name()` (a PCI address for PCI devices).
    Device,
    /// Work of the deferred flush-queue timer and what nests inside it.
    Deferred,
    /// Completions of a block disk (name: `nvme0n1`).
    Disk,
    /// NAPI completions of a network device (name: `eth0`).
    Netdev,
    /// IOMMU work that ran outside any DMA API call (a VFIO map, ...).
    Unattributed,
}

/// One key of the kernel's per-device map with its counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawSource {
    pub kind: SourceKind,
    /// Kernel identity of the key (a pointer value): stable while the device exists.
    pub id: u64,
    /// Name read in the kernel (`dev->kobj.name`, disk or netdev name); empty if not read yet.
    pub name: String,
    /// Which life of `id` this is (`struct iommutop_dev_key` in ebpf/include/iommutop/abi.h): a
    /// device's binding to a driver, a netdev's ifindex, a disk's sequence number. A rebound
    /// device, or a new object at a freed one's address, is a source of its own.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: u32,
    /// The driver a device was bound to when the kernel took its row (`None`: unbound then, or
    /// not a device), read in the kernel: what its counts were made under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// Which statistics row, in which of its lives, the counters were read from (the row's
    /// index, times 2^32, plus how often it was given back before): a key whose row was given
    /// back and that took another is a new source, whose counters start at 0, however high they
    /// are by its first read. 0 where unknown (samples written before).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub row: u64,
    pub ops: BTreeMap<Op, OpCounters>,
    /// Of the `dma_map` operation's calls, those whose direction the probe read, by direction
    /// (cumulative; zero in samples written before the split).
    #[serde(default, skip_serializing_if = "MapDirections::is_zero")]
    pub map_directions: MapDirections,
}

impl RawSource {
    /// Whether `other` is the same source (kind, id and generation) at another time.
    pub fn same_as(&self, other: &RawSource) -> bool {
        self.kind == other.kind
            && self.id == other.id
            && self.generation == other.generation
            && self.row == other.row
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

/// Everything read from the kernel at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawSample {
    /// CLOCK_MONOTONIC nanoseconds when the maps were read.
    pub monotonic_ns: u64,
    pub sources: Vec<RawSource>,
    /// Probe health counters (map full, nesting overflow, exit without entry), cumulative.
    pub health: BTreeMap<Health, u64>,
    /// Per BPF program: (run_count, run_time_ns) from the kernel's BPF statistics, cumulative.
    pub program_stats: BTreeMap<String, (u64, u64)>,
    /// Per BPF program: runs the kernel skipped because the program was already running on that
    /// CPU (its `recursion_misses`), cumulative. Programs that never missed a run may be absent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub program_misses: BTreeMap<String, u64>,
    /// Per operation, what the tracker saw of its calls that it did not see whole, cumulative.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub op_health: BTreeMap<Op, OpHealth>,
    /// The groups of entry programs that serve the same operations, with their skipped runs,
    /// cumulative: with `op_health`, what the calls lost are computed from ([`EntryGroup`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entry_groups: Vec<EntryGroup>,
    /// Calls whose frame was still open when this sample was read: their exit was never seen
    /// and they are counted nowhere. Read at a recording's last sample only (empty otherwise):
    /// by then the work is done, and an open frame is a call whose exits the kernel skipped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_calls: Vec<OpenCalls>,
    /// The kernel's own DMA and IOMMU trace events, counted beside the probes when asked
    /// (`record --cross-check`), cumulative; empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_events: Vec<KernelEventCounts>,
}

/// A kernel trace event the cross-check counts (`enum iommutop_kernel_event` in
/// ebpf/include/iommutop/abi.h).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum KernelEvent {
    /// `dma:dma_map_page` (6.12-6.17), `dma:dma_map_phys` (6.18+).
    DmaMap,
    /// `dma:dma_unmap_page`, `dma:dma_unmap_phys`.
    DmaUnmap,
    /// `dma:dma_map_sg` and `dma:dma_map_sg_err`.
    DmaMapSg,
    /// `dma:dma_unmap_sg`.
    DmaUnmapSg,
    /// `dma:dma_map_resource` (6.12-6.17).
    DmaMapResource,
    /// `dma:dma_unmap_resource` (6.12-6.17).
    DmaUnmapResource,
    /// `iommu:map`: names no device.
    IommuMap,
    /// `iommu:unmap`: names no device.
    IommuUnmap,
}

impl KernelEvent {
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// One key's counts of the kernel's events, cumulative.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelEventCounts {
    /// The `struct device` the events named (the id of that device's row, [`RawSource::id`]);
    /// None for the events that name no device (iommu:map, iommu:unmap), and for devices beyond
    /// the map's room.
    pub device: Option<u64>,
    /// The device's name as the kernel gave it (`dev_name()`), read at its first event.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Counts of devices the map had no room for, together.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub beyond_room: bool,
    pub counts: BTreeMap<KernelEvent, u64>,
}

/// What the tracker saw of one operation's calls that it did not see whole (mirror of
/// `struct iommutop_op_health` in ebpf/include/iommutop/abi.h, summed over CPUs), cumulative.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpHealth {
    /// Exits that found no frame of their call (its entry was not seen): counted, untimed.
    pub unseen_entries: u64,
    /// Frames dropped because their call's exit was never seen: counted, untimed.
    pub unseen_exits: u64,
    /// Entries an understudy made in place of its lead, whose run the kernel skipped.
    pub understudy_entries: u64,
    /// Exits an understudy made in place of its lead.
    pub understudy_exits: u64,
    /// Entries seen whose frame could not be pushed (the stack full, or no stack for the task):
    /// their exits count them among `unseen_entries`.
    pub unpushed: u64,
}

/// A group of entry programs and the operations they serve, closed under sharing: an operation is
/// in exactly one group, and a program serving several operations (a multi-function family, a
/// kprobe program of several functions) joins their groups. Count-only programs (tracepoints) are
/// entry programs of their own. Of the group's calls, those whose entry no program saw are its
/// programs' skipped runs less its understudies' entries; the exits counted those that found no
/// frame; the rest were seen by no program at all:
///
/// lost = skipped − Σ ops (understudy_entries + unseen_entries − unpushed)
///
/// over any interval (every term is cumulative and the sum linear), at least 0.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryGroup {
    /// The entry programs (leads, or count-only programs), by name, sorted.
    pub programs: Vec<String>,
    /// The operations they serve, sorted.
    pub ops: Vec<Op>,
    /// Runs of those programs the kernel skipped, cumulative.
    pub skipped: u64,
}

/// Calls of one operation on one source whose frames were open when a sample was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenCalls {
    /// The source the frames' calls were charged to (as [`RawSource`] names it).
    pub kind: SourceKind,
    pub id: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: u32,
    pub op: Op,
    pub calls: u64,
}
