/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Attribution and timing of calls in flight.
 *
 * Each CPU keeps a small stack of the probed calls it is inside of. A DMA API call pushes a frame
 * keyed by its own struct device; every probed call nested in it (IOVA allocation, iommu_map,
 * IOTLB sync, invalidation waits) pushes a frame that inherits that key, so its work is charged to
 * the device whose mapping it serves. Interrupts nest on the same stack (a completion interrupt
 * unmapping inside a map), which keeps it last-in first-out. The start time lives in the frame: a
 * per-CPU array, not a hash (a hash costs ~210 ns more per entry/exit pair on these machines).
 */
#ifndef IOMMUTOP_TRACK_BPF_H
#define IOMMUTOP_TRACK_BPF_H

#include "maps.bpf.h"
#include "hist.bpf.h"
#include "names.bpf.h"

/* Frame indices are masked with this so that the verifier sees them bounded whatever clang does
 * with the range checks before them. */
#define IOMMUTOP_FRAME_MASK (IOMMUTOP_MAX_NESTING - 1)
_Static_assert((IOMMUTOP_MAX_NESTING & IOMMUTOP_FRAME_MASK) == 0, "nesting must be a power of two");

struct iommutop_frame {
	__u64 start_ns;
	__u64 bytes;
	struct iommutop_dev_key key;
	__u32 op;
	__u32 tid;
	__u32 duplicate; /* a twin called by its wrapper (see IOMMUTOP_ENTER_TWIN): not counted */
	__s32 stack_id;	 /* sampled call path, or negative */
};

struct iommutop_inflight {
	__u32 depth;
	__u32 pad;
	__u64 last_stack_ns; /* when this CPU last sampled a call path */
	struct iommutop_frame frames[IOMMUTOP_MAX_NESTING];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iommutop_inflight);
} iommutop_inflight SEC(".maps") __weak;

static __always_inline struct iommutop_inflight *iommutop_inflight_get(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&iommutop_inflight, &zero);
}

static __always_inline struct iommutop_dev_key iommutop_device_key(const struct device *dev)
{
	struct iommutop_dev_key key = {.id = (__u64)dev, .kind = IOMMUTOP_KEY_DEVICE};

	return key;
}

/* Outside any DMA API call: the owner of the current process or of its parent (a userspace
 * driver's worker), else "unattributed". */
static __always_inline struct iommutop_dev_key iommutop_owner_key(void)
{
	struct iommutop_dev_key key = {.id = 0, .kind = IOMMUTOP_KEY_UNATTRIBUTED};
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct iommutop_dev_key *owner;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	owner = bpf_map_lookup_elem(&iommutop_owners, &tgid);
	if (!owner) {
		tgid = BPF_CORE_READ(task, real_parent, tgid);
		owner = bpf_map_lookup_elem(&iommutop_owners, &tgid);
	}
	return owner ? *owner : key;
}

/* The key nested work is charged to: the innermost frame's, or the owner's outside any. */
static __always_inline struct iommutop_dev_key
iommutop_current_key(const struct iommutop_inflight *inflight)
{
	__u32 depth;

	if (!inflight)
		return iommutop_owner_key();
	depth = inflight->depth;
	if (depth == 0 || depth > IOMMUTOP_MAX_NESTING)
		return iommutop_owner_key();
	return inflight->frames[(depth - 1) & IOMMUTOP_FRAME_MASK].key;
}

static __always_inline struct iommutop_op_stats *
iommutop_op_stats(const struct iommutop_dev_key *key, __u32 op, const void *named_object)
{
	struct iommutop_dev_stats *stats;
	int created;

	if (op >= IOMMUTOP_OP_COUNT)
		return NULL;
	stats = iommutop_stats_lookup_or_init(key, &created);
	if (!stats)
		return NULL;
	if (created)
		iommutop_record_name(key, named_object);
	return &stats->ops[op];
}

static __always_inline void iommutop_record_stack(const struct iommutop_frame *frame, __u64 ns)
{
	struct iommutop_stack_key key = {
	    .dev_id = frame->key.id,
	    .kind = frame->key.kind,
	    .op = frame->op,
	    .stack_id = frame->stack_id,
	};
	struct iommutop_stack_value *value, fresh = {.samples = 1, .total_ns = ns};

	value = bpf_map_lookup_elem(&iommutop_stack_samples, &key);
	if (value) {
		value->samples += 1;
		value->total_ns += ns;
	} else {
		bpf_map_update_elem(&iommutop_stack_samples, &key, &fresh, BPF_NOEXIST);
	}
}

/* The kernel object a frame's key points to, for naming it: only device keys carry one. */
static __always_inline const void *iommutop_key_object(const struct iommutop_dev_key *key)
{
	return key->kind == IOMMUTOP_KEY_DEVICE ? (const void *)key->id : NULL;
}

/* Counts an event that has no measured duration (tracepoint tier, completions). */
static __always_inline void iommutop_count(const struct iommutop_dev_key *key, __u32 op, __u64 n,
					   __u64 bytes, int failed, const void *named_object)
{
	struct iommutop_op_stats *stats = iommutop_op_stats(key, op, named_object);

	if (!stats)
		return;
	stats->count += n;
	stats->bytes += bytes;
	if (failed)
		stats->failures += 1;
}

