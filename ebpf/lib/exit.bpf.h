/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Floor 4, the tracker.
 *
 * A frame's end (track.bpf.h has its life): the exit of a timed call finds its frame, drops the
 * frames above it, charges the call its count, bytes and self time, and pops it; a call whose
 * entry was not seen is counted, untimed.
 */
#ifndef IOMMUTOP_EXIT_BPF_H
#define IOMMUTOP_EXIT_BPF_H

#include "track.bpf.h"

/* How an exit treats its call (iommutop_exit_as). */
enum iommutop_exit_mode {
	/* Counted and timed; a missing frame means the kernel skipped the entry program. */
	IOMMUTOP_EXIT_COUNT,
	/* The call did no work worth a count (dma_iova_try_alloc declining): popped, uncounted. */
	IOMMUTOP_EXIT_DISCARD,
	/* Counted and timed; a missing frame is a legitimate shape of the call, not a lost entry:
	 * dma_iova_sync of a range allocated long before (HMM maps page by page into one IOVA
	 * allocation), counted untimed without a health warning. */
	IOMMUTOP_EXIT_COUNT_MAY_BE_UNOPENED,
};

/* After an exit popped the frame at index of the stack at place (iommutop_stack_place): the call
 * below it is charged ns more probe time, and the time since since (this program's run), less the
 * stack's waiting since it was offcpu_since; or, the stack empty, it goes back
 * (iommutop_stack_emptied). The CPU's stack emptied is an interrupt's outermost call ended: ns is
 * that call's whole time, and the task call the interrupt landed in is charged it (and this
 * program's run) as time that is not its own work. A global function (IOMMUTOP_GLOBAL_FUNCTIONS):
 * a stack lives in one of three maps, and the verifier follows what comes after its lookup once
 * for each while the pointer is in use; with this the exit drops it before counting the call,
 * which the verifier then follows once. */
int iommutop_exit_done(__u64 place, __u32 index, __u64 ns, __u64 since, __u64 offcpu_since);

#ifdef IOMMUTOP_GLOBAL_FUNCTIONS
__noinline int iommutop_exit_done(__u64 place, __u32 index, __u64 ns, __u64 since,
				  __u64 offcpu_since)
{
	struct iommutop_stack_ref ref;
	struct iommutop_inflight *inflight = iommutop_stack_at(place, &ref);

	if (index == 0) {
		if (!ref.task_context)
			iommutop_interrupt_ended(ns + (bpf_ktime_get_ns() - since));
		iommutop_stack_emptied(&ref);
		return 0;
	}
	if (inflight)
		inflight->frames[(index - 1) & IOMMUTOP_FRAME_MASK].probe_ns +=
		    ns +
		    iommutop_on_cpu(bpf_ktime_get_ns() - since, inflight->offcpu_ns - offcpu_since);
	return 0;
}
#endif

/*
 * Exit of a timed call: finds its frame (normally the top one; frames above it belong to calls
 * whose exit was lost, and are dropped), charges count, bytes and latency, pops. bytes replaces
 * what the entry recorded when the size is only known on return (IOMMUTOP_KEEP_BYTES keeps it).
 * A call whose entry was not seen is counted, untimed, on own_dev's key (the device a DMA API
 * exit knows from its arguments: its binding read only then, out of every timed call's time),
 * else on own_key, else on the call it is nested in, with own_direction (a DMA map's direction,
 * IOMMUTOP_ENTER_DIRECTION, read from the exit's arguments; 0: not known). ended is when the
 * program began, for one that worked before calling this, or 0: the call ended then.
 */
static __always_inline void iommutop_exit_as(void *ctx, struct iommutop_call call, __u32 op,
					     int failed, __u64 bytes,
					     const struct iommutop_dev_key *own_key,
					     const struct device *own_dev, __u32 own_direction,
					     enum iommutop_exit_mode mode, __u64 ended)
{
	__u64 now = ended ? ended : bpf_ktime_get_ns();
	struct iommutop_stack_ref ref;
	struct iommutop_inflight *inflight = iommutop_stack_here(ctx, 0, &ref);
	int task_context = ref.task_context, understudy = iommutop_is_understudy();
	struct iommutop_frame done;
	__u64 raw_ns, self_ns, offcpu_ns, offcpu_began, place;
	__u32 depth, index, found;

