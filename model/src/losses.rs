//! What the probes did not see whole over a run, each figure exact (docs/probes.md, "How the loss
//! figures are computed"): per operation the calls counted but not timed, the calls no program saw
//! at all (lost) and the calls still open at the end; per group of entry programs, the terms its
//! lost calls are computed from. The report's `losses` section, its warnings, and what `diagnose`
//! and `compare` read of it.

use crate::report::probes::{ProbeEntry, ProbeStatus};
use crate::sample::{EntryGroup, Op, OpHealth};
use crate::snapshot::{RowKey, Snapshot};
use iommutop_abi::units::percent;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The share of an operation's calls that may go untimed before a warning says so: the calls an
/// interrupt or a preemption lands in are the latency tail the histograms exist to show.
pub const UNTIMED_SHARE_LIMIT: f64 = 0.001;

/// The report's `losses`: per operation measured on the run, and per group of entry programs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Losses {
    /// Every operation the run's programs served (and any with calls not seen whole).
    #[serde(deserialize_with = "crate::ops_map::skip_unknown")]
    pub ops: BTreeMap<Op, OpLosses>,
    /// The groups of entry programs, as the kernel's skipped runs must be read.
    pub groups: Vec<GroupLosses>,
}

/// One operation's calls that the probes did not see whole, over the run and every device.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct OpLosses {
    /// The calls counted (on every row).
    pub calls: u64,
    /// Of them, the calls not timed (`count − timed`); `None` where the operation was not
    /// measured with latency on this run (a count-only tier).
    pub untimed: Option<u64>,
    /// `untimed` over `calls`; `None` without an untimed figure or without a call.
    pub untimed_share: Option<f64>,
    /// Calls no program saw at all: not counted, on no device that can be named. For an
    /// operation that shares its group of entry programs with others (`lost_with`), the group's
    /// figure: which of its operations each call was, the kernel cannot say. `None` where no
    /// group serves the operation.
    pub lost: Option<u64>,
    /// The other operations of the group `lost` is the figure of.
    #[serde(default, deserialize_with = "crate::ops_map::skip_unknown_list")]
    pub lost_with: Vec<Op>,
    /// Calls whose entry was seen and whose exit never was, still open when the recording ended:
    /// counted nowhere.
    pub open_at_end: u64,
    /// Calls an understudy entered or closed in place of its lead, whose run the kernel skipped.
    pub understudy_entries: u64,
    pub understudy_exits: u64,
    /// By row key, the rows with a call untimed or open at the end (a row not listed had none).
    #[serde(default)]
    pub devices: BTreeMap<RowKey, DeviceLosses>,
}

impl OpLosses {
    /// Whether a call of the operation went untimed, lost or open at the end.
    pub fn any(&self) -> bool {
        self.untimed.unwrap_or(0) > 0 || self.lost.unwrap_or(0) > 0 || self.open_at_end > 0
    }
}

/// One row's share of an operation's [`OpLosses`]: what a device is known for. Lost calls have no
/// device: neither end of them was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DeviceLosses {
    /// `None` where the operation was not measured with latency.
    pub untimed: Option<u64>,
    pub open_at_end: u64,
}

/// A group of entry programs ([`EntryGroup`]) over the run, with the terms of its lost calls:
/// `lost = max(0, skipped − (understudy_entries + unseen_entries − unpushed))`, the last three
/// summed over the group's operations.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GroupLosses {
    pub programs: Vec<String>,
    #[serde(deserialize_with = "crate::ops_map::skip_unknown_list")]
    pub ops: Vec<Op>,
    /// Runs of the group's programs the kernel skipped.
    pub skipped: u64,
    /// Entries understudies made in place of those skipped runs.
    pub understudy_entries: u64,
    /// Exits that found no frame of their call: calls whose entry was not seen, counted there.
    pub unseen_entries: u64,
    /// Entries seen whose frame could not be pushed: their exits are among `unseen_entries`.
    pub unpushed: u64,
    pub lost: u64,
}

/// The calls no program saw: the skipped entry runs less those an understudy made and those
/// whose exit counted the call (exits that found no frame, less the ones whose entry was seen but
/// not pushed). At least 0.
pub fn lost_calls(
    skipped: u64,
    understudy_entries: u64,
    unseen_entries: u64,
    unpushed: u64,
) -> u64 {
    let seen = i128::from(understudy_entries) + i128::from(unseen_entries) - i128::from(unpushed);
    u64::try_from((i128::from(skipped) - seen).max(0)).unwrap_or(u64::MAX)
}

