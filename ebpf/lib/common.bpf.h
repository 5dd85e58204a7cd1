/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Floor 4, the tracker: what every probe family includes, in the order the headers need. */
#ifndef IOMMUTOP_COMMON_BPF_H
#define IOMMUTOP_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

/* Every program in an ELF section of its own, `kind/program`: aya reads the kind from the part
 * before the slash, and copies a section's whole line information once for each program in it
 * (programs that shared one section made relocating the object slower: docs/measurements.md). */
#define IOMMUTOP_SEC(kind, prog) SEC(kind "/" #prog)

#include "iommutop/abi.h"
#include "track.bpf.h"
#include "exit.bpf.h"
#include "calls.bpf.h"

/* include/linux/dma-mapping.h: the dma_addr_t a failed map returns. */
#define IOMMUTOP_DMA_MAPPING_ERROR (~(dma_addr_t)0)

/*
 * fentry/fexit programs are bound to one kernel function when loaded, so every hooked function
 * needs its own pair; kprobes are attached by name and one program serves functions of the same
 * shape.
 *
 * An fexit program finds its function's return value after the arguments, at ctx[arity]. The
 * arity differs between kernels (iommu_map gained a gfp argument in 6.3), so every fexit program
 * has a knob, <program>__ret_at, that user space sets before load to the function's parameter
 * count in the running kernel's BTF, or IOMMUTOP_RET_VOID (abi.h) for a function that returns
 * nothing (no value to read: the verifier refuses the slot). The knob is a constant to the
 * verifier, which walks only the load it selects; 0 (not known) reads the value with
 * bpf_get_func_ret(), which kernels before 5.17 lack: there the knob is always set, and the
 * helper's branch never walked.
 */
#define IOMMUTOP_RET_AT(prog) prog##__ret_at
#define IOMMUTOP_DECLARE_RET_AT(prog) const volatile __u32 IOMMUTOP_RET_AT(prog) = 0

/* One case of iommutop_fexit_ret: a load at a constant offset. The empty asm differs from case to
 * case, so that clang cannot merge the loads into one at a computed offset (the verifier refuses
 * a context pointer moved by a variable). */
#define IOMMUTOP_RET_CASE(n)                                                                       \
	case n:                                                                                    \
		ret = args[n];                                                                     \
		asm volatile("/* ret at " #n " */" : "+r"(ret));                                   \
		return ret

static __always_inline __u64 iommutop_fexit_ret(void *ctx, __u32 ret_at)
{
	__u64 *args = ctx, ret = 0;

	switch (ret_at) {
		IOMMUTOP_RET_CASE(1);
		IOMMUTOP_RET_CASE(2);
		IOMMUTOP_RET_CASE(3);
		IOMMUTOP_RET_CASE(4);
		IOMMUTOP_RET_CASE(5);
		IOMMUTOP_RET_CASE(6);
		IOMMUTOP_RET_CASE(7);
		IOMMUTOP_RET_CASE(8);
	case IOMMUTOP_RET_VOID:
		return 0;
	}
	bpf_get_func_ret(ctx, &ret);
	return ret;
}

/* The return value in an fexit program declared with IOMMUTOP_DECLARE_RET_AT(prog). */
#define IOMMUTOP_FEXIT_RET(prog) iommutop_fexit_ret(ctx, IOMMUTOP_RET_AT(prog))

/* An fexit program that closes the frame its fentry opened, the call known by `call_of(ctx)`;
 * `failed` may use `ret`. */
#define IOMMUTOP_FEXIT_OF(prog, op, failed, call_of)                                               \
	IOMMUTOP_DECLARE_RET_AT(prog);                                                             \
	IOMMUTOP_SEC("fexit", prog)                                                                \
	int prog(void *ctx)                                                                        \
	{                                                                                          \
		__u64 ret = IOMMUTOP_FEXIT_RET(prog);                                              \
		(void)ret;                                                                         \
		iommutop_exit(ctx, call_of(ctx), op, (failed));                                    \
		return 0;                                                                          \
	}

#define IOMMUTOP_FEXIT(prog, op, failed) IOMMUTOP_FEXIT_OF(prog, op, failed, IOMMUTOP_FENTRY_CALL)
/* For a call on an IOMMU-side object, its first argument (IOMMUTOP_OWNED_CALL). */
#define IOMMUTOP_FEXIT_OWNED(prog, op, failed)                                                     \
	IOMMUTOP_FEXIT_OF(prog, op, failed, IOMMUTOP_OWNED_CALL)

#endif
