//! The probes' health counters ([`Health`]): what they saw but could not count or time, by cause.
//! Written in reports and samples under the names below, and ordered as those names sort, so that
//! a map keyed by them reads and writes exactly as one keyed by its names.

use crate::bindings::iommutop_health;
use crate::op::Op;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// One health counter. The first ten are the kernel's (`enum iommutop_health` in the ABI header,
/// [`Health::KERNEL`]); the others are counted in user space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Health {
    /// A new device could not be tracked: every statistics row was taken (`device_map_full`).
    DeviceMapFull,
    /// Calls nested deeper than the tracker follows (`nesting_overflow`).
    NestingOverflow,
    /// Exits that found no frame of their call (`exit_without_entry`).
    ExitWithoutEntry,
    /// Sampled call paths that could not be recorded (`stack_lost`).
    StackLost,
    /// Calls whose exit was never seen, their frames dropped as stale (`abandoned_frames`).
    AbandonedFrames,
    /// Calls of tasks whose in-flight stack could not be created (`task_map_full`).
    TaskMapFull,
    /// Work outside the DMA API of processes beyond the rows kept for them (`process_map_full`).
    ProcessMapFull,
    /// Events of a new key dropped because its row could not be written then (`row_busy`).
    RowBusy,
    /// Exits that read an earlier time than their entries (`clock_behind_entry`).
    ClockBehindEntry,
    /// Block requests of no disk completed: a driver's own commands (`driver_requests`).
    DriverRequests,
    /// Program runs the kernel skipped, over every program (`recursion_misses`).
    RecursionMisses,
    /// Block completions the probes missed, by the block layer's count (`completions_unseen`).
    CompletionsUnseen,
    /// Calls of an operation the kernel skipped at both ends (`missed_calls.<op>`): written by
    /// reports made before the loss figures.
    MissedCalls(Op),
}

/// The prefix of [`Health::MissedCalls`]' names.
const MISSED_CALLS: &str = "missed_calls.";

impl Health {
    /// The kernel's counters, in the order of `enum iommutop_health` (their index in the map).
    pub const KERNEL: [Health; 10] = [
        Health::DeviceMapFull,
        Health::NestingOverflow,
        Health::ExitWithoutEntry,
        Health::StackLost,
        Health::AbandonedFrames,
        Health::TaskMapFull,
        Health::ProcessMapFull,
        Health::RowBusy,
        Health::ClockBehindEntry,
        Health::DriverRequests,
    ];

    /// The name's two parts: a fixed part, and the operation's name for [`Health::MissedCalls`]
    /// (empty otherwise).
    fn parts(self) -> (&'static str, &'static str) {
        let fixed = match self {
            Health::DeviceMapFull => "device_map_full",
            Health::NestingOverflow => "nesting_overflow",
            Health::ExitWithoutEntry => "exit_without_entry",
            Health::StackLost => "stack_lost",
            Health::AbandonedFrames => "abandoned_frames",
            Health::TaskMapFull => "task_map_full",
            Health::ProcessMapFull => "process_map_full",
            Health::RowBusy => "row_busy",
            Health::ClockBehindEntry => "clock_behind_entry",
            Health::DriverRequests => "driver_requests",
            Health::RecursionMisses => "recursion_misses",
            Health::CompletionsUnseen => "completions_unseen",
            Health::MissedCalls(op) => return (MISSED_CALLS, op.name()),
        };
        (fixed, "")
    }

    /// The index of a kernel counter in `enum iommutop_health`; `None` for the others.
    const fn kernel_index(self) -> Option<u32> {
        Some(match self {
            Health::DeviceMapFull => iommutop_health::IOMMUTOP_HEALTH_DEVICE_MAP_FULL,
            Health::NestingOverflow => iommutop_health::IOMMUTOP_HEALTH_NESTING_OVERFLOW,
            Health::ExitWithoutEntry => iommutop_health::IOMMUTOP_HEALTH_EXIT_WITHOUT_ENTRY,
            Health::StackLost => iommutop_health::IOMMUTOP_HEALTH_STACK_LOST,
            Health::AbandonedFrames => iommutop_health::IOMMUTOP_HEALTH_ABANDONED_FRAMES,
            Health::TaskMapFull => iommutop_health::IOMMUTOP_HEALTH_TASK_MAP_FULL,
            Health::ProcessMapFull => iommutop_health::IOMMUTOP_HEALTH_PROCESS_MAP_FULL,
            Health::RowBusy => iommutop_health::IOMMUTOP_HEALTH_ROW_BUSY,
            Health::ClockBehindEntry => iommutop_health::IOMMUTOP_HEALTH_CLOCK_BEHIND_ENTRY,
            Health::DriverRequests => iommutop_health::IOMMUTOP_HEALTH_DRIVER_REQUESTS,
            Health::RecursionMisses | Health::CompletionsUnseen | Health::MissedCalls(_) => {
                return None
            }
        })
    }
}