impl GroupLosses {
    /// A group's figures over an interval, from the tracker's per-op figures of the same one.
    pub fn of(group: &EntryGroup, health: &BTreeMap<Op, OpHealth>) -> GroupLosses {
        let sum = |term: fn(&OpHealth) -> u64| {
            group
                .ops
                .iter()
                .filter_map(|op| health.get(op))
                .map(term)
                .fold(0u64, u64::saturating_add)
        };
        let understudy_entries = sum(|h| h.understudy_entries);
        let unseen_entries = sum(|h| h.unseen_entries);
        let unpushed = sum(|h| h.unpushed);
        GroupLosses {
            programs: group.programs.clone(),
            ops: group.ops.clone(),
            skipped: group.skipped,
            understudy_entries,
            unseen_entries,
            unpushed,
            lost: lost_calls(group.skipped, understudy_entries, unseen_entries, unpushed),
        }
    }
}

/// The operations whose probe point attached at a tier that times calls (points are named after
/// the operation they time).
fn timed_ops(probes: &[ProbeEntry]) -> BTreeSet<Op> {
    probes
        .iter()
        .filter(|p| p.status == ProbeStatus::Attached && p.latency)
        .filter_map(|p| crate::ops_map::op_named(&p.point))
        .collect()
}

impl Losses {
    /// The figures of an interval (a report's: its whole run), with `probes` telling which
    /// operations were measured with latency.
    pub fn of(snapshot: &Snapshot, probes: &[ProbeEntry]) -> Losses {
        Losses::of_timed(snapshot, &timed_ops(probes))
    }

    /// The figures of an interval, with `timed` the operations measured with latency.
    pub fn of_timed(snapshot: &Snapshot, timed: &BTreeSet<Op>) -> Losses {
        let groups: Vec<GroupLosses> = snapshot
            .entry_groups
            .iter()
            .map(|g| GroupLosses::of(g, &snapshot.op_health))
            .collect();
        let mut listed: BTreeSet<Op> = groups.iter().flat_map(|g| g.ops.clone()).collect();
        listed.extend(timed.iter().copied());
        listed.extend(snapshot.op_health.keys().copied());
        listed.extend(snapshot.open_calls.iter().map(|o| o.op));
        let ops = listed
            .into_iter()
            .map(|op| (op, op_losses(snapshot, op, timed.contains(&op), &groups)))
            .collect();
        Losses { ops, groups }
    }

    /// The calls of `op` on `device` that its count may lack: those no program saw (which
    /// device's, nothing tells, so any device's count may lack them all) and the device's calls
    /// still open at the end.
    pub fn uncounted(&self, op: Op, device: &RowKey) -> u64 {
        self.ops.get(&op).map_or(0, |o| {
            o.lost
                .unwrap_or(0)
                .saturating_add(o.devices.get(device).map_or(0, |d| d.open_at_end))
        })
    }

    /// The groups that lost calls.
    pub fn lost_groups(&self) -> impl Iterator<Item = &GroupLosses> {
        self.groups.iter().filter(|g| g.lost > 0)
    }

    /// Calls no program saw, over every group.
    pub fn lost(&self) -> u64 {
        self.groups
            .iter()
            .fold(0u64, |sum, g| sum.saturating_add(g.lost))
    }

    /// Calls still open at the end, over every operation and row.
    pub fn open_at_end(&self) -> u64 {
        self.ops
            .values()
            .fold(0u64, |sum, o| sum.saturating_add(o.open_at_end))
    }

    /// The operations whose untimed share is over [`UNTIMED_SHARE_LIMIT`], with it.
    pub fn untimed_over_limit(&self) -> impl Iterator<Item = (Op, &OpLosses, f64)> {
        self.ops.iter().filter_map(|(&op, o)| {
            let share = o.untimed_share?;
            (share > UNTIMED_SHARE_LIMIT).then_some((op, o, share))
        })
    }

    /// Whether any operation has a call untimed, lost or open at the end.
    pub fn any(&self) -> bool {
        self.ops.values().any(OpLosses::any)
    }

    /// Keeps the rows `keep` keeps (by key) in each operation's `devices`; the operations'
    /// own figures stay the run's (a lost call has no device to filter it by).
    pub fn retain_devices(&mut self, keep: impl Fn(&RowKey) -> bool) {
        for op in self.ops.values_mut() {
            op.devices.retain(|key, _| keep(key));
        }
    }

