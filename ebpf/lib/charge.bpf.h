/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Floor 3, charging.
 *
 * Whose work it is and where it is counted: the key of a device, of an IOMMU-side object's
 * device, of a process or of nobody, and the statistics row each event adds to
 * (docs/tracker.md).
 */
#ifndef IOMMUTOP_CHARGE_BPF_H
#define IOMMUTOP_CHARGE_BPF_H

#include "cast.bpf.h"
#include "filter.bpf.h"
#include "hist.bpf.h"
#include "names.bpf.h"

/* A device's key: the struct device, in the generation of the driver bound to it now (abi.h).
 * The driver core sets dev->driver before the driver's probe runs and clears it after its
 * remove returned: a driver's own maps and unmaps, the first and the last, are its. */
static __always_inline struct iommutop_dev_key iommutop_device_key(const struct device *dev)
{
	struct iommutop_dev_key key = {.id = (__u64)dev, .kind = IOMMUTOP_KEY_DEVICE};

	key.generation = iommutop_pointer_bits(IOMMUTOP_FIELD(dev, DEVICE, driver));
	return key;
}

/* Outside any DMA API call, in task context: the owner of the current process or of its parent
 * (a userspace driver's worker), else the process's own "unattributed" row, keyed by its tgid
 * (IOMMUTOP_MAX_PROCESSES of them). In interrupt context, and for processes beyond those, the
 * tgid-0 "unattributed" row: no task there did the work. */
static __always_inline struct iommutop_dev_key iommutop_owner_key(int task_context)
{
	struct iommutop_dev_key key = {.id = 0, .kind = IOMMUTOP_KEY_UNATTRIBUTED};
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct iommutop_dev_key *owner;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, process = tgid, one = 1;
	int err;

	if (!task_context || !tgid || iommutop_in_interrupt())
		return key;
	owner = bpf_map_lookup_elem(&iommutop_owners, &tgid);
	if (!owner) {
		tgid = BPF_CORE_READ(task, real_parent, tgid);
		owner = bpf_map_lookup_elem(&iommutop_owners, &tgid);
	}
	if (owner)
		return *owner;
	if (!bpf_map_lookup_elem(&iommutop_processes, &process)) {
		err = iommutop_insert(&iommutop_processes, &process, &one);
		if (err && err != IOMMUTOP_EEXIST /* another CPU added it first */) {
			iommutop_health_inc(IOMMUTOP_HEALTH_PROCESS_MAP_FULL);
			return key;
		}
	}
	key.id = process;
	return key;
}

/* The key nested work is charged to: the innermost frame's, or the owner's outside any. */
static __always_inline struct iommutop_dev_key
iommutop_current_key(const struct iommutop_inflight *inflight, int task_context)
{
	__u32 depth;

	if (!inflight)
		return iommutop_owner_key(task_context);
	depth = inflight->depth;
	if (depth == 0 || depth > IOMMUTOP_MAX_NESTING)
		return iommutop_owner_key(task_context);
	return inflight->frames[(depth - 1) & IOMMUTOP_FRAME_MASK].key;
}

/* Which device each IOMMU-side object (iommu_domain, IOVA domain, VT-d domain) was last seen
 * serving: written when a call on it runs inside a device's DMA API call, read when a call on it
 * runs inside none (the kernel skipped that DMA call's entry program; an unmap in an interrupt
 * whose DMA call was not probed). A domain shared by several devices (one IOMMU group) names the
 * last one. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOMMUTOP_MAX_DEVICES);
	__type(key, __u64);
	__type(value, struct iommutop_dev_key);
} iommutop_owner_devices SEC(".maps") __weak;

/* The object and device this CPU last saw there: the common case looks nothing up. The map is
 * written only when an object's device changes, not each time this CPU's calls alternate between
 * objects (an IOVA domain, then its iommu_domain: two writes a map before). A write takes the
 * bucket's lock, and its release is where a preemptible kernel (7.x's lazy preemption) switches
 * out a task whose time is up: a program switched out holds its place on the CPU, and the kernel
 * skips it there for every call until the task runs again (recursion_misses). */
struct iommutop_owner_seen {
	__u64 owner;
	struct iommutop_dev_key key;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iommutop_owner_seen);
} iommutop_owner_seen SEC(".maps") __weak;

/* The key of an IOMMU-side call on `owner` (0: none) that nested work would be charged to, the
 * context's `inflight` calls and kind given: inside a call, that call's key (a device's, which is
 * then remembered for the object; the flush-queue timer's); inside none, the device last
 * remembered for the object, else the owner of the context's work. */
