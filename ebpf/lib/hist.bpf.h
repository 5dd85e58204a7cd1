/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
#ifndef IOMMUTOP_HIST_BPF_H
#define IOMMUTOP_HIST_BPF_H

#include "bits.bpf.h"

/* Adds one measured latency to an operation's aggregate. Per-CPU map: no atomics needed. */
static __always_inline void iommutop_record_latency(struct iommutop_op_stats *op, __u64 ns)
{
	__u32 slot = iommutop_hist_slot(ns);

	op->timed += 1;
	op->total_ns += ns;
	if (slot < IOMMUTOP_HIST_SLOTS)
		op->hist[slot] += 1;
}

#endif
