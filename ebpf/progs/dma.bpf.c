// SPDX-License-Identifier: GPL-2.0
/*
 * DMA API: map and unmap calls, and coherent allocations, with the struct device they serve. The
 * frame these calls push is what charges nested IOMMU work (IOVA, page tables, IOTLB) to the
 * device.
 *
 * Signatures (include/linux/dma-mapping.h, kernel/dma/mapping.c):
 *   dma_addr_t dma_map_page_attrs(struct device *, struct page *, size_t offset, size_t size, ...)
 *   dma_addr_t dma_map_phys(struct device *, phys_addr_t, size_t size, ...)            (6.18+)
 *   dma_addr_t dma_map_resource(struct device *, phys_addr_t, size_t size, ...)
 *   void dma_unmap_page_attrs(struct device *, dma_addr_t, size_t size, ...)
 *   void dma_unmap_phys(struct device *, dma_addr_t, size_t size, ...)                 (6.18+)
 *   void dma_unmap_resource(struct device *, dma_addr_t, size_t size, ...)
 *   unsigned int dma_map_sg_attrs(struct device *, struct scatterlist *, int nents, ...)
 *   int dma_map_sgtable(struct device *, struct sg_table *, ...): does not go through
 *     dma_map_sg_attrs (both call a static __dma_map_sg_attrs); nvme-pci maps multi-segment
 *     requests with it. dma_unmap_sgtable is an inline around dma_unmap_sg_attrs.
 *   void dma_unmap_sg_attrs(struct device *, struct scatterlist *, int nents, ...)
 *   void *dma_alloc_attrs(struct device *, size_t size, ...), struct page *dma_alloc_pages(...),
 *   struct sg_table *dma_alloc_noncontiguous(...), and their dma_free_* (struct device *, size_t
 *     size, ...): coherent buffers, their own operation (not per-I/O maps).
 * The two-step IOVA API (6.16+; the block layer maps multi-segment requests with it from 6.17):
 *   bool dma_iova_try_alloc(struct device *, struct dma_iova_state *, phys_addr_t, size_t size)
 *   int dma_iova_link(struct device *, struct dma_iova_state *, phys_addr_t, size_t offset, ...)
 *   int dma_iova_sync(struct device *, struct dma_iova_state *, size_t offset, size_t size)
 *   void dma_iova_destroy(struct device *, struct dma_iova_state *, size_t mapped_len, ...)
 *   One logical map is try_alloc (the IOVA range), a link per segment (page tables) and a sync
 *   (IOTLB). Its frame opens at try_alloc's entry and stays open until sync returns, so the
 *   links' and the sync's work is the device's and the map is timed from its first step to its
 *   last. A try_alloc that declines (the device does not translate through dma-iommu: its caller
 *   maps directly, and that map is counted) is dropped uncounted. A sync with no open frame
 *   publishes more of a range allocated long before (HMM maps page by page into one
 *   allocation): counted, untimed. dma_iova_destroy undoes one map (unlink and free).
 * Each has a fentry/fexit pair, kprobe/kretprobe programs and, where the kernel has one, a
 * tracepoint (counts only). User space attaches one tier per hook. Scatter-gather maps count the
 * bytes of their list (up to its first chain link: 128 entries).
 */
#include "common.bpf.h"
#include "sizes.bpf.h"

/* A DMA API call's identity: its position, tagged with the number argument `tag_arg` of the call
 * that changes most from one call to the next (a physical or DMA address; for a page map, the
 * offset; for lists, their length). A number, not a pointer: the verifier lets a program compare
 * pointers, not compute with them. */
#define DMA_CALL(ctx, tag_arg) IOMMUTOP_FENTRY_CALL_TAGGED(ctx, ((__u64 *)(ctx))[tag_arg])

/* kprobe: the device's key, its binding read through a helper (charge.bpf.h). flags: a map's
 * direction (IOMMUTOP_ENTER_DIRECTION), or 0. */
static __always_inline void dma_enter(void *ctx, struct iommutop_call call, __u32 op,
				      struct device *dev, __u64 bytes, __u32 flags)
{
	struct iommutop_dev_key key = iommutop_device_key(dev);

	iommutop_enter(ctx, call, op, &key, bytes, flags);
}

/* fentry: dev is typed, its binding one load into the frame (iommutop_enter_bound). */
static __always_inline void dma_enter_typed(void *ctx, struct iommutop_call call, __u32 op,
					    struct device *dev, __u64 bytes, __u32 flags)
{
	struct iommutop_dev_key key = {.id = (__u64)dev, .kind = IOMMUTOP_KEY_DEVICE};

