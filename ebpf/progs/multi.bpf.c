// SPDX-License-Identifier: GPL-2.0
/*
 * Multi-function programs: one entry and one exit program for every function of a family, where
 * the kernel links one program to many functions (BPF_TRACE_FENTRY_MULTI and
 * BPF_TRACE_FEXIT_MULTI, 7.x). The verifier walks a program once, whatever the number of
 * functions it serves, where the per-function fentry and fexit programs of the DMA, IOMMU, IOVA
 * and IOTLB points are each verified on their own (docs/measurements.md). Each function is told
 * apart by the cookie its link gives it (abi.h, IOMMUTOP_MULTI_*), made by user space from the same
 * table that names the per-function programs (loader/src/links/multi_shapes.rs).
 *
 * Such a program is loaded for no function in particular: its arguments are plain numbers, read
 * with bpf_get_func_arg, and what they point at is cast to its type (bpf_rdonly_cast, see
 * cast.bpf.h) and loaded; its return value is read with bpf_get_func_ret. A call is known, as an
 * fentry's, by its arguments' place on the trampoline's stack, which its entry and its exit program
 * both see.
 *
 * Three families: DMA API calls, which open a frame keyed by their device (argument 0), and
 * calls on an IOMMU-side object (page tables, IOVA, IOTLB), which inherit the key of the call
 * they are nested in, on the side that makes a mapping and on the side that takes it down. Calls
 * known by an object both their ends are passed (dma_iova_try_alloc to dma_iova_sync) and the
 * flush-queue timer keep their per-function programs.
 */
/* What their arguments point at is read through bpf_rdonly_cast (cast.bpf.h). */
#define IOMMUTOP_CAST_READS
#include "common.bpf.h"
#include "sizes.bpf.h"

#define MULTI_BYTE(cookie, shift) ((__u32)((cookie) >> (shift)) & 0xff)
#define MULTI_LOW(byte) ((byte)&0xf)
#define MULTI_ARG(byte) ((byte) >> IOMMUTOP_MULTI_ARG_SHIFT)

/* Argument n of the call, 0 past the function's last. */
static __always_inline __u64 multi_arg(void *ctx, __u32 n)
{
	__u64 value = 0;

	bpf_get_func_arg(ctx, n, &value);
	return value;
}

static __always_inline __u32 multi_op(__u64 cookie)
{
	return MULTI_BYTE(cookie, IOMMUTOP_MULTI_OP_SHIFT);
}

/* All ones where byte is value, else 0, without a branch (x - 1 wraps for x = 0 only): where an
 * exit's rule picks between a value and a constant, a branch made the verifier walk the rest of
 * the exit once for each (docs/measurements.md). */
static __always_inline __u64 multi_mask(__u64 byte, __u64 value)
{
	return -(((byte ^ value) - 1) >> 63);
}

/* How the call is known, as its entry reads it: by a branch on the rule, which the verifier walks
 * in fewer instructions here than the masks below (docs/measurements.md). */
static __always_inline struct iommutop_call multi_call(void *ctx, __u64 cookie)
{
	__u32 how = MULTI_BYTE(cookie, IOMMUTOP_MULTI_CALL_SHIFT);
	struct iommutop_call call = IOMMUTOP_FENTRY_CALL(ctx);

	if (MULTI_LOW(how) == IOMMUTOP_MULTI_CALL_TAGGED)
		call.tag = multi_arg(ctx, MULTI_ARG(how));
	else if (MULTI_LOW(how) == IOMMUTOP_MULTI_CALL_OWNED)
		call.owner = multi_arg(ctx, 0);
	return call;
}

/* How a DMA API call is known, as its exit reads it: its position, tagged with an argument (every
 * shape of the device family is). */
static __always_inline struct iommutop_call multi_device_call(void *ctx, __u64 cookie)
{
	__u32 how = MULTI_BYTE(cookie, IOMMUTOP_MULTI_CALL_SHIFT);
	struct iommutop_call call = IOMMUTOP_FENTRY_CALL(ctx);

	call.tag = multi_arg(ctx, MULTI_ARG(how));
	return call;
}

/* How a call on an IOMMU-side object is known, as its exit reads it: its first argument, or its
 * position alone. */
