/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Floor 2, stacks and frames.
 *
 * Which context a program runs in: a task's (on its kernel stack) or an interrupt's, and whether
 * the CPU serves an interrupt by its preempt count (docs/tracker.md).
 */
#ifndef IOMMUTOP_CONTEXT_BPF_H
#define IOMMUTOP_CONTEXT_BPF_H

#include "frame.bpf.h"

/* Where each CPU's preempt count is, from /proc/kallsyms (0: not found): the address of
 * __per_cpu_offset[] and the per-CPU symbol that holds the count, __preempt_count, or pcpu_hot
 * (6.2-6.14), a struct whose field it is. */
const volatile __u64 iommutop_per_cpu_offsets __weak = 0;
const volatile __u64 iommutop_preempt_count_at __weak = 0;
const volatile __u32 iommutop_preempt_count_in_pcpu_hot __weak = 0;

struct pcpu_hot___iommutop {
	int preempt_count;
} __attribute__((preserve_access_index));

/* include/linux/preempt.h: what in_task() excludes (NMI_MASK | HARDIRQ_MASK | SOFTIRQ_OFFSET). */
#define IOMMUTOP_NOT_IN_TASK (0x00f00000 | 0x000f0000 | 0x00000100)

/* Whether the program runs on the kernel stack at stack (the current task's: task context,
 * softirqs run by local_bh_enable included) rather than on an interrupt stack. ctx, built by the
 * trampoline, kprobe or tracepoint that runs the program, lies on the stack of the context it
 * runs in. */
static __always_inline int iommutop_ctx_on_stack(const void *ctx, unsigned long stack)
{
	unsigned long end = stack + iommutop_kernel_stack_size, where = (unsigned long)ctx;

	/* The verifier refuses arithmetic on a context pointer but lets a program loaded with
	 * CAP_PERFMON compare it with numbers: two comparisons, kept apart from clang's habit of
	 * folding a range check into one subtraction. */
	barrier_var(stack);
	barrier_var(end);
	if (where < stack)
		return 0;
	return where < end;
}

#ifdef IOMMUTOP_TASK_STACKS_HASHED
/* iommutop_ctx_on_stack of the current task's stack. */
static __always_inline int iommutop_in_task_context(const void *ctx)
{
	struct task_struct *task;

	/* A BTF task pointer (5.11+) reads its stack with a plain load; before, with a helper. The
	 * verifier never looks at the branch this kernel does not take. */
	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_get_current_task_btf)) {
		task = bpf_get_current_task_btf();
		return iommutop_ctx_on_stack(ctx, (unsigned long)task->stack);
	}
	task = (struct task_struct *)bpf_get_current_task();
	return iommutop_ctx_on_stack(ctx, (unsigned long)BPF_CORE_READ(task, stack));
}
#endif

/* Whether the CPU runs an interrupt (hard, soft or NMI) by its preempt count, as in_task() does.
 * The stack test above cannot see one that arrived in user mode: it runs on the interrupted
 * task's kernel stack (empty then, so the tracking is not misled). Whose work it is can be:
 * the filter and a process's own row ask this too. 0 when the count was not found. */
#if defined(IOMMUTOP_SELFTEST)
/* A test run's step says whether it runs as an interrupt that arrived in user mode
 * (ebpf/selftest/tracker.bpf.c). */
__u32 iommutop_selftest_in_interrupt SEC(".bss");

static __always_inline int iommutop_in_interrupt(void)
{
	return iommutop_selftest_in_interrupt != 0;
}
#elif defined(__TARGET_ARCH_arm64)
/* arm64 keeps the count in the current task's thread_info (THREAD_INFO_IN_TASK), not per CPU;
 * its low word is the count, the high one the need-resched flag. */
static __always_inline int iommutop_in_interrupt(void)
{
	struct task_struct *task = bpf_get_current_task_btf();

	return (task->thread_info.preempt_count & IOMMUTOP_NOT_IN_TASK) != 0;
}
#else
static __always_inline int iommutop_in_interrupt(void)
{
	__u64 at = iommutop_preempt_count_at, offset = 0;
	__u32 cpu = bpf_get_smp_processor_id(), field;
	int count = 0;

	if (!iommutop_per_cpu_offsets || !at)
		return 0;
	if (iommutop_preempt_count_in_pcpu_hot) {
		/* Only relocated (and only reachable) where pcpu_hot exists. */
		field = bpf_core_field_offset(struct pcpu_hot___iommutop, preempt_count);
		barrier_var(field);
		at += field;
	}
	if (bpf_probe_read_kernel(
		&offset, sizeof(offset),
		(const void *)(iommutop_per_cpu_offsets + (__u64)cpu * sizeof(__u64))))
		return 0;
	if (bpf_probe_read_kernel(&count, sizeof(count), (const void *)(at + offset)))
		return 0;
	return (count & IOMMUTOP_NOT_IN_TASK) != 0;
}
#endif

#endif