	iommutop_enter_bound(ctx, call, op, &key, dev, bytes, flags, 0);
}

/* A call the same operation's wrapper may make (a scatter-gather map inside dma_map_sgtable, an
 * allocation inside another allocator): counted once, with its wrapper. dma_map_phys and
 * dma_unmap_phys are not such: 6.18's dma_map_page_attrs calls them, but where they exist it is
 * not hooked (the table's `unless`). */
static __always_inline void dma_enter_twin(void *ctx, struct iommutop_call call, __u32 op,
					   struct device *dev, __u64 bytes, __u32 flags)
{
	struct iommutop_dev_key key = iommutop_device_key(dev);

	iommutop_enter(ctx, call, op, &key, bytes, IOMMUTOP_ENTER_TWIN | flags);
}

static __always_inline void dma_count(void *ctx, __u32 op, struct device *dev, __u64 bytes,
				      int failed)
{
	struct iommutop_dev_key key = iommutop_device_key(dev);

	if (iommutop_left_out_here(ctx))
		return;
	iommutop_count(&key, op, 1, bytes, failed);
}

/* Scatter-gather and allocation entries may nest in a twin on the same device: counted once. */
static __always_inline void dma_enter_sg(void *ctx, struct iommutop_call call, __u32 op,
					 struct device *dev, __u64 bytes, __u32 flags)
{
	dma_enter_twin(ctx, call, op, dev, bytes, flags);
}

/* A map's direction, argument dir_arg of the call (an fentry's or fexit's). */
#define DMA_DIRECTION(ctx, dir_arg) IOMMUTOP_ENTER_DIRECTION(((__u64 *)(ctx))[dir_arg])

/* An fexit of a DMA API call: the device it was made for, from the arguments, takes the call if
 * its entry was not seen; direction (DMA_DIRECTION, or 0) is a map's. */
#define DMA_FEXIT_DIRECTED(prog, op, failed, tag_arg, direction)                                   \
	IOMMUTOP_DECLARE_RET_AT(prog);                                                             \
	IOMMUTOP_SEC("fexit", prog)                                                                \
	int BPF_PROG(prog, struct device *dev)                                                     \
	{                                                                                          \
		__u64 ret = IOMMUTOP_FEXIT_RET(prog);                                              \
		(void)ret;                                                                         \
		iommutop_exit_device(ctx, DMA_CALL(ctx, tag_arg), op, (failed),                    \
				     IOMMUTOP_KEEP_BYTES, dev, (direction), 0);                    \
		return 0;                                                                          \
	}
#define DMA_FEXIT(prog, op, failed, tag_arg) DMA_FEXIT_DIRECTED(prog, op, failed, tag_arg, 0)

/* fentry/fexit, one pair per function */
IOMMUTOP_SEC("fentry", dma__map_page__fentry)
int BPF_PROG(dma__map_page__fentry, struct device *dev, struct page *page, size_t offset,
	     size_t size)
{
	dma_enter_typed(ctx, DMA_CALL(ctx, 2), IOMMUTOP_OP_DMA_MAP, dev, size,
			DMA_DIRECTION(ctx, 4));
	return 0;
}
DMA_FEXIT_DIRECTED(dma__map_page__fexit, IOMMUTOP_OP_DMA_MAP, ret == IOMMUTOP_DMA_MAPPING_ERROR, 2,
		   DMA_DIRECTION(ctx, 4))

IOMMUTOP_SEC("fentry", dma__map_phys__fentry)
int BPF_PROG(dma__map_phys__fentry, struct device *dev, phys_addr_t phys, size_t size)
{
	dma_enter_typed(ctx, DMA_CALL(ctx, 1), IOMMUTOP_OP_DMA_MAP, dev, size,
			DMA_DIRECTION(ctx, 3));
	return 0;
}
DMA_FEXIT_DIRECTED(dma__map_phys__fexit, IOMMUTOP_OP_DMA_MAP, ret == IOMMUTOP_DMA_MAPPING_ERROR, 1,
		   DMA_DIRECTION(ctx, 3))

IOMMUTOP_SEC("fentry", dma__unmap_page__fentry)
int BPF_PROG(dma__unmap_page__fentry, struct device *dev, dma_addr_t addr, size_t size)
{
	dma_enter_typed(ctx, DMA_CALL(ctx, 1), IOMMUTOP_OP_DMA_UNMAP, dev, size, 0);
	return 0;
}
DMA_FEXIT(dma__unmap_page__fexit, IOMMUTOP_OP_DMA_UNMAP, 0, 1)

