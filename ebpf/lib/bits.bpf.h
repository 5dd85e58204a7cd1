/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
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

/* The histogram slot of a value: floor(log2(v)), 0 for 0 and 1, clamped to the last slot.
 * Must equal iommutop_model::hist::slot_of: a unit test checks the shared vectors, and
 * `iommutop probes --selftest` runs this function in the kernel on every slot edge. */
static __always_inline __u32 iommutop_hist_slot(__u64 v)
{
	__u32 slot = iommutop_log2_u64(v);

	return slot < IOMMUTOP_HIST_SLOTS ? slot : IOMMUTOP_HIST_SLOTS - 1;
}

#endif
