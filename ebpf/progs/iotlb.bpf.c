// SPDX-License-Identifier: GPL-2.0
/*
 * IOTLB maintenance, per vendor driver, and the deferred flush queue.
 *   sync after map:  intel_iommu_iotlb_sync_map, amd_iommu_iotlb_sync_map,
 *                    viommu_iotlb_sync_map            (struct iommu_domain *, iova, size)
 *   invalidation:    qi_submit_sync (VT-d invalidation queue: submit and wait)
 *                    (struct intel_iommu *, struct qi_desc *, unsigned int count, options)
 *                    amd_iommu_domain_flush_pages (domain, u64 address, size_t size) (6.7+):
 *                      called by amd_iommu_iotlb_sync, and counted once with it (a twin); a
 *                      size beyond any address width is a whole-domain flush
 *                    amd_iommu_iotlb_sync, viommu_iotlb_sync (domain, struct iommu_iotlb_gather *):
 *                      the unmap-side flush of the gathered range
 *                    ARM SMMUv3 (no sync after map; its iotlb_sync and flush_iotlb_all share
 *                    their names with the SMMUv2 driver's, so the functions under them):
 *                      __arm_smmu_tlb_inv_range (struct arm_smmu_cmdq_ent *, iova, size, ...)
 *                      (6.1, 6.12), arm_smmu_domain_inv_range (struct arm_smmu_domain *, iova,
 *                      size, ...) and the __arm_smmu_domain_inv_range it calls (struct
 *                      arm_smmu_invs *, iova, size, ...) (7.3): the range's TLBI commands,
 *                      their submission to the command queue and the wait for its CMD_SYNC
 *   full flushes:    intel_flush_iotlb_all, amd_iommu_flush_iotlb_all, viommu_flush_iotlb_all
 *                      (struct iommu_domain *), arm_smmu_tlb_inv_context (struct
 *                      arm_smmu_domain *): what the flush queue's timer ends in; the
 *                      invalidations they issue (qi_submit_sync, ...) are counted once with them
 *   deferred:        fq_flush_timeout (struct timer_list *): the flush-queue timer of lazy
 *                    (DMA-FQ) domains; it and what nests in it go to the "deferred" key.
 * iommu_iotlb_sync() itself is an inline and cannot be probed. Tracepoint:
 * intel_iommu:qi_submit, one event per descriptor, counts only.
 */
#include "common.bpf.h"
#include "sizes.bpf.h"

static __always_inline void iotlb_enter(void *ctx, struct iommutop_call call, __u32 op, __u64 bytes)
{
	iommutop_enter(ctx, call, op, NULL, bytes, 0);
}

/* An invalidation nested right inside another one of the same device (a vendor's iotlb_sync
 * calling its flush function, a full flush submitting queued commands) is counted once. */
static __always_inline void flush_enter(void *ctx, struct iommutop_call call, __u64 bytes)
{
	/* A range no IOMMU address width reaches (AMD passes 2^63 - 4 KiB): the whole domain. */
	const __u64 full_range = 1ULL << 57;
	__u32 flags = IOMMUTOP_ENTER_TWIN;

	if (bytes >= full_range) {
		flags |= IOMMUTOP_ENTER_FULL;
		bytes = 0;
	}
	iommutop_enter(ctx, call, IOMMUTOP_OP_IOTLB_FLUSH, NULL, bytes, flags);
}

static __always_inline void full_flush_enter(void *ctx, struct iommutop_call call)
{
	iommutop_enter(ctx, call, IOMMUTOP_OP_IOTLB_FLUSH, NULL, 0,
		       IOMMUTOP_ENTER_TWIN | IOMMUTOP_ENTER_FULL);
}

/* An fentry's gather, a typed kernel pointer, read with plain loads (no helper calls ahead of
 * the entry's first timestamp). */
static __always_inline __u64 gather_bytes_btf(struct iommu_iotlb_gather *gather)
{
	return range_bytes(gather->start, gather->end);
}

static __always_inline void deferred_enter(void *ctx, struct iommutop_call call)
{
	struct iommutop_dev_key key = {.id = 0, .kind = IOMMUTOP_KEY_DEFERRED};

	iommutop_enter(ctx, call, IOMMUTOP_OP_FQ_FLUSH, &key, 0, 0);
}

/* fentry programs are bound to one function: one sync-after-map pair per vendor driver, all of
 * the shape (struct iommu_domain *, unsigned long iova, size_t size). They return void before
 * 6.2 and int after, so failures are not judged. */
