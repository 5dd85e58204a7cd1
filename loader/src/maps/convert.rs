//! Turns the kernel's per-CPU values into the model's summed counters.

use crate::abi::{iommutop_dev_stats, iommutop_key_kind, iommutop_op_stats, IOMMUTOP_NAME_LEN};
use iommutop_model::direction::MapDirections;
use iommutop_model::sample::{Op, OpCounters, SourceKind, HIST_SLOTS};
use std::collections::BTreeMap;

const _: () =
    assert!(crate::abi::IOMMUTOP_MAX_PROCESSES == iommutop_model::report::MAX_PROCESS_ROWS);
const _: () = assert!(crate::abi::IOMMUTOP_MAX_DEVICES == iommutop_model::report::MAX_STATS_ROWS);

/// The model's kind of a kernel key, or None for a kind this build does not know.
pub fn source_kind(kind: u32) -> Option<SourceKind> {
    match kind {
        k if k == iommutop_key_kind::IOMMUTOP_KEY_DEVICE => Some(SourceKind::Device),
        k if k == iommutop_key_kind::IOMMUTOP_KEY_DEFERRED => Some(SourceKind::Deferred),
        k if k == iommutop_key_kind::IOMMUTOP_KEY_DISK => Some(SourceKind::Disk),
        k if k == iommutop_key_kind::IOMMUTOP_KEY_NETDEV => Some(SourceKind::Netdev),
        k if k == iommutop_key_kind::IOMMUTOP_KEY_UNATTRIBUTED => Some(SourceKind::Unattributed),
        _ => None,
    }
}

/// Sums one key's per-CPU stats into the model's counters, keeping only ops that saw events.
pub fn sum_per_cpu<'a>(
    per_cpu: impl IntoIterator<Item = &'a iommutop_dev_stats>,
) -> BTreeMap<Op, OpCounters> {
    let mut ops: BTreeMap<Op, OpCounters> = BTreeMap::new();
    for cpu in per_cpu {
        for (op, stats) in Op::ALL.iter().zip(cpu.ops.iter()) {
            let entry = ops.entry(*op).or_insert_with(|| OpCounters {
                hist: vec![0; HIST_SLOTS],
                ..OpCounters::default()
            });
            add(entry, stats);
        }
    }
    ops.retain(|_, c| c.count > 0 || c.timed > 0 || c.failures > 0);
    ops
}

/// Sums one key's per-CPU split of its DMA maps by direction.
pub fn sum_directions<'a>(
    per_cpu: impl IntoIterator<Item = &'a iommutop_dev_stats>,
) -> MapDirections {
    per_cpu
        .into_iter()
        .fold(MapDirections::default(), |sum, cpu| {
            let slots = &cpu.map_directions;
            sum.plus(&MapDirections::from_slots(slots.count, slots.bytes))
        })
}

/// Adds one CPU's values; saturating, since a sum of kernel values can exceed u64 (a vendor that
/// reports a whole-domain flush as a 2^63-byte range, on several CPUs).
fn add(total: &mut OpCounters, cpu: &iommutop_op_stats) {
    total.count = total.count.saturating_add(cpu.count);
    total.bytes = total.bytes.saturating_add(cpu.bytes);
    total.failures = total.failures.saturating_add(cpu.failures);
    total.timed = total.timed.saturating_add(cpu.timed);
    total.total_ns = total.total_ns.saturating_add(cpu.total_ns);
    total.raw_total_ns = total.raw_total_ns.saturating_add(cpu.raw_total_ns);
    total.offcpu_ns = total.offcpu_ns.saturating_add(cpu.offcpu_ns);
    total.waited = total.waited.saturating_add(cpu.waited);
    for (slot, n) in total.hist.iter_mut().zip(cpu.hist.iter()) {
        *slot = slot.saturating_add(*n);
    }
}

/// A NUL-terminated name from the kernel, lossily decoded.
pub fn name_from_kernel(bytes: &[std::ffi::c_char]) -> String {
    let raw: Vec<u8> = bytes
        .iter()
        .take(IOMMUTOP_NAME_LEN as usize)
        .map(|&c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&raw).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zeroed_stats() -> iommutop_dev_stats {
        // SAFETY: iommutop_dev_stats is plain integers (bindgen from abi.h), all-zero is valid.
        unsafe { std::mem::zeroed() }
    }

    #[test]
    fn sums_counters_over_cpus_in_abi_order() {
        let mut a = zeroed_stats();
        let mut b = zeroed_stats();
        a.ops[0].count = 3;
        a.ops[0].hist[12] = 3;
        b.ops[0].count = 4;
        b.ops[0].hist[12] = 1;
        b.ops[0].hist[13] = 3;
        b.ops[9].count = 7;
        let summed = sum_per_cpu([&a, &b]);
        assert_eq!(summed[&Op::DmaMap].count, 7);
        assert_eq!(summed[&Op::DmaMap].hist[12], 4);
        assert_eq!(summed[&Op::DmaMap].hist[13], 3);
        assert_eq!(summed[&Op::Completion].count, 7);
        assert!(
            !summed.contains_key(&Op::DmaUnmap),
            "ops without events are dropped"
        );
    }

    /// An AMD-Vi full-domain flush passed a size of 2^63: two of them summed over CPUs wrapped the
    /// byte counter to 0 (or panicked in a debug build).
    #[test]
    fn sums_saturate_instead_of_wrapping() {
        let flush = Op::IotlbFlush as usize;
        let mut a = zeroed_stats();
        let mut b = zeroed_stats();
        a.ops[flush].count = 1;
        a.ops[flush].bytes = 1 << 63;
        b.ops[flush].count = 1;
        b.ops[flush].bytes = 1 << 63;
        let summed = sum_per_cpu([&a, &b]);
        assert_eq!(summed[&Op::IotlbFlush].count, 2);
        assert_eq!(summed[&Op::IotlbFlush].bytes, u64::MAX);
    }

    #[test]
    fn directions_sum_over_cpus_by_the_kernels_slots() {
        let mut a = zeroed_stats();
        let mut b = zeroed_stats();
        a.map_directions.count[crate::abi::IOMMUTOP_DIRECTION_TO_DEVICE as usize] = 2;
        a.map_directions.bytes[1] = 134;
        b.map_directions.count[1] = 1;
        b.map_directions.count[2] = 5;
        b.map_directions.bytes[2] = 5 * 1522;
        let summed = sum_directions([&a, &b]);
        assert_eq!(summed.to_device.count, 3);
        assert_eq!(summed.to_device.bytes, 134);
        assert_eq!(summed.from_device.count, 5);
        assert_eq!(summed.from_device.bytes, 5 * 1522);
        assert_eq!(summed.bidirectional.count, 0);
    }

    #[test]
    fn kernel_names_stop_at_nul_and_at_the_buffer_end() {
        let mut raw = [0 as std::ffi::c_char; 32];
        for (i, b) in b"0000:00:02.0".iter().enumerate() {
            raw[i] = *b as std::ffi::c_char;
        }
        assert_eq!(name_from_kernel(&raw), "0000:00:02.0");
        let full = [b'a' as std::ffi::c_char; 40];
        assert_eq!(name_from_kernel(&full).len(), 32);
    }

    #[test]
    fn every_key_kind_of_the_abi_maps_to_a_source_kind() {
        for kind in 0..5 {
            assert!(source_kind(kind).is_some(), "kind {kind}");
        }
        assert!(source_kind(99).is_none());
    }
}
