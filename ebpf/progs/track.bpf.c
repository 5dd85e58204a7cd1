// SPDX-License-Identifier: GPL-2.0
/*
 * The in-flight tracker's global functions (ebpf/lib/track.bpf.h, exit.bpf.h): its rare paths
 * (counting a call seen at one end only, dropping frames whose exits were lost, searching below the
 * top frame, naming a new row) and the end of every exit (iommutop_exit_done, which finds the stack
 * again from numbers). The verifier checks each once per program instead of once per place, loop
 * turn and stack map an inlined copy would sit in.
 */
#include "common.bpf.h"

__noinline int iommutop_count_untimed(__u64 key_id, __u64 key_kind_generation, __u32 op,
				      __u64 bytes, __u32 frame_flags)
{
	struct iommutop_dev_key key = {
	    .id = key_id,
	    .kind = (__u32)key_kind_generation,
	    .generation = (__u32)(key_kind_generation >> 32),
	};

	iommutop_charge_untimed(&key, op, bytes == IOMMUTOP_KEEP_BYTES ? 0 : bytes, frame_flags);
	return 0;
}

__noinline __u32 iommutop_find_frame(int task_context, __u32 op, __u32 at_mask, int session)
{
	struct iommutop_inflight *inflight = iommutop_stack_of(task_context);
	struct iommutop_frame *frame;
	__u32 depth, i, index;

	if (!inflight)
		return 0;
	depth = inflight->depth;
	if (depth > IOMMUTOP_MAX_NESTING)
		depth = IOMMUTOP_MAX_NESTING;
	for (i = 1; i < IOMMUTOP_MAX_NESTING; i++) {
		if (i >= depth)
			break;
		index = (depth - 1 - i) & IOMMUTOP_FRAME_MASK;
		frame = &inflight->frames[index];
		if (frame->op != op || frame->start_ns == 0)
			continue;
		if (session ? !!(frame->flags & IOMMUTOP_FRAME_SESSION)
			    : !!(at_mask & (1U << index)))
			return depth - i;
	}
	return 0;
}

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

__noinline int iommutop_name_row(int row, __u64 key_id, __u64 key_kind_generation)
{
	struct iommutop_dev_key key = {
	    .id = key_id,
	    .kind = (__u32)key_kind_generation,
	    .generation = (__u32)(key_kind_generation >> 32),
	};

	iommutop_record_name(row, &key, iommutop_key_object(&key));
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
		iommutop_count_untimed(frame->key.id, iommutop_kind_generation(&frame->key),
				       frame->op, frame->bytes, frame->flags);
		if (!(frame->flags & IOMMUTOP_FRAME_DUPLICATE))
			iommutop_op_health_add(frame->op, IOMMUTOP_UNSEEN_EXIT, 1);
		/* Free: a frame still marked live above the depth would read as one being written
		 * to an interrupt that lands while the next entry fills its slot. */
		frame->start_ns = 0;
	}
	inflight->depth = index;
	iommutop_health_add(IOMMUTOP_HEALTH_ABANDONED_FRAMES, depth - index);
	return (int)(depth - index);
}

/* How many rows the hashed build tries, from the count it read, to take one: every row there
 * can be. The count it read can be far behind: a CPU stalled between reading it and claiming (a
 * vCPU descheduled by its host) while others took rows for a dozen keys, and a fixed number of
 * tries could run out of rows that exist. (The device_map_full drops 5.10 showed were not this
 * but the misread EEXIST that iommutop_insert explains.) */
#define IOMMUTOP_ROW_TRIES IOMMUTOP_MAX_DEVICES

/* Whether row is one of iommutop_stats' (sized for the machine by user space). */
static __always_inline int iommutop_row_exists(__u32 row)
{
	return bpf_map_lookup_elem(&iommutop_stats, &row) != NULL;
}

__noinline int iommutop_take_row(__u64 key_id, __u64 key_kind_generation)
{
	struct iommutop_dev_key key = {
	    .id = key_id,
	    .kind = (__u32)key_kind_generation,
	    .generation = (__u32)(key_kind_generation >> 32),
	};
	struct iommutop_row_key *row_key;
	__u32 zero = 0, row, *count, *kept;
	int err;

	/* A row given back is this key's alone once popped: no count or claim to agree on. */
	if (!bpf_map_pop_elem(&iommutop_free_rows, &row) && iommutop_row_exists(row))
		goto claimed;
	count = bpf_map_lookup_elem(&iommutop_row_count, &zero);
	/* Once every row is taken the count stays put: a key that finds no row counts as
	 * device_map_full at each of its events, and must not push the count round to 0. */
	if (!count || !iommutop_row_exists(*count))
		return -1;
#ifdef IOMMUTOP_TASK_STACKS_HASHED
	{
		__u32 first = *count, i;

		for (i = 0; i < IOMMUTOP_ROW_TRIES; i++) {
			row = first + i;
			if (!iommutop_row_exists(row))
				return -1;
			if (!iommutop_insert(&iommutop_row_claims, &row, &row))
				break;
		}
		if (i == IOMMUTOP_ROW_TRIES)
			return -1;
		/* Never back: another CPU may have counted further meanwhile. */
		if (*count < row + 1)
			*count = row + 1;
	}
#else
	row = __sync_fetch_and_add(count, 1);
	if (!iommutop_row_exists(row))
		return -1; /* another CPU took the last row first */
#endif
claimed:
	row_key = bpf_map_lookup_elem(&iommutop_row_keys, &row);
	if (!row_key)
		return -1;
	row_key->id = key.id;
	row_key->kind = key.kind;
	row_key->generation = key.generation;
	row_key->taken = 1;
	err = iommutop_insert(&iommutop_rows, &key, &row);
	if (!err)
		return (int)row;
	/* Not the key's after all: free for the next new key, not lost for the run. */
	row_key->taken = 0;
	bpf_map_push_elem(&iommutop_free_rows, &row, 0);
	/* Another CPU took a row for the key first. */
	if (err == IOMMUTOP_EEXIST) {
		kept = bpf_map_lookup_elem(&iommutop_rows, &key);
		return kept ? (int)*kept : -1;
	}
	/* Held by what this program interrupted: the key's next event takes a row. */
	if (err == IOMMUTOP_EBUSY)
		return IOMMUTOP_ROW_BUSY;
	return -1;
}

/* sched_switch (bool preempt, struct task_struct *prev, struct task_struct *next, ...): see
 * iommutop_switched. */
IOMMUTOP_SEC("tp_btf", track__sched_switch__tp)
int BPF_PROG(track__sched_switch__tp, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	iommutop_switched(prev, next);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
