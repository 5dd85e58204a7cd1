// SPDX-License-Identifier: GPL-2.0
/*
 * IOMMU core: page-table map and unmap (drivers/iommu/iommu.c). Nested in a DMA API call, the
 * work is charged to that call's device; outside one (VFIO_IOMMU_MAP_DMA, ...) it is
 * unattributed.
 *   int iommu_map(struct iommu_domain *, unsigned long iova, phys_addr_t, size_t size, int prot
 *                 [, gfp_t (6.3+)])
 *   int iommu_map_atomic(same as iommu_map, <= 6.2; what dma-iommu uses in atomic context)
 *   size_t iommu_unmap(struct iommu_domain *, unsigned long iova, size_t size)
 *   size_t iommu_unmap_fast(struct iommu_domain *, unsigned long iova, size_t size, gather)
 *   ssize_t iommu_map_sg(struct iommu_domain *, unsigned long iova, struct scatterlist *,
 *                        unsigned int nents, int prot, gfp_t)  (6.3+; iommu_map_sg_atomic before):
 *     how dma-iommu fills page tables for a scatter-gather map, without going through iommu_map.
 *     One call is one page-table map; its bytes are what it returns.
 *   int iommu_map_nosync(same as iommu_map, 6.16+): the page-table half of iommu_map, which
 *     wraps it; dma_iova_link, iommu_map_sg and iommu_map call it. Where it exists it is hooked
 *     instead of iommu_map, as a twin: inside iommu_map_sg it is that call's own work.
 * Tracepoints iommu:map (iova, paddr, size) and iommu:unmap (iova, size, unmapped_size).
 */
#include "common.bpf.h"

static __always_inline void iommu_enter(void *ctx, struct iommutop_call call, __u32 op, __u64 bytes)
{
	iommutop_enter(ctx, call, op, NULL, bytes, 0);
}

static __always_inline void iommu_count(void *ctx, __u32 op, __u64 bytes)
{
	struct iommutop_dev_key key;

	if (!iommutop_context_key(ctx, &key))
		return;
	iommutop_count(&key, op, 1, bytes, 0);
}

IOMMUTOP_SEC("fentry", iommu__map__fentry)
int BPF_PROG(iommu__map__fentry, void *domain, unsigned long iova, phys_addr_t paddr, size_t size)
{
	iommu_enter(ctx, IOMMUTOP_OWNED_CALL(ctx), IOMMUTOP_OP_IOMMU_MAP, size);
	return 0;
}
IOMMUTOP_FEXIT_OWNED(iommu__map__fexit, IOMMUTOP_OP_IOMMU_MAP, ret != 0)

IOMMUTOP_SEC("fentry", iommu__map_atomic__fentry)
int BPF_PROG(iommu__map_atomic__fentry, void *domain, unsigned long iova, phys_addr_t paddr,
	     size_t size)
{
	iommu_enter(ctx, IOMMUTOP_OWNED_CALL(ctx), IOMMUTOP_OP_IOMMU_MAP, size);
	return 0;
}
IOMMUTOP_FEXIT_OWNED(iommu__map_atomic__fexit, IOMMUTOP_OP_IOMMU_MAP, ret != 0)

IOMMUTOP_SEC("fentry", iommu__map_nosync__fentry)
int BPF_PROG(iommu__map_nosync__fentry, void *domain, unsigned long iova, phys_addr_t paddr,
	     size_t size)
{
	iommutop_enter(ctx, IOMMUTOP_OWNED_CALL(ctx), IOMMUTOP_OP_IOMMU_MAP, NULL, size,
		       IOMMUTOP_ENTER_TWIN);
	return 0;
}
IOMMUTOP_FEXIT_OWNED(iommu__map_nosync__fexit, IOMMUTOP_OP_IOMMU_MAP, ret != 0)

IOMMUTOP_SEC("fentry", iommu__unmap__fentry)
int BPF_PROG(iommu__unmap__fentry, void *domain, unsigned long iova, size_t size)
{
	iommu_enter(ctx, IOMMUTOP_OWNED_CALL(ctx), IOMMUTOP_OP_IOMMU_UNMAP, size);
	return 0;
}
IOMMUTOP_FEXIT_OWNED(iommu__unmap__fexit, IOMMUTOP_OP_IOMMU_UNMAP, ret == 0)

IOMMUTOP_SEC("fentry", iommu__unmap_fast__fentry)
int BPF_PROG(iommu__unmap_fast__fentry, void *domain, unsigned long iova, size_t size)
{
	iommu_enter(ctx, IOMMUTOP_OWNED_CALL(ctx), IOMMUTOP_OP_IOMMU_UNMAP, size);
	return 0;
}
IOMMUTOP_FEXIT_OWNED(iommu__unmap_fast__fexit, IOMMUTOP_OP_IOMMU_UNMAP, ret == 0)

