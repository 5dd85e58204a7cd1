//! One interval's worth of numbers: the difference of two [`RawSample`]s, per device.
//!
//! Counters are cumulative in the kernel. A source whose counters went backwards between two
//! samples was reset (probes re-attached, map recreated): its delta is everything it counted since
//! the reset, i.e. its current values. A source missing from the earlier sample appeared in
//! between and counted from zero. Nothing here panics or underflows on such input.
//!
//! Sources are folded into rows by their device: a PCI device's own DMA work, its disks'
//! completions (`nvme0n1`) and its netdevs' NAPI completions (`eth0`) all land on one row keyed by
//! the PCI address, found through [`DeviceFacts`]. See [`crate::derive`] for the overhead figures.

use crate::derive::{derive, Derived};
use crate::direction::{DirectionSplit, MapDirections};
use crate::facts::DeviceFacts;
pub use crate::op_stats::{per_second, Latency, OpDelta, OpStats};
use crate::sample::{
    EntryGroup, Health, Op, OpCounters, OpHealth, OpenCalls, RawSample, RawSource, SourceKind,
};
use iommutop_abi::pci::PciAddress;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

pub use iommutop_abi::row_key::{RowKey, RowKind, DEFERRED_KEY, UNATTRIBUTED_KEY};

/// The key of a process's row of IOMMU work outside the DMA API: `unattributed:qemu[1234]`.
pub fn process_key(comm: &str, pid: u64) -> String {
    RowKey::Process {
        comm: comm.to_string(),
        pid,
    }
    .to_string()
}

/// One row: a PCI function (or another device, deferred work, an unresolved disk or netdev).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Device {
    /// PCI address, `deferred`/`unattributed` (`deferred:NAME` when the kernel named the bucket,
    /// `unattributed:COMM[PID]` for one process's work), or the kernel name of the source
    /// (`KIND@ID` when it had none yet).
    pub key: RowKey,
    pub kind: RowKind,
    pub pci_address: Option<PciAddress>,
    pub driver: Option<String>,
    /// Disks, netdevs and other kernel names folded into this row.
    pub names: Vec<String>,
    pub iommu_group: Option<u32>,
    pub domain_type: Option<String>,
    pub iommu_unit: Option<String>,
    /// The physical function of an SR-IOV virtual function's row (`0000:00:0c.0`); absent on
    /// every other row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physfn: Option<PciAddress>,
    /// Every operation, counted or not (zero counts when nothing was seen).
    #[serde(deserialize_with = "crate::ops_map::skip_unknown")]
    pub ops: BTreeMap<Op, OpStats>,
    /// Completed I/Os (the `completion` op's count).
    pub completions: u64,
    pub derived: Derived,
    /// The `dma_map` calls by direction, and for a NIC per packet sent and received; absent on a
    /// row that made no map, and in reports written before the split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dma_map_directions: Option<DirectionSplit>,
    /// The process of an `unattributed:COMM[PID]` row (`names` holds its COMM); absent on every
    /// other row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

impl Device {
    /// The stats of one operation (zeros if absent).
    pub fn op(&self, op: Op) -> OpStats {
        self.ops.get(&op).cloned().unwrap_or_default()
    }

    /// Whether `name` names this row, as `--device` takes it: its key, its PCI address, or one of
    /// its NIC or disk names.
    pub fn answers_to(&self, name: &str) -> bool {
        self.key == name
            || self.pci_address.is_some_and(|a| a.to_string() == name)
            || self.names.iter().any(|n| n == name)
    }
}

/// Run count and run time of one BPF program over an interval (the kernel's BPF statistics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProgramDelta {
    pub run_count: u64,
    pub run_time_ns: u64,
}

/// Everything that happened between two samples.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Snapshot {
    /// CLOCK_MONOTONIC ns of the later sample.
    pub monotonic_ns: u64,
    /// Length of the interval (0 if the clock did not advance).
    pub interval_ns: u64,
    /// Rows sorted by key.
    pub devices: Vec<Device>,
    /// Probe health counters over the interval (map full, nesting overflow, ...).
    pub health: BTreeMap<Health, u64>,
    pub programs: BTreeMap<String, ProgramDelta>,
    /// Operations counted over all sources: the events the probes handled.
    pub events: u64,
    /// Per BPF program, the runs the kernel skipped over the interval (its `recursion_misses`);
    /// programs that skipped none may be absent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub program_misses: BTreeMap<String, u64>,
    /// Per operation, what the tracker saw of its calls that it did not see whole over the
    /// interval (operations with nothing of the kind may be absent).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub op_health: BTreeMap<Op, OpHealth>,
    /// The groups of entry programs as the later sample has them, each with its programs' runs
    /// skipped over the interval: with `op_health`, what the calls lost are computed from
    /// ([`EntryGroup`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entry_groups: Vec<EntryGroup>,
    /// The calls whose frames were still open when the later sample was read (a recording's
    /// last: their exits were never seen, and they are counted nowhere), by row and operation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_calls: Vec<OpenRowCalls>,
}

