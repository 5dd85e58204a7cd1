/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Floor 1, maps and counters: a measured latency added to an operation's aggregate. */
#ifndef IOMMUTOP_HIST_BPF_H
#define IOMMUTOP_HIST_BPF_H

#include "bits.bpf.h"
#include "maps.bpf.h"

/* Adds one measured latency to an operation's aggregate: raw_ns as measured, self_ns without the
 * probes' own cost nested in the call (what the histogram holds). A per-CPU map's, but a program
 * nested in this one on the CPU (an interrupt's) may add to the same counters: IOMMUTOP_ADD. */
static __always_inline void iommutop_record_latency(struct iommutop_op_stats *op, __u64 raw_ns,
						    __u64 self_ns)
{
	__u32 slot = iommutop_hist_slot(self_ns);

	IOMMUTOP_ADD(op->timed, 1);
	IOMMUTOP_ADD(op->total_ns, self_ns);
	IOMMUTOP_ADD(op->raw_total_ns, raw_ns);
	/* The slot is already clamped, but clang may index with the unclamped copy of the register,
	 * which 6.1's verifier rejects as unbounded: hide the value, then mask it. */
	barrier_var(slot);
	IOMMUTOP_ADD(op->hist[slot & (IOMMUTOP_HIST_SLOTS - 1)], 1);
}

#endif
