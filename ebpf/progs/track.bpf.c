// SPDX-License-Identifier: GPL-2.0
/*
 * The in-flight tracker's rare paths (ebpf/lib/track.bpf.h): counting a call seen at one end only,
 * and dropping frames whose exits were lost. Global functions, so that the verifier checks each
 * once per program instead of once per place and loop turn an inlined copy would sit in.
 */
#include "common.bpf.h"

__noinline int iommutop_count_untimed(__u64 key_id, __u32 key_kind, __u32 op, __u64 bytes,
				      __u32 frame_flags)
{
	struct iommutop_dev_key key = {.id = key_id, .kind = key_kind};

	iommutop_charge_untimed(&key, op, bytes, frame_flags);
	return 0;
}

__noinline int iommutop_abandon_from(int task_context, __u32 index)
{
	struct iommutop_inflight *inflight = iommutop_stack_of(task_context);
	struct iommutop_frame *frame;
	__u32 depth, i;

	if (!inflight)
		return 0;
	depth = inflight->depth;
	if (depth > IOMMUTOP_MAX_NESTING)
		depth = IOMMUTOP_MAX_NESTING;
	if (index >= depth)
		return 0;
	for (i = 0; i < IOMMUTOP_MAX_NESTING; i++) {
		if (index + i >= depth)
			break;
		frame = &inflight->frames[(index + i) & IOMMUTOP_FRAME_MASK];
		iommutop_count_untimed(frame->key.id, frame->key.kind, frame->op, frame->bytes,
				       frame->flags);
	}
	inflight->frames[index & IOMMUTOP_FRAME_MASK].start_ns = 0;
	inflight->depth = index;
	iommutop_health_add(IOMMUTOP_HEALTH_ABANDONED_FRAMES, depth - index);
	return (int)(depth - index);
}

char LICENSE[] SEC("license") = "GPL";