/// Calls of one operation on one row whose frames were open when a sample was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenRowCalls {
    /// The row the calls were charged to.
    pub key: RowKey,
    pub op: Op,
    pub calls: u64,
}

impl Snapshot {
    /// The interval from `earlier` to `later`, folded into rows with the help of `facts`: one
    /// row per device, with the driver `facts` give it.
    pub fn between(earlier: &RawSample, later: &RawSample, facts: &[DeviceFacts]) -> Snapshot {
        Snapshot::fold(earlier, later, facts, Fold::ByDevice)
    }

    /// As [`Snapshot::between`], but a device's DMA work is split by the driver it was bound to
    /// when the kernel counted it (its sources' [`RawSource::driver`]): a device rebound within
    /// the interval has a row per driver, each labelled with its own. What the kernel counted
    /// without a binding (disks', netdevs' completions) goes under the driver `facts` give.
    pub fn between_by_binding(
        earlier: &RawSample,
        later: &RawSample,
        facts: &[DeviceFacts],
    ) -> Snapshot {
        Snapshot::fold(earlier, later, facts, Fold::ByBinding)
    }

    fn fold(earlier: &RawSample, later: &RawSample, facts: &[DeviceFacts], fold: Fold) -> Snapshot {
        let interval_ns = later.monotonic_ns.saturating_sub(earlier.monotonic_ns);
        let mut rows: BTreeMap<(String, Option<String>), RowBuilder> = BTreeMap::new();
        let mut events = 0u64;
        for source in &later.sources {
            let previous = earlier.sources.iter().find(|s| s.same_as(source));
            let deltas = source_deltas(previous, source);
            let directions = previous.map_or(source.map_directions, |p| {
                source.map_directions.since(&p.map_directions)
            });
            events = deltas
                .values()
                .fold(events, |sum, d| sum.saturating_add(d.count));
            let place = place_source(source, facts);
            let binding = match fold {
                Fold::ByBinding if source.kind == SourceKind::Device => source.driver.clone(),
                _ => None,
            };
            let row = rows
                .entry((place.key.to_string(), binding.clone()))
                .or_insert_with(|| RowBuilder::new(&place, binding));
            row.absorb(&place, deltas, &directions);
        }
        Snapshot {
            monotonic_ns: later.monotonic_ns,
            interval_ns,
            devices: rows
                .into_values()
                .map(|row| row.finish(interval_ns))
                .collect(),
            health: counter_deltas(&earlier.health, &later.health),
            programs: program_deltas(&earlier.program_stats, &later.program_stats),
            events,
            program_misses: counter_deltas(&earlier.program_misses, &later.program_misses),
            op_health: op_health_deltas(&earlier.op_health, &later.op_health),
            entry_groups: entry_group_deltas(&earlier.entry_groups, &later.entry_groups),
            open_calls: open_rows(&later.open_calls, &later.sources, facts),
        }
    }

    /// The interval in seconds.
    pub fn interval_s(&self) -> f64 {
        self.interval_ns as f64 / 1e9
    }

    /// The row with this key.
    pub fn device(&self, key: &str) -> Option<&Device> {
        self.devices.iter().find(|d| d.key == key)
    }
}

/// Whether a device's rows are split by the driver its work was counted under.
#[derive(Clone, Copy)]
enum Fold {
    ByDevice,
    ByBinding,
}

/// Per-op deltas of one source; all of its current values if any counter went backwards.
fn source_deltas(previous: Option<&RawSource>, current: &RawSource) -> BTreeMap<Op, OpDelta> {
    let since_creation = || {
        current
            .ops
            .iter()
            .map(|(&op, counters)| (op, OpDelta::from_counters(counters)))
            .collect()
    };
    let Some(previous) = previous else {
        return since_creation();
    };
    let zero = OpCounters::default();
    let went_missing = previous
        .ops
        .iter()
        .any(|(op, counters)| !current.ops.contains_key(op) && *counters != zero);
    if went_missing {
        return since_creation();
    }
    let mut deltas = BTreeMap::new();
    for (&op, counters) in &current.ops {
        let earlier = previous.ops.get(&op).unwrap_or(&zero);
        match OpDelta::checked_between(earlier, counters) {
            Some(delta) => deltas.insert(op, delta),
            None => return since_creation(),
        };
    }
    deltas
}