IOMMUTOP_SEC("fentry", dma__unmap_phys__fentry)
int BPF_PROG(dma__unmap_phys__fentry, struct device *dev, dma_addr_t addr, size_t size)
{
	dma_enter_typed(ctx, DMA_CALL(ctx, 1), IOMMUTOP_OP_DMA_UNMAP, dev, size, 0);
	return 0;
}
DMA_FEXIT(dma__unmap_phys__fexit, IOMMUTOP_OP_DMA_UNMAP, 0, 1)

IOMMUTOP_SEC("fentry", dma__map_sg__fentry)
int BPF_PROG(dma__map_sg__fentry, struct device *dev, struct scatterlist *sg, int nents)
{
	dma_enter_typed(ctx, DMA_CALL(ctx, 2), IOMMUTOP_OP_DMA_MAP, dev, sg_bytes(sg, nents),
			IOMMUTOP_ENTER_TWIN | DMA_DIRECTION(ctx, 3));
	return 0;
}
DMA_FEXIT_DIRECTED(dma__map_sg__fexit, IOMMUTOP_OP_DMA_MAP, (unsigned int)ret == 0, 2,
		   DMA_DIRECTION(ctx, 3))

IOMMUTOP_SEC("fentry", dma__map_sgtable__fentry)
int BPF_PROG(dma__map_sgtable__fentry, struct device *dev, struct sg_table *sgt)
{
	dma_enter_typed(ctx, DMA_CALL(ctx, 2), IOMMUTOP_OP_DMA_MAP, dev, sgtable_bytes(sgt),
			IOMMUTOP_ENTER_TWIN | DMA_DIRECTION(ctx, 2));
	return 0;
}
DMA_FEXIT_DIRECTED(dma__map_sgtable__fexit, IOMMUTOP_OP_DMA_MAP, (int)ret != 0, 2,
		   DMA_DIRECTION(ctx, 2))

IOMMUTOP_SEC("fentry", dma__unmap_sg__fentry)
int BPF_PROG(dma__unmap_sg__fentry, struct device *dev, struct scatterlist *sg, int nents)
{
	dma_enter_typed(ctx, DMA_CALL(ctx, 2), IOMMUTOP_OP_DMA_UNMAP, dev, sg_bytes(sg, nents),
			IOMMUTOP_ENTER_TWIN);
	return 0;
}
DMA_FEXIT(dma__unmap_sg__fexit, IOMMUTOP_OP_DMA_UNMAP, 0, 2)

IOMMUTOP_SEC("fentry", dma__map_resource__fentry)
int BPF_PROG(dma__map_resource__fentry, struct device *dev, phys_addr_t phys, size_t size)
{
	dma_enter_typed(ctx, DMA_CALL(ctx, 1), IOMMUTOP_OP_DMA_MAP, dev, size,
			DMA_DIRECTION(ctx, 3));
	return 0;
}
DMA_FEXIT_DIRECTED(dma__map_resource__fexit, IOMMUTOP_OP_DMA_MAP, ret == IOMMUTOP_DMA_MAPPING_ERROR,
		   1, DMA_DIRECTION(ctx, 3))

IOMMUTOP_SEC("fentry", dma__unmap_resource__fentry)
int BPF_PROG(dma__unmap_resource__fentry, struct device *dev, dma_addr_t addr, size_t size)
{
	dma_enter_typed(ctx, DMA_CALL(ctx, 1), IOMMUTOP_OP_DMA_UNMAP, dev, size, 0);
	return 0;
}
DMA_FEXIT(dma__unmap_resource__fexit, IOMMUTOP_OP_DMA_UNMAP, 0, 1)

IOMMUTOP_SEC("fentry", dma__iova_try_alloc__fentry)
int BPF_PROG(dma__iova_try_alloc__fentry, struct device *dev, void *state, phys_addr_t phys,
	     size_t size)
{
	/* The map is known by its state until dma_iova_sync returns. */
	dma_enter_typed(ctx, IOMMUTOP_SPANNING_CALL(state), IOMMUTOP_OP_DMA_MAP, dev, size,
			IOMMUTOP_ENTER_SPANNING);
	return 0;
}

/* bool: only the low byte of the return register is defined. A kretprobe has no arguments: it
 * passes IOMMUTOP_ANY_SPANNING and no device, and the innermost open spanning call is the one
 * declined. */
