// SPDX-License-Identifier: GPL-2.0
/*
 * Calibrates what a probe costs outside its own program: the trampoline's work around each
 * fentry or fexit program (saving arguments, entering and leaving the program's RCU and stats
 * section), which a program cannot time from inside. A fentry/fexit pair on bpf_fentry_test6,
 * a function that only adds its six arguments (net/bpf/test_run.c: BPF_PROG_TEST_RUN of a tracing
 * program calls it), times the gap between the end of its entry program and the start of its exit
 * program: the entry program's trampoline tail and the exit program's head, and a function with
 * next to no work between them. Six arguments, as many as iommu_map takes (the hooked IOMMU calls
 * take three to six): the trampoline saves and restores each, about two instructions a gap per
 * argument (bpf_fentry_test1, of one argument, read 262 instructions a gap on the lab's
 * instruction clock, test6 272). The loader runs it a few hundred times and passes the median to
 * the probes as iommutop_dispatch_ns (see ebpf/lib/track.bpf.h, "Self time").
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define DISPATCH_SAMPLES 256 /* a power of two: indices are masked with it */

/* When the entry program ended, per CPU (a test run does not migrate). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} dispatch_entry_end SEC(".maps");

/* The gaps measured, a ring of DISPATCH_SAMPLES; slot DISPATCH_SAMPLES counts them. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DISPATCH_SAMPLES + 1);
	__type(key, __u32);
	__type(value, __u64);
} dispatch_samples SEC(".maps");

SEC("fentry/bpf_fentry_test6")
int BPF_PROG(calibrate__entry, __u64 a)
{
	__u32 zero = 0;
	__u64 *end = bpf_map_lookup_elem(&dispatch_entry_end, &zero);

	if (end)
		*end = bpf_ktime_get_ns();
	return 0;
}

SEC("fexit/bpf_fentry_test6")
int BPF_PROG(calibrate__exit, __u64 a, void *b, short c, int d, void *e, __u64 f, int ret)
{
	__u64 start = bpf_ktime_get_ns(), *end, *taken, *slot;
	__u32 zero = 0, count_index = DISPATCH_SAMPLES, index;

	end = bpf_map_lookup_elem(&dispatch_entry_end, &zero);
	taken = bpf_map_lookup_elem(&dispatch_samples, &count_index);
	if (!end || !taken || *end == 0 || start < *end)
		return 0;
	index = (__u32)*taken & (DISPATCH_SAMPLES - 1);
	slot = bpf_map_lookup_elem(&dispatch_samples, &index);
	if (!slot)
		return 0;
	*slot = start - *end;
	*taken += 1;
	*end = 0;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
