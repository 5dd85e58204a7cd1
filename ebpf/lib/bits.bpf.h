/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Floor 1, maps and counters: a value's log2 and its histogram slot. */
#ifndef IOMMUTOP_BITS_BPF_H
#define IOMMUTOP_BITS_BPF_H

/* floor(log2(v)) for v >= 1, 0 for v == 0; branchless binary search over the bit width. */
static __always_inline __u32 iommutop_log2_u64(__u64 v)
{
	__u32 r, shift;

	r = (v > 0xffffffffULL) << 5;
	v >>= r;
	shift = (v > 0xffff) << 4;
	v >>= shift;
	r |= shift;
	shift = (v > 0xff) << 3;
	v >>= shift;
	r |= shift;
	shift = (v > 0xf) << 2;
	v >>= shift;
	r |= shift;
	shift = (v > 0x3) << 1;
	v >>= shift;
	r |= shift;
	r |= (v >> 1);
	return r;
}

/* The histogram slot of a value (abi.h): the value itself below 2^IOMMUTOP_HIST_SUB_BITS; above,
 * the power of two it lies in, split into 2^IOMMUTOP_HIST_SUB_BITS equal slots; clamped to the
 * last slot. Must equal iommutop_model::hist::slot_of: a unit test checks the shared vectors, and
 * `iommutop probes --selftest` runs this function in the kernel on every slot edge. */
static __always_inline __u32 iommutop_hist_slot(__u64 v)
{
	const __u32 sub_slots = 1U << IOMMUTOP_HIST_SUB_BITS;
	__u32 power, slot;

	if (v < sub_slots)
		return (__u32)v;
	power = iommutop_log2_u64(v);
	slot = (power - IOMMUTOP_HIST_SUB_BITS + 1) * sub_slots +
	       ((__u32)(v >> (power - IOMMUTOP_HIST_SUB_BITS)) & (sub_slots - 1));
	return slot < IOMMUTOP_HIST_SLOTS ? slot : IOMMUTOP_HIST_SLOTS - 1;
}

#endif
