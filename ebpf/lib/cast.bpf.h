/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Floor 1, maps and counters.
 *
 * Reads of kernel objects whose pointers are plain numbers (kprobe and multi-function programs'
 * arguments): IOMMUTOP_FIELD(ptr, TYPE, field) is BPF_CORE_READ(ptr, field), a helper call, or,
 * in a compilation unit that defines IOMMUTOP_CAST_READS (ebpf/progs/multi.bpf.c, loaded by our
 * own loader), a load through the pointer cast to its type with the kfunc bpf_rdonly_cast, which
 * the verifier replaces with a register move: the load becomes one that cannot fault (as an
 * fentry program's load through a typed argument), at one instruction. See IOMMUTOP_CAST_MARK in
 * abi.h for how the call gets its BTF ids.
 */
#ifndef IOMMUTOP_CAST_BPF_H
#define IOMMUTOP_CAST_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include "iommutop/abi.h"

/* The C type of each enum iommutop_cast_type. */
#define IOMMUTOP_CTYPE_DEVICE struct device
#define IOMMUTOP_CTYPE_SCATTERLIST struct scatterlist
#define IOMMUTOP_CTYPE_SG_TABLE struct sg_table
#define IOMMUTOP_CTYPE_IOVA_DOMAIN struct iova_domain
#define IOMMUTOP_CTYPE_IOTLB_GATHER struct iommu_iotlb_gather

#ifdef IOMMUTOP_CAST_READS
/* bpf_rdonly_cast(obj, <the kernel's id of type>), as the loader completes it. */
static __always_inline const void *iommutop_rdonly_cast(const void *obj, __u32 type)
{
	register const void *arg asm("r1") = obj;
	register const void *cast asm("r0");

	asm volatile("r2 = %[type]\n\t"
		     ".8byte %[call]"
		     : "=r"(cast), "+r"(arg)
		     : [type] "i"(IOMMUTOP_CAST_MARK | type),
		       /* BPF_JMP | BPF_CALL, src_reg BPF_PSEUDO_KFUNC_CALL, imm the mark */
		       [call] "i"(((__u64)IOMMUTOP_CAST_CALL_MARK << 32) | 0x2085)
		     : "r2", "r3", "r4", "r5");
	return cast;
}

#define IOMMUTOP_TYPED(ptr, TYPE)                                                                  \
	((const IOMMUTOP_CTYPE_##TYPE *)iommutop_rdonly_cast((const void *)(ptr),                  \
							     IOMMUTOP_CAST_##TYPE))
#define IOMMUTOP_FIELD(ptr, TYPE, field) (IOMMUTOP_TYPED(ptr, TYPE)->field)
#else
#define IOMMUTOP_FIELD(ptr, TYPE, field) BPF_CORE_READ((IOMMUTOP_CTYPE_##TYPE *)(ptr), field)
#endif

/* The low 32 bits of a pointer, as a number: a pointer loaded through a cast is one to the
 * verifier, which refuses to spill part of it to the stack; a 32-bit move makes it a number (for
 * root, which may see kernel addresses). */
static __always_inline __u32 iommutop_pointer_bits(const void *pointer)
{
	__u32 bits = (__u32)(__u64)pointer;

	asm volatile("%[bits] = %[bits]" : [bits] "+w"(bits));
	return bits;
}

#endif
