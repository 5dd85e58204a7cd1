/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Floor 3, charging.
 *
 * --pid and --cgroup: which work is counted, decided where a context's outermost frame opens
 * (docs/tracker.md).
 */
#ifndef IOMMUTOP_FILTER_BPF_H
#define IOMMUTOP_FILTER_BPF_H

#include "stacks.bpf.h"

/* --pid: the tgid whose work is counted; --cgroup: the cgroup v2 id. 0: no filter. Set by user
 * space before load. Weak: every family sees the same knobs. */
const volatile __u32 iommutop_filter_tgid __weak = 0;
const volatile __u64 iommutop_filter_cgroup __weak = 0;

/* Whether --pid or --cgroup is in force. */
static __always_inline int iommutop_filtering(void)
{
	return iommutop_filter_tgid || iommutop_filter_cgroup;
}

/* Whether the filter leaves out work in this context: what the innermost frame was decided, or
 * outside any frame, whether this is not a selected task's own context. */
static __always_inline int iommutop_left_out(const struct iommutop_inflight *inflight,
					     int task_context)
{
	__u32 depth = inflight ? inflight->depth : 0;

	if (!iommutop_filtering())
		return 0;
	if (depth > 0 && depth <= IOMMUTOP_MAX_NESTING)
		return !!(inflight->frames[(depth - 1) & IOMMUTOP_FRAME_MASK].flags &
			  IOMMUTOP_FRAME_FILTERED);
	if (!task_context || iommutop_in_interrupt())
		return 1;
	if (iommutop_filter_tgid &&
	    (__u32)(bpf_get_current_pid_tgid() >> 32) != iommutop_filter_tgid)
		return 1;
	if (iommutop_filter_cgroup && bpf_get_current_cgroup_id() != iommutop_filter_cgroup)
		return 1;
	return 0;
}

/* Whether the filter leaves out an event with no frame of its own (counts only): its context's. */
static __always_inline int iommutop_left_out_here(const void *ctx)
{
	struct iommutop_inflight *inflight;
	int task_context;

	if (!iommutop_filtering())
		return 0;
	inflight = iommutop_inflight_of(ctx, 0, &task_context);
	return iommutop_left_out(inflight, task_context);
}

#endif