static __always_inline void dma_iova_try_alloc_exit(void *ctx, struct iommutop_call state,
						    __u8 allocated)
{
	if (!allocated)
		iommutop_exit_as(ctx, state, IOMMUTOP_OP_DMA_MAP, 0, 0, NULL, NULL, 0,
				 IOMMUTOP_EXIT_DISCARD, 0);
}

IOMMUTOP_DECLARE_RET_AT(dma__iova_try_alloc__fexit);
IOMMUTOP_SEC("fexit", dma__iova_try_alloc__fexit)
int BPF_PROG(dma__iova_try_alloc__fexit, struct device *dev, void *state)
{
	dma_iova_try_alloc_exit(ctx, IOMMUTOP_SPANNING_CALL(state),
				(__u8)IOMMUTOP_FEXIT_RET(dma__iova_try_alloc__fexit));
	return 0;
}

/* The map's bytes are what the sync makes visible (all that was linked). */
IOMMUTOP_DECLARE_RET_AT(dma__iova_sync__fexit);
IOMMUTOP_SEC("fexit", dma__iova_sync__fexit)
int BPF_PROG(dma__iova_sync__fexit, struct device *dev, void *state, size_t offset, size_t size)
{
	int err = (int)IOMMUTOP_FEXIT_RET(dma__iova_sync__fexit);

	iommutop_exit_as(ctx, IOMMUTOP_SPANNING_CALL(state), IOMMUTOP_OP_DMA_MAP, err != 0, size,
			 NULL, dev, 0, IOMMUTOP_EXIT_COUNT_MAY_BE_UNOPENED, 0);
	return 0;
}

IOMMUTOP_SEC("fentry", dma__iova_destroy__fentry)
int BPF_PROG(dma__iova_destroy__fentry, struct device *dev, void *state, size_t mapped_len)
{
	dma_enter_typed(ctx, DMA_CALL(ctx, 2), IOMMUTOP_OP_DMA_UNMAP, dev, mapped_len, 0);
	return 0;
}
DMA_FEXIT(dma__iova_destroy__fexit, IOMMUTOP_OP_DMA_UNMAP, 0, 2)

