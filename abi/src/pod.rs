//! The loader reads the ABI's structs straight out of BPF maps: each is aya's [`Pod`] (plain old
//! data, any bit pattern valid). Only with the `aya` feature, which only the loader asks for.

use crate::bindings::{
    iommutop_dev_key, iommutop_dev_name, iommutop_dev_stats, iommutop_inflight,
    iommutop_kernel_events, iommutop_op_health, iommutop_row_key, iommutop_stack_key,
    iommutop_stack_value, iommutop_task_slot,
};
use aya::Pod;

// SAFETY: the key is bindgen's view of `struct iommutop_dev_key`: integers only, explicit padding,
// no invalid bit patterns (checked by bindgen's layout tests and the size asserts in layout.rs).
unsafe impl Pod for iommutop_dev_key {}
// SAFETY: as above, `struct iommutop_dev_stats` is integers and arrays of integers only.
unsafe impl Pod for iommutop_dev_stats {}
// SAFETY: as above, `struct iommutop_dev_name` is a char array.
unsafe impl Pod for iommutop_dev_name {}
// SAFETY: as above, `struct iommutop_row_key` is integers with explicit padding.
unsafe impl Pod for iommutop_row_key {}
// SAFETY: as above, `struct iommutop_stack_key` is integers with explicit padding.
unsafe impl Pod for iommutop_stack_key {}
// SAFETY: as above, `struct iommutop_stack_value` is two u64.
unsafe impl Pod for iommutop_stack_value {}
// SAFETY: as above, `struct iommutop_op_health` is u64s only.
unsafe impl Pod for iommutop_op_health {}
// SAFETY: as above, `struct iommutop_inflight` is integers and arrays of frames of integers with
// explicit padding.
unsafe impl Pod for iommutop_inflight {}
// SAFETY: as above, `struct iommutop_task_slot` is two u32 and a `struct iommutop_inflight`.
unsafe impl Pod for iommutop_task_slot {}
// SAFETY: as above, `struct iommutop_kernel_events` is an array of u64, no padding.
unsafe impl Pod for iommutop_kernel_events {}
