// SPDX-License-Identifier: GPL-2.0
/*
 * DMA API: map and unmap calls with the struct device they serve. The frame these calls push is
 * what charges nested IOMMU work (IOVA, page tables, IOTLB) to the device.
 *
 * Signatures (include/linux/dma-mapping.h, kernel/dma/mapping.c):
 *   dma_addr_t dma_map_page_attrs(struct device *, struct page *, size_t offset, size_t size, ...)
 *   dma_addr_t dma_map_phys(struct device *, phys_addr_t, size_t size, ...)            (6.18+)
 *   void dma_unmap_page_attrs(struct device *, dma_addr_t, size_t size, ...)
 *   void dma_unmap_phys(struct device *, dma_addr_t, size_t size, ...)                 (6.18+)
 *   unsigned int dma_map_sg_attrs(struct device *, struct scatterlist *, int nents, ...)
 *   void dma_unmap_sg_attrs(struct device *, struct scatterlist *, int nents, ...)
 * Each has a fentry/fexit pair, kprobe/kretprobe programs and, where the kernel has one, a
 * tracepoint (counts only). User space attaches one tier per hook. Scatter-gather bytes are not
 * summed over the list: they count as 0.
 */
#include "common.bpf.h"

static __always_inline void dma_enter(void *ctx, __u32 op, struct device *dev, __u64 bytes)
{
	struct iommutop_dev_key key = iommutop_device_key(dev);

	iommutop_enter(ctx, op, &key, bytes, 0);
}

/* dma_map_phys/dma_unmap_phys: also called by dma_map_page_attrs/dma_unmap_page_attrs (6.18+). */
static __always_inline void dma_enter_twin(void *ctx, __u32 op, struct device *dev, __u64 bytes)
{
	struct iommutop_dev_key key = iommutop_device_key(dev);

	iommutop_enter(ctx, op, &key, bytes, IOMMUTOP_ENTER_TWIN);
}

static __always_inline void dma_count(__u32 op, struct device *dev, __u64 bytes, int failed)
{
	struct iommutop_dev_key key = iommutop_device_key(dev);

	iommutop_count(&key, op, 1, bytes, failed, dev);
}

/* fentry/fexit, one pair per function */
SEC("fentry")
int BPF_PROG(dma__map_page__fentry, struct device *dev, struct page *page, size_t offset,
	     size_t size)
{
	dma_enter(ctx, IOMMUTOP_OP_DMA_MAP, dev, size);
	return 0;
}
IOMMUTOP_FEXIT(dma__map_page__fexit, IOMMUTOP_OP_DMA_MAP, ret == IOMMUTOP_DMA_MAPPING_ERROR)

SEC("fentry")
int BPF_PROG(dma__map_phys__fentry, struct device *dev, phys_addr_t phys, size_t size)
{
	dma_enter_twin(ctx, IOMMUTOP_OP_DMA_MAP, dev, size);
	return 0;
}
IOMMUTOP_FEXIT(dma__map_phys__fexit, IOMMUTOP_OP_DMA_MAP, ret == IOMMUTOP_DMA_MAPPING_ERROR)

SEC("fentry")
int BPF_PROG(dma__unmap_page__fentry, struct device *dev, dma_addr_t addr, size_t size)
{
	dma_enter(ctx, IOMMUTOP_OP_DMA_UNMAP, dev, size);
	return 0;
}
IOMMUTOP_FEXIT(dma__unmap_page__fexit, IOMMUTOP_OP_DMA_UNMAP, 0)

SEC("fentry")
int BPF_PROG(dma__unmap_phys__fentry, struct device *dev, dma_addr_t addr, size_t size)
{
	dma_enter_twin(ctx, IOMMUTOP_OP_DMA_UNMAP, dev, size);
	return 0;
}
IOMMUTOP_FEXIT(dma__unmap_phys__fexit, IOMMUTOP_OP_DMA_UNMAP, 0)

SEC("fentry")
int BPF_PROG(dma__map_sg__fentry, struct device *dev)
{
	dma_enter(ctx, IOMMUTOP_OP_DMA_MAP, dev, 0);
	return 0;
}
IOMMUTOP_FEXIT(dma__map_sg__fexit, IOMMUTOP_OP_DMA_MAP, ret == 0)

