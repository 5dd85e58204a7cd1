/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Floor 4, the tracker: a frame's life, from entry to exit. docs/tracker.md is its map: which
 * stack a context keeps its calls on, how an exit knows its own call's frame, the states of a
 * frame's slot and the transitions between them (state.bpf.h), self time, and the filter.
 *
 * A context keeps a small stack of the probed calls it is inside of. A DMA API call pushes a frame
 * keyed by its own struct device; every probed call nested in it (IOVA allocation, iommu_map,
 * IOTLB sync, invalidation waits) pushes a frame that inherits that key, so its work is charged
 * to the device whose mapping it serves. The entry is here, the exit in exit.bpf.h.
 */
#ifndef IOMMUTOP_TRACK_BPF_H
#define IOMMUTOP_TRACK_BPF_H

#include "charge.bpf.h"
#include "position.bpf.h"
#include "role.bpf.h"

/* When each CPU last sampled a call path (the sampling rate is bounded per CPU), and the last
 * clock tick at which it asked. */
struct iommutop_stack_clock {
	__u64 sampled_ns;
	__u64 asked_at_jiffies;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iommutop_stack_clock);
} iommutop_stack_clock SEC(".maps") __weak;

/* The kernel's dispatch around probe programs, in ns (docs/tracker.md, "Self time"); set by user
 * space before load, 0 when not calibrated (the nested one is two gaps when only it was not). */
const volatile __u64 iommutop_dispatch_ns __weak = 0;
const volatile __u64 iommutop_nested_dispatch_ns __weak = 0;

/* Understudies are attached (abi.h, IOMMUTOP_ROLE_UNDERSTUDY): a lead marks each frame it pushes
 * for its understudy to find (IOMMUTOP_FRAME_LEAD). Set by user space before load. */
const volatile __u32 iommutop_understudies __weak = 0;

/* Each CPU records the call path of at most one DMA API call per this many ns (a bounded rate,
 * whatever the event rate: unwinding a stack costs far more than the rest of a probe); 0 turns
 * sampling off. Set by user space before load. Weak: every family sees the same knob. */
const volatile __u64 iommutop_stack_interval_ns __weak = 0;

/*
 * A function that its wrapper, probed as the same operation, calls directly (6.18's
 * dma_map_page_attrs calls dma_map_phys; amd_iommu_iotlb_sync calls amd_iommu_domain_flush_pages):
 * nested right inside the wrapper on the same device, it is the same call and is counted once.
 * Only such twins are checked: the same operation nested for another reason (an interrupt
 * unmapping inside an unmap) is a call of its own.
 */
#define IOMMUTOP_ENTER_TWIN 1
/* An IOTLB invalidation of a whole domain: counted as "full", its size is not bytes. */
#define IOMMUTOP_ENTER_FULL 2
/* A call that spans several functions (a map of the IOVA API, dma_iova_try_alloc to
 * dma_iova_sync): its identity is an object both ends are passed, not a stack position. A new
 * such call drops an open one of the same context (its end was not seen). */
#define IOMMUTOP_ENTER_SPANNING 4
/* The identity a spanning call's end passes when it cannot see the object (a kretprobe has no
 * arguments): the innermost open spanning call of its operation. */
#define IOMMUTOP_ANY_SPANNING ((struct iommutop_call){.at = 0})
/* A DMA map's direction (enum dma_data_direction, as the kernel passed it), for the row's split
 * of its maps by direction (abi.h, struct iommutop_map_directions): kept in the frame's flags,
 * and counted wherever the call is. DMA_NONE, never a map's, reads as not known. */
#define IOMMUTOP_ENTER_DIRECTION(dir) (((((__u32)(dir)) + 1) & 3) << IOMMUTOP_FRAME_DIRECTION_SHIFT)

/* Whether this CPU may unwind a call path now (at most one per iommutop_stack_interval_ns). A
 * timestamp costs a DMA API entry many times what the clock tick (jiffies, inlined by the JIT)
 * does (docs/measurements.md), so the clock is read only at the first call of each tick on this
 * CPU: a CPU samples at most once a tick (an interval under one, 4 ms at Debian's HZ=250, is a
 * tick). */
static __always_inline int iommutop_stack_due(void)
{
	struct iommutop_stack_clock *clock;
	__u64 now, tick;
	__u32 zero = 0;

	if (!iommutop_stack_interval_ns)
		return 0;
	clock = bpf_map_lookup_elem(&iommutop_stack_clock, &zero);
	if (!clock)
		return 0;
	tick = bpf_jiffies64();
	if (tick == clock->asked_at_jiffies)
		return 0;
	clock->asked_at_jiffies = tick;
	now = bpf_ktime_get_ns();
	if (now - clock->sampled_ns < iommutop_stack_interval_ns)
		return 0;
	clock->sampled_ns = now;
	return 1;
}

