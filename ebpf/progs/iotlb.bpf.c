// SPDX-License-Identifier: GPL-2.0
/*
 * IOTLB maintenance, per vendor driver, and the deferred flush queue.
 *   sync after map:  intel_iommu_iotlb_sync_map, amd_iommu_iotlb_sync_map,
 *                    viommu_iotlb_sync_map            (struct iommu_domain *, iova, size)
 *   invalidation:    qi_submit_sync (VT-d invalidation queue: submit and wait)
 *                    (struct intel_iommu *, struct qi_desc *, unsigned int count, options)
 *                    amd_iommu_domain_flush_pages (domain, u64 address, size_t size) (6.7+)
 *                    amd_iommu_iotlb_sync (domain, gather): AMD-Vi unmap flush on older kernels
 *   deferred:        fq_flush_timeout (struct timer_list *): the flush-queue timer of lazy
 *                    (DMA-FQ) domains; it and what nests in it go to the "deferred" key.
 * iommu_iotlb_sync() itself is an inline and cannot be probed. Tracepoint:
 * intel_iommu:qi_submit, one event per descriptor, counts only.
 */
#include "common.bpf.h"

static __always_inline void iotlb_enter(void *ctx, __u32 op, __u64 bytes)
{
	iommutop_enter(ctx, op, NULL, bytes, 0);
}

static __always_inline void deferred_enter(void *ctx)
{
	struct iommutop_dev_key key = {.id = 0, .kind = IOMMUTOP_KEY_DEFERRED};

	iommutop_enter(ctx, IOMMUTOP_OP_FQ_FLUSH, &key, 0, 0);
}

/* fentry programs are bound to one function: one sync-after-map pair per vendor driver, all of
 * the shape (struct iommu_domain *, unsigned long iova, size_t size). They return void before
 * 6.2 and int after, so failures are not judged. */
#define IOTLB_SYNC_MAP_PAIR(prefix)                                                                \
	SEC("fentry")                                                                              \
	int BPF_PROG(prefix##__fentry, void *domain, unsigned long iova, size_t size)              \
	{                                                                                          \
		iotlb_enter(ctx, IOMMUTOP_OP_IOTLB_SYNC, size);                                    \
		return 0;                                                                          \
	}                                                                                          \
	IOMMUTOP_FEXIT(prefix##__fexit, IOMMUTOP_OP_IOTLB_SYNC, 0)

IOTLB_SYNC_MAP_PAIR(iotlb__intel_sync_map)
IOTLB_SYNC_MAP_PAIR(iotlb__amd_sync_map)
IOTLB_SYNC_MAP_PAIR(iotlb__virtio_sync_map)

SEC("fentry")
int BPF_PROG(iotlb__qi_submit__fentry)
{
	iotlb_enter(ctx, IOMMUTOP_OP_IOTLB_FLUSH, 0);
	return 0;
}
IOMMUTOP_FEXIT(iotlb__qi_submit__fexit, IOMMUTOP_OP_IOTLB_FLUSH, (int)ret != 0)

SEC("fentry")
int BPF_PROG(iotlb__flush_pages__fentry, void *domain, __u64 address, size_t size)
{
	iotlb_enter(ctx, IOMMUTOP_OP_IOTLB_FLUSH, size);
	return 0;
}
IOMMUTOP_FEXIT(iotlb__flush_pages__fexit, IOMMUTOP_OP_IOTLB_FLUSH, 0)

/* amd_iommu_iotlb_sync(struct iommu_domain *, struct iommu_iotlb_gather *): the unmap-side flush
 * of AMD-Vi on kernels without amd_iommu_domain_flush_pages (<6.7); on later kernels it calls
 * that function, and the nested twin is counted once. */
SEC("fentry")
int BPF_PROG(iotlb__amd_iotlb_sync__fentry)
{
	iotlb_enter(ctx, IOMMUTOP_OP_IOTLB_FLUSH, 0);
	return 0;
}
IOMMUTOP_FEXIT(iotlb__amd_iotlb_sync__fexit, IOMMUTOP_OP_IOTLB_FLUSH, 0)

SEC("kprobe")
int BPF_KPROBE(iotlb__amd_iotlb_sync__kprobe)
{
	iotlb_enter(ctx, IOMMUTOP_OP_IOTLB_FLUSH, 0);
	return 0;
}

SEC("fentry")
int BPF_PROG(iotlb__fq_timeout__fentry)
{
	deferred_enter(ctx);
	return 0;
}
IOMMUTOP_FEXIT(iotlb__fq_timeout__fexit, IOMMUTOP_OP_FQ_FLUSH, 0)

SEC("kprobe")
int BPF_KPROBE(iotlb__sync_map__kprobe, void *domain, unsigned long iova, size_t size)
{
	iotlb_enter(ctx, IOMMUTOP_OP_IOTLB_SYNC, size);
	return 0;
}

SEC("kretprobe")
int BPF_KRETPROBE(iotlb__sync_map__kretprobe)
{
	iommutop_exit(IOMMUTOP_OP_IOTLB_SYNC, 0);
	return 0;
}

SEC("kprobe")
int BPF_KPROBE(iotlb__qi_submit__kprobe)
{
	iotlb_enter(ctx, IOMMUTOP_OP_IOTLB_FLUSH, 0);
	return 0;
}

SEC("kretprobe")
int BPF_KRETPROBE(iotlb__qi_submit__kretprobe, int err)
{
	iommutop_exit(IOMMUTOP_OP_IOTLB_FLUSH, err != 0);
	return 0;
}

SEC("kprobe")
int BPF_KPROBE(iotlb__flush_pages__kprobe, void *domain, __u64 address, size_t size)
{
	iotlb_enter(ctx, IOMMUTOP_OP_IOTLB_FLUSH, size);
	return 0;
}

SEC("kretprobe")
int BPF_KRETPROBE(iotlb__flush_pages__kretprobe)
{
	iommutop_exit(IOMMUTOP_OP_IOTLB_FLUSH, 0);
	return 0;
}

SEC("kprobe")
int BPF_KPROBE(iotlb__fq_timeout__kprobe)
{
	deferred_enter(ctx);
	return 0;
}

SEC("kretprobe")
int BPF_KRETPROBE(iotlb__fq_timeout__kretprobe)
{
	iommutop_exit(IOMMUTOP_OP_FQ_FLUSH, 0);
	return 0;
}

SEC("tp_btf")
int BPF_PROG(iotlb__qi_submit__tp)
{
	struct iommutop_dev_key key = iommutop_current_key(iommutop_inflight_get());

	iommutop_count(&key, IOMMUTOP_OP_IOTLB_FLUSH, 1, 0, 0, NULL);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
