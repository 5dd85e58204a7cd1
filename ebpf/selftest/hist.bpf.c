// SPDX-License-Identifier: GPL-2.0
/*
 * Programs that are never attached: `iommutop selftest` runs them with BPF_PROG_TEST_RUN to check
 * that the kernel computes what user space assumes. A raw tracepoint program takes its arguments
 * from the test run (5.10+) and its return value comes back.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "iommutop/abi.h"
#include "bits.bpf.h"

/* The histogram slot the probes file a latency of args[0] ns in. */
SEC("raw_tp")
int selftest__hist_slot(struct bpf_raw_tracepoint_args *ctx)
{
	return iommutop_hist_slot(ctx->args[0]);
}

char LICENSE[] SEC("license") = "GPL";
