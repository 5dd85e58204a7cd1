/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Floor 2, stacks and frames.
 *
 * Where a call sits against the frames of its context's stack (docs/tracker.md): the frame its
 * exit closes, the frames that returned before it entered, the wrapper whose twin it is.
 */
#ifndef IOMMUTOP_POSITION_BPF_H
#define IOMMUTOP_POSITION_BPF_H

#include "stacks.bpf.h"

/* Whether frame is the one the exit of op at position call_at closes (0: the exit of a call
 * that spans functions, which closes the innermost such frame). */
static __always_inline int iommutop_frame_is(const struct iommutop_frame *frame, __u32 op,
					     __u64 call_at)
{
	if (frame->op != op || !iommutop_frame_open(frame))
		return 0;
	return call_at == 0 ? !!(frame->flags & IOMMUTOP_FRAME_SPANNING) : frame->call == call_at;
}

/* Which of a stack's frames, live or not, were entered at position call_at: bit i for frames[i].
 * Branches the verifier joins at once (the mask is never an index), where a search loop would
 * carry each frame found into what follows it. */
static __always_inline __u32 iommutop_frames_at(const struct iommutop_inflight *inflight,
						__u64 call_at)
{
	__u32 mask = 0, i;

#pragma unroll
	for (i = 0; i < IOMMUTOP_MAX_NESTING; i++)
		if (inflight->frames[i].call == call_at)
			mask |= 1U << i;
	return mask;
}

/* The position (1-based) of the frame the exit of op closes among those below the top of the
 * stack of the context task_context says, 0 when none is: the exit of a call whose exits above it
 * were lost. at_mask is iommutop_frames_at of the exit's position (a fentry's is its context
 * pointer, which a global function cannot take); spanning, whether the exit is that of a call that
 * spans functions. A global function: the verifier checks this rare search once per program, not
 * once per frame it may find and all that follows. */
__u32 iommutop_find_frame(int task_context, __u32 op, __u32 at_mask, int spanning);

#ifdef IOMMUTOP_GLOBAL_FUNCTIONS
__noinline __u32 iommutop_find_frame(int task_context, __u32 op, __u32 at_mask, int spanning)
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
		if (frame->op != op || !iommutop_frame_open(frame))
			continue;
		if (spanning ? !!(frame->flags & IOMMUTOP_FRAME_SPANNING)
			     : !!(at_mask & (1U << index)))
			return depth - i;
	}
	return 0;
}
#endif

/* Whether a frame's call has returned, seen from a call entering at position call on the same
 * stack: the frame lies at or below it (docs/tracker.md, "Entry"). The comparisons are kept apart
 * (a fentry's position is its context pointer, which the verifier lets a program compare with
 * numbers, not compute with). */
static __always_inline int iommutop_call_returned(const struct iommutop_frame *frame,
						  struct iommutop_call call)
{
	__u64 at = frame->call, span_end = at + iommutop_kernel_stack_size;

	if (!iommutop_frame_open(frame) || (frame->flags & IOMMUTOP_FRAME_SPANNING))
		return 0;
	barrier_var(at);
	barrier_var(span_end);
	if (call.at < at)
		return 0;
	return call.at < span_end;
}

/* How far below its wrapper's position a twin sits at most: the wrapper's own stack frame and a
 * trampoline's. */
#define IOMMUTOP_TWIN_SPAN 1024ULL

/* Whether a call entering at position call is made right by the call of frame, its wrapper: the
 * frame lies just above it, and is a call of another function (a function does not wrap itself).
 * A frame further up may be a call whose exit the kernel skipped, seen from a deeper path: its
 * operation's next call is a call of its own, not a twin; so is a call of the same function as a
 * stale frame's just above it (a plug flush's map whose exits were skipped, then a map issued
 * directly a few hundred bytes deeper). Where the kernel cannot say which function a call is
 * (func 0: before 5.15), the position alone decides. */
static __always_inline int iommutop_called_by(const struct iommutop_frame *frame,
					      struct iommutop_call call)
{
	__u64 at = frame->call, reach = at - IOMMUTOP_TWIN_SPAN;

	if (!iommutop_frame_open(frame) || (frame->flags & IOMMUTOP_FRAME_SPANNING))
		return 0;
	if (call.func && frame->func == call.func)
		return 0;
	barrier_var(at);
	barrier_var(reach);
	if (call.at >= at)
		return 0;
	return call.at >= reach;
}

#endif