static __always_inline struct iommutop_dev_key
iommutop_key_of_owner(__u64 owner, const struct iommutop_inflight *inflight, int task_context)
{
	struct iommutop_dev_key key = iommutop_current_key(inflight, task_context);
	struct iommutop_owner_seen *seen;
	struct iommutop_dev_key *known;
	__u32 zero = 0;
	__u64 number = 0;

	if (!owner)
		return key;
	if (inflight && inflight->depth > 0) {
		if (key.kind != IOMMUTOP_KEY_DEVICE)
			return key;
		seen = bpf_map_lookup_elem(&iommutop_owner_seen, &zero);
		if (!seen || (seen->owner == owner && seen->key.id == key.id &&
			      seen->key.generation == key.generation))
			return key;
		/* A number for the map's key: owner may be a typed pointer (an fentry argument). */
		bpf_probe_read_kernel(&number, sizeof(number), &owner);
		known = bpf_map_lookup_elem(&iommutop_owner_devices, &number);
		if (!known || known->id != key.id || known->generation != key.generation)
			bpf_map_update_elem(&iommutop_owner_devices, &number, &key, BPF_ANY);
		seen->owner = number;
		seen->key = key;
		return key;
	}
	if (key.kind == IOMMUTOP_KEY_DEVICE)
		return key; /* the context's owner is a device already (a userspace driver's) */
	bpf_probe_read_kernel(&number, sizeof(number), &owner);
	known = bpf_map_lookup_elem(&iommutop_owner_devices, &number);
	return known ? *known : key;
}

/* For an event with no frame of its own (counts only): the key its context's work goes to, or 0
 * when the filter leaves it out. */
static __always_inline int iommutop_context_key(const void *ctx, struct iommutop_dev_key *key)
{
	int task_context;
	struct iommutop_inflight *inflight = iommutop_inflight_of(ctx, 0, &task_context);

	if (iommutop_left_out(inflight, task_context))
		return 0;
	*key = iommutop_current_key(inflight, task_context);
	return 1;
}

static __always_inline struct iommutop_op_stats *
iommutop_op_stats(const struct iommutop_dev_key *key, __u32 op)
{
	struct iommutop_dev_key numbers = iommutop_key_numbers(key);
	struct iommutop_dev_stats *stats;
	int new_row;

	if (op >= IOMMUTOP_OP_COUNT)
		return NULL;
	stats = iommutop_stats_lookup_or_init(&numbers, &new_row);
	if (!stats)
		return NULL;
	if (new_row >= 0)
		iommutop_name_row(new_row, numbers.id, iommutop_kind_generation(&numbers));
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
		IOMMUTOP_ADD(value->samples, 1);
		IOMMUTOP_ADD(value->total_ns, ns);
	} else {
		bpf_map_update_elem(&iommutop_stack_samples, &key, &fresh, BPF_NOEXIST);
	}
}

/* Counts an event that has no measured duration (tracepoint tier, completions). */
static __always_inline void iommutop_count(const struct iommutop_dev_key *key, __u32 op, __u64 n,
					   __u64 bytes, int failed)
{
	struct iommutop_op_stats *stats = iommutop_op_stats(key, op);

	if (!stats)
		return;
	IOMMUTOP_ADD(stats->count, n);
	IOMMUTOP_ADD(stats->bytes, bytes);
	if (failed)
		IOMMUTOP_ADD(stats->failures, 1);
}

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

/* iommutop_charge_untimed of a frame's key; bytes IOMMUTOP_KEEP_BYTES (an exit whose entry was
 * not seen, which has no frame's bytes to keep) are 0. Decided here, in a function the verifier
 * checks once: a multi-function exit's bytes are not known to it, and deciding them in the exit
 * made it walk more of the exit twice (docs/measurements.md). */
int iommutop_count_untimed(__u64 key_id, __u64 key_kind_generation, __u32 op, __u64 bytes,
			   __u32 frame_flags);

#ifdef IOMMUTOP_GLOBAL_FUNCTIONS
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
#endif

/* Charges a closed call: count, bytes (decided by the exit), failure, raw and
 * self time, a sampled call path. Nothing for a discarded call or a twin (counted by its
 * wrapper) or a call --pid/--cgroup left out. */
static __always_inline void iommutop_count_exit(__u32 op, int failed, __u64 bytes,
						const struct iommutop_frame *done, __u64 raw_ns,
						__u64 self_ns, __u64 offcpu_ns, int discard)
{
	struct iommutop_dev_stats *stats;
	struct iommutop_op_stats *op_stats;
	int new_row;

	if (discard || done->flags & (IOMMUTOP_FRAME_DUPLICATE | IOMMUTOP_FRAME_FILTERED) ||
	    op >= IOMMUTOP_OP_COUNT)
		return;
	/* The stats are created here, at the one lookup a call pays; a device key's id is the
	 * struct device itself, which names it on first sight. */
	stats = iommutop_stats_lookup_or_init(&done->key, &new_row);
	if (!stats)
		return;
	if (new_row >= 0)
		iommutop_name_row(new_row, done->key.id, iommutop_kind_generation(&done->key));
	op_stats = &stats->ops[op];
	IOMMUTOP_ADD(op_stats->count, 1);
	IOMMUTOP_ADD(op_stats->bytes, bytes);
	if (failed)
		IOMMUTOP_ADD(op_stats->failures, 1);
	iommutop_count_direction(stats, op, done->flags, bytes);
	iommutop_record_latency(op_stats, raw_ns, self_ns);
	if (offcpu_ns) {
		IOMMUTOP_ADD(op_stats->offcpu_ns, offcpu_ns);
		IOMMUTOP_ADD(op_stats->waited, 1);
	}
	if (done->flags & IOMMUTOP_FRAME_FULL)
		IOMMUTOP_ADD(stats->ops[IOMMUTOP_OP_IOTLB_FLUSH_FULL].count, 1);
	if (done->stack_id >= 0)
		iommutop_record_stack(done, self_ns);
}

#endif