/*
 * Rare paths, in global functions (IOMMUTOP_GLOBAL_FUNCTIONS, maps.bpf.h): the verifier checks a
 * global function once per program, with its arguments unknown, where an inlined copy is checked
 * again at every call site and in every turn of the loops that call it (the frame searches of
 * every entry and exit). Global functions take only numbers before 5.12, hence the key's fields.
 */

/* Drops the frames at and above index of the stack of the context the program runs in
 * (task_context says which): their calls' exits were lost (docs/tracker.md, "Entry"). Their calls
 * are counted, untimed, and their slots marked free (a start of 0). Returns how many. */
int iommutop_abandon_from(int task_context, __u32 index);

#ifdef IOMMUTOP_GLOBAL_FUNCTIONS
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
		iommutop_count_untimed(frame->key.id, iommutop_kind_generation(&frame->key),
				       frame->op, frame->bytes, frame->flags);
		if (!(frame->flags & IOMMUTOP_FRAME_DUPLICATE))
			iommutop_op_health_add(frame->op, IOMMUTOP_UNSEEN_EXIT, 1);
		iommutop_tracker_abandon(frame);
	}
	inflight->depth = index;
	iommutop_health_add(IOMMUTOP_HEALTH_ABANDONED_FRAMES, depth - index);
	return (int)(depth - index);
}
#endif

/* Before a call is pushed: drops the frames of calls that cannot still be in flight (the lowest
 * that returned, and all above it; a spanning call with everything above it when a new one opens).
 * A full stack whose frames may all be in flight is left as it is: the new call is not pushed
 * (nesting_overflow), and its exit counts it. */
static __always_inline void iommutop_drop_stale(struct iommutop_inflight *inflight,
						struct iommutop_call call, __u32 flags,
						int task_context)
{
	__u32 depth = inflight->depth, i;
	struct iommutop_frame *frame;

	for (i = 0; i < IOMMUTOP_MAX_NESTING; i++) {
		if (i >= depth)
			break;
		frame = &inflight->frames[i & IOMMUTOP_FRAME_MASK];
		if (iommutop_call_returned(frame, call) ||
		    ((flags & IOMMUTOP_ENTER_SPANNING) &&
		     (frame->flags & IOMMUTOP_FRAME_SPANNING) && iommutop_frame_open(frame))) {
			iommutop_abandon_from(task_context, i);
			return;
		}
	}
}

/* Whether the top frame of inflight is the one this program's lead pushed for the same call a
 * moment ago (IOMMUTOP_FRAME_LEAD): the understudy then takes the mark off and leaves the call to
 * the lead. Any other top frame means the lead's run was skipped, and the understudy enters the
 * call in its place. */
static __always_inline int iommutop_lead_entered(struct iommutop_inflight *inflight,
						 struct iommutop_call call, __u32 op)
{
	__u32 depth = inflight->depth;
	struct iommutop_frame *top;

	if (depth == 0 || depth > IOMMUTOP_MAX_NESTING)
		return 0;
	top = &inflight->frames[(depth - 1) & IOMMUTOP_FRAME_MASK];
	if (!(top->flags & IOMMUTOP_FRAME_LEAD) || !iommutop_frame_open(top) ||
	    top->call != call.at || top->op != op || top->tag != call.tag)
		return 0;
	top->flags &= ~IOMMUTOP_FRAME_LEAD;
	return 1;
}

/* Of a program's run of ns, the part on the CPU: offcpu_ns of it the task spent switched out
 * (preempted inside the program), which the stack's waiting already holds. */
static __always_inline __u64 iommutop_on_cpu(__u64 ns, __u64 offcpu_ns)
{
	return ns > offcpu_ns ? ns - offcpu_ns : 0;
}

/* Entry of a timed call. own_key is the call's own device (DMA API), or NULL to inherit. ctx is
 * the program's context, used to sample the call path of the device's own calls. began is when
 * the program began, for one that worked before calling this (a multi-function program reading
 * its cookie), or 0. typed_dev, a device argument the verifier knows the type of (fentry), gives
 * own_key its generation, the driver's binding (charge.bpf.h), as one load straight into the
 * frame: the verifier lets a program load from a typed pointer, and, for root, store what it
 * loaded in a map, where iommutop_device_key's helper call for it costs an entry more
 * (bench/probe-cost, docs/measurements.md). Else NULL (a constant: the compiler drops the load for
 * every other caller).
 */