/// Where a source goes: its row's key and what is known about that row.
struct Placement<'f> {
    key: RowKey,
    kind: RowKind,
    pci_address: Option<PciAddress>,
    facts: Option<&'f DeviceFacts>,
    /// The source's own name, if it is a name worth listing (not the PCI address itself).
    name: Option<String>,
    /// The process of a process's unattributed row.
    pid: Option<u32>,
}

fn place_source<'f>(source: &RawSource, facts: &'f [DeviceFacts]) -> Placement<'f> {
    let name = source.name.as_str();
    let on_pci = |pci: &'f DeviceFacts| Placement {
        key: RowKey::Pci(pci.pci_address),
        kind: RowKind::Pci,
        pci_address: Some(pci.pci_address),
        facts: Some(pci),
        name: Some(name.to_string()),
        pid: None,
    };
    let alone = |kind: RowKind, key: RowKey| Placement {
        key,
        kind,
        pci_address: None,
        facts: None,
        name: None,
        pid: None,
    };
    let owner = (!name.is_empty())
        .then(|| facts.iter().find(|f| f.owns_name(name)))
        .flatten();
    match source.kind {
        SourceKind::Deferred => alone(
            RowKind::Deferred,
            RowKey::Deferred {
                bucket: (!name.is_empty()).then(|| name.to_string()),
            },
        ),
        // One process's work, keyed by its tgid and named by its comm in the kernel.
        SourceKind::Unattributed if source.id != 0 => Placement {
            name: (!name.is_empty()).then(|| name.to_string()),
            pid: u32::try_from(source.id).ok(),
            ..alone(
                RowKind::Unattributed,
                RowKey::Process {
                    comm: name.to_string(),
                    pid: source.id,
                },
            )
        },
        SourceKind::Unattributed => alone(
            RowKind::Unattributed,
            RowKey::Unattributed {
                name: (!name.is_empty()).then(|| name.to_string()),
            },
        ),
        SourceKind::Device if name.parse::<PciAddress>().is_ok() => Placement {
            key: RowKey::parse(name),
            kind: RowKind::Pci,
            pci_address: name.parse().ok(),
            facts: facts.iter().find(|f| f.pci_address.to_string() == name),
            name: None,
            pid: None,
        },
        kind => {
            if let Some(pci) = owner {
                return on_pci(pci);
            }
            let kind = match kind {
                SourceKind::Disk => RowKind::Disk,
                SourceKind::Netdev => RowKind::Netdev,
                SourceKind::Device | SourceKind::Deferred | SourceKind::Unattributed => {
                    RowKind::Device
                }
            };
            let key = if name.is_empty() {
                RowKey::unnamed(kind, source.id)
            } else {
                RowKey::Named(name.to_string())
            };
            alone(kind, key)
        }
    }
}

/// A row being assembled from the sources that fold into it.
struct RowBuilder {
    key: RowKey,
    kind: RowKind,
    pci_address: Option<PciAddress>,
    facts: Option<DeviceFacts>,
    names: BTreeSet<String>,
    ops: BTreeMap<Op, OpDelta>,
    map_directions: MapDirections,
    pid: Option<u32>,
    /// The driver the kernel counted this row's work under, where it is split by binding.
    binding: Option<String>,
}

impl RowBuilder {
    fn new(place: &Placement<'_>, binding: Option<String>) -> RowBuilder {
        let mut names = BTreeSet::new();
        if let Some(facts) = place.facts {
            names.extend(facts.netdevs.iter().cloned());
            names.extend(facts.disks.iter().cloned());
        }
        RowBuilder {
            key: place.key.clone(),
            kind: place.kind,
            pci_address: place.pci_address,
            facts: place.facts.cloned(),
            names,
            ops: BTreeMap::new(),
            map_directions: MapDirections::default(),
            pid: place.pid,
            binding,
        }
    }

    fn absorb(
        &mut self,
        place: &Placement<'_>,
        deltas: BTreeMap<Op, OpDelta>,
        directions: &MapDirections,
    ) {
        self.map_directions = self.map_directions.plus(directions);
        if let Some(name) = place.name.as_ref().filter(|n| !n.is_empty()) {
            self.names.insert(name.clone());
        }
        for (op, delta) in deltas {
            self.ops.entry(op).or_default().merge(&delta);
        }
    }

    fn finish(self, interval_ns: u64) -> Device {
        let ops: BTreeMap<Op, OpStats> = Op::ALL
            .iter()
            .map(|&op| {
                let delta = self.ops.get(&op).copied().unwrap_or_default();
                (op, delta.stats(interval_ns))
            })
            .collect();
        let facts = self.facts.unwrap_or_default();
        let completions = ops.get(&Op::Completion).map_or(0, |s| s.count);
        let derived = derive(&ops, interval_ns);
        Device {
            dma_map_directions: DirectionSplit::of(&self.map_directions, &ops, derived.io_basis),
            key: self.key,
            kind: self.kind,
            pci_address: self.pci_address,
            driver: self.binding.or(facts.driver),
            names: self.names.into_iter().collect(),
            iommu_group: facts.iommu_group,
            domain_type: facts.domain_type,
            iommu_unit: facts.iommu_unit,
            physfn: facts.physfn,
            derived,
            ops,
            completions,
            pid: self.pid,
        }
    }
}

