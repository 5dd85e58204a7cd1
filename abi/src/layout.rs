//! What the Rust side relies on of the ABI's layout, checked at compile time beside bindgen's
//! layout tests: the sizes of the keys and statistics rows the loader reads, and the direction
//! indices of a map's counts.

use crate::bindings::{
    iommutop_dev_key, iommutop_dev_stats, iommutop_map_directions, iommutop_op_stats,
    IOMMUTOP_DIRECTIONS, IOMMUTOP_DIRECTION_BIDIRECTIONAL, IOMMUTOP_DIRECTION_FROM_DEVICE,
    IOMMUTOP_DIRECTION_TO_DEVICE, IOMMUTOP_HIST_SLOTS,
};
use crate::op::Op;

const _: () = assert!(std::mem::size_of::<iommutop_dev_key>() == 16);
const _: () =
    assert!(std::mem::size_of::<iommutop_op_stats>() == 8 * (8 + IOMMUTOP_HIST_SLOTS as usize));
const _: () = assert!(
    std::mem::size_of::<iommutop_dev_stats>()
        == Op::ALL.len() * std::mem::size_of::<iommutop_op_stats>()
            + std::mem::size_of::<iommutop_map_directions>()
);
const _: () = assert!(IOMMUTOP_DIRECTIONS == 4);
const _: () = assert!(IOMMUTOP_DIRECTION_BIDIRECTIONAL == 0);
const _: () = assert!(IOMMUTOP_DIRECTION_TO_DEVICE == 1);
const _: () = assert!(IOMMUTOP_DIRECTION_FROM_DEVICE == 2);