static __always_inline void iommutop_enter_bound(void *ctx, struct iommutop_call call, __u32 op,
						 const struct iommutop_dev_key *own_key,
						 const struct device *typed_dev, __u64 bytes,
						 __u32 flags, __u64 began)
{
	struct iommutop_frame *frame, *below;
	struct iommutop_inflight *inflight;
	struct iommutop_stack_ref ref;
	struct iommutop_dev_key key = {};
	/* A DMA API call's entry is normally the first of its context's stack: it has no call below
	 * to charge its run to and no stale frame to look for, and reads the clock once, at its
	 * end. Any other entry reads it first, so that the call below is charged the whole run. */
	__u64 now = began ? began : own_key ? 0 : bpf_ktime_get_ns(), end, offcpu_began, offcpu_now;
	int task_context, left_out, understudy = iommutop_is_understudy();
	__u32 depth, had_calls;

	inflight = iommutop_stack_here(ctx, 1, &ref);
	if (!inflight) {
		iommutop_op_health_add(op, IOMMUTOP_UNPUSHED, 1);
		return;
	}
	if (understudy) {
		if (iommutop_lead_entered(inflight, call, op))
			return;
		iommutop_op_health_add(op, IOMMUTOP_UNDERSTUDY_ENTRY, 1);
	}
	task_context = ref.task_context;
	had_calls = inflight->depth != 0;
	/* A DMA API call nested in another (a wrapper's twin, a softirq mapping inside a map): the
	 * call below is charged this program's run from here, short of the stack lookup above. */
	if (had_calls && !now)
		now = bpf_ktime_get_ns();
	/* Time the task spends switched out inside this program is waiting (the stack's offcpu_ns
	 * takes it), not the program's run. */
	offcpu_began = inflight->offcpu_ns;
	iommutop_drop_stale(inflight, call, flags, task_context);
	/* The inherited key and the filter's decision are read before the slot is taken: an
	 * interrupt arriving in between runs to completion and leaves the stack as it found it. A
	 * left-out frame's key is never used: no process row is made for it. */
	left_out = iommutop_left_out(inflight, task_context);
	if (own_key)
		key = *own_key;
	else if (!left_out)
		key = iommutop_key_of_owner(call.owner, inflight, task_context);
	depth = inflight->depth;
	if (depth >= IOMMUTOP_MAX_NESTING) {
		iommutop_health_inc(IOMMUTOP_HEALTH_NESTING_OVERFLOW);
		iommutop_op_health_add(op, IOMMUTOP_UNPUSHED, 1);
		return;
	}
	frame = iommutop_tracker_take(inflight, depth);
	if (!had_calls)
		iommutop_stack_began(&ref);
	frame->call = call.at;
	frame->tag = call.tag;
	frame->func = call.func;
	frame->key = key;
	if (typed_dev)
		frame->key.generation = (__u32)(__u64)typed_dev->driver;
	frame->op = op;
	frame->bytes = bytes;
	frame->flags = (flags & IOMMUTOP_ENTER_FULL ? IOMMUTOP_FRAME_FULL : 0) |
		       (flags & IOMMUTOP_FRAME_DIRECTION_MASK);
	if (flags & IOMMUTOP_ENTER_SPANNING)
		frame->flags |= IOMMUTOP_FRAME_SPANNING;
	if (left_out)
		frame->flags |= IOMMUTOP_FRAME_FILTERED;
	if (!understudy && iommutop_understudies)
		frame->flags |= IOMMUTOP_FRAME_LEAD;
	if ((flags & IOMMUTOP_ENTER_TWIN) && depth > 0) {
		below = &inflight->frames[(depth - 1) & IOMMUTOP_FRAME_MASK];
		if (below->op == op && below->key.id == key.id && below->key.kind == key.kind &&
		    below->key.generation == key.generation && iommutop_called_by(below, call))
			frame->flags |= IOMMUTOP_FRAME_DUPLICATE;
	}
	frame->stack_id = -1;
	if (own_key && !(frame->flags & (IOMMUTOP_FRAME_DUPLICATE | IOMMUTOP_FRAME_FILTERED)) &&
	    iommutop_stack_due()) {
		frame->stack_id = bpf_get_stackid(ctx, &iommutop_stacks, 0);
		if (frame->stack_id < 0)
			iommutop_health_inc(IOMMUTOP_HEALTH_STACK_LOST);
	}
	frame->probe_ns = 0;
#ifdef IOMMUTOP_SELFTEST
	iommutop_selftest_switch_inside();
#endif
	/* The call starts when this program ends: its own run (a stack unwound included) is not the
	 * call's time, but it is inside the time of the call below it, less any time the task was
	 * switched out meanwhile. */
	end = bpf_ktime_get_ns();
	offcpu_now = inflight->offcpu_ns;
	frame->offcpu_at_start = offcpu_now;
	if (depth > 0)
		inflight->frames[(depth - 1) & IOMMUTOP_FRAME_MASK].probe_ns +=
		    iommutop_on_cpu(end - now, offcpu_now - offcpu_began);
	iommutop_tracker_open(frame, end);
}

#endif