    /// The report's warnings: one per group that lost calls, one per operation and row with
    /// calls open at the end, one per operation whose untimed share is over the limit. A run
    /// that lost nothing and timed all but a few calls has none.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings: Vec<String> = self
            .lost_groups()
            .map(|group| self.lost_warning(group))
            .collect();
        for (op, o) in &self.ops {
            for (device, d) in o.devices.iter().filter(|(_, d)| d.open_at_end > 0) {
                let n = d.open_at_end;
                warnings.push(format!(
                    "{} of {device} {} still open when the recording ended ({} never seen): \
                     counted nowhere, so {device}'s {op} count is short by {}",
                    calls(n, op.name()),
                    if n == 1 { "was" } else { "were" },
                    if n == 1 {
                        "its exit was"
                    } else {
                        "their exits were"
                    },
                    if n == 1 { "one" } else { "that many" },
                    op = op.name(),
                ));
            }
        }
        for (op, o, share) in self.untimed_over_limit() {
            warnings.push(format!(
                "{} of {} {} calls ({}) were counted but not timed (an interrupt or a preemption \
                 landed in their probes): the latency figures leave them out",
                o.untimed.unwrap_or(0),
                o.calls,
                op.name(),
                percent(share)
            ));
        }
        warnings
    }

    fn lost_warning(&self, group: &GroupLosses) -> String {
        let n = group.lost;
        let counts_only = group
            .ops
            .iter()
            .all(|op| self.ops.get(op).is_none_or(|o| o.untimed.is_none()));
        let noun = if counts_only { "event" } else { "call" };
        let nouns = if n == 1 {
            noun.to_string()
        } else {
            format!("{noun}s")
        };
        let names: Vec<&str> = group.ops.iter().map(|op| op.name()).collect();
        let no_device = "(of which devices, nothing tells: neither end was seen)";
        match names.as_slice() {
            [one] => format!(
                "{n} {one} {nouns} {} seen by no probe program (the kernel skipped every program \
                 that could have seen {}): the counts are short by {} {no_device}",
                if n == 1 { "was" } else { "were" },
                if n == 1 { "it" } else { "them" },
                if n == 1 { "one" } else { "that many" },
            ),
            _ => format!(
                "{n} {nouns} of {} {} seen by no probe program (the kernel skipped every program \
                 that could have seen {}; one group of programs serves these operations, so which \
                 of them each was, it cannot say): their counts together are short by {} \
                 {no_device}",
                either(&names),
                if n == 1 { "was" } else { "were" },
                if n == 1 { "it" } else { "them" },
                if n == 1 { "one" } else { "that many" },
            ),
        }
    }
}

/// `1 dma_map call`, `12 dma_map calls`.
fn calls(n: u64, op: &str) -> String {
    format!("{n} {op} call{}", if n == 1 { "" } else { "s" })
}

/// `a`, `a or b`, `a, b or c`.
pub fn either(names: &[&str]) -> String {
    listed(names, "or")
}

/// `a`, `a and b`, `a, b and c`.
pub fn both(names: &[&str]) -> String {
    listed(names, "and")
}

fn listed(names: &[&str], conjunction: &str) -> String {
    match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} {conjunction} {last}", rest.join(", ")),
        None => String::new(),
    }
}

fn op_losses(snapshot: &Snapshot, op: Op, timed: bool, groups: &[GroupLosses]) -> OpLosses {
    let mut devices: BTreeMap<RowKey, DeviceLosses> = BTreeMap::new();
    let (mut calls, mut untimed) = (0u64, 0u64);
    for device in &snapshot.devices {
        let stats = device.op(op);
        calls = calls.saturating_add(stats.count);
        let missed = stats
            .count
            .saturating_sub(stats.latency.as_ref().map_or(0, |l| l.timed));
        untimed = untimed.saturating_add(missed);
        if timed && missed > 0 {
            devices.entry(device.key.clone()).or_default().untimed = Some(missed);
        }
    }
    let mut open_at_end = 0u64;
    for open in snapshot.open_calls.iter().filter(|o| o.op == op) {
        open_at_end = open_at_end.saturating_add(open.calls);
        let entry = devices.entry(open.key.clone()).or_default();
        entry.open_at_end = entry.open_at_end.saturating_add(open.calls);
    }
    if timed {
        for (key, entry) in &mut devices {
            entry.untimed.get_or_insert_with(|| {
                snapshot
                    .devices
                    .iter()
                    .find(|d| d.key == *key)
                    .map_or(0, |d| {
                        let stats = d.op(op);
                        stats
                            .count
                            .saturating_sub(stats.latency.as_ref().map_or(0, |l| l.timed))
                    })
            });
        }
    }
    let group = groups.iter().find(|g| g.ops.contains(&op));
    let health = snapshot.op_health.get(&op).copied().unwrap_or_default();
    let untimed = timed.then_some(untimed);
    OpLosses {
        calls,
        untimed,
        untimed_share: untimed
            .filter(|_| calls > 0)
            .map(|u| u as f64 / calls as f64),
        lost: group.map(|g| g.lost),
        lost_with: group
            .map(|g| g.ops.iter().copied().filter(|o| *o != op).collect())
            .unwrap_or_default(),
        open_at_end,
        understudy_entries: health.understudy_entries,
        understudy_exits: health.understudy_exits,
        devices,
    }
}

#[cfg(test)]
mod tests;
