/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Attribution and timing of calls in flight: a frame's life, from entry to exit. The tracker is
 * split by concern (frame.bpf.h, context.bpf.h, stacks.bpf.h, filter.bpf.h, charge.bpf.h, this
 * file, exit.bpf.h for a frame's end); docs/tracker.md has the map and a picture of a frame's
 * life.
 *
 * A context keeps a small stack of the probed calls it is inside of. A DMA API call pushes a frame
 * keyed by its own struct device; every probed call nested in it (IOVA allocation, iommu_map,
 * IOTLB sync, invalidation waits) pushes a frame that inherits that key, so its work is charged to
 * the device whose mapping it serves. The start time lives in the frame.
 *
 * Which stack: a task's own for calls made in task context: in the slot of its thread id, which a
 * task holds from its first call in flight to its last return, or, while another task of the same
 * index holds the slot, in an LRU hash keyed by its thread id (preallocated, at about ten times a
 * slot's cost); built with IOMMUTOP_TASK_STACKS_HASHED (kernels without BPF atomics that return a
 * value or BTF task pointers, 5.10), every task's in that hash. A task preempted or migrated inside
 * a DMA call finds its frame wherever it resumes, and no other task's work can land in it.
 * Interrupt context (hard interrupts, and softirqs run on the interrupt stack) uses a per-CPU
 * stack: it cannot be preempted or migrate, and its calls nest last-in first-out over whatever the
 * CPU was doing. The two are told apart by where the program's own context lies: on the current
 * task's kernel stack, or not.
 *
 * A frame knows its call by the call's identity, which the entry and the exit programs of one call
 * both see: where the call sits on its context's stack (the trampoline's argument block for
 * fentry/fexit, the stack pointer at the function's first instruction for kprobes), or, for a map
 * of the IOVA API that spans several functions, its struct dma_iova_state. An exit closes only the
 * frame of its own call. Stacks grow down and a call in flight lies above every call made inside
 * it, so a frame at or below the position of a call now entering (on the same stack) belongs to a
 * call that has returned: the kernel skipped its exit program (a trampoline program preempted or
 * interrupted is not run again on that CPU until it finishes: the program's recursion_misses; a
 * kprobe program while any other runs there). Such a frame, and everything above it, is dropped
 * when the next call enters, and so is what lies above a frame an exit closes; a full stack is
 * emptied. Every dropped frame is counted as IOMMUTOP_HEALTH_ABANDONED_FRAMES, and its call is
 * counted, untimed. An exit that finds no frame of its call (its entry was skipped) counts the
 * call untimed and leaves the stack alone. A frame whose start is 0 is still being written (or
 * was given back): it is never closed nor dropped by an interrupt that lands meanwhile.
 *
 * Self time. A call's frame opens when its entry program ends and closes when its exit program
 * starts, so the call's own probes are outside the time it is charged. The programs of calls
 * nested in it run inside that time: each adds what it ran (its first to its last timestamp) to
 * the frame it is nested in (probe_ns), and a nested frame hands its own probe_ns up when it
 * closes. A call's time is then what was measured less its probe_ns (total_ns, the histogram),
 * and the measured time is kept as raw_total_ns. What a program cannot time is the kernel's
 * dispatch around it (the trampoline entering and leaving each program): the loader measures it
 * on functions that do nothing (ebpf/selftest/dispatch.bpf.c) and passes the gap between an entry
 * program's end and an exit program's start as iommutop_dispatch_ns, which a call's own time
 * holds once (its entry's tail, its exit's head), and what a probed call costs the call around it
 * beyond its programs' runs as iommutop_nested_dispatch_ns (the trampoline's frame and argument
 * saving, both programs' entering and leaving, their heads and tails), added per nested call.
 * Not taken out: the cost of count-only programs, and a kprobe's dispatch beyond a trampoline's.
 *
 * --pid and --cgroup (iommutop_filter_tgid, iommutop_filter_cgroup) are decided where a context's
 * outermost frame opens: in task context, by the task's process or cgroup; interrupt context has
 * no task of its own and is left out. A left-out frame is pushed all the same, marked
 * IOMMUTOP_FRAME_FILTERED, and the frames nested in it inherit the mark: their work is dropped
 * with it, not charged elsewhere. Without a filter the checks are dead code the verifier removes.
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

/* The kernel's dispatch around probe programs, in ns (see "Self time" above); set by user space
 * before load, 0 when not calibrated (the nested one is two gaps when only it was not). */
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
 * dma_iova_sync): its identity is a session object both ends are passed, not a stack position. A
 * new session drops an open one of the same context (its end was not seen). */
#define IOMMUTOP_ENTER_SESSION 4
/* The identity a session's end passes when it cannot see the session (a kretprobe has no
 * arguments): the innermost open session of its operation. */
#define IOMMUTOP_ANY_SESSION ((struct iommutop_call){.at = 0})
/* A DMA map's direction (enum dma_data_direction, as the kernel passed it), for the row's split
 * of its maps by direction (abi.h, struct iommutop_map_directions): kept in the frame's flags,
 * and counted wherever the call is. DMA_NONE, never a map's, reads as not known. */
#define IOMMUTOP_ENTER_DIRECTION(dir) (((((__u32)(dir)) + 1) & 3) << IOMMUTOP_FRAME_DIRECTION_SHIFT)

/* Adds a counted DMA map to its row's split by direction, if its direction was read (flags, a
 * frame's: IOMMUTOP_FRAME_DIRECTION_MASK). */