	if (!inflight)
		goto unseen_entry;
	offcpu_began = inflight->offcpu_ns;
	depth = inflight->depth;
	if (depth > IOMMUTOP_MAX_NESTING)
		depth = IOMMUTOP_MAX_NESTING;
	found = 0;
	if (depth &&
	    iommutop_frame_is(&inflight->frames[(depth - 1) & IOMMUTOP_FRAME_MASK], op, call.at))
		found = depth;
	else if (depth > 1)
		found = iommutop_find_frame(task_context, op, iommutop_frames_at(inflight, call.at),
					    call.at == 0);
	if (!found)
		goto unseen_entry;
	/* The call at this position before ours, whose exit was skipped, as was our entry: the
	 * lead's to drop (an understudy finds it only where the lead's run was skipped too). */
	if (inflight->frames[(found - 1) & IOMMUTOP_FRAME_MASK].tag != call.tag) {
		if (understudy)
			return;
		iommutop_abandon_from(task_context, found - 1);
		goto unseen_entry;
	}
	/* The lead closes its call's frame before the understudy runs: a frame found here by an
	 * understudy is one its lead's skipped run left open. */
	if (understudy)
		iommutop_op_health_add(op, IOMMUTOP_UNDERSTUDY_EXIT, 1);
	if (found < depth)
		iommutop_abandon_from(task_context, found);
	/* The call's frame is the top one now. The depth is read again rather than taken from the
	 * search, so that the verifier follows what comes below once, not once per turn of the
	 * loop that found it. */
	depth = inflight->depth;
	if (depth == 0 || depth > IOMMUTOP_MAX_NESTING)
		goto unseen_entry; /* never, after the search above: said for the verifier */
	index = (depth - 1) & IOMMUTOP_FRAME_MASK;
	bytes = iommutop_tracker_close(inflight, index, &done, bytes);
	place = iommutop_stack_place(&ref);
	/* An exit that reads an earlier time than its entry did (bpf_ktime_get_ns is the kernel's
	 * fast monotonic clock, which may step back slightly between CPUs or across a timekeeping
	 * update: seen on the lab's 2-vCPU instruction clock) would time its call 2^64 - x ns: it
	 * is counted untimed, and said. */
	if (now < done.start_ns) {
		iommutop_health_inc(IOMMUTOP_HEALTH_CLOCK_BEHIND_ENTRY);
		if (mode != IOMMUTOP_EXIT_DISCARD)
			iommutop_count_untimed(done.key.id, iommutop_kind_generation(&done.key), op,
					       bytes, done.flags);
		iommutop_exit_done(place, index, done.probe_ns + iommutop_nested_dispatch_ns, now,
				   offcpu_began);
		return;
	}
	raw_ns = now - done.start_ns;
	offcpu_ns = offcpu_began - done.offcpu_at_start;
	if (offcpu_ns > raw_ns)
		offcpu_ns = raw_ns;
	self_ns = raw_ns > done.probe_ns + iommutop_dispatch_ns + offcpu_ns
		      ? raw_ns - done.probe_ns - iommutop_dispatch_ns - offcpu_ns
		      : 0;
	iommutop_count_exit(op, failed, bytes, &done, raw_ns, self_ns, offcpu_ns,
			    mode == IOMMUTOP_EXIT_DISCARD);
	/* Last: this program's run, and what ran nested in the call, are inside the time of the
	 * call below it; an interrupt's outermost call, whole, inside the time of the task call it
	 * landed in (iommutop_exit_done). */
	iommutop_exit_done(place, index,
			   (index ? done.probe_ns : raw_ns) + iommutop_nested_dispatch_ns, now,
			   offcpu_began);
	return;
unseen_entry:
	/* An understudy that finds no frame of its call leaves it to the lead, which has counted it
	 * (or, its run skipped too, the call is one the report's losses name). */
	if (understudy || mode == IOMMUTOP_EXIT_DISCARD)
		return;
	/* Counted for the losses' sums whatever the filter decides: the kernel's skipped runs,
	 * which they are taken from, are every context's. */
	iommutop_op_health_add(op, IOMMUTOP_UNSEEN_ENTRY, 1);
	if (iommutop_left_out(inflight, task_context))
		return;
	if (mode == IOMMUTOP_EXIT_COUNT)
		iommutop_health_inc(IOMMUTOP_HEALTH_EXIT_WITHOUT_ENTRY);
	{
		struct iommutop_dev_key key =
		    own_dev   ? iommutop_device_key(own_dev)
		    : own_key ? *own_key
			      : iommutop_key_of_owner(call.owner, inflight, task_context);
		struct iommutop_dev_key numbers = iommutop_key_numbers(&key);

		iommutop_count_untimed(numbers.id, iommutop_kind_generation(&numbers), op, bytes,
				       own_direction & IOMMUTOP_FRAME_DIRECTION_MASK);
	}
}

#endif
