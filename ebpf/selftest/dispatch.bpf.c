// SPDX-License-Identifier: GPL-2.0
/*
 * Calibrates what a probe costs outside its own program: the trampoline's work around each
 * fentry or fexit program (saving arguments, entering and leaving the program's RCU and stats
 * section), which a program cannot time from inside. Two measurements, both on functions that
 * BPF_PROG_TEST_RUN of a tracing program calls (net/bpf/test_run.c):
 *
 * - The gap of a call's own probes: a fentry/fexit pair on bpf_fentry_test6, a function that only
 *   adds its six arguments, times the gap between the end of its entry program and the start of
 *   its exit program (the entry program's trampoline tail and the exit program's head, and a
 *   function with next to no work between them). Six arguments, as many as iommu_map takes: the
 *   trampoline saves and restores each (a function of one argument reads a shorter gap:
 *   docs/measurements.md). The probes take one such gap out of a call's
 *   time (iommutop_dispatch_ns).
 * - What a nested pair costs the call around it, untimed: a pair on bpf_prog_test_run_tracing,
 *   which calls bpf_fentry_test6, times each test run, first without the pair on test6, then with
 *   it, less what that pair timed of its own runs (timing itself as the probes do). The difference
 *   of the medians is the trampoline's whole work for a nested pair: its frame and the saving of
 *   the arguments, entering and leaving both programs, and their heads and tails. The probes add
 *   it to a call per probed call nested in it (iommutop_nested_dispatch_ns).
 *
 * The loader runs each a few hundred times and passes the medians to the probes (see
 * docs/tracker.md, "Self time").
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define DISPATCH_SAMPLES 256 /* a power of two: indices are masked with it */

/* Rings of DISPATCH_SAMPLES values; slot DISPATCH_SAMPLES counts them. */

/* Gaps between the pair's entry program's end and exit program's start. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DISPATCH_SAMPLES + 1);
	__type(key, __u32);
	__type(value, __u64);
} dispatch_samples SEC(".maps");

/* Per test run: the time of the enclosing call (bpf_prog_test_run_tracing, which calls
 * bpf_fentry_test6) less what the pair's programs timed of their own runs. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DISPATCH_SAMPLES + 1);
	__type(key, __u32);
	__type(value, __u64);
} enclosing_samples SEC(".maps");

/* Times of one test run; the calibration runs in one thread, which may migrate between them. */
struct run_clock {
	__u64 pair_entry_end; /* when the pair's entry program ended */
	__u64 enclosing_start;
	__u64 pair_timed; /* the pair's programs' runs as they time themselves */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct run_clock);
} run_clock SEC(".maps");

static __always_inline struct run_clock *clock_of_run(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&run_clock, &zero);
}

static __always_inline void ring_add(void *ring, __u64 value)
{
	__u32 count_index = DISPATCH_SAMPLES, index;
	__u64 *taken = bpf_map_lookup_elem(ring, &count_index), *slot;

	if (!taken)
		return;
	index = (__u32)*taken & (DISPATCH_SAMPLES - 1);
	slot = bpf_map_lookup_elem(ring, &index);
	if (!slot)
		return;
	*slot = value;
	*taken += 1;
}

/* The pair times itself as the probes do (ebpf/lib/track.bpf.h): an entry from its first
 * timestamp to its last, an exit likewise. */
SEC("fentry/bpf_fentry_test6")
int BPF_PROG(calibrate__entry, __u64 a)
{
	__u64 now = bpf_ktime_get_ns(), end;
	struct run_clock *clock = clock_of_run();

	if (!clock)
		return 0;
	end = bpf_ktime_get_ns();
	clock->pair_timed += end - now;
	clock->pair_entry_end = end;
	return 0;
}

SEC("fexit/bpf_fentry_test6")
int BPF_PROG(calibrate__exit, __u64 a, void *b, short c, int d, void *e, __u64 f, int ret)
{
	__u64 now = bpf_ktime_get_ns();
	struct run_clock *clock = clock_of_run();

	if (!clock || clock->pair_entry_end == 0 || now < clock->pair_entry_end)
		return 0;
	ring_add(&dispatch_samples, now - clock->pair_entry_end);
	clock->pair_entry_end = 0;
	clock->pair_timed += bpf_ktime_get_ns() - now;
	return 0;
}

/* Where the probes' timed programs have understudies (ebpf/lib/role.bpf.h), each call runs two
 * more programs, after the pair's: an understudy's entry, which looks at the top of its context's
 * stack and finds its lead's frame, and an understudy's exit, which looks and finds none. These
 * stand in for them, at the same work: the current task, a stack's lookup, a frame's fields
 * compared. Their runs are in the gap of the pair's call (the entry's) and in what a nested call
 * costs the call around it (both), untimed, as the understudies' are. */
struct stand_in_stack {
	__u32 depth;
	__u32 owner;
	__u64 call;
	__u64 flags;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stand_in_stack);
} stand_in_stack SEC(".maps");

static __always_inline int stand_in_look(void *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 zero = 0;
	struct stand_in_stack *stack = bpf_map_lookup_elem(&stand_in_stack, &zero);

	if (!stack || stack->owner != task->pid)
		return 0;
	return stack->depth && stack->call == (__u64)ctx && (stack->flags & 16);
}

SEC("fentry/bpf_fentry_test6")
int BPF_PROG(calibrate__understudy_entry)
{
	stand_in_look(ctx);
	return 0;
}

SEC("fexit/bpf_fentry_test6")
int BPF_PROG(calibrate__understudy_exit)
{
	stand_in_look(ctx);
	return 0;
}

/* Around the whole test run, with and without the pair: what the pair adds to the call around
 * it beyond what its programs timed is what a nested probe costs its caller untimed. */
SEC("fentry/bpf_prog_test_run_tracing")
int BPF_PROG(calibrate__enclosing_entry)
{
	struct run_clock *clock = clock_of_run();

	if (!clock)
		return 0;
	clock->pair_timed = 0;
	clock->pair_entry_end = 0;
	clock->enclosing_start = bpf_ktime_get_ns();
	return 0;
}

SEC("fexit/bpf_prog_test_run_tracing")
int BPF_PROG(calibrate__enclosing_exit)
{
	__u64 now = bpf_ktime_get_ns();
	struct run_clock *clock = clock_of_run();
	__u64 took;

	if (!clock || clock->enclosing_start == 0 || now < clock->enclosing_start)
		return 0;
	took = now - clock->enclosing_start;
	clock->enclosing_start = 0;
	ring_add(&enclosing_samples, took > clock->pair_timed ? took - clock->pair_timed : 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
