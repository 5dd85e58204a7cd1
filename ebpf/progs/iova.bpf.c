// SPDX-License-Identifier: GPL-2.0
/*
 * IOVA allocator (drivers/iommu/iova.c). Sizes are in granules of the domain:
 *   unsigned long alloc_iova_fast(struct iova_domain *, unsigned long size, unsigned long
 * limit_pfn, bool flush_rcache)                 returns a pfn, 0 on failure void
 * free_iova_fast(struct iova_domain *, unsigned long pfn, unsigned long size) struct iova
 * *alloc_iova(struct iova_domain *, unsigned long size, unsigned long limit_pfn, bool size_aligned)
 * the rbtree path, NULL on failure No tracepoints exist for these: without fentry or kprobes, IOVA
 * work is not measured.
 */
#include "common.bpf.h"
#include "sizes.bpf.h"

/* An fentry program's arguments are typed kernel pointers, read with a plain load: no helper
 * call, and nothing outside the time the program measures of itself (the load runs before the
 * entry's first timestamp, inside the call it is nested in). */
static __always_inline __u64 iova_bytes_btf(const struct iova_domain *iovad, unsigned long granules)
{
	return (__u64)granules * iovad->granule;
}

IOMMUTOP_SEC("fentry", iova__alloc_fast__fentry)
int BPF_PROG(iova__alloc_fast__fentry, struct iova_domain *iovad, unsigned long size)
{
	iommutop_enter(ctx, IOMMUTOP_OWNED_CALL(ctx), IOMMUTOP_OP_IOVA_ALLOC, NULL,
		       iova_bytes_btf(iovad, size), 0);
	return 0;
}
IOMMUTOP_FEXIT_OWNED(iova__alloc_fast__fexit, IOMMUTOP_OP_IOVA_ALLOC, ret == 0)

IOMMUTOP_SEC("fentry", iova__free_fast__fentry)
int BPF_PROG(iova__free_fast__fentry, struct iova_domain *iovad, unsigned long pfn,
	     unsigned long size)
{
	iommutop_enter(ctx, IOMMUTOP_OWNED_CALL(ctx), IOMMUTOP_OP_IOVA_FREE, NULL,
		       iova_bytes_btf(iovad, size), 0);
	return 0;
}
IOMMUTOP_FEXIT_OWNED(iova__free_fast__fexit, IOMMUTOP_OP_IOVA_FREE, 0)

IOMMUTOP_SEC("fentry", iova__alloc_slow__fentry)
int BPF_PROG(iova__alloc_slow__fentry, struct iova_domain *iovad, unsigned long size)
{
	iommutop_enter(ctx, IOMMUTOP_OWNED_CALL(ctx), IOMMUTOP_OP_IOVA_ALLOC_SLOW, NULL,
		       iova_bytes_btf(iovad, size), 0);
	return 0;
}
IOMMUTOP_FEXIT_OWNED(iova__alloc_slow__fexit, IOMMUTOP_OP_IOVA_ALLOC_SLOW, ret == 0)

IOMMUTOP_SEC("kprobe", iova__alloc_fast__kprobe)
int BPF_KPROBE(iova__alloc_fast__kprobe, struct iova_domain *iovad, unsigned long size)
{
	iommutop_enter(ctx, IOMMUTOP_OWNED_KPROBE_CALL(ctx), IOMMUTOP_OP_IOVA_ALLOC, NULL,
		       iova_bytes(iovad, size), 0);
	return 0;
}

IOMMUTOP_SEC("kretprobe", iova__alloc_fast__kretprobe)
int BPF_KRETPROBE(iova__alloc_fast__kretprobe, unsigned long pfn)
{
	iommutop_exit(ctx, IOMMUTOP_KRETPROBE_CALL(ctx), IOMMUTOP_OP_IOVA_ALLOC, pfn == 0);
	return 0;
}

IOMMUTOP_SEC("kprobe", iova__free_fast__kprobe)
int BPF_KPROBE(iova__free_fast__kprobe, struct iova_domain *iovad, unsigned long pfn,
	       unsigned long size)
{
	iommutop_enter(ctx, IOMMUTOP_OWNED_KPROBE_CALL(ctx), IOMMUTOP_OP_IOVA_FREE, NULL,
		       iova_bytes(iovad, size), 0);
	return 0;
}

IOMMUTOP_SEC("kretprobe", iova__free_fast__kretprobe)
int BPF_KRETPROBE(iova__free_fast__kretprobe)
{
	iommutop_exit(ctx, IOMMUTOP_KRETPROBE_CALL(ctx), IOMMUTOP_OP_IOVA_FREE, 0);
	return 0;
}

IOMMUTOP_SEC("kprobe", iova__alloc_slow__kprobe)
int BPF_KPROBE(iova__alloc_slow__kprobe, struct iova_domain *iovad, unsigned long size)
{
	iommutop_enter(ctx, IOMMUTOP_OWNED_KPROBE_CALL(ctx), IOMMUTOP_OP_IOVA_ALLOC_SLOW, NULL,
		       iova_bytes(iovad, size), 0);
	return 0;
}

IOMMUTOP_SEC("kretprobe", iova__alloc_slow__kretprobe)
int BPF_KRETPROBE(iova__alloc_slow__kretprobe, void *iova)
{
	iommutop_exit(ctx, IOMMUTOP_KRETPROBE_CALL(ctx), IOMMUTOP_OP_IOVA_ALLOC_SLOW, iova == NULL);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
