/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Floor 2, stacks and frames.
 *
 * The states of a slot of a context's stack of calls in flight, and the transitions that change
 * them: docs/tracker.md ("States and transitions") has the table of which event takes a slot
 * from which state to which, and by which function. The tracker changes a slot's state through
 * these functions, and tells the states apart with iommutop_frame_open.
 */
#ifndef IOMMUTOP_STATE_BPF_H
#define IOMMUTOP_STATE_BPF_H

#include "frame.bpf.h"

/* What a slot holds. Not stored: a slot's state is where it lies against the stack's depth and
 * its frame's start (0 while the frame is written, and once it is given back). */
enum iommutop_tracker_state {
	/* At or above the depth: no call. */
	IOMMUTOP_TRACKER_FREE,
	/* Below the depth, start 0: taken by an entry still writing its frame. An interrupt that
	 * lands meanwhile neither closes it nor drops it. */
	IOMMUTOP_TRACKER_WRITING,
	/* Below the depth, start set: a call in flight, which its exit closes. */
	IOMMUTOP_TRACKER_OPEN,
};

/* Whether a frame below the depth is a call in flight (IOMMUTOP_TRACKER_OPEN), not one still
 * being written. */
static __always_inline int iommutop_frame_open(const struct iommutop_frame *frame)
{
	return frame->start_ns != 0;
}

/* The state of the slot at index of a stack. */
static __always_inline enum iommutop_tracker_state
iommutop_tracker_state(const struct iommutop_inflight *inflight, __u32 index)
{
	if (index >= inflight->depth || index >= IOMMUTOP_MAX_NESTING)
		return IOMMUTOP_TRACKER_FREE;
	return iommutop_frame_open(&inflight->frames[index & IOMMUTOP_FRAME_MASK])
		   ? IOMMUTOP_TRACKER_OPEN
		   : IOMMUTOP_TRACKER_WRITING;
}

/*
 * FREE -> WRITING: an entry takes the slot at depth, the one above the top (the caller checked
 * that the stack has room), before it fills it: an interrupt that probes a call while the frame
 * is being written must get the next slot, not this one. No atomic is needed (nor available
 * before 5.12): the stack is only ever shared with interrupts on the same CPU, which nest, so one
 * arriving between the load and the store runs its call to the end and leaves depth as it found
 * it. The slot reads as being written (a start of 0) before it is taken, whatever a frame dropped
 * from it left there; the barriers keep the compiler from moving the stores across each other.
 */
static __always_inline struct iommutop_frame *
iommutop_tracker_take(struct iommutop_inflight *inflight, __u32 depth)
{
	struct iommutop_frame *frame = &inflight->frames[depth & IOMMUTOP_FRAME_MASK];

	frame->start_ns = 0;
	asm volatile("" ::: "memory");
	inflight->depth = depth + 1;
	asm volatile("" ::: "memory");
	return frame;
}

/* WRITING -> OPEN: the entry's last store, once every other field of the frame is written. The
 * call starts at start_ns, when the entry program ends. */
static __always_inline void iommutop_tracker_open(struct iommutop_frame *frame, __u64 start_ns)
{
	frame->start_ns = start_ns;
}

/* An exit's bytes that keep what its entry recorded (iommutop_exit_sized). */
#define IOMMUTOP_KEEP_BYTES (~0ULL)

/* OPEN -> FREE, closed by its own exit: the top frame, at index (depth - 1, masked), is copied
 * out into done and its slot given back before the call is charged from the copy (an interrupt
 * may reuse the slot). bytes is the exit's, or IOMMUTOP_KEEP_BYTES. Returns the call's bytes,
 * decided here once: a multi-function exit's are not known to the verifier, which walks what
 * follows each place they are decided once for each way. */
static __always_inline __u64 iommutop_tracker_close(struct iommutop_inflight *inflight, __u32 index,
						    struct iommutop_frame *done, __u64 bytes)
{
	struct iommutop_frame *frame = &inflight->frames[index];

	*done = *frame;
	frame->start_ns = 0;
	bytes = bytes == IOMMUTOP_KEEP_BYTES ? done->bytes : bytes;
	inflight->depth = index;
	return bytes;
}

/* OPEN -> FREE, abandoned: a frame whose call's exit was lost, dropped by iommutop_abandon_from
 * (track.bpf.h) after it counted the call untimed; it then cuts the depth below the frames it
 * dropped. Its start is cleared: a frame still marked live above the depth would read as one
 * being written to an interrupt that lands while the next entry fills its slot. */
static __always_inline void iommutop_tracker_abandon(struct iommutop_frame *frame)
{
	frame->start_ns = 0;
}

#endif