#define IOTLB_SYNC_MAP_PAIR(prefix)                                                                \
	IOMMUTOP_SEC("fentry", prefix##__fentry)                                                   \
	int BPF_PROG(prefix##__fentry, void *domain, unsigned long iova, size_t size)              \
	{                                                                                          \
		iotlb_enter(ctx, IOMMUTOP_OWNED_CALL(ctx), IOMMUTOP_OP_IOTLB_SYNC, size);          \
		return 0;                                                                          \
	}                                                                                          \
	IOMMUTOP_FEXIT_OWNED(prefix##__fexit, IOMMUTOP_OP_IOTLB_SYNC, 0)

IOTLB_SYNC_MAP_PAIR(iotlb__intel_sync_map)
IOTLB_SYNC_MAP_PAIR(iotlb__amd_sync_map)
IOTLB_SYNC_MAP_PAIR(iotlb__virtio_sync_map)

IOMMUTOP_SEC("fentry", iotlb__qi_submit__fentry)
int BPF_PROG(iotlb__qi_submit__fentry)
{
	flush_enter(ctx, IOMMUTOP_FENTRY_CALL(ctx), 0);
	return 0;
}
IOMMUTOP_FEXIT(iotlb__qi_submit__fexit, IOMMUTOP_OP_IOTLB_FLUSH, (int)ret != 0)

IOMMUTOP_SEC("fentry", iotlb__flush_pages__fentry)
int BPF_PROG(iotlb__flush_pages__fentry, void *domain, __u64 address, size_t size)
{
	flush_enter(ctx, IOMMUTOP_OWNED_CALL(ctx), size);
	return 0;
}
IOMMUTOP_FEXIT_OWNED(iotlb__flush_pages__fexit, IOMMUTOP_OP_IOTLB_FLUSH, 0)

/* amd_iommu_iotlb_sync / viommu_iotlb_sync (struct iommu_domain *, struct iommu_iotlb_gather *):
 * the unmap-side flush of the gathered range. AMD-Vi's calls amd_iommu_domain_flush_pages on
 * 6.7+, and the nested twin is counted once. */
IOMMUTOP_SEC("fentry", iotlb__amd_iotlb_sync__fentry)
int BPF_PROG(iotlb__amd_iotlb_sync__fentry, void *domain, struct iommu_iotlb_gather *gather)
{
	flush_enter(ctx, IOMMUTOP_OWNED_CALL(ctx), gather_bytes_btf(gather));
	return 0;
}
IOMMUTOP_FEXIT_OWNED(iotlb__amd_iotlb_sync__fexit, IOMMUTOP_OP_IOTLB_FLUSH, 0)

IOMMUTOP_SEC("fentry", iotlb__virtio_iotlb_sync__fentry)
int BPF_PROG(iotlb__virtio_iotlb_sync__fentry, void *domain, struct iommu_iotlb_gather *gather)
{
	flush_enter(ctx, IOMMUTOP_OWNED_CALL(ctx), gather_bytes_btf(gather));
	return 0;
}
IOMMUTOP_FEXIT_OWNED(iotlb__virtio_iotlb_sync__fexit, IOMMUTOP_OP_IOTLB_FLUSH, 0)

/* SMMUv3 range invalidations, (first, unsigned long iova, size_t size, ...): the first argument
 * is a command template or the domain's invalidation array, no object that names a device. */
#define IOTLB_RANGE_PAIR(prefix)                                                                   \
	IOMMUTOP_SEC("fentry", prefix##__fentry)                                                   \
	int BPF_PROG(prefix##__fentry, void *first, unsigned long iova, size_t size)               \
	{                                                                                          \
		flush_enter(ctx, IOMMUTOP_FENTRY_CALL(ctx), size);                                 \
		return 0;                                                                          \
	}                                                                                          \
	IOMMUTOP_FEXIT(prefix##__fexit, IOMMUTOP_OP_IOTLB_FLUSH, 0)

IOTLB_RANGE_PAIR(iotlb__smmu_inv_range)
IOTLB_RANGE_PAIR(iotlb__smmu_domain_inv)
IOTLB_RANGE_PAIR(iotlb__smmu_domain_inv_invs)

IOMMUTOP_SEC("kprobe", iotlb__range_inv__kprobe)
int BPF_KPROBE(iotlb__range_inv__kprobe, void *first, unsigned long iova, size_t size)
{
	flush_enter(ctx, IOMMUTOP_KPROBE_CALL(ctx), size);
	return 0;
}

IOMMUTOP_SEC("kprobe", iotlb__gather_sync__kprobe)
int BPF_KPROBE(iotlb__gather_sync__kprobe, void *domain, struct iommu_iotlb_gather *gather)
{
	flush_enter(ctx, IOMMUTOP_OWNED_KPROBE_CALL(ctx), gather_bytes(gather));
	return 0;
}

/* Whole-domain flushes, one fentry pair per vendor: (struct iommu_domain *). */
#define IOTLB_FLUSH_ALL_PAIR(prefix)                                                               \
	IOMMUTOP_SEC("fentry", prefix##__fentry)                                                   \
	int BPF_PROG(prefix##__fentry)                                                             \
	{                                                                                          \
		full_flush_enter(ctx, IOMMUTOP_OWNED_CALL(ctx));                                   \
		return 0;                                                                          \
	}                                                                                          \
	IOMMUTOP_FEXIT_OWNED(prefix##__fexit, IOMMUTOP_OP_IOTLB_FLUSH, 0)

IOTLB_FLUSH_ALL_PAIR(iotlb__intel_flush_all)
IOTLB_FLUSH_ALL_PAIR(iotlb__amd_flush_all)
IOTLB_FLUSH_ALL_PAIR(iotlb__virtio_flush_all)
IOTLB_FLUSH_ALL_PAIR(iotlb__smmu_flush_all)

IOMMUTOP_SEC("kprobe", iotlb__flush_all__kprobe)
int BPF_KPROBE(iotlb__flush_all__kprobe)
{
	full_flush_enter(ctx, IOMMUTOP_OWNED_KPROBE_CALL(ctx));
	return 0;
}

IOMMUTOP_SEC("fentry", iotlb__fq_timeout__fentry)
int BPF_PROG(iotlb__fq_timeout__fentry)
{
	deferred_enter(ctx, IOMMUTOP_FENTRY_CALL(ctx));
	return 0;
}
IOMMUTOP_FEXIT(iotlb__fq_timeout__fexit, IOMMUTOP_OP_FQ_FLUSH, 0)

IOMMUTOP_SEC("kprobe", iotlb__sync_map__kprobe)
int BPF_KPROBE(iotlb__sync_map__kprobe, void *domain, unsigned long iova, size_t size)
{
	iotlb_enter(ctx, IOMMUTOP_OWNED_KPROBE_CALL(ctx), IOMMUTOP_OP_IOTLB_SYNC, size);
	return 0;
}

IOMMUTOP_SEC("kretprobe", iotlb__sync_map__kretprobe)
int BPF_KRETPROBE(iotlb__sync_map__kretprobe)
{
	iommutop_exit(ctx, IOMMUTOP_KRETPROBE_CALL(ctx), IOMMUTOP_OP_IOTLB_SYNC, 0);
	return 0;
}

IOMMUTOP_SEC("kprobe", iotlb__qi_submit__kprobe)
int BPF_KPROBE(iotlb__qi_submit__kprobe)
{
	flush_enter(ctx, IOMMUTOP_KPROBE_CALL(ctx), 0);
	return 0;
}

IOMMUTOP_SEC("kretprobe", iotlb__qi_submit__kretprobe)
int BPF_KRETPROBE(iotlb__qi_submit__kretprobe, int err)
{
	iommutop_exit(ctx, IOMMUTOP_KRETPROBE_CALL(ctx), IOMMUTOP_OP_IOTLB_FLUSH, err != 0);
	return 0;
}

IOMMUTOP_SEC("kprobe", iotlb__flush_pages__kprobe)
int BPF_KPROBE(iotlb__flush_pages__kprobe, void *domain, __u64 address, size_t size)
{
	flush_enter(ctx, IOMMUTOP_OWNED_KPROBE_CALL(ctx), size);
	return 0;
}

IOMMUTOP_SEC("kretprobe", iotlb__flush_pages__kretprobe)
int BPF_KRETPROBE(iotlb__flush_pages__kretprobe)
{
	iommutop_exit(ctx, IOMMUTOP_KRETPROBE_CALL(ctx), IOMMUTOP_OP_IOTLB_FLUSH, 0);
	return 0;
}

IOMMUTOP_SEC("kprobe", iotlb__fq_timeout__kprobe)
int BPF_KPROBE(iotlb__fq_timeout__kprobe)
{
	deferred_enter(ctx, IOMMUTOP_KPROBE_CALL(ctx));
	return 0;
}

IOMMUTOP_SEC("kretprobe", iotlb__fq_timeout__kretprobe)
int BPF_KRETPROBE(iotlb__fq_timeout__kretprobe)
{
	iommutop_exit(ctx, IOMMUTOP_KRETPROBE_CALL(ctx), IOMMUTOP_OP_FQ_FLUSH, 0);
	return 0;
}

IOMMUTOP_SEC("tp_btf", iotlb__qi_submit__tp)
int BPF_PROG(iotlb__qi_submit__tp)
{
	struct iommutop_dev_key key;

	if (!iommutop_context_key(ctx, &key))
		return 0;
	iommutop_count(&key, IOMMUTOP_OP_IOTLB_FLUSH, 1, 0, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
