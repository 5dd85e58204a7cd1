/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Floor 4, the tracker.
 *
 * The forms of a frame's entry and exit (track.bpf.h, exit.bpf.h) that probe programs call.
 */
#ifndef IOMMUTOP_CALLS_BPF_H
#define IOMMUTOP_CALLS_BPF_H

#include "track.bpf.h"
#include "exit.bpf.h"

static __always_inline void iommutop_enter(void *ctx, struct iommutop_call call, __u32 op,
					   const struct iommutop_dev_key *own_key, __u64 bytes,
					   __u32 flags)
{
	iommutop_enter_bound(ctx, call, op, own_key, NULL, bytes, flags, 0);
}

static __always_inline void iommutop_exit_keyed(void *ctx, struct iommutop_call call, __u32 op,
						int failed, __u64 bytes,
						const struct iommutop_dev_key *own_key)
{
	iommutop_exit_as(ctx, call, op, failed, bytes, own_key, NULL, 0, IOMMUTOP_EXIT_COUNT, 0);
}

/* Exit of a DMA API call, whose device is own_dev (any pointer: read as cast.bpf.h says, and
 * only when the call's entry was not seen), and a map's direction own_direction
 * (IOMMUTOP_ENTER_DIRECTION, or 0). ended as iommutop_exit_as's. */
static __always_inline void iommutop_exit_device(void *ctx, struct iommutop_call call, __u32 op,
						 int failed, __u64 bytes,
						 const struct device *own_dev, __u32 own_direction,
						 __u64 ended)
{
	iommutop_exit_as(ctx, call, op, failed, bytes, NULL, own_dev, own_direction,
			 IOMMUTOP_EXIT_COUNT, ended);
}

static __always_inline void iommutop_exit_sized(void *ctx, struct iommutop_call call, __u32 op,
						int failed, __u64 bytes)
{
	iommutop_exit_keyed(ctx, call, op, failed, bytes, NULL);
}

static __always_inline void iommutop_exit(void *ctx, struct iommutop_call call, __u32 op,
					  int failed)
{
	iommutop_exit_keyed(ctx, call, op, failed, IOMMUTOP_KEEP_BYTES, NULL);
}

#endif
