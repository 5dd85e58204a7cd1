/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Floor 1, maps and counters.
 *
 * The bytes a call's arguments describe, for programs whose arguments are plain numbers (kprobes,
 * multi-function programs), each field read as cast.bpf.h says. fentry programs, whose arguments
 * are typed, read the same fields with plain loads where they can.
 */
#ifndef IOMMUTOP_SIZES_BPF_H
#define IOMMUTOP_SIZES_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include "cast.bpf.h"

/* include/linux/scatterlist.h: the low bits of page_link. */
#define IOMMUTOP_SG_CHAIN 0x01UL
#define IOMMUTOP_SG_END 0x02UL
#define IOMMUTOP_MAX_SG_WALK 128

/*
 * Bytes of a scatter-gather list of nents entries. A chained list (over 128 entries, the most one
 * page holds) is summed up to its first link: following links makes the verifier explore every
 * mix of chained and plain entries, far too long a walk per program.
 */
static __always_inline __u64 sg_bytes(struct scatterlist *first, int nents)
{
	unsigned long base = (unsigned long)first, link;
	__u64 bytes = 0;
	int i;

	for (i = 0; i < IOMMUTOP_MAX_SG_WALK; i++) {
		struct scatterlist *sg =
		    (struct scatterlist *)(base + i * bpf_core_type_size(struct scatterlist));

		if (i >= nents)
			break;
		link = IOMMUTOP_FIELD(sg, SCATTERLIST, page_link);
		if (link & IOMMUTOP_SG_CHAIN)
			break;
		bytes += IOMMUTOP_FIELD(sg, SCATTERLIST, length);
		if (link & IOMMUTOP_SG_END)
			break;
	}
	return bytes;
}

static __always_inline __u64 sgtable_bytes(struct sg_table *sgt)
{
	return sg_bytes(IOMMUTOP_FIELD(sgt, SG_TABLE, sgl),
			IOMMUTOP_FIELD(sgt, SG_TABLE, orig_nents));
}

/* IOVA sizes are in granules of their domain. */
static __always_inline __u64 iova_bytes(const struct iova_domain *iovad, unsigned long granules)
{
	return (__u64)granules * IOMMUTOP_FIELD(iovad, IOVA_DOMAIN, granule);
}

/* The bytes of a gathered range [start, end] (end is inclusive; an empty gather has end 0). */
static __always_inline __u64 range_bytes(unsigned long start, unsigned long end)
{
	return end >= start ? end - start + 1 : 0;
}

static __always_inline __u64 gather_bytes(struct iommu_iotlb_gather *gather)
{
	return range_bytes(IOMMUTOP_FIELD(gather, IOTLB_GATHER, start),
			   IOMMUTOP_FIELD(gather, IOTLB_GATHER, end));
}

#endif