static __always_inline struct iommutop_call multi_owned_call(void *ctx, __u64 cookie)
{
	__u32 how = MULTI_BYTE(cookie, IOMMUTOP_MULTI_CALL_SHIFT);
	struct iommutop_call call = IOMMUTOP_FENTRY_CALL(ctx);

	call.owner = multi_arg(ctx, 0) & multi_mask(MULTI_LOW(how), IOMMUTOP_MULTI_CALL_OWNED);
	return call;
}

static __always_inline __u64 multi_bytes(void *ctx, __u64 cookie)
{
	__u32 what = MULTI_BYTE(cookie, IOMMUTOP_MULTI_BYTES_SHIFT);
	__u64 arg = multi_arg(ctx, MULTI_ARG(what));

	switch (MULTI_LOW(what)) {
	case IOMMUTOP_MULTI_BYTES_ARG:
		return arg;
	case IOMMUTOP_MULTI_BYTES_SG:
		return sg_bytes((struct scatterlist *)multi_arg(ctx, 1), (int)multi_arg(ctx, 2));
	case IOMMUTOP_MULTI_BYTES_SGTABLE:
		return sgtable_bytes((struct sg_table *)multi_arg(ctx, 1));
	case IOMMUTOP_MULTI_BYTES_GRANULES:
		return iova_bytes((const struct iova_domain *)multi_arg(ctx, 0), arg);
	case IOMMUTOP_MULTI_BYTES_GATHER:
		return gather_bytes((struct iommu_iotlb_gather *)arg);
	}
	return 0;
}

/* The entry's flags for iommutop_enter, and its bytes: a range no IOMMU address width reaches
 * (AMD passes 2^63 - 4 KiB) is the whole domain, and not bytes. */
static __always_inline __u32 multi_enter_flags(__u64 cookie, __u64 *bytes)
{
	const __u64 full_range = 1ULL << 57;
	__u32 given = MULTI_BYTE(cookie, IOMMUTOP_MULTI_ENTER_SHIFT);
	__u32 flags = 0;

	if (given & IOMMUTOP_MULTI_ENTER_TWIN)
		flags |= IOMMUTOP_ENTER_TWIN;
	if (given & IOMMUTOP_MULTI_ENTER_FULL)
		flags |= IOMMUTOP_ENTER_FULL;
	if ((given & IOMMUTOP_MULTI_ENTER_RANGE_MAY_BE_FULL) && *bytes >= full_range) {
		flags |= IOMMUTOP_ENTER_FULL;
		*bytes = 0;
	}
	return flags;
}

/* A DMA map's direction, from the argument its cookie names (IOMMUTOP_ENTER_DIRECTION), or 0
 * (masked, not branched on: see multi_mask). */
static __always_inline __u32 multi_direction(void *ctx, __u64 cookie)
{
	__u32 which = MULTI_BYTE(cookie, IOMMUTOP_MULTI_DIRECTION_SHIFT);

	return IOMMUTOP_ENTER_DIRECTION(multi_arg(ctx, MULTI_ARG(which))) &
	       (__u32)multi_mask(MULTI_LOW(which), IOMMUTOP_MULTI_DIRECTION_ARG);
}

static __always_inline int multi_failed(__u64 cookie, __u64 ret)
{
	switch (MULTI_BYTE(cookie, IOMMUTOP_MULTI_FAILED_SHIFT)) {
	case IOMMUTOP_MULTI_FAILED_MAPPING_ERROR:
		return ret == IOMMUTOP_DMA_MAPPING_ERROR;
	case IOMMUTOP_MULTI_FAILED_ZERO:
		return ret == 0;
	case IOMMUTOP_MULTI_FAILED_ZERO_U32:
		return (__u32)ret == 0;
	case IOMMUTOP_MULTI_FAILED_NONZERO_INT:
		return (int)ret != 0;
	case IOMMUTOP_MULTI_FAILED_NONZERO:
		return ret != 0;
	case IOMMUTOP_MULTI_FAILED_NOT_POSITIVE_BYTES:
		return (__s64)ret <= 0;
	}
	return 0;
}

static __always_inline __u64 multi_ret(void *ctx)
{
	__u64 ret = 0;

	bpf_get_func_ret(ctx, &ret);
	return ret;
}

/*
 * Each program reads the clock first: what it does before the tracker's own timestamps (its
 * cookie, its arguments, the rules they select) is then inside its run, which the call around it
 * is not charged, where a per-function program's few loads there are the calibrated dispatch's.
 */
