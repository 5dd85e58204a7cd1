/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Floor 4, the tracker.
 *
 * Which role a copy of a timed program plays (abi.h, IOMMUTOP_ROLE_LEAD): the lead, as built, or
 * an understudy, the same instructions loaded again with the role's one instruction patched by
 * the loader (loader/src/calibration/role.rs). The verifier sees a constant either way, and walks
 * only the role's own branches.
 */
#ifndef IOMMUTOP_ROLE_BPF_H
#define IOMMUTOP_ROLE_BPF_H

#include <bpf/bpf_helpers.h>
#include "iommutop/abi.h"

#ifdef IOMMUTOP_SELFTEST
/* The role a test run's step plays (ebpf/selftest/tracker.bpf.c sets it before each). */
__u32 iommutop_selftest_understudy SEC(".bss");

static __always_inline int iommutop_is_understudy(void)
{
	return iommutop_selftest_understudy != 0;
}
#else
/* Whether this copy is an understudy. The asm keeps the constant out of the compiler's hands: it
 * is one `r = IOMMUTOP_ROLE_LEAD` instruction wherever it is inlined, which the loader finds. */
static __always_inline int iommutop_is_understudy(void)
{
	__u64 role;

	asm volatile("%[role] = %[lead]" : [role] "=r"(role) : [lead] "i"(IOMMUTOP_ROLE_LEAD));
	return role == IOMMUTOP_ROLE_UNDERSTUDY;
}
#endif

#endif
