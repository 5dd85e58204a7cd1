//! The log-linear histogram slots, slot for slot the same as the BPF side
//! (`ebpf/lib/bits.bpf.h`): every power of two is split into [`SUB_SLOTS`] equal slots, values
//! below `SUB_SLOTS` get a slot each, and the last slot, [`LAST_SLOT`], holds everything from
//! `7 * 2^30` ns up. Also the log2 view reports keep beside them ([`LOG2_SLOTS`]).

use crate::bindings::{IOMMUTOP_HIST_SLOTS, IOMMUTOP_HIST_SUB_BITS};

/// Number of log-linear histogram slots, equal to `IOMMUTOP_HIST_SLOTS` in `ebpf/include/iommutop/abi.h`.
pub const HIST_SLOTS: usize = 128;
const _: () = assert!(IOMMUTOP_HIST_SLOTS as usize == HIST_SLOTS);

/// log2 of [`SUB_SLOTS`]; `IOMMUTOP_HIST_SUB_BITS` in `ebpf/include/iommutop/abi.h`.
pub const SUB_BITS: u32 = 2;

/// Slots per power of two.
pub const SUB_SLOTS: usize = 1 << SUB_BITS;

/// The last slot: it takes every value from [`slot_lower_bound`]`(LAST_SLOT)` up.
pub const LAST_SLOT: usize = HIST_SLOTS - 1;

/// Slots of the log2 view ([`Histogram::log2_slots`]): slot `i` holds `2^i <= v < 2^(i+1)`, slot 0
/// also 0, the last everything from `2^31`. The layout reports had before the finer slots.
pub const LOG2_SLOTS: usize = 32;

/// Inputs and the slot they fall into. The BPF side is tested against the same table, so that
/// `iommutop_hist_slot()` in C and [`slot_of`] in Rust cannot drift apart.
pub const SLOT_VECTORS: &[(u64, usize)] = &[
    (0, 0),
    (1, 1),
    (2, 2),
    (3, 3),
    (4, 4),
    (5, 5),
    (7, 7),
    (8, 8),
    (9, 8),
    (10, 9),
    (15, 11),
    (16, 12),
    (19, 12),
    (20, 13),
    (255, 27),
    (256, 28),
    (1_000, 35),
    (1_023, 35),
    (1_024, 36),
    (1_280, 37),
    (65_535, 59),
    (65_536, 60),
    (1_000_000, 75),
    (1_000_000_000, 115),
    ((1 << 30) - 1, 115),
    (1 << 30, 116),
    ((1 << 31) - 1, 119),
    (1 << 31, 120),
    ((1 << 32) - 1, 123),
    (1 << 32, 124),
    (7 << 30, 127),
    ((7 << 30) - 1, 126),
    (1 << 40, 127),
    (1 << 63, 127),
    (u64::MAX, 127),
];

/// The slot a value falls into (see the module documentation), clamped to [`LAST_SLOT`].
pub fn slot_of(v: u64) -> usize {
    if v < SUB_SLOTS as u64 {
        return v as usize;
    }
    let power = u64::BITS - 1 - v.leading_zeros();
    let sub = ((v >> (power - SUB_BITS)) as usize) & (SUB_SLOTS - 1);
    let slot = (power - SUB_BITS + 1) as usize * SUB_SLOTS + sub;
    slot.min(LAST_SLOT)
}

/// Smallest value slot `slot` holds.
pub fn slot_lower_bound(slot: usize) -> u64 {
    let slot = slot.min(LAST_SLOT);
    if slot < SUB_SLOTS {
        return slot as u64;
    }
    let power = (slot / SUB_SLOTS) as u32 + SUB_BITS - 1;
    let sub = (slot % SUB_SLOTS) as u64;
    (SUB_SLOTS as u64 + sub) << (power - SUB_BITS)
}

/// First value above slot `slot`, or `None` for the last slot, which has no upper bound.
pub fn slot_upper_bound(slot: usize) -> Option<u64> {
    (slot < LAST_SLOT).then(|| slot_lower_bound(slot + 1))
}

/// The log2 slot (of [`LOG2_SLOTS`]) a value falls into.
pub fn log2_slot_of(v: u64) -> usize {
    if v <= 1 {
        return 0;
    }
    ((u64::BITS - 1 - v.leading_zeros()) as usize).min(LOG2_SLOTS - 1)
}

/// Smallest value log2 slot `slot` holds (0 for slot 0).
pub fn log2_slot_lower_bound(slot: usize) -> u64 {
    match slot {
        0 => 0,
        _ => 1u64 << slot.min(LOG2_SLOTS - 1),
    }
}

/// First value above log2 slot `slot`, or `None` for the last one.
pub fn log2_slot_upper_bound(slot: usize) -> Option<u64> {
    (slot < LOG2_SLOTS - 1).then(|| 1u64 << (slot + 1))
}
const _: () = assert!(IOMMUTOP_HIST_SUB_BITS == SUB_BITS);
