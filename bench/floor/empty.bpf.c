// SPDX-License-Identifier: GPL-2.0
// The floor of bench/probe-floor: an fentry and an fexit program that do nothing. Their cost is
// the trampoline's (the call into it, the programs' entry and exit bookkeeping, the return), which
// any trampoline-based tool pays on every call of a hooked function. bench/floor/loader.c attaches
// one pair of them to each function it is given.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("fentry")
int floor__fentry(void *ctx)
{
	return 0;
}

SEC("fexit")
int floor__fexit(void *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
