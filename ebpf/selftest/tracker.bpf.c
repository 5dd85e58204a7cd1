// SPDX-License-Identifier: GPL-2.0
/*
 * The tracker driven step by step: `loader/src/tracker_test/` runs this program
 * with BPF_PROG_TEST_RUN, each run one step of a scenario (a call entering, a call exiting, an
 * entry interrupted before its frame was complete), and reads the statistics and health counters
 * the steps left. A test run's context is a copy of its arguments on the heap, on no stack: each
 * step says which context it runs as (built with IOMMUTOP_SELFTEST, the tracker asks
 * iommutop_selftest_task_context), an interrupt's (the CPU's stack of calls in flight) or the
 * calling thread's task (its slot, or the hash by thread id while another thread holds the slot).
 * Never attached.
 *
 * Arguments: args[0] the step (enum tracker_step), args[1] the op (DMA map, DMA unmap, IOMMU map
 * or IOVA allocation), args[2] the call's position, args[3] its tag, args[4] the device key's id,
 * as a DMA API call's programs know it (0: the call inherits the key of the call below, as nested
 * work), args[5] 1 to run on the calling thread's task stack, 0 as an interrupt on its own stack,
 * args[6] the function called, args[7] the step's flags (STEP_*).
 */
/* Linked with no other object: the library's global functions are this object's own. */
#define IOMMUTOP_GLOBAL_FUNCTIONS
#include "common.bpf.h"

enum tracker_step {
	STEP_ENTER = 1, /* iommutop_enter, as a probe's entry program */
	STEP_EXIT = 2,	/* iommutop_exit, as a probe's exit program */
	STEP_PUSH_PARTIAL =
	    3,		 /* a frame pushed by an entry that an interrupt stopped before its end */
	STEP_FINISH = 4, /* that entry's end: its frame's start written */
	STEP_SWITCH_OUT = 5, /* the scheduler switches the calling thread out */
	STEP_SWITCH_IN = 6,  /* and back in */
	STEP_TAKE_SLOT = 7,  /* an entry stopped right after it took its slot, before it wrote a
				field of its frame (interrupt context only) */
};

/* args[7] */
#define STEP_TWIN 1	  /* the entry is of a function that may be its wrapper's twin */
#define STEP_UNDERSTUDY 2 /* the program is an understudy, not a lead */
#define STEP_IN_INTERRUPT                                                                          \
	4 /* the preempt count says an interrupt runs (one that arrived in                         \
	     user mode, on the task's stack, when args[5] is 1) */
#define STEP_SWITCHED_INSIDE                                                                       \
	8 /* the task is switched out inside this entry program, for as                            \
	     long as a spin of the program's own takes */

static __always_inline int push_partial(__u32 op, struct iommutop_call call, __u64 key_id)
{
	struct iommutop_inflight *inflight;
	struct iommutop_frame *frame;
	__u32 zero = 0, depth;

	inflight = bpf_map_lookup_elem(&iommutop_irq_inflight, &zero);
	if (!inflight)
		return 1;
	depth = inflight->depth;
	if (depth >= IOMMUTOP_MAX_NESTING)
		return 1;
	inflight->depth = depth + 1;
	frame = &inflight->frames[depth & IOMMUTOP_FRAME_MASK];
	frame->call = call.at;
	frame->tag = call.tag;
	frame->key.id = key_id;
	frame->key.kind = IOMMUTOP_KEY_DEVICE;
	frame->key.generation = 0;
	frame->op = op;
	frame->flags = 0;
	frame->bytes = 0;
	frame->probe_ns = 0;
	frame->offcpu_at_start = 0;
	frame->stack_id = -1;
	frame->start_ns = 0;
	return 0;
}

static __always_inline int take_slot(void)
{
	struct iommutop_inflight *inflight;
	__u32 zero = 0, depth;

	inflight = bpf_map_lookup_elem(&iommutop_irq_inflight, &zero);
	if (!inflight)
		return 1;
	depth = inflight->depth;
	if (depth >= IOMMUTOP_MAX_NESTING)
		return 1;
	inflight->depth = depth + 1;
	return 0;
}

static __always_inline int finish(void)
{
	struct iommutop_inflight *inflight;
	__u32 zero = 0, depth;

	inflight = bpf_map_lookup_elem(&iommutop_irq_inflight, &zero);
	if (!inflight)
		return 1;
	depth = inflight->depth;
	if (depth == 0 || depth > IOMMUTOP_MAX_NESTING)
		return 1;
	inflight->frames[(depth - 1) & IOMMUTOP_FRAME_MASK].start_ns = bpf_ktime_get_ns();
	return 0;
}

/* One step of the ops the probes time, op a constant as in every probe program. */
static __always_inline int step(void *ctx, __u64 what, __u32 op, struct iommutop_call call,
				__u64 key_id, __u64 flags)
{
	struct iommutop_dev_key key = {.id = key_id, .kind = IOMMUTOP_KEY_DEVICE};

	switch (what) {
	case STEP_ENTER:
		iommutop_enter(ctx, call, op, key_id ? &key : NULL, 4096,
			       flags & STEP_TWIN ? IOMMUTOP_ENTER_TWIN : 0);
		return 0;
	case STEP_EXIT:
		iommutop_exit_keyed(ctx, call, op, 0, IOMMUTOP_KEEP_BYTES, key_id ? &key : NULL);
		return 0;
	case STEP_PUSH_PARTIAL:
		return push_partial(op, call, key_id);
	case STEP_FINISH:
		return finish();
	case STEP_SWITCH_OUT:
		iommutop_switched_out(bpf_get_current_task_btf(), bpf_ktime_get_ns());
		return 0;
	case STEP_SWITCH_IN:
		iommutop_switched_in(bpf_get_current_task_btf(), bpf_ktime_get_ns());
		return 0;
	case STEP_TAKE_SLOT:
		return take_slot();
	}
	return 1;
}

SEC("raw_tp")
int selftest__tracker_step(struct bpf_raw_tracepoint_args *ctx)
{
	/* The arguments read as the plain array they are: a CO-RE access past the struct's
	 * zero-length args[] would not relocate. */
	const __u64 *args = (const __u64 *)ctx;
	struct iommutop_call call = {.at = args[2], .tag = args[3], .func = args[6]};
	__u64 flags = args[7];

	iommutop_selftest_task_context = args[5];
	iommutop_selftest_understudy = !!(flags & STEP_UNDERSTUDY);
	iommutop_selftest_in_interrupt = !!(flags & STEP_IN_INTERRUPT);
	iommutop_selftest_switched_inside = !!(flags & STEP_SWITCHED_INSIDE);
	switch (args[1]) {
	case IOMMUTOP_OP_DMA_MAP:
		return step(ctx, args[0], IOMMUTOP_OP_DMA_MAP, call, args[4], flags);
	case IOMMUTOP_OP_DMA_UNMAP:
		return step(ctx, args[0], IOMMUTOP_OP_DMA_UNMAP, call, args[4], flags);
	case IOMMUTOP_OP_IOMMU_MAP:
		return step(ctx, args[0], IOMMUTOP_OP_IOMMU_MAP, call, args[4], flags);
	case IOMMUTOP_OP_IOVA_ALLOC:
		return step(ctx, args[0], IOMMUTOP_OP_IOVA_ALLOC, call, args[4], flags);
	}
	return 1;
}

char LICENSE[] SEC("license") = "GPL";