/* Coherent allocations: every allocator and every release starts (struct device *, size_t). */
#define DMA_ALLOC_PAIR(prefix, op, failed)                                                         \
	IOMMUTOP_SEC("fentry", prefix##__fentry)                                                   \
	int BPF_PROG(prefix##__fentry, struct device *dev, size_t size)                            \
	{                                                                                          \
		dma_enter_typed(ctx, DMA_CALL(ctx, 1), op, dev, size, IOMMUTOP_ENTER_TWIN);        \
		return 0;                                                                          \
	}                                                                                          \
	DMA_FEXIT(prefix##__fexit, op, failed, 1)

DMA_ALLOC_PAIR(dma__alloc_attrs, IOMMUTOP_OP_DMA_ALLOC, ret == 0)
DMA_ALLOC_PAIR(dma__alloc_pages, IOMMUTOP_OP_DMA_ALLOC, ret == 0)
DMA_ALLOC_PAIR(dma__alloc_noncontig, IOMMUTOP_OP_DMA_ALLOC, ret == 0)
DMA_ALLOC_PAIR(dma__free_attrs, IOMMUTOP_OP_DMA_FREE, 0)
DMA_ALLOC_PAIR(dma__free_pages, IOMMUTOP_OP_DMA_FREE, 0)
DMA_ALLOC_PAIR(dma__free_noncontig, IOMMUTOP_OP_DMA_FREE, 0)

/* kprobes, one program per shape */
IOMMUTOP_SEC("kprobe", dma__map_page__kprobe)
int BPF_KPROBE(dma__map_page__kprobe, struct device *dev, struct page *page, size_t offset,
	       size_t size)
{
	dma_enter(ctx, IOMMUTOP_KPROBE_CALL(ctx), IOMMUTOP_OP_DMA_MAP, dev, size,
		  IOMMUTOP_ENTER_DIRECTION(PT_REGS_PARM5(ctx)));
	return 0;
}

IOMMUTOP_SEC("kprobe", dma__map_phys__kprobe)
int BPF_KPROBE(dma__map_phys__kprobe, struct device *dev, phys_addr_t phys, size_t size)
{
	dma_enter(ctx, IOMMUTOP_KPROBE_CALL(ctx), IOMMUTOP_OP_DMA_MAP, dev, size,
		  IOMMUTOP_ENTER_DIRECTION(PT_REGS_PARM4(ctx)));
	return 0;
}

IOMMUTOP_SEC("kretprobe", dma__map__kretprobe)
int BPF_KRETPROBE(dma__map__kretprobe, dma_addr_t addr)
{
	iommutop_exit(ctx, IOMMUTOP_KRETPROBE_CALL(ctx), IOMMUTOP_OP_DMA_MAP,
		      addr == IOMMUTOP_DMA_MAPPING_ERROR);
	return 0;
}

IOMMUTOP_SEC("kprobe", dma__unmap__kprobe)
int BPF_KPROBE(dma__unmap__kprobe, struct device *dev, dma_addr_t addr, size_t size)
{
	dma_enter(ctx, IOMMUTOP_KPROBE_CALL(ctx), IOMMUTOP_OP_DMA_UNMAP, dev, size, 0);
	return 0;
}

IOMMUTOP_SEC("kprobe", dma__unmap_phys__kprobe)
int BPF_KPROBE(dma__unmap_phys__kprobe, struct device *dev, dma_addr_t addr, size_t size)
{
	dma_enter(ctx, IOMMUTOP_KPROBE_CALL(ctx), IOMMUTOP_OP_DMA_UNMAP, dev, size, 0);
	return 0;
}

IOMMUTOP_SEC("kretprobe", dma__unmap__kretprobe)
int BPF_KRETPROBE(dma__unmap__kretprobe)
{
	iommutop_exit(ctx, IOMMUTOP_KRETPROBE_CALL(ctx), IOMMUTOP_OP_DMA_UNMAP, 0);
	return 0;
}

IOMMUTOP_SEC("kprobe", dma__map_sg__kprobe)
int BPF_KPROBE(dma__map_sg__kprobe, struct device *dev, struct scatterlist *sg, int nents)
{
	dma_enter_sg(ctx, IOMMUTOP_KPROBE_CALL(ctx), IOMMUTOP_OP_DMA_MAP, dev, sg_bytes(sg, nents),
		     IOMMUTOP_ENTER_DIRECTION(PT_REGS_PARM4(ctx)));
	return 0;
}

IOMMUTOP_SEC("kretprobe", dma__map_sg__kretprobe)
int BPF_KRETPROBE(dma__map_sg__kretprobe, unsigned int mapped)
{
	iommutop_exit(ctx, IOMMUTOP_KRETPROBE_CALL(ctx), IOMMUTOP_OP_DMA_MAP, mapped == 0);
	return 0;
}

IOMMUTOP_SEC("kprobe", dma__map_sgtable__kprobe)
int BPF_KPROBE(dma__map_sgtable__kprobe, struct device *dev, struct sg_table *sgt)
{
	dma_enter_sg(ctx, IOMMUTOP_KPROBE_CALL(ctx), IOMMUTOP_OP_DMA_MAP, dev, sgtable_bytes(sgt),
		     IOMMUTOP_ENTER_DIRECTION(PT_REGS_PARM3(ctx)));
	return 0;
}

IOMMUTOP_SEC("kretprobe", dma__map_sgtable__kretprobe)
int BPF_KRETPROBE(dma__map_sgtable__kretprobe, int err)
{
	iommutop_exit(ctx, IOMMUTOP_KRETPROBE_CALL(ctx), IOMMUTOP_OP_DMA_MAP, err != 0);
	return 0;
}

IOMMUTOP_SEC("kprobe", dma__unmap_sg__kprobe)
int BPF_KPROBE(dma__unmap_sg__kprobe, struct device *dev, struct scatterlist *sg, int nents)
{
	dma_enter_sg(ctx, IOMMUTOP_KPROBE_CALL(ctx), IOMMUTOP_OP_DMA_UNMAP, dev,
		     sg_bytes(sg, nents), 0);
	return 0;
}

IOMMUTOP_SEC("kprobe", dma__map_resource__kprobe)
int BPF_KPROBE(dma__map_resource__kprobe, struct device *dev, phys_addr_t phys, size_t size)
{
	dma_enter(ctx, IOMMUTOP_KPROBE_CALL(ctx), IOMMUTOP_OP_DMA_MAP, dev, size,
		  IOMMUTOP_ENTER_DIRECTION(PT_REGS_PARM4(ctx)));
	return 0;
}

IOMMUTOP_SEC("kprobe", dma__iova_try_alloc__kprobe)
int BPF_KPROBE(dma__iova_try_alloc__kprobe, struct device *dev, void *state, phys_addr_t phys,
	       size_t size)
{
	struct iommutop_dev_key key = iommutop_device_key(dev);

	iommutop_enter(ctx, IOMMUTOP_SPANNING_CALL(state), IOMMUTOP_OP_DMA_MAP, &key, size,
		       IOMMUTOP_ENTER_SPANNING);
	return 0;
}

IOMMUTOP_SEC("kretprobe", dma__iova_try_alloc__kretprobe)
int BPF_KRETPROBE(dma__iova_try_alloc__kretprobe, unsigned long allocated)
{
	dma_iova_try_alloc_exit(ctx, IOMMUTOP_ANY_SPANNING, (__u8)allocated);
	return 0;
}

IOMMUTOP_SEC("kretprobe", dma__iova_sync__kretprobe)
int BPF_KRETPROBE(dma__iova_sync__kretprobe, int err)
{
	iommutop_exit_as(ctx, IOMMUTOP_ANY_SPANNING, IOMMUTOP_OP_DMA_MAP, err != 0,
			 IOMMUTOP_KEEP_BYTES, NULL, NULL, 0, IOMMUTOP_EXIT_COUNT_MAY_BE_UNOPENED,
			 0);
	return 0;
}

IOMMUTOP_SEC("kprobe", dma__iova_destroy__kprobe)
int BPF_KPROBE(dma__iova_destroy__kprobe, struct device *dev, void *state, size_t mapped_len)
{
	dma_enter(ctx, IOMMUTOP_KPROBE_CALL(ctx), IOMMUTOP_OP_DMA_UNMAP, dev, mapped_len, 0);
	return 0;
}

IOMMUTOP_SEC("kprobe", dma__alloc__kprobe)
int BPF_KPROBE(dma__alloc__kprobe, struct device *dev, size_t size)
{
	dma_enter_sg(ctx, IOMMUTOP_KPROBE_CALL(ctx), IOMMUTOP_OP_DMA_ALLOC, dev, size, 0);
	return 0;
}

IOMMUTOP_SEC("kretprobe", dma__alloc__kretprobe)
int BPF_KRETPROBE(dma__alloc__kretprobe, void *allocated)
{
	iommutop_exit(ctx, IOMMUTOP_KRETPROBE_CALL(ctx), IOMMUTOP_OP_DMA_ALLOC, allocated == NULL);
	return 0;
}

IOMMUTOP_SEC("kprobe", dma__free__kprobe)
int BPF_KPROBE(dma__free__kprobe, struct device *dev, size_t size)
{
	dma_enter_sg(ctx, IOMMUTOP_KPROBE_CALL(ctx), IOMMUTOP_OP_DMA_FREE, dev, size, 0);
	return 0;
}

IOMMUTOP_SEC("kretprobe", dma__free__kretprobe)
int BPF_KRETPROBE(dma__free__kretprobe)
{
	iommutop_exit(ctx, IOMMUTOP_KRETPROBE_CALL(ctx), IOMMUTOP_OP_DMA_FREE, 0);
	return 0;
}

/* Tracepoints, counts only. dma:dma_map_page (6.12-6.17) and dma:dma_map_phys (6.18+) share
 * (dev, phys, dma_addr, size, dir, attrs); their unmap events share (dev, addr, size, ...). */
IOMMUTOP_SEC("tp_btf", dma__map__tp)
int BPF_PROG(dma__map__tp, struct device *dev, phys_addr_t phys, dma_addr_t dma_addr, size_t size)
{
	dma_count(ctx, IOMMUTOP_OP_DMA_MAP, dev, size, dma_addr == IOMMUTOP_DMA_MAPPING_ERROR);
	return 0;
}

IOMMUTOP_SEC("tp_btf", dma__unmap__tp)
int BPF_PROG(dma__unmap__tp, struct device *dev, dma_addr_t addr, size_t size)
{
	dma_count(ctx, IOMMUTOP_OP_DMA_UNMAP, dev, size, 0);
	return 0;
}

IOMMUTOP_SEC("tp_btf", dma__map_sg__tp)
int BPF_PROG(dma__map_sg__tp, struct device *dev, struct scatterlist *sgl, int nents, int ents)
{
	dma_count(ctx, IOMMUTOP_OP_DMA_MAP, dev, 0, ents <= 0);
	return 0;
}

IOMMUTOP_SEC("tp_btf", dma__unmap_sg__tp)
int BPF_PROG(dma__unmap_sg__tp, struct device *dev)
{
	dma_count(ctx, IOMMUTOP_OP_DMA_UNMAP, dev, 0, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