SEC("fentry")
int BPF_PROG(dma__unmap_sg__fentry, struct device *dev)
{
	dma_enter(ctx, IOMMUTOP_OP_DMA_UNMAP, dev, 0);
	return 0;
}
IOMMUTOP_FEXIT(dma__unmap_sg__fexit, IOMMUTOP_OP_DMA_UNMAP, 0)

/* kprobes, one program per shape */
SEC("kprobe")
int BPF_KPROBE(dma__map_page__kprobe, struct device *dev, struct page *page, size_t offset,
	       size_t size)
{
	dma_enter(ctx, IOMMUTOP_OP_DMA_MAP, dev, size);
	return 0;
}

SEC("kprobe")
int BPF_KPROBE(dma__map_phys__kprobe, struct device *dev, phys_addr_t phys, size_t size)
{
	dma_enter_twin(ctx, IOMMUTOP_OP_DMA_MAP, dev, size);
	return 0;
}

SEC("kretprobe")
int BPF_KRETPROBE(dma__map__kretprobe, dma_addr_t addr)
{
	iommutop_exit(IOMMUTOP_OP_DMA_MAP, addr == IOMMUTOP_DMA_MAPPING_ERROR);
	return 0;
}

SEC("kprobe")
int BPF_KPROBE(dma__unmap__kprobe, struct device *dev, dma_addr_t addr, size_t size)
{
	dma_enter(ctx, IOMMUTOP_OP_DMA_UNMAP, dev, size);
	return 0;
}

SEC("kprobe")
int BPF_KPROBE(dma__unmap_phys__kprobe, struct device *dev, dma_addr_t addr, size_t size)
{
	dma_enter_twin(ctx, IOMMUTOP_OP_DMA_UNMAP, dev, size);
	return 0;
}

SEC("kretprobe")
int BPF_KRETPROBE(dma__unmap__kretprobe)
{
	iommutop_exit(IOMMUTOP_OP_DMA_UNMAP, 0);
	return 0;
}

SEC("kprobe")
int BPF_KPROBE(dma__map_sg__kprobe, struct device *dev)
{
	dma_enter(ctx, IOMMUTOP_OP_DMA_MAP, dev, 0);
	return 0;
}

SEC("kretprobe")
int BPF_KRETPROBE(dma__map_sg__kretprobe, unsigned int mapped)
{
	iommutop_exit(IOMMUTOP_OP_DMA_MAP, mapped == 0);
	return 0;
}

SEC("kprobe")
int BPF_KPROBE(dma__unmap_sg__kprobe, struct device *dev)
{
	dma_enter(ctx, IOMMUTOP_OP_DMA_UNMAP, dev, 0);
	return 0;
}

/* Tracepoints, counts only. dma:dma_map_page (6.12-6.17) and dma:dma_map_phys (6.18+) share
 * (dev, phys, dma_addr, size, dir, attrs); their unmap events share (dev, addr, size, ...). */
SEC("tp_btf")
int BPF_PROG(dma__map__tp, struct device *dev, phys_addr_t phys, dma_addr_t dma_addr, size_t size)
{
	dma_count(IOMMUTOP_OP_DMA_MAP, dev, size, dma_addr == IOMMUTOP_DMA_MAPPING_ERROR);
	return 0;
}

SEC("tp_btf")
int BPF_PROG(dma__unmap__tp, struct device *dev, dma_addr_t addr, size_t size)
{
	dma_count(IOMMUTOP_OP_DMA_UNMAP, dev, size, 0);
	return 0;
}

SEC("tp_btf")
int BPF_PROG(dma__map_sg__tp, struct device *dev, struct scatterlist *sgl, int nents, int ents)
{
	dma_count(IOMMUTOP_OP_DMA_MAP, dev, 0, ents <= 0);
	return 0;
}

SEC("tp_btf")
int BPF_PROG(dma__unmap_sg__tp, struct device *dev)
{
	dma_count(IOMMUTOP_OP_DMA_UNMAP, dev, 0, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