/// Whether `Health::KERNEL[i]` is the counter of index `i` in the kernel's map, for every `i`.
const fn kernel_in_abi_order() -> bool {
    let mut i = 0;
    while i < Health::KERNEL.len() {
        match Health::KERNEL[i].kernel_index() {
            Some(index) if index as usize == i => {}
            _ => return false,
        }
        i += 1;
    }
    true
}
const _: () = assert!(kernel_in_abi_order());
const _: () = assert!(Health::KERNEL.len() == iommutop_health::IOMMUTOP_HEALTH_COUNT as usize);

impl fmt::Display for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (fixed, op) = self.parts();
        f.write_str(fixed)?;
        f.write_str(op)
    }
}

/// A name that is no health counter's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a health counter this iommutop knows (device_map_full, recursion_misses, \
     missed_calls.<op>, ...): a report a newer iommutop wrote reads with that version"
)]
pub struct UnknownHealth(pub String);

impl FromStr for Health {
    type Err = UnknownHealth;

    fn from_str(name: &str) -> Result<Health, UnknownHealth> {
        const NAMED: [Health; 12] = [
            Health::DeviceMapFull,
            Health::NestingOverflow,
            Health::ExitWithoutEntry,
            Health::StackLost,
            Health::AbandonedFrames,
            Health::TaskMapFull,
            Health::ProcessMapFull,
            Health::RowBusy,
            Health::ClockBehindEntry,
            Health::DriverRequests,
            Health::RecursionMisses,
            Health::CompletionsUnseen,
        ];
        if let Some(op) = name.strip_prefix(MISSED_CALLS) {
            return Op::ALL
                .into_iter()
                .find(|o| o.name() == op)
                .map(Health::MissedCalls)
                .ok_or_else(|| UnknownHealth(name.to_string()));
        }
        NAMED
            .into_iter()
            .find(|h| h.parts().0 == name)
            .ok_or_else(|| UnknownHealth(name.to_string()))
    }
}

/// As the names sort: byte by byte.
impl Ord for Health {
    fn cmp(&self, other: &Health) -> Ordering {
        let name = |h: &Health| {
            let (fixed, op) = h.parts();
            fixed.bytes().chain(op.bytes())
        };
        name(self).cmp(name(other))
    }
}

impl PartialOrd for Health {
    fn partial_cmp(&self, other: &Health) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Serialize for Health {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Health {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Health, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn every() -> Vec<Health> {
        let mut all: Vec<Health> = Health::KERNEL.to_vec();
        all.extend([Health::RecursionMisses, Health::CompletionsUnseen]);
        all.extend(Op::ALL.map(Health::MissedCalls));
        all
    }

    #[test]
    fn names_parse_back_and_are_what_serde_writes() {
        for health in every() {
            let name = health.to_string();
            assert_eq!(name.parse::<Health>(), Ok(health));
            assert_eq!(
                serde_json::to_value(health).expect("encodes"),
                serde_json::Value::String(name)
            );
        }
        assert_eq!(
            Health::MissedCalls(Op::IotlbSync).to_string(),
            "missed_calls.iotlb_sync"
        );
        assert_eq!(Health::KERNEL[9].to_string(), "driver_requests");
        assert!("missed_calls.nothing".parse::<Health>().is_err());
        assert!("missed_calls.".parse::<Health>().is_err());
        assert!("rows_full".parse::<Health>().is_err());
    }

    /// A map keyed by counters is written exactly as one keyed by their names was.
    #[test]
    fn counters_sort_as_their_names() {
        let by_counter: BTreeMap<Health, u64> =
            every().into_iter().zip(1u64..).collect::<BTreeMap<_, _>>();
        let by_name: BTreeMap<String, u64> = by_counter
            .iter()
            .map(|(h, n)| (h.to_string(), *n))
            .collect();
        let names: Vec<String> = by_counter.keys().map(Health::to_string).collect();
        assert_eq!(names, by_name.keys().cloned().collect::<Vec<_>>());
        let json = serde_json::to_string(&by_counter).expect("encodes");
        assert_eq!(json, serde_json::to_string(&by_name).expect("encodes"));
        let back: BTreeMap<Health, u64> = serde_json::from_str(&json).expect("decodes");
        assert_eq!(back, by_counter);
    }
}