/* Each CPU records the call path of at most one DMA API call per this many ns (a bounded rate,
 * whatever the event rate: unwinding a stack costs far more than the rest of a probe); 0 turns
 * sampling off. Set by user space before load. Weak: every family sees the same knob. */
const volatile __u64 iommutop_stack_interval_ns __weak = 0;

/*
 * A function that its wrapper, probed as the same operation, calls directly (6.18's
 * dma_map_page_attrs calls dma_map_phys): nested right inside the wrapper on the same device and
 * task, it is the same call and is counted once. Only such twins are checked: the same operation
 * nested for another reason (an interrupt unmapping inside an unmap) is a call of its own.
 */
#define IOMMUTOP_ENTER_TWIN 1

/* Entry of a timed call. own_key is the call's own device (DMA API), or NULL to inherit. ctx is
 * the program's context, used to sample the call path of the device's own calls. */
static __always_inline void iommutop_enter(void *ctx, __u32 op,
					   const struct iommutop_dev_key *own_key, __u64 bytes,
					   __u32 flags)
{
	struct iommutop_inflight *inflight = iommutop_inflight_get();
	struct iommutop_frame *frame, *below;
	struct iommutop_dev_key key;
	__u32 depth;
	__u64 now;

	if (!inflight)
		return;
	/* The inherited key is read before the slot is taken: an interrupt arriving in between
	 * runs to completion and leaves the stack as it found it. */
	key = own_key ? *own_key : iommutop_current_key(inflight);
	/* Take the slot atomically: an interrupt that probes a call while this program is still
	 * filling its frame must get the next slot, not this one. */
	depth = __sync_fetch_and_add(&inflight->depth, 1);
	if (depth >= IOMMUTOP_MAX_NESTING) {
		__sync_fetch_and_sub(&inflight->depth, 1);
		iommutop_health_inc(IOMMUTOP_HEALTH_NESTING_OVERFLOW);
		return;
	}
	frame = &inflight->frames[depth & IOMMUTOP_FRAME_MASK];
	frame->key = key;
	frame->op = op;
	frame->bytes = bytes;
	frame->tid = (__u32)bpf_get_current_pid_tgid();
	frame->duplicate = 0;
	if ((flags & IOMMUTOP_ENTER_TWIN) && depth > 0) {
		below = &inflight->frames[(depth - 1) & IOMMUTOP_FRAME_MASK];
		frame->duplicate = below->op == op && below->key.id == key.id &&
				   below->key.kind == key.kind && below->tid == frame->tid;
	}
	frame->stack_id = -1;
	now = bpf_ktime_get_ns();
	if (own_key && !frame->duplicate && iommutop_stack_interval_ns &&
	    now - inflight->last_stack_ns >= iommutop_stack_interval_ns) {
		inflight->last_stack_ns = now;
		frame->stack_id = bpf_get_stackid(ctx, &iommutop_stacks, 0);
		if (frame->stack_id < 0)
			iommutop_health_inc(IOMMUTOP_HEALTH_STACK_LOST);
		now = bpf_ktime_get_ns(); /* the unwinding is not the call's latency */
	}
	frame->start_ns = now;
}

/*
 * Exit of a timed call: finds its frame (normally the top one; frames above it were left by calls
 * whose exit was missed, e.g. a task that migrated), charges count, bytes and latency, pops.
 */
static __always_inline void iommutop_exit(__u32 op, int failed)
{
	__u64 now = bpf_ktime_get_ns();
	struct iommutop_inflight *inflight = iommutop_inflight_get();
	struct iommutop_op_stats *stats;
	struct iommutop_frame *frame, done;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u32 depth, i, index;

	if (!inflight)
		return;
	depth = inflight->depth;
	if (depth > IOMMUTOP_MAX_NESTING)
		depth = IOMMUTOP_MAX_NESTING;
	for (i = 0; i < IOMMUTOP_MAX_NESTING; i++) {
		if (i >= depth)
			break;
		index = (depth - 1 - i) & IOMMUTOP_FRAME_MASK;
		frame = &inflight->frames[index];
		if (frame->op != op || frame->tid != tid)
			continue;
		/* Copy the frame out before giving its slot back: an interrupt may reuse it. */
		done = *frame;
		inflight->depth = index;
		if (i > 0)
			iommutop_health_inc(IOMMUTOP_HEALTH_EXIT_WITHOUT_ENTRY);
		if (done.duplicate)
			return;
		/* The stats are created here, at the one lookup a call pays; a device key's id is
		 * the struct device itself, which names it on first sight. */
		stats = iommutop_op_stats(&done.key, op, iommutop_key_object(&done.key));
		if (!stats)
			return;
		stats->count += 1;
		stats->bytes += done.bytes;
		if (failed)
			stats->failures += 1;
		iommutop_record_latency(stats, now - done.start_ns);
		if (done.stack_id >= 0)
			iommutop_record_stack(&done, now - done.start_ns);
		return;
	}
	iommutop_health_inc(IOMMUTOP_HEALTH_EXIT_WITHOUT_ENTRY);
}

#endif
