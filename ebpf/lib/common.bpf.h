/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* What every probe family includes, in the order the headers need. */
#ifndef IOMMUTOP_COMMON_BPF_H
#define IOMMUTOP_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "iommutop/abi.h"
#include "track.bpf.h"

/* include/linux/dma-mapping.h: the dma_addr_t a failed map returns. */
#define IOMMUTOP_DMA_MAPPING_ERROR (~(dma_addr_t)0)

/*
 * fentry/fexit programs are bound to one kernel function when loaded, so every hooked function
 * needs its own pair; kprobes are attached by name and one program serves functions of the same
 * shape. The return value is read with bpf_get_func_ret() because its position in an fexit
 * context depends on the function's arity, which differs between kernels (iommu_map gained a
 * gfp argument in 6.3).
 */
static __always_inline __u64 iommutop_fexit_ret(void *ctx)
{
	__u64 ret = 0;

	bpf_get_func_ret(ctx, &ret);
	return ret;
}

/* An fexit program that closes the frame its fentry opened; `failed` may use `ret`. */
#define IOMMUTOP_FEXIT(prog, op, failed)                                                           \
	SEC("fexit")                                                                               \
	int prog(void *ctx)                                                                        \
	{                                                                                          \
		__u64 ret = iommutop_fexit_ret(ctx);                                               \
		(void)ret;                                                                         \
		iommutop_exit(ctx, op, (failed));                                                  \
		return 0;                                                                          \
	}

#endif