/* Returns the bytes mapped, or a negative errno. */
static __always_inline void iommu_map_sg_exit(void *ctx, struct iommutop_call call, __s64 mapped)
{
	iommutop_exit_sized(ctx, call, IOMMUTOP_OP_IOMMU_MAP, mapped <= 0,
			    mapped > 0 ? (__u64)mapped : 0);
}

/* iommu_map_sg (6.3+) and iommu_map_sg_atomic (<= 6.2): one fentry pair each. */
#define IOMMU_MAP_SG_PAIR(prefix)                                                                  \
	IOMMUTOP_SEC("fentry", prefix##__fentry)                                                   \
	int BPF_PROG(prefix##__fentry)                                                             \
	{                                                                                          \
		iommutop_enter(ctx, IOMMUTOP_OWNED_CALL(ctx), IOMMUTOP_OP_IOMMU_MAP, NULL, 0,      \
			       IOMMUTOP_ENTER_TWIN);                                               \
		return 0;                                                                          \
	}                                                                                          \
	IOMMUTOP_DECLARE_RET_AT(prefix##__fexit);                                                  \
	IOMMUTOP_SEC("fexit", prefix##__fexit)                                                     \
	int prefix##__fexit(void *ctx)                                                             \
	{                                                                                          \
		iommu_map_sg_exit(ctx, IOMMUTOP_OWNED_CALL(ctx),                                   \
				  (__s64)IOMMUTOP_FEXIT_RET(prefix##__fexit));                     \
		return 0;                                                                          \
	}

IOMMU_MAP_SG_PAIR(iommu__map_sg)
IOMMU_MAP_SG_PAIR(iommu__map_sg_atomic)

IOMMUTOP_SEC("kprobe", iommu__map_sg__kprobe)
int BPF_KPROBE(iommu__map_sg__kprobe)
{
	iommutop_enter(ctx, IOMMUTOP_OWNED_KPROBE_CALL(ctx), IOMMUTOP_OP_IOMMU_MAP, NULL, 0,
		       IOMMUTOP_ENTER_TWIN);
	return 0;
}

IOMMUTOP_SEC("kretprobe", iommu__map_sg__kretprobe)
int BPF_KRETPROBE(iommu__map_sg__kretprobe, long mapped)
{
	iommu_map_sg_exit(ctx, IOMMUTOP_KRETPROBE_CALL(ctx), mapped);
	return 0;
}

IOMMUTOP_SEC("kprobe", iommu__map__kprobe)
int BPF_KPROBE(iommu__map__kprobe, void *domain, unsigned long iova, phys_addr_t paddr, size_t size)
{
	iommu_enter(ctx, IOMMUTOP_OWNED_KPROBE_CALL(ctx), IOMMUTOP_OP_IOMMU_MAP, size);
	return 0;
}

IOMMUTOP_SEC("kprobe", iommu__map_nosync__kprobe)
int BPF_KPROBE(iommu__map_nosync__kprobe, void *domain, unsigned long iova, phys_addr_t paddr,
	       size_t size)
{
	iommutop_enter(ctx, IOMMUTOP_OWNED_KPROBE_CALL(ctx), IOMMUTOP_OP_IOMMU_MAP, NULL, size,
		       IOMMUTOP_ENTER_TWIN);
	return 0;
}

IOMMUTOP_SEC("kretprobe", iommu__map__kretprobe)
int BPF_KRETPROBE(iommu__map__kretprobe, int err)
{
	iommutop_exit(ctx, IOMMUTOP_KRETPROBE_CALL(ctx), IOMMUTOP_OP_IOMMU_MAP, err != 0);
	return 0;
}

IOMMUTOP_SEC("kprobe", iommu__unmap__kprobe)
int BPF_KPROBE(iommu__unmap__kprobe, void *domain, unsigned long iova, size_t size)
{
	iommu_enter(ctx, IOMMUTOP_OWNED_KPROBE_CALL(ctx), IOMMUTOP_OP_IOMMU_UNMAP, size);
	return 0;
}

IOMMUTOP_SEC("kretprobe", iommu__unmap__kretprobe)
int BPF_KRETPROBE(iommu__unmap__kretprobe, size_t unmapped)
{
	iommutop_exit(ctx, IOMMUTOP_KRETPROBE_CALL(ctx), IOMMUTOP_OP_IOMMU_UNMAP, unmapped == 0);
	return 0;
}

/*
 * Before 5.11, VT-d had DMA ops of its own (intel_map_page, intel_map_sg, intel_unmap) that fill
 * and clear page tables without iommu_map or iommu_unmap; the same point is hooked where they do:
 *   static int __domain_mapping(struct dmar_domain *, unsigned long iov_pfn,
 *                               struct scatterlist *sg, unsigned long phys_pfn,
 *                               unsigned long nr_pages, int prot)
 *   static struct page *domain_unmap(struct dmar_domain *, unsigned long start_pfn,
 *                                    unsigned long last_pfn)   (returns pages to free, not errors)
 * VT-d pages are 4 KiB. The loader attaches them only on kernels that have intel_map_page. There,
 * iommu_map and iommu_unmap (VFIO) reach them through intel_iommu_map/unmap: twins, counted once.
 */
#define VTD_PAGE_SHIFT 12

IOMMUTOP_SEC("fentry", iommu__intel_domain_mapping__fentry)
int BPF_PROG(iommu__intel_domain_mapping__fentry, void *domain, unsigned long iov_pfn, void *sg,
	     unsigned long phys_pfn, unsigned long nr_pages)
{
	iommutop_enter(ctx, IOMMUTOP_OWNED_CALL(ctx), IOMMUTOP_OP_IOMMU_MAP, NULL,
		       nr_pages << VTD_PAGE_SHIFT, IOMMUTOP_ENTER_TWIN);
	return 0;
}
IOMMUTOP_FEXIT_OWNED(iommu__intel_domain_mapping__fexit, IOMMUTOP_OP_IOMMU_MAP, (int)ret != 0)

IOMMUTOP_SEC("fentry", iommu__intel_domain_unmap__fentry)
int BPF_PROG(iommu__intel_domain_unmap__fentry, void *domain, unsigned long start_pfn,
	     unsigned long last_pfn)
{
	__u64 pages = last_pfn >= start_pfn ? last_pfn - start_pfn + 1 : 0;

	iommutop_enter(ctx, IOMMUTOP_OWNED_CALL(ctx), IOMMUTOP_OP_IOMMU_UNMAP, NULL,
		       pages << VTD_PAGE_SHIFT, IOMMUTOP_ENTER_TWIN);
	return 0;
}
IOMMUTOP_FEXIT_OWNED(iommu__intel_domain_unmap__fexit, IOMMUTOP_OP_IOMMU_UNMAP, 0)

IOMMUTOP_SEC("kprobe", iommu__intel_domain_mapping__kprobe)
int BPF_KPROBE(iommu__intel_domain_mapping__kprobe, void *domain, unsigned long iov_pfn, void *sg,
	       unsigned long phys_pfn, unsigned long nr_pages)
{
	iommutop_enter(ctx, IOMMUTOP_OWNED_KPROBE_CALL(ctx), IOMMUTOP_OP_IOMMU_MAP, NULL,
		       nr_pages << VTD_PAGE_SHIFT, IOMMUTOP_ENTER_TWIN);
	return 0;
}

IOMMUTOP_SEC("kprobe", iommu__intel_domain_unmap__kprobe)
int BPF_KPROBE(iommu__intel_domain_unmap__kprobe, void *domain, unsigned long start_pfn,
	       unsigned long last_pfn)
{
	__u64 pages = last_pfn >= start_pfn ? last_pfn - start_pfn + 1 : 0;

	iommutop_enter(ctx, IOMMUTOP_OWNED_KPROBE_CALL(ctx), IOMMUTOP_OP_IOMMU_UNMAP, NULL,
		       pages << VTD_PAGE_SHIFT, IOMMUTOP_ENTER_TWIN);
	return 0;
}

IOMMUTOP_SEC("kretprobe", iommu__intel_domain_unmap__kretprobe)
int BPF_KRETPROBE(iommu__intel_domain_unmap__kretprobe)
{
	iommutop_exit(ctx, IOMMUTOP_KRETPROBE_CALL(ctx), IOMMUTOP_OP_IOMMU_UNMAP, 0);
	return 0;
}

IOMMUTOP_SEC("tp_btf", iommu__map__tp)
int BPF_PROG(iommu__map__tp, unsigned long iova, phys_addr_t paddr, size_t size)
{
	iommu_count(ctx, IOMMUTOP_OP_IOMMU_MAP, size);
	return 0;
}

IOMMUTOP_SEC("tp_btf", iommu__unmap__tp)
int BPF_PROG(iommu__unmap__tp, unsigned long iova, size_t size, size_t unmapped_size)
{
	iommu_count(ctx, IOMMUTOP_OP_IOMMU_UNMAP, unmapped_size);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