IOMMUTOP_SEC("fentry", multi__device__fentry)
int multi__device__fentry(void *ctx)
{
	__u64 began = bpf_ktime_get_ns(), cookie = bpf_get_attach_cookie(ctx);
	struct iommutop_dev_key key = iommutop_device_key((const struct device *)multi_arg(ctx, 0));
	__u64 bytes = multi_bytes(ctx, cookie);
	__u32 flags = multi_enter_flags(cookie, &bytes) | multi_direction(ctx, cookie);

	iommutop_enter_bound(ctx, multi_call(ctx, cookie), multi_op(cookie), &key, NULL, bytes,
			     flags, began);
	return 0;
}

IOMMUTOP_SEC("fexit", multi__device__fexit)
int multi__device__fexit(void *ctx)
{
	__u64 ended = bpf_ktime_get_ns(), cookie = bpf_get_attach_cookie(ctx);

	iommutop_exit_device(ctx, multi_device_call(ctx, cookie), multi_op(cookie),
			     multi_failed(cookie, multi_ret(ctx)), IOMMUTOP_KEEP_BYTES,
			     (const struct device *)multi_arg(ctx, 0), multi_direction(ctx, cookie),
			     ended);
	return 0;
}

/* A call on an IOMMU-side object, which inherits the key of the call it is nested in. */
static __always_inline void multi_owned_entry(void *ctx)
{
	__u64 began = bpf_ktime_get_ns(), cookie = bpf_get_attach_cookie(ctx);
	__u64 bytes = multi_bytes(ctx, cookie);
	__u32 flags = multi_enter_flags(cookie, &bytes);

	iommutop_enter_bound(ctx, multi_call(ctx, cookie), multi_op(cookie), NULL, NULL, bytes,
			     flags, began);
}

/* The bytes an exit charges: what the call returned, for a call that returns the bytes it mapped
 * or an errno (IOMMUTOP_MULTI_FAILED_NOT_POSITIVE_BYTES), else IOMMUTOP_KEEP_BYTES. */
static __always_inline __u64 multi_exit_bytes(__u64 cookie, __u64 ret)
{
	__u64 returns_bytes = multi_mask(MULTI_BYTE(cookie, IOMMUTOP_MULTI_FAILED_SHIFT),
					 IOMMUTOP_MULTI_FAILED_NOT_POSITIVE_BYTES);
	/* ret where it is positive, else 0: an errno is all ones in its sign's shift. */
	__u64 mapped = ret & ~(__u64)((__s64)ret >> 63);

	return IOMMUTOP_KEEP_BYTES ^ ((IOMMUTOP_KEEP_BYTES ^ mapped) & returns_bytes);
}

static __always_inline void multi_owned_exit(void *ctx)
{
	__u64 ended = bpf_ktime_get_ns(), cookie = bpf_get_attach_cookie(ctx), ret = multi_ret(ctx);

	iommutop_exit_as(ctx, multi_owned_call(ctx, cookie), multi_op(cookie),
			 multi_failed(cookie, ret), multi_exit_bytes(cookie, ret), NULL, NULL, 0,
			 IOMMUTOP_EXIT_COUNT, ended);
}

/*
 * The IOMMU-side calls in two families of the same code, one per side: those that make a mapping
 * (page-table maps, IOVA allocation, syncs after a map), which tasks mostly make, and those that
 * take one down (unmaps, IOVA release, IOTLB invalidations), which interrupts often make. The
 * kernel runs a program once at a time on a CPU, and skips it for a call made while it runs there
 * (an interrupt's, or a preempting task's): with one family for both, an interrupt's unmap landing
 * in a task's map was skipped, and went untimed (docs/measurements.md).
 */
#define MULTI_OWNED_FAMILY(side)                                                                   \
	IOMMUTOP_SEC("fentry", multi__##side##__fentry)                                            \
	int multi__##side##__fentry(void *ctx)                                                     \
	{                                                                                          \
		multi_owned_entry(ctx);                                                            \
		return 0;                                                                          \
	}                                                                                          \
	IOMMUTOP_SEC("fexit", multi__##side##__fexit)                                              \
	int multi__##side##__fexit(void *ctx)                                                      \
	{                                                                                          \
		multi_owned_exit(ctx);                                                             \
		return 0;                                                                          \
	}

MULTI_OWNED_FAMILY(mapping)
MULTI_OWNED_FAMILY(releasing)

char LICENSE[] SEC("license") = "GPL";