static __always_inline void iommutop_count_direction(struct iommutop_dev_stats *stats, __u32 op,
						     __u32 flags, __u64 bytes)
{
	__u32 direction = (flags & IOMMUTOP_FRAME_DIRECTION_MASK) >> IOMMUTOP_FRAME_DIRECTION_SHIFT;

	if (op != IOMMUTOP_OP_DMA_MAP || !direction)
		return;
	direction = (direction - 1) & (IOMMUTOP_DIRECTIONS - 1);
	IOMMUTOP_ADD(stats->map_directions.count[direction], 1);
	IOMMUTOP_ADD(stats->map_directions.bytes[direction], bytes);
}

/* Whether this CPU may unwind a call path now (at most one per iommutop_stack_interval_ns). A
 * timestamp costs a DMA API entry about 55 instructions and the clock tick (jiffies, inlined by
 * the JIT) three, so the clock is read only at the first call of each tick on this CPU: a CPU
 * samples at most once a tick (an interval under one, 4 ms at Debian's HZ=250, is a tick). */
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

/* Counts a call that was seen at only one end (its entry or its exit program was skipped):
 * count and bytes, no latency. Nothing for a twin or a call --pid/--cgroup left out. */
static __always_inline void iommutop_charge_untimed(const struct iommutop_dev_key *key, __u32 op,
						    __u64 bytes, __u32 frame_flags)
{
	struct iommutop_dev_key numbers;
	struct iommutop_dev_stats *stats;
	int new_row;

	if (frame_flags & (IOMMUTOP_FRAME_DUPLICATE | IOMMUTOP_FRAME_FILTERED))
		return;
	barrier_var(op);
	if (op >= IOMMUTOP_OP_COUNT)
		return;
	numbers = iommutop_key_numbers(key);
	stats = iommutop_stats_lookup_or_init(&numbers, &new_row);
	if (!stats)
		return;
	if (new_row >= 0)
		iommutop_name_row(new_row, numbers.id, iommutop_kind_generation(&numbers));
	IOMMUTOP_ADD(stats->ops[op].count, 1);
	IOMMUTOP_ADD(stats->ops[op].bytes, bytes);
	iommutop_count_direction(stats, op, frame_flags, bytes);
	if (frame_flags & IOMMUTOP_FRAME_FULL)
		IOMMUTOP_ADD(stats->ops[IOMMUTOP_OP_IOTLB_FLUSH_FULL].count, 1);
}

/*
 * Rare paths, in functions of their own (ebpf/progs/track.bpf.c). They are global: the verifier
 * checks a global function once per program, with its arguments unknown, where an inlined copy
 * is checked again at every call site and in every turn of the loops that call it (the frame
 * searches of every entry and exit: with them inlined, each exit program cost the verifier some
 * 90,000 instructions). Global functions take only numbers before 5.12, hence the key's fields.
 */

/* iommutop_charge_untimed of a frame's key; bytes IOMMUTOP_KEEP_BYTES (an exit whose entry was
 * not seen, which has no frame's bytes to keep) are 0. Decided here, in a function the verifier
 * checks once: a multi-function exit's bytes are not known to it, and deciding them in the exit
 * made it walk more of the exit twice (an IOMMU-side exit on 7.3: 29,100 instructions, 24,700
 * with this; ebpf/progs/multi.bpf.c's masks took it to 13,700). */
int iommutop_count_untimed(__u64 key_id, __u64 key_kind_generation, __u32 op, __u64 bytes,
			   __u32 frame_flags);

/* Drops the frames at and above index of the stack of the context the program runs in
 * (task_context says which): their calls' exits were lost (see the top of this file). Their calls
 * are counted, untimed, and their slots marked free (a start of 0). Returns how many. */
int iommutop_abandon_from(int task_context, __u32 index);

/* Before a call is pushed: drops the frames of calls that cannot still be in flight (the lowest
 * that returned, and all above it; a session with everything above it when a new one opens). A
 * full stack whose frames may all be in flight is left as it is: the new call is not pushed
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
		    ((flags & IOMMUTOP_ENTER_SESSION) && (frame->flags & IOMMUTOP_FRAME_SESSION) &&
		     frame->start_ns != 0)) {
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
	if (!(top->flags & IOMMUTOP_FRAME_LEAD) || top->start_ns == 0 || top->call != call.at ||
	    top->op != op || top->tag != call.tag)
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
 * loaded in a map, where iommutop_device_key's helper call for it cost 90 instructions an entry
 * (bench/probe-cost). Else NULL (a constant: the compiler drops the load for every other caller).
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
	/* Take the slot before filling it: an interrupt that probes a call while this program is
	 * still filling its frame must get the next slot, not this one. No atomic is needed (nor
	 * available before 5.12): the stack is only ever shared with interrupts on the same CPU,
	 * which nest, so one arriving between the load and the store runs its call to the end and
	 * leaves depth as it found it. The slot reads as being written (a start of 0) before it is
	 * taken, whatever a frame dropped from it left there; the barriers keep the compiler from
	 * moving the stores across each other. */
	frame = &inflight->frames[depth & IOMMUTOP_FRAME_MASK];
	frame->start_ns = 0;
	asm volatile("" ::: "memory");
	inflight->depth = depth + 1;
	asm volatile("" ::: "memory");
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
	if (flags & IOMMUTOP_ENTER_SESSION)
		frame->flags |= IOMMUTOP_FRAME_SESSION;
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
	frame->start_ns = end;
}

#endif
