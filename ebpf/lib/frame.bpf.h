/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Floor 2, stacks and frames.
 *
 * A call's identity and its frame: what an entry program pushes on its context's stack of calls
 * in flight, and what the exit program of the same call finds again (docs/tracker.md).
 */
#ifndef IOMMUTOP_FRAME_BPF_H
#define IOMMUTOP_FRAME_BPF_H

#include <bpf/bpf_core_read.h>
#include "maps.bpf.h"

/* Frame indices are masked with this so that the verifier sees them bounded whatever clang does
 * with the range checks before them. */
#define IOMMUTOP_FRAME_MASK (IOMMUTOP_MAX_NESTING - 1)
_Static_assert((IOMMUTOP_MAX_NESTING & IOMMUTOP_FRAME_MASK) == 0, "nesting must be a power of two");

/* How far apart two calls on one stack can be: a kernel stack's size (THREAD_SIZE; x86-64's
 * IRQ_STACK_SIZE is the same). A frame further from a call entering lies on another stack (an
 * NMI's, say): where it lies says nothing of whether it returned. 16 KiB on Debian's kernels;
 * user space sets it for the kernel it loads on (KASAN doubles it; arm64 takes at least a page:
 * loader/src/kernel/kallsyms.rs). */
const volatile __u64 iommutop_kernel_stack_size __weak = 16 * 1024;

/* A call's identity: where it sits (at), and, where both its programs see its arguments, a tag
 * made of one that changes from call to call (a DMA address, a physical address). Two calls made
 * one after the other from the same place sit at the same position; if the kernel skipped the
 * exit program of the first and the entry program of the second, the tag keeps the second's exit
 * from closing the first's frame (one count for two calls, and the time between them). */
struct iommutop_call {
	__u64 at;
	__u64 tag;
	/* The IOMMU-side object the call works on (its iommu_domain, IOVA domain or VT-d domain),
	 * which names the device the call serves when no DMA API call of it was seen around it. */
	__u64 owner;
	/* The function called (its address, as the entry program sees it; 0 where the kernel cannot
	 * say): a twin is called by another function than itself (iommutop_called_by). */
	__u64 func;
};

/* The function a trampoline program runs for (5.15+; 0 before, where the verifier never walks the
 * call). Inlined by the verifier into one load for fentry and fexit. */
static __always_inline __u64 iommutop_func_ip(void *ctx)
{
	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_get_func_ip))
		return bpf_get_func_ip(ctx);
	return 0;
}

/* The identity of a call as the programs of each kind see it. A kretprobe runs after the function
 * returned: on x86-64 its stack pointer is one word above where the kprobe saw it, the return
 * address the call pushed (checked in the lab on 5.10 and 7.3); arm64's call keeps the return
 * address in the link register, and the stack pointer comes back where it was (checked on arm64
 * 6.1). A kretprobe has no arguments, so kprobes give no tag. */
#if defined(__TARGET_ARCH_arm64)
#define IOMMUTOP_RETURN_ADDRESS_ON_STACK 0
#else
#define IOMMUTOP_RETURN_ADDRESS_ON_STACK 8
#endif
#define IOMMUTOP_FENTRY_CALL(ctx)                                                                  \
	((struct iommutop_call){.at = (__u64)(ctx), .func = iommutop_func_ip(ctx)})
#define IOMMUTOP_FENTRY_CALL_TAGGED(ctx, tag_value)                                                \
	((struct iommutop_call){                                                                   \
	    .at = (__u64)(ctx), .tag = (__u64)(tag_value), .func = iommutop_func_ip(ctx)})
/* A kprobe's function is where it was hit (each function's own, whatever the kprobe's kind). */
#define IOMMUTOP_KPROBE_CALL(ctx)                                                                  \
	((struct iommutop_call){.at = PT_REGS_SP((struct pt_regs *)(ctx)),                         \
				.func = PT_REGS_IP((struct pt_regs *)(ctx))})
#define IOMMUTOP_KRETPROBE_CALL(ctx)                                                               \
	((struct iommutop_call){.at = PT_REGS_SP((struct pt_regs *)(ctx)) -                        \
				      IOMMUTOP_RETURN_ADDRESS_ON_STACK})
/* A call on an IOMMU-side object, its first argument (see iommutop_key_of_owner). */
#define IOMMUTOP_OWNED_CALL(ctx)                                                                   \
	((struct iommutop_call){                                                                   \
	    .at = (__u64)(ctx), .owner = ((__u64 *)(ctx))[0], .func = iommutop_func_ip(ctx)})
#define IOMMUTOP_OWNED_KPROBE_CALL(ctx)                                                            \
	((struct iommutop_call){.at = PT_REGS_SP((struct pt_regs *)(ctx)),                         \
				.owner = PT_REGS_PARM1((struct pt_regs *)(ctx)),                   \
				.func = PT_REGS_IP((struct pt_regs *)(ctx))})
/* A call that spans several functions (IOMMUTOP_ENTER_SPANNING), known by the object both its ends
 * are passed. */
#define IOMMUTOP_SPANNING_CALL(object) ((struct iommutop_call){.at = (__u64)(object)})

/* Frame flags (IOMMUTOP_FRAME_*): abi.h. */

/* struct iommutop_frame and struct iommutop_inflight are in abi.h: user space reads the frames
 * still open when a recording ends. */

#endif