/// Per-name deltas of cumulative counters; a counter that went backwards counts from its reset.
fn counter_deltas<K: Ord + Clone>(
    earlier: &BTreeMap<K, u64>,
    later: &BTreeMap<K, u64>,
) -> BTreeMap<K, u64> {
    later
        .iter()
        .map(|(name, &now)| {
            let before = earlier.get(name).copied().unwrap_or(0);
            (name.clone(), now.checked_sub(before).unwrap_or(now))
        })
        .collect()
}

/// Per-op deltas of the tracker's figures; an op whose figures went backwards counts from its
/// reset, and an op with nothing over the interval is left out.
fn op_health_deltas(
    earlier: &BTreeMap<Op, OpHealth>,
    later: &BTreeMap<Op, OpHealth>,
) -> BTreeMap<Op, OpHealth> {
    later
        .iter()
        .map(|(&op, now)| {
            let before = earlier.get(&op).copied().unwrap_or_default();
            (op, op_health_between(&before, now).unwrap_or(*now))
        })
        .filter(|(_, delta)| *delta != OpHealth::default())
        .collect()
}

fn op_health_between(before: &OpHealth, now: &OpHealth) -> Option<OpHealth> {
    Some(OpHealth {
        unseen_entries: now.unseen_entries.checked_sub(before.unseen_entries)?,
        unseen_exits: now.unseen_exits.checked_sub(before.unseen_exits)?,
        understudy_entries: now
            .understudy_entries
            .checked_sub(before.understudy_entries)?,
        understudy_exits: now.understudy_exits.checked_sub(before.understudy_exits)?,
        unpushed: now.unpushed.checked_sub(before.unpushed)?,
    })
}

/// The later sample's groups, each with its skipped runs since the earlier sample's group of the
/// same programs (all of them for a group new since then, or one whose count went backwards).
fn entry_group_deltas(earlier: &[EntryGroup], later: &[EntryGroup]) -> Vec<EntryGroup> {
    later
        .iter()
        .map(|group| {
            let before = earlier
                .iter()
                .find(|g| g.programs == group.programs)
                .map_or(0, |g| g.skipped);
            EntryGroup {
                skipped: group.skipped.checked_sub(before).unwrap_or(group.skipped),
                ..group.clone()
            }
        })
        .collect()
}

/// The open calls of a sample on the rows their sources fold into (named as `sources` name
/// them; a source the sample has no counters of is known by its id), summed per row and op.
fn open_rows(
    open: &[OpenCalls],
    sources: &[RawSource],
    facts: &[DeviceFacts],
) -> Vec<OpenRowCalls> {
    let mut rows: BTreeMap<(String, Op), OpenRowCalls> = BTreeMap::new();
    for calls in open.iter().filter(|c| c.calls > 0) {
        let unnamed = RawSource {
            kind: calls.kind,
            id: calls.id,
            name: String::new(),
            generation: calls.generation,
            driver: None,
            row: 0,
            ops: BTreeMap::new(),
            map_directions: MapDirections::default(),
        };
        let source = sources
            .iter()
            .find(|s| s.kind == calls.kind && s.id == calls.id && s.generation == calls.generation)
            .unwrap_or(&unnamed);
        let key = place_source(source, facts).key;
        rows.entry((key.to_string(), calls.op))
            .or_insert_with(|| OpenRowCalls {
                key,
                op: calls.op,
                calls: 0,
            })
            .calls += calls.calls;
    }
    rows.into_values().collect()
}

fn program_deltas(
    earlier: &BTreeMap<String, (u64, u64)>,
    later: &BTreeMap<String, (u64, u64)>,
) -> BTreeMap<String, ProgramDelta> {
    later
        .iter()
        .map(|(name, &(runs, time))| {
            let (runs_before, time_before) = earlier.get(name).copied().unwrap_or((0, 0));
            let delta = match (runs.checked_sub(runs_before), time.checked_sub(time_before)) {
                (Some(run_count), Some(run_time_ns)) => ProgramDelta {
                    run_count,
                    run_time_ns,
                },
                _ => ProgramDelta {
                    run_count: runs,
                    run_time_ns: time,
                },
            };
            (name.clone(), delta)
        })
        .collect()
}

#[cfg(test)]
mod tests;
